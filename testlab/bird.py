"""A BIRD 2 peer for tests and benchmarks: own config, own control socket, in a namespace.

DOC: `Bird(ns, workdir, config)` runs ``bird -f -c CONF -s SOCK`` inside network namespace `ns`
(``ip netns exec``), so several BIRDs can run side by side, each with its own control socket
(`Bird.cmd` runs ``birdc -s SOCK``); ``recovery=True`` adds ``-R`` (start in graceful-restart
recovery, after ``birdc graceful restart``). `reconfigure(text)` rewrites the file and runs ``birdc
configure``; `protocol_state(name)` reads ``show protocols`` (``Established``, ``Active``, ...);
`routes(table)` returns ``show route all`` text. Stop with `close()` (SIGTERM, then SIGKILL).

`bgp_protocol()` writes one ``protocol bgp`` block for the common cases of the tests (channel
per family, export filter body, graceful restart, MD5 password, passive, ports).

The control socket without a birdc process (what benchmarks use, so that polling costs no
fork/exec on the measured cores): `connect(path)`, `read_reply(conn)`, `command(path, text)`;
`Bird.command`, `Bird.route_count()`, `Bird.timed_configure(text)` (the moment ``configure`` was
sent and answered), `Bird.established_at(name)` (session-up times from a trace log written with
``timeformat log "%F %T.%6f"`` and ``debug { states }``). `Poker` sends ``show status`` to BIRDs
every few tens of ms: BIRD can hold back its last UPDATE for up to ~3 s while idle (design.md,
section 5), and a request on its control socket wakes it up. `ImportCounter` polls one BIRD's
imported-route count of a protocol on a kept-open connection (pokes others meanwhile) and tells
when it reaches a target.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from datetime import datetime
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

    def command(self, text: str) -> str:
        """One request on the control socket, without a birdc process."""
        return command(str(self.sock), text)

    def route_count(self) -> int:
        """Routes in the master table (``show route count``), -1 when unreadable."""
        m = re.search(r"(\d+) of (\d+) routes", self.command("show route count"))
        return int(m.group(1)) if m else -1

    def timed_configure(self, config: str) -> tuple[float, float]:
        """Rewrite the config and send ``configure`` on the control socket: wall-clock times of the
        request and of BIRD's answer."""
        self.conf.write_text(config)
        conn = connect(str(self.sock))
        try:
            t_sent = time.time()
            conn.sendall(b"configure\n")
            reply = read_reply(conn).decode(errors="replace")
            t_answered = time.time()
        finally:
            conn.close()
        if "Reconfigured" not in reply and "Reconfiguration in progress" not in reply:
            raise RuntimeError(f"birdc configure: {reply}")
        return t_sent, t_answered

    def established_at(self, protocol: str) -> list[float]:
        """Wall-clock times at which `protocol` reached Established, from the trace log (needs
        ``timeformat log "%F %T.%6f"`` and ``debug { states }``)."""
        out = []
        with open(self.log, errors="replace") as f:
            for line in f:
                if f"{protocol}: State changed to up" in line:
                    stamp = " ".join(line.split()[:2])
                    out.append(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp())
        return out

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


# ------------------------------------------------------------------------------------------------
# the control socket, without birdc


def read_reply(conn: socket.socket, buf: bytearray | None = None) -> bytes:
    """Read one complete control-socket reply: its last line is ``DDDD text`` (continuation lines
    use ``DDDD-`` or a leading space). `buf` is reused scratch space."""
    buf = bytearray() if buf is None else buf
    buf.clear()
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("BIRD closed its control socket")
        buf += chunk
        end = buf.rfind(b"\n", 0, len(buf) - 1) + 1
        if buf.endswith(b"\n") and re.match(rb"\d{4} ", buf[end:]):
            return bytes(buf)


def connect(path: str) -> socket.socket:
    """A control connection, past BIRD's greeting ("0001 BIRD ... ready.")."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(30)
    c.connect(path)
    read_reply(c)
    return c


def command(path: str, text: str) -> str:
    c = connect(path)
    try:
        c.sendall(text.encode() + b"\n")
        return read_reply(c).decode(errors="replace")
    finally:
        c.close()


def poke(conns: list[socket.socket], buf: bytearray | None = None) -> None:
    """``show status`` on each open control connection (what wakes an idle BIRD up)."""
    for c in conns:
        c.sendall(b"show status\n")
        read_reply(c, buf)


class _Talker(threading.Thread):
    """A thread that talks to BIRDs on kept-open control connections (`talk`) until `close()`;
    what stopped it early is in `error` (reported with the result; the run goes on)."""

    def __init__(self, name: str, socks: list[str]) -> None:
        super().__init__(daemon=True, name=name)
        self.socks = socks
        self.stop = threading.Event()
        self.error = ""

    def talk(self, conns: list[socket.socket], buf: bytearray) -> None:
        raise NotImplementedError

    def run(self) -> None:
        conns: list[socket.socket] = []
        try:
            for path in self.socks:
                conns.append(connect(path))
            self.talk(conns, bytearray())
        except Exception as exc:  # noqa: BLE001  (reported with the result)
            self.error = repr(exc)
        finally:
            for c in conns:
                c.close()

    def close(self) -> None:
        self.stop.set()
        self.join(35)


class Poker(_Talker):
    """Sends ``show status`` on each BIRD control socket in `socks` every `interval` seconds;
    `count`: rounds done."""

    def __init__(self, socks: list[str], interval: float = 0.02) -> None:
        super().__init__("bird-poker", list(socks))
        self.interval = interval
        self.count = 0

    def talk(self, conns: list[socket.socket], buf: bytearray) -> None:
        while not self.stop.wait(self.interval):
            poke(conns, buf)
            self.count += 1


class ImportCounter(_Talker):
    """Polls ``show protocols all PROTOCOL`` ("Routes: N imported", O(1) in BIRD, no table walk)
    on a kept-open connection to `sock` every `interval` seconds, and sends ``show status`` to each
    of `poke` every `poke_every` polls. `expect(n)` arms it; `wait(timeout)` returns the wall-clock
    time a reply first showed >= n imported routes. `on_up()` is called when the session is first
    seen Established (`up_seen`: when). `close()` returns ``polls`` and ``poll_error``."""

    def __init__(self, sock: str, poke: list[str] = (), on_up=None, *, protocol: str = "n4",
                 interval: float = 0.002, poke_every: int = 10) -> None:
        super().__init__("import-counter", [sock, *poke])
        self.on_up = on_up
        self.query = f"show protocols all {protocol}\n".encode()
        self.interval, self.poke_every = interval, poke_every
        self.lock = threading.Lock()
        self.reached = threading.Event()
        self.target: int | None = None
        self.t_reached = self.up_seen = 0.0
        self.count = self.polls = 0

    def expect(self, n: int) -> None:
        with self.lock:
            self.reached.clear()
            self.t_reached = 0.0
            self.target = n

    def wait(self, timeout: float) -> float:
        if not self.reached.wait(timeout):
            raise TimeoutError(f"receiver has {self.count} routes, expected {self.target}, after {timeout}s"
                               + (f" (poller: {self.error})" if self.error else ""))
        return self.t_reached

    def talk(self, conns: list[socket.socket], buf: bytearray) -> None:
        recv, pokes = conns[0], conns[1:]
        imported = re.compile(rb"Routes:\s+(\d+) imported")
        while not self.stop.wait(self.interval):
            recv.sendall(self.query)
            reply = read_reply(recv, buf)
            t = time.time()
            m = imported.search(reply)
            self.count = count = int(m.group(1)) if m else 0
            self.polls += 1
            if not self.up_seen and b"Established" in reply:
                self.up_seen = t
                if self.on_up is not None:
                    self.on_up()
            with self.lock:
                if self.target is not None and not self.reached.is_set() and count >= self.target:
                    self.t_reached = t
                    self.reached.set()
            if pokes and self.polls % self.poke_every == 0:
                poke(pokes, buf)

    def close(self) -> dict:
        super().close()
        return {"polls": self.polls, "poll_error": self.error}
