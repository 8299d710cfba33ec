"""BGP messages as bytes, for tests, benchmarks and the raw test speaker (`testlab.rawspeaker`).

DOC: builders, no parsing. Every builder returns bytes and takes the raw values as they go on
the wire, so malformed messages are as easy to build as good ones: give `attr` any flags, type
and value (or an explicit length that lies), `message` any marker, length or type, `update` any
withdrawn-length or attribute-length.

    update(attrs=[origin(0), as_path([65001]), next_hop("192.0.2.1")], nlri=nlri(["10.0.0.0/24"]))
    message(UPDATE, body)                 # header + body
    open_msg(65001, "192.0.2.1", caps=[cap_mp(1, 1), cap_asn4(65001)])

Attribute flags default to what RFC 4271/4760/6793/8092 give the type (optional / transitive);
the extended-length flag is set when the value needs it or when asked (`extended=True`).
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Sequence

MARKER = b"\xff" * 16
OPEN, UPDATE, NOTIFICATION, KEEPALIVE, ROUTE_REFRESH = 1, 2, 3, 4, 5
AS_SET, AS_SEQUENCE, AS_CONFED_SEQUENCE, AS_CONFED_SET = 1, 2, 3, 4
ORIGIN, AS_PATH, NEXT_HOP, MED, LOCAL_PREF, ATOMIC_AGGREGATE, AGGREGATOR, COMMUNITIES = range(1, 9)
ORIGINATOR_ID, CLUSTER_LIST, MP_REACH, MP_UNREACH, EXT_COMMUNITIES, AS4_PATH, AS4_AGGREGATOR = (
    9, 10, 14, 15, 16, 17, 18)
IPV6_EXT_COMMUNITIES, LARGE_COMMUNITIES = 25, 32
AFI_IPV4, AFI_IPV6, SAFI_UNICAST = 1, 2, 1

DEFAULT_FLAGS = {ORIGIN: 0x40, AS_PATH: 0x40, NEXT_HOP: 0x40, MED: 0x80, LOCAL_PREF: 0x40,
                 ATOMIC_AGGREGATE: 0x40, AGGREGATOR: 0xC0, COMMUNITIES: 0xC0, ORIGINATOR_ID: 0x80,
                 CLUSTER_LIST: 0x80, MP_REACH: 0x80, MP_UNREACH: 0x80, EXT_COMMUNITIES: 0xC0,
                 AS4_PATH: 0xC0, AS4_AGGREGATOR: 0xC0, IPV6_EXT_COMMUNITIES: 0xC0, LARGE_COMMUNITIES: 0xC0}


# ---- messages -------------------------------------------------------------------------------

def message(kind: int, body: bytes = b"", *, marker: bytes = MARKER, length: int | None = None) -> bytes:
    """A BGP message: marker, length (default: the true one), type, body."""
    size = 19 + len(body) if length is None else length
    return marker + struct.pack(">HB", size, kind) + body


def keepalive() -> bytes:
    return message(KEEPALIVE)


def notification(code: int, subcode: int, data: bytes = b"") -> bytes:
    return message(NOTIFICATION, bytes([code, subcode]) + data)


def route_refresh(afi: int = AFI_IPV4, safi: int = SAFI_UNICAST, subtype: int = 0) -> bytes:
    """ROUTE-REFRESH (RFC 2918; subtype 1/2: enhanced route refresh begin/end, RFC 7313)."""
    return message(ROUTE_REFRESH, struct.pack(">HBB", afi, subtype, safi))


def open_body(asn: int, router_id: str, hold_time: int = 90, caps: Sequence[bytes] = (),
              version: int = 4) -> bytes:
    """An OPEN body; an ASN above 65535 goes in the OPEN as AS_TRANS (give `cap_asn4` too)."""
    params = b"".join(bytes([2, len(c)]) + c for c in caps)  # one capability per parameter
    return (struct.pack(">BHH", version, asn if asn <= 0xFFFF else 23456, hold_time)
            + ipaddress.IPv4Address(router_id).packed + bytes([len(params)]) + params)


def open_msg(asn: int, router_id: str, hold_time: int = 90, caps: Sequence[bytes] = (), version: int = 4) -> bytes:
    return message(OPEN, open_body(asn, router_id, hold_time, caps, version))


def capability(code: int, value: bytes = b"") -> bytes:
    return bytes([code, len(value)]) + value


def cap_mp(afi: int, safi: int = SAFI_UNICAST) -> bytes:
    return capability(1, struct.pack(">HBB", afi, 0, safi))


def cap_route_refresh() -> bytes:
    return capability(2)


def cap_extended_message() -> bytes:
    return capability(6)


def cap_asn4(asn: int) -> bytes:
    return capability(65, struct.pack(">I", asn))


def cap_addpath(families: Iterable[tuple[int, int, int]]) -> bytes:
    """ADD-PATH (RFC 7911): (afi, safi, mode) with mode 1 receive, 2 send, 3 both."""
    return capability(69, b"".join(struct.pack(">HBB", a, s, m) for a, s, m in families))


def cap_graceful_restart(time: int, families: Iterable[tuple[int, int, int]] = (), restarting: bool = False) -> bytes:
    """Graceful restart (RFC 4724): (afi, safi, flags) per family (0x80: forwarding preserved)."""
    head = struct.pack(">H", (0x8000 if restarting else 0) | (time & 0xFFF))
    return capability(64, head + b"".join(struct.pack(">HBB", a, s, f) for a, s, f in families))


# ---- UPDATE ---------------------------------------------------------------------------------

def update(withdrawn: bytes = b"", attrs: bytes | Iterable[bytes] = b"", nlri: bytes = b"", *,
           withdrawn_length: int | None = None, attrs_length: int | None = None) -> bytes:
    """An UPDATE body; the two length fields default to the true lengths."""
    block = attrs if isinstance(attrs, (bytes, bytearray)) else b"".join(attrs)
    wl = len(withdrawn) if withdrawn_length is None else withdrawn_length
    al = len(block) if attrs_length is None else attrs_length
    return struct.pack(">H", wl) + withdrawn + struct.pack(">H", al) + bytes(block) + nlri


def update_msg(*args, **kwargs) -> bytes:
    return message(UPDATE, update(*args, **kwargs))


def eor(afi: int = AFI_IPV4, safi: int = SAFI_UNICAST) -> bytes:
    """The End-of-RIB UPDATE body (RFC 4724) of a family."""
    if (afi, safi) == (AFI_IPV4, SAFI_UNICAST):
        return update()
    return update(attrs=[mp_unreach(afi, safi)])


def prefix(text: str, path_id: int | None = None, *, host_bits: int = 0) -> bytes:
    """One NLRI entry: [path id] length, the significant octets (`host_bits` ORed into the last
    octet, to build a prefix with host bits set)."""
    net = ipaddress.ip_network(text)
    octets = (net.prefixlen + 7) // 8
    raw = bytearray(net.network_address.packed[:octets])
    if host_bits and raw:
        raw[-1] |= host_bits
    head = b"" if path_id is None else struct.pack(">I", path_id)
    return head + bytes([net.prefixlen]) + bytes(raw)


def nlri(prefixes: Iterable[str], path_ids: Iterable[int] | None = None) -> bytes:
    if path_ids is None:
        return b"".join(prefix(p) for p in prefixes)
    return b"".join(prefix(p, i) for p, i in zip(prefixes, path_ids, strict=True))


def attr(kind: int, value: bytes = b"", flags: int | None = None, *, extended: bool | None = None,
         length: int | None = None) -> bytes:
    """One path attribute. `flags` default per type (unknown types: optional transitive);
    `length` overrides the length field (a lie, for malformed attributes)."""
    f = DEFAULT_FLAGS.get(kind, 0xC0) if flags is None else flags
    size = len(value) if length is None else length
    if extended is None:
        extended = bool(f & 0x10) or size > 255
    if extended:
        return bytes([f | 0x10, kind]) + struct.pack(">H", size) + value
    return bytes([f & ~0x10 & 0xFF, kind, size]) + value


def origin(value: int = 0) -> bytes:
    return attr(ORIGIN, bytes([value]))


def _asns(asns: Iterable[int], width: int) -> bytes:
    return b"".join(a.to_bytes(width, "big") for a in asns)


def as_path_value(segments: Sequence, asn4: bool = True) -> bytes:
    """Segments as [(type, [asn, ...]), ...], or a plain list of ASNs for one AS_SEQUENCE."""
    if segments and isinstance(segments[0], int):
        segments = [(AS_SEQUENCE, segments)]
    width = 4 if asn4 else 2
    return b"".join(bytes([t, len(v)]) + _asns(v, width) for t, v in segments)


def as_path(segments: Sequence = (), asn4: bool = True) -> bytes:
    return attr(AS_PATH, as_path_value(segments, asn4))


def as4_path(segments: Sequence) -> bytes:
    return attr(AS4_PATH, as_path_value(segments, True))


def next_hop(address: str) -> bytes:
    return attr(NEXT_HOP, ipaddress.IPv4Address(address).packed)


def med(value: int) -> bytes:
    return attr(MED, struct.pack(">I", value))


def local_pref(value: int) -> bytes:
    return attr(LOCAL_PREF, struct.pack(">I", value))


def atomic_aggregate() -> bytes:
    return attr(ATOMIC_AGGREGATE)


def aggregator(asn: int, address: str, asn4: bool = True) -> bytes:
    return attr(AGGREGATOR, asn.to_bytes(4 if asn4 else 2, "big") + ipaddress.IPv4Address(address).packed)


def as4_aggregator(asn: int, address: str) -> bytes:
    return attr(AS4_AGGREGATOR, asn.to_bytes(4, "big") + ipaddress.IPv4Address(address).packed)


def communities(values: Iterable[str | tuple[int, int]]) -> bytes:
    out = b""
    for v in values:
        a, b = (int(x) for x in v.split(":")) if isinstance(v, str) else v
        out += struct.pack(">HH", a, b)
    return attr(COMMUNITIES, out)


def large_communities(values: Iterable[str | tuple[int, int, int]]) -> bytes:
    out = b""
    for v in values:
        a, b, c = (int(x) for x in v.split(":")) if isinstance(v, str) else v
        out += struct.pack(">III", a, b, c)
    return attr(LARGE_COMMUNITIES, out)


def ext_communities(values: Iterable[bytes]) -> bytes:
    return attr(EXT_COMMUNITIES, b"".join(values))


def route_target(asn: int, number: int) -> bytes:
    """A two-octet-AS route target extended community (8 octets)."""
    return struct.pack(">BBHI", 0x00, 0x02, asn, number)


def originator_id(address: str) -> bytes:
    return attr(ORIGINATOR_ID, ipaddress.IPv4Address(address).packed)


def cluster_list(addresses: Iterable[str]) -> bytes:
    return attr(CLUSTER_LIST, b"".join(ipaddress.IPv4Address(a).packed for a in addresses))


def mp_reach(afi: int, safi: int, next_hops: Sequence[str] | bytes, nlri_bytes: bytes) -> bytes:
    """MP_REACH_NLRI; `next_hops` as addresses (joined) or raw bytes."""
    nh = next_hops if isinstance(next_hops, bytes) else b"".join(
        ipaddress.ip_address(a).packed for a in next_hops)
    return attr(MP_REACH, struct.pack(">HBB", afi, safi, len(nh)) + nh + b"\0" + nlri_bytes)


def mp_unreach(afi: int, safi: int, nlri_bytes: bytes = b"") -> bytes:
    return attr(MP_UNREACH, struct.pack(">HB", afi, safi) + nlri_bytes)
