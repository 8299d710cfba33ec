"""An FRR peer (Debian ``frr`` 8.4: zebra, staticd, bgpd) for tests: own directory, in a namespace.

DOC: `Frr(ns, workdir, bgpd_config, staticd_config)` runs ``zebra``, ``staticd`` and ``bgpd``
inside network namespace `ns` (``ip netns exec``), each with explicit paths in a directory of its
own: its config file (``-f``), pid file (``-i``), the zebra API socket (``-z``), the vty sockets
(``--vty_socket``), a log file (``--log file:``), TCP vty off (``-P 0``), as user ``frr`` (``-u frr
-g frr``: FRR refuses a user outside its vty group ``frrvty``, which root is not in). That
directory is created under /tmp (user ``frr`` cannot reach pytest's tmp directories), and
`close()` copies its configs and logs to `workdir` and removes it. Nothing uses the system's
/etc/frr or /var/run/frr, so several instances run side by side. `vtysh(*commands)` runs ``vtysh --vty_socket DIR --config_dir DIR -c ...``; `show(cmd)`
parses a ``... json`` command; `configure(*lines)` applies configuration lines at run time
(``configure terminal``). `neighbor(addr)` is ``show bgp neighbors ADDR json`` for one peer,
`established(addr)`, `route(prefix)` is ``show bgp ipv4|ipv6 unicast PREFIX json`` (None when
absent). `stop_bgpd(sig)` / `start_bgpd()` restart bgpd alone (zebra and staticd stay). Stop with
`close()` (SIGTERM, then SIGKILL, for every daemon). Two in one namespace need distinct
``bgp_port`` (bgpd's ``-p``).

`bgp_config()` writes ``router bgp`` for the common cases of the tests (neighbors with their
families, ``network`` statements per family, graceful restart, MD5 password, timers, route-maps
in/out, prepend route-maps); `static_config()` the blackhole routes the ``network`` statements
need (FRR checks that a network is in its RIB before announcing it).
"""

from __future__ import annotations

import ipaddress
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

FRR_DIR = os.environ.get("FRR_DIR", "/usr/lib/frr")
VTYSH = os.environ.get("VTYSH", "/usr/bin/vtysh")
FRR_USER = os.environ.get("FRR_USER", "frr")
DAEMONS = ("zebra", "staticd", "bgpd")


def available() -> bool:
    return all(os.access(f"{FRR_DIR}/{d}", os.X_OK) for d in DAEMONS) and os.access(VTYSH, os.X_OK)


class Frr:
    def __init__(self, ns: str | None, workdir: str | Path, bgpd_config: str, staticd_config: str = "",
                 *, hostname: str = "frr", bgp_port: int | None = None) -> None:
        self.ns = ns
        self.bgp_port = bgp_port  # bgpd's listening port (-p), 179 unless given
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        # the daemons drop to user frr (root is not in the vty group frrvty, which FRR insists on):
        # their files live in a directory of their own under /tmp that frr can reach, copied to
        # `workdir` and removed by close()
        self.dir = Path(tempfile.mkdtemp(prefix="ra-frr-"))
        pw = pwd.getpwnam(FRR_USER)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o750)
        self.hostname = hostname
        self.zsock = self.dir / "zserv.api"
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, object] = {}
        (self.dir / "vtysh.conf").write_text("")  # vtysh reads this from --config_dir
        self.conf("zebra").write_text(f"hostname {hostname}\n")
        self.conf("staticd").write_text(f"hostname {hostname}\n{staticd_config}")
        self.conf("bgpd").write_text(f"hostname {hostname}\n{bgpd_config}")
        for f in self.dir.iterdir():
            f.chmod(0o644)  # whatever the umask: the daemons read them as frr
        try:
            for daemon in DAEMONS:
                self._start(daemon)
        except BaseException:
            self.close()
            raise

    # ---- processes ----
    def conf(self, daemon: str) -> Path:
        return self.dir / f"{daemon}.conf"

    def log(self, daemon: str = "bgpd") -> Path:
        return self.dir / f"{daemon}.log"

    def _start(self, daemon: str, timeout: float = 20) -> None:
        argv = [f"{FRR_DIR}/{daemon}", "-f", str(self.conf(daemon)), "-i", str(self.dir / f"{daemon}.pid"),
                "-z", str(self.zsock), "--vty_socket", str(self.dir), "-P", "0", "-u", FRR_USER, "-g", FRR_USER,
                "--log", f"file:{self.log(daemon)}", "--log-level", "debugging" if daemon == "bgpd" else "info"]
        if daemon == "bgpd" and self.bgp_port is not None:
            argv += ["-p", str(self.bgp_port)]
        if ns := self.ns:
            argv = ["ip", "netns", "exec", ns, *argv]
        out = self._logs.get(daemon) or open(self.dir / f"{daemon}.out", "ab")
        self._logs[daemon] = out
        vty = self.dir / f"{daemon}.vty"
        if vty.exists():
            vty.unlink()
        self.procs[daemon] = proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not (vty.exists() and self._answers(daemon)):
            if proc.poll() is not None:
                raise RuntimeError(f"{daemon} exited with {proc.returncode}: "
                                   f"{(self.dir / f'{daemon}.out').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{daemon} vty socket did not answer")
            time.sleep(0.05)

    def _answers(self, daemon: str) -> bool:
        r = subprocess.run(self._vtysh_argv("-d", daemon, "-c", "show version"), capture_output=True,
                           text=True, timeout=10)
        return r.returncode == 0 and "FRRouting" in r.stdout

    def stop_bgpd(self, sig: int = signal.SIGTERM) -> None:
        self._stop("bgpd", sig)

    def start_bgpd(self) -> None:
        self._start("bgpd")

    def _stop(self, daemon: str, sig: int) -> None:
        proc = self.procs.get(daemon)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def close(self) -> None:
        for daemon in reversed(DAEMONS):
            self._stop(daemon, signal.SIGTERM)
        for f in self._logs.values():
            f.close()
        self._logs.clear()
        if self.dir.exists():
            for f in self.dir.iterdir():
                if f.suffix in (".log", ".out", ".conf"):
                    shutil.copy(f, self.workdir / f.name)
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Frr":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- vtysh ----
    def _vtysh_argv(self, *args: str) -> list[str]:
        return [VTYSH, "--vty_socket", str(self.dir), "--config_dir", str(self.dir), *args]

    def vtysh(self, *commands: str, daemon: str | None = None, check: bool = True) -> str:
        argv = self._vtysh_argv(*(("-d", daemon) if daemon else ()))
        for c in commands:
            argv += ["-c", c]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        if check and (r.returncode != 0 or "% " in r.stdout):
            raise RuntimeError(f"vtysh {commands}: rc={r.returncode} {r.stdout}{r.stderr}")
        return r.stdout

    def show(self, command: str):
        """A ``show ... json`` command of bgpd, parsed."""
        out = self.vtysh(command if command.endswith(" json") else command + " json", daemon="bgpd", check=False)
        try:
            return json.loads(out) if out.strip() else {}
        except json.JSONDecodeError:
            return {}

    def configure(self, *lines: str) -> str:
        """Configuration lines at run time, e.g. ``configure("router bgp 65001",
        "address-family ipv4 unicast", "no network 192.0.2.0/24")``."""
        return self.vtysh("configure terminal", *lines)

    # ---- BGP state ----
    def neighbor(self, address: str) -> dict:
        return self.show(f"show bgp neighbors {address} json").get(address, {})

    def established(self, address: str) -> bool:
        return self.neighbor(address).get("bgpState") == "Established"

    def route(self, prefix: str) -> dict | None:
        """``show bgp ipv4|ipv6 unicast PREFIX json`` for exactly `prefix`, None when FRR has no path."""
        fam = "ipv6" if ":" in prefix else "ipv4"
        out = self.show(f"show bgp {fam} unicast {prefix} json")
        if not out.get("paths") or out.get("prefix") != str(ipaddress.ip_network(prefix)):
            return None
        return out

    def received(self, address: str, family: int = 4) -> dict:
        """The routes FRR accepted from `address` (``show bgp ... neighbors ADDR routes json``)."""
        out = self.show(f"show bgp ipv{family} unicast neighbors {address} routes json")
        return out.get("routes", {}) or {}

    def advertised(self, address: str, family: int = 4) -> dict:
        out = self.show(f"show bgp ipv{family} unicast neighbors {address} advertised-routes json")
        return out.get("advertisedRoutes", {}) or {}


# ------------------------------------------------------------------------------------------------
# configuration


def static_config(static4=(), static6=()) -> str:
    """Blackhole routes in staticd (the RIB entries the ``network`` statements announce)."""
    return "".join([*(f"ip route {p} blackhole\n" for p in static4),
                    *(f"ipv6 route {p} blackhole\n" for p in static6)])


def neighbor_lines(address: str, remote_as: int, *, password: str | None = None, hold_time: int = 9,
                   keepalive: int = 3, passive: bool = False, extra: tuple[str, ...] = ()) -> list[str]:
    lines = [
        f" neighbor {address} remote-as {remote_as}",
        f" neighbor {address} timers {keepalive} {hold_time}",
        f" neighbor {address} timers connect 1",
        f" neighbor {address} advertisement-interval 0",
    ]
    if password is not None:
        lines.append(f" neighbor {address} password {password}")
    if passive:
        lines.append(f" neighbor {address} passive")
    lines += [f" neighbor {address} {e}" for e in extra]
    return lines


def bgp_config(
    asn: int,
    router_id: str,
    neighbors: dict[str, int],
    *,
    networks4=(),
    networks6=(),
    graceful_restart: bool = True,
    restart_time: int = 120,
    password: str | None = None,
    hold_time: int = 9,
    route_map_out: dict[str, str] | None = None,
    route_map_in: dict[str, str] | None = None,
    neighbor_extra: dict[str, tuple[str, ...]] | None = None,
    extra: str = "",
) -> str:
    """``router bgp ASN`` with `neighbors` (address -> remote AS), each activated in the family of its
    address only; `networks4`/`networks6` announced with ``network``; route-maps by neighbor
    (their definitions go in `extra`, written before ``router bgp``). No policy is required for eBGP
    (``no bgp ebgp-requires-policy``), nothing waits for the RIB install (``no bgp
    suppress-fib-pending`` is the default)."""
    route_map_out, route_map_in = route_map_out or {}, route_map_in or {}
    neighbor_extra = neighbor_extra or {}
    lines = [extra.rstrip("\n")] if extra else []
    lines += [
        f"router bgp {asn}",
        f" bgp router-id {router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        " bgp bestpath as-path multipath-relax",
    ]
    if graceful_restart:
        lines += [" bgp graceful-restart", f" bgp graceful-restart restart-time {restart_time}"]
    for addr, remote_as in neighbors.items():
        lines += neighbor_lines(addr, remote_as, password=password, hold_time=hold_time,
                                extra=neighbor_extra.get(addr, ()))
    for fam, nets in ((4, networks4), (6, networks6)):
        lines.append(f" address-family ipv{fam} unicast")
        lines += [f"  network {p}" for p in nets]
        for addr in neighbors:
            if ipaddress.ip_address(addr).version == fam:
                lines.append(f"  neighbor {addr} activate")
                if addr in route_map_out:
                    lines.append(f"  neighbor {addr} route-map {route_map_out[addr]} out")
                if addr in route_map_in:
                    lines.append(f"  neighbor {addr} route-map {route_map_in[addr]} in")
        lines.append(" exit-address-family")
    lines.append("exit")
    return "\n".join(lines) + "\n"


def prepend_route_map(name: str, *asns: int, unless: tuple[str, ...] = ()) -> str:
    """A route-map that prepends `asns` (``set as-path prepend``) to every route but those of
    `unless` (exact prefixes, passed unchanged)."""
    out = []
    if unless:
        out += [f"ip prefix-list {name}-PLAIN seq {5 * (i + 1)} permit {p}" for i, p in enumerate(unless)]
        out += [f"route-map {name} permit 5", f" match ip address prefix-list {name}-PLAIN", "exit"]
    out += [f"route-map {name} permit 10", f" set as-path prepend {' '.join(map(str, asns))}", "exit"]
    return "\n".join(out) + "\n"
