#!/usr/bin/env python3
"""Benchmark: the agent's learning path in one process, without ExaBGP, BIRD or the kernel.

Raw UPDATE bodies (built with testlab/bgpwire.py) go through what the agent does with each one:
`WireDecoder.decode` -> `BgpSource.handle` (the import stage: guard, policy, max-prefix,
candidates) -> `Rib.apply` (best path, desired kernel routes). Tables: ``shared``, 100,000 IPv4
/24s with one attribute set in UPDATEs of 450 prefixes; ``distinct``, 20,000 UPDATEs of one /24
each with its own MED. ``--addpath``: the same tables with an ADD-PATH path id on every prefix
(RFC 7911; the session's CAP_ADDPATH_V4). Prints the best of `--repeat` runs in CPU seconds
(`time.process_time`: less skewed by other work on a shared machine than wall time) and, as the
last line, one JSON object. No root needed.

    PYTHONPATH=. .venv/bin/python bench/learn_inprocess.py [--addpath] [--repeat 7]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agent.core.bgp import Family, PeerState, PeerStatus  # noqa: E402
from agent.core.model import Prefix  # noqa: E402
from agent.core.rib import Rib  # noqa: E402
from agent.sources.bgp import BgpPeerSettings, BgpSource  # noqa: E402
from agent.speaker.wire import CAP_ADDPATH_V4, CAP_ASN4, WireDecoder  # noqa: E402
from testlab import bgpwire as w  # noqa: E402

imp = importlib.import_module("agent.import")
PEER = "192.0.2.1"


def tables(addpath: bool) -> dict[str, list[bytes]]:
    ids = (lambda n: [1] * n) if addpath else (lambda n: None)
    base = [w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.1")]
    nets = [f"{10 + (i >> 16)}.{i >> 8 & 255}.{i & 255}.0/24" for i in range(100_000)]
    shared = [w.update(attrs=base, nlri=w.nlri(nets[i:i + 450], ids(len(nets[i:i + 450]))))
              for i in range(0, len(nets), 450)]
    distinct = [w.update(attrs=[*base, w.med(i)], nlri=w.nlri([f"12.{i >> 8 & 255}.{i & 255}.0/24"], ids(1)))
                for i in range(20_000)]
    return {"shared": shared, "distinct": distinct}


def run(bodies: list[bytes], caps: int) -> tuple[float, int]:
    stage = imp.ImportStage(imp.Guard([], []), {})
    stage.set_peer(imp.ImportPeer(PEER, 65000, False, None, router_id=PEER))
    source = BgpSource(stage, [BgpPeerSettings(PEER, (Family.IPV4_UNICAST,), True)])
    rib = Rib()
    rib.set_connected([(Prefix.parse("192.0.2.0/24"), "eth0", True)])
    rib.set_link("eth0", True)
    source.handle(PeerState(PEER, PeerStatus.UP), 0.0)
    dec = WireDecoder()
    t0 = time.process_time()
    routes = 0
    for body in bodies:
        updates: list = []
        for ev in dec.decode(PEER, caps, body):
            updates += source.handle(ev, 1.0).updates
        routes += len(rib.apply(updates))
    return time.process_time() - t0, routes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--addpath", action="store_true", help="a path id on every prefix (ADD-PATH)")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    caps = CAP_ASN4 | (CAP_ADDPATH_V4 if args.addpath else 0)
    result: dict = {"bench": "learn_inprocess", "addpath": args.addpath}
    for name, bodies in tables(args.addpath).items():
        seconds, routes = min(run(bodies, caps) for _ in range(args.repeat))
        print(f"{name:9} {routes:7} routes  {seconds:.3f} CPU s  ({routes / seconds:,.0f}/s)")
        result[f"{name}_cpu_s"] = round(seconds, 3)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
