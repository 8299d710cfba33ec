"""Dumps on the FIB's scan socket: links, interface addresses, the routes of our table.

DOC: `NetlinkScanner` owns the scan socket (`agent.fib.nlsock`); the agent runs its dumps on the
event loop (start-up and the full scan), while the writer thread may have a batch in flight on
the request socket: the two never read each other's replies. Every read has a deadline
(`DUMP_TIMEOUT`): a dump that stops answering raises TimeoutError, which the caller handles like
any failed scan (nothing of a partial dump is applied), and the socket is reopened.

`dump()` issues one RTM_GETROUTE dump per family (with NETLINK_GET_STRICT_CHK the kernel already
filters by table), parses only what is needed and splits by protocol; a dump interrupted by
concurrent changes (NLM_F_DUMP_INTR) is retried. Two routes of ours on one prefix (different
metrics: a metric change in progress, or one a crash left behind) are both reported: the one at
the configured metric in `Dump.ours`, the others in `Dump.extra`; the reconciler decides which
one it keeps. `dump_links()` / `dump_addresses()` work on a socket of their own when none is
given (the address source, start-up).

With nexthop objects (`settings.nexthop_objects == "on"`) `dump()` first dumps every nexthop
object of the namespace (`dump_nexthops`), decodes the routes with that dump's expansion (a
route through an object gets the object's next hops) and reports the objects and the id each
route of ours points at in `Dump.nexthops` / `Dump.nhid`. `nexthops_supported()` asks the
kernel once whether it has nexthop objects at all (an RTM_GETNEXTHOP dump; Linux >= 5.3).
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Callable

from . import codec
from .codec import RTM_GETLINK, RTM_GETROUTE, RTM_NEWLINK, RTM_NEWROUTE, Decoder
from .encoder import encode_dump_request
from .ifaces import decode_address, decode_link
from .nhcodec import RTM_NEWNEXTHOP, decode_nexthop, encode_nh_dump_request
from .nhkeys import expand_all
from .nlsock import DEFAULT_BUFFER, DUMP_TIMEOUT, NlSocket, dump
from .types import Dump, FibSettings, ForeignRoute, Link, NhObject

if TYPE_CHECKING:  # links.LinkIndex.from_kernel() uses dump_links(): no import cycle
    from .links import LinkIndex, LinkSnapshot


def _dump_objects(msg_type: int, reply_type: int, decode, sock: NlSocket | None) -> list:
    """One whole-namespace dump (links or addresses): every reply of `reply_type` through
    `decode(buf, off, end)`, None results skipped; retried when interrupted by changes."""
    own = sock is None
    sock = sock or NlSocket("scan", buffer=1 << 20)
    out: list = []

    def on_message(mtype, buf, off, end):
        if mtype == reply_type:
            item = decode(buf, off, end)
            if item is not None:
                out.append(item)

    try:
        with sock.owned():
            for _attempt in range(3):
                out.clear()
                seq = sock.seq.take()
                if dump(sock, encode_dump_request(msg_type, socket.AF_UNSPEC, seq), seq, on_message):
                    break
    finally:
        if own:
            sock.close()
    return out


def dump_links(sock: NlSocket | None = None, settings: FibSettings | None = None) -> list[Link]:
    """Every interface of the current network namespace (RTM_GETLINK dump)."""
    return _dump_objects(RTM_GETLINK, RTM_NEWLINK, decode_link, sock)


def dump_addresses(sock: NlSocket | None = None) -> list[tuple[str, int, int]]:
    """Every interface address of the current network namespace: (address, prefix length, scope)."""
    return _dump_objects(codec.RTM_GETADDR, codec.RTM_NEWADDR, decode_address, sock)


def dump_nexthops(sock: NlSocket, name_of, interrupt=None) -> dict[int, NhObject]:
    """Every nexthop object of the namespace, by id (call inside `sock.owned()`)."""
    for _attempt in range(3):
        out: dict[int, NhObject] = {}

        def on_message(mtype, buf, off, end):
            if mtype == RTM_NEWNEXTHOP:
                obj = decode_nexthop(buf, off, end, name_of)
                if obj is not None:
                    out[obj.id] = obj

        seq = sock.seq.take()
        if dump(sock, encode_nh_dump_request(seq), seq, on_message, interrupt):
            break
    return out


def nexthops_supported() -> bool:
    """Whether this kernel has nexthop objects (a nexthop dump is answered)."""
    sock = NlSocket("scan", buffer=1 << 20)
    try:
        with sock.owned():
            dump_nexthops(sock, {})
        return True
    except OSError:  # EOPNOTSUPP / EINVAL from a kernel without them
        return False
    finally:
        sock.close()


class NetlinkScanner:
    """Link and route dumps for one FibSettings (see module doc)."""

    def __init__(self, settings: FibSettings, links: LinkIndex, buffer: int = DEFAULT_BUFFER,
                 timeout: float = DUMP_TIMEOUT):
        self.settings = settings
        self.links = links
        self.sock = NlSocket("scan", buffer=buffer, timeout=timeout)
        self._snapshot: LinkSnapshot = links.snapshot
        self.decoder = Decoder(settings, self._snapshot.name_of)

    def close(self) -> None:
        self.sock.close()

    def _sync_links(self) -> None:
        snap = self.links.snapshot
        if snap is not self._snapshot:
            self._snapshot = snap
            self.decoder.name_of = snap.name_of
            self.decoder.invalidate()

    def links_dump(self) -> list[Link]:
        return dump_links(self.sock, self.settings)

    def dump(self, interrupt: Callable[[], bool] | None = None) -> Dump:
        """Every route of the configured table, ours by prefix and the foreign ones. `interrupt`:
        asked after every datagram; True abandons the dump (`ScanInterrupted` is raised)."""
        self._sync_links()
        with self.sock.owned():
            for _attempt in range(3):
                nh = None
                if self.settings.nexthop_objects == "on":
                    nh = dump_nexthops(self.sock, self._snapshot.name_of, interrupt)
                    self.decoder.nh_of = expand_all(nh)
                    self.decoder.invalidate()
                ours: dict = {}
                extra: dict = {}
                nhid: dict = {}
                foreign: list[ForeignRoute] = []
                consistent = all(self._dump_family(f, ours, extra, foreign, nhid, interrupt)
                                 for f in (socket.AF_INET, socket.AF_INET6))
                if consistent:
                    break
        return Dump(ours, foreign, extra, nh, nhid)

    def _dump_family(self, family: int, ours: dict, extra: dict, foreign: list, nhid: dict,
                     interrupt: Callable[[], bool] | None) -> bool:
        decoder = self.decoder
        route = decoder.route
        protocol, metric = self.settings.protocol, self.settings.metric

        def on_message(mtype, buf, off, end):
            if mtype != RTM_NEWROUTE:
                return
            parsed = route(buf, off, end)
            if parsed is None:
                return
            prefix, proto, kroute = parsed
            if proto == protocol:
                old = ours.get(prefix)
                if old is not None:  # two of ours on one prefix (different metrics): each carries
                    # the group it points at, as the reconciler may keep either (`agent.fib.nhusers`)
                    kroute = kroute.with_nhid(decoder.last_nhid or 0)
                    old = ours[prefix] = old.with_nhid(nhid.get(prefix, 0))
                    if old.metric == metric:
                        extra[prefix] = extra.get(prefix, ()) + (kroute,)
                        return
                    extra[prefix] = extra.get(prefix, ()) + (old,)
                ours[prefix] = kroute
                if decoder.last_nhid:
                    nhid[prefix] = decoder.last_nhid
                else:
                    nhid.pop(prefix, None)
            else:
                foreign.append(ForeignRoute(prefix, proto, kroute.metric, kroute.type, kroute.nexthops))

        seq = self.sock.seq.take()
        request = encode_dump_request(RTM_GETROUTE, family, seq, self.settings.table)
        return dump(self.sock, request, seq, on_message, interrupt)
