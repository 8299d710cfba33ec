"""Pure encoding and decoding of kernel nexthop objects (RTM_*NEXTHOP) and of routes that point
at one (RTA_NH_ID); no sockets here.

DOC: the kernel's nexthop API (linux/nexthop.h, Linux >= 5.3): a message is the netlink header,
`struct nhmsg` (family, scope, protocol, reserved, flags) and attributes. A single next hop is
NHA_ID + NHA_GATEWAY and/or NHA_OIF, family AF_INET/AF_INET6; a group is NHA_ID + NHA_GROUP (an
array of `struct nexthop_grp` {u32 id; u8 weight-1; u8; u16}), family AF_UNSPEC, of type
multipath. Our objects carry our protocol in `nh_protocol`, as our routes do in `rtm_protocol`.
pyroute2 0.9.7 has no nexthop message class, so the netns tests cross-check these bytes
against iproute2 (`ip -j nexthop`).

* ADD: RTM_NEWNEXTHOP, NLM_F_CREATE|NLM_F_EXCL (never over an id someone else took);
  REPLACE: NLM_F_CREATE|NLM_F_REPLACE (the in-place group change: one write, whatever number of
  routes use the group); DELETE: RTM_DELNEXTHOP with NHA_ID only.
* A route through a nexthop object (`NhRouteOp`): RTM_NEWROUTE with RTA_DST, RTA_TABLE,
  RTA_PRIORITY and RTA_NH_ID, no next-hop attributes (its DELETE is the plain route delete).

`decode_nexthop(buf, off, end, name_of)` turns an RTM_NEWNEXTHOP/DELNEXTHOP body into an
`NhObject` (interface indexes translated to names; None for what we never use: blackhole, fdb,
encap, resilient groups are still returned, as foreign objects, with what could be read).
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from typing import Callable, Mapping

from ..core.model import NextHop, prefix_address
from .codec import (
    NLATTR,
    NLMSGHDR,
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    RTA_DST,
    RTA_PRIORITY,
    RTA_TABLE,
    RTMSG,
    RTM_NEWROUTE,
    RT_SCOPE_UNIVERSE,
    RT_TABLE_UNSPEC,
    U32,
    _NLA_TYPE_MASK,
    _V6_FLAG,
)
from .types import FibSettings, NhObject, NhOp, NhRouteOp, OpKind

RTM_NEWNEXTHOP, RTM_DELNEXTHOP, RTM_GETNEXTHOP = 104, 105, 106
RTNLGRP_NEXTHOP = 32
RTA_NH_ID = 30
NHA_ID, NHA_GROUP, NHA_GROUP_TYPE, NHA_BLACKHOLE, NHA_OIF, NHA_GATEWAY = 1, 2, 3, 4, 5, 6
AF_UNSPEC, AF_INET, AF_INET6 = 0, 2, 10
NHMSG = struct.Struct("=BBBBI")  # family, scope, protocol, resvd, flags
NH_GRP = struct.Struct("=IBBH")  # id, weight - 1, resvd1, resvd2
_FAMILY = {4: AF_INET, 6: AF_INET6, 0: AF_UNSPEC}
_VERSION = {AF_INET: 4, AF_INET6: 6}


def _attr(atype: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return NLATTR.pack(n, atype) + payload + b"\0" * (-n & 3)


def _u32(atype: int, value: int) -> bytes:
    return _attr(atype, U32.pack(value))


def encode_nh(op: NhOp, protocol: int, ifindex: Callable[[str], int], seq: int, ack: bool = False) -> bytes:
    """The RTM_NEWNEXTHOP / RTM_DELNEXTHOP message for `op` (`ifindex` raises for an unknown
    device)."""
    if op.kind is OpKind.DELETE:
        mtype, flags, family = RTM_DELNEXTHOP, NLM_F_REQUEST, AF_UNSPEC
        attrs = _u32(NHA_ID, op.id)
    else:
        mtype = RTM_NEWNEXTHOP
        flags = NLM_F_REQUEST | NLM_F_CREATE | (NLM_F_EXCL if op.kind is OpKind.ADD else NLM_F_REPLACE)
        attrs = _u32(NHA_ID, op.id)
        if op.members:
            family = AF_UNSPEC
            blob = b""
            for member, weight in op.members:
                if not 1 <= weight <= 256:
                    raise ValueError(f"weight {weight} out of range 1..256")
                blob += NH_GRP.pack(member, weight - 1, 0, 0)
            attrs += _attr(NHA_GROUP, blob)
        else:
            hop = op.hop
            if hop is None or not hop.dev:
                raise ValueError("a single next hop needs a device")
            family = _FAMILY[op.family]
            if hop.gateway:
                addr = ipaddress.ip_address(hop.gateway)
                if addr.version != op.family:
                    raise ValueError(f"gateway {hop.gateway} is not IPv{op.family}")
                attrs += _attr(NHA_GATEWAY, addr.packed)
            attrs += _u32(NHA_OIF, ifindex(hop.dev))
    # a delete must carry a zero header but for the family (the kernel refuses it otherwise)
    body = NHMSG.pack(family, RT_SCOPE_UNIVERSE, 0 if op.kind is OpKind.DELETE else protocol, 0, 0) + attrs
    return NLMSGHDR.pack(16 + len(body), mtype, flags | (NLM_F_ACK if ack else 0), seq, 0) + body


def encode_nh_route(op: NhRouteOp, settings: FibSettings, seq: int, ack: bool = False) -> bytes:
    """RTM_NEWROUTE pointing `op.prefix` at nexthop object `op.nhid` (ADD or REPLACE)."""
    prefix, route = op.prefix, op.route
    family = 6 if prefix & _V6_FLAG else 4
    length = prefix & 0xFF
    flags = NLM_F_REQUEST | NLM_F_CREATE | (NLM_F_EXCL if op.kind is OpKind.ADD else NLM_F_REPLACE)
    metric = settings.metric if route.metric is None else route.metric
    table = settings.table
    attrs = b""
    if length:
        addr = prefix_address(prefix).to_bytes(4 if family == 4 else 16, "big")
        attrs += _attr(RTA_DST, addr)
    attrs += _u32(RTA_TABLE, table) + _u32(RTA_PRIORITY, metric) + _u32(RTA_NH_ID, op.nhid)
    body = RTMSG.pack(_FAMILY[family], length, 0, 0, table if table < 256 else RT_TABLE_UNSPEC,
                      settings.protocol, RT_SCOPE_UNIVERSE, int(route.type), 0) + attrs
    return NLMSGHDR.pack(16 + len(body), RTM_NEWROUTE, flags | (NLM_F_ACK if ack else 0), seq, 0) + body


def encode_nh_dump_request(seq: int) -> bytes:
    """RTM_GETNEXTHOP dump of every nexthop object of the namespace."""
    body = NHMSG.pack(AF_UNSPEC, 0, 0, 0, 0)
    return NLMSGHDR.pack(16 + len(body), RTM_GETNEXTHOP, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


def nh_protocol_and_id(buf: bytes, off: int, end: int) -> tuple[int, int]:
    """(protocol, id) of a nexthop message, cheaply (the monitor's filter)."""
    _family, _scope, protocol, _r, _flags = NHMSG.unpack_from(buf, off)
    o = off + NHMSG.size
    while o + 4 <= end:
        alen, atype = NLATTR.unpack_from(buf, o)
        if alen < 4:
            break
        if atype & _NLA_TYPE_MASK == NHA_ID and alen >= 8:
            return protocol, U32.unpack_from(buf, o + 4)[0]
        o += (alen + 3) & ~3
    return protocol, 0


def decode_nexthop(buf: bytes, off: int, end: int, name_of: Mapping[int, str]) -> NhObject | None:
    """An RTM_NEWNEXTHOP / RTM_DELNEXTHOP body -> `NhObject` (None without an id or when cut)."""
    if end - off < NHMSG.size:
        return None
    family, _scope, protocol, _r, _flags = NHMSG.unpack_from(buf, off)
    nhid = oif = 0
    gateway = None
    members: tuple[tuple[int, int], ...] = ()
    o = off + NHMSG.size
    while o + 4 <= end:
        alen, atype = NLATTR.unpack_from(buf, o)
        if alen < 4 or o + alen > end:
            break
        atype &= _NLA_TYPE_MASK
        if atype == NHA_ID and alen >= 8:
            nhid = U32.unpack_from(buf, o + 4)[0]
        elif atype == NHA_OIF and alen >= 8:
            oif = U32.unpack_from(buf, o + 4)[0]
        elif atype == NHA_GATEWAY:
            gateway = sys.intern(str(ipaddress.ip_address(bytes(buf[o + 4:o + alen]))))
        elif atype == NHA_GROUP:
            members = tuple((m, w + 1) for m, w, _a, _b in NH_GRP.iter_unpack(bytes(buf[o + 4:o + alen])))
        o += (alen + 3) & ~3
    if not nhid:
        return None
    if members:
        return NhObject(nhid, protocol, 0, None, members)
    hop = NextHop(gateway, name_of.get(oif) if oif else None, 1) if (gateway or oif) else None
    return NhObject(nhid, protocol, _VERSION.get(family, 0), hop)
