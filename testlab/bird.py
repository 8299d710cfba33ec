"""A BIRD 2 peer for tests and benchmarks: own config, own control socket, in a namespace.

DOC: `Bird(ns, workdir, config)` runs ``bird -f -c CONF -s SOCK`` inside network namespace `ns`
(``ip netns exec``), so several BIRDs can run side by side, each with its own control socket
(`Bird.cmd` runs ``birdc -s SOCK``); ``recovery=True`` adds ``-R`` (start in graceful-restart
recovery, after ``birdc graceful restart``). `reconfigure(text)` rewrites the file and runs ``birdc
configure``; `protocol_state(name)` reads ``show protocols`` (``Established``, ``Active``, ...);
`routes(table)` returns ``show route all`` text. Stop with `close()` (SIGTERM, then SIGKILL).

`bgp_protocol()` writes one ``protocol bgp`` block for the common cases of the tests (channel
per family, export filter body, graceful restart, MD5 password, passive, ports).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

BIRD = os.environ.get("BIRD", "/usr/sbin/bird")
BIRDC = os.environ.get("BIRDC", "/usr/sbin/birdc")


class Bird:
    def __init__(self, ns: str | None, workdir: str | Path, config: str, *, recovery: bool = False) -> None:
        self.ns = ns
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf = self.dir / "bird.conf"
        self.sock = self.dir / "bird.ctl"
        self.log = self.dir / "bird.log"
        self.conf.write_text(config)
        argv = [BIRD, "-f", "-c", str(self.conf), "-s", str(self.sock), "-P", str(self.dir / "bird.pid")]
        if recovery:
            argv.append("-R")  # graceful restart recovery: OPENs carry the R bit
        if ns:
            argv = ["ip", "netns", "exec", ns, *argv]
        self._logf = open(self.log, "ab")
        self.proc = subprocess.Popen(argv, stdout=self._logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self.ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"bird exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError("bird control socket did not answer")
            time.sleep(0.02)

    def cmd(self, *args: str, check: bool = True) -> str:
        r = subprocess.run([BIRDC, "-s", str(self.sock), *args], capture_output=True, text=True, timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError(f"birdc {' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def ready(self) -> bool:
        if not self.sock.exists():
            return False
        return "BIRD" in self.cmd("show", "status", check=False)

    def reconfigure(self, config: str) -> str:
        self.conf.write_text(config)
        out = self.cmd("configure")
        if "Reconfigured" not in out and "Reconfiguration in progress" not in out:
            raise RuntimeError(f"birdc configure: {out}")
        return out

    def protocol_state(self, name: str) -> str:
        """The Info column of ``show protocols NAME`` (e.g. ``Established``), or "" if unknown."""
        for line in self.cmd("show", "protocols", name, check=False).splitlines():
            parts = line.split()
            if parts and parts[0] == name:
                return " ".join(parts[5:]) if len(parts) > 5 else ""
        return ""

    def routes(self, table: str = "master4") -> str:
        return self.cmd("show", "route", "all", "table", table)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._logf.close()

    def __enter__(self) -> "Bird":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def bgp_protocol(
    name: str,
    *,
    local: str,
    local_as: int,
    neighbor: str,
    neighbor_as: int,
    families: tuple[int, ...] = (4,),
    export: dict[int, str] | None = None,
    import_all: bool = True,
    hold_time: int = 9,
    graceful_restart: bool = True,
    password: str | None = None,
    passive: bool = False,
    port: int | None = None,
    local_port: int | None = None,
    extra: str = "",
    channel_extra: dict[int, str] | None = None,
) -> str:
    """One ``protocol bgp`` block. `export[family]` is the body of the channel's export filter
    (without ``accept``, which is added); no entry: ``export none``."""
    export = export or {}
    channel_extra = channel_extra or {}
    lines = [
        f"protocol bgp {name} {{",
        f"    local {local}{f' port {local_port}' if local_port else ''} as {local_as};",
        f"    neighbor {neighbor}{f' port {port}' if port else ''} as {neighbor_as};",
        f"    hold time {hold_time};",
        "    connect delay time 1;",
        "    connect retry time 1;",
        "    error wait time 1, 5;",
        f"    graceful restart {'on' if graceful_restart else 'off'};",
    ]
    if password is not None:
        lines.append(f'    password "{password}";')
    if passive:
        lines.append("    passive on;")
    if extra:
        lines.append(extra)
    for fam in families:
        body = export.get(fam)
        exp = f"export filter {{ {body} accept; }};" if body is not None else "export none;"
        lines += [
            f"    ipv{fam} {{",
            f"        import {'all' if import_all else 'none'};",
            f"        {exp}",
            *( [f"        {channel_extra[fam]}"] if fam in channel_extra else [] ),
            "    };",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def base_config(router_id: str, static4: list[str] = (), static6: list[str] = (), extra: str = "") -> str:
    """Header, device protocol and static protocols ``s4``/``s6`` with blackhole routes."""
    out = [
        f"router id {router_id};",
        "log stderr all;",
        "protocol device { scan time 1; }",
    ]
    if static4:
        out.append("protocol static s4 { ipv4; " + " ".join(f"route {p} blackhole;" for p in static4) + " }")
    if static6:
        out.append("protocol static s6 { ipv6; " + " ".join(f"route {p} blackhole;" for p in static6) + " }")
    if extra:
        out.append(extra)
    return "\n".join(out) + "\n"
