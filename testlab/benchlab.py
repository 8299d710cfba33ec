"""The lab the BGP benchmarks share (bench/bgp_learn.py, export.py, k8s_services.py).

DOC: owns what those benchmarks have in common, so that each of them keeps only what it measures
(fib_install.py and rib_memory.py use `prefix_text` and `finish` too):
  * the topology: `Lab` makes namespaces `peer` (PEER_ADDR, AS 65001) and `node` (NODE_ADDR, AS
    65000, where the measured side runs) joined by one veth pair, IPv6 off (no link-local routes or
    DAD events mid-measurement) unless a table has IPv6 routes (then PEER_ADDR6/NODE_ADDR6 on the
    link: the IPv4 session carries them with that next hop), net.ipv4.tcp_rmem/wmem raised in both
    (small default buffers throttle a big table: design.md, section 5), optionally `quickack 1` on
    the link routes, and a BIRD in `peer` (the ToR that announces, or the receiver that imports;
    a `PatientBird`, since a full table's configuration takes ~20 s to load), `wait_loaded`
    counting both of its tables (`table_routes`);
  * BIRD configurations of both sides (`peer_bird_config`, `node_bird_config`): one eBGP session,
    `n4` in `peer` traced with microsecond stamps (its Established time is the start point);
  * the agent as a process: its YAML (`agent_yaml`), `launch_agent` (optionally under cProfile),
    `agent_pids` (agent, its ExaBGP child, ExaBGP's relay), `agent_log_times`; `launch_exabgp`:
    ExaBGP with the configuration and environment the agent would generate and another API helper;
  * the run scaffolding: `common_options`, `setup` (root, signals), `work_directory`, `rounds`
    (interleaved repetitions), `keep_best`, `min_median`, `worst`, `ratio`, `notes`,
    `print_change_and_rss`, `print_profile`, `loadavg`, `RssSampler` (a process's RSS over a run),
    and `finish` (the one-object JSON line that ends every benchmark's output).

Next to it: the BIRD control socket without a birdc fork per request (`Poker` against BIRD's idle
stall, `ImportCounter`) in testlab/bird.py, the kernel route watcher in testlab/fibwatch.py, CPU,
RSS and write counters from /proc in testlab/procstat.py. Stdlib only at import time (benchmark
helpers run with ``python -S -E``); agent modules are imported lazily.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime

from testlab.bird import Bird, bgp_protocol, read_reply
from testlab.netns import agent_cmd, ip, namespace, sysctl, veth_between
from testlab.procstat import children, proc_cpu_split, proc_rss_mib, read_pid, stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEER_ADDR, NODE_ADDR = "10.0.0.1", "10.0.0.254"
PEER_ADDR6, NODE_ADDR6 = "fd00::1", "fd00::fe"  # on the same link, with `ipv6=True` (MP-BGP next hop)
PEER_AS, NODE_AS = 65001, 65000
HOLD_TIME = 90  # long: a busy single-core decoder must not lose the session to its hold timer
TCP_MEM = "4096 1048576 67108864"
PROTO_AGENT, PROTO_BIRD = 201, 12  # rtm_protocol: route-agent, bird


def prefix_text(i: int) -> str:
    """The i-th /24 out of 11.0.0.0/8 ... (up to 4M routes)."""
    return f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24"


# ------------------------------------------------------------------------------------------------
# topology and BIRD configurations

class Lab:
    """Namespaces `peer` and `node` joined by veth `tor0` <-> `up0`, a BIRD in `peer` running
    `bird_config`; everything is torn down by `stack` (an ExitStack). IPv6 is off unless `ipv6`
    (then PEER_ADDR6/NODE_ADDR6 on the link, without DAD, for IPv6 routes over the IPv4 session)."""

    def __init__(self, workdir: str, stack, bird_config: str, *, tag: str, quickack: bool = False,
                 ipv6: bool = False) -> None:
        os.makedirs(workdir, exist_ok=True)
        self.peer = stack.enter_context(namespace(f"ra-{tag}-peer-"))
        self.node = stack.enter_context(namespace(f"ra-{tag}-node-"))
        if not ipv6:
            for ns in (self.peer, self.node):
                sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        veth_between(self.node, "up0", f"{NODE_ADDR}/24", self.peer, "tor0", f"{PEER_ADDR}/24")
        if ipv6:
            ip(self.node, "addr", "add", f"{NODE_ADDR6}/64", "dev", "up0", "nodad")
            ip(self.peer, "addr", "add", f"{PEER_ADDR6}/64", "dev", "tor0", "nodad")
        for ns in (self.peer, self.node):
            sysctl(ns, f"net.ipv4.tcp_rmem={TCP_MEM}", f"net.ipv4.tcp_wmem={TCP_MEM}")
        if quickack:  # no delayed ACKs on the session
            for ns, dev, src in ((self.peer, "tor0", PEER_ADDR), (self.node, "up0", NODE_ADDR)):
                ip(ns, "route", "change", "10.0.0.0/24", "dev", dev, "proto", "kernel", "scope", "link",
                   "src", src, "quickack", "1")
        self.bird = PatientBird(self.peer, os.path.join(workdir, "peer"), bird_config)
        stack.callback(self.bird.close)

    def wait_loaded(self, n: int, timeout: float = 120) -> float:
        """Until the peer BIRD has `n` routes in its tables (master4 + master6: the whole table
        before any receiver); the seconds it took from here."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while table_routes(self.bird) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the peer BIRD did not load {n} routes")
            time.sleep(0.05 if n < 200000 else 0.5)
        return time.monotonic() - t0


class PatientBird(Bird):
    """A BIRD whose configuration may take long to load (a full table: ~20 s and 3.4 GB at 1.2M
    routes here). Its control socket exists at once but answers only when the configuration is
    loaded, so `ready` waits for the greeting (up to START_TIMEOUT) instead of birdc's 10 s."""

    START_TIMEOUT = 600.0

    def ready(self) -> bool:
        if not self.sock.exists():
            return False
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(self.START_TIMEOUT)
            conn.connect(str(self.sock))
            return b"BIRD" in read_reply(conn)
        except OSError:  # refused or closed: not up yet, or exited (the caller checks the process)
            return False
        finally:
            conn.close()


def table_routes(bird: Bird) -> int:
    """Routes in all of a BIRD's tables (``show route count``: one line per table); -1 when the
    control socket does not answer yet (BIRD parses a large configuration first)."""
    try:
        reply = bird.command("show route count")
    except OSError:
        return -1
    counts = re.findall(r"(\d+) of \d+ routes", reply)
    return sum(map(int, counts)) if counts else -1


def static_s4(routes) -> str:
    """A static protocol `s4` of route bodies such as ``11.0.0.0/24 blackhole``."""
    lines = "\n".join(f"  route {r};" for r in routes)
    return f"protocol static s4 {{\n  ipv4;\n{lines}\n}}\n"


def peer_bird_config(routes=None, *, statics: str | None = None, families: tuple[int, ...] = (4,)) -> str:
    """The BIRD in `peer`: passive session `n4` traced with microsecond stamps. With `routes`
    (static route bodies of ``s4``) or `statics` (whole static protocols, e.g. from
    `testlab.feed.bird_static`) it announces them and imports nothing (a ToR); without, it imports
    everything, exports nothing and keeps what it learns in its table (a receiver). `families`:
    the session's channels (IPv6 routes go over the IPv4 session with next hop PEER_ADDR6)."""
    sender = routes is not None or statics is not None
    local = static_s4(routes) if routes is not None else statics or ""
    return (f"router id {PEER_ADDR};\nlog stderr all;\ntimeformat log \"%F %T.%6f\";\n"
            "protocol device { scan time 10; }\n" + local
            + bgp_protocol("n4", local=PEER_ADDR, local_as=PEER_AS, neighbor=NODE_ADDR, neighbor_as=NODE_AS,
                           families=families, export={f: "" for f in families} if sender else {},
                           import_all=not sender, hold_time=HOLD_TIME, passive=True, graceful_restart=False,
                           extra="    debug { states };", channel_extra=_next_hop6(families)))


def _next_hop6(families) -> dict[int, str]:
    return {6: f"next hop address {PEER_ADDR6};"} if 6 in families else {}


def node_bird_config(routes=None, *, families: tuple[int, ...] = (4,)) -> str:
    """A BIRD in `node` as the reference: with `routes` it announces them (a sender); without, it
    imports everything into the kernel (a kernel protocol per family exporting all)."""
    sender = routes is not None
    local = static_s4(routes) if sender else "".join(
        f"protocol kernel k{f} {{ scan time 60; ipv{f} {{ import none; export all; }}; }}\n" for f in families)
    return (f"router id {NODE_ADDR};\nlog stderr {{ info, remote, warning, error, auth, fatal, bug }};\n"
            "protocol device { scan time 10; }\n" + local
            + bgp_protocol("up", local=NODE_ADDR, local_as=NODE_AS, neighbor=PEER_ADDR, neighbor_as=PEER_AS,
                           families=families, export={4: ""} if sender else {}, import_all=not sender,
                           hold_time=HOLD_TIME, graceful_restart=False))


# ------------------------------------------------------------------------------------------------
# the agent and ExaBGP as processes

def agent_yaml(export: bool = False, *, fib: dict | None = None, hold_time: int = HOLD_TIME,
               extra_docs: str = "", families: tuple[int, ...] = (4,)) -> str:
    """The agent's configuration in the lab: one eBGP peer (the BIRD in `peer`), acceptAll in
    (and out, with `export`); `fib` settings of the AgentConfig (e.g. fullScanSeconds) and more
    YAML documents after the peer if given; `families` other than IPv4 only are listed."""
    exp = "  exportPolicy: acceptAll\n" if export else ""
    if tuple(families) != (4,):
        exp += "  families: [" + ", ".join(f"ipv{f}-unicast" for f in families) + "]\n"
    spec = "".join(["\n  fib:", *(f"\n    {k}: {v}" for k, v in fib.items())]) if fib else " {}"
    return f"""apiVersion: routeagent.io/v1alpha1
kind: AgentConfig
metadata:
  name: node
spec:{spec}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata:
  name: tor
spec:
  peerAddress: "{PEER_ADDR}"
  peerAS: {PEER_AS}
  localAS: {NODE_AS}
  routerId: {NODE_ADDR}
  localAddress: "{NODE_ADDR}"
  holdTime: {hold_time}
  importPolicy: acceptAll
{exp}{extra_docs}"""


def write_agent_yaml(confdir: str, text: str) -> None:
    os.makedirs(confdir, exist_ok=True)
    with open(os.path.join(confdir, "agent.yaml"), "w") as f:
        f.write(text)


def launch_agent(ns: str, run_args: list[str], log_path: str, stack,
                 profile: str | None = None) -> tuple[subprocess.Popen, float]:
    """`route-agent run RUN_ARGS` inside `ns` (under cProfile writing `profile`), logging to
    `log_path`; returns the process and the wall-clock time of its launch. When `stack` unwinds
    the agent gets SIGTERM first (it exits normally and cProfile writes its file), then the lab
    goes."""
    wrap = ("-m", "cProfile", "-o", profile) if profile else ()
    log = stack.enter_context(open(log_path, "ab"))  # noqa: SIM115
    t_launch = time.time()
    proc = subprocess.Popen(agent_cmd(ns, "run", *run_args, python_args=wrap), stdout=log,
                            stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    stack.callback(stop, proc)
    return proc, t_launch


def agent_pids(agent: int, state_dir: str) -> dict[str, list[int]]:
    """The agent, its ExaBGP child (from its pid file) and ExaBGP's children (the relay)."""
    exa = read_pid(os.path.join(state_dir, "speaker", "exabgp.pid"))
    return {"agent": [agent], "exabgp": [exa] if exa else [], "relay": children(exa) if exa else []}


def agent_log_times(path: str, text: str, after: float) -> list[float]:
    """Wall-clock times (ms resolution, local time as logging's asctime) of log lines containing
    `text` at or after `after` (minus the 1 ms rounding of the log stamp)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if text in line:
                try:
                    t = datetime.strptime(" ".join(line.split()[:2]), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                except ValueError:
                    continue
                if t >= after - 0.001:
                    out.append(t)
    return out


def launch_exabgp(workdir: str, ns: str, yaml_text: str, helper: list[str], log_path: str,
                  stack, *, raw_updates: bool | None = None,
                  launcher: tuple[str, ...] | None = ()) -> tuple[subprocess.Popen, float]:
    """ExaBGP inside `ns` with the argv and environment the agent's speaker would build for the
    BgpPeer of `yaml_text` (same interpreter choice, through the launcher, raw UPDATEs as its
    BgpSpeaker says unless `raw_updates` is given), `helper` as its API process; stopped by
    `stack`. `launcher`: more launcher options, or None for ExaBGP unpatched (``-m exabgp``).
    Returns the process and the wall-clock time of its launch."""
    from agent.config.bgp import BgpSpeakerSpec, UpdatesMode
    from agent.config.loader import load_path
    from agent.speaker.child import exabgp_argv
    from agent.speaker.exabgp_conf import read_secrets, render
    from agent.speaker.process import resolve_interpreter

    confdir = os.path.join(workdir, "config")
    write_agent_yaml(confdir, yaml_text)
    config = load_path(confdir)
    settings = config.speaker.spec if config.speaker else BgpSpeakerSpec()
    # WARNING as the agent runs it (`agent.daemon.bgp`: INFO costs a log line per announced prefix)
    conf = render(list(config.peers), settings, helper, read_secrets(config.peers), log_level="WARNING")
    path = os.path.join(workdir, "exabgp.conf")
    with open(path, "w") as f:
        f.write(conf.text)
    envfile = os.path.join(workdir, "exabgp.env")
    open(envfile, "w").close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
    env.update(conf.env, EXABGP_ENVFILE=envfile, PYTHONUNBUFFERED="1")
    interpreter = resolve_interpreter(settings.interpreter)
    raw = settings.updates is UpdatesMode.RAW if raw_updates is None else raw_updates
    exabgp = ([interpreter, "-m", "exabgp", "server", path] if launcher is None
              else exabgp_argv(interpreter, path, raw_updates=raw, options=launcher))
    argv = ["ip", "netns", "exec", ns, *exabgp]
    log = stack.enter_context(open(log_path, "ab"))  # noqa: SIM115
    t_launch = time.time()
    proc = subprocess.Popen(argv, env=env, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(stop, proc)
    return proc, t_launch


# ------------------------------------------------------------------------------------------------
# run scaffolding and reporting

def common_options(ap: argparse.ArgumentParser, *, runs_of: str, only: str, only_help: str,
                   profile_help: str) -> None:
    """--repeat, --timeout, --only, --profile and --keep, as every lab benchmark has them."""
    ap.add_argument("--repeat", type=int, default=1, help=f"runs of {runs_of}; the best counts")
    ap.add_argument("--timeout", type=float, default=300, help="deadline of one measurement, seconds")
    ap.add_argument("--only", default=only, help=only_help)
    ap.add_argument("--profile", metavar="DIR", help=profile_help)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")


def setup(name: str) -> bool:
    """False (after saying so) unless root; SIGTERM/SIGHUP then unwind, so every run's cleanup
    happens."""
    if os.geteuid() != 0:
        print(f"{name}: needs root (network namespaces)", file=sys.stderr)
        return False

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    return True


@contextmanager
def work_directory(prefix: str, keep: bool):
    workdir = tempfile.mkdtemp(prefix=prefix)
    try:
        yield workdir
    finally:
        if keep:
            print(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def rounds(workdir: str, repeat: int, items: list[tuple[str, object]], keep: bool):
    """(rep, value, directory) for each (label, value) of `items` in each repetition: interleaved,
    so slow drifts of the machine hit all alike; each directory is removed after its run unless
    `keep`."""
    for rep in range(repeat):
        for label, value in items:
            d = os.path.join(workdir, f"{label}-{rep}")
            yield rep, value, d
            if not keep:
                shutil.rmtree(d, ignore_errors=True)


def profile_path(directory: str, name: str) -> str:
    os.makedirs(directory, exist_ok=True)
    return os.path.abspath(os.path.join(directory, name))


def keep_best(best: dict, best_change: dict, kind: str, r: dict, n: int) -> bool:
    """Keep run `r` of `kind` when it is the fastest so far (whole table; change); False when the
    run is incomplete (fewer than `n` routes at the receiver, or not exactly one session)."""
    if kind not in best or r["seconds"] < best[kind]["seconds"]:
        best[kind] = r
    if "change_s" in r and (kind not in best_change or r["change_s"] < best_change[kind]["change_s"]):
        best_change[kind] = r
    return r["route_count"] >= n and r["sessions"] == 1


def min_median(values: list[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def worst(runs: list[dict], *keys: str) -> dict:
    """The largest value of each of `keys` over `runs` (RSS: the worst counts)."""
    return {k: max(r[k] for r in runs) for k in keys}


def ratio(a: float, b: float) -> float:
    return round(a / b, 3)


def notes(r: dict) -> str:
    """What to flag after a run's line: session flaps, poller errors, a short route count."""
    note = "" if r["sessions"] == 1 else f" [session came up {r['sessions']} times]"
    if r.get("poll_error"):
        note += f" [poller: {r['poll_error']}]"
    if r.get("route_count", r["n"]) < r["n"]:
        note += f" [receiver shows {r['route_count']} routes]"
    return note


def print_change_and_rss(changes: list[tuple[str, dict | None]], rss: dict | None, what: str) -> None:
    """The summary's last lines before the JSON: the best single change of each side (`change_s`),
    and the agent's RSS (`agent_rss_mib`, `exabgp_rss_mib`, `relay_rss_mib`) with `what` announced."""
    if any(r for _, r in changes):
        print("one change with N announced: " + ", ".join(
            f"{name} {r['change_s'] * 1000:.1f} ms" for name, r in changes if r))
    if rss:
        print(f"RSS with {what} announced: agent {rss['agent_rss_mib']} MiB, its ExaBGP {rss['exabgp_rss_mib']} MiB "
              f"(+ relay {rss['relay_rss_mib']} MiB)")


def print_profile(path: str, top: int = 25, sort: str = "tottime", restrict: str | None = None) -> None:
    """The top functions of a cProfile file (`restrict`: a regex on file names, e.g. the agent's)."""
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats(sort).print_stats(*([restrict] if restrict else []), top)
    print("\n".join(l for l in out.getvalue().splitlines() if l.strip())[:12000])


def loadavg() -> list[float]:
    """The machine's 1/5/15-minute load averages (other work on the same cores skews timings)."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class RssSampler(threading.Thread):
    """The RSS and CPU of process `pid` every `interval` seconds: `samples` of (wall-clock time,
    MiB, (user, system) seconds of the process, (user, system) of its main thread); `at(t)` is
    the RSS of the last sample taken at or before `t` (the baseline before a table arrives),
    `cpu_since(t, end)` the CPU used from that sample to `end` (a `sample()` taken at the end
    point): a busy process's CPU over a measurement."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float, tuple[float, float], tuple[float, float]]] = []
        self.stop = threading.Event()

    def sample(self) -> tuple:
        return (time.time(), proc_rss_mib(self.pid), proc_cpu_split(self.pid), proc_cpu_split(self.pid, self.pid))

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.samples.append(self.sample())

    def _before(self, t: float) -> tuple | None:
        before = [s for s in self.samples if s[0] <= t and s[1]]
        return before[-1] if before else None

    def at(self, t: float) -> float | None:
        s = self._before(t)
        return s[1] if s else None

    def cpu_since(self, t: float, now: tuple) -> dict | None:
        """CPU seconds of the process from the last sample at or before `t` until the sample
        `now`: ``user``, ``sys`` and ``main`` (its main thread, user + system), and ``since``
        (that first sample's time)."""
        s = self._before(t)
        if s is None:
            return None
        return {"user": now[2][0] - s[2][0], "sys": now[2][1] - s[2][1],
                "main": sum(now[3]) - sum(s[3]), "since": s[0]}

    def close(self) -> None:
        self.stop.set()
        self.join(5)


def finish(result: dict, ok: bool = True) -> int:
    """Print the benchmark's last line (one JSON object); the exit status."""
    print(json.dumps(result))
    return 0 if ok else 1
