"""BGP path attributes off the wire, with the RFC 7606 outcome of every error: `parse_attributes`.

DOC: pure functions, no state (the caches live in `agent.speaker.wire.WireDecoder`).
`parse_attributes(block, start, asn4)` reads the path attribute block of one UPDATE from offset
`start` and returns ``(AttrInfo, mp)``: `AttrInfo` is everything the attributes say
(the `PathAttrs`, the NEXT_HOP, which mandatory attributes were present, the errors) and depends
on the bytes and `asn4` only, so the caller may cache it by those bytes; `mp` lists the
MP_REACH_NLRI / MP_UNREACH_NLRI attributes found (``(type, flags, start, end, attr_start)``),
which carry NLRI and are the caller's to parse (`agent.speaker.wire`).

Errors are ``(level, reason, code, subcode, data)``: level `DISCARD` (attribute discard: the
attribute is ignored), `WITHDRAW` (treat-as-withdraw: every route of the UPDATE is withdrawn) or
`RESET` (session reset with NOTIFICATION code/subcode/data; parsing stops). Per RFC 7606 section
7 (and RFC 4271, 6793, 8092): ORIGIN of a length other than 1 or an undefined value, a malformed
AS_PATH (zero-length or overrunning segment, unknown segment type, a lone octet left), NEXT_HOP,
MED, LOCAL_PREF or ORIGINATOR_ID of a length other than 4, COMMUNITIES / CLUSTER_LIST /
EXTENDED_COMMUNITIES / IPv6 extended communities / LARGE_COMMUNITIES whose length is not a
non-zero multiple of 4 / 4 / 8 / 20 / 12, Optional or Transitive flag bits in conflict with the
type (section 3 c; likewise the Partial bit on a well-known or optional non-transitive attribute,
RFC 4271 4.3, as FRR has it), an attribute overrunning the block (section 4): treat-as-withdraw.
ATOMIC_AGGREGATE of non-zero length, AGGREGATOR not of 6 (2-octet session) or 8 octets, a
malformed AS4_PATH or AS4_AGGREGATOR (RFC 6793 section 6), a repeated attribute (all but the
first, section 3 g): attribute discard. An unrecognized well-known attribute: session reset 3/2
(RFC 4271 6.3). Unknown optional attributes, transitive or not, are ignored.

A NEXT_HOP that is not a usable host address (0.0.0.0/8, 127.0.0.0/8, multicast, 240.0.0.0/4)
is not an error of the attribute: `AttrInfo.next_hop_error` says why, and the caller withdraws
the routes that would use it (RFC 7606 7.3: the route is ignored, no NOTIFICATION).

AS paths: on a 2-octet session AS4_PATH is merged into AS_PATH per RFC 6793 4.2.3 (ignored when
the AGGREGATOR names a real AS beside an AS4_AGGREGATOR, or when the AS_PATH holds fewer ASes);
on a 4-octet session AS4_PATH and AS4_AGGREGATOR are ignored (4.1). Confederation segments
(AS_CONFED_SEQUENCE / AS_CONFED_SET) count for nothing in the path length (RFC 5065 5.3), so
they are kept out of `PathAttrs.as_path` and their members go to `PathAttrs.confed_path`, in order
(ExaBGP's JSON calls them "as-sequence" and the JSON decoder puts them in the path);
AS_SET members are appended to `as_path` with `as_set` True, as the JSON decoder does.

Values are written as the JSON decoder (`agent.speaker.codec`) gets them from ExaBGP 5.0.15, so
both paths give equal `PathAttrs`: communities sorted (ExaBGP sorts them), large communities
sorted without duplicates (RFC 8092), extended communities sorted by their octets, each as text:
a route target or route origin as ExaBGP spells it (``target:65000:1``, ``target:192.0.2.1:5``,
``origin:65000:192.0.2.1``, ``origin:192.0.2.1:7``), any other one as ``hex(value)`` of its 8
octets (``0x30c000000000008``), which is what the JSON decoder made of the types ExaBGP leaves
undecoded (it differs for the few ExaBGP decodes itself, e.g. flowspec actions; nothing reads
them). AGGREGATOR is validated and dropped (PathAttrs has no field for it).
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import struct
from typing import NamedTuple

from ..core.bgp import PathAttrs
from ..core.model import BgpOrigin

DISCARD, WITHDRAW, RESET = 1, 2, 3
PRESENT_ORIGIN, PRESENT_AS_PATH, PRESENT_NEXT_HOP = 1, 2, 4  # 1 << (type - 1)
AS_TRANS = 23456
MP_REACH, MP_UNREACH = 14, 15

NAMES = {1: "ORIGIN", 2: "AS_PATH", 3: "NEXT_HOP", 4: "MULTI_EXIT_DISC", 5: "LOCAL_PREF",
         6: "ATOMIC_AGGREGATE", 7: "AGGREGATOR", 8: "COMMUNITIES", 9: "ORIGINATOR_ID",
         10: "CLUSTER_LIST", 14: "MP_REACH_NLRI", 15: "MP_UNREACH_NLRI", 16: "EXTENDED_COMMUNITIES",
         17: "AS4_PATH", 18: "AS4_AGGREGATOR", 25: "IPV6_EXTENDED_COMMUNITIES", 32: "LARGE_COMMUNITY"}
# the Optional and Transitive flag bits each recognised attribute must carry (RFC 7606 3 c), and
# the Partial bit 0 unless it is optional transitive (RFC 4271 4.3; FRR checks it the same way)
_FLAGS = [-1] * 256
_MASKS = [0xC0] * 256
for _t, _f in {1: 0x40, 2: 0x40, 3: 0x40, 4: 0x80, 5: 0x40, 6: 0x40, 7: 0xC0, 8: 0xC0, 9: 0x80,
               10: 0x80, 16: 0xC0, 17: 0xC0, 18: 0xC0, 25: 0xC0, 32: 0xC0}.items():
    _FLAGS[_t] = _f
    _MASKS[_t] = 0xC0 if _f == 0xC0 else 0xE0
_ORIGINS = (BgpOrigin.IGP, BgpOrigin.EGP, BgpOrigin.INCOMPLETE)
_ntop = socket.inet_ntop
_AF_INET = socket.AF_INET
_from_bytes = int.from_bytes
_U32: dict[int, object] = {}
_U16: dict[int, object] = {}


def _u32s(data: bytes, pos: int, count: int) -> tuple[int, ...]:
    unpack = _U32.get(count)
    if unpack is None:
        unpack = _U32[count] = struct.Struct(f">{count}I").unpack_from
    return unpack(data, pos)


def _u16s(data: bytes, pos: int, count: int) -> tuple[int, ...]:
    unpack = _U16.get(count)
    if unpack is None:
        unpack = _U16[count] = struct.Struct(f">{count}H").unpack_from
    return unpack(data, pos)


class AttrInfo(NamedTuple):
    """What the (non-MP) path attributes of an UPDATE say; a function of their bytes and asn4."""

    attrs: PathAttrs | None  # None when an error makes the UPDATE a treat-as-withdraw
    next_hop: str | None  # NEXT_HOP as text (the next hop of the IPv4 NLRI field)
    next_hop_error: str | None  # why that NEXT_HOP cannot be used (the routes are withdrawn)
    present: int  # PRESENT_* bits of the mandatory attributes seen
    level: int  # the strongest error (0: none)
    errors: tuple  # (level, reason, code, subcode, data), in the order met


def frozen_builder(cls):
    """A positional constructor of the frozen, slotted dataclass `cls` that sets the slots
    through their descriptors: the generated ``__init__`` goes through ``object.__setattr__``
    by name for every field, which for `PathAttrs` cost as much as parsing all its attributes.
    Same object (tests compare it with the generated constructor); `cls` must have no
    ``__post_init__``."""
    names = [f.name for f in dataclasses.fields(cls)]
    assert not hasattr(cls, "__post_init__") and all(f.init for f in dataclasses.fields(cls))
    env = {"new": object.__new__, "cls": cls}
    env.update({f"set_{n}": cls.__dict__[n].__set__ for n in names})
    body = "".join(f"    set_{n}(o, {n})\n" for n in names)
    exec(f"def build({', '.join(names)}):\n    o = new(cls)\n{body}    return o\n", env)  # noqa: S102
    return env["build"]


new_path_attrs = frozen_builder(PathAttrs)
EMPTY = AttrInfo(None, None, None, 0, 0, ())
_new_info = functools.partial(tuple.__new__, AttrInfo)


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


def _communities(raw: bytes) -> tuple[str, ...]:
    return tuple([f"{v >> 16}:{v & 0xFFFF}" for v in sorted(_u32s(raw, 0, len(raw) >> 2))])


def _large(raw: bytes) -> tuple[str, ...]:
    it = iter(_u32s(raw, 0, len(raw) >> 2))
    return tuple([f"{a}:{b}:{c}" for a, b, c in sorted(set(zip(it, it, it)))])


def _extended(raw: bytes) -> tuple[str, ...]:
    return tuple([ext_text(c) for c in sorted(raw[j:j + 8] for j in range(0, len(raw), 8))])


def _addresses(raw: bytes) -> tuple[str, ...]:
    return tuple([_ntop(_AF_INET, raw[i:i + 4]) for i in range(0, len(raw), 4)])


def _as_path2(raw: bytes) -> tuple | bool:
    """``(segments, flattened)`` of an AS_PATH value of a 2-octet session; False if malformed."""
    segs = segments(raw, 0, len(raw), 2)
    return False if segs is None else (segs, flatten(segs))


def _as_path4(raw: bytes) -> tuple | bool:
    segs = segments(raw, 0, len(raw), 4)
    return False if segs is None else (segs, flatten(segs))


def _next_hop(raw: bytes) -> tuple[str, str | None]:
    text = _ntop(_AF_INET, raw)
    why = martian_v4(raw)
    return text, (f"NEXT_HOP {text} {why}" if why else None)


# Memos of decoded values by their octets: values repeat across UPDATEs far more than whole
# attribute sets do (one MED per route, the same AS paths, next hops and communities). Pure
# memoisation, bounded: a memo is cleared when full.
MEMO_SIZE = 1 << 14
_PATHS2: dict = {}
_PATHS4: dict = {}
_NEXT_HOPS: dict = {}
_COMMS: dict = {}
_LARGE: dict = {}
_EXT: dict = {}
_CLUSTERS: dict = {}


def clear_memos() -> None:
    """Forget every memoised value (benchmarks start cold with it)."""
    for memo in (_PATHS2, _PATHS4, _NEXT_HOPS, _COMMS, _LARGE, _EXT, _CLUSTERS):
        memo.clear()


def _cached(memo: dict, build, raw: bytes):
    value = memo.get(raw)
    if value is None:
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        value = memo[raw] = build(raw)
    return value


def _len_error(name: str, ln: int, want: str, level: int = WITHDRAW) -> tuple:
    return (level, f"{name} of {ln} octets (expected {want})", 3, 5, b"")


def parse_attributes(block: bytes, start: int, asn4: bool, values: dict | None = None
                     ) -> tuple[AttrInfo, list | None]:
    """Parse ``block[start:]`` (see the module DOC). Never raises on malformed input. `values`
    interns the `PathAttrs` (field values -> the one object with them; bounded by the caller)."""
    errors: list | None = None
    mp = None
    i, n = start, len(block)
    seen = present = 0
    origin = 0
    path = path4 = next_hop = med = local_pref = originator = agg = agg4 = None
    comms = large = ext = cluster = ()
    atomic = False
    while i < n:
        if n - i < 3:
            errors = _add(errors, (WITHDRAW, f"{n - i} octets left after the last path attribute", 3, 1, b""))
            break
        flags = block[i]
        t = block[i + 1]
        if flags & 0x10:
            if n - i < 4:
                errors = _add(errors, (WITHDRAW, "3 octets left after the last path attribute", 3, 1, b""))
                break
            ln = (block[i + 2] << 8) | block[i + 3]
            s = i + 4
        else:
            ln = block[i + 2]
            s = i + 3
        e = s + ln
        if e > n:
            name = NAMES.get(t, f"attribute {t}")
            if t == MP_REACH or t == MP_UNREACH:  # its NLRI cannot be found: RFC 7606 3 j
                errors = _add(errors, (RESET, f"{name} length {ln} overruns the path attributes", 3, 5, b""))
                return _info(errors), [None]
            errors = _add(errors, (WITHDRAW, f"{name} length {ln} overruns the path attributes", 3, 5, b""))
            break
        a0 = i
        i = e
        if t == MP_REACH or t == MP_UNREACH:
            if mp is None:
                mp = []
            mp.append((t, flags, s, e, a0))
            continue
        bit = 1 << t
        if seen & bit:
            errors = _add(errors, (DISCARD, f"repeated {NAMES.get(t, f'attribute {t}')} discarded", 3, 1, b""))
            continue
        seen |= bit
        if t <= 3:  # ORIGIN, AS_PATH, NEXT_HOP: present (malformed or not) for RFC 7606 3 d
            present |= bit >> 1
        want = _FLAGS[t]
        if flags & _MASKS[t] != want:
            if want < 0:
                if not flags & 0x80:  # RFC 4271 6.3: the data is the whole attribute
                    errors = _add(errors, (RESET, f"unrecognized well-known attribute {t}", 3, 2, block[a0:e]))
                    return _info(errors), mp
                continue  # unknown optional attribute, transitive or not: ignored
            errors = _add(errors, (WITHDRAW, f"{NAMES[t]} with flags 0x{flags:02x}", 3, 4, b""))
            continue
        if t == 1:
            if ln == 1 and block[s] <= 2:
                origin = block[s]
            else:
                errors = _add(errors, _len_error("ORIGIN", ln, "1") if ln != 1 else
                              (WITHDRAW, f"ORIGIN value {block[s]} undefined", 3, 6, b""))
        elif t == 2:
            if ln:
                raw = block[s:e]
                path = (_PATHS4 if asn4 else _PATHS2).get(raw)
                if path is None:
                    path = _cached(_PATHS4, _as_path4, raw) if asn4 else _cached(_PATHS2, _as_path2, raw)
                if path is False:
                    errors = _add(errors, (WITHDRAW, "malformed AS_PATH", 3, 11, b""))
        elif t == 3:
            if ln == 4:
                raw = block[s:e]
                next_hop = _NEXT_HOPS.get(raw) or _cached(_NEXT_HOPS, _next_hop, raw)
            else:
                errors = _add(errors, _len_error("NEXT_HOP", ln, "4"))
        elif t == 4 or t == 5:
            if ln != 4:
                errors = _add(errors, _len_error(NAMES[t], ln, "4"))
            elif t == 4:
                med = _from_bytes(block[s:e])
            else:
                local_pref = _from_bytes(block[s:e])
        elif t == 8:
            if ln and not ln & 3:
                raw = block[s:e]
                comms = _COMMS.get(raw) or _cached(_COMMS, _communities, raw)
            else:
                errors = _add(errors, _len_error("COMMUNITIES", ln, "a non-zero multiple of 4"))
        elif t == 32:
            if ln and not ln % 12:
                large = _cached(_LARGE, _large, block[s:e])
            else:
                errors = _add(errors, _len_error("LARGE_COMMUNITY", ln, "a non-zero multiple of 12"))
        elif t == 16:
            if ln and not ln & 7:
                ext = _cached(_EXT, _extended, block[s:e])
            else:
                errors = _add(errors, _len_error("EXTENDED_COMMUNITIES", ln, "a non-zero multiple of 8"))
        elif t == 10:
            if ln and not ln & 3:
                cluster = _cached(_CLUSTERS, _addresses, block[s:e])
            else:
                errors = _add(errors, _len_error("CLUSTER_LIST", ln, "a non-zero multiple of 4"))
        elif t == 9:
            if ln == 4:
                originator = _ntop(_AF_INET, block[s:e])
            else:
                errors = _add(errors, _len_error("ORIGINATOR_ID", ln, "4"))
        elif t == 6:
            if ln:
                errors = _add(errors, _len_error("ATOMIC_AGGREGATE", ln, "0", DISCARD))
            else:
                atomic = True
        elif t == 7:
            if ln == (8 if asn4 else 6):
                agg = _from_bytes(block[s:e - 4])
            else:
                errors = _add(errors, _len_error("AGGREGATOR", ln, "8" if asn4 else "6", DISCARD))
        elif t == 17:
            if not asn4:
                path4 = segments(block, s, e, 4) if ln else None
                if path4 is None:
                    errors = _add(errors, (DISCARD, "malformed AS4_PATH", 3, 11, b""))
        elif t == 18:
            if not asn4:
                if ln == 8:
                    agg4 = _from_bytes(block[s:s + 4])
                else:
                    errors = _add(errors, _len_error("AS4_AGGREGATOR", ln, "8", DISCARD))
        elif t == 25:
            if not ln or ln % 20:
                errors = _add(errors, _len_error("IPV6_EXTENDED_COMMUNITIES", ln, "a non-zero multiple of 20"))
    level = max([e[0] for e in errors]) if errors else 0
    nh_text, nh_error = next_hop if next_hop is not None else (None, None)
    if level >= WITHDRAW:
        return _new_info((None, nh_text, nh_error, present, level, tuple(errors))), mp
    if path:
        if path4 and not (agg is not None and agg4 is not None and agg != AS_TRANS):
            as_path, as_set, confed = flatten(merge_as4(path[0], path4))
        else:
            as_path, as_set, confed = path[1]
    else:
        as_path, as_set, confed = (), False, ()
    key = (origin, as_path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster, confed)
    attrs = values.get(key) if values is not None else None
    if attrs is None:
        attrs = new_path_attrs(_ORIGINS[origin], as_path, as_set, med, local_pref, comms, large, ext, atomic,
                               originator, cluster, confed)
        if values is not None:
            values[key] = attrs
    return _new_info((attrs, nh_text, nh_error, present, level, tuple(errors) if errors else ())), mp


def _add(errors: list | None, error: tuple) -> list:
    if errors is None:
        return [error]
    errors.append(error)
    return errors


def _info(errors: list) -> AttrInfo:
    return AttrInfo(None, None, None, 0, max(e[0] for e in errors), tuple(errors))
