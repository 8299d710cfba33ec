"""The route monitor: kernel route and link notifications for our table.

DOC: `RouteMonitor` owns the monitor socket, subscribed to the link and IPv4/IPv6 route groups and
never used for requests. It is non-blocking and read only by the event loop (`read()` drains what
is queued and returns). Link events update the `LinkIndex` in order (the monitor's thread is the
index's owner), so later route messages of the same read resolve the new names. When the kernel
dropped events (ENOBUFS) `read()` returns an `Overrun()` and the caller rescans.

Echoes of our own writes are dropped: they tell nothing the reconciler does not learn from the
writer's result, and a late one is harmful. A classic BPF filter drops our own route additions
in the kernel (`attach_drop_own_additions`); deletions caused by our writer are recognised by the
port id the kernel stamps on the notification (`nlsock.WRITER_PORTS`) and dropped here. Without
that, the echoes of a big delete batch, read at most MAX_RECVS_PER_READ datagrams per loop turn,
could still be arriving after the same routes had been added again, and looked like someone
deleting them: the reconciler re-added routes the kernel had (EEXIST).

With nexthop objects the socket also joins RTNLGRP_NEXTHOP: an RTM_NEWNEXTHOP/DELNEXTHOP of our
protocol not caused by our writer (``ip nexthop del`` of ours, a device going down, which makes
the kernel drop its next hops and the routes through them) comes out as an `NhEvent`, and the
caller rescans. Route messages through an object are decoded with the nexthop layer's live
expansion (`nexthops`, see `agent.fib.codec`).
"""

from __future__ import annotations

import ctypes
import errno
import socket
import struct
import sys

from . import codec
from .codec import RTM_NEWROUTE, Decoder, iter_messages
from .links import LinkIndex
from .nhcodec import RTM_DELNEXTHOP, RTM_NEWNEXTHOP, RTNLGRP_NEXTHOP, nh_protocol_and_id
from .nlsock import DEFAULT_BUFFER, RECV_SIZE, SOL_NETLINK, WRITER_PORTS, open_socket
from .types import FibSettings, LinkEvent, NhEvent, Overrun, RouteEvent

SO_ATTACH_FILTER = 26
NETLINK_ADD_MEMBERSHIP = 1
_ROUTE_MESSAGES = (RTM_NEWROUTE, codec.RTM_DELROUTE, RTM_NEWNEXTHOP, RTM_DELNEXTHOP)
_NH_MESSAGES = (RTM_NEWNEXTHOP, RTM_DELNEXTHOP)


def attach_drop_own_additions(sock: socket.socket, protocol: int):
    """A classic BPF socket filter that drops RTM_NEWROUTE notifications of our own protocol in
    the kernel: they are the echo of our own writes (one per route, ~4 µs each to receive and
    decode in Python). Deletions of our routes and everything foreign still arrive; a replace of
    our route by someone using our protocol number is left to the periodic full scan.
    Returns the filter buffer (keep it referenced while the socket lives)."""
    newroute = int.from_bytes(RTM_NEWROUTE.to_bytes(2, sys.byteorder), "big")  # ldh is big-endian
    insns = [
        (0x28, 0, 0, 4),           # ldh [4]          nlmsg_type
        (0x15, 0, 3, newroute),    # jeq RTM_NEWROUTE ? next : accept
        (0x30, 0, 0, 16 + 5),      # ldb [21]         rtmsg.rtm_protocol
        (0x15, 0, 1, protocol),    # jeq ours ? drop : accept
        (0x06, 0, 0, 0),           # ret 0            drop
        (0x06, 0, 0, 0xFFFFFFFF),  # ret all          accept
    ]
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in insns))
    fprog = struct.pack("HL", len(insns), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    return buf


class RouteMonitor:
    """Kernel route and link change notifications for our table (see module doc)."""

    MAX_RECVS_PER_READ = 256

    def __init__(self, settings: FibSettings, links: LinkIndex, buffer: int = DEFAULT_BUFFER,
                 drop_own_additions: bool = True, nexthops=None):
        self.settings = settings
        self.links = links
        groups = codec.RTMGRP_LINK | codec.RTMGRP_IPV4_ROUTE | codec.RTMGRP_IPV6_ROUTE
        self.sock = open_socket(groups=groups, buffer=buffer)
        if nexthops is not None:
            self.sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, RTNLGRP_NEXTHOP)
        self._filter = None
        self.drop_own = drop_own_additions  # False: every notification, echoes included (tests)
        if drop_own_additions:
            self._filter = attach_drop_own_additions(self.sock, settings.protocol)
        self.echoes_dropped = 0
        self._snapshot = links.snapshot
        self.decoder = Decoder(settings, self._snapshot.name_of, nexthops)
        self.overruns = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RouteMonitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self) -> list[RouteEvent | LinkEvent | Overrun]:
        """Drain what is queued (bounded, call again while readable); never blocks."""
        out: list = []
        decoder = self.decoder
        links = self.links
        ports = WRITER_PORTS if self.drop_own else ()
        pid_of = codec.U32.unpack_from
        decoder.sync_nexthops()
        for _ in range(self.MAX_RECVS_PER_READ):
            try:
                buf = self.sock.recv(RECV_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self.overruns += 1
                    if not out or not isinstance(out[-1], Overrun):
                        out.append(Overrun())
                    continue
                raise
            for mtype, _flags, seq, off, end in iter_messages(buf):
                if ports and pid_of(buf, off - 4)[0] in ports and mtype in _ROUTE_MESSAGES:
                    self.echoes_dropped += 1  # caused by our own writer (nlmsg_pid)
                    continue
                if mtype in _NH_MESSAGES:
                    protocol, nhid = nh_protocol_and_id(buf, off, end)
                    if protocol == self.settings.protocol:
                        out.append(NhEvent(mtype == RTM_DELNEXTHOP, nhid, protocol))
                    continue
                snap = links.snapshot
                if snap is not self._snapshot:
                    self._snapshot = snap
                    decoder.name_of = snap.name_of
                    decoder.invalidate()
                event = decoder.decode_one(mtype, seq, buf, off, end)
                if isinstance(event, (RouteEvent, LinkEvent)):
                    if isinstance(event, LinkEvent):
                        links.apply(event)
                    out.append(event)
        return out
