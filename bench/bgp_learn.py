#!/usr/bin/env python3
"""Benchmark: N prefixes announced by a BIRD peer, learned into the kernel, vs two references.

A BIRD 2 "ToR" in namespace `tor` (10.0.0.1, AS 65001, passive) announces N IPv4 /24s (static
blackholes in BIRD) over one eBGP session to a receiver in namespace `node` (10.0.0.254, AS
65000), joined by a veth pair. Two tables:

  * shared:   N = 100,000 prefixes with one attribute set (BIRD packs them into few UPDATEs);
  * distinct: N = 20,000 prefixes, each with its own MED (a per-route attribute block in BIRD's
    static protocol), so every prefix travels in an UPDATE of its own.

Three receivers, each measured in the same run, in fresh namespaces with a freshly started ToR:

  * agent:        the real agent (`route-agent run --config DIR --state-dir DIR`, its real
                  ExaBGP child, import policy acceptAll) -> all N routes in the kernel (proto 201);
  * bird:         reference (a), BIRD -> BIRD -> kernel: a second BIRD in `node` with a kernel
                  protocol exporting everything -> all N routes in the kernel (proto bird);
  * exabgp_alone: reference (b), ExaBGP with the configuration and environment the agent would
                  generate (`agent.speaker.exabgp_conf.render`, same interpreter choice), whose API
                  helper only reads and json-decodes the lines (and counts announced prefixes)
                  -> N prefixes seen.

Start point: the BGP session reaching Established, as logged by the ToR BIRD (its trace line
"n4: State changed to up", microsecond timestamps). It is the same event for every receiver and
excludes what differs for reasons unrelated to learning: process start-up, BIRD's connect delay,
ExaBGP's connect retry. The ToR has loaded all N routes before any receiver is started. (The time
from launching the receiver is printed too, as `launch`.)

End point: the moment the N-th route of the receiver's protocol is in the kernel, seen by a watcher
process inside `node` polling the FIB trie's prefix count (/proc/net/fib_triestat: every 20 ms,
every 2 ms for the last 5%; cheap, see `watch_routes`), confirmed by a netlink dump counting that
protocol's routes; for ExaBGP alone, the moment the helper has decoded the N-th announced prefix.

Pitfalls from design.md applied: both BIRDs get a `show status` on their control socket every
20 ms during a measurement (the same request as `birdc -s SOCK show status`, sent on a kept-open
control connection instead of a new birdc process each time, which would cost a fork/exec on the
same cores), removing BIRD's idle stall; net.ipv4.tcp_rmem/tcp_wmem are raised in both namespaces.

RSS: agent and its ExaBGP child (and the relay helper) from /proc when 100k routes are installed;
ExaBGP alone's at the same point for comparison. CPU seconds per process during each run are
printed to show where the time goes. --profile DIR adds one cProfile'd agent run per table
(not timed) and prints the top functions.

Output: human-readable lines, then as the last line one JSON object with both ratios per table
(`ratio_exabgp_*` = agent / ExaBGP alone, `ratio_bird_*` = agent / BIRD), `ratio_exabgp` and
`ratio_bird` the worse of the two tables, and `ratio` = `ratio_exabgp` (target <= 1.25).

    sudo .venv/bin/python bench/bgp_learn.py [--shared 100000] [--distinct 20000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THIS = os.path.abspath(__file__)

TOR_ADDR, NODE_ADDR = "10.0.0.1", "10.0.0.254"
TOR_AS, NODE_AS = 65001, 65000
PROTO_AGENT, PROTO_BIRD = 201, 12  # rtm_protocol: route-agent, bird
RT_TABLE_MAIN = 254
TCP_MEM = "4096 1048576 67108864"
POKE_SECONDS = 0.02
HOLD_TIME = 90  # long: a busy single-core decoder must not lose the session to its hold timer


def prefix_text(i: int) -> str:
    """The i-th /24 out of 11.0.0.0/8 ... (as bench/fib_install.py)."""
    return f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24"


# ------------------------------------------------------------------------------------------------
# helpers that run in other processes (stdlib only: they start before anything heavy is imported)

def exabgp_helper(report_path: str, n: int) -> int:
    """ExaBGP's API process for the "ExaBGP alone" reference: read every line, json-decode it,
    count announced prefixes; report the time the N-th was seen on a Unix socket; keep reading
    until ExaBGP closes the pipe (it freezes when its API pipe is not read)."""
    loads = json.loads
    report = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    report.connect(report_path)
    count = lines = 0
    done = False
    for line in sys.stdin.buffer:
        lines += 1
        try:
            msg = loads(line)
        except ValueError:
            continue  # "done"/"error" acks are plain text (none expected: we send no commands)
        if done or msg.get("type") != "update":
            continue
        announce = msg["neighbor"]["message"].get("update", {}).get("announce")
        if announce:
            for by_next_hop in announce.values():
                for nlris in by_next_hop.values():
                    count += len(nlris)
            if count >= n:
                done = True
                t = time.time()
                usage = os.times()
                report.sendall((json.dumps({"t_end": t, "count": count, "lines": lines,
                                            "cpu": usage.user + usage.system}) + "\n").encode())
    return 0


def _nl_parse(buf, proto: int, present: set, stop_on_done: bool = False) -> bool:
    """Add the RTM_NEWROUTE messages in `buf` for `proto` in table main to `present` (remove for
    RTM_DELROUTE). Returns True at NLMSG_DONE (end of a dump)."""
    unpack = struct.unpack_from
    off, size = 0, len(buf)
    while off + 16 <= size:
        mlen, mtype = unpack("=IH", buf, off)
        if mlen < 16:
            break
        if mtype == 24 or mtype == 25:  # RTM_NEWROUTE / RTM_DELROUTE
            dst_len, table, prot = buf[off + 17], buf[off + 20], buf[off + 21]
            if prot == proto and table == RT_TABLE_MAIN:
                a, end, dst = off + 28, off + mlen, b""
                while a + 4 <= end:
                    alen, atype = unpack("=HH", buf, a)
                    if alen < 4:
                        break
                    if atype == 1:  # RTA_DST
                        dst = bytes(buf[a + 4:a + alen])
                        break
                    a += (alen + 3) & ~3
                if mtype == 24:
                    present.add((dst_len, dst))
                else:
                    present.discard((dst_len, dst))
        elif mtype == 3:  # NLMSG_DONE
            return True
        elif mtype == 2 and stop_on_done:  # NLMSG_ERROR on a dump
            raise OSError("netlink dump failed")
        off += (mlen + 3) & ~3
    return False


def _nl_dump(proto: int) -> set:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 1 << 26)  # SO_RCVBUFFORCE
        s.bind((0, 0))
        req = struct.pack("=IHHII", 28, 26, 0x301, 1, 0) + struct.pack("=BBBBBBBBI", socket.AF_INET, *[0] * 8)
        s.send(req)  # RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP
        present: set = set()
        while not _nl_parse(s.recv(1 << 20), proto, present, stop_on_done=True):
            pass
        return present
    finally:
        s.close()


def _trie_prefixes() -> int:
    """Prefixes in the main FIB trie of this namespace (local routes included): a walk of the
    trie in C (~2 ms at 100k routes, under RCU only, so it never holds up route writes)."""
    with open("/proc/net/fib_triestat") as f:
        main = f.read().split("Main:", 1)[1]
    return int(main.split("Prefixes:", 1)[1].split(None, 1)[0])


def watch_routes(n: int, proto: int, timeout: float) -> int:
    """Runs inside the receiving namespace: print "ready" once the baseline is taken, then one
    JSON line when `n` routes of `proto` are in table main (or the deadline passed).

    The end point is polled on /proc/net/fib_triestat's prefix count (nothing but the receiver
    adds routes in the fresh namespace), every 20 ms and every 2 ms for the last 5%, then
    confirmed by a netlink dump counting only `proto` routes in table main. (Reading the route
    multicast group instead costs a recv per route in Python, ~0.3 s of CPU per 100k routes on
    the cores the receiver needs.) The watcher runs at nice 19: on a small machine the receiver
    saturates the CPUs and must not lose them to the measurement; when it goes idle at the end,
    the watcher gets a CPU at once."""
    os.nice(19)  # on a saturated machine the watcher must not take CPU from the receiver
    base = _trie_prefixes() - len(_nl_dump(proto))
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    close = max(50, n // 20)
    method, count, t_end = "fib_triestat", 0, 0.0
    while time.monotonic() < deadline:
        if method == "fib_triestat":
            count = _trie_prefixes() - base
            if count >= n:
                t_end, usage = time.time(), os.times()
                count = len(_nl_dump(proto))  # confirm: only `proto` routes count
                if count >= n:
                    break
                method, t_end = "netlink dump", 0.0  # something else added routes: count ours
        else:
            count = len(_nl_dump(proto))
            if count >= n:
                t_end, usage = time.time(), os.times()
                break
        time.sleep(0.002 if n - count <= close else 0.02)  # poll interval, under a deadline
    if not t_end:
        t_end, usage = time.time(), os.times()
    final = len(_nl_dump(proto))
    print(json.dumps({"t_end": t_end, "count": count, "dump_count": final, "method": method,
                      "cpu": usage.user + usage.system}), flush=True)  # CPU up to the end point
    return 0


# ------------------------------------------------------------------------------------------------
# the orchestrator

def proc_cpu(pid: int | None) -> float:
    """utime + stime of `pid` in seconds (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


def proc_rss_mib(pid: int | None) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        pass
    return 0.0


def children(pid: int | None) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, TypeError):
        pass
    return out


class Poker(threading.Thread):
    """Sends `show status` on each BIRD control socket every POKE_SECONDS (BIRD's idle stall)."""

    def __init__(self, socks: list[str]) -> None:
        super().__init__(daemon=True, name="bird-poker")
        self.socks = socks
        self.stop = threading.Event()
        self.count = 0
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
        conns = []
        try:
            for path in self.socks:
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.settimeout(30)
                c.connect(path)
                self._reply(c)  # greeting "0001 BIRD ... ready."
                conns.append(c)
            while not self.stop.wait(POKE_SECONDS):
                for c in conns:
                    c.sendall(b"show status\n")
                    self._reply(c)
                self.count += 1
        except Exception as exc:  # reported with the result; the run goes on unpoked
            self.error = repr(exc)
        finally:
            for c in conns:
                c.close()

    def close(self) -> None:
        self.stop.set()
        self.join(35)


def sh(*args: str, ns: str | None = None) -> str:
    cmd = ["ip", "netns", "exec", ns, *args] if ns else list(args)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def tor_config(n: int, distinct: bool) -> str:
    from testlab.bird import bgp_protocol

    if distinct:  # its own MED per route: one attribute set, so one UPDATE, per prefix
        routes = "\n".join(f"  route {prefix_text(i)} blackhole {{ bgp_med = {i + 1}; }};" for i in range(n))
    else:
        routes = "\n".join(f"  route {prefix_text(i)} blackhole;" for i in range(n))
    return (f"router id {TOR_ADDR};\nlog stderr all;\ntimeformat log \"%F %T.%6f\";\n"
            "protocol device { scan time 10; }\n"
            f"protocol static s4 {{\n  ipv4;\n{routes}\n}}\n"
            + bgp_protocol("n4", local=TOR_ADDR, local_as=TOR_AS, neighbor=NODE_ADDR, neighbor_as=NODE_AS,
                           export={4: ""}, import_all=False, hold_time=HOLD_TIME, passive=True,
                           graceful_restart=False, extra="    debug { states };"))


def node_bird_config() -> str:
    from testlab.bird import bgp_protocol

    return (f"router id {NODE_ADDR};\nlog stderr {{ info, remote, warning, error, auth, fatal, bug }};\n"
            "protocol device { scan time 10; }\n"
            "protocol kernel k4 { scan time 60; ipv4 { import none; export all; }; }\n"
            + bgp_protocol("up", local=NODE_ADDR, local_as=NODE_AS, neighbor=TOR_ADDR, neighbor_as=TOR_AS,
                           export={}, import_all=True, hold_time=HOLD_TIME, graceful_restart=False))


def agent_yaml(peer_addr: str, peer_as: int, export: bool = False) -> str:
    """The agent's configuration for the benchmark labs: one eBGP peer, acceptAll (and export)."""
    exp = "  exportPolicy: acceptAll\n" if export else ""
    return f"""apiVersion: routeagent.io/v1alpha1
kind: AgentConfig
metadata:
  name: node
spec: {{}}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata:
  name: tor
spec:
  peerAddress: "{peer_addr}"
  peerAS: {peer_as}
  localAS: {NODE_AS}
  routerId: {NODE_ADDR}
  localAddress: "{NODE_ADDR}"
  holdTime: {HOLD_TIME}
  importPolicy: acceptAll
{exp}"""


AGENT_YAML = agent_yaml(TOR_ADDR, TOR_AS)


def established_at(log_path: str) -> list[float]:
    """Wall-clock times of the ToR's session n4 reaching Established (from its trace log)."""
    out = []
    with open(log_path, errors="replace") as f:
        for line in f:
            if "n4: State changed to up" in line:
                stamp = " ".join(line.split()[:2])
                out.append(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp())
    return out


class Lab:
    """Namespaces `tor` and `node` joined by a veth pair, the ToR BIRD loaded with N routes."""

    def __init__(self, workdir: str, n: int, distinct: bool, stack) -> None:
        from testlab.netns import namespace
        from testlab.bird import Bird

        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.tor = stack.enter_context(namespace("ra-bl-tor-"))
        self.node = stack.enter_context(namespace("ra-bl-node-"))
        for ns in (self.tor, self.node):  # no IPv6: no link-local routes/DAD events mid-measurement
            sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", ns=ns)
        sh("ip", "-n", self.node, "link", "add", "up0", "type", "veth", "peer", "name", "tor0", "netns", self.tor)
        sh("ip", "-n", self.node, "addr", "add", f"{NODE_ADDR}/24", "dev", "up0")
        sh("ip", "-n", self.tor, "addr", "add", f"{TOR_ADDR}/24", "dev", "tor0")
        sh("ip", "-n", self.tor, "link", "set", "tor0", "up")
        sh("ip", "-n", self.node, "link", "set", "up0", "up")
        for ns in (self.tor, self.node):
            sh("sysctl", "-qw", f"net.ipv4.tcp_rmem={TCP_MEM}", f"net.ipv4.tcp_wmem={TCP_MEM}", ns=ns)
        # the carrier comes up up to ~1 s after "link set up" (linkwatch): settle before measuring
        deadline = time.monotonic() + 10
        while json.loads(sh("ip", "-n", self.node, "-j", "link", "show", "up0"))[0].get("operstate") != "UP":
            if time.monotonic() > deadline:
                raise TimeoutError("veth up0 did not come up")
            time.sleep(0.02)
        self.tor_bird = Bird(self.tor, os.path.join(workdir, "tor"), tor_config(n, distinct))
        stack.callback(self.tor_bird.close)
        deadline = time.monotonic() + 120
        while True:  # the whole table is in the ToR before any receiver starts
            out = self.tor_bird.cmd("show", "route", "count")
            m = re.search(r"(\d+) of (\d+) routes", out)
            if m and int(m.group(1)) >= n:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"ToR BIRD did not load {n} routes: {out}")
            time.sleep(0.05)


class Watcher:
    """The kernel-route watcher process inside `ns`."""

    def __init__(self, ns: str, n: int, proto: int, timeout: float) -> None:
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-S", THIS, "--watch", str(n),
                                      "--proto", str(proto), "--timeout", str(timeout)],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"route watcher did not start: {line!r}")

    def result(self) -> dict:
        line = self.proc.stdout.readline()
        self.proc.wait(30)
        if not line:
            raise RuntimeError(f"route watcher exited with {self.proc.returncode} without a result")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _stop(proc: subprocess.Popen | None, sig=signal.SIGTERM, wait: float = 15) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def run_one(kind: str, n: int, distinct: bool, workdir: str, timeout: float,
            profile: str | None = None) -> dict:
    """One measurement of receiver `kind` (agent | bird | exabgp_alone) in fresh namespaces."""
    from contextlib import ExitStack

    from testlab.bird import Bird

    table = "distinct" if distinct else "shared"
    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), n, distinct, stack)
        res: dict = {"kind": kind, "table": table, "n": n}
        cpu0 = {"tor_bird": proc_cpu(lab.tor_bird.proc.pid)}
        socks = [str(lab.tor_bird.sock)]
        watcher = proc = node_bird = listener = None
        if kind == "exabgp_alone":
            report = os.path.join(workdir, "report.sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stack.callback(listener.close)
            listener.bind(report)
            listener.listen(1)
            argv, env = exabgp_alone_command(workdir, lab.node, report, n)
            log = stack.enter_context(open(os.path.join(workdir, "exabgp.log"), "ab"))
            t_launch = time.time()
            proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            stack.callback(_stop, proc)
        else:
            watcher = Watcher(lab.node, n, PROTO_AGENT if kind == "agent" else PROTO_BIRD, timeout)
            stack.callback(watcher.close)
            if kind == "agent":
                confdir = os.path.join(workdir, "config")
                os.makedirs(confdir, exist_ok=True)
                with open(os.path.join(confdir, "agent.yaml"), "w") as f:
                    f.write(AGENT_YAML)
                wrap = ["-m", "cProfile", "-o", profile] if profile else []
                argv = ["ip", "netns", "exec", lab.node, sys.executable, *wrap, "-m", "agent", "run",
                        "--config", confdir, "--state-dir", os.path.join(workdir, "state")]
                log = stack.enter_context(open(os.path.join(workdir, "agent.log"), "ab"))
                t_launch = time.time()
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                        env=dict(os.environ, PYTHONUNBUFFERED="1"))
                stack.callback(_stop, proc)
            else:
                t_launch = time.time()
                node_bird = Bird(lab.node, os.path.join(workdir, "node"), node_bird_config())
                socks.append(str(node_bird.sock))
                # BIRD deletes its kernel routes one by one on SIGTERM: SIGKILL it first
                stack.callback(node_bird.close)
                stack.callback(lambda: node_bird.proc.poll() is None and (node_bird.proc.kill(), node_bird.proc.wait()))
        poker = Poker(socks)
        poker.start()
        stack.callback(poker.close)
        # ---- wait for the end point
        if kind == "exabgp_alone":
            listener.settimeout(timeout)
            conn, _ = listener.accept()
            stack.callback(conn.close)
            conn.settimeout(timeout)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    raise RuntimeError("ExaBGP helper closed without reporting")
                data += chunk
            end = json.loads(data)
            res["helper_cpu_s"] = round(end["cpu"], 2)
            res["json_lines"] = end["lines"]
        else:
            end = watcher.result()
            res["watch_method"], res["dump_count"] = end["method"], end["dump_count"]
            res["watcher_cpu_s"] = round(end["cpu"], 2)
            if end["count"] < n:
                raise TimeoutError(f"{kind}: only {end['count']} of {n} routes in the kernel after {timeout}s")
        res["count"] = end["count"]
        # ---- resources at the end point (before anything is stopped)
        res["tor_bird_cpu_s"] = round(proc_cpu(lab.tor_bird.proc.pid) - cpu0["tor_bird"], 2)
        if kind == "agent":
            exa = _read_pid(os.path.join(workdir, "state", "speaker", "exabgp.pid"))
            relay = children(exa)
            res.update(agent_cpu_s=round(proc_cpu(proc.pid), 2), exabgp_cpu_s=round(proc_cpu(exa), 2),
                       relay_cpu_s=round(sum(proc_cpu(p) for p in relay), 2),
                       agent_rss_mib=round(proc_rss_mib(proc.pid), 1), exabgp_rss_mib=round(proc_rss_mib(exa), 1),
                       relay_rss_mib=round(sum(proc_rss_mib(p) for p in relay), 1))
        elif kind == "exabgp_alone":
            res.update(exabgp_cpu_s=round(proc_cpu(proc.pid), 2), exabgp_rss_mib=round(proc_rss_mib(proc.pid), 1))
        else:
            res.update(node_bird_cpu_s=round(proc_cpu(node_bird.proc.pid), 2),
                       node_bird_rss_mib=round(proc_rss_mib(node_bird.proc.pid), 1))
        poker.close()
        res["pokes"], res["poke_error"] = poker.count, poker.error
        ups = established_at(str(lab.tor_bird.log))
        if not ups:
            raise RuntimeError("the ToR never logged its session as Established")
        res["sessions"] = len(ups)  # 1 unless the session flapped
        res["seconds"] = end["t_end"] - ups[0]
        res["launch_s"] = end["t_end"] - t_launch
        if kind == "agent" and profile:
            _stop(proc)  # SIGTERM: the agent exits normally and cProfile writes its file
    return res


def _read_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def exabgp_command(workdir: str, ns: str, agent_yaml_text: str, helper: list[str]) -> tuple[list[str], dict]:
    """ExaBGP's argv and environment exactly as the agent's speaker would build them for the
    BgpPeer of `agent_yaml_text`, with `helper` as its API process (shared with bench/export.py)."""
    from agent.config.loader import load_path
    from agent.speaker.exabgp_conf import read_secrets, render
    from agent.config.bgp import BgpSpeakerSpec
    from agent.speaker.process import resolve_interpreter

    confdir = os.path.join(workdir, "config")
    os.makedirs(confdir, exist_ok=True)
    with open(os.path.join(confdir, "agent.yaml"), "w") as f:
        f.write(agent_yaml_text)
    config = load_path(confdir)
    settings = config.speaker.spec if config.speaker else BgpSpeakerSpec()
    conf = render(list(config.peers), settings, helper, read_secrets(config.peers), log_level="INFO")
    path = os.path.join(workdir, "exabgp.conf")
    with open(path, "w") as f:
        f.write(conf.text)
    envfile = os.path.join(workdir, "exabgp.env")
    open(envfile, "w").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
    env.update(conf.env, EXABGP_ENVFILE=envfile, PYTHONUNBUFFERED="1")
    interp = resolve_interpreter(settings.interpreter)
    return ["ip", "netns", "exec", ns, interp, "-m", "exabgp", "server", path], env


def exabgp_alone_command(workdir: str, ns: str, report: str, n: int) -> tuple[list[str], dict]:
    """ExaBGP as the agent would run it, with the JSON-decoding helper as the API process."""
    return exabgp_command(workdir, ns, AGENT_YAML,
                          [sys.executable, "-S", "-E", THIS, "--exabgp-helper", report, str(n)])


def describe(r: dict) -> str:
    extra = []
    for key in ("agent_cpu_s", "exabgp_cpu_s", "relay_cpu_s", "helper_cpu_s", "node_bird_cpu_s",
                "tor_bird_cpu_s", "watcher_cpu_s"):
        if key in r:
            extra.append(f"{key[:-6]} {r[key]}s")
    note = "" if r["sessions"] == 1 else f" [session came up {r['sessions']} times]"
    if r.get("watch_method", "fib_triestat") != "fib_triestat":
        note += f" [watcher: {r['watch_method']}]"
    if r.get("poke_error"):
        note += f" [BIRD poke failed: {r['poke_error']}]"
    return (f"  {r['kind']:<13} {r['n']:>7} {r['table']:<8} {r['seconds']:7.3f}s "
            f"({r['n'] / r['seconds']:8.0f}/s; launch {r['launch_s']:.2f}s)  cpu: {', '.join(extra)}{note}")


def print_profile(path: str, top: int = 25) -> None:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    print("\n".join(l for l in text.splitlines() if l.strip())[:12000])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=int, default=100000, help="prefixes with one shared attribute set (0: skip)")
    ap.add_argument("--distinct", type=int, default=20000, help="prefixes with one attribute set each (0: skip)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each receiver; the best counts")
    ap.add_argument("--timeout", type=float, default=300, help="deadline of one measurement, seconds")
    ap.add_argument("--only", default="agent,exabgp_alone,bird", help="receivers to run (comma list)")
    ap.add_argument("--profile", metavar="DIR", help="also run the agent once per table under cProfile")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    ap.add_argument("--watch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--proto", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--exabgp-helper", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.exabgp_helper:
        return exabgp_helper(args.exabgp_helper[0], int(args.exabgp_helper[1]))
    if args.watch is not None:
        return watch_routes(args.watch, args.proto, args.timeout)
    if os.geteuid() != 0:
        print("bgp_learn: needs root (network namespaces)", file=sys.stderr)
        return 2
    sys.path.insert(0, ROOT)

    def terminate(signum, frame):  # SIGTERM/SIGHUP: unwind, so every run's cleanup happens
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    kinds = [k for k in ("agent", "exabgp_alone", "bird") if k in args.only.split(",")]
    tables = [(False, args.shared), (True, args.distinct)]
    tables = [(d, n) for d, n in tables if n > 0]
    workdir = tempfile.mkdtemp(prefix="bgp-learn-")
    best: dict[tuple[str, bool], dict] = {}
    runs: list[dict] = []
    ok = True
    try:
        print(f"bgp_learn: BIRD ToR -> receiver over one eBGP session; time from Established (ToR log) "
              f"to all N in the kernel (ExaBGP alone: N decoded); best of {args.repeat}")
        for rep in range(args.repeat):
            for distinct, n in tables:
                for kind in kinds:  # interleaved, so slow drifts of the machine hit all alike
                    d = os.path.join(workdir, f"{kind}-{'distinct' if distinct else 'shared'}-{rep}")
                    r = run_one(kind, n, distinct, d, args.timeout)
                    runs.append(r)
                    print(describe(r), flush=True)
                    key = (kind, distinct)
                    if key not in best or r["seconds"] < best[key]["seconds"]:
                        best[key] = r
                    if not args.keep:
                        shutil.rmtree(d, ignore_errors=True)
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            for distinct, n in tables:
                table = "distinct" if distinct else "shared"
                path = os.path.abspath(os.path.join(args.profile, f"agent-{table}.prof"))
                r = run_one("agent", n, distinct, os.path.join(workdir, f"profile-{table}"), args.timeout,
                            profile=path)
                print(f"cProfile of the agent, {n} {table} (not timed; {r['seconds']:.2f}s under the "
                      f"profiler): {path}")
                print_profile(path)
    finally:
        if args.keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    result: dict = {"bench": "bgp_learn", "repeat": args.repeat}
    ratios_exa, ratios_bird = [], []
    for distinct, n in tables:
        table = "distinct" if distinct else "shared"
        result[f"n_{table}"] = n
        a, e, b = (best.get((k, distinct)) for k in ("agent", "exabgp_alone", "bird"))
        for name, r in (("agent", a), ("exabgp_alone", e), ("bird", b)):
            result[f"{name}_{table}_s"] = round(r["seconds"], 3) if r else None
        if a and e:
            ratios_exa.append(round(a["seconds"] / e["seconds"], 3))
            result[f"ratio_exabgp_{table}"] = ratios_exa[-1]
        if a and b:
            ratios_bird.append(round(a["seconds"] / b["seconds"], 3))
            result[f"ratio_bird_{table}"] = ratios_bird[-1]
        line = f"{n} {table}: " + ", ".join(f"{name} {r['seconds']:.3f}s ({n / r['seconds']:.0f}/s)"
                                           for name, r in (("agent", a), ("ExaBGP alone", e), ("BIRD->BIRD->kernel", b))
                                           if r)
        if a and e:
            line += f"; agent/ExaBGP alone {result[f'ratio_exabgp_{table}']}"
        if a and b:
            line += f"; agent/BIRD {result[f'ratio_bird_{table}']}"
        print(line)
        for r in (a, b):
            if r and r.get("dump_count", n) < n:
                ok = False
                print(f"  WARNING: {r['kind']} {table}: final dump shows {r['dump_count']} of {n} routes")
    if ratios_exa:
        result["ratio_exabgp"] = max(ratios_exa)
        result["ratio"] = result["ratio_exabgp"]
        result["target_ratio_exabgp"] = 1.25
    if ratios_bird:
        result["ratio_bird"] = max(ratios_bird)
    agent_shared = [r for r in runs if r["kind"] == "agent" and not r["table"] == "distinct"]
    exa_shared = [r for r in runs if r["kind"] == "exabgp_alone" and r["table"] == "shared"]
    if agent_shared:
        result["agent_rss_mib"] = max(r["agent_rss_mib"] for r in agent_shared)
        result["exabgp_rss_mib"] = max(r["exabgp_rss_mib"] for r in agent_shared)
        result["relay_rss_mib"] = max(r["relay_rss_mib"] for r in agent_shared)
        print(f"RSS at {agent_shared[0]['n']} routes: agent {result['agent_rss_mib']} MiB, its ExaBGP "
              f"{result['exabgp_rss_mib']} MiB (+ relay {result['relay_rss_mib']} MiB)")
    if exa_shared:
        result["exabgp_alone_rss_mib"] = max(r["exabgp_rss_mib"] for r in exa_shared)
        print(f"RSS of ExaBGP alone at {exa_shared[0]['n']} prefixes: {result['exabgp_alone_rss_mib']} MiB")
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
