#!/usr/bin/env python3
"""Benchmark: N routes through the agent's RIB + FIB into a fresh namespace, vs `ip -batch`.

Measures, in one run (root, network namespaces):
  * agent: a child process reads the N prefixes from a file (one per line), applies them to the
    RIB as static candidates, hands them to the FIB reconciler and writes them with the batched
    netlink adapter, until every route is in the kernel;
  * ref:   `ip -batch` of a file of `route replace` lines for the same routes into another fresh
    namespace;
  * resync_s / resync_writes: a second agent process started on the already-populated namespace
    (the restart case): dump, adopt, feed the same routes, open the gate, plan; writes must be 0;
  * rss_bytes_per_route: the agent process's RSS growth from before the routes to after, per route.
Both sides are timed the same two ways: `agent_s` / `ref_s` exclude process start-up (the agent
from after its imports, with its input file already read, to the last route written; `ip -batch`
from launch to exit minus the same command's time on an empty batch file, i.e. its own start-up),
and `agent_launch_s` / `ref_launch_s` run from launching the process to the last route in the
kernel. Both namespaces are then counted (routes of proto 201 in table main, by a netlink dump):
each must hold exactly N, or the run fails. Each side runs --repeat times (fresh namespaces) and
the best time counts; RSS is the worst. The last line of output is one JSON object; ratio =
agent_s / ref_s, ratio_launch = agent_launch_s / ref_launch_s.

    sudo .venv/bin/python bench/fib_install.py --routes 100000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from testlab.benchlab import finish, prefix_text  # noqa: E402
from testlab.netns import add_interface, namespace  # noqa: E402
from testlab.procstat import self_rss as rss  # noqa: E402

GATEWAY = "10.0.0.1"


def child(mode: str, n: int, path: str) -> dict:
    """Runs inside the namespace: the agent's pipeline, in-process, on the prefixes in `path`."""
    from agent.fib.netlink import LinkIndex, NetlinkFib
    from agent.fib.reconciler import FibState
    from agent.fib.types import FibSettings
    from agent.core.model import Candidate, NextHop, Origin, Prefix, SourceKind, Update, intern, nexthops
    from agent.core.rib import Rib
    from agent.sources.kernel import KernelSource
    from agent.core.model import DEFAULT_DISTANCE

    settings = FibSettings()
    links = LinkIndex()
    nl = NetlinkFib(settings, links)
    links.load(nl.links_dump())
    rib = Rib(default_metric=settings.metric)
    for link in links.links():
        rib.set_link(link.name, link.up)
    fib = FibState(settings)
    kernel = KernelSource(DEFAULT_DISTANCE)
    origin = intern(Origin(SourceKind.STATIC, "bench"))
    cand = intern(Candidate(origin, 1, nexthops(NextHop(GATEWAY))))
    with open(path) as f:  # the source's input, like ip -batch's file
        texts = f.read().split()
    assert len(texts) == n, (len(texts), n)
    gc.collect()
    base = rss()
    t0 = time.perf_counter()
    dump = nl.dump()
    fib.adopt(dump.ours)
    fib.want(rib.apply(kernel.resync(dump.foreign)))
    chunk = 20000
    writes = 0
    for start in range(0, n, chunk):
        fib.want(rib.apply(Update(Prefix.parse(texts[i]), origin, cand)
                           for i in range(start, min(n, start + chunk))))
        ops = fib.plan()  # before the gate: new prefixes only, adopted ones are held
        writes += len(ops)
        fib.done(ops, nl.apply(ops))
    fib.open_gate()
    ops = fib.plan()
    writes += len(ops)
    errors = nl.apply(ops)
    fib.done(ops, errors)
    elapsed = time.perf_counter() - t0
    t_done = time.time()
    gc.collect()
    grown = rss() - base
    assert not fib.pending and not fib.failed, (len(fib.pending), list(fib.failed.values())[:3])
    return {"mode": mode, "seconds": elapsed, "t_done": t_done, "writes": writes, "adopted": len(dump.ours),
            "rss_growth": grown, "routes": len(fib.actual)}


def run_child(ns: str, mode: str, n: int, path: str) -> dict:
    """The agent's child in `ns`; `launch_s`: from launching it to its last route written."""
    t_launch = time.time()
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__),
                          "--child", mode, "--routes", str(n), "--input", path], capture_output=True, text=True,
                         check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["launch_s"] = r["t_done"] - t_launch
    return r


def count_routes(ns: str) -> int:
    """Routes of proto 201 in table main of `ns` (both families), by a netlink dump."""
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from testlab.fibwatch import _nl_dump; print(len(_nl_dump(201)))"
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-S", "-c", code], capture_output=True,
                         text=True, check=True).stdout
    return int(out)


def timed_ip_batch(ns: str, path: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["ip", "-n", ns, "-batch", path], check=True)
    return time.perf_counter() - t0


def ip_batch(ns: str, path: str, empty: str) -> tuple[float, float]:
    """`ip -batch` of `path` into `ns`: (seconds without its start-up, seconds from launch to exit).
    Its start-up is the same command's time on the `empty` batch file (best of 3)."""
    start = min(timed_ip_batch(ns, empty) for _ in range(3))
    total = timed_ip_batch(ns, path)
    return total - start, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best is kept")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.routes, args.input)))
        return 0
    n = args.routes
    runs = []
    with tempfile.TemporaryDirectory(prefix="fib-install-") as tmp:
        prefixes, batch, empty = (os.path.join(tmp, name) for name in ("prefixes", "routes.batch", "empty.batch"))
        with open(prefixes, "w") as f:
            f.writelines(f"{prefix_text(i)}\n" for i in range(n))
        with open(batch, "w") as f:
            f.writelines(f"route replace {prefix_text(i)} via {GATEWAY} proto 201 metric 20\n" for i in range(n))
        open(empty, "w").close()
        for _ in range(args.repeat):  # fresh namespaces each time; best of N for both sides
            with namespace("ra-bench-a-") as a, namespace("ra-bench-b-") as b:
                for ns in (a, b):
                    add_interface(ns, "up0", "10.0.0.254/24")
                ref = ip_batch(b, batch, empty)
                ref_count = count_routes(b)
                first = run_child(a, "install", n, prefixes)
                installed = count_routes(a)
                resync = run_child(a, "resync", n, prefixes)
                runs.append((ref, first, installed, resync, ref_count))
    ref_s = min(r[0][0] for r in runs)
    ref_launch_s = min(r[0][1] for r in runs)
    first = min((r[1] for r in runs), key=lambda f: f["seconds"])
    first_launch = min(r[1]["launch_s"] for r in runs)
    resync = min((r[3] for r in runs), key=lambda f: f["seconds"])
    installed = min(r[2] for r in runs)
    ref_installed = min(r[4] for r in runs)
    result = {
        "bench": "fib_install", "n": n, "repeat": args.repeat,
        "agent_s": round(first["seconds"], 3), "ref": "ip -batch", "ref_s": round(ref_s, 3),
        "ratio": round(first["seconds"] / ref_s, 3),
        "agent_launch_s": round(first_launch, 3), "ref_launch_s": round(ref_launch_s, 3),
        "ratio_launch": round(first_launch / ref_launch_s, 3),
        "agent_routes_per_s": round(n / first["seconds"]), "ref_routes_per_s": round(n / ref_s),
        "installed": installed, "ref_installed": ref_installed,
        "resync_s": round(resync["seconds"], 3),
        "resync_writes": max(r[3]["writes"] for r in runs),
        "resync_adopted": resync["adopted"],
        "rss_bytes_per_route": round(max(r[1]["rss_growth"] for r in runs) / n, 1),
    }
    print(f"agent: {n} routes in {result['agent_s']}s ({result['agent_routes_per_s']}/s; from launch "
          f"{result['agent_launch_s']}s); ip -batch: {result['ref_s']}s ({result['ref_routes_per_s']}/s; from launch "
          f"{result['ref_launch_s']}s); installed {installed} / {ref_installed} of {n}")
    print(f"restart re-sync: {result['resync_s']}s, {result['resync_writes']} writes, "
          f"{result['resync_adopted']} adopted; RSS {result['rss_bytes_per_route']} bytes/route")
    return finish(result, installed == n and ref_installed == n)


if __name__ == "__main__":
    sys.exit(main())
