"""The agent's own BGP UPDATE decoder: an UPDATE body in, the events of `agent.core.bgp` out.

DOC: with the raw-UPDATE launcher ExaBGP hands every received UPDATE over undecoded, as the line
``raw-update PEER CAPS HEX`` (`agent.speaker.codec` reads it); `WireDecoder.decode(peer, caps,
body)` turns the body (the message after its 19-octet header) into exactly the events the JSON
decoder gives for the same UPDATE: one `RouteUpdate` per family (IPv4 unicast from the classic
fields and MP_REACH/MP_UNREACH, IPv6 unicast from MP_REACH/MP_UNREACH), or an `EndOfRib` (the
empty UPDATE for IPv4, an MP_UNREACH_NLRI holding only its AFI/SAFI for that family). Other
families are ignored. `caps` are the session's negotiated capabilities as bit flags: `CAP_ASN4`
(AS numbers of 4 octets), `CAP_ADDPATH_V4` / `CAP_ADDPATH_V6` (ADD-PATH receive, RFC 7911: every
NLRI carries a 4-octet path identifier), `CAP_EXTENDED` (extended messages, RFC 8654).

NLRI fields are read by `agent.speaker.wire_nlri`, path attributes by `agent.speaker.wire_attrs`
(their values by `agent.speaker.wire_values`). ADD-PATH: for a family whose flag is set the
fields are read as ``(path_id, Prefix)`` pairs (`wire_nlri.field_prefixes`) and split at the event
boundary: the `RouteUpdate` gets the prefixes as usual and `path_ids` / `withdrawn_path_ids`
beside them (same order), so two paths of one prefix are two `Announced` of that prefix with two
path ids. Without ADD-PATH those are None and nothing else changes (no step per prefix added).

IPv6 next hops (RFC 2545): 16 octets (global, or link-local alone: kept, the resolver binds it to
the session's interface) or 32 (global then link-local): `Announced.next_hop` is the global one,
`link_local` the link-local one, as the JSON decoder has them; a link-local part of all zeros
is ignored, and an all-zero global part beside a link-local one makes the link-local the next hop.

Errors (RFC 7606; the per-attribute rules are in `agent.speaker.wire_attrs`): a malformed UPDATE
never raises, it gives an `UpdateError` (action, reason, NOTIFICATION code/subcode/data) before
the route events. Session reset (nothing of the UPDATE is used): an UPDATE shorter than 23
octets, or longer than 4096 without extended messages (1/2, Bad Message Length); a
withdrawn-routes or total path-attribute length overrunning the message (3/1); a malformed
withdrawn-routes or NLRI field (3/10); MP_REACH_NLRI / MP_UNREACH_NLRI repeated (3/1), too short,
with a next-hop length other than 4 (IPv4) or 16/32 (IPv6), or with malformed NLRI (3/9, the
attribute as data: RFC 4760 7, RFC 7606 3 j and 7.11); an unrecognized well-known attribute
(3/2). Treat-as-withdraw (every announced prefix of the UPDATE is reported withdrawn): the
attribute errors of `wire_attrs`, ORIGIN or AS_PATH missing while prefixes are announced,
NEXT_HOP missing while the NLRI field is not empty (RFC 7606 3 d; 3/3), MP flag bits in conflict
(3 c). A next hop that is not a usable address (0.0.0.0/8, loopback, multicast, 240/4; for IPv6
::, ::1, ff00::/8) withdraws the prefixes that use it (RFC 7606 7.3, 7.11; reported 3/8). Host
bits set in a prefix are cleared (BIRD and FRR do the same; ExaBGP keeps them and the JSON
decoder then refused the whole line). Only the strongest action is reported, with the reasons of
that level. (Addresses of our own node as next hop are the import guard's to refuse: the codec
does not know them.)

Attribute sets are shared: the non-MP attribute bytes (an MP_REACH/MP_UNREACH first in the block,
where RFC 7606 5.1 puts it, is cut off the key) map to a cached `AttrInfo`; its `PathAttrs` is
interned by field values (`parse_attributes`' `values`), so equal sets are one object whatever
their octets (another NEXT_HOP, another attribute order). Both caches are bounded (cleared when
full), as are the value memos of `wire_values`.
"""

from __future__ import annotations

import socket
from itertools import repeat

from ..core.bgp import Announced, EndOfRib, Event, Family, PathAttrs, RouteUpdate, UpdateAction, UpdateError
from ..core.model import Prefix
from .wire_attrs import (
    EMPTY, MP_UNREACH, NAMES, PRESENT_AS_PATH, PRESENT_NEXT_HOP, PRESENT_ORIGIN, RESET, WITHDRAW,
    AttrInfo, parse_general, parse_usual,
)
from .wire_nlri import UNUSED, field_prefixes
from .wire_values import frozen_builder, martian_v4

V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
CAP_ASN4, CAP_ADDPATH_V4, CAP_ADDPATH_V6, CAP_EXTENDED = 1, 2, 4, 8
MAX_BODY, MAX_BODY_EXTENDED = 4096 - 19, 65535 - 19
NOTIFY_DATA_MAX = 4096 - 21
_ACTIONS = {1: UpdateAction.ATTRIBUTE_DISCARD, 2: UpdateAction.TREAT_AS_WITHDRAW, 3: UpdateAction.SESSION_RESET}

_new_int = int.__new__
_from_bytes = int.from_bytes
_ntop = socket.inet_ntop
_AF_INET, _AF_INET6 = socket.AF_INET, socket.AF_INET6
_V6_FLAG = 1 << 136
_ZERO16 = bytes(16)
_new_tuple = tuple.__new__
_new_route_update = frozen_builder(RouteUpdate)


def _announced(found: list[Prefix], nh: str | None, attrs, link_local: str | None) -> tuple[Announced, ...]:
    """One `Announced` per prefix, all sharing next hop and attributes (no Python step per prefix)."""
    return tuple(map(_new_tuple, repeat(Announced), zip(found, repeat(nh), repeat(attrs), repeat(link_local))))


def _path_update(peer: str, family: Family, entries: list, nh: str | None, attrs, link_local: str | None,
                 withdrawn: list, more: list, more_nh: str | None) -> RouteUpdate:
    """The `RouteUpdate` of an ADD-PATH family from ``(path_id, Prefix)`` entries: announced
    `entries` (next hop `nh`), then `more` (IPv4 in MP_REACH_NLRI: next hop `more_nh`), and the
    `withdrawn` ones; the path ids go beside the prefixes (`RouteUpdate.path_ids`)."""
    routes = _announced([p for _, p in entries], nh, attrs, link_local)
    if more:
        routes += _announced([p for _, p in more], more_nh, attrs, link_local)
    return _new_route_update(peer, family, routes, tuple(p for _, p in withdrawn),
                             tuple(i for i, _ in entries) + tuple(i for i, _ in more),
                             tuple(i for i, _ in withdrawn))


def _is_link_local(addr: bytes) -> bool:
    return addr[0] == 0xFE and addr[1] & 0xC0 == 0x80


def _martian_v6(addr: bytes) -> str | None:
    if addr == _ZERO16:
        return "is the unspecified address"
    if addr == b"\0" * 15 + b"\1":
        return "is the loopback address"
    if addr[0] == 0xFF:
        return "is a multicast address"
    return None


def _reset(peer: str, reason: str, code: int, subcode: int, data: bytes = b"",
           family: Family | None = None) -> tuple[Event, ...]:
    return (UpdateError(peer, UpdateAction.SESSION_RESET, reason, code, subcode, family,
                        bytes(data[:NOTIFY_DATA_MAX])),)


def _error_event(peer: str, errors: list, family: Family | None) -> UpdateError:
    """One event for the strongest action among `errors` (RFC 7606 3 h)."""
    level = max(e[0] for e in errors)
    top = [e for e in errors if e[0] == level]
    reason = "; ".join(dict.fromkeys(e[1] for e in top))
    first = top[0]
    fam = first[5] if len(first) > 5 else family
    return UpdateError(peer, _ACTIONS[level], reason, first[2], first[3], fam, bytes(first[4][:NOTIFY_DATA_MAX]))


class WireDecoder:
    """Decodes UPDATE bodies (see the module DOC); keeps the bounded attribute caches."""

    CACHE_SIZE = 4096

    def __init__(self) -> None:
        self._values: dict[tuple, PathAttrs] = {}  # field values -> the one PathAttrs with them
        self._infos: tuple[dict[bytes, AttrInfo], dict[bytes, AttrInfo]] = ({}, {})  # by asn4
        self._nexthops: dict[bytes, str] = {}

    def decode(self, peer: str, caps: int, body: bytes) -> tuple[Event, ...]:
        """The events of one UPDATE body from `peer`; never raises on malformed input."""
        try:
            return self._decode(peer, caps, body)
        except Exception as exc:  # a bug of ours must not stop the reader: RFC 4271's answer
            return _reset(peer, f"UPDATE not decodable ({exc!r})", 3, 0)

    def _attr_info(self, block: bytes, start: int, asn4: int, looked_up: bool = False
                   ) -> tuple[AttrInfo, list | None]:
        """The AttrInfo of ``block[start:]`` (cached by those bytes when they hold no MP attribute)
        and the MP attributes found there (`looked_up`: the caller found it not cached)."""
        key = block[start:] if start else block
        cache = self._infos[asn4]
        if not looked_up:
            info = cache.get(key)
            if info is not None:
                return info, None
        if len(self._values) >= self.CACHE_SIZE:  # (both: a cached AttrInfo holds an interned set)
            self._values.clear()
            self._infos[0].clear()
            self._infos[1].clear()
        info = parse_usual(block, start, self._values) if asn4 else None  # (`parse_attributes`, inline)
        mp = None
        if info is None:
            info, mp = parse_general(block, start, bool(asn4), self._values)
        if mp is None:  # the key holds no MP attribute: the same bytes mean the same set
            if len(cache) >= self.CACHE_SIZE:
                cache.clear()
            cache[key] = info
        return info, mp

    def _nexthop6(self, raw: bytes) -> str:
        text = self._nexthops.get(raw)
        if text is None:
            if len(self._nexthops) >= self.CACHE_SIZE:
                self._nexthops.clear()
            text = self._nexthops[raw] = _ntop(_AF_INET6, raw)
        return text

    def _decode(self, peer: str, caps: int, body: bytes) -> tuple[Event, ...]:
        n = len(body)
        if n < 4 or n > MAX_BODY and (n > MAX_BODY_EXTENDED or not caps & CAP_EXTENDED):  # RFC 4271 6.1
            why = "shorter than 23 octets" if n < 4 else "without extended messages"
            return _reset(peer, f"UPDATE of {n + 19} octets {why}", 1, 2, min(n + 19, 0xFFFF).to_bytes(2, "big"))
        wl = (body[0] << 8) | body[1]
        if wl + 4 > n:
            return _reset(peer, f"withdrawn routes length {wl} overruns the UPDATE", 3, 1)
        al = (body[wl + 2] << 8) | body[wl + 3]
        a1 = wl + 4 + al
        if a1 > n:
            return _reset(peer, f"total path attribute length {al} overruns the UPDATE", 3, 1)
        if not al:
            if not wl and n == 4:
                return (EndOfRib(peer, V4),)
            return self._general(peer, caps, body, wl, a1, b"", EMPTY, None)
        block = body[wl + 4:a1]
        if al >= 3 and (block[1] == 14 or block[1] == 15):  # MP first (RFC 7606 5.1): off the key
            flags = block[0]
            if flags & 0x10:
                ln, s = ((block[2] << 8) | block[3], 4) if al >= 4 else (al, al)
            else:
                ln, s = block[2], 3
            if s + ln <= al:
                if block[1] == MP_UNREACH and ln == 3 and s + ln == al and not wl and a1 == n:
                    family = _family(block, s)  # End-of-RIB (RFC 4724)
                    return (EndOfRib(peer, family),) if family is not None else ()
                info, more = self._attr_info(block, s + ln, caps & CAP_ASN4)
                mp = [(block[1], flags, s, s + ln, 0)]
                return self._general(peer, caps, body, wl, a1, block, info, mp + more if more else mp)
        info = self._infos[caps & CAP_ASN4].get(block)  # (the cache hit of _attr_info, inline)
        mp = None
        if info is None:
            info, mp = self._attr_info(block, 0, caps & CAP_ASN4, True)
        if mp or wl or not info.ok:
            return self._general(peer, caps, body, wl, a1, block, info, mp)
        attrs = info.attrs
        if a1 == n:
            return ()  # attributes and nothing else
        # the common case: IPv4 prefixes announced with a good attribute set
        nh = info.next_hop
        plen = body[a1]
        if a1 + 1 + ((plen + 7) >> 3) == n and plen <= 32 and not caps & CAP_ADDPATH_V4:  # one prefix
            return self._one4(peer, ((_from_bytes(body[a1 + 1:]) >> UNUSED[plen]) << 8) | plen, nh, attrs)
        found = field_prefixes(body, a1, n, False, caps & CAP_ADDPATH_V4)
        if found is None:
            return _reset(peer, "malformed NLRI field", 3, 10, family=V4)
        if caps & CAP_ADDPATH_V4:
            return (_path_update(peer, V4, found, nh, attrs, None, (), (), None),)
        return self._many4(peer, found, nh, attrs)

    # the common case's events (`wire_records.RecordDecoder` makes its records instead)
    def _one4(self, peer: str, value: int, nh: str | None, attrs: PathAttrs) -> tuple[Event, ...]:
        """IPv4 prefix `value` (a `Prefix` value) announced alone, with a good attribute set."""
        return (_new_route_update(peer, V4, (_new_tuple(Announced, (_new_int(Prefix, value), nh, attrs, None)),),
                                  (), None, None),)

    def _many4(self, peer: str, found: list[Prefix], nh: str | None, attrs: PathAttrs) -> tuple[Event, ...]:
        """IPv4 prefixes announced with a good attribute set (no withdrawals, no MP attribute)."""
        return (_new_route_update(peer, V4, _announced(found, nh, attrs, None), (), None, None),)

    def _general(self, peer: str, caps: int, body: bytes, wl: int, a1: int, block: bytes,
                 info: AttrInfo, mp: list | None) -> tuple[Event, ...]:
        """Any UPDATE: withdrawals, MP attributes, errors (see the module DOC)."""
        if info.level == RESET:
            return (_error_event(peer, list(info.errors), None),)
        n = len(body)
        addpath4 = caps & CAP_ADDPATH_V4
        wd4 = field_prefixes(body, 2, 2 + wl, False, addpath4) if wl else []
        if wd4 is None:
            return _reset(peer, "malformed withdrawn routes field", 3, 10, family=V4)
        an4 = field_prefixes(body, a1, n, False, addpath4) if a1 < n else []
        if an4 is None:
            return _reset(peer, "malformed NLRI field", 3, 10, family=V4)
        errors = list(info.errors) if info.errors else []
        an6: list = []
        wd6: list = []
        mp_an4: list = []
        nh4 = nh6 = ll6 = None
        bad4 = bad6 = None
        if mp:
            if len(mp) > 1 and (sum(1 for m in mp if m[0] == 14) > 1 or sum(1 for m in mp if m[0] == 15) > 1):
                return _reset(peer, "MP_REACH_NLRI or MP_UNREACH_NLRI more than once", 3, 1)
            for t, flags, s, e, a in mp:
                if flags & 0xE0 != 0x80:  # optional non-transitive, not partial
                    errors.append((WITHDRAW, f"{NAMES[t]} with flags 0x{flags:02x}", 3, 4, b""))
                if e - s < (3 if t == MP_UNREACH else 5):
                    return _reset(peer, f"{NAMES[t]} of {e - s} octets", 3, 9, block[a:e])
                family = _family(block, s)
                if family is None:
                    continue  # a family the agent does not handle: ignored
                v6 = family is V6
                addpath = caps & (CAP_ADDPATH_V6 if v6 else CAP_ADDPATH_V4)
                if t == MP_UNREACH:
                    found = field_prefixes(block, s + 3, e, v6, addpath)
                    if found is None:
                        return _reset(peer, f"malformed NLRI in {NAMES[t]}", 3, 9, block[a:e], family)
                    (wd6 if v6 else wd4).extend(found)
                    continue
                nhl = block[s + 3]
                ns, ne = s + 4, s + 4 + nhl
                if ne + 1 > e or nhl != 4 and not v6 or v6 and nhl != 16 and nhl != 32:
                    return _reset(peer, f"{NAMES[t]} next hop of {nhl} octets for {family.value}", 3, 9,
                                  block[a:e], family)
                found = field_prefixes(block, ne + 1, e, v6, addpath)
                if found is None:
                    return _reset(peer, f"malformed NLRI in {NAMES[t]}", 3, 9, block[a:e], family)
                if not v6:
                    raw = block[ns:ne]
                    nh4 = _ntop(_AF_INET, raw)
                    why = martian_v4(raw)
                    bad4 = f"MP_REACH_NLRI next hop {nh4} {why}" if why else None
                    mp_an4 = found
                    continue
                glob, link = block[ns:ns + 16], (block[ns + 16:ne] if nhl == 32 else None)
                if link is not None:
                    if link == _ZERO16:
                        link = None
                    elif glob == _ZERO16:
                        glob, link = link, None
                    elif _is_link_local(glob):
                        glob, link = (link, glob) if not _is_link_local(link) else (glob, None)
                    elif not _is_link_local(link):
                        link = None
                    found = list(dict.fromkeys(found))  # as the JSON decoder, for two next hops
                why = _martian_v6(glob)
                nh6 = self._nexthop6(glob)
                ll6 = self._nexthop6(link) if link is not None else None
                bad6 = f"MP_REACH_NLRI next hop {nh6} {why}" if why else None
                an6 = found
        if an4 or mp_an4 or an6:
            present = info.present
            missing = [name for bit, name in ((PRESENT_ORIGIN, "ORIGIN"), (PRESENT_AS_PATH, "AS_PATH"))
                       if not present & bit]
            if an4 and not present & PRESENT_NEXT_HOP:
                missing.append("NEXT_HOP")
            if missing:
                errors.append((WITHDRAW, f"missing well-known attribute {', '.join(missing)}", 3, 3,
                               bytes([{"ORIGIN": 1, "AS_PATH": 2, "NEXT_HOP": 3}[missing[0]]])))
        families = (V4 if an4 or mp_an4 or wd4 else None, V6 if an6 or wd6 else None)
        single = families[0] if families[1] is None else families[1] if families[0] is None else None
        attrs = info.attrs
        if errors and max(e[0] for e in errors) >= WITHDRAW:
            wd4 = wd4 + an4 + mp_an4
            wd6 = wd6 + an6
            an4 = mp_an4 = an6 = []
        else:
            if an4 and info.next_hop_error:
                errors.append((WITHDRAW, info.next_hop_error, 3, 8, b"", V4))
                wd4, an4 = wd4 + an4, []
            if mp_an4 and bad4:
                errors.append((WITHDRAW, bad4, 3, 8, b"", V4))
                wd4, mp_an4 = wd4 + mp_an4, []
            if an6 and bad6:
                errors.append((WITHDRAW, bad6, 3, 8, b"", V6))
                wd6, an6 = wd6 + an6, []
        out: list[Event] = [_error_event(peer, errors, single)] if errors else []
        if an4 or mp_an4 or wd4:
            nh = info.next_hop
            if addpath4:
                out.append(_path_update(peer, V4, an4, nh, attrs, None, wd4, mp_an4, nh4))
            else:
                routes = _announced(an4, nh, attrs, None)
                if mp_an4:
                    routes += _announced(mp_an4, nh4, attrs, None)
                out.append(_new_route_update(peer, V4, routes, tuple(wd4), None, None))
        if an6 or wd6:
            if caps & CAP_ADDPATH_V6:
                out.append(_path_update(peer, V6, an6, nh6, attrs, ll6, wd6, (), None))
            else:
                out.append(_new_route_update(peer, V6, _announced(an6, nh6, attrs, ll6), tuple(wd6), None, None))
        return tuple(out)


def _family(block: bytes, s: int) -> Family | None:
    """The family of an MP attribute whose value starts at `s` (AFI 2 octets, SAFI 1)."""
    if block[s + 2] != 1 or block[s]:
        return None
    return V4 if block[s + 1] == 1 else V6 if block[s + 1] == 2 else None
