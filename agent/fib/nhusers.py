"""Which kernel nexthop group each route of ours points at: carried by the route, counted per
group (the `NhLayer`'s half that follows its users; pure logic, no I/O).

DOC: **which group a route of ours points at is carried by the route itself**: the `KernelRoute`
the reconciler keeps in its `actual` table for the prefix is stamped with the group's id
(`KernelRoute.nhid`, outside the route's equality), so the layer keeps no table per prefix of
its own (one prefix-keyed dict less: ~35 B per route at a full table). The layer holds a
reference to that table and keeps one invariant: `users[g]` is the number of prefixes whose
route in `actual` is stamped `g`. Every write to `actual` keeps it: `done` counts the outcome
of the route ops before the reconciler records them (reading the old stamps first) and
`restamp` stamps the routes the reconciler then stored (one stamped route object per (route,
group), shared); a route changed or deleted from the kernel's side keeps its stamp or gives
it up (`kernel_moved`), and a dump stamps every route from the kernel's own ids and counts
them again (`resync`, after the reconciler's). `record_outcome` is the order in one place.

A route replaced from outside keeps the stamp of the group we wrote (as a table of our own
would): the count stays that of our writes until the next write or scan. A route deleted from
the kernel's side gives its stamp up: it no longer uses the group, and the repair that follows
counts again. A leftover route of ours at another metric (`FibState.extra`) keeps the stamp it
had in `actual` (a dump's carry the kernel's ids); when the reconciler moves one back into
`actual` (`FibState._promote`) it says so (`stamp_moved`) and the counts follow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..core.model import KernelRoute, Prefix, intern
from . import bulk
from .types import Op, OpError

if TYPE_CHECKING:
    from .nhg import NhLayer
    from .reconciler import FibState


class GroupUsers:
    """The stamps on the routes of `actual` and the user count of every group (mixed into
    `NhLayer`, which sets `actual`, `users`, `_stamps`, `_restamp` and `bulk_restamp`)."""

    actual: dict[Prefix, KernelRoute]
    users: dict[int, int]
    _stamps: dict[tuple[int, int], tuple[KernelRoute, KernelRoute]]
    _restamp: list
    bulk_restamp: tuple | None

    def stamp_all(self, nhid: Mapping[Prefix, int], routes: Mapping[Prefix, KernelRoute],
                  extra: Mapping[Prefix, tuple[KernelRoute, ...]]) -> None:
        """Stamp every route in `actual` with the id a dump gives it (`nhid`: 0 where none, for
        the dump's route of the prefix in `routes`; the dump's other routes of a prefix, at other
        metrics, in `extra` carry theirs), and count the users again from the stamps."""
        actual, stamp, get, route_of = self.actual, self.stamp, nhid.get, routes.get
        for p, r in actual.items():
            i = get(p, 0)
            if r.nhid != i:
                dumped = route_of(p)
                if dumped is None or dumped.metric != r.metric:  # (kept: another metric's route)
                    i = next((x.nhid for x in extra.get(p, ()) if x.metric == r.metric), r.nhid)
                actual[p] = stamp(r, i)  # (a value replaced, no key added: safe while iterating)
        self.users = users = dict(Counter(r.nhid for r in actual.values()))
        users.pop(0, None)

    def route_nhid(self, prefix: Prefix) -> int | None:
        r = self.actual.get(prefix)
        return (r.nhid or None) if r is not None else None

    def stamp(self, route: KernelRoute, nhid: int) -> KernelRoute:
        """`route` stamped with group `nhid` (0: none), one object per (route, group) while it is
        cached (routes come interned: a table's prefixes share a handful)."""
        if route.nhid == nhid:
            return route
        if not nhid:
            return intern(KernelRoute(route.type, route.nexthops, route.metric))
        key = (id(route), nhid)
        hit = self._stamps.get(key)
        if hit is None or hit[0] is not route:
            if len(self._stamps) >= 1 << 16:
                self._stamps.clear()  # (routes and groups of the past: only sharing is lost)
            hit = self._stamps[key] = (route, route.with_nhid(nhid))
        return hit[1]

    def stamp_moved(self, old: int, new: int) -> None:
        """The reconciler put a route pointing at group `new` where one pointing at `old` was
        (`FibState._promote`): count the prefix for its new group."""
        if old:
            self._unuse(old)
        if new:
            self.users[new] = self.users.get(new, 0) + 1

    def kernel_moved(self, prefix: Prefix, old: KernelRoute | None) -> None:
        """The reconciler took a change of `prefix` from the kernel's side (`kernel_changed`; `old`:
        its route in `actual` before). A route replaced from outside keeps the group we wrote, as
        far as the count goes (the next write or scan settles it); a route gone from the kernel
        no longer uses its group."""
        actual = self.actual
        new = actual.get(prefix)
        if new is old or old is None or not old.nhid:
            return
        if new is None:
            self._unuse(old.nhid)
        else:
            actual[prefix] = self.stamp(new, old.nhid)

    def restamp(self) -> None:
        """After the reconciler recorded the ops `done` counted (`FibState.done`): stamp the routes
        it stored with their groups (see `record_outcome`)."""
        actual, stamp = self.actual, self.stamp
        todo, self._restamp = self._restamp, []
        for (_kind, prefix, route), nhid in todo:
            if actual.get(prefix) is route:
                actual[prefix] = stamp(route, nhid)
        if self.bulk_restamp is not None:
            bulk.restamp_added(self)

    def _unuse(self, nhid: int) -> None:
        users = self.users.get(nhid)
        if users is not None:
            if users > 1:
                self.users[nhid] = users - 1
            else:
                del self.users[nhid]


def record_outcome(fib: FibState, nhg: NhLayer | None, ops: Sequence[Op], kops: Sequence,
                   errors: Iterable[OpError]) -> list[OpError]:
    """Record the outcome of a written batch: the nexthop layer counts it first (it reads the
    groups the routes pointed at before), then the reconciler stores the routes, then the layer
    stamps them with their groups. Returns the errors in terms of the reconciler's `ops`."""
    if nhg is None:
        errors = list(errors)
        fib.done(ops, errors)
        return errors
    route_errors = nhg.done(kops, errors)
    fib.done(ops, route_errors)
    nhg.restamp()
    return route_errors
