"""FIB reconciler: what is ours in the kernel, what we want there, and the ops between the two.

DOC: pure logic, no I/O. It keeps
  * `actual`:  prefix -> KernelRoute of our protocol as the kernel has it (from the start-up dump,
               our successful writes and the route monitor);
  * `pending`: prefix -> KernelRoute or None (delete) only where the wanted state differs from
               `actual`; in steady state it is empty, so memory is one dict slot per route;
  * `stale`:   prefixes adopted from the kernel at start whose wanted state is not known yet.

Restart re-sync (FRR zebra's ``-K`` sweep, BIRD's kernel graceful restart): routes found in the
kernel at start are adopted untouched. Until the sync gate opens (every source finished its initial
sync, or the stale timer fired) no op touches an adopted prefix and nothing is deleted that a
previous run installed; brand-new prefixes may be added. When the gate opens, adopted routes that
no source wants are deleted, changed ones replaced, and unchanged ones cost zero writes.

Drift: a monitor event for our route that differs from `actual` (``ip route del``, a replace by
hand) re-queues the wanted state, so the next flush repairs it. Ops that failed stay pending and
are retried; their errors are kept per prefix for `explain`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model import KernelRoute, Prefix
from .types import FibSettings, Op, OpError, OpKind

_UNKNOWN = object()


class FibState:
    def __init__(self, settings: FibSettings) -> None:
        self.settings = settings
        self.actual: dict[Prefix, KernelRoute] = {}
        self.pending: dict[Prefix, KernelRoute | None] = {}
        self.stale: set[Prefix] = set()
        self.adopted: set[Prefix] = set()
        self.gate_open = False
        self.failed: dict[Prefix, OpError] = {}
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

    def want(self, changes: Mapping[Prefix, KernelRoute | None]) -> None:
        """The RIB's desired routes (None: nothing of ours) for some prefixes."""
        actual, pending, stale, fill = self.actual, self.pending, self.stale, self._fill
        for prefix, route in changes.items():
            route = fill(route)
            if stale:
                stale.discard(prefix)
            cur = actual.get(prefix)
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
        return self.actual.get(prefix)

    def kernel_changed(self, prefix: Prefix, route: KernelRoute | None) -> None:
        """The kernel now has `route` (None: nothing) of our protocol for `prefix`."""
        if self.actual.get(prefix) == route:
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
        if wanted == route:
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
    def plan(self) -> list[Op]:
        ops: list[Op] = []
        held = self.adopted if not self.gate_open else ()
        settled = []
        for prefix, route in self.pending.items():
            if prefix in held:
                continue
            cur = self.actual.get(prefix)
            if route == cur:
                settled.append(prefix)
            elif route is None:
                ops.append(Op(OpKind.DELETE, prefix, cur))
            elif cur is None:
                ops.append(Op(OpKind.ADD, prefix, route))
            elif cur.metric != route.metric:
                ops.append(Op(OpKind.ADD, prefix, route))
                ops.append(Op(OpKind.DELETE, prefix, cur))
            else:
                ops.append(Op(OpKind.REPLACE, prefix, route))
        for prefix in settled:
            del self.pending[prefix]
        return ops

    def done(self, ops: Sequence[Op], errors: Iterable[OpError]) -> None:
        """Record the outcome of `ops`: `errors` are the failed ones, all others succeeded."""
        failed = {id(e.op): e for e in errors}
        actual, pending = self.actual, self.pending
        for op in ops:
            if failed:
                err = failed.get(id(op))
                if err is not None:
                    self.failed[op.prefix] = err
                    continue
            prefix, route = op.prefix, op.route
            if op.kind is OpKind.DELETE:
                if actual.get(prefix) == route:
                    del actual[prefix]
            else:
                actual[prefix] = route
            want = pending.get(prefix, _UNKNOWN)
            if want is not _UNKNOWN and (want is actual.get(prefix) or want == actual.get(prefix)):
                del pending[prefix]
                if self.failed:
                    self.failed.pop(prefix, None)

    @property
    def converged(self) -> bool:
        return not self.pending
