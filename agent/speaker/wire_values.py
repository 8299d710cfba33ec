"""Values of BGP path attributes off the wire: AS paths (and the RFC 6793 merge), communities,
extended communities, addresses; memoised by their octets.

DOC: pure functions, used by `agent.speaker.wire_attrs`.

AS paths: on a 2-octet session AS4_PATH is merged into AS_PATH per RFC 6793 4.2.3 (ignored when
the AGGREGATOR names a real AS beside an AS4_AGGREGATOR, or when the AS_PATH holds fewer ASes); on
a 4-octet session AS4_PATH and AS4_AGGREGATOR are ignored (4.1). Confederation segments
(AS_CONFED_SEQUENCE / AS_CONFED_SET) count for nothing in the path length (RFC 5065 5.3), so
they are kept out of `PathAttrs.as_path` and their members go to `PathAttrs.confed_path`, in order
(ExaBGP's JSON calls them "as-sequence" and the JSON decoder puts them in the path);
AS_SET members are appended to `as_path` with `as_set` True, as the JSON decoder does.

Values are written as the JSON decoder (`agent.speaker.codec`) gets them from ExaBGP 5.0.15, so
both paths give equal `PathAttrs`: communities sorted (ExaBGP sorts them) and large communities
sorted without duplicates (RFC 8092), each list packed (`agent.core.communities`: it equals the
JSON decoder's tuple of texts), extended communities sorted by their octets, each as text:
a route target or route origin as ExaBGP spells it (``target:65000:1``, ``target:192.0.2.1:5``,
``origin:65000:192.0.2.1``, ``origin:192.0.2.1:7``), any other one as ``hex(value)`` of its 8
octets (``0x30c000000000008``), which is what the JSON decoder made of the types ExaBGP leaves
undecoded (it differs for the few ExaBGP decodes itself, e.g. flowspec actions; nothing reads
them). AGGREGATOR is validated and dropped (PathAttrs has no field for it).

Memos: decoded values repeat across UPDATEs far more than whole attribute sets do (one MED per
route, the same AS paths, next hops and communities), so each kind is memoised by its octets
(`cached`); pure memoisation, bounded (a memo is cleared when full), `clear_memos` for benchmarks.
AS numbers are not shared across paths: nothing keeps a path's tuple (a candidate packs it,
`agent.core.candidate.pack_path`), so the ints live as long as the memoised tuple only.
`frozen_builder` builds frozen dataclasses without their generated ``__init__`` (see there).
"""

from __future__ import annotations

import dataclasses
import socket
import struct

from ..core.communities import Communities, LargeCommunities

AS_TRANS = 23456
_ntop = socket.inet_ntop
_AF_INET = socket.AF_INET
_from_bytes = int.from_bytes
_U32: dict[int, struct.Struct] = {}  # count -> the Struct of that many big-endian 32-bit words
_U16: dict[int, object] = {}


def _u32_struct(count: int) -> struct.Struct:
    s = _U32.get(count)
    if s is None:
        s = _U32[count] = struct.Struct(f">{count}I")
    return s


def _u32s(data: bytes, pos: int, count: int) -> tuple[int, ...]:
    return _u32_struct(count).unpack_from(data, pos)


def _u16s(data: bytes, pos: int, count: int) -> tuple[int, ...]:
    unpack = _U16.get(count)
    if unpack is None:
        unpack = _U16[count] = struct.Struct(f">{count}H").unpack_from
    return unpack(data, pos)


def frozen_builder(cls):
    """A positional constructor of the frozen, slotted dataclass `cls` that sets the slots
    through their descriptors: the generated ``__init__`` goes through ``object.__setattr__``
    by name for every field (for `RouteUpdate`; `PathAttrs` is a named tuple).
    Same object (tests compare it with the generated constructor); `cls` must have no
    ``__post_init__``."""
    names = [f.name for f in dataclasses.fields(cls)]
    assert not hasattr(cls, "__post_init__") and all(f.init for f in dataclasses.fields(cls))
    env = {"new": object.__new__, "cls": cls}
    env.update({f"set_{n}": cls.__dict__[n].__set__ for n in names})
    body = "".join(f"    set_{n}(o, {n})\n" for n in names)
    exec(f"def build({', '.join(names)}):\n    o = new(cls)\n{body}    return o\n", env)  # noqa: S102
    return env["build"]


def martian_v4(addr: bytes) -> str | None:
    """Why an IPv4 next hop is not a usable host address, or None."""
    first = addr[0]
    if first == 0:
        return "is in 0.0.0.0/8"
    if first == 127:
        return "is a loopback address"
    if first >= 224:
        return "is a multicast address" if first < 240 else "is in 240.0.0.0/4 (reserved, broadcast)"
    return None


def segments(data: bytes, pos: int, end: int, width: int) -> list | None:
    """AS path segments ``[(type, (asn, ...)), ...]`` of ``data[pos:end]``; None if malformed
    (RFC 7606 7.2: unknown type, zero length, overrun, a lone octet left)."""
    out = []
    unpack = _u32s if width == 4 else _u16s
    while pos < end:
        if end - pos < 2:
            return None
        kind, count = data[pos], data[pos + 1]
        nxt = pos + 2 + count * width
        if count == 0 or not 1 <= kind <= 4 or nxt > end:
            return None
        out.append((kind, unpack(data, pos + 2, count)))
        pos = nxt
    return out


def _path_count(segs) -> int:
    """Path length per RFC 4271 9.1.2.2: an AS_SET counts 1, confederation segments 0."""
    return sum(len(v) if k == 2 else 1 if k == 1 else 0 for k, v in segs)


def merge_as4(segs2: list, segs4: list) -> list:
    """RFC 6793 4.2.3: the AS_PATH of a 2-octet session rebuilt with its AS4_PATH (as ExaBGP 5.0.15
    does: the leading ASes of the AS_PATH the AS4_PATH lacks, then the AS4_PATH)."""
    segs4 = [s for s in segs4 if s[0] <= 2]  # RFC 6793 6: confederation segments are dropped
    count2, count4 = _path_count(segs2), _path_count(segs4)
    if count2 < count4:
        return segs2
    wanted, lead = count2 - count4, []
    for kind, values in segs2:
        if wanted <= 0:
            break
        if kind == 2 and len(values) > wanted:
            lead.append((2, values[:wanted]))
            break
        lead.append((kind, values))
        wanted -= len(values) if kind == 2 else 1 if kind == 1 else 0
    return lead + segs4


def flatten(segs: list) -> tuple[tuple[int, ...], bool, tuple[int, ...]]:
    """(as_path, as_set, confed_path) of PathAttrs from segments."""
    if len(segs) == 1 and segs[0][0] == 2:
        return segs[0][1], False, ()
    path: list[int] = []
    confed: list[int] = []
    as_set = False
    for kind, values in segs:
        if kind <= 2:
            path.extend(values)
            as_set = as_set or kind == 1
        else:
            confed.extend(values)
    return tuple(path), as_set, tuple(confed)


def ext_text(c: bytes) -> str:
    """An extended community as text (see the module DOC)."""
    kind, sub = c[0] & 0x0F, c[1]
    if sub == 2 or sub == 3:
        word = "target" if sub == 2 else "origin"
        if kind == 0:
            asn, num = struct.unpack_from(">HI", c, 2)
            if sub == 3:
                return f"origin:{asn}:{_ntop(_AF_INET, c[4:8])}"
            return f"target:{asn}:{num}"
        if kind == 1:
            return f"{word}:{_ntop(_AF_INET, c[2:6])}:{_from_bytes(c[6:8])}"
        if kind == 2:
            return f"{word}:{_from_bytes(c[2:6])}:{_from_bytes(c[6:8])}"
    return hex(_from_bytes(c))


def community_list(raw: bytes) -> Communities:
    """COMMUNITIES (length a non-zero multiple of 4): the values sorted, packed (the octets as
    they came when already sorted)."""
    words = _u32_struct(len(raw) >> 2)
    values = words.unpack(raw)
    ordered = sorted(values)
    return _new_bytes(Communities, raw if ordered == [*values] else words.pack(*ordered))


def large_list(raw: bytes) -> LargeCommunities:
    """LARGE_COMMUNITY (length a non-zero multiple of 12): sorted without duplicates, packed."""
    count = len(raw) >> 2
    it = iter(_u32s(raw, 0, count))
    words = [w for triple in sorted(set(zip(it, it, it))) for w in triple]
    return _packed_large(_u32_struct(len(words)).pack(*words))


_new_bytes = bytes.__new__
_packed_large = LargeCommunities.packed


def extended_texts(raw: bytes) -> tuple[str, ...]:
    return tuple([ext_text(c) for c in sorted(raw[j:j + 8] for j in range(0, len(raw), 8))])


def ipv4_list(raw: bytes) -> tuple[str, ...]:
    return tuple([_ntop(_AF_INET, raw[i:i + 4]) for i in range(0, len(raw), 4)])


def as_path2(raw: bytes) -> tuple | bool:
    """``(segments, flattened)`` of an AS_PATH value of a 2-octet session; False if malformed."""
    segs = segments(raw, 0, len(raw), 2)
    return False if segs is None else (segs, flatten(segs))


def as_path4(raw: bytes) -> tuple | bool:
    count = len(raw) >> 2
    if count and len(raw) & 3 == 2 and raw[0] == 2 and raw[1] == count:  # one AS_SEQUENCE (most paths)
        asns = _u32_struct(count).unpack_from(raw, 2)
        return [(2, asns)], (asns, False, ())
    segs = segments(raw, 0, len(raw), 4)
    return False if segs is None else (segs, flatten(segs))


def next_hop_text(raw: bytes) -> tuple[str, str | None]:
    text = _ntop(_AF_INET, raw)
    why = martian_v4(raw)
    return text, (f"NEXT_HOP {text} {why}" if why else None)


# Memos of decoded values by their octets: values repeat across UPDATEs far more than whole
# attribute sets do (one MED per route, the same AS paths, next hops and communities). Pure
# memoisation, bounded: a memo is cleared when full.
MEMO_SIZE = 1 << 14
MEMO_AS_PATHS2: dict = {}
MEMO_AS_PATHS4: dict = {}
MEMO_NEXT_HOPS: dict = {}
MEMO_COMMS: dict = {}
MEMO_LARGE: dict = {}
MEMO_EXT: dict = {}
MEMO_CLUSTERS: dict = {}


def clear_memos() -> None:
    """Forget every memoised value (benchmarks start cold with it)."""
    for memo in (MEMO_AS_PATHS2, MEMO_AS_PATHS4, MEMO_NEXT_HOPS, MEMO_COMMS, MEMO_LARGE, MEMO_EXT, MEMO_CLUSTERS):
        memo.clear()


def cached(memo: dict, build, raw: bytes):
    value = memo.get(raw)
    if value is None:
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        value = memo[raw] = build(raw)
    return value
