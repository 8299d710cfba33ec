"""BGP path attributes off the wire, with the RFC 7606 outcome of every error: `parse_attributes`.

DOC: pure functions (the caches live in `agent.speaker.wire.WireDecoder`, the memos of decoded
values in `agent.speaker.wire_values`).
`parse_attributes(block, start, asn4)` reads the path attribute block of one UPDATE from offset
`start` and returns ``(AttrInfo, mp)``: `AttrInfo` is everything the attributes say
(the `PathAttrs`, the NEXT_HOP, which mandatory attributes were present, the errors) and depends
on the bytes and `asn4` only, so the caller may cache it by those bytes; `mp` lists the
MP_REACH_NLRI / MP_UNREACH_NLRI attributes found (``(type, flags, start, end, attr_start)``),
which carry NLRI and are the caller's to parse (`agent.speaker.wire`).

Two readers, one result: `parse_usual` reads the block every common speaker writes on a
4-octet session (ORIGIN, one AS_SEQUENCE, then the usual attributes in type order, no error) in
straight-line code, and `parse_general`, the general loop, reads any block; a block
`parse_usual` does not recognise goes to `parse_general`. At a full table (every attribute set
distinct) this is the relay's largest step: `parse_usual` takes ~30 % less time per UPDATE
(docs/benchmarks.md).

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

LOCAL_PREF, ORIGINATOR_ID and CLUSTER_LIST from an external peer are to be discarded (RFC 7606
7.5, 7.9, 7.10), but the codec does not know the session type: the import side ignores LOCAL_PREF
from eBGP peers, and nothing reads the other two.

How values are decoded and written (AS paths, communities, next hops): `agent.speaker.wire_values`.
"""

from __future__ import annotations

import functools
import socket
import struct
from typing import NamedTuple

from ..core.bgp import PathAttrs
from ..core.communities import octets
from ..core.model import BgpOrigin
from .wire_values import (
    AS_TRANS, MEMO_AS_PATHS2, MEMO_AS_PATHS4, MEMO_CLUSTERS, MEMO_COMMS, MEMO_EXT, MEMO_LARGE, MEMO_NEXT_HOPS, as_path2, as_path4, cached,
    community_list, extended_texts, flatten, ipv4_list, large_list, merge_as4, next_hop_text,
    segments,
)

DISCARD, WITHDRAW, RESET = 1, 2, 3
PRESENT_ORIGIN, PRESENT_AS_PATH, PRESENT_NEXT_HOP = 1, 2, 4  # 1 << (type - 1)
MP_REACH, MP_UNREACH = 14, 15

NAMES = {1: "ORIGIN", 2: "AS_PATH", 3: "NEXT_HOP", 4: "MULTI_EXIT_DISC", 5: "LOCAL_PREF",
         6: "ATOMIC_AGGREGATE", 7: "AGGREGATOR", 8: "COMMUNITIES", 9: "ORIGINATOR_ID",
         10: "CLUSTER_LIST", 14: "MP_REACH_NLRI", 15: "MP_UNREACH_NLRI", 16: "EXTENDED_COMMUNITIES",
         17: "AS4_PATH", 18: "AS4_AGGREGATOR", 25: "IPV6_EXTENDED_COMMUNITIES", 32: "LARGE_COMMUNITY"}
# The flags check as one table lookup by ``type << 8 | flags`` (see `_flag_check`): 0 the flags are
# right, FLAGS_WRONG the Optional/Transitive bits conflict with the type (RFC 7606 3 c) or a
# well-known or optional non-transitive attribute has the Partial bit (RFC 4271 4.3; FRR checks
# it the same way), UNKNOWN_OPTIONAL / UNKNOWN_WELL_KNOWN a type this codec does not know, MP an
# MP_REACH_NLRI / MP_UNREACH_NLRI (checked by the caller).
FLAGS_WRONG, UNKNOWN_OPTIONAL, UNKNOWN_WELL_KNOWN, MP = 1, 2, 3, 4
_KNOWN = {1: 0x40, 2: 0x40, 3: 0x40, 4: 0x80, 5: 0x40, 6: 0x40, 7: 0xC0, 8: 0xC0, 9: 0x80, 10: 0x80,
          16: 0xC0, 17: 0xC0, 18: 0xC0, 25: 0xC0, 32: 0xC0}


def _flag_check(t: int, flags: int) -> int:
    if t == MP_REACH or t == MP_UNREACH:
        return MP
    want = _KNOWN.get(t)
    if want is None:
        return UNKNOWN_OPTIONAL if flags & 0x80 else UNKNOWN_WELL_KNOWN
    return 0 if flags & (0xC0 if want == 0xC0 else 0xE0) == want else FLAGS_WRONG


_CHECKS = bytes(_flag_check(t, f) for t in range(256) for f in range(256))
_ORIGINS = (BgpOrigin.IGP, BgpOrigin.EGP, BgpOrigin.INCOMPLETE)
_ntop = socket.inet_ntop
_AF_INET = socket.AF_INET
_from_bytes = int.from_bytes
# `parse_usual`: the unpackers of AS_SEQUENCEs of 0-255 4-octet AS numbers, by count; the flags of the
# attributes it reads after the AS_PATH (without the Extended Length bit)
_PATH_UNPACK = tuple(struct.Struct(f">{count}I").unpack_from for count in range(256))
_USUAL_FLAGS = {3: 0x40, 4: 0x80, 5: 0x40, 6: 0x40, 7: 0xC0, 8: 0xC0, 16: 0xC0, 32: 0xC0}


class AttrInfo(NamedTuple):
    """What the (non-MP) path attributes of an UPDATE say; a function of their bytes and asn4."""

    attrs: PathAttrs | None  # None when an error makes the UPDATE a treat-as-withdraw
    next_hop: str | None  # NEXT_HOP as text (the next hop of the IPv4 NLRI field)
    next_hop_error: str | None  # why that NEXT_HOP cannot be used (the routes are withdrawn)
    present: int  # PRESENT_* bits of the mandatory attributes seen
    level: int  # the strongest error (0: none)
    errors: tuple  # (level, reason, code, subcode, data), in the order met
    ok: bool = False  # a good set for IPv4 NLRI: no error, ORIGIN, AS_PATH and a usable NEXT_HOP


new_path_attrs = functools.partial(tuple.__new__, PathAttrs)  # PathAttrs((fields ...)), no Python __new__
EMPTY = AttrInfo(None, None, None, 0, 0, (), False)
_new_info = functools.partial(tuple.__new__, AttrInfo)


def _len_error(name: str, ln: int, want: str, level: int = WITHDRAW) -> tuple:
    return (level, f"{name} of {ln} octets (expected {want})", 3, 5, b"")


def parse_attributes(block: bytes, start: int, asn4: bool, values: dict | None = None
                     ) -> tuple[AttrInfo, list | None]:
    """Parse ``block[start:]`` (see the module DOC). Never raises on malformed input. `values`
    interns the `PathAttrs` (field values -> the one object with them; bounded by the caller)."""
    if asn4:
        info = parse_usual(block, start, values)
        if info is not None:
            return info, None
    return parse_general(block, start, asn4, values)


def parse_usual(block: bytes, i: int, values: dict | None) -> AttrInfo | None:
    """The AttrInfo of the usual attribute block of a 4-octet session, or None for any other
    (then `parse_general` reads it; both give equal results, tests/test_wire_usual.py): ORIGIN,
    an AS_PATH of one AS_SEQUENCE, then any of NEXT_HOP, MULTI_EXIT_DISC, LOCAL_PREF, ATOMIC_AGGREGATE,
    AGGREGATOR, COMMUNITIES, EXTENDED_COMMUNITIES and LARGE_COMMUNITY in type order, each once,
    with the flags the RFCs give it (the Extended Length bit either way) and a valid length;
    nothing else, no error. BIRD writes every UPDATE so (all its captured UPDATEs take this
    path), and straight-line code reads it in far fewer steps than the general loop."""
    n = len(block)
    try:  # (a block cut short raises IndexError: the general loop reports it)
        if block[i:i + 3] != b"\x40\x01\x01" or block[i + 3] > 2:
            return None
        flags = block[i + 4]
        if flags == 0x40:
            ln, s = block[i + 6], i + 7
        elif flags == 0x50:
            ln, s = (block[i + 6] << 8) | block[i + 7], i + 8
        else:
            return None
        count = block[s + 1]
        p = s + ln
        if block[i + 5] != 2 or block[s] != 2 or ln != (count << 2) + 2 or not count or p > n:
            return None
        asns = _PATH_UNPACK[count](block, s + 2)
        hop = med = local_pref = None
        comms = large = ext = ()
        atomic = False
        last = 2
        # NEXT_HOP and COMMUNITIES as they nearly always come (the loop below would read them too)
        if block[p:p + 3] == b"\x40\x03\x04":
            s, p = p + 3, p + 7
            if p > n:
                return None
            raw = block[s:p]
            hop = MEMO_NEXT_HOPS.get(raw) or cached(MEMO_NEXT_HOPS, next_hop_text, raw)
            last = 3
        if block[p:p + 2] == b"\xc0\x08":
            ln = block[p + 2]
            s = p + 3
            p = s + ln
            if not ln or ln & 3 or p > n:
                return None
            raw = block[s:p]
            comms = MEMO_COMMS.get(raw)
            if comms is None:
                comms = cached(MEMO_COMMS, community_list, raw)
            last = 8
        while p < n:
            flags, t = block[p], block[p + 1]
            if flags & 0x10:
                ln, s = (block[p + 2] << 8) | block[p + 3], p + 4
            else:
                ln, s = block[p + 2], p + 3
            p = s + ln
            if t <= last or _USUAL_FLAGS.get(t) != flags & 0xEF or p > n:
                return None
            last = t
            if t == 8:
                if not ln or ln & 3:
                    return None
                raw = block[s:p]
                comms = MEMO_COMMS.get(raw)
                if comms is None:
                    comms = cached(MEMO_COMMS, community_list, raw)
            elif t == 3:
                if ln != 4:
                    return None
                raw = block[s:p]
                hop = MEMO_NEXT_HOPS.get(raw) or cached(MEMO_NEXT_HOPS, next_hop_text, raw)
            elif t == 32:
                if not ln or ln % 12:
                    return None
                large = cached(MEMO_LARGE, large_list, block[s:p])
            elif t == 4 or t == 5:
                if ln != 4:
                    return None
                if t == 4:
                    med = _from_bytes(block[s:p])
                else:
                    local_pref = _from_bytes(block[s:p])
            elif t == 16:
                if not ln or ln & 7:
                    return None
                ext = cached(MEMO_EXT, extended_texts, block[s:p])
            elif t == 6:
                if ln:
                    return None
                atomic = True
            elif ln != 8:  # AGGREGATOR (validated and dropped)
                return None
    except IndexError:
        return None
    attrs = _intern(values, block[i + 3], asns, False, med, local_pref, comms, large, ext, atomic, None, (), ())
    if hop is None:
        return _new_info((attrs, None, None, 3, 0, (), False))
    return _new_info((attrs, hop[0], hop[1], 7, 0, (), hop[1] is None))


def _intern(values: dict | None, origin: int, as_path: tuple, as_set: bool, med: int | None, local_pref: int | None,
            comms, large, ext: tuple, atomic: bool, originator: str | None, cluster: tuple, confed: tuple) -> PathAttrs:
    """The one `PathAttrs` of these fields (origin as its number) in `values` (or a new one): both
    readers intern through here, so equal sets are one object whichever read them."""
    key = (origin, as_path, as_set, med, local_pref, octets(comms), octets(large), ext, atomic, originator, cluster,
           confed)  # (packed communities by their octets: their own hash makes texts)
    attrs = values.get(key) if values is not None else None
    if attrs is None:
        attrs = new_path_attrs((_ORIGINS[origin], as_path, as_set, med, local_pref, comms, large, ext, atomic,
                                originator, cluster, confed))
        if values is not None:
            values[key] = attrs
    return attrs


def parse_general(block: bytes, start: int, asn4: bool, values: dict | None) -> tuple[AttrInfo, list | None]:
    """`parse_attributes` for any block: the general loop over the attributes."""
    errors: list | None = None
    mp = None
    i, n = start, len(block)
    seen = origin = 0
    checks = _CHECKS
    path = path4 = next_hop = med = local_pref = originator = agg = agg4 = None
    comms = large = ext = cluster = ()
    atomic = False
    while i < n:
        try:  # (an attribute header cut short raises here; zero-cost otherwise)
            flags = block[i]
            t = block[i + 1]
            if flags & 0x10:
                ln = (block[i + 2] << 8) | block[i + 3]
                s = i + 4
            else:
                ln = block[i + 2]
                s = i + 3
        except IndexError:  # RFC 7606 4: fewer octets left than an attribute header
            errors = _add(errors, (WITHDRAW, f"{n - i} octets left after the last path attribute", 3, 1, b""))
            break
        i = e = s + ln
        if e > n:
            name = NAMES.get(t, f"attribute {t}")
            if t == MP_REACH or t == MP_UNREACH:  # its NLRI cannot be found: RFC 7606 3 j
                errors = _add(errors, (RESET, f"{name} length {ln} overruns the path attributes", 3, 5, b""))
                return _info(errors), [None]
            errors = _add(errors, (WITHDRAW, f"{name} length {ln} overruns the path attributes", 3, 5, b""))
            break
        check = checks[(t << 8) | flags]
        bit = 1 << t
        if check or seen & bit:  # the unusual cases, off the common path
            if check == MP:
                if mp is None:
                    mp = []
                mp.append((t, flags, s, e, s - (4 if flags & 0x10 else 3)))
            elif check == UNKNOWN_WELL_KNOWN:  # RFC 4271 6.3: the data is the whole attribute
                a0 = s - (4 if flags & 0x10 else 3)
                errors = _add(errors, (RESET, f"unrecognized well-known attribute {t}", 3, 2, block[a0:e]))
                return _info(errors), mp
            elif check == UNKNOWN_OPTIONAL:
                pass  # unknown optional attribute, transitive or not: ignored
            elif seen & bit:
                errors = _add(errors, (DISCARD, f"repeated {NAMES[t]} discarded", 3, 1, b""))
            else:  # FLAGS_WRONG
                seen |= bit
                errors = _add(errors, (WITHDRAW, f"{NAMES[t]} with flags 0x{flags:02x}", 3, 4, b""))
            continue
        seen |= bit
        if t == 1:
            if ln == 1 and block[s] <= 2:
                origin = block[s]
            else:
                errors = _add(errors, _len_error("ORIGIN", ln, "1") if ln != 1 else
                              (WITHDRAW, f"ORIGIN value {block[s]} undefined", 3, 6, b""))
        elif t == 2:
            if ln:
                raw = block[s:e]
                path = (MEMO_AS_PATHS4 if asn4 else MEMO_AS_PATHS2).get(raw)
                if path is None:
                    path = cached(MEMO_AS_PATHS4, as_path4, raw) if asn4 else cached(MEMO_AS_PATHS2, as_path2, raw)
                if path is False:
                    errors = _add(errors, (WITHDRAW, "malformed AS_PATH", 3, 11, b""))
        elif t == 3:
            if ln == 4:
                raw = block[s:e]
                next_hop = MEMO_NEXT_HOPS.get(raw) or cached(MEMO_NEXT_HOPS, next_hop_text, raw)
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
                comms = MEMO_COMMS.get(raw)
                if comms is None:
                    comms = cached(MEMO_COMMS, community_list, raw)
            else:
                errors = _add(errors, _len_error("COMMUNITIES", ln, "a non-zero multiple of 4"))
        elif t == 32:
            if ln and not ln % 12:
                large = cached(MEMO_LARGE, large_list, block[s:e])
            else:
                errors = _add(errors, _len_error("LARGE_COMMUNITY", ln, "a non-zero multiple of 12"))
        elif t == 16:
            if ln and not ln & 7:
                ext = cached(MEMO_EXT, extended_texts, block[s:e])
            else:
                errors = _add(errors, _len_error("EXTENDED_COMMUNITIES", ln, "a non-zero multiple of 8"))
        elif t == 10:
            if ln and not ln & 3:
                cluster = cached(MEMO_CLUSTERS, ipv4_list, block[s:e])
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
    present = (seen >> 1) & 7  # ORIGIN, AS_PATH, NEXT_HOP seen (malformed or not: RFC 7606 3 d)
    level = max([e[0] for e in errors]) if errors else 0
    nh_text, nh_error = next_hop if next_hop is not None else (None, None)
    if level >= WITHDRAW:
        return _new_info((None, nh_text, nh_error, present, level, tuple(errors), False)), mp
    if path:
        if path4 and not (agg is not None and agg4 is not None and agg != AS_TRANS):
            as_path, as_set, confed = flatten(merge_as4(path[0], path4))
        else:
            as_path, as_set, confed = path[1]
    else:
        as_path, as_set, confed = (), False, ()
    attrs = _intern(values, origin, as_path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster,
                    confed)
    if errors:
        return _new_info((attrs, nh_text, nh_error, present, level, tuple(errors), False)), mp
    return _new_info((attrs, nh_text, nh_error, present, 0, (), present == 7 and nh_error is None)), mp


def _add(errors: list | None, error: tuple) -> list:
    if errors is None:
        return [error]
    errors.append(error)
    return errors


def _info(errors: list) -> AttrInfo:
    return AttrInfo(None, None, None, 0, max(e[0] for e in errors), tuple(errors), False)
