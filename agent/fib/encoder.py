"""Pure encoding of rtnetlink route messages and dump requests (no sockets here).

DOC: the FIB talks to the kernel in batches of thousands of messages, so route messages are
hand-packed with precompiled `struct.Struct` objects instead of pyroute2's message classes (the
tests cross-check them against pyroute2's `rtmsg`).

Encoding (`Encoder`). A route message is the netlink header, the `rtmsg` header, RTA_DST and a
tail of attributes (RTA_TABLE, RTA_PRIORITY, then RTA_GATEWAY + RTA_OIF or RTA_MULTIPATH). The
tail depends only on the interned `KernelRoute` (shared by many prefixes), the family and the
operation, so it is built once and cached together with a `Struct` that packs header + RTA_DST +
tail in a single call: encoding one op is one dict lookup and one `pack`. Device names become
ifindexes through the `index_of` mapping given to the encoder (the LinkIndex's live dict); call
`invalidate()` when links change. A name that is not in the mapping raises `UnknownDevice`.
A route through a nexthop object (`NhRouteOp`) is cached the same way, per route, family,
operation and nexthop id (its bytes are `nhcodec.encode_nh_route`'s, which the tests compare).
A run of new routes (`runops.AddRun` / `NhAddRun`, a table being learned) is packed by column
instead (`_packed_run`): that message repeated, and its sequence number, prefix length and
destination written by extended-slice assignments, with no Python step per route.

* ADD: RTM_NEWROUTE, NLM_F_CREATE|NLM_F_EXCL.  REPLACE: RTM_NEWROUTE, NLM_F_CREATE|NLM_F_REPLACE.
* DELETE: RTM_DELROUTE carrying only dst, table, protocol and metric (type unspec, scope
  nowhere), so it removes our route for that prefix and metric whatever its next hops are now,
  and never touches another protocol's route.
* Scope: link for device-only unicast routes, universe otherwise. A single next hop is sent as
  RTA_GATEWAY/RTA_OIF (its weight cannot be expressed and reads back as 1); two or more as
  RTA_MULTIPATH with rtnh_hops = weight - 1.
"""

from __future__ import annotations

import errno as _errno
import ipaddress
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from operator import and_, ge, is_not, lshift, ne, or_, rshift

from ..core.model import KernelRoute, NextHop, RouteType
from .codec import (
    AF_INET,
    AF_INET6,
    IFADDRMSG,
    IFINFOMSG,
    NLATTR,
    NLMSGHDR,
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_EXCL,
    NLM_F_REPLACE,
    NLM_F_REQUEST,
    RTA_DST,
    RTA_GATEWAY,
    RTA_MULTIPATH,
    RTA_OIF,
    RTA_PRIORITY,
    RTA_TABLE,
    RTMSG,
    RTM_DELROUTE,
    RTM_GETADDR,
    RTM_GETLINK,
    RTM_NEWROUTE,
    RTNEXTHOP,
    RT_SCOPE_LINK,
    RT_SCOPE_NOWHERE,
    RT_SCOPE_UNIVERSE,
    RT_TABLE_UNSPEC,
    U32,
    _ADDR_LEN,
    _ATTR_U32,
    _HDR,
    _V6_FLAG,
)
from .nhcodec import RTA_NH_ID, encode_nh
from .runops import NhAddRun, OpsSlice
from .types import FibSettings, NhRouteOp, Op, OpKind, new_nh_route_op, new_op

ADD = OpKind.ADD
# `_packed_run`'s columns: the sequence number is a native u32 at offset 8 of the netlink header
_LITTLE = sys.byteorder == "little"
# by prefix length: the shift from a packed prefix's network to its address (IPv4: as the octets
# 3-6 of a 64-bit word), as `bytes.translate` tables
_SHIFT4 = bytes((40 - n) & 0xFF for n in range(256))
_SHIFT6 = bytes((128 - n) & 0xFF for n in range(256))
_SEQ_LOW_AT = 8 if _LITTLE else 10  # its low half
_SEQ_LOWS = array("H", range(0x10000)).tobytes()  # every low half, in order
assert array("I").itemsize == 4 and array("Q").itemsize == 8 and array("H").itemsize == 2


class UnknownDevice(LookupError):
    """A next hop names a device that the link index does not know (reported as ENODEV)."""

    errno = _errno.ENODEV



def _attr(atype: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return NLATTR.pack(n, atype) + payload + b"\0" * (-n & 3)


def _u32(atype: int, value: int) -> bytes:
    return _ATTR_U32.pack(8, atype, value)


def _gateway_bytes(family: int, gateway: str) -> bytes:
    addr = ipaddress.ip_address(gateway)
    if addr.version != family:
        raise ValueError(f"gateway {gateway} is not IPv{family}")
    return addr.packed


# ---------------------------------------------------------------------------------------------
# encoding
# ---------------------------------------------------------------------------------------------


class Encoder:
    """Packs `Op`s into rtnetlink messages; caches the per-route part (see module doc)."""

    def __init__(self, settings: FibSettings, index_of: Mapping[str, int]):
        self.settings = settings
        self.index_of = index_of
        self._cache: dict[tuple, tuple[struct.Struct, int, int, int, int, bytes, KernelRoute]] = {}
        self._rtm_table = settings.table if settings.table < 256 else RT_TABLE_UNSPEC
        self._quick: dict[tuple, tuple] = {}  # `encode_batch`'s cache

    def invalidate(self) -> None:
        """Forget cached tails (call when interface indexes may have changed)."""
        self._cache.clear()
        self._quick.clear()

    def encode(self, op: Op, seq: int, ack: bool = False) -> bytes:
        """The message for `op` with sequence number `seq` (NLM_F_ACK added when `ack`).
        Nexthop-object writes (`NhOp`) go to `agent.fib.nhcodec`."""
        cls = op.__class__
        if cls is Op:
            kind, p, route = op
            nhid = 0
        elif cls is NhRouteOp:
            (kind, p, route), nhid = op
        else:
            return encode_nh(op, self.settings.protocol, self._ifindex, seq, ack)
        v6 = p & _V6_FLAG
        # routes are interned (shared by many prefixes): key by identity, which is much cheaper
        # than hashing the route (or the OpKind enum, whose hash is Python code); the entry keeps
        # the route alive so its id cannot be reused
        key = (id(route), id(kind), nhid, v6)
        entry = self._cache.get(key)
        if entry is None or entry[6] is not route:
            family = 6 if v6 else 4
            built = self._build(kind, family, route) if cls is Op else self._build_nh(kind, family, route, nhid)
            entry = (*built, route)
            if len(self._cache) > 65536:
                self._cache.clear()
            self._cache[key] = entry
        st, mtype, flags, scope, rtype, tail, _route = entry
        length = p & 0xFF
        if ack:
            flags |= NLM_F_ACK
        if length == 0:  # default route: no RTA_DST at all
            return _HDR.pack(28 + len(tail), mtype, flags, seq, 0, AF_INET6 if v6 else AF_INET, 0, 0, 0,
                             self._rtm_table, self.settings.protocol, scope, rtype, 0) + tail
        if v6:
            return st.pack(st.size, mtype, flags, seq, 0, AF_INET6, length, 0, 0, self._rtm_table,
                           self.settings.protocol, scope, rtype, 0, 20, RTA_DST,
                           (((p & (_V6_FLAG - 1)) >> 8) << (128 - length)).to_bytes(16, "big"), tail)
        return st.pack(st.size, mtype, flags, seq, 0, AF_INET, length, 0, 0, self._rtm_table,
                       self.settings.protocol, scope, rtype, 0, 8, RTA_DST,
                       ((p >> 8) << (32 - length)).to_bytes(4, "big"), tail)

    def encode_batch(self, ops: Sequence[Op], first: int) -> list[bytes]:
        """The messages of `ops` with sequence numbers `first`, `first` + 1, ... (no ACK flag),
        as `encode` makes them (the tests compare both), cheaper per op: one call for the batch,
        the cached parts looked up again only when the route, kind, nexthop id or family change
        from the op before (ops come in runs of one route), and a `Struct` of seven fields (the
        constant parts of the headers as byte strings) instead of seventeen. Raises as `encode`
        does; a batch that raises is encoded op by op by the caller."""
        if ops.__class__ is OpsSlice:
            return self._encode_run(ops, first)
        out: list[bytes] = []
        append = out.append
        seq = first
        last = (None, None, None, None)
        pack = pre = mid = rest = tail = None
        for op in ops:
            cls = op.__class__
            if cls is NhRouteOp:
                (kind, p, route), nhid = op
            elif cls is Op:
                kind, p, route = op
                nhid = 0
            else:
                append(encode_nh(op, self.settings.protocol, self._ifindex, seq, False))
                seq += 1
                continue
            v6 = p & _V6_FLAG
            if route is not last[0] or kind is not last[1] or nhid != last[2] or v6 != last[3]:
                pack, pre, mid, rest, tail = self._quick_entry(op, kind, route, nhid, v6)
                last = (route, kind, nhid, v6)
            length = p & 0xFF
            if length == 0:  # (no RTA_DST)
                append(self.encode(op, seq))
            elif v6:
                append(pack(pre, seq, mid, length, rest,
                            (((p & (_V6_FLAG - 1)) >> 8) << (128 - length)).to_bytes(16, "big"), tail))
            else:
                append(pack(pre, seq, mid, length, rest, ((p >> 8) << (32 - length)).to_bytes(4, "big"), tail))
            seq += 1
        return out

    def _encode_run(self, part: OpsSlice, first: int) -> list[bytes]:
        """`encode_batch` for a slice of an `AddRun` / `NhAddRun` (`agent.fib.runops`): the route
        messages are packed by column (`_packed_run`), one block per stretch of prefixes of one
        family, route and group, with no op read or built; an `NhAddRun`'s head (its object
        writes) and a slice holding a /0 go through the general loop. The list holds the
        messages' bytes in order, a block of several messages as one string, the last message
        always on its own (the writer adds the ACK flag to it)."""
        parent, start, stop = part.parent, part.start, part.stop
        out: list[bytes] = []
        if parent.__class__ is NhAddRun:
            head = parent.head
            if start < len(head):
                out = self.encode_batch(head[start:stop], first)
            run, base = parent.run, len(head)
            a, b = max(start, base) - base, stop - base
            gid, gids = (parent.gid, None) if parent.gid is not None else (0, parent.gids[a:b])
        else:
            run, a, b = parent, start, stop
            gid, gids = 0, None
        if b <= a:
            return out
        seq = first + len(out)
        prefixes = run.prefixes[a:b]
        route, routes = run.route, (None if run.route is not None else run.routes[a:b])
        if routes is None and gids is None and (min(prefixes) >= _V6_FLAG) == (max(prefixes) >= _V6_FLAG):
            cuts = [0, len(prefixes)]  # one family, route and group: a table's shape
        else:  # where the family, the route or the group changes (in C: no Python step per prefix)
            v6s = bytes(map(ge, prefixes, repeat(_V6_FLAG)))
            changes = map(ne, v6s[1:], v6s[:-1])
            if routes is not None:
                changes = map(or_, changes, map(is_not, routes[1:], routes[:-1]))
            if gids is not None:
                changes = map(or_, changes, map(ne, gids[1:], gids[:-1]))
            cuts = [0, *compress(range(1, len(prefixes)), changes), len(prefixes)]
        blocks: list[bytes] = []
        size = 0  # of the last block's messages
        if len(cuts) <= 2 + len(prefixes) // 8:  # (else stretches too short to pay: the general loop)
            for i, j in zip(cuts, cuts[1:]):
                packed = self._packed_run(prefixes[i:j], route if routes is None else routes[i],
                                          gid if gids is None else gids[i], seq + i)
                if packed is None:  # a /0 (no RTA_DST): the general loop
                    blocks = []
                    break
                blocks.append(packed[0])
                size = packed[1]
        if not blocks:  # with ops of the slice made for its encoding only (not the run's own)
            ops = run.ops_of(a, b)
            if parent.__class__ is NhAddRun:
                ops = parent.route_ops(ops, a, b)
            return out + self.encode_batch(ops, seq)
        out += blocks
        if len(out[-1]) > size:  # the last message on its own
            last = out.pop()
            out += (last[:-size], last[-size:])
        return out

    def _packed_run(self, prefixes: list, route: KernelRoute, nhid: int, seq: int) -> tuple[bytes, int] | None:
        """The ADD messages of `prefixes` (one family) through `route` (and nexthop object `nhid`,
        0: none) with sequence numbers `seq`, `seq` + 1, ...: exactly `encode`'s, and the size of
        one; None if one is a /0. The cached message of the route is repeated and the fields that
        differ are written as columns, by extended-slice assignments (in C, no Python step per
        prefix): the prefix length and the destination, from the prefixes as octets (IPv4: one
        array of unsigned 64-bit words), and the sequence number's low half (its high half is the
        repeated message's, unless the low half wraps within the run)."""
        v6 = prefixes[0] >= _V6_FLAG
        lengths = bytes(map(and_, prefixes, repeat(0xFF)))
        if 0 in lengths:
            return None
        # the destinations: each prefix's network shifted back into place (`Prefix`), in C
        nets = map(rshift, map(and_, prefixes, repeat(_V6_FLAG - 1)) if v6 else prefixes, repeat(8))
        if v6:
            width, at = 16, 0
            col = b"".join(map(int.to_bytes, map(lshift, nets, lengths.translate(_SHIFT6)), repeat(16), repeat("big")))
        else:
            width, at = 8, 3  # 0 0 0, the address, 0
            words = array("Q", map(lshift, nets, lengths.translate(_SHIFT4)))
            if _LITTLE:
                words.byteswap()
            col = words.tobytes()
        op = new_op((ADD, prefixes[0], route))
        if nhid:
            op = new_nh_route_op((op, nhid))
        _pack, pre, mid, rest, tail = self._quick_entry(op, ADD, route, nhid, _V6_FLAG if v6 else 0)
        alen = 16 if v6 else 4
        size = 32 + alen + len(tail)
        n = len(prefixes)
        low = seq & 0xFFFF
        wraps = low + n > 0x10000
        buf = bytearray(pre + U32.pack(0 if wraps else seq - low) + mid + b"\0" + rest + bytes(alen) + tail) * n
        if wraps:
            seqs = array("I", range(seq, seq + n)).tobytes()
            for k in range(4):
                buf[8 + k::size] = seqs[k::4]
        else:
            lows = _SEQ_LOWS[2 * low:2 * (low + n)]
            buf[_SEQ_LOW_AT::size] = lows[0::2]
            buf[_SEQ_LOW_AT + 1::size] = lows[1::2]
        buf[17::size] = lengths
        for k in range(alen):
            buf[32 + k::size] = col[at + k::width]
        return bytes(buf), size

    def _quick_entry(self, op, kind: OpKind, route: KernelRoute, nhid: int, v6: int) -> tuple:
        """`encode_batch`'s cached parts for a route, kind, nexthop id and family: the Struct's
        pack, nlmsghdr up to the sequence number, the rest of nlmsghdr and rtm_family, rtmsg
        after rtm_dst_len with RTA_DST's header, and the tail after the destination."""
        key = (id(route), id(kind), nhid, v6)
        hit = self._quick.get(key)
        if hit is not None and hit[1] is route:
            return hit[0]
        ref = self.encode(op._replace(prefix=(op[1] & _V6_FLAG) | 1) if op.__class__ is Op  # (any length but 0)
                          else op._replace(op=op[0]._replace(prefix=(op[0][1] & _V6_FLAG) | 1)), 0)
        alen = 16 if v6 else 4
        parts = (struct.Struct(f"=8sI5sB14s{alen}s{len(ref) - 32 - alen}s").pack, ref[:8], ref[12:17], ref[18:32],
                 ref[32 + alen:])
        if len(self._quick) > 65536:
            self._quick.clear()
        self._quick[key] = (parts, route)
        return parts

    def _build_nh(self, kind: OpKind, family: int, route: KernelRoute, nhid: int):
        """The cached part of `nhcodec.encode_nh_route`'s message: RTA_TABLE, RTA_PRIORITY and
        RTA_NH_ID after RTA_DST."""
        metric = self.settings.metric if route.metric is None else route.metric
        tail = _u32(RTA_TABLE, self.settings.table) + _u32(RTA_PRIORITY, metric) + _u32(RTA_NH_ID, nhid)
        flags = NLM_F_REQUEST | NLM_F_CREATE | (NLM_F_EXCL if kind is OpKind.ADD else NLM_F_REPLACE)
        st = struct.Struct(f"=IHHIIBBBBBBBBIHH{_ADDR_LEN[family]}s{len(tail)}s")
        return st, RTM_NEWROUTE, flags, RT_SCOPE_UNIVERSE, int(route.type), tail

    def _build(self, kind: OpKind, family: int, route: KernelRoute):
        metric = self.settings.metric if route.metric is None else route.metric
        tail = _u32(RTA_TABLE, self.settings.table) + _u32(RTA_PRIORITY, metric)
        if kind is OpKind.DELETE:
            mtype, flags, scope, rtype = RTM_DELROUTE, NLM_F_REQUEST, RT_SCOPE_NOWHERE, 0
        else:
            mtype = RTM_NEWROUTE
            flags = NLM_F_REQUEST | NLM_F_CREATE | (NLM_F_EXCL if kind is OpKind.ADD else NLM_F_REPLACE)
            rtype = int(route.type)
            scope = RT_SCOPE_UNIVERSE
            if route.type == RouteType.UNICAST:
                hops = route.nexthops
                if not hops:
                    raise ValueError("unicast route without next hops")
                if not any(nh.gateway for nh in hops):
                    scope = RT_SCOPE_LINK
                if len(hops) == 1:
                    tail += self._hop_attrs(family, hops[0])
                else:
                    blob = b""
                    for nh in hops:
                        gw = _attr(RTA_GATEWAY, _gateway_bytes(family, nh.gateway)) if nh.gateway else b""
                        if not 1 <= nh.weight <= 256:
                            raise ValueError(f"weight {nh.weight} out of range 1..256")
                        blob += RTNEXTHOP.pack(8 + len(gw), 0, nh.weight - 1, self._ifindex(nh.dev)) + gw
                    tail += _attr(RTA_MULTIPATH, blob)
        alen = _ADDR_LEN[family]
        st = struct.Struct(f"=IHHIIBBBBBBBBIHH{alen}s{len(tail)}s")
        return st, mtype, flags, scope, rtype, tail

    def _hop_attrs(self, family: int, nh: NextHop) -> bytes:
        out = b""
        if nh.gateway:
            out += _attr(RTA_GATEWAY, _gateway_bytes(family, nh.gateway))
        if nh.dev:
            out += _u32(RTA_OIF, self._ifindex(nh.dev))
        if not out:
            raise ValueError("next hop without gateway or device")
        return out

    def _ifindex(self, dev: str | None) -> int:
        if not dev:
            return 0
        index = self.index_of.get(dev)
        if index is None:
            raise UnknownDevice(dev)
        return index


def encode_dump_request(msg_type: int, family: int, seq: int, table: int = 0) -> bytes:
    """An RTM_GETROUTE (with `table`: filtered by table under NETLINK_GET_STRICT_CHK),
    RTM_GETLINK or RTM_GETADDR dump request."""
    if msg_type == RTM_GETLINK:
        body = IFINFOMSG.pack(family, 0, 0, 0, 0)
    elif msg_type == RTM_GETADDR:
        body = IFADDRMSG.pack(family, 0, 0, 0, 0)
    else:
        body = RTMSG.pack(family, 0, 0, 0, table if table < 256 else RT_TABLE_UNSPEC, 0, 0, 0, 0)
        if table:
            body += _u32(RTA_TABLE, table)
    return NLMSGHDR.pack(16 + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body


