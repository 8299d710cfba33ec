"""The group each route of ours points at, carried by its route in the reconciler's table
(`agent.fib.nhusers`): random plans, failures, metric changes, BFD shrinks, changes from the
kernel's side and scans against a model kernel; after every step each group's user count is the
number of routes stamped with it, and (where nothing changed behind our back) every stamp is the
group the kernel route points at."""

from __future__ import annotations

import errno
import random
from collections import Counter

import pytest

from agent.core.model import KernelRoute, RouteType, intern
from agent.fib.nhg import NhLayer
from agent.fib.nhusers import record_outcome
from agent.fib.reconciler import FibState
from agent.fib.types import NhOp, NhRouteOp, OpError, OpKind

from tests.test_fib_nhg import BASE, SETTINGS, A, B, C, prefixes, route

DELETE = OpKind.DELETE
BLACKHOLE = intern(KernelRoute(RouteType.BLACKHOLE, (), 20))
WANTS = [route(A, B), route(B), route(A), route(A, B, C), route(B, C), route(A, B, metric=30), BLACKHOLE, None]


class ModelKernel:
    """Our routes as the kernel holds them: (prefix, metric) -> (route, group id or 0)."""

    def __init__(self) -> None:
        self.routes: dict[tuple[int, int], tuple[KernelRoute, int]] = {}

    def apply(self, kops, failed: set[int]) -> None:
        for k in kops:
            if id(k) in failed:
                continue
            if k.__class__ is NhOp:
                for o in k.carries:  # replaced in place: the routes keep their group
                    self.routes[(o.prefix, o.route.metric)] = (o.route, k.id)
                continue
            op, nhid = (k.op, k.nhid) if k.__class__ is NhRouteOp else (k, 0)
            key = (op.prefix, op.route.metric)
            if op.kind is DELETE:
                self.routes.pop(key, None)
            else:
                self.routes[key] = (op.route, nhid)

    def dump(self):
        ours, extra, nhid = {}, {}, {}
        for (p, _m), (r, i) in sorted(self.routes.items()):
            if p in ours:  # (as the scanner gives them: each route of such a prefix carries its group)
                extra[p] = extra.get(p, ()) + (r.with_nhid(i),)
                ours[p] = ours[p].with_nhid(nhid[p])
            else:
                ours[p], nhid[p] = r, i
        return ours, extra, {p: i for p, i in nhid.items() if i}


def counted(fib: FibState) -> dict[int, int]:
    return {g: n for g, n in Counter(r.nhid for r in fib.actual.values()).items() if g}


def check(fib: FibState, nhg: NhLayer, kernel: ModelKernel, exact: bool) -> None:
    assert nhg.users == counted(fib)
    if exact:  # nothing changed behind our back since the last scan: the stamps are the kernel's
        for p, r in fib.actual.items():
            assert kernel.routes[(p, r.metric)][1] == r.nhid, p


def event(fib: FibState, nhg: NhLayer, prefix: int, route: KernelRoute | None) -> None:
    """A change of our route from the kernel's side, as `RoutingCore._our_route_event` takes it."""
    cur = fib.actual.get(prefix)
    fib.kernel_changed(prefix, route)
    nhg.kernel_moved(prefix, cur)


@pytest.mark.parametrize("seed", range(25))
def test_user_counts_are_the_stamps_and_the_stamps_the_kernels(seed):
    rnd = random.Random(seed)
    fib = FibState(SETTINGS)
    nhg = NhLayer(201, fib)
    fib.gate_open = nhg.gate_open = True
    kernel = ModelKernel()
    ps = prefixes(60)
    exact = True
    for _step in range(60):
        roll = rnd.random()
        if roll < 0.5:
            want = rnd.choice(WANTS)
            fib.want({p: (want if rnd.random() < 0.8 else rnd.choice(WANTS))
                      for p in rnd.sample(ps, rnd.choice((1, 10, 60)))})
        elif roll < 0.6:
            nhg.without_gateway(rnd.choice((A, B, C)).gateway)
        elif roll < 0.7:
            nhg.dead.clear()
        elif roll < 0.8 and fib.actual:  # by hand: deleted, or replaced with other next hops
            p = rnd.choice(sorted(fib.actual))
            cur = fib.actual[p]
            hand = None if rnd.random() < 0.5 else route(C, metric=cur.metric)
            kernel.routes.pop((p, cur.metric)) if hand is None else kernel.routes.__setitem__(
                (p, cur.metric), (hand, 0))
            event(fib, nhg, p, hand)
            exact = False
        elif roll < 0.9:  # a full scan
            ours, extra, nhid = kernel.dump()
            fib.resync(ours, extra)
            nhg.resync(nhg.objects, nhid, ours, extra)
            exact = True
        ops = fib.plan()
        kops = nhg.expand(ops)
        nhg.take_settled()  # (recorded with the rest of `ops`)
        failed = {id(k) for k in kops if rnd.random() < 0.05}
        kernel.apply(kops, failed)
        record_outcome(fib, nhg, ops, kops, [OpError(k, errno.ENOBUFS, "x") for k in kops if id(k) in failed])
        check(fib, nhg, kernel, exact)


def test_a_route_deleted_from_the_kernel_gives_its_group_up_and_a_replaced_one_keeps_it():
    fib = FibState(SETTINGS)
    nhg = NhLayer(201, fib)
    fib.gate_open = nhg.gate_open = True
    ps = prefixes(3)
    fib.want(dict.fromkeys(ps, route(A, B)))
    ops = fib.plan()
    kops = nhg.expand(ops)
    record_outcome(fib, nhg, ops, kops, [])
    gid = BASE + 2
    assert nhg.users == {gid: 3} and all(fib.actual[p].nhid == gid for p in ps)
    event(fib, nhg, ps[0], None)  # `ip route del`
    assert nhg.users == {gid: 2} and ps[0] not in fib.actual
    event(fib, nhg, ps[1], route(C))  # `ip route replace ... via C`
    assert nhg.users == {gid: 2} and fib.actual[ps[1]] == route(C) and fib.actual[ps[1]].nhid == gid
    ops = fib.plan()  # the repairs: back through the group
    kops = nhg.expand(ops)
    assert {k.nhid for k in kops} == {gid}
    record_outcome(fib, nhg, ops, kops, [])
    assert nhg.users == {gid: 3} and all(fib.actual[p].nhid == gid for p in ps)
    # a scan that finds the kernel pointing a route elsewhere believes the kernel
    ours = {p: fib.actual[p] for p in ps}
    nhg.resync(nhg.objects, {ps[0]: gid, ps[1]: gid, ps[2]: 7}, ours)
    assert nhg.users == {gid: 2, 7: 1} and fib.actual[ps[2]].nhid == 7 and fib.actual == ours
