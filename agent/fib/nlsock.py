"""NETLINK_ROUTE sockets: one role, one owner, no read without a deadline.

DOC: the FIB keeps one socket per role, as BIRD does (sysdep/linux/netlink.c keeps separate
sockets for scans and for requests):

* the **request** socket (`agent.fib.writer`) carries batched route writes and their ACKs; it is
  used only by whoever runs `NetlinkWriter.apply` (the agent's writer thread);
* the **scan** socket (`agent.fib.scanner`) carries link, address and route dumps; it is used
  only by the thread that runs the full scan (the agent's event loop);
* the **monitor** socket (`agent.fib.monitor`) is subscribed to multicast groups and only read,
  without blocking, by the event loop.

Replies on a netlink socket go to whoever calls `recv` first, and a reader that skips "other"
sequence numbers throws away the other side's replies: with one socket shared by a dump and a
batch, the dump lost chunks (a scan that silently misses routes), the batch lost its ACK (a
10 s timeout, every op marked failed though applied) or the dump lost its NLMSG_DONE (a `recv`
that never returns, on the event loop). So a socket here is never shared: `NlSocket.owned()`
refuses a second concurrent user (an assertion, not a lock: nobody waits on it), and every
blocking read goes through `recv(deadline)`, which raises `TimeoutError` instead of hanging.
After a failed exchange the socket is reopened: the kernel may still be answering the abandoned
request (a dump in progress makes the next dump request fail with EBUSY).

The kernel stamps a route notification with the port id and sequence number of the request
that caused it. Request sockets (role "request") register their port id in `WRITER_PORTS` while
open, so the monitor can tell the echo of our own writes from a change someone else made (see
`agent.fib.monitor`); the set only changes when a writer socket is opened or closed.

Sockets are non-blocking at the descriptor level; waiting is `poll` with the time left.
Buffers are raised to 32 MiB with SO_RCVBUFFORCE/SO_SNDBUFFORCE (root), falling back to
SO_RCVBUF/SO_SNDBUF (capped by net.core.rmem_max).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import threading
import time
from typing import Callable, Iterator

from . import codec
from .codec import NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR, iter_messages

SOL_NETLINK = 270
NETLINK_CAP_ACK = 10
NETLINK_GET_STRICT_CHK = 12
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33
DEFAULT_BUFFER = 32 << 20
RECV_SIZE = 1 << 16
# A dump is answered synchronously: the kernel queues its first chunk before send() returns and
# builds the next one inside recv(). Any wait at all means the reply went elsewhere.
DUMP_TIMEOUT = 5.0
# A batch is processed inside send(); its replies are queued when send() returns.
REPLY_TIMEOUT = 10.0
# port ids of this process's open request sockets (writers): notifications carrying one of
# them are the echo of our own writes
WRITER_PORTS: set[int] = set()


def open_socket(groups: int = 0, buffer: int = DEFAULT_BUFFER) -> socket.socket:
    """A bound, non-blocking NETLINK_ROUTE socket with large buffers and short error replies."""
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
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Seq:
    """Sequence numbers of one socket."""

    def __init__(self) -> None:
        self.value = int(time.time()) & 0x3FFFFFFF or 1

    def take(self, count: int = 1) -> int:
        """Reserve `count` consecutive sequence numbers (never wrapping inside the range)."""
        if self.value + count >= 0x7FFFFFFF:
            self.value = 1
        first = self.value
        self.value += count
        return first


class SocketBusy(RuntimeError):
    """Two users at once on a socket that has one owner: a bug in the caller."""


class NlSocket:
    """A request/reply NETLINK_ROUTE socket of one role (see module doc)."""

    def __init__(self, role: str, buffer: int = DEFAULT_BUFFER, timeout: float = DUMP_TIMEOUT):
        self.role = role
        self.buffer = buffer
        self.timeout = timeout
        self.seq = Seq()
        self.sock = open_socket(buffer=buffer)
        self._register()
        self._busy = threading.Lock()
        self.timeouts = 0  # reads that gave up (each one an error for the caller)
        self.reopened = 0

    def fileno(self) -> int:
        return self.sock.fileno()

    def _register(self) -> None:
        self.port = self.sock.getsockname()[0]
        if self.role == "request":
            WRITER_PORTS.add(self.port)

    def close(self) -> None:
        WRITER_PORTS.discard(self.port)
        self.sock.close()

    def rcvbuf(self) -> int:
        return self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    def sndbuf(self) -> int:
        return self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)

    @contextlib.contextmanager
    def owned(self) -> Iterator["NlSocket"]:
        """One request/reply exchange. Never waits: a second concurrent user is refused with
        `SocketBusy`. When the exchange fails, the socket is replaced by a fresh one."""
        if not self._busy.acquire(blocking=False):
            raise SocketBusy(f"netlink {self.role} socket is in use by another thread")
        try:
            yield self
        except BaseException:
            self._reopen()
            raise
        finally:
            self._busy.release()

    def _reopen(self) -> None:
        try:
            fresh = open_socket(buffer=self.buffer)
        except OSError:
            return  # keep the old one; the next exchange filters stale replies by sequence
        self.close()
        self.sock = fresh
        self._register()
        self.reopened += 1

    def send(self, data: bytes) -> None:
        """Send one datagram. A full send buffer (EAGAIN) is waited out, with the deadline."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.sock.send(data)
                return
            except BlockingIOError:
                self._wait(select.POLLOUT, deadline)

    def recv(self, deadline: float | None = None) -> bytes:
        """The next datagram; `TimeoutError` when none arrives by `deadline` (default: the
        socket's timeout from now). ENOBUFS and other errors are raised as OSError."""
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.sock.recv(RECV_SIZE)
            except BlockingIOError:
                self._wait(select.POLLIN, deadline)

    def recv_nowait(self) -> bytes | None:
        """The next datagram, or None when nothing is queued."""
        try:
            return self.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return None

    def _wait(self, event: int, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left > 0:
            poller = select.poll()
            poller.register(self.sock, event)
            if poller.poll(left * 1000):
                return
        self.timeouts += 1
        raise TimeoutError(errno.ETIMEDOUT, f"netlink {self.role} socket: no reply within {self.timeout:g}s")


OnMessage = Callable[[int, bytes, int, int], None]


class ScanInterrupted(Exception):
    """A dump gave way to something more urgent (its `interrupt()` said so); nothing of it is
    used, and `NlSocket.owned` replaces the socket (the rest of the dump is never read)."""


def dump(sock: NlSocket, request: bytes, seq: int, on_message: OnMessage,
         interrupt: Callable[[], bool] | None = None) -> bool:
    """Send a dump request and feed each reply message to `on_message(type, buf, off, end)`.

    Returns False when the kernel flagged the dump as interrupted (NLM_F_DUMP_INTR), True
    otherwise. A missing table (ENOENT) is an empty dump; other errors raise OSError, a reply
    that stops coming raises TimeoutError. `interrupt()` is asked after every datagram read:
    True raises ScanInterrupted. Call it inside `sock.owned()`.
    """
    sock.send(request)
    consistent = True
    while True:
        buf = sock.recv()
        if interrupt is not None and interrupt():
            raise ScanInterrupted()
        for mtype, mflags, mseq, off, end in iter_messages(buf):
            if mseq != seq:
                continue  # a stale reply of an exchange abandoned on this socket
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
