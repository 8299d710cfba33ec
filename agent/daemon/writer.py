"""The FIB writer: hands planned route ops to a worker thread, takes the results back, retries.

DOC: netlink writes are blocking system calls, so they run in one worker thread ("fib-writer").
`flush()` (called by the core task after each pass over the queue) plans the ops and hands them
over; at most one batch is in flight, and the core task keeps taking events meanwhile. The
result comes back as a ``flushed`` event, so the FIB state is only ever touched by the core task.
Failed ops are retried with backoff (RETRY_MIN doubling to RETRY_MAX) through a ``retry`` event;
an EEXIST on add (a route we did not know about) or a failed batch asks for a full scan.

With nexthop objects (`routing.nhg`), the planned route ops go through `NhLayer.expand` (object
writes first, in-place group replaces, routes pointing at objects; or, with nothing else to do,
deletes of unused objects) and the outcome back through `nhg.record_outcome` (`NhLayer.done`,
which hands the errors over in terms of the reconciler's ops, then `FibState.done`, then the
layer's stamps on the stored routes).

Readiness lives here too: the agent is ready once the sync gate is open and the first write after
it completed (or there was nothing to write).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import time
from operator import itemgetter

from ..core.model import as_prefix
from ..fib.nhusers import record_outcome
from ..fib.nhkeys import nh_deletes
from ..fib.runops import kind_counts_of_run
from ..fib.types import NhOp, NhRouteOp, Op, OpError, OpKind
from .events import Event, EventQueue

_first = itemgetter(0)

log = logging.getLogger("route_agent")

RETRY_MIN, RETRY_MAX = 0.5, 30.0


class FibWriter:
    def __init__(self, routing, queue: EventQueue, metrics) -> None:
        self.routing = routing
        self.queue = queue
        self.metrics = metrics
        self.ready = False
        self.started = time.monotonic()
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fib-writer")
        self._retry_delay = RETRY_MIN
        self._retry_handle: asyncio.TimerHandle | None = None
        self._flushing = False
        self._flush_after_gate = False
        self._synced_once = False
        self._urgent_done: list = []  # outcomes of urgent writes waiting for the batch's (`urgent_flushed`)

    def flush(self, retry_failed: bool = False) -> None:
        """Hand the planned ops to the writer thread; at most one batch is in flight. The core
        task keeps taking events meanwhile; the result comes back as a "flushed" event."""
        if self._flushing:
            self._inject_urgent()
            return
        r = self.routing
        ops = r.fib.plan(retry_failed)
        kops = r.nhg.expand(ops, retry_failed) if r.nhg is not None else ops
        if r.nhg is not None and r.nhg.settled:  # already true in the kernel: done, no write
            settled = r.nhg.take_settled()
            r.fib.done(settled, ())
            r.nhg.restamp()
            if len(settled) == len(ops):
                ops = []
            else:
                ids = {id(o) for o in settled}
                ops = [o for o in ops if id(o) not in ids]
        if not kops:
            self._check_ready()
            return
        log.debug("writing %d route ops in %d kernel ops (gate %s)", len(ops), len(kops),
                  "open" if r.gate.open else "closed")
        self._flushing = True
        self._flush_after_gate = r.gate.open
        t0 = time.perf_counter()
        future = asyncio.get_running_loop().run_in_executor(self._executor, r.netlink.apply, kops)
        future.add_done_callback(lambda f: self.queue.put(Event("flushed", (ops, kops, f, t0))))

    def _inject_urgent(self) -> None:
        """A batch is in flight and urgent group replaces wait (a BFD failure,
        `NhLayer.without_gateway`): hand them to the writer thread, which sends them at its
        next batch boundary instead of after the whole batch (after any write of the same object
        still in that batch, `NetlinkWriter.inject`; their outcome is recorded after the batch's)."""
        nhg = self.routing.nhg
        inject = getattr(self.routing.netlink, "inject", None)
        if nhg is None or not nhg.urgent or inject is None:
            return
        urgent = nhg.urgent
        nhg.urgent = []
        if inject(urgent):
            log.info("%d urgent nexthop group writes overtake the batch in flight", len(urgent))
            return
        # the batch is written but its outcome still waits in the queue (behind a burst of
        # UPDATEs, maybe): the thread is free, they go now, on their own
        log.info("%d urgent nexthop group writes go ahead of the next batch", len(urgent))
        future = asyncio.get_running_loop().run_in_executor(self._executor, self.routing.netlink.apply, urgent)
        future.add_done_callback(lambda f: self.queue.put_urgent(Event("urgent-flushed", (urgent, f))))

    def urgent_flushed(self, data) -> None:
        """The outcome of urgent writes sent on their own: recorded after the outcome of the batch
        written before them, if that one is still waiting (the same groups may be in both)."""
        if self._flushing:
            self._urgent_done.append(data)
            return
        urgent, future = data
        self.routing.nhg.done(urgent, self._outcome(future, urgent))

    def _outcome(self, future, kops) -> list[OpError]:
        """The failures of a write handed to the thread, logged (the first 20); if the write
        itself failed its fate is unknown: every op counts as failed, and a rescan is queued."""
        try:
            errors = future.result()
        except Exception as exc:
            log.error("netlink write failed: %s; full resync", exc)
            errors = [OpError(op, errno.EIO, str(exc)) for op in kops]
            self.queue.put(Event("scan", "write-failed"))
        for e in errors[:20]:
            log.warning("netlink %s %s failed: %s", e.op.kind.value, _describe(e.op), e.message)
        return errors

    def flushed(self, data) -> None:
        ops, kops, future, t0 = data
        self._flushing = False
        errors = self._outcome(future, kops)
        kernel_errors = errors
        record_outcome(self.routing.fib, self.routing.nhg, ops, kops, errors)
        if self.routing.nhg is not None:
            take_injected = getattr(self.routing.netlink, "take_injected", None)
            for injected, failed in take_injected() if take_injected is not None else ():
                self.routing.nhg.done(injected, failed)  # (group replaces: no route op rides on them)
                kernel_errors = kernel_errors + failed
        self.metrics.reconcile_seconds.observe(time.perf_counter() - t0)
        for kind, n in kind_counts(kops).items():
            self.metrics.netlink_ops.labels(kind.value).inc(n)
        errors = kernel_errors
        for e in errors:
            self.metrics.netlink_errors.labels(e.op.kind.value, errno.errorcode.get(e.errno, str(e.errno))).inc()
        if any(e.errno == errno.EEXIST and e.op.kind == OpKind.ADD for e in errors):
            self.queue.put(Event("scan", "conflict"))  # a route we did not know about
        if errors or self.routing.fib.retry_waiting:  # a retry that met a batch in flight was lost
            self._schedule_retry()
        else:
            self._retry_delay = RETRY_MIN
        if self._flush_after_gate:
            self._synced_once = True
        waiting, self._urgent_done = self._urgent_done, []
        for data in waiting:
            self.urgent_flushed(data)

    def _schedule_retry(self) -> None:
        if self._retry_handle is not None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._retry_handle = None
            self.queue.put(Event("retry"))

        self._retry_handle = loop.call_later(self._retry_delay, fire)
        self._retry_delay = min(self._retry_delay * 2, RETRY_MAX)

    def _check_ready(self) -> None:
        """Ready once the gate is open and the first write after it has completed (or there was
        nothing to write): the initial re-sync is done, whatever single routes failed."""
        if not self.ready and self.routing.gate.open and (self._synced_once or not self._flushing):
            self.ready = True
            log.info("ready: initial re-sync done in %.3fs", time.monotonic() - self.started)

    def close(self) -> None:
        """Wait for a batch in flight to complete, then stop the thread."""
        self._executor.shutdown(wait=True)

    def flush_all(self) -> None:
        """--flush-on-exit: delete every route of ours, then every nexthop object of ours, from
        a fresh dump (a batch may have completed unrecorded)."""
        netlink = self.routing.netlink
        dump = netlink.dump()
        ops = [Op(OpKind.DELETE, p, r) for p, r in dump.ours.items()]
        ops += nh_deletes(dump.nexthops or {}, self.routing.settings.protocol)
        errors = netlink.apply(ops)
        log.info("flush-on-exit: deleted %d routes and nexthop objects (%d errors)",
                 len(ops) - len(errors), len(errors))


def kind_counts(kops) -> dict[OpKind, int]:
    """How many kernel ops of each kind `kops` holds: one comprehension takes the kinds out (a
    route op's `kind` is a Python property: its op's first field instead), and `list.count`
    counts them in C (it compares by identity first; an OpKind's hash is Python code, so no
    Counter)."""
    counted = kind_counts_of_run(kops)  # (a run's ops are not built for this)
    if counted is not None:
        return counted
    kinds = [k[0] if k.__class__ is NhRouteOp else k for k in kops]  # (the op a route op stands for)
    kinds = list(map(_first, kinds))
    return {kind: n for kind in OpKind if (n := kinds.count(kind))}


def _describe(op) -> str:
    if isinstance(op, NhOp):
        return f"nexthop id {op.id}"
    return f"{as_prefix(op.prefix)} {op.route}" + (f" nhid {op.nhid}" if isinstance(op, NhRouteOp) else "")
