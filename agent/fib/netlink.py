"""Thin I/O adapter between the FIB logic and the kernel: raw NETLINK_ROUTE sockets.

DOC: everything here is socket plumbing; the bytes are made and parsed by `agent.fib.codec`.

* `LinkIndex` owns the interface name <-> ifindex map and up state. It is filled from an
  RTM_GETLINK dump and kept current from the monitor's link events; its `generation` counter
  tells encoders/decoders holding its dicts when to drop their caches.
* `NetlinkFib.apply(ops)` encodes every op, sends them ~1024 messages per `send` with NLM_F_ACK
  only on the last message of each batch (the kernel reports every failure anyway), then drains
  the replies: rtnetlink processes a send synchronously, so when `send` returns every reply of
  the batch is already queued and the final ACK marks its end. NLMSG_ERRORs are matched to ops
  by sequence number. A delete that finds nothing (ESRCH/ENOENT) is success. An op whose device
  is unknown fails with ENODEV without being sent. Only failures are returned. With more than
  one batch, one sender thread sends batch k while the caller's thread encodes batch k+1 (the
  kernel's work happens inside send() with the GIL released); apply() still returns only once
  every batch is acknowledged, so callers see a plain synchronous call.
* `NetlinkFib.dump()` issues one RTM_GETROUTE dump per family (with NETLINK_GET_STRICT_CHK the
  kernel already filters by table), parses only what is needed and splits by protocol; a dump
  interrupted by concurrent changes (NLM_F_DUMP_INTR) is retried.
* `RouteMonitor` is a non-blocking socket on the link and IPv4/IPv6 route groups. `read()`
  drains it and returns RouteEvent/LinkEvent (link events update the LinkIndex in order, so later
  route messages resolve the new names) and `Overrun()` when the kernel dropped events (ENOBUFS).

Socket buffers are raised to 32 MiB with SO_RCVBUFFORCE/SO_SNDBUFFORCE (root), falling back to
SO_RCVBUF/SO_SNDBUF (capped by net.core.rmem_max); the batch size shrinks with a small buffer so
a batch in which every op fails still fits its error replies.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import errno
import os
import struct
import sys
import select
import socket
import time
from typing import Iterable, Sequence

from ..core.model import KernelRoute, Prefix
from . import codec
from .codec import (
    NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR, RTM_GETLINK, RTM_GETROUTE, RTM_NEWLINK,
    RTM_NEWROUTE, Decoder, Encoder, UnknownDevice, encode_dump_request, iter_messages,
)
from .types import (
    Dump, FibSettings, ForeignRoute, Link, LinkEvent, Op, OpError, OpKind, Overrun, RouteEvent,
)

SOL_NETLINK = 270
SO_ATTACH_FILTER = 26
NETLINK_CAP_ACK = 10
NETLINK_GET_STRICT_CHK = 12
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
DEFAULT_BUFFER = 32 << 20
BATCH = 1024
_BATCH_BYTES = 256 << 10
_RECV = 1 << 16
_REPLY_TIMEOUT = 10.0
_GONE = (errno.ESRCH, errno.ENOENT)


def open_socket(groups: int = 0, buffer: int = DEFAULT_BUFFER, blocking: bool = True) -> socket.socket:
    """A bound NETLINK_ROUTE socket with large buffers and short error replies."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
    try:
        for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, buffer)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, plain, buffer)
        for opt in (NETLINK_CAP_ACK, NETLINK_GET_STRICT_CHK):
            try:
                sock.setsockopt(SOL_NETLINK, opt, 1)
            except OSError:
                pass  # older kernel: errors echo the request / dumps are filtered in Python only
        sock.bind((0, groups))
        sock.setblocking(blocking)
    except BaseException:
        sock.close()
        raise
    return sock


class _Seq:
    def __init__(self) -> None:
        self.value = int(time.time()) & 0x3FFFFFFF or 1

    def take(self, count: int = 1) -> int:
        """Reserve `count` consecutive sequence numbers (never wrapping inside the range)."""
        if self.value + count >= 0x7FFFFFFF:
            self.value = 1
        first = self.value
        self.value += count
        return first


def _dump(sock: socket.socket, request: bytes, seq: int, on_message) -> bool:
    """Send a dump request and feed each reply message to `on_message(type, buf, off, end)`.

    Returns False when the kernel flagged the dump as interrupted (NLM_F_DUMP_INTR), True
    otherwise. A missing table (ENOENT) is an empty dump; other errors raise OSError.
    """
    sock.send(request)
    consistent = True
    while True:
        buf = sock.recv(_RECV)
        for mtype, mflags, mseq, off, end in iter_messages(buf):
            if mseq != seq:
                continue
            if mflags & NLM_F_DUMP_INTR:
                consistent = False
            if mtype == NLMSG_DONE:
                status = codec.I32.unpack_from(buf, off)[0] if end - off >= 4 else 0
                if status < 0 and status != -errno.ENOENT:  # ENOENT: no such table (yet)
                    raise OSError(-status, os.strerror(-status))
                return consistent
            if mtype == NLMSG_ERROR:
                err = -codec.I32.unpack_from(buf, off)[0]
                if err == errno.ENOENT:
                    return consistent
                if err:
                    raise OSError(err, os.strerror(err))
                continue
            on_message(mtype, buf, off, end)


def _dump_objects(msg_type: int, reply_type: int, decode, sock: socket.socket | None) -> list:
    """One whole-namespace dump (links or addresses): every reply of `reply_type` through
    `decode(buf, off, end)`, None results skipped; retried when interrupted by changes."""
    own = sock is None
    sock = sock or open_socket(buffer=1 << 20)
    out: list = []

    def on_message(mtype, buf, off, end):
        if mtype == reply_type:
            item = decode(buf, off, end)
            if item is not None:
                out.append(item)

    try:
        seq = _Seq().take()
        for _attempt in range(3):
            out.clear()
            if _dump(sock, encode_dump_request(msg_type, socket.AF_UNSPEC, seq), seq, on_message):
                break
            seq += 1
    finally:
        if own:
            sock.close()
    return out


def dump_links(sock: socket.socket | None = None, settings: FibSettings | None = None) -> list[Link]:
    """Every interface of the current network namespace (RTM_GETLINK dump)."""
    return _dump_objects(RTM_GETLINK, RTM_NEWLINK, Decoder(settings or FibSettings(), {}).link, sock)


def dump_addresses(sock: socket.socket | None = None) -> list[tuple[str, int, int]]:
    """Every interface address of the current network namespace: (address, prefix length, scope)."""
    return _dump_objects(codec.RTM_GETADDR, codec.RTM_NEWADDR, codec.decode_address, sock)


class LinkIndex:
    """Interface name <-> ifindex and up state; `generation` bumps on every change."""

    def __init__(self, links: Iterable[Link] = ()):
        self.index_of: dict[str, int] = {}
        self.name_of: dict[int, str] = {}
        self.up: dict[int, bool] = {}
        self.generation = 0
        self.load(links)

    @classmethod
    def from_kernel(cls) -> "LinkIndex":
        return cls(dump_links())

    def load(self, links: Iterable[Link]) -> None:
        """Replace the whole map (after a link dump). The dicts are cleared in place: encoders
        and decoders hold references to them."""
        self.index_of.clear()
        self.name_of.clear()
        self.up.clear()
        for link in links:
            self._set(link)
        self.generation += 1

    def apply(self, event: LinkEvent) -> None:
        link = event.link
        old = self.name_of.get(link.index)
        if old is not None and self.index_of.get(old) == link.index:
            del self.index_of[old]
        if event.deleted:
            self.name_of.pop(link.index, None)
            self.up.pop(link.index, None)
        else:
            self._set(link)
        self.generation += 1

    def _set(self, link: Link) -> None:
        self.index_of[link.name] = link.index
        self.name_of[link.index] = link.name
        self.up[link.index] = link.up

    def index(self, name: str) -> int | None:
        return self.index_of.get(name)

    def name(self, index: int) -> str | None:
        return self.name_of.get(index)

    def is_up(self, name: str) -> bool:
        index = self.index_of.get(name)
        return index is not None and self.up.get(index, False)

    def links(self) -> list[Link]:
        return [Link(name, index, self.up.get(index, False)) for index, name in sorted(self.name_of.items())]


class NetlinkFib:
    """Batched route writes and table dumps for one FibSettings (see module doc)."""

    def __init__(self, settings: FibSettings, links: LinkIndex, batch: int = BATCH,
                 buffer: int = DEFAULT_BUFFER):
        self.settings = settings
        self.links = links
        self.sock = open_socket(buffer=buffer)
        rcvbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # an error reply costs roughly 1 KiB of receive buffer (skb truesize): keep a batch's
        # worst case (every op fails) inside the buffer
        self.batch = max(16, min(batch, rcvbuf // 1536))
        self.encoder = Encoder(settings, links.index_of)
        self.decoder = Decoder(settings, links.name_of)
        self._generation = links.generation
        self._seq = _Seq()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.ops_sent = 0  # messages handed to the kernel
        self.errors = 0  # failures returned by apply()
        self.replies_lost = 0  # batches whose replies overflowed the socket (resync advised)
        # routes of ours that the last dump found beside another of ours on the same prefix (other
        # metric): not in Dump.ours, delete them to converge
        self.duplicates: list[tuple[Prefix, KernelRoute]] = []

    def _sender(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="netlink-send")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self.sock.close()

    def __enter__(self) -> "NetlinkFib":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sync_links(self) -> None:
        if self._generation != self.links.generation:
            self._generation = self.links.generation
            self.encoder.invalidate()
            self.decoder.invalidate()

    # ---- reads ----
    def links_dump(self) -> list[Link]:
        return dump_links(self.sock, self.settings)

    def dump(self) -> Dump:
        """Every route of the configured table, ours by prefix and the foreign ones."""
        self._sync_links()
        for _attempt in range(3):
            ours: dict = {}
            foreign: list[ForeignRoute] = []
            duplicates: list = []
            consistent = all(self._dump_family(f, ours, foreign, duplicates)
                             for f in (socket.AF_INET, socket.AF_INET6))
            if consistent:
                break
        self.duplicates = duplicates
        return Dump(ours, foreign)

    def _dump_family(self, family: int, ours: dict, foreign: list, duplicates: list) -> bool:
        route = self.decoder.route
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
                if old is not None:  # two of ours on one prefix (different metrics)
                    if old.metric == metric:
                        duplicates.append((prefix, kroute))
                        return
                    duplicates.append((prefix, old))
                ours[prefix] = kroute
            else:
                foreign.append(ForeignRoute(prefix, proto, kroute.metric, kroute.type, kroute.nexthops))

        seq = self._seq.take()
        request = encode_dump_request(RTM_GETROUTE, family, seq, self.settings.table)
        return _dump(self.sock, request, seq, on_message)

    # ---- writes ----
    def apply(self, ops: Sequence[Op]) -> list[OpError]:
        """Send every op, batched; return the failures only, in the order of `ops`."""
        self._sync_links()
        failures: list[tuple[int, OpError]] = []
        encode = self.encoder.encode
        batch_ops: list[Op] = []
        batch_index: list[int] = []  # position in `ops` of each op in the batch
        batch_msgs: list[bytes] = []
        size = 0
        first = self._seq.take(self.batch)
        # With more than one batch, a sender thread writes batch k (the kernel does its work inside
        # send(), with the GIL released) while this thread encodes batch k+1. Batches still go out
        # in order, one at a time, and apply() returns only when all are acknowledged.
        sent: list = []
        send = self._send_batch
        if len(ops) > self.batch:
            pool = self._sender()
            send = lambda *a: sent.append(pool.submit(self._send_batch, *a))  # noqa: E731
        for i, op in enumerate(ops):
            try:
                msg = encode(op, first + len(batch_ops))
            except UnknownDevice:
                failures.append((i, OpError(op, errno.ENODEV, os.strerror(errno.ENODEV))))
                continue
            except (ValueError, TypeError):
                failures.append((i, OpError(op, errno.EINVAL, os.strerror(errno.EINVAL))))
                continue
            batch_ops.append(op)
            batch_index.append(i)
            batch_msgs.append(msg)
            size += len(msg)
            if len(batch_ops) >= self.batch or size >= _BATCH_BYTES:
                send(first, batch_ops, batch_index, batch_msgs, failures)
                batch_ops, batch_index, batch_msgs, size = [], [], [], 0
                first = self._seq.take(self.batch)
        if batch_ops:
            send(first, batch_ops, batch_index, batch_msgs, failures)
        for future in sent:
            future.result()  # re-raises a sender error here
        failures.sort(key=lambda item: item[0])
        self.errors += len(failures)
        return [failure for _i, failure in failures]

    def _send_batch(self, first: int, ops: list[Op], index: list[int], msgs: list[bytes],
                    failures: list[tuple[int, OpError]]) -> None:
        last = first + len(ops) - 1
        msgs[-1] = self.encoder.encode(ops[-1], last, ack=True)
        self.sock.send(b"".join(msgs))
        self.ops_sent += len(ops)
        lost = False
        deadline = None
        while True:
            try:
                buf = self.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if lost:  # replies were dropped; rtnetlink answered synchronously, nothing more comes
                    self.replies_lost += 1
                    return
                deadline = deadline or time.monotonic() + _REPLY_TIMEOUT
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(errno.ETIMEDOUT, "no netlink ACK for the batch")
                select.select([self.sock], [], [], left)
                continue
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    lost = True
                    continue
                raise
            for mtype, _flags, seq, off, _end in iter_messages(buf):
                if mtype != NLMSG_ERROR or not first <= seq <= last:
                    continue
                err = -codec.I32.unpack_from(buf, off)[0]
                if err:
                    op = ops[seq - first]
                    if not (op.kind is OpKind.DELETE and err in _GONE):
                        failures.append((index[seq - first], OpError(op, err, os.strerror(err))))
                if seq == last:
                    return


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
                 drop_own_additions: bool = True):
        self.settings = settings
        self.links = links
        groups = codec.RTMGRP_LINK | codec.RTMGRP_IPV4_ROUTE | codec.RTMGRP_IPV6_ROUTE
        self.sock = open_socket(groups=groups, buffer=buffer, blocking=False)
        self._filter = None
        if drop_own_additions:
            self._filter = attach_drop_own_additions(self.sock, settings.protocol)
        self.decoder = Decoder(settings, links.name_of)
        self._generation = links.generation
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
        for _ in range(self.MAX_RECVS_PER_READ):
            try:
                buf = self.sock.recv(_RECV)
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
                if self._generation != self.links.generation:
                    self._generation = self.links.generation
                    decoder.invalidate()
                event = decoder.decode_one(mtype, seq, buf, off, end)
                if isinstance(event, (RouteEvent, LinkEvent)):
                    if isinstance(event, LinkEvent):
                        self.links.apply(event)
                    out.append(event)
        return out


def flush_ours(settings: FibSettings, links: LinkIndex | None = None) -> list[OpError]:
    """Delete every route of our protocol in the configured table (for --flush-on-exit)."""
    links = links or LinkIndex.from_kernel()
    with NetlinkFib(settings, links) as fib:
        ours = fib.dump().ours
        return fib.apply([Op(OpKind.DELETE, prefix, route) for prefix, route in ours.items()])
