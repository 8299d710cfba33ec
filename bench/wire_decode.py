#!/usr/bin/env python3
"""Micro-benchmark: the agent's UPDATE decoder vs ExaBGP 5.0.15's, on the same bytes.

Tables (UPDATE bodies built with testlab/bgpwire.py, IPv4 on a 4-octet-AS session):

  * distinct:  N UPDATEs of one /24 each, each with its own attribute set (its own MED, as
               bench/bgp_learn.py's distinct table; AS paths from a pool of 200, two communities
               from a pool of 50, NEXT_HOP from 4);
  * shared:    UPDATEs of P prefixes each sharing one attribute set, prefix lengths /16../24 mixed
               (the general NLRI loop);
  * shared24:  the same with /24s only (the one-length fast path);
  * shared_v6: IPv6 UPDATEs (MP_REACH_NLRI, global + link-local next hop), /48../64 mixed.

Ours: `agent.speaker.codec.Decoder.decode` on the ``raw-update PEER CAPS HEX`` line the relay
gets, i.e. hex decoding, the UPDATE, the attribute set, and the events (`RouteUpdate` with one
`Announced` per prefix). ExaBGP: `Message.unpack(UPDATE, body, Direction.IN, negotiated)` (its
decoder only: its JSON encoding, pipe write and reactor come on top in the real process; the
logger is set up at WARNING as the agent runs it). Each repeat starts cold: a new Decoder and
cleared memos for ours, a new Negotiated for ExaBGP; repeats alternate between the two. Times are
CPU seconds of this process (`time.process_time`: on a machine shared with other work, wall-clock
time also counts the time the process waited for a core). Figures: µs per UPDATE and per prefix,
min and median over the repeats.

Output: lines per table, then as the last line one JSON object: per table the figures and
`ratio` (ours / ExaBGP, from the minimums), and `ratio` = those ratios by table.

    .venv/bin/python bench/wire_decode.py [--distinct 5000] [--shared 40] [--prefixes 800] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testlab import bgpwire as w  # noqa: E402
from tests.exabgp_oracle import exabgp_message, exabgp_events  # noqa: E402
from agent.speaker import wire_values  # noqa: E402
from agent.speaker.codec import Decoder  # noqa: E402

PEER = "192.0.2.1"
CAPS = 1  # 4-octet AS numbers


def distinct_table(n: int, rnd: random.Random) -> list[bytes]:
    paths = [[65000] + [rnd.randrange(1, 4_200_000_000) for _ in range(rnd.randint(1, 6))] for _ in range(200)]
    comms = [f"{rnd.randrange(1, 65535)}:{rnd.randrange(65535)}" for _ in range(50)]
    hops = [f"192.0.2.{i}" for i in range(1, 5)]
    return [w.update(attrs=[w.origin(0), w.as_path(rnd.choice(paths)), w.next_hop(rnd.choice(hops)), w.med(i),
                            w.communities(rnd.sample(comms, 2))],
                     nlri=w.prefix(f"{10 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24"))
            for i in range(n)]


def _v4(k: int, plen: int) -> str:
    addr = (0x0B000000 + (k << 8)) & 0xFFFFFFFF
    addr &= (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    return f"{addr >> 24}.{(addr >> 16) & 255}.{(addr >> 8) & 255}.{addr & 255}/{plen}"


def shared_table(n: int, per: int, rnd: random.Random, lengths: tuple[int, ...]) -> list[bytes]:
    attrs = [w.origin(0), w.as_path([65000, 64512, 4_200_000_001]), w.next_hop("192.0.2.1"),
             w.communities(["65000:1", "65000:2"]), w.large_communities(["65000:1:1"])]
    out, k = [], 0
    for _ in range(n):
        pf = []
        for _ in range(per):
            pf.append(_v4(k, rnd.choice(lengths)))
            k += 1
        out.append(w.update(attrs=attrs, nlri=w.nlri(pf)))
    return out


def shared_v6_table(n: int, per: int, rnd: random.Random) -> list[bytes]:
    out, k = [], 0
    for _ in range(n):
        pf = []
        for _ in range(per):
            plen = rnd.choice((48, 48, 48, 56, 64))
            pf.append(f"2001:db8:{k >> 8 & 0xFFFF:x}:{(k & 255) << 8:x}::/{plen}" if plen > 48
                      else f"2a{k >> 16 & 0xFF:02x}:{k >> 8 & 0xFF:x}:{k & 0xFF:x}::/48")
            k += 1
        out.append(w.update(attrs=[
            w.mp_reach(2, 1, ["2001:db8::1", "fe80::1"], w.nlri(pf)), w.origin(0),
            w.as_path([65000, 64512]), w.communities(["65000:1"])]))
    return out


def run_ours(lines: list[bytes]) -> float:
    wire_values.clear_memos()
    decoder = Decoder()
    decode = decoder.decode
    gc.collect()
    t = time.process_time()
    for line in lines:
        decode(line)
    return time.process_time() - t


def run_exabgp(bodies: list[bytes]) -> float:
    gc.collect()
    t = time.process_time()
    for body in bodies:
        exabgp_message(body, CAPS)  # (a new Negotiated per message: no attribute cache carried over)
    return time.process_time() - t


def measure(name: str, bodies: list[bytes], repeat: int) -> dict:
    lines = [f"raw-update {PEER} {CAPS} {b.hex()}\n".encode() for b in bodies]
    # the same routes both ways, checked on the first UPDATEs before timing
    for body in bodies[:20]:
        theirs = exabgp_events(body, CAPS)
        ours = Decoder().decode(f"raw-update {PEER} {CAPS} {body.hex()}")
        assert ours == theirs, (name, ours, theirs)
    prefixes = sum(len(ev.announced) for line in lines for ev in Decoder().decode(line))
    ours_t, theirs_t = [], []
    for _ in range(repeat):
        ours_t.append(run_ours(lines))
        theirs_t.append(run_exabgp(bodies))
    n = len(bodies)

    def fig(ts: list[float], per: int) -> dict:
        return {"min": round(min(ts) / per * 1e6, 3), "median": round(statistics.median(ts) / per * 1e6, 3)}

    out = {"updates": n, "prefixes": prefixes,
           "ours_update_us": fig(ours_t, n), "exabgp_update_us": fig(theirs_t, n),
           "ours_prefix_us": fig(ours_t, prefixes), "exabgp_prefix_us": fig(theirs_t, prefixes),
           "ratio": round(min(ours_t) / min(theirs_t), 4)}
    print(f"{name:10s} {n} UPDATEs, {prefixes} prefixes: ours {out['ours_update_us']['min']} µs/UPDATE "
          f"{out['ours_prefix_us']['min']} µs/prefix (median {out['ours_prefix_us']['median']}); ExaBGP "
          f"{out['exabgp_update_us']['min']} µs/UPDATE {out['exabgp_prefix_us']['min']} µs/prefix "
          f"(median {out['exabgp_prefix_us']['median']}); ratio {out['ratio']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--distinct", type=int, default=5000, help="one-prefix UPDATEs with their own attributes")
    ap.add_argument("--shared", type=int, default=40, help="shared-attribute UPDATEs per shared table")
    ap.add_argument("--prefixes", type=int, default=800, help="prefixes per shared UPDATE (IPv4; IPv6: half)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rnd = random.Random(7)
    tables = {
        "distinct": distinct_table(args.distinct, rnd),
        "shared": shared_table(args.shared, args.prefixes, rnd, (16, 19, 20, 22, 23, 24, 24, 24)),
        "shared24": shared_table(args.shared, args.prefixes, rnd, (24,)),
        "shared_v6": shared_v6_table(args.shared, args.prefixes // 2, rnd),
    }
    result: dict = {"bench": "wire_decode", "repeat": args.repeat}
    for name, bodies in tables.items():
        result[name] = measure(name, bodies, args.repeat)
    result["ratio"] = {name: result[name]["ratio"] for name in tables}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
