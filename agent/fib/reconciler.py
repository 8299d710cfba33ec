"""FIB reconciler: what is ours in the kernel, what we want there, and the ops between the two.

DOC: pure logic, no I/O. It keeps
  * `actual`:  prefix -> KernelRoute of our protocol as the kernel has it (from the start-up dump,
               our successful writes and the route monitor);
  * `pending`: prefix -> KernelRoute or None (delete) only where the wanted state differs from
               `actual`; in steady state it is empty, so memory is one dict slot per route;
  * `inflight`: prefix -> target of an op handed to the kernel and not yet confirmed by `done()`
               (writes run in a worker thread while this state keeps taking changes);
  * `stale`:   prefixes adopted from the kernel at start whose wanted state is not known yet.

Restart re-sync (FRR zebra's ``-K`` sweep, BIRD's kernel graceful restart): routes found in the
kernel at start are adopted untouched. Until the sync gate opens (every source finished its initial
sync, or the stale timer fired) no op touches an adopted prefix and nothing is deleted that a
previous run installed; brand-new prefixes may be added. When the gate opens, adopted routes that
no source wants are deleted, changed ones replaced, and unchanged ones cost zero writes.

Drift: a monitor event for our route that differs from `actual` (``ip route del``, a replace by
hand) re-queues the wanted state, so the next flush repairs it. Ops that failed stay pending and
are retried (when the caller asks, after a backoff); their errors are kept per prefix for
`explain`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

from ..core.model import KernelRoute, Prefix
from .types import FibSettings, Op, OpError, OpKind

_UNKNOWN = object()
_op = functools.partial(tuple.__new__, Op)  # Op(...) without the Python-level __new__: hot path
ADD, REPLACE, DELETE = OpKind.ADD, OpKind.REPLACE, OpKind.DELETE


class FibState:
    def __init__(self, settings: FibSettings) -> None:
        self.settings = settings
        self.actual: dict[Prefix, KernelRoute] = {}
        self.pending: dict[Prefix, KernelRoute | None] = {}
        self.stale: set[Prefix] = set()
        self.adopted: set[Prefix] = set()
        self.gate_open = False
        self.failed: dict[Prefix, OpError] = {}
        self.inflight: dict[Prefix, KernelRoute | None] = {}
        self._filled: dict[int, tuple[KernelRoute, KernelRoute]] = {}

    # ---- inputs ----
    def adopt(self, ours: Mapping[Prefix, KernelRoute]) -> None:
        """Start-up: take the routes of our protocol found in the kernel, without touching them."""
        self.actual.update(ours)
        self.stale.update(ours)
        self.adopted.update(ours)

    def _fill(self, route: KernelRoute | None) -> KernelRoute | None:
        """The route with the default metric filled in (cached per interned route)."""
        if route is None or route.metric is not None:
            return route
        hit = self._filled.get(id(route))
        if hit is None or hit[0] is not route or hit[1].metric != self.settings.metric:
            hit = self._filled[id(route)] = (route, route.with_metric(self.settings.metric))
        return hit[1]

    def expected(self, prefix: Prefix) -> KernelRoute | None:
        """What the kernel has, or will have once the op in flight for `prefix` succeeds."""
        inflight = self.inflight
        if inflight and prefix in inflight:
            return inflight[prefix]
        return self.actual.get(prefix)

    def want(self, changes: Mapping[Prefix, KernelRoute | None]) -> None:
        """The RIB's desired routes (None: nothing of ours) for some prefixes."""
        actual, pending, stale, fill, inflight = self.actual, self.pending, self.stale, self._fill, self.inflight
        for prefix, route in changes.items():
            if route is not None and route.metric is None:
                route = fill(route)
            if stale:
                stale.discard(prefix)
            cur = inflight[prefix] if inflight and prefix in inflight else actual.get(prefix)
            if cur is route or cur == route:
                pending.pop(prefix, None)
                if self.failed:
                    self.failed.pop(prefix, None)
            else:
                pending[prefix] = route

    def desired(self, prefix: Prefix):
        """What we want for `prefix`: a route, None, or _UNKNOWN while it is stale."""
        if prefix in self.pending:
            return self.pending[prefix]
        if prefix in self.stale:
            return _UNKNOWN
        return self.expected(prefix)

    def kernel_changed(self, prefix: Prefix, route: KernelRoute | None) -> None:
        """The kernel now has `route` (None: nothing) of our protocol for `prefix`.

        While an op for `prefix` is in flight, an event equal to its target is its echo. Any
        other event re-queues what we want, so it is re-asserted after the op completes (a
        change made by someone else in the few milliseconds after our own write of the same
        prefix is left to the periodic full scan)."""
        if self.inflight and prefix in self.inflight:
            if route == self.inflight[prefix]:
                return
        elif self.actual.get(prefix) == route:
            return
        wanted = self.desired(prefix)
        if route is None:
            self.actual.pop(prefix, None)
        else:
            self.actual[prefix] = route
        if wanted is _UNKNOWN:
            if route is None:
                self.stale.discard(prefix)
            return
        if wanted == route and prefix not in self.inflight:
            self.pending.pop(prefix, None)
        else:
            self.pending[prefix] = wanted

    def resync(self, ours: Mapping[Prefix, KernelRoute]) -> None:
        """A full dump of our routes (periodic scan, or after the monitor overflowed)."""
        for prefix in list(self.actual):
            if prefix not in ours:
                self.kernel_changed(prefix, None)
        for prefix, route in ours.items():
            self.kernel_changed(prefix, route)

    def open_gate(self) -> int:
        """All sources synced (or the stale timer fired): sweep what nobody wants. Returns the
        number of stale routes queued for deletion."""
        swept = 0
        for prefix in self.stale:
            if prefix in self.actual:
                self.pending[prefix] = None
                swept += 1
        self.stale.clear()
        self.adopted.clear()
        self.gate_open = True
        return swept

    # ---- ops ----
    def plan(self, retry_failed: bool = True) -> list[Op]:
        """The ops that bring the kernel to the wanted state, now allowed. Each planned prefix
        moves from `pending` to `inflight` until `done()`. Prefixes whose last op failed wait
        for a call with `retry_failed` (the caller's backoff timer)."""
        ops: list[Op] = []
        add = ops.append
        held = self.adopted if not self.gate_open else ()
        actual, inflight = self.actual, self.inflight
        skip_failed = self.failed if not retry_failed else ()
        settled = []
        for prefix, route in self.pending.items():
            if (held and prefix in held) or (inflight and prefix in inflight) or (
                    skip_failed and prefix in skip_failed):
                continue
            settled.append(prefix)
            cur = actual.get(prefix)
            if cur is None:
                if route is None:
                    continue
                add(_op((ADD, prefix, route)))
            elif route is None:
                add(_op((DELETE, prefix, cur)))
            elif route == cur:
                continue
            elif cur.metric != route.metric:
                add(_op((ADD, prefix, route)))
                add(_op((DELETE, prefix, cur)))
            else:
                add(_op((REPLACE, prefix, route)))
            inflight[prefix] = route
        pending = self.pending
        for prefix in settled:
            del pending[prefix]
        return ops

    def done(self, ops: Sequence[Op], errors: Iterable[OpError]) -> None:
        """Record the outcome of `ops`: `errors` are the failed ones, all others succeeded."""
        failed = {id(e.op): e for e in errors}
        actual, pending, inflight = self.actual, self.pending, self.inflight
        for op in ops:
            prefix, route = op.prefix, op.route
            target = inflight.pop(prefix, _UNKNOWN)  # (the second op of a metric change: _UNKNOWN)
            if failed:
                err = failed.get(id(op))
                if err is not None:
                    self.failed[prefix] = err
                    if target is not _UNKNOWN and prefix not in pending:
                        pending[prefix] = target  # still wanted: retried later
                    continue
            if op.kind is OpKind.DELETE:
                if actual.get(prefix) == route:
                    del actual[prefix]
            else:
                actual[prefix] = route
            if self.failed and target is not _UNKNOWN:
                self.failed.pop(prefix, None)
            want = pending.get(prefix, _UNKNOWN)
            if want is not _UNKNOWN and (want is actual.get(prefix) or want == actual.get(prefix)):
                del pending[prefix]

    @property
    def converged(self) -> bool:
        return not self.pending and not self.inflight
