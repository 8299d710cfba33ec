"""ExaBGP's process API, inbound: JSON lines in, typed events out.

DOC: `Decoder.decode(line)` turns one line written by ExaBGP 5 (``encoder json``) into a tuple of
events (`agent.speaker.events`); most lines give exactly one, an UPDATE carrying two families
gives two `RouteUpdate`s, lines of no interest give none. The plain lines ``done``
and ``error`` (command acks, not JSON) become `Ack`. A line that cannot be understood raises
`CodecError`.

Raw UPDATEs. With the raw-UPDATE launcher ExaBGP does not decode UPDATEs: each arrives as
``raw-update PEER CAPS HEX`` (the peer as ExaBGP writes ``neighbor.address.peer``, the session's
capability bits, the UPDATE body after its 19-octet header). The prefix is checked before any
JSON is tried, and the body goes to the agent's own decoder (`agent.speaker.wire`), which gives
the same events as the JSON path below for the same UPDATE, plus `UpdateError` for a malformed
one (RFC 7606). A line whose fields are not a peer address, an integer and hex is a `CodecError`.
Normally the relay has decoded them already (`agent.speaker.relay --decode`): ``wire-events PEER
K DATA`` carries the events of one or more UPDATEs of that peer as records (binary, with K
newline octets, which `agent.speaker.lines` keeps in the line: it is split at its first three
spaces only, and a K that does not match is a `CodecError`), which
`agent.speaker.wire_records.Rebuilder` turns back into the same events; DATA that is not such a
record is a `CodecError`.

What ExaBGP 5.0.15 writes (captured from a real BIRD 2 session in ``tests/data/exabgp/``):

* every object has ``"type"``: ``update`` (UPDATE or End-of-RIB), ``state`` (connected, up,
  down with a reason), ``notification`` (with ``neighbor``: a NOTIFICATION; without: ExaBGP's own
  shutdown notice), ``open``, ``refresh``, ``keepalive`` (received ones become `Keepalive`: the
  implicit End-of-RIB of a peer without graceful restart); the neighbour is
  ``neighbor.address.peer``.
* an UPDATE is ``message.update`` with ``attribute`` (origin, as-path as numbered segments, med,
  local-preference, community ``[[a, b]]``, large-community ``[[a, b, c]]``, extended-community,
  originator-id, cluster-list, atomic-aggregate), ``announce`` as ``{family: {next_hop: [{nlri}]}}``
  and ``withdraw`` as ``{family: [{nlri}]}``; End-of-RIB is ``message.eor`` ``{afi, safi}``.
* an attribute error (RFC 7606) shows as an ``error`` attribute: ExaBGP has already turned
  treat-as-withdraw NLRI into withdraws and drops "discard" UPDATEs itself, so the decoder reports
  the announcements of such an UPDATE as withdrawn (never installs what ExaBGP threw away).

ADD-PATH (RFC 7911): ExaBGP writes each route's path id as ``"path-information": "0.0.0.7"``
beside its ``nlri``; the decoder puts them into `RouteUpdate.path_ids` / `withdrawn_path_ids` as
the wire codec does, so both modes give the same events.

IPv6 next hops. An IPv6 UPDATE may carry a global and a link-local next hop (RFC 2545); ExaBGP then
lists every prefix twice, once under each address. The decoder yields one `Announced` per prefix:
``next_hop`` is the global address, ``link_local`` the link-local one (the alternative to use when
the global address is not on a directly connected network: the resolver decides). A prefix
listed only under a link-local next hop gets that as ``next_hop`` and ``link_local`` None.

NOTIFICATIONs. ExaBGP reports one it received as a ``notification`` object (then the state down),
one it sent (hold timer expired, an error, a teardown without graceful restart) only in the down
state's reason, ``notification sent (CODE,SUBCODE)``: the decoder gives a `Notification` with
``direction="send"`` before that `PeerState`, so consumers decide on events, not on the text.

Graceful restart in OPEN: ExaBGP 5.0.15 prints the two flags under each other's name. Its
per-family list says ``"restart"`` when the F (forwarding state preserved) bit is set, and its
``restart-flags`` say ``"forwarding"`` when the R (restarting) bit is set. `GracefulRestart` has
them the right way round.

Attribute sets are shared: all prefixes of one UPDATE point at one `PathAttrs`, and equal sets of
successive UPDATEs are the same object (a bounded cache in the `Decoder`).

The other direction, typed commands to ExaBGP's text, is `agent.speaker.encoder`.
"""

from __future__ import annotations

import binascii
import collections
import functools
import ipaddress
import json
import re
import sys
from typing import Any

from ..core.model import BgpOrigin, Prefix
from ..core.bgp import (
    Ack,
    Announced,
    EndOfRib,
    Event,
    Family,
    GracefulRestart,
    Keepalive,
    Notification,
    Open,
    PathAttrs,
    PeerState,
    PeerStatus,
    RouteRefresh,
    RouteUpdate,
    SpeakerShutdown,
)
from .wire import WireDecoder
from .wire_records import Rebuilder

_NEWLINE = b"\n"


class CodecError(ValueError):
    """A line from ExaBGP that the decoder does not understand."""


_ACK_DONE = (Ack(True),)
_ACK_ERROR = (Ack(False),)
_ORIGINS = {"igp": BgpOrigin.IGP, "egp": BgpOrigin.EGP, "incomplete": BgpOrigin.INCOMPLETE}
_FAMILIES = {"ipv4 unicast": Family.IPV4_UNICAST, "ipv6 unicast": Family.IPV6_UNICAST}
_SLASH_FAMILIES = {"ipv4/unicast": Family.IPV4_UNICAST, "ipv6/unicast": Family.IPV6_UNICAST}
_STATES = {s.value: s for s in PeerStatus}
_SENT = re.compile(r"notification sent \((\d+),(\d+)\)")
_IGNORED_TYPES = frozenset({"fsm", "signal", "negotiated", "operational"})


def _is_link_local(address: str) -> bool:
    # fe80::/10 is fe80:: .. febf::; ExaBGP writes lower case
    return address[:3] == "fe8" or address[:3] == "fe9" or address[:3] == "fea" or address[:3] == "feb"


# Announced(...) without its Python-level __new__: one per received prefix (hot path)
_new_announced = functools.partial(tuple.__new__, Announced)


class Decoder:
    """Decodes ExaBGP JSON lines; keeps small caches (peer names, attribute sets)."""

    ATTRS_CACHE_SIZE = 4096

    def __init__(self, decoded_by: collections.Counter | None = None) -> None:
        # UPDATE events by where they were decoded: "relay" (wire-events) or "agent" (raw-update)
        self.decoded_by: collections.Counter = decoded_by if decoded_by is not None else collections.Counter()
        self._peers: dict[str | bytes, str] = {}
        self._attrs: dict[PathAttrs, PathAttrs] = {}
        self.wire = WireDecoder()  # raw-update lines
        self.records = Rebuilder()  # wire-events lines (decoded by the relay)

    def decode(self, line: str | bytes) -> tuple[Event, ...]:
        if isinstance(line, bytes):
            if line[:12] == b"wire-events ":
                return self._records(line.split(b" ", 3))  # (DATA is binary: only three spaces split)
            if line[:11] == b"raw-update ":
                return self._raw(line.split())
            line = line.decode("utf-8", "replace")
        line = line.strip()
        if line[:11] == "raw-update ":
            return self._raw(line.split())
        if line == "done":
            return _ACK_DONE
        if line == "error":
            return _ACK_ERROR
        if not line:
            return ()
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise CodecError(f"not JSON and not an ack: {line[:200]!r}") from exc
        if not isinstance(obj, dict):
            raise CodecError(f"not a JSON object: {line[:200]!r}")
        kind = obj.get("type")
        try:
            if kind == "update":
                return self._update(obj)
            if kind == "state":
                return self._state(obj)
            if kind == "notification":
                return self._notification(obj)
            if kind == "open":
                return self._open(obj)
            if kind == "refresh":
                return self._refresh(obj)
            if kind == "keepalive":
                neighbor = obj["neighbor"]
                return () if neighbor.get("direction", "receive") != "receive" else (Keepalive(self._peer(neighbor)),)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CodecError(f"cannot decode {kind} message: {exc!r}: {line[:300]!r}") from exc
        if kind in _IGNORED_TYPES:
            return ()
        raise CodecError(f"unknown message type {kind!r}: {line[:200]!r}")

    # ---- pieces -------------------------------------------------------------------------------

    def _peer(self, neighbor: dict) -> str:
        return self._address(neighbor["address"]["peer"])

    def _address(self, text: str | bytes) -> str:
        peer = self._peers.get(text)
        if peer is None:
            peer = sys.intern(str(ipaddress.ip_address(text.decode() if isinstance(text, bytes) else text)))
            self._peers[text] = peer
        return peer

    def _raw(self, parts: list) -> tuple[Event, ...]:
        """``raw-update PEER CAPS HEX``: an UPDATE body for the wire decoder (`agent.speaker.wire`)."""
        try:
            _, peer, caps, body = parts
            events = self.wire.decode(self._address(peer), int(caps), binascii.unhexlify(body))
            self.decoded_by["agent"] += len(events)
            return events
        except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
            raise CodecError(f"malformed raw-update line: {exc!r}: {b' '.join(map(_b, parts))[:200]!r}") from exc

    def _records(self, parts: list) -> tuple[Event, ...]:
        """``wire-events PEER K DATA``: UPDATEs the relay decoded (`agent.speaker.wire_records`;
        DATA holds K newlines: `agent.speaker.lines`)."""
        try:
            _, peer, k, data = parts
            held = data.count(_NEWLINE)
            if held != int(k):
                raise ValueError(f"{held} newlines in DATA, the header says {int(k)}")
            events = self.records.events_of(self._address(peer), data)
            self.decoded_by["relay"] += self.records.messages
            return events
        except (ValueError, UnicodeDecodeError) as exc:  # (RecordError is a ValueError)
            raise CodecError(f"malformed wire-events line: {exc!r}: {b' '.join(map(_b, parts))[:200]!r}") from exc

    def _update(self, obj: dict) -> tuple[Event, ...]:
        neighbor = obj["neighbor"]
        peer = self._peer(neighbor)
        message = neighbor["message"]
        eor = message.get("eor")
        if eor is not None:
            family = Family.from_afi_safi(eor["afi"], eor["safi"])
            return (EndOfRib(peer, family),) if family is not None else ()
        update = message["update"]
        raw_attrs = update.get("attribute")
        attrs = self.attrs(raw_attrs) if raw_attrs else PathAttrs()
        broken = bool(raw_attrs) and "error" in raw_attrs
        announced: dict[Family, list[Announced]] = {}
        withdrawn: dict[Family, list[Prefix]] = {}
        ids: dict[Family, list[int]] = {}  # ADD-PATH: path ids of the announced routes, in order
        wd_ids: dict[Family, list[int]] = {}  # and of the withdrawn ones
        for fam_name, nlris in update.get("withdraw", {}).items():
            family = _FAMILIES.get(fam_name)
            if family is not None:
                withdrawn.setdefault(family, []).extend(Prefix.parse(n["nlri"]) for n in nlris)
                if nlris and "path-information" in nlris[0]:
                    wd_ids.setdefault(family, []).extend(_path_id(n) for n in nlris)
        for fam_name, by_nexthop in update.get("announce", {}).items():
            family = _FAMILIES.get(fam_name)
            if family is None:
                continue
            parse = Prefix.parse
            if family is Family.IPV6_UNICAST:
                routes, path_ids = _announced_v6(by_nexthop, attrs)
            else:
                routes = [_new_announced((parse(n["nlri"]), nh, attrs, None))
                          for nh, nlris in by_nexthop.items() for n in nlris]
                path_ids = [_path_id(n) for nlris in by_nexthop.values() for n in nlris] \
                    if any(nlris and "path-information" in nlris[0] for nlris in by_nexthop.values()) else None
            if broken:
                withdrawn.setdefault(family, []).extend(r.prefix for r in routes)
                if path_ids is not None:
                    wd_ids.setdefault(family, []).extend(path_ids)
            else:
                announced[family] = routes
                if path_ids is not None:
                    ids[family] = path_ids
        out = []
        for family in (Family.IPV4_UNICAST, Family.IPV6_UNICAST):
            a, w = announced.get(family), withdrawn.get(family)
            if a or w:
                pa, pw = ids.get(family), wd_ids.get(family)
                has_ids = pa is not None or pw is not None
                out.append(RouteUpdate(peer, family, tuple(a or ()), tuple(w or ()),
                                       tuple(pa or ()) if has_ids else None, tuple(pw or ()) if has_ids else None))
        return tuple(out)

    def attrs(self, raw: dict[str, Any]) -> PathAttrs:
        """A shared `PathAttrs` for ExaBGP's ``attribute`` object."""
        as_path: list[int] = []
        as_set = False
        segments = raw.get("as-path")
        if segments:
            for _, seg in sorted(segments.items(), key=lambda kv: int(kv[0])):
                if seg["element"] == "as-set":
                    as_set = True
                as_path.extend(int(a) for a in seg["value"])
        ext = raw.get("extended-community")
        value = PathAttrs(
            origin=_ORIGINS[raw.get("origin", "igp")],
            as_path=tuple(as_path),
            as_set=as_set,
            med=raw.get("med"),
            local_pref=raw.get("local-preference"),
            communities=tuple(f"{a}:{b}" for a, b in raw.get("community", ())),
            large_communities=tuple(f"{a}:{b}:{c}" for a, b, c in raw.get("large-community", ())),
            extended_communities=tuple(e.get("string") or hex(e["value"]) for e in ext) if ext else (),
            atomic_aggregate=bool(raw.get("atomic-aggregate", False)),
            originator_id=raw.get("originator-id"),
            cluster_list=tuple(raw.get("cluster-list", ())),
        )
        cache = self._attrs
        shared = cache.get(value)
        if shared is None:
            if len(cache) >= self.ATTRS_CACHE_SIZE:
                cache.clear()
            cache[value] = shared = value
        return shared

    def _state(self, obj: dict) -> tuple[Event, ...]:
        neighbor = obj["neighbor"]
        state = _STATES[neighbor["state"]]
        peer, reason = self._peer(neighbor), neighbor.get("reason", "")
        down = (PeerState(peer, state, reason),)
        sent = _SENT.match(reason) if state is PeerStatus.DOWN else None
        if sent is not None:  # ExaBGP reports a NOTIFICATION it sent only in this text
            return (Notification(peer, int(sent[1]), int(sent[2]), b"", "send"), *down)
        return down

    def _notification(self, obj: dict) -> tuple[Event, ...]:
        neighbor = obj.get("neighbor")
        if neighbor is None:
            if obj.get("notification") == "shutdown":
                return (SpeakerShutdown(),)
            raise ValueError("notification without neighbor")
        n = neighbor["notification"]
        data = n.get("data", "")
        raw = bytes.fromhex(data[2:] if data.startswith("0x") else data)
        return (Notification(self._peer(neighbor), int(n["code"]), int(n["subcode"]), raw,
                             neighbor.get("direction", "receive")),)

    def _open(self, obj: dict) -> tuple[Event, ...]:
        neighbor = obj["neighbor"]
        if neighbor.get("direction", "receive") != "receive":
            return ()
        o = neighbor["open"]
        caps: dict[str, Any] = o.get("capabilities", {})
        families: list[Family] = []
        gr = None
        asn = int(o["asn"])
        four = False
        for code, cap in caps.items():
            if code == "1":
                families += [f for f in (_SLASH_FAMILIES.get(x) for x in cap.get("families", ())) if f]
            elif code == "64":
                flags = cap.get("address-family-flags", {})
                gr_fams = tuple(f for f in (_SLASH_FAMILIES.get(k) for k in flags) if f)
                # ExaBGP's labels are swapped: "restart" per family is the F bit, "forwarding"
                # in restart-flags is the R bit
                fwd = tuple(_SLASH_FAMILIES[k] for k, v in flags.items()
                            if k in _SLASH_FAMILIES and "restart" in v)
                gr = GracefulRestart(int(cap["time"]), "forwarding" in cap.get("restart-flags", ()),
                                     gr_fams, fwd)
            elif code == "65":
                four = True
                asn = int(cap.get("asn4", asn))
        return (Open(
            peer=self._peer(neighbor),
            asn=asn,
            hold_time=int(o["hold_time"]),
            router_id=o["router_id"],
            families=tuple(dict.fromkeys(families)),
            graceful_restart=gr,
            route_refresh="2" in caps,
            four_byte_asn=four,
            capabilities=tuple(sorted(int(c) for c in caps)),
        ),)

    def _refresh(self, obj: dict) -> tuple[Event, ...]:
        neighbor = obj["neighbor"]
        rr = neighbor["route-refresh"]
        family = Family.from_afi_safi(rr["afi"], rr["safi"])
        subtype = {"query": "refresh"}.get(rr.get("subtype", "query"), rr.get("subtype"))
        return (RouteRefresh(self._peer(neighbor), family, subtype),)


def _path_id(n: dict) -> int:
    """ExaBGP's ``"path-information": "0.0.0.7"`` (ADD-PATH) as an int; 0 when absent."""
    text = n.get("path-information")
    return int(ipaddress.IPv4Address(text)) if text else 0


def _announced_v6(by_nexthop: dict[str, list], attrs: PathAttrs) -> tuple[list[Announced], list[int] | None]:
    """The announced IPv6 routes (one per prefix and path id: ExaBGP lists a route under its
    global and its link-local next hop) and their path ids (None without ADD-PATH)."""
    addpath = any(nlris and "path-information" in nlris[0] for nlris in by_nexthop.values())
    if len(by_nexthop) == 1:
        ((nh, nlris),) = by_nexthop.items()
        return [Announced(Prefix.parse(n["nlri"]), nh, attrs) for n in nlris], \
            [_path_id(n) for n in nlris] if addpath else None
    glob: dict[tuple[str, int], str] = {}
    link: dict[tuple[str, int], str] = {}
    for nh, nlris in by_nexthop.items():
        target = link if _is_link_local(nh) else glob
        for n in nlris:
            target.setdefault((n["nlri"], _path_id(n) if addpath else 0), nh)
    keys = [*glob, *(k for k in link if k not in glob)]
    out = [Announced(Prefix.parse(k[0]), glob[k], attrs, link.get(k)) if k in glob
           else Announced(Prefix.parse(k[0]), link[k], attrs) for k in keys]
    return out, [k[1] for k in keys] if addpath else None


def _b(part: str | bytes) -> bytes:
    return part if isinstance(part, bytes) else part.encode()


_DEFAULT_DECODER = Decoder()


def decode(line: str | bytes) -> tuple[Event, ...]:
    """Decode one line with a module-wide `Decoder`."""
    return _DEFAULT_DECODER.decode(line)
