"""Bulk lanes of the FIB state: a big batch of routes that are all new, handled by whole-dict
operations instead of one Python step per route.

DOC: a table being learned (start-up, a peer's first full feed) reaches the FIB as tens of
thousands of prefixes that nothing of ours holds yet, sharing a handful of interned
`KernelRoute`s. For that shape the general per-prefix loops of `FibState` (`want`, `plan`,
`done`) and `NhLayer` (`expand`, `done`) do nothing but copy: each lane here first checks, with
C-level set and dict operations (no Python call per prefix), that the whole batch is of that
shape, and then does the copy in bulk (``dict.update``, ``map``/``zip`` over the ops). When the
check fails (a prefix is already installed, in flight, failed, adopted, has leftovers at other
metrics; a route needs its metric filled; an op is not an ADD; an error came back) the lane
returns None/False and the caller runs its general loop, which stays the reference: a lane must
leave exactly the state that loop would (tests/test_fib_bulk.py compares both on the same
inputs).

A batch that went through the lanes from start to end needs fewer checks at its end: `plan_new`
remembers the batch whose table became the in-flight one (`FibState.bulk`), and `done_added`
adds that table to `actual` whole while it is still exactly the batch's; the nexthop layer's
lanes remember their batch the same way (`NhLayer.bulk`). A batch of one route (a table's shape)
gets its group and its user count once. `plan_new` hands out its ADDs as one `runops.AddRun` and
`expand_new` turns that into one `runops.NhAddRun`: no op object per route unless something
indexes them (an error to match, a general loop).

Each lane takes the owner's state object and runs on the owner's task, like the method it
shortcuts.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from itertools import islice, repeat
from operator import and_, eq, is_, itemgetter
from typing import TYPE_CHECKING

from ..core.model import KernelRoute, Prefix
from .nhkeys import _V6_FLAG, group_key
from .runops import AddRun, NhAddRun
from .types import Op, OpKind, new_nh_route_op, new_op

if TYPE_CHECKING:
    from .nhg import NhLayer
    from .reconciler import FibState

MIN = 64  # smaller batches take the general loop (the checks would cost more than they save)
ADD = OpKind.ADD
_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)
_ID_NONE = id(None)


def _distinct(values) -> dict[int, object]:
    """The distinct objects among `values`, by identity (routes are interned: a handful)."""
    values = list(values)
    if _one_object(values):
        return {id(values[0]): values[0]}
    return dict(zip(map(id, values), values))


def _one_object(values: list) -> bool:
    """Whether `values` are all one object (a table's shape): ``operator.is_`` over them in C,
    no int object per value as ``id`` would make."""
    return bool(values) and all(map(is_, values, repeat(values[0])))


def _disjoint(keys, table) -> bool:
    return not table or table.keys().isdisjoint(keys)


def want_new(fib: FibState, changes: Mapping[Prefix, KernelRoute | None]) -> bool:
    """`FibState.want` for prefixes that are all new to us, each wanting a route with its metric
    set (not 0: the IPv6 normalisation is per prefix): they go to `pending` as they are."""
    if len(changes) < MIN or fib.extra or not _disjoint(changes, fib.failed):
        return False
    if not fib.actual.keys().isdisjoint(changes) or not _disjoint(changes, fib.inflight):
        return False
    for route in _distinct(changes.values()).values():
        if route is None or not route.metric:  # (None: nothing wanted; 0 or None: per prefix)
            return False
    if fib.stale:
        fib.stale.difference_update(changes)
    if fib.pending:
        fib.pending.update(changes)
    else:  # nothing pending: `changes` itself becomes the table (the caller handed it over)
        fib.pending = changes if changes.__class__ is dict else dict(changes)
    return True


def plan_new(fib: FibState, held, skip_failed) -> AddRun | None:
    """`FibState.plan` when every pending prefix is new (nothing of ours in the kernel or in
    flight, not held, not waiting for a retry) and wants a route: one ADD each, as one `AddRun`,
    and the pending table becomes the in-flight one."""
    pending = fib.pending
    if len(pending) < MIN or fib.extra or (held and not held.isdisjoint(pending)):
        return None
    if not fib.actual.keys().isdisjoint(pending) or not _disjoint(pending, fib.inflight):
        return None
    if skip_failed and not skip_failed.keys().isdisjoint(pending):
        return None
    routes = list(pending.values())
    # one `AddRun`, no op per route (`runops`): one route for all (a table's shape) or one each
    if _one_object(routes) and routes[0] is not None:
        ops = AddRun(list(pending), routes[0], None)
    elif _ID_NONE in set(map(id, routes)):
        return None
    else:
        ops = AddRun(list(pending), None, routes)
    if fib.inflight:
        fib.inflight.update(pending)
        fib.bulk = None
    else:  # the in-flight table is this batch's: `done_added` may take it over whole
        fib.inflight = pending
        fib.bulk = (ops, pending, len(pending), fib.kernel_seen)
    fib.pending = {}
    return ops


def done_added(fib: FibState, ops: Sequence[Op], errors) -> bool:
    """`FibState.done` for a batch of ADDs that all succeeded, of prefixes that still have
    nothing of ours in `actual` or `pending` (nor leftovers, nor failures to clear). When these
    are the ops of the last `plan_new` and the in-flight table is still the one it handed over,
    that table becomes part of `actual` with one ``dict.update`` (no pass over the ops)."""
    memo = fib.bulk
    if memo is not None and memo[0] is ops:
        fib.bulk = None
    else:
        memo = None
    if len(ops) < MIN or errors or fib.extra or fib.failed:
        return False
    if memo is not None and fib.inflight is memo[1] and len(memo[1]) == memo[2]:
        # the in-flight table is exactly these ops' (entries are only ever added to it by a plan
        # of prefixes not in flight, and removed by a done): take it over whole; `plan_new` saw
        # none of them in `actual`, and only the kernel's side can have put one there since
        inflight = memo[1]
        if (fib.kernel_seen != memo[3] and not fib.actual.keys().isdisjoint(inflight)) \
                or not _disjoint(inflight, fib.pending):
            return False
        fib.actual.update(inflight)
        fib.inflight = {}
        return True
    if ops.__class__ is AddRun:
        prefixes, routes = ops.prefixes, ops.route_iter()
    elif list(map(_first, ops)).count(ADD) != len(ops):  # (by identity, in C)
        return False
    else:
        prefixes, routes = list(map(_second, ops)), map(_third, ops)
    if not fib.actual.keys().isdisjoint(prefixes) or not _disjoint(prefixes, fib.pending):
        return False
    fib.actual.update(zip(prefixes, routes))
    inflight = fib.inflight
    deque(map(inflight.pop, prefixes, repeat(None)), maxlen=0)
    if not inflight:
        fib.inflight = {}
    return True


def expand_new(nhg: NhLayer, ops: Sequence[Op]) -> list | None:
    """`NhLayer.expand` for ADDs whose routes all go through groups: the group of each distinct
    route once, then every route op points at its route's group. Both address families in one
    run (a table of both being learned) only when every route has gateways of one family and
    every prefix is of its route's family (the group then follows the route; a device-only
    route's would follow each prefix: the general loop). The routes' ids and groups are
    remembered for the `done` of these kernel ops (`nh_done_added`)."""
    n = len(ops)
    if n < MIN or nhg.urgent:
        return None
    run = ops.__class__ is AddRun
    if run:  # (all ADDs: no op to read)
        lo, hi = min(ops.prefixes), max(ops.prefixes)
    elif list(map(_first, ops)).count(ADD) != n:
        return None
    else:
        lo, hi = min(map(_second, ops)), max(map(_second, ops))
    mixed = (lo & _V6_FLAG) != (hi & _V6_FLAG)
    if mixed and (not run or ops.route is not None):
        return None  # (both families, not as a run of routes each: the general loop)
    if run and ops.route is not None:  # one route for the whole run: no list per prefix
        ids, distinct = None, {id(ops.route): ops.route}
    else:
        routes = ops.routes if run else list(map(_third, ops))
        ids = list(map(id, routes))
        distinct = {ids[0]: routes[0]} if ids.count(ids[0]) == n else dict(zip(ids, routes))
    rep = dict.fromkeys(distinct, lo)  # route id -> a prefix of its family (the group's)
    if mixed:
        fams = {rid: _gateway_family(route) for rid, route in distinct.items()}
        if None in fams.values() or not all(map(eq, map(and_, ops.prefixes, repeat(_V6_FLAG)),
                                                map(fams.__getitem__, ids))):
            return None
        rep = {rid: hi if fam else lo for rid, fam in fams.items()}
    if any(group_key(rep[rid], route) is None for rid, route in distinct.items()):
        return None  # a plain route among them: the general loop
    planned: dict[tuple, int] = {}
    singles: list = []
    groups: list = []
    gids = {rid: nhg._group_of(new_op((ADD, rep[rid], route)), planned, singles, groups, set())
            for rid, route in distinct.items()}
    if run:  # one `NhAddRun`: no route op per prefix (`runops`)
        kops = NhAddRun(singles + groups, ops, *((next(iter(gids.values())), None) if len(gids) == 1
                                                 else (None, list(map(gids.__getitem__, ids)))))
    else:
        kops = singles + groups + list(map(new_nh_route_op, zip(
            ops, repeat(gids[ids[0]]) if len(gids) == 1 else map(gids.__getitem__, ids))))
    nhg.bulk = (kops, len(singles) + len(groups), ids, {rid: (gids[rid], route) for rid, route in distinct.items()})
    return kops


def _gateway_family(route: KernelRoute) -> int | None:
    """`_V6_FLAG` or 0: the family of every gateway of `route`; None: a next hop without one
    (its group's family would be each prefix's), or gateways of both."""
    fams = {(":" in nh.gateway) if nh.gateway else None for nh in route.nexthops}
    if len(fams) != 1 or None in fams:
        return None
    return _V6_FLAG if fams.pop() else 0


def nh_done_added(nhg: NhLayer, kops: Sequence, errors) -> bool:
    """`NhLayer.done` for the kernel ops of the last `expand_new`, all succeeded, of prefixes
    that have no route of ours in `actual` yet: the objects first (their own loop), then the
    groups' user counts, one per distinct route; the routes are stamped with their groups once
    the reconciler stored them (`restamp_added`)."""
    memo = nhg.bulk
    if memo is None or memo[0] is not kops:
        return False  # (other kernel ops: urgent or injected writes, say; the memo waits)
    nhg.bulk = None
    if errors:
        return False
    _kops, start, ids, by_id = memo
    run = kops.__class__ is NhAddRun
    prefixes = kops.run.prefixes if run else list(map(_second, map(_first, islice(kops, start, None))))
    if not nhg.actual.keys().isdisjoint(prefixes):
        return False
    if start:
        nhg.done(kops.head if run else kops[:start], ())  # the objects first, as the general loop does
    users = nhg.users
    if len(by_id) == 1:  # one route (a table's shape): one count, one stamped route
        ((gid, route),) = by_id.values()
        users[gid] = users.get(gid, 0) + len(prefixes)
        nhg.bulk_restamp = (prefixes, None, nhg.stamp(route, gid))
        return True
    for rid, count in Counter(ids).items():
        gid = by_id[rid][0]
        users[gid] = users.get(gid, 0) + count
    stamped = {rid: nhg.stamp(route, gid) for rid, (gid, route) in by_id.items()}
    nhg.bulk_restamp = (prefixes, ids, stamped)
    return True


def restamp_added(nhg: NhLayer) -> None:
    """`NhLayer.restamp` for the batch of `nh_done_added`: the reconciler stored every route of it
    (no error came back), so each prefix's route is replaced by its stamped copy with one
    ``dict.update``."""
    prefixes, ids, stamped = nhg.bulk_restamp
    nhg.bulk_restamp = None
    nhg.actual.update(zip(prefixes, repeat(stamped) if ids is None else map(stamped.__getitem__, ids)))
