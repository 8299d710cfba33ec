"""Pure decoding of rtnetlink messages, and the netlink constants and structs (no sockets here).

DOC: the FIB talks to the kernel in batches of thousands of messages, so both directions are
hand-packed with precompiled `struct.Struct` objects instead of pyroute2's message classes.

Encoding lives in `agent.fib.encoder` (`Encoder`, dump requests); this module holds the
constants and structs both sides share and the decoding.

Decoding (`Decoder`). `iter_messages` walks a receive buffer; `decode` turns each message into a
value of `agent.fib.types` (RouteEvent, LinkEvent) or a control record (`NlError`, `NlDone`).
Link messages (few, rare) are decoded by pyroute2's `ifinfmsg` (`agent.fib.ifaces`).
Route messages are filtered on the parsed header before any attribute is read (table, cloned
flag, type: local/broadcast/anycast/multicast/throw... are skipped), then only RTA_DST,
RTA_GATEWAY, RTA_OIF, RTA_PRIORITY, RTA_TABLE and RTA_MULTIPATH are looked at. The raw next-hop
bytes (gateway, oif, multipath blob) plus type and metric key a cache of interned `KernelRoute`s,
so a dump of 100k routes through a handful of next hops builds a handful of objects. `route()`
is the cheap core used by dumps: it returns ``(prefix, protocol, KernelRoute)`` or None.

A route that points at a kernel nexthop object (RTA_NH_ID, `agent.fib.nhg`) is decoded with the
next hops of that object, looked up in `nh_of` (nexthop id -> next-hop tuple, the nexthop
layer's live expansion; without `net.ipv4.nexthop_compat_mode` the kernel sends the id only).
`nh_of` changes when a group changes in place: `sync_nexthops()` (called by the scanner and the
monitor before they decode) drops the route cache when its version moved. The id itself is
reported through `last_nhid` (set by every `route()` call) for the dump.
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from dataclasses import dataclass
from typing import Iterator, Mapping

from ..core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops
from .ifaces import decode_link
from .types import FibSettings, ForeignRoute, LinkEvent, RouteEvent

# ---- constants (linux/netlink.h, linux/rtnetlink.h, linux/if.h) ----
NLMSG_NOOP, NLMSG_ERROR, NLMSG_DONE, NLMSG_OVERRUN = 1, 2, 3, 4
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK, NLM_F_DUMP_INTR = 0x1, 0x2, 0x4, 0x10
NLM_F_ROOT, NLM_F_MATCH = 0x100, 0x200
NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400

RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK = 16, 17, 18
RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE = 24, 25, 26

RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_MULTIPATH, RTA_TABLE = 1, 4, 5, 6, 9, 15
RTA_NH_ID = 30
RTM_F_CLONED = 0x200
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK, RT_SCOPE_NOWHERE = 0, 253, 255
RT_TABLE_UNSPEC, RT_TABLE_COMPAT = 0, 252
AF_UNSPEC, AF_INET, AF_INET6 = 0, 2, 10

RTMGRP_LINK, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE = 0x1, 0x40, 0x400

_V6_FLAG = 1 << 136
RTM_NEWADDR, RTM_GETADDR = 20, 22
_NLA_TYPE_MASK = 0x3FFF  # strip NLA_F_NESTED / NLA_F_NET_BYTEORDER

# ---- precompiled structs (native byte order, as the kernel speaks) ----
NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope, type, flags
IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
NLATTR = struct.Struct("=HH")
U32 = struct.Struct("=I")
I32 = struct.Struct("=i")
RTNEXTHOP = struct.Struct("=HBBi")  # len, flags, hops, ifindex
_HDR = struct.Struct("=IHHIIBBBBBBBBI")  # nlmsghdr + rtmsg, 28 bytes
_ATTR_U32 = struct.Struct("=HHI")

_KEPT_TYPES = {t.value: t for t in RouteType}
_ADDR_LEN = {4: 4, 6: 16}


@dataclass(frozen=True, slots=True)
class NlError:
    """NLMSG_ERROR: `errno` 0 is an ACK, otherwise the positive errno of request `seq`."""

    seq: int
    errno: int


@dataclass(frozen=True, slots=True)
class NlDone:
    """NLMSG_DONE: the end of a dump."""

    seq: int


# ---------------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------------


def iter_messages(buf: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """Yield ``(type, flags, seq, offset, end)`` for each netlink message in `buf`;
    `offset` points at the payload (after the 16-byte nlmsghdr)."""
    off, size = 0, len(buf)
    unpack = NLMSGHDR.unpack_from
    while off + 16 <= size:
        mlen, mtype, mflags, seq, _pid = unpack(buf, off)
        if mlen < 16 or off + mlen > size:
            break
        yield mtype, mflags, seq, off + 16, off + mlen
        off += (mlen + 3) & ~3


class Decoder:
    """Parses route/link/control messages into `agent.fib.types` values (see module doc).

    `name_of` maps ifindex -> interface name (the LinkIndex's live dict); call `invalidate()`
    when it changes so cached routes pick up new names.
    """

    def __init__(self, settings: FibSettings, name_of: Mapping[int, str], nexthops=None):
        self.settings = settings
        self.name_of = name_of
        self._cache: dict[tuple, KernelRoute] = {}
        self.nexthops = nexthops  # an object with `expansion` (id -> next hops) and `version`
        self.nh_of: Mapping[int, tuple[NextHop, ...]] = nexthops.expansion if nexthops else {}
        self._nh_version = nexthops.version if nexthops else 0
        self.last_nhid = 0
        self._nhids: dict[tuple, int] = {}  # fast-path cache key -> nexthop id (routes with one)
        # rtm_table carries the table id when < 256; larger ids are in RTA_TABLE only, with
        # RT_TABLE_COMPAT in the header from the kernel (and UNSPEC from encoders like ours)
        big = settings.table >= 256
        self._hdr_tables = frozenset([RT_TABLE_COMPAT, RT_TABLE_UNSPEC] if big else [settings.table])

    def invalidate(self) -> None:
        self._cache.clear()
        self._nhids.clear()

    def sync_nexthops(self) -> None:
        """Pick up a changed nexthop expansion (see module doc)."""
        nh = self.nexthops
        if nh is not None and (nh.version != self._nh_version or nh.expansion is not self.nh_of):
            self._nh_version, self.nh_of = nh.version, nh.expansion
            self._cache.clear()

    def route(self, buf: bytes, off: int, end: int) -> tuple[Prefix, int, KernelRoute] | None:
        """Parse the rtmsg at `off`..`end`; None when filtered out (other table, cloned, type).

        Fast path: the kernel lays out RTA_TABLE, RTA_DST, then only attributes that describe
        the next hops and metric, so the raw bytes after RTA_DST key the route cache directly.
        """
        family, dst_len, _src, _tos, table, protocol, _scope, rtype, rflags = RTMSG.unpack_from(buf, off)
        if table not in self._hdr_tables or rflags & RTM_F_CLONED or rtype not in _KEPT_TYPES:
            return None
        if family != AF_INET and family != AF_INET6:
            return None
        o = off + 12
        alen, atype = NLATTR.unpack_from(buf, o) if o + 8 <= end else (0, 0)
        if atype == RTA_TABLE and alen == 8:
            if U32.unpack_from(buf, o + 4)[0] != self.settings.table:
                return None
            o += 8
            dst = None
            if dst_len:
                alen, atype = NLATTR.unpack_from(buf, o) if o + 4 <= end else (0, 0)
                if atype == RTA_DST and o + alen <= end:
                    dst = buf[o + 4:o + alen]
                    o += (alen + 3) & ~3
                else:
                    o = -1
            if o >= 0:
                key = (rtype, buf[o:end])
                route = self._cache.get(key)
                if route is None:
                    _dst, gw, oif, prio, mp, _table, nhid = _route_attrs(buf, o, end)
                    route = self._route(key, rtype, gw, oif, mp, prio, nhid)
                    if nhid:
                        self._nhids[key] = nhid
                self.last_nhid = self._nhids.get(key, 0) if self._nhids else 0
                net = (int.from_bytes(dst, "big") >> ((32 if family == AF_INET else 128) - dst_len)) << 8 if dst else 0
                return Prefix((net if family == AF_INET else _V6_FLAG | net) | dst_len), protocol, route
        dst, gw, oif, prio, mp, table, nhid = _route_attrs(buf, off + 12, end)
        if table is not None and table != self.settings.table:
            return None
        if rtype != 1:  # blackhole & co: next hops (IPv6 reports dev lo) are meaningless
            gw = mp = None
            oif = 0
        self.last_nhid = nhid
        key = (rtype, gw, oif, mp, prio, nhid)
        route = self._cache.get(key)
        if route is None:
            route = self._route(key, rtype, gw, oif, mp, prio, nhid)
        return _prefix(family, dst, dst_len), protocol, route

    def _route(self, key: tuple, rtype: int, gw, oif: int, mp, prio: int, nhid: int = 0) -> KernelRoute:
        if rtype != 1:
            gw = mp = None
            oif = 0
        if nhid and rtype == 1 and nhid in self.nh_of:  # through a nexthop object: its next hops
            route, complete = intern(KernelRoute(RouteType.UNICAST, self.nh_of[nhid], prio)), True
        else:
            route, complete = self._build(rtype, gw, oif, mp, prio)
        if complete:
            if len(self._cache) > 65536:
                self._cache.clear()
                self._nhids.clear()
            self._cache[key] = route
        return route

    def _build(self, rtype: int, gw, oif: int, mp, prio: int) -> tuple[KernelRoute, bool]:
        complete = True
        hops: list[NextHop] = []
        name_of = self.name_of

        def dev(index: int) -> str | None:
            nonlocal complete
            if not index:
                return None
            name = name_of.get(index)
            if name is None:
                complete = False  # unknown ifindex (a race with a link event): do not cache
            return name

        if mp is not None:
            o = 0
            while o + 8 <= len(mp):
                nlen, _flags, nhops, ifindex = RTNEXTHOP.unpack_from(mp, o)
                if nlen < 8:
                    break
                nh_gw = None
                a = o + 8
                while a + 4 <= o + nlen:
                    alen, atype = NLATTR.unpack_from(mp, a)
                    if alen < 4:
                        break
                    if atype & _NLA_TYPE_MASK == RTA_GATEWAY:
                        nh_gw = _address_text(mp[a + 4:a + alen])
                    a += (alen + 3) & ~3
                hops.append(NextHop(nh_gw, dev(ifindex), nhops + 1))
                o += (nlen + 3) & ~3
        elif gw is not None or oif:
            hops.append(NextHop(_address_text(gw) if gw is not None else None, dev(oif), 1))
        return intern(KernelRoute(_KEPT_TYPES[rtype], nexthops(*hops), prio)), complete

    def decode_one(self, mtype: int, seq: int, buf: bytes, off: int, end: int):
        """One message as RouteEvent / LinkEvent / NlError / NlDone, or None (filtered/other)."""
        if mtype == RTM_NEWROUTE or mtype == RTM_DELROUTE:
            parsed = self.route(buf, off, end)
            if parsed is None:
                return None
            prefix, protocol, route = parsed
            foreign = None
            if protocol != self.settings.protocol:
                foreign = ForeignRoute(prefix, protocol, route.metric, route.type, route.nexthops)
            return RouteEvent(mtype == RTM_DELROUTE, prefix, protocol, route, foreign)
        if mtype == RTM_NEWLINK or mtype == RTM_DELLINK:
            link = decode_link(buf, off, end)
            return None if link is None else LinkEvent(mtype == RTM_DELLINK, link)
        if mtype == NLMSG_ERROR:
            return NlError(seq, -I32.unpack_from(buf, off)[0])
        if mtype == NLMSG_DONE:
            return NlDone(seq)
        return None

    def decode(self, buf: bytes) -> list:
        """Every message of `buf` that is not filtered out, decoded (see `decode_one`)."""
        out = []
        for mtype, _flags, seq, off, end in iter_messages(buf):
            item = self.decode_one(mtype, seq, buf, off, end)
            if item is not None:
                out.append(item)
        return out


def _route_attrs(buf: bytes, o: int, end: int):
    """The route attributes we read, from offset `o`: (dst, gateway, oif, priority, multipath,
    table, nexthop id); raw bytes for addresses and the multipath blob, None/0 when absent."""
    dst = gw = mp = table = None
    oif = prio = nhid = 0
    unpack_attr = NLATTR.unpack_from
    while o + 4 <= end:
        alen, atype = unpack_attr(buf, o)
        if alen < 4:
            break
        atype &= _NLA_TYPE_MASK
        if atype == RTA_DST:
            dst = buf[o + 4:o + alen]
        elif atype == RTA_GATEWAY:
            gw = buf[o + 4:o + alen]
        elif atype == RTA_OIF:
            oif = U32.unpack_from(buf, o + 4)[0]
        elif atype == RTA_PRIORITY:
            prio = U32.unpack_from(buf, o + 4)[0]
        elif atype == RTA_TABLE:
            table = U32.unpack_from(buf, o + 4)[0]
        elif atype == RTA_MULTIPATH:
            mp = buf[o + 4:o + alen]
        elif atype == RTA_NH_ID:
            nhid = U32.unpack_from(buf, o + 4)[0]
        o += (alen + 3) & ~3
    return dst, gw, oif, prio, mp, table, nhid


def _prefix(family: int, dst, dst_len: int) -> Prefix:
    return Prefix.of(4 if family == AF_INET else 6, int.from_bytes(dst, "big") if dst else 0, dst_len)


def _address_text(raw: bytes) -> str:
    return sys.intern(str(ipaddress.ip_address(bytes(raw))))
