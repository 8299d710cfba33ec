#!/usr/bin/env python3
"""Benchmark: the agent's memory and CPU per learned route, without BGP sessions or root.

The full table of bench/bgp_learn.py (testlab/feed.py, times --scale) is encoded as the UPDATE
bodies BIRD sends (its AS 65001 prepended, next hop 10.0.0.1 / fd00::1, one UPDATE per run of an
attribute set, at most --per-update prefixes each) and fed through the agent's real pieces in one
process: with --path relay (the default, as the agent runs) the bodies are first converted as
ExaBGP's API helper does (`agent/speaker/relay.py --decode`: `wire-events` lines of up to 256
decoded UPDATEs, before the baseline), and the agent's line decoder (`agent.speaker.codec.Decoder`)
rebuilds the events; with --path agent it decodes `raw-update` lines itself. Then the BGP runtime
(import stage, BGP source; its speaker is never started), the RIB, the FIB state and the
nexthop-object layer as `agent.daemon.routing.Routing` wires them (`handle_bgp` per wire-events
line, or on bursts of --burst raw lines, then a plan / expand / done as if the kernel accepted
every write, as `agent.daemon.writer` does), with the agent's garbage-collector settings.
The `distinct` table (--distinct N: one /24 per UPDATE, each with its own MED, as bgp_learn's) is
the per-route CPU case.

Reports, per table: RSS growth over the feed in bytes per route (the encoded bodies are built
before the baseline, so only the agent's state and its transient garbage count), CPU µs per route,
and with --trace the top allocation sites still alive at the end (tracemalloc; slower), with
--profile the top functions by internal time (cProfile). The last line is JSON.

    PYTHONPATH=. .venv/bin/python bench/learn_memory.py [--scale 0.2] [--distinct 20000] [--path relay|agent]
        [--trace] [--profile]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab import bgpwire as w  # noqa: E402
from testlab import feed as feedmod  # noqa: E402
from testlab.procstat import self_rss  # noqa: E402

ORIGINS = {"igp": 0, "egp": 1, "incomplete": 2}
CONFIG = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec:
  peerAddress: 10.0.0.1
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
  families: [ipv4-unicast, ipv6-unicast]
  importPolicy: acceptAll
"""


def _attrs(s: feedmod.AttrSet, v6: bool, nlri: bytes = b"") -> list[bytes]:
    out = [w.origin(ORIGINS[s.origin]), w.as_path([65001, *s.path])]
    out.append(w.mp_reach(2, 1, ["fd00::1"], nlri) if v6 else w.next_hop("10.0.0.1"))
    if s.communities:
        out.append(w.communities(s.communities))
    if s.large:
        out.append(w.large_communities(s.large))
    return out


def full_bodies(scale: float, per_update: int) -> list[bytes]:
    cache = f"/tmp/learn_memory_full_{scale}_{per_update}.pickle"
    if os.path.exists(cache):
        with open(cache, "rb") as f:
            return pickle.load(f)
    feed = feedmod.scaled(scale)
    bodies = []
    for family, rows, sets in ((4, feed.v4, feed.sets4), (6, feed.v6, feed.sets6)):
        i = 0
        while i < len(rows):
            j = i
            while j < len(rows) and j - i < per_update and rows[j][2] == rows[i][2]:
                j += 1
            texts = [feedmod.prefix_text(a, l, family) for a, l, _ in rows[i:j]]
            s = sets[rows[i][2]]
            if family == 4:
                bodies.append(w.update(attrs=_attrs(s, False), nlri=w.nlri(texts)))
            else:
                bodies.append(w.update(attrs=_attrs(s, True, w.nlri(texts))))
            i = j
    with open(cache, "wb") as f:
        pickle.dump(bodies, f)
    return bodies


def distinct_bodies(n: int) -> list[bytes]:
    return [w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("10.0.0.1"), w.med(i)],
                     nlri=w.prefix(f"{10 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24")) for i in range(n)]


class Harness:
    """The agent's routing state for one ToR peer, as `Routing` builds it, without I/O."""

    def __init__(self, tmp: str) -> None:
        import importlib

        from agent.config.loader import load_text
        from agent.core.model import Prefix
        from agent.daemon.events import EventQueue
        from agent.daemon.routing import Routing
        from agent.fib.nhg import NhLayer
        from agent.speaker.codec import Decoder

        config = load_text(CONFIG)
        self.routing = r = Routing(config, imp=importlib.import_module("agent.import"), queue=EventQueue(),
                                   metrics=None, state_dir=tmp)
        r.nhg = NhLayer(r.settings.protocol, r.fib)
        r.rib.set_link("veth0", True)
        r.rib.set_connected([(Prefix.parse("10.0.0.0/24"), "veth0", True),
                             (Prefix.parse("fd00::/64"), "veth0", True)])
        r.fib.open_gate()
        r.nhg.gate_open = True
        r.bgp.speaker.send = lambda cmd: None
        self.decoder = Decoder()
        from agent.core.bgp import PeerState, PeerStatus
        r.bgp.handle(PeerState("10.0.0.1", PeerStatus.UP), 0.0)

    def feed(self, lines: list[bytes], burst: int) -> None:
        from agent.core.gctune import LoadFreezer

        r, decode = self.routing, self.decoder.decode
        freezer = LoadFreezer()  # as the core task's passes do (a pass: a burst here)
        for start in range(0, len(lines), burst):
            events = []
            for line in lines[start:start + burst]:
                events += decode(line)
            r.handle_bgp(tuple(events))
            self.flush()
            freezer.after_pass(time.monotonic())

    def flush(self) -> None:
        from agent.fib.nhusers import record_outcome

        r = self.routing
        ops = r.fib.plan(False)
        kops = r.nhg.expand(ops, False)
        record_outcome(r.fib, r.nhg, ops, kops, [])

    def routes(self) -> int:
        return len(self.routing.fib.actual)


def tune_gc() -> None:
    """As the agent does at start (`agent.core.gctune`)."""
    from agent.core.gctune import tune_gc as agents

    agents()


def lines_of(bodies: list[bytes]) -> list[bytes]:
    return [b"raw-update 10.0.0.1 1 " + b.hex().encode() for b in bodies]


def relay_lines(lines: list[bytes], chunk: int = 64) -> list[bytes]:
    """`lines` as ExaBGP's API helper hands them to the agent (`agent/speaker/relay.py
    --decode`): decoded into ``wire-events`` lines of up to 256 UPDATEs, converted `chunk` lines
    (one pipe read) at a time."""
    from agent.speaker import relay

    convert = relay._decoder()
    out: list[bytes] = []
    for i in range(0, len(lines), chunk):
        out += convert(lines[i:i + chunk])
    return out


def run(name: str, bodies: list[bytes], args) -> dict:
    import tempfile

    lines = lines_of(bodies)
    del bodies
    updates = len(lines)
    if args.path == "relay":
        lines = relay_lines(lines)
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(tmp)
        tune_gc()
        if args.trace:
            import tracemalloc
            tracemalloc.start(args.trace_depth)
        gc.collect()
        base = self_rss()
        prof = None
        if args.profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.process_time()
        h.feed(lines, 1 if args.path == "relay" else args.burst)
        cpu = time.process_time() - t0
        if prof is not None:
            prof.disable()
        gc.collect()
        grown = self_rss() - base
        n = h.routes()
        out = {"routes": n, "updates": updates, "lines": len(lines), "path": args.path, "rss_growth_mib": round(grown / 2**20, 1),
               "bytes_per_route": round(grown / n), "cpu_s": round(cpu, 2), "us_per_route": round(cpu / n * 1e6, 1)}
        print(f"{name}: {n} routes from {updates} UPDATEs ({len(lines)} {args.path} lines): RSS +{out['rss_growth_mib']} MiB = "
              f"{out['bytes_per_route']} B/route; CPU {out['cpu_s']} s = {out['us_per_route']} µs/route"
              + (" (under tracemalloc)" if args.trace else "") + (" (under cProfile)" if prof else ""))
        if args.trace:
            snap = tracemalloc.take_snapshot()
            stats = snap.statistics("traceback" if args.trace_depth > 1 else "lineno")
            total = sum(s.size for s in stats)
            out["traced_bytes_per_route"] = round(total / n)
            print(f"  traced alive: {total / 2**20:.1f} MiB = {total / n:.0f} B/route; top sites:")
            for s in stats[:args.top]:
                frames = " <- ".join(f"{os.path.relpath(f.filename)}:{f.lineno}" for f in s.traceback)
                print(f"  {s.size / n:7.1f} B/route {s.count:>8} blocks  {frames}")
            tracemalloc.stop()
        if prof is not None:
            import pstats
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
        del h
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.2, help="full table size (1.0: 1M IPv4 + 200k IPv6); 0: skip")
    ap.add_argument("--distinct", type=int, default=0, help="also a table of N one-prefix UPDATEs")
    ap.add_argument("--per-update", type=int, default=500, help="prefixes per UPDATE at most")
    ap.add_argument("--burst", type=int, default=64, help="UPDATEs per handle_bgp call (--path agent)")
    ap.add_argument("--path", choices=("relay", "agent"), default="relay",
                    help="relay: the agent gets the API helper's wire-events lines (decoded there, up to 256 "
                         "UPDATEs per handle_bgp call, as it runs); agent: raw-update lines, decoded by the agent")
    ap.add_argument("--trace", action="store_true", help="tracemalloc: top allocation sites alive at the end")
    ap.add_argument("--trace-depth", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="cProfile: top functions by internal time")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    result: dict = {"bench": "learn_memory"}
    if args.scale:
        result["full"] = run(f"full x{args.scale}", full_bodies(args.scale, args.per_update), args)
    if args.distinct:
        result["distinct"] = run("distinct", distinct_bodies(args.distinct), args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
