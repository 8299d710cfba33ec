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
every 2 ms for the last 5%; cheap, see testlab/fibwatch.py), confirmed by a netlink dump counting that
protocol's routes; for ExaBGP alone, the moment the helper has decoded the N-th announced prefix.

Pitfalls from design.md applied: both BIRDs get a `show status` on their control socket every
20 ms during a measurement (the same request as `birdc -s SOCK show status`, sent on a kept-open
control connection instead of a new birdc process each time, which would cost a fork/exec on the
same cores), removing BIRD's idle stall; net.ipv4.tcp_rmem/tcp_wmem are raised in both namespaces.
The lab (namespaces, BIRD configs, launching the agent and ExaBGP, /proc figures, the run loop) is
testlab/benchlab.py; the BIRD poker is testlab/bird.py, the kernel route watcher
testlab/fibwatch.py. This file keeps what it measures: the receivers, ExaBGP alone's helper, the
end points and the report.

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
import socket
import sys
import time

THIS = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(THIS)))  # the repository: testlab, agent (also with -S -E)

from testlab.benchlab import (  # noqa: E402  (stdlib only at import: the helpers run with -S -E)
    PROTO_AGENT, PROTO_BIRD, agent_pids, agent_yaml, common_options, finish, Lab, launch_agent, launch_exabgp,
    node_bird_config, notes, peer_bird_config, prefix_text, print_profile, profile_path, ratio, rounds, setup,
    work_directory, write_agent_yaml,
)
from testlab.procstat import proc_cpu, usage  # noqa: E402

AGENT_YAML = agent_yaml()


# ------------------------------------------------------------------------------------------------
# the API helper of the "ExaBGP alone" reference (stdlib only: runs with -S -E)

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


def tor_routes(n: int, distinct: bool) -> list[str]:
    if distinct:  # its own MED per route: one attribute set, so one UPDATE, per prefix
        return [f"{prefix_text(i)} blackhole {{ bgp_med = {i + 1}; }}" for i in range(n)]
    return [f"{prefix_text(i)} blackhole" for i in range(n)]


def helper_report(listener: socket.socket, timeout: float) -> dict:
    """The one line ExaBGP alone's helper sends at the N-th decoded prefix."""
    listener.settimeout(timeout)
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(timeout)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError("ExaBGP helper closed without reporting")
            data += chunk
    return json.loads(data)


# ------------------------------------------------------------------------------------------------
# one run

def run_one(kind: str, n: int, distinct: bool, workdir: str, timeout: float,
            profile: str | None = None) -> dict:
    """One measurement of receiver `kind` (agent | bird | exabgp_alone) in fresh namespaces."""
    from contextlib import ExitStack

    from testlab.bird import Bird, Poker
    from testlab.fibwatch import Watcher

    table = "distinct" if distinct else "shared"
    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), stack, peer_bird_config(tor_routes(n, distinct)), tag="bl")
        lab.wait_loaded(n)  # the whole table is in the ToR before any receiver starts
        res: dict = {"kind": kind, "table": table, "n": n}
        cpu0 = proc_cpu(lab.bird.proc.pid)
        socks = [str(lab.bird.sock)]
        watcher = proc = node_bird = None
        if kind == "exabgp_alone":
            report = os.path.join(workdir, "report.sock")
            listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            listener.bind(report)
            listener.listen(1)
            helper = [sys.executable, "-S", "-E", THIS, "--exabgp-helper", report, str(n)]
            proc, t_launch = launch_exabgp(workdir, lab.node, AGENT_YAML, helper,
                                           os.path.join(workdir, "exabgp.log"), stack)
        else:
            watcher = Watcher(lab.node, n, PROTO_AGENT if kind == "agent" else PROTO_BIRD, timeout)
            stack.callback(watcher.close)
            if kind == "agent":
                confdir = os.path.join(workdir, "config")
                write_agent_yaml(confdir, AGENT_YAML)
                proc, t_launch = launch_agent(lab.node, ["--config", confdir, "--state-dir",
                                                         os.path.join(workdir, "state")],
                                              os.path.join(workdir, "agent.log"), stack, profile)
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
            end = helper_report(listener, timeout)
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
        res["tor_bird_cpu_s"] = round(proc_cpu(lab.bird.proc.pid) - cpu0, 2)
        if kind == "agent":
            res.update(usage(agent_pids(proc.pid, os.path.join(workdir, "state"))))
        elif kind == "exabgp_alone":
            res.update(usage({"exabgp": [proc.pid]}))
        else:
            res.update(usage({"node_bird": [node_bird.proc.pid]}))
        poker.close()
        res["pokes"], res["poke_error"] = poker.count, poker.error
        ups = lab.bird.established_at("n4")
        if not ups:
            raise RuntimeError("the ToR never logged its session as Established")
        res["sessions"] = len(ups)  # 1 unless the session flapped
        res["seconds"] = end["t_end"] - ups[0]
        res["launch_s"] = end["t_end"] - t_launch
    return res


def describe(r: dict) -> str:
    extra = []
    for key in ("agent_cpu_s", "exabgp_cpu_s", "relay_cpu_s", "helper_cpu_s", "node_bird_cpu_s",
                "tor_bird_cpu_s", "watcher_cpu_s"):
        if key in r:
            extra.append(f"{key[:-6]} {r[key]}s")
    note = notes(r)
    if r.get("watch_method", "fib_triestat") != "fib_triestat":
        note += f" [watcher: {r['watch_method']}]"
    if r.get("poke_error"):
        note += f" [BIRD poke failed: {r['poke_error']}]"
    return (f"  {r['kind']:<13} {r['n']:>7} {r['table']:<8} {r['seconds']:7.3f}s "
            f"({r['n'] / r['seconds']:8.0f}/s; launch {r['launch_s']:.2f}s)  cpu: {', '.join(extra)}{note}")


def report(tables: list[tuple[bool, int]], best: dict, runs: list[dict], repeat: int) -> tuple[dict, bool]:
    """The summary lines and the result object (the last line); False when a dump came up short."""
    result: dict = {"bench": "bgp_learn", "repeat": repeat}
    ratios_exa, ratios_bird = [], []
    ok = True
    for distinct, n in tables:
        table = "distinct" if distinct else "shared"
        result[f"n_{table}"] = n
        a, e, b = (best.get((k, distinct)) for k in ("agent", "exabgp_alone", "bird"))
        for name, r in (("agent", a), ("exabgp_alone", e), ("bird", b)):
            result[f"{name}_{table}_s"] = round(r["seconds"], 3) if r else None
        if a and e:
            ratios_exa.append(ratio(a["seconds"], e["seconds"]))
            result[f"ratio_exabgp_{table}"] = ratios_exa[-1]
        if a and b:
            ratios_bird.append(ratio(a["seconds"], b["seconds"]))
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
    agent_shared = [r for r in runs if r["kind"] == "agent" and r["table"] == "shared"]
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
    return result, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=int, default=100000, help="prefixes with one shared attribute set (0: skip)")
    ap.add_argument("--distinct", type=int, default=20000, help="prefixes with one attribute set each (0: skip)")
    common_options(ap, runs_of="each receiver", only="agent,exabgp_alone,bird",
                   only_help="receivers to run (comma list)",
                   profile_help="also run the agent once per table under cProfile")
    ap.add_argument("--watch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--proto", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--exabgp-helper", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.exabgp_helper:
        return exabgp_helper(args.exabgp_helper[0], int(args.exabgp_helper[1]))
    if args.watch is not None:  # the watcher, run by hand (the benchmark runs testlab/fibwatch.py)
        from testlab.fibwatch import watch_routes

        return watch_routes(args.watch, args.proto, args.timeout)
    if not setup("bgp_learn"):
        return 2
    kinds = [k for k in ("agent", "exabgp_alone", "bird") if k in args.only.split(",")]
    tables = [(d, n) for d, n in ((False, args.shared), (True, args.distinct)) if n > 0]
    items = [(f"{kind}-{'distinct' if d else 'shared'}", (kind, d, n)) for d, n in tables for kind in kinds]
    best: dict[tuple[str, bool], dict] = {}
    runs: list[dict] = []
    with work_directory("bgp-learn-", args.keep) as workdir:
        print(f"bgp_learn: BIRD ToR -> receiver over one eBGP session; time from Established (ToR log) "
              f"to all N in the kernel (ExaBGP alone: N decoded); best of {args.repeat}")
        for _, (kind, distinct, n), d in rounds(workdir, args.repeat, items, args.keep):
            r = run_one(kind, n, distinct, d, args.timeout)
            runs.append(r)
            print(describe(r), flush=True)
            if (kind, distinct) not in best or r["seconds"] < best[(kind, distinct)]["seconds"]:
                best[(kind, distinct)] = r
        if args.profile:
            for distinct, n in tables:
                table = "distinct" if distinct else "shared"
                path = profile_path(args.profile, f"agent-{table}.prof")
                r = run_one("agent", n, distinct, os.path.join(workdir, f"profile-{table}"), args.timeout,
                            profile=path)
                print(f"cProfile of the agent, {n} {table} (not timed; {r['seconds']:.2f}s under the "
                      f"profiler): {path}")
                print_profile(path)
    return finish(*report(tables, best, runs, args.repeat))


if __name__ == "__main__":
    sys.exit(main())
