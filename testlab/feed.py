"""An Internet-like BGP feed for benchmarks: prefixes, attribute sets, and a BIRD config announcing them.

DOC: `generate(n4, n6, seed)` builds a `Feed` deterministically from `seed` (``random.Random``
only; no data files). The model, with the published figures it follows:

* **Size**: 1,000,000 IPv4 + 200,000 IPv6 prefixes at ``scale=1`` (potaroo.net, AS65000 IPv4 and
  AS131072 IPv6 table reports, 2024-25: 1.00-1.04M IPv4 and ~220k IPv6 FIB entries).
* **Prefix lengths**: exact counts from `V4_SHARES` / `V6_SHARES` (largest remainder). IPv4: /24
  61 %, then /22 12.4 %, /23, /20, /21, /19, /16, /18 ..., nothing longer than /24 and nothing
  shorter than /8; IPv6: /48 47 %, then /32 10 %, /44, /40, /36, /29 ..., /16 to /48. The mean
  length is 22.88 (IPv4) and 42.98 (IPv6), against potaroo's "average prefix length" of 22.92-22.93
  (AS65000, 2025) and 42.8-43.2 (AS131072/AS6447, 2023-24). /48s are ~46 % of the IPv6 table in
  Geoff Huston's "BGP in 2024" (APNIC blog, as summarised by brandergroup.net); /24 ~60 % of IPv4
  is the commonly cited share (CAIDA: 57-58.5 % in 1998-2001). No current per-length table was at
  hand: the other shares are estimates in the order issue 13 gives, tuned to potaroo's mean.
* **Overlap: realistic, not disjoint.** Lengths are placed shortest first. A prefix is a more
  specific of an already placed shorter prefix (a random one, at a random aligned offset inside
  it) with a probability that grows with its length (`SPECIFIC_P4` / `SPECIFIC_P6`); otherwise it is
  a fresh block from a randomising buddy allocator over public space, so fresh blocks never overlap
  each other. About half the IPv4 table and 55 % of the IPv6 table are more specifics of another
  entry (potaroo: 56-58 % "specifics as % of FIB entries" in IPv6). No prefix appears twice.
  IPv4 space: 1/8-223/8 without 0, 10, 100, 127, 169, 172, 192, 198 (martians, the lab's 10/8,
  private and shared space); IPv6: 2400::/12, 2600::/12, 2800::/12, 2a00::/12, 2c00::/12.
* **Attribute sets = UPDATEs**: the prefixes of a family are grouped into ``round(n / 2.5)``
  distinct attribute sets, so a speaker that packs prefixes of equal attributes into one UPDATE
  sends ~2.5 prefixes per UPDATE on average (sets larger than one UPDATE holds are split, so
  slightly fewer). Set sizes follow a power law P(k) ~ k**-g, 1 <= k <= 4000, with g (about 2.3)
  giving the mean of 2.5: most sets hold one prefix, a few hold hundreds or thousands, as the
  prefix counts of real origins do. A set is a run of prefixes consecutive in BIRD's table order
  (`bird_hash`): BIRD 2.0 feeds a session in the order of its FIB hash (nest/rt-fib.c, ascending
  `net_hash`) and sends what its buckets hold after every 256 routes (nest/rt-table.c
  `rt_feed_channel`), so prefixes of equal attributes share an UPDATE only when they come close
  together in that order. Otherwise BIRD sends ~1.03 prefixes per UPDATE (measured). As the hash
  scatters, a set's prefixes lie all over the address space, and the receiver gets them in an
  order unrelated to their addresses.
* **Attributes** of each set (all sets distinct): AS_PATH of 1-10 ASNs (mean ~4), transit hops from
  a pool of 400 ASNs with Zipf-like popularity, the origin from a pool of 75,000; 45 % of the ASNs
  are 4-octet (131072 and up); 10 % of paths prepend the origin 1-3 times; no private, reserved
  or documentation ASN (the lab's 65000/65001 are private) and never AS_TRANS. ORIGIN IGP 90 %,
  INCOMPLETE 8 %, EGP 2 %. Standard communities on 75 % of sets (1-8, ``ASN:value`` with a 2-octet
  ASN of the path, never the well-known 65535:x), large communities on 12 % (1-3, a path ASN as
  global administrator). No MED: BIRD sends a MED over eBGP only when the attribute is "fresh"
  (proto/bgp/attrs.c), and set in a static route's block together with other attributes it did
  not reach the receiver here (alone, it does); an export filter setting it would run per route
  during the measurement.

The announcing side is BIRD 2 (the peer the agent is compared with): `bird_static(feed, 4|6)`
writes static protocol blocks whose routes are ``blackhole`` with a per-route attribute block
(``{ bgp_path.prepend(...); bgp_community.add(...); ... }``), so BIRD originates each prefix with
its set's attributes and groups equal sets into one UPDATE over eBGP (it prepends its own AS).
`stats(feed)` summarises a feed (shares, mean lengths, overlap, set sizes, attribute shares) for
the benchmark's report and the unit test. Stdlib only.
"""

from __future__ import annotations

import bisect
import math
import random
import socket
from dataclasses import dataclass
from typing import NamedTuple

# Share of the table (percent) by prefix length.
V4_SHARES: dict[int, float] = {
    8: 0.0016, 9: 0.0013, 10: 0.0037, 11: 0.01, 12: 0.03, 13: 0.06, 14: 0.11, 15: 0.2,
    16: 1.45, 17: 0.9, 18: 1.4, 19: 2.7, 20: 4.7, 21: 4.6, 22: 12.4, 23: 10.4, 24: 61.0334,
}
V6_SHARES: dict[int, float] = {
    16: 0.005, 19: 0.01, 20: 0.05, 22: 0.03, 24: 0.1, 26: 0.05, 27: 0.05, 28: 0.6, 29: 3.7,
    30: 0.5, 31: 0.3, 32: 10.0, 33: 1.0, 34: 1.0, 35: 0.5, 36: 4.0, 37: 0.4, 38: 1.0, 39: 1.0,
    40: 7.5, 41: 0.9, 42: 2.0, 43: 0.8, 44: 8.5, 45: 1.8, 46: 3.3, 47: 3.5, 48: 47.405,
}
SPECIFIC_P4 = ((15, 0.15), (19, 0.35), (22, 0.45), (24, 0.56))  # (up to length, probability)
SPECIFIC_P6 = ((31, 0.2), (40, 0.45), (47, 0.55), (48, 0.62))
V4_FREE = [o << 24 for o in range(1, 224) if o not in (10, 100, 127, 169, 172, 192, 198)]
V6_FREE = [p << 116 for p in (0x240, 0x260, 0x280, 0x2A0, 0x2C0)]  # /12 blocks
PER_UPDATE = 2.5
SET_MAX = 4000


class AttrSet(NamedTuple):
    """The attributes one UPDATE carries (BIRD adds its own AS in front of `path`)."""

    path: tuple[int, ...]
    origin: str  # "igp" | "egp" | "incomplete"
    communities: tuple[tuple[int, int], ...] = ()
    large: tuple[tuple[int, int, int], ...] = ()

    def bird(self) -> str:
        """The statements of a BIRD static route's attribute block."""
        out = [f"bgp_path.prepend({asn});" for asn in reversed(self.path)]
        if self.origin != "igp":
            out.append(f"bgp_origin = ORIGIN_{self.origin.upper()};")
        out += [f"bgp_community.add(({a},{v}));" for a, v in self.communities]
        out += [f"bgp_large_community.add(({a},{b},{c}));" for a, b, c in self.large]
        return " ".join(out)


@dataclass(frozen=True)
class Feed:
    """`v4`/`v6`: (address as int, length, index into `sets4`/`sets6`) per prefix."""

    v4: list[tuple[int, int, int]]
    v6: list[tuple[int, int, int]]
    sets4: list[AttrSet]
    sets6: list[AttrSet]
    seed: int

    def __len__(self) -> int:
        return len(self.v4) + len(self.v6)


# ------------------------------------------------------------------------------------------------
# prefix lengths and placement

def length_counts(n: int, shares: dict[int, float]) -> dict[int, int]:
    """Exact counts per length summing to `n` (largest remainder)."""
    total = sum(shares.values())
    raw = {l: n * s / total for l, s in shares.items()}
    counts = {l: int(v) for l, v in raw.items()}
    for l in sorted(raw, key=lambda l: (counts[l] - raw[l], l))[:n - sum(counts.values())]:
        counts[l] += 1
    return counts


class _Buddy:
    """Random aligned blocks out of free space: a free list per length; a request takes a random
    block of the longest available length that still fits and splits it down, keeping a random half."""

    def __init__(self, blocks: list[int], length: int, bits: int, rng: random.Random) -> None:
        self.free: dict[int, list[int]] = {length: list(blocks)}
        self.bits, self.rng, self.base = bits, rng, length

    def take(self, length: int) -> int:
        l = length
        while not self.free.get(l):
            l -= 1
            if l < self.base:
                raise ValueError(f"address space exhausted at /{length}: use a smaller table")
        blocks = self.free[l]
        i = int(self.rng.random() * len(blocks))
        block = blocks[i]
        blocks[i] = blocks[-1]
        blocks.pop()
        while l < length:
            l += 1
            half = 1 << (self.bits - l)
            keep, spare = (block, block + half) if self.rng.random() < 0.5 else (block + half, block)
            self.free.setdefault(l, []).append(spare)
            block = keep
        return block


def _specific_p(length: int, table) -> float:
    for upto, p in table:
        if length <= upto:
            return p
    return table[-1][1]


def place(counts: dict[int, int], bits: int, free: list[int], free_len: int, specific,
          rng: random.Random) -> list[tuple[int, int]]:
    """(address, length) for the given counts: shortest first, each either a more specific of a
    placed shorter prefix or a fresh block; never a duplicate."""
    buddy = _Buddy(free, free_len, bits, rng)
    placed: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    rnd = rng.random
    for length in sorted(counts):
        parents = len(placed)  # every prefix placed so far is shorter
        p = _specific_p(length, specific)
        for _ in range(counts[length]):
            pfx = None
            if parents and rnd() < p:
                for _try in range(8):
                    addr, plen = placed[int(rnd() * parents)]
                    cand = (addr + (rng.getrandbits(length - plen) << (bits - length)), length)
                    if cand not in seen:
                        pfx = cand
                        break
            if pfx is None:
                pfx = (buddy.take(length), length)
            seen.add(pfx)
            placed.append(pfx)
    return placed


# ------------------------------------------------------------------------------------------------
# attribute sets

def _zipf_cum(mean: float, kmax: int) -> list[float]:
    """Cumulative P(size <= k), k = 1..kmax, of P(k) ~ k**-g with g chosen so the mean is `mean`."""
    lo, hi = 1.01, 6.0
    for _ in range(60):
        g = (lo + hi) / 2
        w = [k ** -g for k in range(1, kmax + 1)]
        m = sum(k * x for k, x in zip(range(1, kmax + 1), w)) / sum(w)
        lo, hi = (g, hi) if m > mean else (lo, g)
    total, cum = sum(w), []
    acc = 0.0
    for x in w:
        acc += x
        cum.append(acc / total)
    return cum


def group_sizes(n: int, sets: int, rng: random.Random, kmax: int = SET_MAX) -> list[int]:
    """`sets` sizes >= 1 summing to `n`: drawn from a power law P(k) ~ k**-g (mean n / sets, at
    most `kmax`), then trimmed or padded one prefix at a time at random sets to the exact total."""
    cum = _zipf_cum(n / sets, kmax)
    rnd = rng.random
    sizes = [1 + bisect.bisect_left(cum, rnd()) for _ in range(sets)]
    diff = n - sum(sizes)
    while diff:
        i = int(rnd() * sets)
        if diff > 0:
            sizes[i] += 1
            diff -= 1
        elif sizes[i] > 1:
            sizes[i] -= 1
            diff += 1
    return sizes


def _asn_pool(n: int, rng: random.Random, exclude: set[int]) -> list[int]:
    out: list[int] = []
    seen = set(exclude)
    while len(out) < n:
        if rng.random() < 0.45:
            asn = rng.randrange(131072, 420000) if rng.random() < 0.9 else rng.randrange(420000, 4199999999)
        else:
            asn = rng.randrange(1, 64496)
        if asn not in seen and asn != 23456:
            seen.add(asn)
            out.append(asn)
    return out


HOPS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
HOP_WEIGHTS = (4, 13, 24, 24, 16, 9, 5, 2.5, 1.5, 1)


class _Attrs:
    """Distinct attribute sets (see the module docstring)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.transit = _asn_pool(400, rng, set())
        self.origins = _asn_pool(75000, rng, set(self.transit))
        self.transit2 = [a for a in self.transit if a < 65536][:20]  # community ASNs of 4-octet paths
        cum, total = [], 0.0
        for i in range(len(self.transit)):
            total += 1 / (i + 1)  # Zipf-like popularity
            cum.append(total)
        self.cum = [c / total for c in cum]
        hops_cum, total = [], 0.0
        for w in HOP_WEIGHTS:
            total += w
            hops_cum.append(total)
        self.hops_cum = [c / total for c in hops_cum]
        self.seen: set[AttrSet] = set()

    def one(self) -> AttrSet:
        rnd = self.rng.random
        transit, cum, last = self.transit, self.cum, len(self.transit) - 1
        while True:
            hops = HOPS[bisect.bisect_left(self.hops_cum, rnd())]
            origin_as = self.origins[int(rnd() * len(self.origins))]
            prepend = min(1 + int(rnd() * 3), hops - 1) if hops > 1 and rnd() < 0.10 else 0
            path: list[int] = []
            while len(path) < hops - 1 - prepend:
                asn = transit[min(last, bisect.bisect_left(cum, rnd()))]
                if asn not in path:
                    path.append(asn)
            path += [origin_as] * (prepend + 1)
            r = rnd()
            origin = "igp" if r < 0.90 else "incomplete" if r < 0.98 else "egp"
            two = [a for a in path if a < 65536] or self.transit2
            comms: tuple = ()
            if rnd() < 0.75:
                k = min(8, 1 + int(-1.8 * math.log(1.0 - rnd())))
                comms = tuple(sorted({(two[int(rnd() * len(two))], int(rnd() * 65536)) for _ in range(k)}))
            large: tuple = ()
            if rnd() < 0.12:
                large = tuple(sorted({(path[int(rnd() * len(path))], 1 + int(rnd() * 999), 1 + int(rnd() * 99999))
                                      for _ in range(1 + int(rnd() * 3))}))
            a = AttrSet(tuple(path), origin, comms, large)
            if a not in self.seen:
                self.seen.add(a)
                return a


def bird_hash(addr: int, length: int, family: int) -> int:
    """BIRD 2.0's `net_hash` of a prefix (lib/net.h, lib/ip.h, lib/bitops.h): the order in which
    it walks a routing table, so the order in which it feeds a BGP session."""
    if family == 4:
        h = (addr * 2902958171) & 0xFFFFFFFF
    else:
        x = (addr >> 96) ^ (addr >> 64) ^ (addr >> 32) ^ addr
        x &= 0xFFFFFFFF
        h = (x ^ (x << 16) ^ (x << 24)) & 0xFFFFFFFF
    return h ^ ((length << 26) & 0xFFFFFFFF)


def _family(n: int, counts_of, bits, free, free_len, specific, attrs: _Attrs, rng):
    placed = place(counts_of, bits, free, free_len, specific, rng)
    family = 4 if bits == 32 else 6
    placed.sort(key=lambda p: bird_hash(p[0], p[1], family))  # sets are runs in BIRD's feed order
    sets = [attrs.one() for _ in range(max(1, round(n / PER_UPDATE)) if n else 0)]
    out: list[tuple[int, int, int]] = []
    pos = 0
    for i, size in enumerate(group_sizes(n, len(sets), rng) if sets else []):
        out += [(a, l, i) for a, l in placed[pos:pos + size]]
        pos += size
    return out, sets


def generate(n4: int = 1_000_000, n6: int = 200_000, seed: int = 1) -> Feed:
    """The feed (see the module docstring); the same arguments give the same feed."""
    rng = random.Random(seed)
    attrs = _Attrs(rng)
    v4, sets4 = _family(n4, length_counts(n4, V4_SHARES), 32, V4_FREE, 8, SPECIFIC_P4, attrs, rng)
    v6, sets6 = _family(n6, length_counts(n6, V6_SHARES), 128, V6_FREE, 12, SPECIFIC_P6, attrs, rng)
    return Feed(v4, v6, sets4, sets6, seed)


def scaled(scale: float, seed: int = 1) -> Feed:
    """The full table (1M + 200k) times `scale`."""
    return generate(round(1_000_000 * scale), round(200_000 * scale), seed)


# ------------------------------------------------------------------------------------------------
# text, BIRD, statistics

def prefix_text(addr: int, length: int, family: int) -> str:
    if family == 4:
        return f"{addr >> 24}.{(addr >> 16) & 255}.{(addr >> 8) & 255}.{addr & 255}/{length}"
    return f"{socket.inet_ntop(socket.AF_INET6, addr.to_bytes(16, 'big'))}/{length}"


def prefixes(feed: Feed, family: int) -> list[str]:
    return [prefix_text(a, l, family) for a, l, _ in (feed.v4 if family == 4 else feed.v6)]


def bird_static(feed: Feed, family: int, name: str | None = None) -> str:
    """A BIRD 2 ``protocol static`` announcing the family's prefixes with their attribute sets."""
    rows, sets = (feed.v4, feed.sets4) if family == 4 else (feed.v6, feed.sets6)
    blocks = [s.bird() for s in sets]
    texts = prefixes(feed, family)
    lines = [f"  route {t} blackhole {{ {blocks[i]} }};" for t, (_, _, i) in zip(texts, rows)]
    return f"protocol static {name or f's{family}'} {{\n  ipv{family};\n" + "\n".join(lines) + "\n}\n"


def _covered(rows: list[tuple[int, int, int]], bits: int) -> int:
    """How many prefixes are strictly inside another prefix of the list (prefixes nest or are
    disjoint: in (start, length) order one is covered iff an earlier one reaches at least as far)."""
    spans = sorted((a, l) for a, l, _ in rows)
    n, reach = 0, -1
    for a, l in spans:
        end = a + (1 << (bits - l)) - 1
        if end <= reach:
            n += 1
        else:
            reach = end
    return n


def stats(feed: Feed) -> dict:
    """A summary of the feed per family: share of each length (percent), mean length, share of
    more specifics, attribute sets and prefixes per set, mean AS-path length, shares of sets with
    communities / large communities."""
    out: dict = {"seed": feed.seed}
    for fam, rows, sets, bits in ((4, feed.v4, feed.sets4, 32), (6, feed.v6, feed.sets6, 128)):
        n = len(rows)
        if not n:
            continue
        by_len: dict[int, int] = {}
        for _, l, _ in rows:
            by_len[l] = by_len.get(l, 0) + 1
        sizes: dict[int, int] = {}
        for *_, i in rows:
            sizes[i] = sizes.get(i, 0) + 1
        out[f"v{fam}"] = {
            "prefixes": n,
            "shares": {l: round(100 * c / n, 3) for l, c in sorted(by_len.items())},
            "mean_length": round(sum(l * c for l, c in by_len.items()) / n, 3),
            "more_specific_pct": round(100 * _covered(rows, bits) / n, 1),
            "attr_sets": len(sets),
            "prefixes_per_set": round(n / len(sets), 3),
            "largest_set": max(sizes.values()),
            "single_prefix_sets_pct": round(100 * sum(1 for s in sizes.values() if s == 1) / len(sets), 1),
            "mean_path_len": round(sum(len(s.path) for s in sets) / len(sets), 2),
            "four_octet_asn_pct": round(100 * sum(a > 65535 for s in sets for a in s.path)
                                        / sum(len(s.path) for s in sets), 1),
            "communities_pct": round(100 * sum(bool(s.communities) for s in sets) / len(sets), 1),
            "large_communities_pct": round(100 * sum(bool(s.large) for s in sets) / len(sets), 1),
        }
    return out
