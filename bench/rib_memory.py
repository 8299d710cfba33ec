#!/usr/bin/env python3
"""Benchmark: RIB memory per route at 1M routes, vs a naive dict of ipaddress networks.

Each side runs in its own fresh process and reports its RSS growth per route:
  * agent: N prefixes into `agent.rib.Rib`, one candidate each from one of 8 origins (interned
    candidates, as sources share them), plus the FIB's view of the same routes (`FibState.actual`),
    i.e. what the agent keeps per installed route;
  * reference: the obvious representation, ``{ip_network: (origin, distance, gateway)}``.
The last line is JSON; ratio = agent bytes per route / reference bytes per route. No root needed.

    .venv/bin/python bench/rib_memory.py --routes 1000000
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.benchlab import finish  # noqa: E402
from testlab.procstat import self_rss as rss  # noqa: E402


def agent_side(n: int) -> dict:
    from agent.fib.reconciler import FibState
    from agent.fib.types import FibSettings
    from agent.core.model import Candidate, NextHop, Origin, Prefix, SourceKind, Update, intern, nexthops
    from agent.core.rib import Rib

    rib = Rib(default_metric=20)
    rib.set_link("eth0", True)
    fib = FibState(FibSettings())
    fib.open_gate()
    cands = [intern(Candidate(intern(Origin(SourceKind.STATIC, f"o{i}")), 1,
                              nexthops(NextHop("10.0.0.1", "eth0")))) for i in range(8)]
    gc.collect()
    base = rss()
    for start in range(0, n, 50000):
        changes = rib.apply(Update(Prefix.of(4, (16 << 24) + (i << 8), 24), cands[i & 7].origin, cands[i & 7])
                            for i in range(start, min(n, start + 50000)))
        fib.want(changes)
        fib.actual.update(fib.pending)  # as if written: the FIB keeps one entry per route
        fib.pending.clear()
    gc.collect()
    return {"rib_routes": len(rib), "fib_routes": len(fib.actual), "bytes": rss() - base}


def reference_side(n: int) -> dict:
    table = {}
    gc.collect()
    base = rss()
    for i in range(n):
        table[ipaddress.IPv4Network(((16 << 24) + (i << 8), 24))] = (f"o{i & 7}", 1, "10.0.0.1")
    gc.collect()
    return {"routes": len(table), "bytes": rss() - base}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=1_000_000)
    ap.add_argument("--side", choices=["agent", "reference"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        fn = agent_side if args.side == "agent" else reference_side
        print(json.dumps(fn(args.routes)))
        return 0
    out = {}
    for side in ("agent", "reference"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--side", side, "--routes",
                            str(args.routes)], capture_output=True, text=True, check=True)
        out[side] = json.loads(r.stdout.strip().splitlines()[-1])
    n = args.routes
    ours = out["agent"]["bytes"] / n
    ref = out["reference"]["bytes"] / n
    print(f"agent RIB + FIB state: {ours:.0f} bytes/route; naive dict of ip_network: {ref:.0f} bytes/route")
    return finish({"bench": "rib_memory", "n": n, "agent_bytes_per_route": round(ours, 1),
                   "ref": "dict[ip_network, tuple]", "ref_bytes_per_route": round(ref, 1),
                   "ratio": round(ours / ref, 3)})


if __name__ == "__main__":
    sys.exit(main())
