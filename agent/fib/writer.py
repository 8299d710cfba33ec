"""Batched route writes on the FIB's request socket.

DOC: `NetlinkWriter` owns the request socket (`agent.fib.nlsock`); only its `apply()` touches it,
and the agent calls `apply()` from its one writer thread (at most one batch in flight).
Dumps never use this socket (they have the scan socket), so no reply of a batch can be taken
by a dump and no dump chunk by the batch.

`apply(ops)` encodes every op, sends them ~4096 messages per `send` with NLM_F_ACK only on the
last message of each batch (the kernel reports every failure anyway), then drains the replies:
rtnetlink processes a send synchronously, so when `send` returns every reply of the batch is
already queued and the final ACK marks its end. NLMSG_ERRORs are matched to ops by sequence
number. A delete that finds nothing (ESRCH/ENOENT) is success. An op whose device is unknown
fails with ENODEV without being sent. Only failures are returned. With more than one batch, one
sender thread sends batch k while the caller's thread encodes batch k+1 (the kernel's work
happens inside send() with the GIL released), at most `AHEAD` batches ahead of the kernel (the
encoder is several times faster: a run of 300,000 routes would otherwise wait encoded in memory,
~30 MB); apply() still returns only once every batch is
acknowledged, so callers see a plain synchronous call. A batch whose final ACK does not come
within `REPLY_TIMEOUT` raises TimeoutError (the caller rescans: the batch's fate is unknown).

**Urgent writes overtake a batch in flight.** `inject(ops)`, from another thread while `apply()`
runs, queues ops (a BFD failure's nexthop group replaces) that are sent before the next batch
goes to the kernel (checked by the thread that sends the batches, which may be far behind the
encoding): they wait for at most one batch of ~4096 messages, not for the whole call (hundreds
of thousands of routes while a table is learned). An injected op whose object a later op of the
call writes too waits for the end of the call (the later write must not undo it). Their outcome
is collected with `take_injected()` once `apply()` returned. When no `apply()` is under way
`inject` says no and the caller writes them itself.

Interface names are resolved with the `LinkSnapshot` current when `apply()` starts, one
immutable map for the whole call; the LinkIndex itself is changed only by its owner thread.
The batch size shrinks with a small receive buffer so a batch in which every op fails still
fits its error replies.
"""

from __future__ import annotations

import concurrent.futures
import errno
import os
import struct
import threading
import time
from typing import Sequence

from . import codec
from .codec import NLM_F_ACK, NLMSG_ERROR, iter_messages
from .encoder import Encoder, UnknownDevice
from .links import LinkIndex, LinkSnapshot
from .nlsock import DEFAULT_BUFFER, REPLY_TIMEOUT, NlSocket
from .runops import object_ops
from .types import FibSettings, NhOp, Op, OpError, OpKind

# Messages per `send`. Each batch costs the two writer threads a wake-up and a return of the GIL
# from the core task, which is the busy one while a table is learned: 4096 instead of 1024 halved
# the sender's wake-ups, cut the core task's wait for a core and its CPU, and took a full table
# ~4.6 % faster (docs/benchmarks.md, "Netlink batches of 4096 messages"); an urgent group write
# waits behind one batch (~10 ms of the kernel's time) at most.
BATCH = 4096
# A batch is one sendmsg, which must fit the socket's send buffer (32 MiB when the agent may force
# it, the system's wmem_max otherwise): at most half of it and `BATCH_BYTES`; the batch's count is
# bounded so that messages of up to `_MSG_BOUND` octets fit (longer ones cut the batch, op by op).
BATCH_BYTES = 1 << 20
_MSG_BOUND = 128
AHEAD = 4  # batches encoded ahead of the one being sent, at most
INJECT_SEQS = 256  # sequence numbers each apply() keeps for ops injected while it runs
_GONE = (errno.ESRCH, errno.ENOENT)
_FLAGS = struct.Struct("=H")  # nlmsghdr's nlmsg_flags, at offset 6


def _with_ack(msg: bytes) -> bytes:
    """`msg` with NLM_F_ACK added to its netlink header's flags (the batch's last message)."""
    return msg[:6] + _FLAGS.pack(_FLAGS.unpack_from(msg, 6)[0] | NLM_F_ACK) + msg[8:]


def _encode_one(encode, op, seq: int, i: int, failures: list) -> bytes | None:
    """`op`'s message, or None with the reason added to `failures` as ``(i, OpError)``: a device
    the kernel does not know fails with ENODEV, an op that cannot be encoded with EINVAL."""
    try:
        return encode(op, seq)
    except UnknownDevice:
        failures.append((i, OpError(op, errno.ENODEV, os.strerror(errno.ENODEV))))
    except (ValueError, TypeError):
        failures.append((i, OpError(op, errno.EINVAL, os.strerror(errno.EINVAL))))
    return None


class NetlinkWriter:
    """Batched route writes for one FibSettings (see module doc)."""

    def __init__(self, settings: FibSettings, links: LinkIndex, batch: int = BATCH,
                 buffer: int = DEFAULT_BUFFER):
        self.settings = settings
        self.links = links
        self.sock = NlSocket("request", buffer=buffer, timeout=REPLY_TIMEOUT)
        # an error reply costs roughly 1 KiB of receive buffer (skb truesize): keep a batch's
        # worst case (every op fails) inside the buffer
        self.batch_bytes = max(16 << 10, min(BATCH_BYTES, self.sock.sndbuf() // 2))
        self.batch = max(16, min(batch, self.sock.rcvbuf() // 1536, self.batch_bytes // _MSG_BOUND))
        self._snapshot: LinkSnapshot = links.snapshot
        self.encoder = Encoder(settings, self._snapshot.index_of)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.ops_sent = 0  # messages handed to the kernel
        self.errors = 0  # failures returned by apply()
        self.replies_lost = 0  # batches whose replies overflowed the socket (resync advised)
        self._inject_lock = threading.Lock()
        self._accepting = False  # an apply() is under way and has batches left to send
        self._injected: list = []  # urgent ops waiting for its next batch boundary
        self._injected_done: list[tuple[list, list]] = []  # (ops, [(index, OpError)]) sent
        self._ops: Sequence = ()  # the ops of the apply() under way
        self._inject_first, self._inject_seqs = 0, 0  # its sequence numbers kept for injected ops

    def inject(self, ops: Sequence) -> bool:
        """Send `ops` at the running `apply()`'s next batch boundary (any thread); False when
        none is under way: the caller sends them itself."""
        with self._inject_lock:
            if not self._accepting:
                return False
            self._injected.extend(ops)
            return True

    def take_injected(self) -> list[tuple[list, list[OpError]]]:
        """The injected ops sent by the last `apply()` and their failures (call after it returned)."""
        done, self._injected_done = self._injected_done, []
        return [(ops, [e for _i, e in sorted(failures, key=lambda f: f[0])]) for ops, failures in done]

    def _send_injected(self, pos: int) -> None:
        """Send the injected ops now, ahead of the batch starting at `pos` in the call's ops
        (the sender's thread, before each batch; or the end of the call, `pos` past the end),
        except those whose object a later op of the call writes too: they wait for the end."""
        with self._inject_lock:
            todo, self._injected = self._injected, []
        if not todo:
            return
        rest = object_ops(self._ops, pos)  # (no route op of a run is built for this)
        ids = {k.id for k in todo}
        clash = {k.id for k in rest if k.__class__ is NhOp and k.id in ids} if rest else set()
        if pos < len(self._ops) and self._inject_seqs < len(todo):
            clash = ids  # no sequence numbers left in the call's reserve: at the end
        if clash:
            with self._inject_lock:
                self._injected[:0] = [k for k in todo if k.id in clash]
            todo = [k for k in todo if k.id not in clash]
            if not todo:
                return
        if pos < len(self._ops):  # from the reserve: the calling thread takes from the counter
            first = self._inject_first
            self._inject_first += len(todo)
            self._inject_seqs -= len(todo)
        else:
            first = self.sock.seq.take(len(todo))
        failures: list[tuple[int, OpError]] = []
        ops, index, msgs = [], [], []
        for i, op in enumerate(todo):  # (a nexthop object's message is made from the op alone)
            msg = _encode_one(self.encoder.encode, op, first + len(ops), i, failures)
            if msg is not None:
                ops.append(op)
                index.append(i)
                msgs.append(msg)
        self._injected_done.append((todo, failures))
        if ops:
            self._send_batch(first, ops, index, msgs, failures, injected=True)

    def _sender(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="netlink-send")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        self.sock.close()

    def _sync_links(self) -> None:
        snap = self.links.snapshot  # one read: this map stays the same for the whole apply()
        if snap is not self._snapshot:
            self._snapshot = snap
            self.encoder.index_of = snap.index_of
            self.encoder.invalidate()

    def apply(self, ops: Sequence[Op]) -> list[OpError]:
        """Send every op, batched; return the failures only, in the order of `ops`."""
        with self.sock.owned():
            self._ops = ops
            self._inject_first, self._inject_seqs = self.sock.seq.take(INJECT_SEQS), INJECT_SEQS
            with self._inject_lock:
                self._accepting = True
            ok = False
            try:
                out = self._apply(ops)
                ok = True
                return out
            finally:
                with self._inject_lock:
                    self._accepting = False
                if ok:
                    self._send_injected(len(ops))  # what came after the last batch went
                with self._inject_lock:
                    unsent, self._injected = self._injected, []
                if unsent:  # the call failed before it could send them
                    self._injected_done.append(
                        (unsent, [(i, OpError(op, errno.EIO, "not sent: the batch failed")) for i, op in enumerate(unsent)]))
                self._ops = ()

    def _apply(self, ops: Sequence[Op]) -> list[OpError]:
        self._sync_links()
        failures: list[tuple[int, OpError]] = []
        encode, encode_batch = self.encoder.encode, self.encoder.encode_batch
        seq = self.sock.seq
        batch, batch_bytes = self.batch, self.batch_bytes
        # With more than one batch, a sender thread writes batch k (the kernel does its work inside
        # send(), with the GIL released) while this thread encodes batch k+1. Batches still go out
        # in order, one at a time, and apply() returns only when all are acknowledged.
        sent: list = []
        send = self._send_batch
        if len(ops) > batch:
            pool = self._sender()

            def send(*a) -> None:
                if len(sent) >= AHEAD:  # (encoding outruns the kernel: bound what waits, memory)
                    sent[-AHEAD].exception()
                sent.append(pool.submit(self._send_batch, *a))
        i, n = 0, len(ops)
        try:
            while i < n:
                first = seq.take(batch)
                # the common case: a whole batch encodes and fits the byte bound (one comprehension)
                chunk = ops[i:i + batch]
                try:
                    msgs = encode_batch(chunk, first)
                except (LookupError, ValueError, TypeError):
                    msgs = None
                if msgs is not None and sum(map(len, msgs)) < batch_bytes:
                    send(first, chunk, range(i, i + len(chunk)), msgs, failures)
                    i += len(chunk)
                    continue
                # else op by op, up to one batch: failed encodings are reported, big messages cut it
                batch_ops: list[Op] = []
                batch_index: list[int] = []  # position in `ops` of each op in the batch
                batch_msgs: list[bytes] = []
                size = 0
                while i < n and len(batch_ops) < batch and size < batch_bytes:
                    op = ops[i]
                    msg = _encode_one(encode, op, first + len(batch_ops), i, failures)
                    if msg is not None:
                        batch_ops.append(op)
                        batch_index.append(i)
                        batch_msgs.append(msg)
                        size += len(msg)
                    i += 1
                if batch_ops:
                    send(first, batch_ops, batch_index, batch_msgs, failures)
        finally:
            for future in sent:
                future.exception()  # every batch has finished before the socket is released
        for future in sent:
            future.result()  # re-raises a sender error here
        failures.sort(key=lambda item: item[0])
        self.errors += len(failures)
        return [failure for _i, failure in failures]

    def _send_batch(self, first: int, ops: Sequence[Op], index: Sequence[int], msgs: list[bytes],
                    failures: list[tuple[int, OpError]], injected: bool = False) -> None:
        if self._injected and not injected:  # urgent ops from another thread go first
            self._send_injected(index[0])
        last = first + len(ops) - 1
        msgs[-1] = _with_ack(msgs[-1])
        sock = self.sock
        sock.send(b"".join(msgs))
        self.ops_sent += len(ops)
        lost = False
        deadline = None
        while True:
            try:
                buf = sock.recv_nowait()
                if buf is None:
                    if lost:  # replies were dropped; rtnetlink answered synchronously, nothing more comes
                        self.replies_lost += 1
                        return
                    if deadline is None:  # one REPLY_TIMEOUT for the batch, then TimeoutError
                        deadline = time.monotonic() + sock.timeout
                    buf = sock.recv(deadline)
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
