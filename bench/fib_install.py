#!/usr/bin/env python3
"""Benchmark: N routes through the agent's RIB + FIB into a fresh namespace, vs `ip -batch`.

Measures, in one run (root, network namespaces):
  * agent_s: N static candidates applied to the RIB, handed to the FIB reconciler and written
    with the batched netlink adapter, until every route is in the kernel;
  * ref_s:   `ip -batch` of `route replace` lines for the same routes into another fresh namespace;
  * resync_s / resync_writes: a second agent process started on the already-populated namespace
    (the restart case): dump, adopt, feed the same routes, open the gate, plan; writes must be 0;
  * rss_bytes_per_route: the agent process's RSS growth from before the routes to after, per route.
Each side runs --repeat times (fresh namespaces) and the best time counts; RSS is the worst.
The last line of output is one JSON object; ratio = agent_s / ref_s.

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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.benchlab import finish, prefix_text  # noqa: E402
from testlab.netns import add_interface, namespace  # noqa: E402
from testlab.procstat import self_rss as rss  # noqa: E402

GATEWAY = "10.0.0.1"


def child(mode: str, n: int) -> dict:
    """Runs inside the namespace: the agent's pipeline, in-process."""
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
    texts = [prefix_text(i) for i in range(n)]  # the source's input, like ip -batch's file
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
    gc.collect()
    grown = rss() - base
    assert not fib.pending and not fib.failed, (len(fib.pending), list(fib.failed.values())[:3])
    return {"mode": mode, "seconds": elapsed, "writes": writes, "adopted": len(dump.ours),
            "rss_growth": grown, "routes": len(fib.actual)}


def run_child(ns: str, mode: str, n: int) -> dict:
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__),
                          "--child", mode, "--routes", str(n)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def count_routes(ns: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "route", "show", "table", "main"], capture_output=True,
                         text=True, check=True).stdout
    return out.count("\n")


def ip_batch(ns: str, n: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
        for i in range(n):
            f.write(f"route replace {prefix_text(i)} via {GATEWAY} proto 201 metric 20\n")
        path = f.name
    try:
        t0 = time.perf_counter()
        subprocess.run(["ip", "-n", ns, "-batch", path], check=True)
        return time.perf_counter() - t0
    finally:
        os.unlink(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side; the best is kept")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.routes)))
        return 0
    n = args.routes
    runs = []
    for _ in range(args.repeat):  # fresh namespaces each time; best of N for both sides
        with namespace("ra-bench-a-") as a, namespace("ra-bench-b-") as b:
            for ns in (a, b):
                add_interface(ns, "up0", "10.0.0.254/24")
            ref_s = ip_batch(b, n)
            first = run_child(a, "install", n)
            installed = count_routes(a) - 1  # minus the connected route
            resync = run_child(a, "resync", n)
            runs.append((ref_s, first, installed, resync))
    ref_s = min(r[0] for r in runs)
    first = min((r[1] for r in runs), key=lambda f: f["seconds"])
    resync = min((r[3] for r in runs), key=lambda f: f["seconds"])
    installed = min(r[2] for r in runs)
    result = {
        "bench": "fib_install", "n": n, "repeat": args.repeat,
        "agent_s": round(first["seconds"], 3), "ref": "ip -batch", "ref_s": round(ref_s, 3),
        "ratio": round(first["seconds"] / ref_s, 3),
        "agent_routes_per_s": round(n / first["seconds"]), "ref_routes_per_s": round(n / ref_s),
        "installed": installed,
        "resync_s": round(resync["seconds"], 3),
        "resync_writes": max(r[3]["writes"] for r in runs),
        "resync_adopted": resync["adopted"],
        "rss_bytes_per_route": round(max(r[1]["rss_growth"] for r in runs) / n, 1),
    }
    print(f"agent: {n} routes in {result['agent_s']}s ({result['agent_routes_per_s']}/s); "
          f"ip -batch: {result['ref_s']}s ({result['ref_routes_per_s']}/s)")
    print(f"restart re-sync: {result['resync_s']}s, {result['resync_writes']} writes, "
          f"{result['resync_adopted']} adopted; RSS {result['rss_bytes_per_route']} bytes/route")
    return finish(result, installed == n)


if __name__ == "__main__":
    sys.exit(main())
