#!/usr/bin/env python3
"""Micro-benchmark of the import path: policy evaluation, hijack guard, whole import stage.

Builds a realistic import policy (bogon prefix set with ge/le, a 1,000-entry customer prefix set,
community and AS-path regex statements, default reject), a guard with a few protected prefixes and
node addresses, and N routes (random IPv4/IPv6 prefixes, attributes shared in groups as the ExaBGP
codec delivers them). Prints routes per second for each layer and the memory the stage keeps per
accepted route; the last line is JSON. This is a check, not a test: nothing is asserted.

    .venv/bin/python bench/policy_eval.py [--routes 200000]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.core.model import BgpAttrs, Prefix  # noqa: E402
from agent.policy.engine import PeerInfo, compile_policies
from agent.config.policy import RoutePolicy  # noqa: E402

imp = importlib.import_module("agent.import")

PEER = "192.0.2.1"


def policy() -> RoutePolicy:
    rnd = random.Random(7)
    customers = [{"prefix": f"{rnd.randrange(1, 223)}.{rnd.randrange(256)}.0.0/16", "le": 24}
                 for _ in range(1000)]
    return RoutePolicy.model_validate({
        "apiVersion": "routeagent.io/v1alpha1", "kind": "RoutePolicy",
        "metadata": {"name": "from-tor"},
        "spec": {"defaultAction": "reject", "statements": [
            {"name": "bogons", "conditions": {"prefixSet": [
                {"prefix": "10.0.0.0/8", "match": "orLonger"},
                {"prefix": "172.16.0.0/12", "match": "orLonger"},
                {"prefix": "192.168.0.0/16", "match": "orLonger"},
                {"prefix": "100.64.0.0/10", "match": "orLonger"},
                {"prefix": "0.0.0.0/0", "ge": 25},
                {"prefix": "::/0", "ge": 49},
                {"prefix": "fc00::/7", "match": "orLonger"},
            ]}, "actions": {"result": "reject"}},
            {"name": "blackhole", "conditions": {"communities": {"values": ["blackhole"]}},
             "actions": {"result": "reject"}},
            {"name": "prefer", "conditions": {"communities": {"values": ["65000:100", "65000:200"]}},
             "actions": {"setLocalPref": 200}},
            {"name": "no-transit", "conditions": {"asPath": {"regex": "_(174|3356|1299)_"}},
             "actions": {"result": "reject"}},
            {"name": "customers", "conditions": {"prefixSet": customers},
             "actions": {"result": "accept", "addCommunity": ["65000:1"]}},
            {"name": "v6", "conditions": {"prefixSet": [{"prefix": "2000::/3", "le": 48}]},
             "actions": {"result": "accept"}},
            {"name": "the-rest", "conditions": {"sessionType": "ebgp", "originAs": [65010, 65011]},
             "actions": {"result": "accept"}},
        ]},
    }, by_alias=True, by_name=False)


def routes(n: int) -> list[tuple[Prefix, str, BgpAttrs]]:
    rnd = random.Random(1)
    out = []
    attrs = None
    for i in range(n):
        if i % 50 == 0:  # one UPDATE carries ~50 prefixes with the same attributes
            path = tuple(rnd.choice((65001, 65010, 65011, 174, 64512)) for _ in range(rnd.randrange(1, 5)))
            comms = tuple(rnd.sample(["65000:100", "65000:200", "65000:300", "65535:666"], rnd.randrange(0, 3)))
            attrs = BgpAttrs(PEER, 65001, PEER, True, as_path=(65001,) + path, communities=comms)
        if rnd.random() < 0.8:
            plen = rnd.randrange(16, 26)
            addr = rnd.getrandbits(32) >> (32 - plen) << (32 - plen)
            p = Prefix.of(4, addr, plen)
        else:
            plen = rnd.randrange(24, 50)
            addr = (0x2000 << 112 | rnd.getrandbits(125)) >> (128 - plen) << (128 - plen)
            p = Prefix.of(6, addr, plen)
        out.append((p, PEER, attrs))
    return out


def rate(fn, items) -> float:
    gc.collect()
    t = time.perf_counter()
    fn(items)
    return len(items) / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=200_000)
    args = ap.parse_args()
    items = routes(args.routes)
    policies = compile_policies([policy()])
    bound = policies["from-tor"].bind(PeerInfo(PEER, 65001, True))
    guard = imp.Guard(["10.244.3.0/24", "10.96.0.0/12", "198.51.100.10/32", "fd00:10:244:3::/64"],
                      ["192.0.2.10/24", "2001:db8::10/64", "fe80::1/64"])

    def run_policy(items):
        ev = bound.evaluate
        for p, nh, a in items:
            ev(p, nh, a)

    def run_guard(items):
        check = guard.check
        for p, nh, a in items:
            check(p, nh)

    def make_stage():
        stage = imp.ImportStage(guard, policies)
        stage.set_peer(imp.ImportPeer(PEER, 65001, True, "from-tor",
                                      max_prefix={4: imp.MaxPrefixLimit(10**7)}))
        return stage

    def run_stage(items, stage=None):
        stage = stage or make_stage()
        receive = stage.receive
        for p, nh, a in items:
            receive(PEER, p, nh, a)
        return stage

    for fn in (run_policy, run_guard, run_stage):  # warm-up (caches, interning)
        fn(items[:2000])
    policy_rate = rate(run_policy, items)
    guard_rate = rate(run_guard, items)
    stage_rate = rate(run_stage, items)

    stage = make_stage()
    accepted = sum(1 for p, nh, a in items if bound.evaluate(p, nh, a).accepted and guard.check(p, nh) is None)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    run_stage(items, stage)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    held = stage.held(PEER)
    kept = sum(a + r for a, r in held.values())

    result = {
        "bench": "policy_eval", "n": args.routes, "accepted": accepted, "kept_verdicts": kept,
        "policy_evals_per_s": round(policy_rate), "guard_checks_per_s": round(guard_rate),
        "stage_routes_per_s": round(stage_rate),
        "policy_us": round(1e6 / policy_rate, 2), "guard_us": round(1e6 / guard_rate, 2),
        "stage_us": round(1e6 / stage_rate, 2),
        "stage_bytes_per_kept_route": round(grown / max(kept, 1), 1),
    }
    print(f"policy: {result['policy_evals_per_s']}/s ({result['policy_us']} us); "
          f"guard: {result['guard_checks_per_s']}/s ({result['guard_us']} us); "
          f"stage: {result['stage_routes_per_s']}/s ({result['stage_us']} us); "
          f"{accepted}/{args.routes} accepted, {result['stage_bytes_per_kept_route']} B per kept verdict")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
