"""FIB reconciler: what is ours in the kernel, what we want there, and the ops between the two.

DOC: pure logic, no I/O. It keeps
  * `actual`:  prefix -> KernelRoute of our protocol as the kernel has it (from the start-up dump,
               our successful writes and the route monitor);
  * `pending`: prefix -> KernelRoute or None (delete) only where the wanted state differs from
               `actual`; in steady state it is empty, so memory is one dict slot per route;
  * `inflight`: prefix -> target of an op handed to the kernel and not yet confirmed by `done()`
               (writes run in a worker thread while this state keeps taking changes);
  * `stale`:   prefixes adopted from the kernel at start whose wanted state is not known yet;
  * `extra`:   prefix -> further routes of ours in the kernel on that prefix at other metrics
               (the kernel keeps one route per prefix *and metric*): the old route of a metric
               change, or what a dump found beside the one we keep. They are deleted.

Metric changes are make-before-break: the new (prefix, metric) is ADDed alone; only when `done()`
confirms it does the old route move to `extra`, and the next `plan()` deletes it. A failed ADD
leaves the old route in place, still forwarding. IPv6 metric 0 is normalised to 1024 as the
kernel stores it (`types.kernel_metric`): wanting 0 and reading back 1024 is no difference, and
no IPv6 delete ever carries metric 0 (the kernel would take it as "any metric" and could delete
the new route of a metric change instead of the old one).

Restart re-sync (FRR zebra's ``-K`` sweep, BIRD's kernel graceful restart): routes found in the
kernel at start are adopted untouched. Until the sync gate opens (every source finished its initial
sync, or the stale timer fired) no op touches an adopted prefix and nothing is deleted that a
previous run installed; brand-new prefixes may be added; a prefix a source explicitly withdrew
(`release`) is no longer held. When the gate opens, adopted routes that
no source wants are deleted, changed ones replaced, and unchanged ones cost zero writes.

Drift: a monitor event for our route that differs from `actual` (``ip route del``, a replace by
hand) re-queues the wanted state, so the next flush repairs it. Ops that failed stay pending and
are retried (when the caller asks, after a backoff: `retry_waiting` says a timer is needed);
their errors are kept per prefix in `failed` for `explain`. The backoff holds only the same
target: a new wanted state for a failed prefix (e.g. its withdrawal) is planned at once. A full
scan settles `failed` against the dump: a prefix whose kernel state is what we want has
succeeded, whatever the error said (EEXIST for a route that is ours and wanted is success).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..core.model import V6_FLAG, KernelRoute, Prefix
from . import bulk
from .types import FibSettings, Op, OpError, OpKind, kernel_metric, new_op

_UNKNOWN = object()
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
        self.extra: dict[Prefix, tuple[KernelRoute, ...]] = {}
        self._filled: dict[int, tuple[KernelRoute, KernelRoute]] = {}
        self.bulk: tuple | None = None  # what `bulk.plan_new` handed over, for `bulk.done_added`
        # changes to `actual` from the kernel's side (adoption, monitor events, scans): the only
        # ones that can touch a prefix in flight (`done` touches only its own ops' prefixes)
        self.kernel_seen = 0
        # with nexthop objects: told when a route of `actual` is swapped for one of `extra` that
        # points at another group (`_promote`; set by `agent.fib.nhg.NhLayer`)
        self.stamp_moved: Callable[[int, int], None] | None = None

    # ---- inputs ----
    def adopt(self, ours: Mapping[Prefix, KernelRoute],
              extra: Mapping[Prefix, tuple[KernelRoute, ...]] | None = None) -> None:
        """Start-up: take the routes of our protocol found in the kernel, without touching them
        (`extra`: more of ours on a prefix of `ours`, deleted only once the gate opens)."""
        self.actual.update(ours)
        self.kernel_seen += 1
        self.stale.update(ours)
        self.adopted.update(ours)
        for prefix, routes in (extra or {}).items():
            for route in routes:
                self._add_extra(prefix, route)

    def _add_extra(self, prefix: Prefix, route: KernelRoute) -> None:
        have = self.extra.get(prefix, ())
        if route not in have:
            self.extra[prefix] = have + (route,)

    def _drop_extra(self, prefix: Prefix, metric: int) -> None:
        """Our route at `metric` is gone from the kernel, or is now the one we keep (the kernel
        keeps one route of ours per prefix and metric)."""
        have = self.extra.get(prefix)
        if have:
            rest = tuple(r for r in have if r.metric != metric)
            if rest:
                self.extra[prefix] = rest
            else:
                del self.extra[prefix]

    def _fill(self, route: KernelRoute | None) -> KernelRoute | None:
        """The route with the default metric filled in (cached per interned route)."""
        if route is None or route.metric is not None:
            return route
        hit = self._filled.get(id(route))
        if hit is None or hit[0] is not route or hit[1].metric != self.settings.metric:
            hit = self._filled[id(route)] = (route, route.with_metric(self.settings.metric))
        return hit[1]

    def _promote(self, prefix: Prefix, metric: int) -> None:
        """We want metric `metric` and the kernel already has a route of ours at that metric
        among the extras: plan against that one (no ADD that would fail with EEXIST)."""
        found = next((r for r in self.extra[prefix] if r.metric == metric), None)
        cur = self.actual.get(prefix)
        if found is None or cur is None or cur.metric == metric:
            return
        self._drop_extra(prefix, metric)
        self._add_extra(prefix, cur)
        self.actual[prefix] = found
        if found.nhid != cur.nhid and self.stamp_moved is not None:
            self.stamp_moved(cur.nhid, found.nhid)  # (the nexthop layer's counts: `agent.fib.nhusers`)
        self.kernel_seen += 1

    def expected(self, prefix: Prefix) -> KernelRoute | None:
        """What the kernel has, or will have once the op in flight for `prefix` succeeds."""
        inflight = self.inflight
        if inflight and prefix in inflight:
            return inflight[prefix]
        return self.actual.get(prefix)

    def want(self, changes: Mapping[Prefix, KernelRoute | None]) -> None:
        """The RIB's desired routes (None: nothing of ours) for some prefixes. `changes` is handed
        over: it may become the pending table itself (`bulk.want_new`)."""
        if bulk.want_new(self, changes):
            return
        actual, pending, stale, fill, inflight = self.actual, self.pending, self.stale, self._fill, self.inflight
        for prefix, route in changes.items():
            if route is not None:
                if route.metric is None:
                    route = fill(route)
                if route.metric == 0 and prefix & V6_FLAG:  # as the kernel stores it
                    route = route.with_metric(kernel_metric(6, 0))
                if self.extra and prefix in self.extra and prefix not in inflight:
                    self._promote(prefix, route.metric)
            if stale:
                stale.discard(prefix)
            cur = inflight[prefix] if inflight and prefix in inflight else actual.get(prefix)
            # (None == route: a Python call; `cur` is often the route stamped with its group, an
            # equal copy: its fields first, as the dataclass's == builds two tuples)
            if cur is route or (cur is not None and route is not None and (
                    (cur.nexthops is route.nexthops and cur.metric == route.metric and cur.type is route.type)
                    or cur == route)):
                pending.pop(prefix, None)
                if self.failed:
                    self.failed.pop(prefix, None)
            else:
                failed = self.failed
                if failed and prefix in failed and pending.get(prefix, _UNKNOWN) != route:
                    del failed[prefix]  # a new wanted state is a new op: the old one's backoff is moot
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
        self.kernel_seen += 1
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

    def resync(self, ours: Mapping[Prefix, KernelRoute],
               extra: Mapping[Prefix, tuple[KernelRoute, ...]] | None = None) -> None:
        """A full dump of our routes (periodic scan, or after the monitor overflowed). `extra`:
        further routes of ours on a prefix of `ours` (other metrics); of all the routes of a
        prefix, the one we want (or expect) is kept, the others are queued for deletion."""
        extra = extra or {}
        for prefix in list(self.actual):
            if prefix not in ours:
                self.kernel_changed(prefix, None)
        for prefix in list(self.extra):
            if prefix not in ours:
                del self.extra[prefix]
        for prefix, route in ours.items():
            more = extra.get(prefix)
            if more or prefix in self.extra:
                route = self._choose(prefix, (route, *(more or ())))
            self.kernel_changed(prefix, route)
        if self.failed:
            self._settle_failed()

    def _settle_failed(self) -> None:
        """After a full dump: a failed prefix whose kernel state is now what we want has
        succeeded, whatever the error was (an ADD refused with EEXIST because the route was
        already ours, a batch that timed out but was applied). A failed ADD whose prefix turned
        out to hold a route of ours is no conflict either: the next op is a REPLACE, planned at
        once. Prefixes with an op in flight are left to `done()`."""
        actual, pending, inflight, extra = self.actual, self.pending, self.inflight, self.extra
        for prefix, err in list(self.failed.items()):
            if prefix in inflight:
                continue
            if prefix not in pending and prefix not in extra:
                del self.failed[prefix]
            elif err.errno == errno.EEXIST and err.op.kind is ADD and prefix in actual:
                del self.failed[prefix]

    @property
    def retry_waiting(self) -> bool:
        """Some failed prefix still waits for a retry (the caller must keep a retry timer)."""
        pending, extra, inflight = self.pending, self.extra, self.inflight
        return any((p in pending or p in extra) and p not in inflight for p in self.failed)

    def _choose(self, prefix: Prefix, routes: tuple[KernelRoute, ...]) -> KernelRoute:
        """Of several routes of ours on one prefix, the one to keep; the others become `extra`."""
        wanted = self.desired(prefix)
        expected = self.expected(prefix)
        chosen = next((r for r in routes if r == wanted), None) or next(
            (r for r in routes if r == expected), None)
        if chosen is None:
            metric = getattr(wanted, "metric", None) if wanted is not _UNKNOWN else None
            chosen = next((r for r in routes if r.metric == metric), routes[0])
        rest = tuple(r for r in routes if r is not chosen)
        if rest:
            self.extra[prefix] = rest
        else:
            self.extra.pop(prefix, None)
        return chosen

    def release(self, changes: Mapping[Prefix, KernelRoute | None]) -> None:
        """A source explicitly withdrew its route for these prefixes (a BGP peer's withdrawal of a
        route it announced after the restart); `changes` is what the RIB wants for them now. That
        applies at once, even before the gate opens: the gate protects routes adopted from before
        the restart that no source has spoken about yet, not what a source says now. (The wanted
        state is given again: an announcement and its withdrawal in one batch leave the RIB
        unchanged, so it reports nothing for the prefix.)"""
        if not self.gate_open:
            for prefix in changes:
                self.adopted.discard(prefix)
            self.want(changes)

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
        actual, inflight, extra = self.actual, self.inflight, self.extra
        skip_failed = self.failed if not retry_failed else ()
        new = bulk.plan_new(self, held, skip_failed)
        if new is not None:
            return new
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
                add(new_op((ADD, prefix, route)))
            elif route is None:
                add(new_op((DELETE, prefix, cur)))
                for old in extra.get(prefix, ()) if extra else ():
                    add(new_op((DELETE, prefix, old)))  # nothing to keep: leftovers go at once
            elif route == cur:
                continue
            elif cur.metric != route.metric:
                add(new_op((ADD, prefix, route)))  # make-before-break: `cur` goes once this is done
            else:
                add(new_op((REPLACE, prefix, route)))
            inflight[prefix] = route
        pending = self.pending
        if len(settled) == len(pending):
            self.pending = pending = {}  # all planned (a dict never shrinks by deletions: let it go)
        else:
            for prefix in settled:
                del pending[prefix]
            if not pending:
                self.pending = pending = {}
        if extra:
            for prefix, olds in extra.items():
                if (prefix in inflight or prefix in pending or (held and prefix in held)
                        or (skip_failed and prefix in skip_failed)):
                    continue
                for old in olds:
                    add(new_op((DELETE, prefix, old)))
                inflight[prefix] = actual.get(prefix)
        return ops

    def done(self, ops: Sequence[Op], errors: Iterable[OpError]) -> None:
        """Record the outcome of `ops`: `errors` are the failed ones, all others succeeded."""
        if bulk.done_added(self, ops, errors):
            return
        failed = {id(e.op): e for e in errors}
        actual, pending, inflight, extra = self.actual, self.pending, self.inflight, self.extra
        for op in ops:
            kind, prefix, route = op
            target = inflight.pop(prefix, _UNKNOWN)  # (a further op of the same prefix: _UNKNOWN)
            err = failed.get(id(op)) if failed else None
            if extra and kind is DELETE and route in extra.get(prefix, ()):
                if err is None:  # a leftover at another metric is gone
                    self._drop_extra(prefix, route.metric)
                else:
                    self.failed[prefix] = err  # kept in `extra`: retried with the failed ones
                continue
            if err is not None:
                self.failed[prefix] = err
                if target is not _UNKNOWN and prefix not in pending:
                    pending[prefix] = target  # still wanted: retried later
                continue
            cur = actual.get(prefix)
            if kind is DELETE:
                if cur == route:
                    del actual[prefix]
            else:
                if cur is not None and cur.metric != route.metric:
                    self._add_extra(prefix, cur)  # the new route is confirmed: now the old one goes
                if extra:
                    self._drop_extra(prefix, route.metric)
                actual[prefix] = route
            if self.failed and target is not _UNKNOWN:
                self.failed.pop(prefix, None)
            if pending:
                want = pending.get(prefix, _UNKNOWN)
                if want is not _UNKNOWN and (want is actual.get(prefix) or want == actual.get(prefix)):
                    del pending[prefix]
        if not inflight:
            self.inflight = {}  # (as in plan(): the table of a big batch is let go)

    @property
    def converged(self) -> bool:
        return not self.pending and not self.inflight and not self.extra
