"""Lab plumbing for bench/chaos.py: a BIRD 2 ToR and the real agent in two namespaces.

DOC: `ChaosLab` builds namespace `tor` (BIRD, 10.0.0.1, AS 65001) and namespace `node` (the agent,
10.0.0.254, AS 65000) joined by the veth pair up0/tor0, plus a spare veth `flap0` in `node` for
link flaps, on top of `testlab.netns` (namespaces with IPv6 DAD off, `settle`) and `testlab.bird`
(`Bird`, `bgp_protocol`). Everything is torn down by `close()`, which the scenarios call from a
`finally` (namespaces are also context managers of `testlab.netns.namespace`).

Talking to the namespace without a process per request: `NsWorker` is a thread that has entered
the namespace with setns(2) (only that thread moves), so the HTTP requests to the agent's API
(127.0.0.1:9180 inside `node`) and the netlink dumps that count the kernel's routes run in the
benchmark's own process. `kernel_routes()` dumps IPv4 table main once and returns a Counter of
the proto-201 prefixes (a prefix counted twice is a duplicate) and the number of foreign routes.

Pacing and pokes: `Churn` toggles one BIRD static protocol with ``birdc disable/enable`` every few
seconds (a sleep that paces the churn, not a synchronisation); `Poker` sends ``show status`` on a
kept-open BIRD control connection every 50 ms (BIRD holds back its last UPDATE up to ~3 s when
idle, design.md section 5). `RouteMonitor` (testlab.monitor) is ``ip monitor route`` with the marker routine of
netns-tests/conftest.py (every event before `mark()` returned has been read).
"""

from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import http.client
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from testlab import benchlab  # noqa: E402
from testlab.bird import Bird, bgp_protocol  # noqa: E402
from testlab.fibwatch import iter_messages, route_dst  # noqa: E402
from testlab.monitor import Monitor as RouteMonitor  # noqa: E402
from testlab.netns import ip, ip_json, namespace, settle, start_agent, wait_for  # noqa: E402

TOR_ADDR, NODE_ADDR = "10.0.0.1", "10.0.0.254"
TOR_AS, NODE_AS = 65001, 65000
PROTO = 201
RT_TABLE_MAIN = 254
API_PORT = 9180
TCP_MEM = "4096 1048576 67108864"
HOLD_TIME = 30
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def prefix_text(i: int) -> str:
    """The i-th /24 out of 11.0.0.0/8, 12.0.0.0/8, ... (as the other benchmarks)."""
    return f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24"


def foreign_text(i: int) -> str:
    """The i-th /32 out of 100.64.0.0/10: foreign routes, never announced by BIRD."""
    return f"100.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}/32"


# ------------------------------------------------------------------------------------------------
# a thread inside a namespace

def _enter_netns(ns: str) -> None:
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({ns}): {os.strerror(err)}")
    finally:
        os.close(fd)


class NsWorker:
    """One thread living in namespace `ns`; `call(fn, *args)` runs fn there and returns its result."""

    def __init__(self, ns: str, name: str = "ns") -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"{name}-{ns}",
                                                          initializer=_enter_netns, initargs=(ns,))

    def call(self, fn, *args, timeout: float | None = 120):
        return self.pool.submit(fn, *args).result(timeout)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def http_get(path: str, timeout: float = 5.0, port: int = API_PORT) -> tuple[int, str] | None:
    """GET http://127.0.0.1:PORT/PATH in the calling thread's namespace; None when no answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _nl_dump_raw() -> list[tuple[int, int, bytes]]:
    """(rtm_protocol, dst_len, RTA_DST bytes) of every IPv4 route in table main (one dump,
    repeated when the kernel flags it interrupted by concurrent changes)."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 1 << 25)  # SO_RCVBUFFORCE
        s.bind((0, 0))
        for attempt in range(5):
            req = struct.pack("=IHHII", 28, 26, 0x301, attempt + 1, 0) + struct.pack("=BBBBBBBBI", socket.AF_INET, *[0] * 8)
            s.send(req)  # RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP
            out: list[tuple[int, int, bytes]] = []
            intr = done = False
            while not done:
                buf = s.recv(1 << 20)
                for mtype, mflags, off, mlen in iter_messages(buf):
                    if mflags & 0x10:  # NLM_F_DUMP_INTR
                        intr = True
                    if mtype == 24 and buf[off + 20] == RT_TABLE_MAIN:  # RTM_NEWROUTE
                        out.append((buf[off + 21], buf[off + 17], route_dst(buf, off, mlen, b"\0\0\0\0")))
                    elif mtype == 3:  # NLMSG_DONE
                        done = True
                        break
                    elif mtype == 2:
                        raise OSError("netlink dump failed")
            if not intr:
                break
        return out
    finally:
        s.close()


def _nl_dump_v4() -> tuple[collections.Counter, int]:
    """(Counter of our proto's IPv4 prefixes in table main, number of other IPv4 routes there)."""
    ours: collections.Counter = collections.Counter()
    foreign = 0
    for proto, dst_len, dst in _nl_dump_raw():
        if proto == PROTO:
            ours[f"{socket.inet_ntoa(dst)}/{dst_len}"] += 1
        else:
            foreign += 1
    return ours, foreign


def _nl_count_v4(below: int) -> tuple[int, int]:
    """(our IPv4 routes in table main, how many of them are /24s with `prefix_text` index < below)."""
    total = low = 0
    base = 11 << 16
    for proto, dst_len, dst in _nl_dump_raw():
        if proto == PROTO:
            total += 1
            if dst_len == 24 and 0 <= int.from_bytes(dst[:3], "big") - base < below:
                low += 1
    return total, low


def _proc_rss_kib(pid: int | None) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return 0


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value} (and 'name' for unlabelled samples)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
        except ValueError:
            continue
    return out


def metric_sum(metrics: dict[str, float], name: str) -> float:
    """Sum of every sample of `name` (any labels); 0 when absent."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


# ------------------------------------------------------------------------------------------------
# BIRD

class Poker(threading.Thread):
    """`show status` on a kept-open BIRD control connection every `period` s (BIRD's idle stall)."""

    def __init__(self, sock: str, period: float = 0.05) -> None:
        super().__init__(daemon=True, name="bird-poker")
        self.sock, self.period = sock, period
        self.stop_ev = threading.Event()
        self.error = ""

    @staticmethod
    def _reply(conn: socket.socket) -> None:
        buf = b""
        while not re.search(rb"(?m)^\d{4} [^\n]*\n", buf):
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("BIRD closed its control socket")
            buf += chunk

    def run(self) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.settimeout(30)
                c.connect(self.sock)
                self._reply(c)
                while not self.stop_ev.wait(self.period):
                    c.sendall(b"show status\n")
                    self._reply(c)
        except Exception as exc:
            self.error = repr(exc)

    def close(self) -> None:
        self.stop_ev.set()
        self.join(35)


def static_block(name: str, prefixes: list[str], *, community_base: int | None = None,
                 disabled: bool = False) -> str:
    """A BIRD static protocol of blackholes; with `community_base`, the i-th route carries the
    community (community_base + i) split into two 16-bit halves (one attribute set per prefix)."""
    lines = [f"protocol static {name} {{", "  ipv4;"]
    if disabled:
        lines.append("  disabled yes;")
    for i, p in enumerate(prefixes):
        if community_base is None:
            lines.append(f"  route {p} blackhole;")
        else:
            c = community_base + i
            lines.append(f"  route {p} blackhole {{ bgp_community.add(({100 + (c >> 16)}, {c & 0xFFFF})); }};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def tor_config(statics: str) -> str:
    return (f"router id {TOR_ADDR};\nlog stderr all;\n"
            "protocol device { scan time 10; }\n" + statics
            + bgp_protocol("n4", local=TOR_ADDR, local_as=TOR_AS, neighbor=NODE_ADDR, neighbor_as=NODE_AS,
                           export={4: ""}, import_all=False, hold_time=HOLD_TIME, graceful_restart=True))


def bird_export(bird: Bird, protocol: str = "n4") -> set[str] | None:
    """The prefixes BIRD exports to `protocol` right now (``show route export``); None while the
    protocol's channel is down (BIRD answers "No valid tables")."""
    out = bird.cmd("show", "route", "export", protocol, check=False)
    if "No valid tables" in out:
        return None
    return {m.group(1) for m in re.finditer(r"(?m)^(\d+\.\d+\.\d+\.\d+/\d+)\s", out)}


def bird_routes_loaded(bird: Bird, n: int, timeout: float = 120) -> None:
    def loaded():
        m = re.search(r"(\d+) of (\d+) routes", bird.cmd("show", "route", "count"))
        return m and int(m.group(1)) >= n
    wait_for(loaded, timeout, 0.1, what=f"BIRD loading {n} routes")


class Churn(threading.Thread):
    """Toggle BIRD static protocol `proto` every `period` s (± 30 %) until stopped."""

    def __init__(self, bird: Bird, proto: str, period: float, seed: int = 1) -> None:
        super().__init__(daemon=True, name="churn")
        self.bird, self.proto, self.period = bird, proto, period
        self.enabled = True
        self.toggles = 0
        self.error = ""
        self.stop_ev = threading.Event()
        self.rng = random.Random(seed)

    def set(self, enabled: bool) -> None:
        self.bird.cmd("enable" if enabled else "disable", self.proto)
        self.enabled = enabled

    def run(self) -> None:
        try:
            while not self.stop_ev.wait(self.period * self.rng.uniform(0.7, 1.3)):  # pacing only
                self.set(not self.enabled)
                self.toggles += 1
        except Exception as exc:
            self.error = repr(exc)

    def close(self) -> None:
        self.stop_ev.set()
        self.join(30)


# ------------------------------------------------------------------------------------------------
# the lab

def agent_yaml(*, full_scan: int = 60, stale: int = 60, extra_docs: str = "") -> str:
    return benchlab.agent_yaml(fib={"fullScanSeconds": full_scan, "staleSeconds": stale},
                               hold_time=HOLD_TIME, extra_docs=extra_docs)


class ChaosLab:
    """Namespaces, the ToR BIRD and the agent of one scenario (see the module doc)."""

    def __init__(self, workdir: str, name: str) -> None:
        self.dir = Path(workdir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.confdir = self.dir / "config"
        self.confdir.mkdir(exist_ok=True)
        self.state = self.dir / "state"
        self.agent_log = str(self.dir / "agent.log")
        self.stack = ExitStack()
        self.bird: Bird | None = None
        self.poker: Poker | None = None
        self.proc: subprocess.Popen | None = None
        self.agent_starts = 0
        try:
            self.tor = self.stack.enter_context(namespace("ra-ch-tor-"))
            self.node = self.stack.enter_context(namespace("ra-ch-node-"))
            self.stack.callback(self._kill_namespace_processes)
            ip(self.node, "link", "add", "up0", "type", "veth", "peer", "name", "tor0", "netns", self.tor)
            ip(self.node, "addr", "add", f"{NODE_ADDR}/24", "dev", "up0")
            ip(self.tor, "addr", "add", f"{TOR_ADDR}/24", "dev", "tor0")
            ip(self.node, "link", "add", "flap0", "type", "veth", "peer", "name", "flap0p")
            ip(self.node, "addr", "add", "10.9.0.254/24", "dev", "flap0")
            for ns, devs in ((self.tor, ("tor0",)), (self.node, ("up0", "flap0p", "flap0"))):
                for dev in devs:
                    ip(ns, "link", "set", dev, "up")
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_MEM}",
                                f"net.ipv4.tcp_wmem={TCP_MEM}"], check=True)
            settle(self.node)
            settle(self.tor)
            self.api_worker = NsWorker(self.node, "api")
            self.stack.callback(self.api_worker.close)
        except BaseException:
            self.stack.close()
            raise

    # ---- BIRD
    def start_bird(self, config: str, loaded: int = 0) -> Bird:
        self.bird = Bird(self.tor, self.dir / "tor", config)
        self.stack.callback(self.bird.close)
        if loaded:
            bird_routes_loaded(self.bird, loaded)
        self.poker = Poker(str(self.bird.sock))
        self.poker.start()
        self.stack.callback(self.poker.close)
        return self.bird

    # ---- agent
    def write_config(self, text: str | bytes, name: str = "agent.yaml") -> None:
        """Atomically: a hidden temporary file (the loader skips hidden files), then rename."""
        tmp = self.confdir / f".{name}.tmp"
        tmp.write_bytes(text.encode() if isinstance(text, str) else text)
        os.replace(tmp, self.confdir / name)

    def start_agent(self) -> subprocess.Popen:
        self.proc = start_agent(self.node, str(self.confdir), "--state-dir", str(self.state),
                                log_path=self.agent_log)
        self.agent_starts += 1
        return self.proc

    def kill_agent(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exabgp_pid(self) -> int | None:
        """The agent's ExaBGP child: a child of the agent process running `-m exabgp`."""
        if not self.alive():
            return None
        for kid in _children(self.proc.pid):
            try:
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"exabgp" in cmd:
                return kid
        return None

    def rss_kib(self) -> tuple[int, int]:
        """(agent RSS, ExaBGP child RSS + its children (the API relay)) in KiB."""
        agent = _proc_rss_kib(self.proc.pid) if self.alive() else 0
        exa = self.exabgp_pid()
        return agent, (_proc_rss_kib(exa) + sum(_proc_rss_kib(k) for k in _children(exa))) if exa else 0

    def api(self, path: str, timeout: float = 5.0) -> tuple[int, str] | None:
        try:
            return self.api_worker.call(http_get, path, timeout, timeout=timeout + 5)
        except concurrent.futures.TimeoutError:
            return None

    def metrics(self) -> dict[str, float] | None:
        r = self.api("/metrics", 10)
        return parse_metrics(r[1]) if r and r[0] == 200 else None

    def kernel_routes(self) -> tuple[collections.Counter, int]:
        return self.api_worker.call(_nl_dump_v4)

    def kernel_count(self, below: int = 0, worker: "NsWorker | None" = None) -> tuple[int, int]:
        return (worker or self.api_worker).call(_nl_count_v4, below)

    def agent_log_text(self) -> str:
        try:
            return Path(self.agent_log).read_text(errors="replace")
        except OSError:
            return ""

    def settled(self, expected: set[str], *, require_failed_zero: bool = False) -> dict | None:
        """The agent's and the kernel's state when everything agrees with `expected`, else None."""
        if not self.alive():
            raise RuntimeError(f"agent exited with {self.proc.returncode}:\n{self.agent_log_text()[-3000:]}")
        m = self.metrics()
        if not m:
            return None
        if (m.get("route_agent_ready", 0) != 1 or m.get("route_agent_fib_pending_routes", 1) != 0
                or m.get("route_agent_fib_stale_routes", 1) != 0
                or metric_sum(m, "route_agent_bgp_session_up") < 1
                or metric_sum(m, "route_agent_bgp_stale_routes") != 0):
            return None
        if require_failed_zero and m.get("route_agent_fib_failed_routes", 1) != 0:
            return None
        ours, _ = self.kernel_routes()
        if set(ours) != expected or any(c > 1 for c in ours.values()):
            return None
        return {"metrics": m, "ours": ours}

    def wait_settled(self, expected: set[str], timeout: float, what: str = "settled") -> tuple[bool, float]:
        """Poll `settled` until true or the deadline; (ok, seconds)."""
        t0 = time.monotonic()
        try:
            wait_for(lambda: self.settled(expected), timeout, 0.5, what=what)
            return True, time.monotonic() - t0
        except TimeoutError:
            return False, time.monotonic() - t0

    def compare(self, expected: set[str]) -> dict:
        ours, foreign = self.kernel_routes()
        return {"missing": len(expected - set(ours)), "stale": len(set(ours) - expected),
                "duplicates": sum(c - 1 for c in ours.values() if c > 1), "kernel_routes": sum(ours.values()),
                "expected_routes": len(expected)}

    # ---- teardown
    def _kill_namespace_processes(self) -> None:
        """Every process still running in our two namespaces (agent, ExaBGP, its relay, BIRD,
        ip monitor): all started by this benchmark. SIGKILL by pid."""
        for ns in (self.node, self.tor):
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)
        self.stack.close()


def _children(pid: int | None) -> list[int]:
    out: list[int] = []
    if not pid:
        return out
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


__all__ = ["ChaosLab", "Churn", "NsWorker", "RouteMonitor", "agent_yaml", "bird_export", "foreign_text",
           "http_get", "ip", "ip_json", "log", "metric_sum", "percentile", "prefix_text", "static_block",
           "tor_config", "wait_for"]
