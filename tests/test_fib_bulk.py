"""The FIB's bulk lanes (`agent.fib.bulk`) against the general loops of `FibState`.

Seeded random sequences drive two `FibState`s with the same inputs, one with the lanes (their
threshold lowered to 1, so every batch that has the lanes' shape takes them) and one without:
start-up adoption with its gate (held and stale prefixes), batches of wanted routes (new
prefixes, changed ones, withdrawals, metric changes, metric 0 on IPv6, routes without a metric),
plans while an earlier batch is still in flight, outcomes with failed ops, retries and monitor
events. After every step the ops and the whole state must be the same.
"""

from __future__ import annotations

import errno
import random

import pytest

from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops
from agent.fib import bulk
from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, OpError, OpKind

P = Prefix.parse


def route(gateway: str, metric: int | None):
    return intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop(gateway, "eth0")), metric))


ROUTES = [route("10.0.0.1", 20), route("10.0.0.2", 20), route("10.0.0.1", 30), route("10.0.0.1", None)]
ROUTES6 = [route("fd00::1", 20), route("fd00::1", 0)]
POOL = [P(f"10.1.{i}.0/24") for i in range(120)] + [P(f"2001:db8:{i:x}::/48") for i in range(30)]


def state(fib: FibState):
    return (dict(fib.actual), dict(fib.pending), dict(fib.inflight), set(fib.stale), set(fib.adopted),
            fib.gate_open, {p: (e.errno, e.op) for p, e in fib.failed.items()}, dict(fib.extra))


class Both:
    """Two FIB states fed the same inputs, with and without the lanes."""

    def __init__(self, monkeypatch):
        self.mp = monkeypatch
        self.fast, self.slow = FibState(FibSettings()), FibState(FibSettings())

    def call(self, method, *args):
        self.mp.setattr(bulk, "MIN", 1)
        got = getattr(self.fast, method)(*(dict(a) if isinstance(a, dict) else a for a in args))
        self.mp.setattr(bulk, "MIN", 10**9)
        want = getattr(self.slow, method)(*args)
        assert (by_prefix(got) if method == "plan" else got) == (by_prefix(want) if method == "plan" else want)
        assert state(self.fast) == state(self.slow), method
        return got


def by_prefix(ops) -> dict:
    """Ops grouped by prefix, in order (the order across prefixes does not matter: a set of
    stale prefixes, say, may iterate differently after the same removals made in bulk)."""
    out: dict = {}
    for op in ops:
        out.setdefault(op.prefix, []).append(op)
    return out


def wanted(rnd: random.Random) -> dict:
    start = rnd.randrange(len(POOL))
    prefixes = [POOL[(start + i) % len(POOL)] for i in range(rnd.choice((1, 8, 40, 90)))]
    uniform = rnd.random() < 0.6  # a table's shape: one route for the whole batch
    pick = rnd.choice(ROUTES)
    out = {}
    for p in prefixes:
        if p.family == 6:
            out[p] = rnd.choice(ROUTES6)
        else:
            out[p] = pick if uniform else rnd.choice([*ROUTES, None])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_lanes_equal_the_general_loops(monkeypatch, seed):
    rnd = random.Random(seed)
    both = Both(monkeypatch)
    adopted = {p: ROUTES[0] for p in rnd.sample(POOL[:120], 30)}
    both.call("adopt", adopted, {next(iter(adopted)): (ROUTES[2],)} if seed % 2 else None)
    flight = []  # batches planned and not yet done: (ops in the fast state, ops in the slow one)
    for step in range(60):
        action = rnd.random()
        if step == 20:
            both.call("open_gate")
        elif action < 0.45:
            both.call("want", wanted(rnd))
        elif action < 0.7:
            retry = rnd.random() < 0.5
            monkeypatch.setattr(bulk, "MIN", 1)
            ops_fast = both.fast.plan(retry)
            monkeypatch.setattr(bulk, "MIN", 10**9)
            ops_slow = both.slow.plan(retry)
            assert by_prefix(ops_fast) == by_prefix(ops_slow) and state(both.fast) == state(both.slow)
            flight.append((ops_fast, ops_slow))
        elif action < 0.93 and flight:
            ops_fast, ops_slow = flight.pop(rnd.randrange(len(flight)) if rnd.random() < 0.3 else 0)
            rate = 0.5 if rnd.random() < 0.2 else 0
            failing = {p for p in sorted(by_prefix(ops_fast)) if rnd.random() < rate}
            monkeypatch.setattr(bulk, "MIN", 1)
            both.fast.done(ops_fast, [OpError(op, errno.EEXIST, "x") for op in ops_fast if op.prefix in failing])
            monkeypatch.setattr(bulk, "MIN", 10**9)
            both.slow.done(ops_slow, [OpError(op, errno.EEXIST, "x") for op in ops_slow if op.prefix in failing])
            assert state(both.fast) == state(both.slow)
        else:
            prefix = rnd.choice(POOL)
            both.call("kernel_changed", prefix, rnd.choice([None, ROUTES[0], ROUTES[1]]))
    assert bulk.MIN == 10**9  # (restored by monkeypatch)


def test_a_table_takes_the_lanes(monkeypatch):
    """A batch of new prefixes with one route goes want -> plan -> done through the lanes."""
    fib = FibState(FibSettings())
    fib.gate_open = True
    taken = []
    for name in ("want_new", "plan_new", "done_added"):
        real = getattr(bulk, name)
        monkeypatch.setattr(bulk, name, lambda *a, _real=real, _name=name: taken.append(
            (_name, (r := _real(*a)) is not None and r is not False)) or r)
    changes = dict.fromkeys(POOL[:100], ROUTES[0])
    fib.want(dict(changes))  # (handed over: it may become the pending table itself)
    ops = fib.plan()
    assert [op.kind for op in ops] == [OpKind.ADD] * 100 and [op.prefix for op in ops] == POOL[:100]
    fib.done(ops, [])
    assert fib.actual == changes and not fib.pending and not fib.inflight
    assert taken == [("want_new", True), ("plan_new", True), ("done_added", True)]


def test_the_in_flight_table_taken_over_whole_only_while_it_is_the_batch(monkeypatch):
    """`done_added` takes the in-flight table over whole only while it holds exactly the batch
    `plan_new` handed over and the kernel said nothing else about those prefixes meanwhile: a
    monitor event of another metric for one of them, or a second batch planned on top by the
    general loop (a small one, say), leaves the same state as the general loop."""
    for case in ("alone", "kernel event", "second batch"):
        both = Both(monkeypatch)
        both.call("open_gate")
        both.call("want", dict.fromkeys(POOL[:100], ROUTES[0]))
        sides = []
        for k, fib in enumerate((both.fast, both.slow)):
            monkeypatch.setattr(bulk, "MIN", 1 if k == 0 else 10**9)
            sides.append([fib.plan()])
        assert (both.fast.bulk is not None) and both.slow.bulk is None
        if case == "kernel event":
            both.call("kernel_changed", POOL[7], ROUTES[2])  # (metric 30: the route at 20 is in flight)
        elif case == "second batch":
            both.call("want", dict.fromkeys(POOL[100:120], ROUTES[1]))
            monkeypatch.setattr(bulk, "MIN", 10**9)
            for k, fib in enumerate((both.fast, both.slow)):
                sides[k].append(fib.plan())
            assert both.fast.bulk is not None
        for i in range(len(sides[0])):
            for k, fib in enumerate((both.fast, both.slow)):
                monkeypatch.setattr(bulk, "MIN", 1 if k == 0 else 10**9)
                fib.done(sides[k][i], [])
            assert state(both.fast) == state(both.slow), (case, i)
        assert both.fast.actual.keys() >= set(POOL[:100]) and not both.fast.inflight, case
        if case == "kernel event":
            assert both.fast.extra == {POOL[7]: (ROUTES[2],)}


# ---- the nexthop layer (`NhLayer.expand` / `done`) --------------------------------------------

from agent.fib.nhg import NhLayer  # noqa: E402
from agent.fib.nhusers import record_outcome  # noqa: E402
from agent.fib.types import NhRouteOp, Op  # noqa: E402

NH_ROUTES = [route("10.0.0.1", 20), route("10.0.0.2", 20), route("10.0.0.1", 30),
             intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0"), NextHop("10.0.0.2", "eth0")), 20)),
             intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.3", None)), 20)),  # no device: plain
             intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop(None, "eth0")), 20))]  # either family


NH_POOL = [P(f"10.{2 + i // 256}.{i % 256}.0/24") for i in range(1500)] + POOL[120:]


def via(nhg: NhLayer) -> dict:
    """prefix -> (group, metric) of the routes in the reconciler's table that point at a group."""
    return {p: (r.nhid, r.metric) for p, r in nhg.actual.items() if r.nhid}


def nh_state(nhg: NhLayer):
    return (via(nhg), dict(nhg.users), dict(nhg.objects), dict(nhg.key_of), dict(nhg.by_key), nhg._next)


def kernel_view(kops):
    """The kernel ops by what they write (object ids are compared through the state)."""
    return [(type(k).__name__, k.kind, k.prefix if isinstance(k, (NhRouteOp, Op)) else k.id) for k in kops]


@pytest.mark.parametrize("seed", range(10))
def test_nexthop_lanes_equal_the_general_loops(monkeypatch, seed):
    rnd = random.Random(seed)
    sides = []
    for _ in range(2):
        fib = FibState(FibSettings(nexthop_objects="on"))
        nhg = NhLayer(201, fib)
        fib.gate_open = nhg.gate_open = True
        sides.append((fib, nhg))
    lanes = 0
    for _step in range(30):
        if rnd.random() < 0.6:
            start = rnd.randrange(len(NH_POOL))
            prefixes = [NH_POOL[(start + i) % len(NH_POOL)] for i in range(rnd.choice((3, 40, 100)))]
            pick = rnd.choice(NH_ROUTES)
            six = ROUTES6[0] if pick.nexthops[0].gateway else pick  # (a device-only route: both families)
            changes = {p: (six if p.family == 6 else (pick if rnd.random() < 0.9 else rnd.choice(NH_ROUTES)))
                       for p in prefixes}
            if rnd.random() < 0.1:
                changes = {p: None for p in prefixes}
            for fib, _nhg in sides:
                fib.want(dict(changes))
        fail_at = rnd.random() < 0.15
        got = []
        for k, (fib, nhg) in enumerate(sides):
            monkeypatch.setattr(bulk, "MIN", 1 if k == 0 else 10**9)
            ops = fib.plan()
            kops = nhg.expand(ops)
            nhg.take_settled()  # (recorded with the rest of `ops`)
            lanes += k == 0 and nhg.bulk is not None
            errors = [OpError(kops[-1], errno.EEXIST, "x")] if fail_at and kops else []
            record_outcome(fib, nhg, ops, kops, errors)
            got.append((kernel_view(kops), nh_state(nhg), state(fib)))
        assert got[0] == got[1]
    assert lanes  # the lanes were taken


def one_batch_both_ways(monkeypatch, changes: dict) -> tuple[list, NhLayer, bool]:
    """`changes` wanted, planned, expanded and written in one batch with the lanes and without:
    what each side did (kernel ops, nexthop and FIB state), the last side's nexthop
    layer, and whether the lanes' side took the nexthop lane."""
    got, took = [], False
    for k in range(2):
        monkeypatch.setattr(bulk, "MIN", 1 if k == 0 else 10**9)
        fib = FibState(FibSettings(nexthop_objects="on"))
        nhg = NhLayer(201, fib)
        fib.gate_open = nhg.gate_open = True
        fib.want(dict(changes))
        ops = fib.plan()
        kops = nhg.expand(ops)
        took = took or (k == 0 and nhg.bulk is not None)
        record_outcome(fib, nhg, ops, kops, [])
        got.append((kernel_view(kops), nh_state(nhg), state(fib)))
    return got, nhg, took


def test_a_batch_of_both_families_through_one_device_route(monkeypatch):
    """One device-only route wanted by IPv4 and IPv6 prefixes in one batch: a group per family
    (the lane declines the batch; the general loop decides), the same as without the lanes."""
    changes = dict.fromkeys(NH_POOL[:80] + POOL[120:150], NH_ROUTES[-1])
    got, nhg, took = one_batch_both_ways(monkeypatch, changes)
    assert got[0] == got[1] and not took
    assert len({via(nhg)[p][0] for p in changes}) == 2  # one group per family


def test_a_batch_of_both_families_through_gateways_of_their_own_takes_the_lane(monkeypatch):
    """IPv4 prefixes through an IPv4 gateway and IPv6 ones through an IPv6 gateway in one batch
    (a table of both families being learned): the lane takes it, a group per route, the same as
    the general loop. An IPv4 prefix through the IPv6 gateway among them: the general loop."""
    v4, v6 = NH_ROUTES[0], route("fd00::1", 20)
    mixed = {p: (v6 if p.family == 6 else v4) for p in NH_POOL[:80] + POOL[120:150]}
    odd = dict(mixed)
    odd[NH_POOL[5]] = v6
    for changes, lane in ((mixed, True), (odd, False)):
        got, nhg, took = one_batch_both_ways(monkeypatch, changes)
        assert got[0][1:] == got[1][1:] and took == lane
        assert sorted(got[0][0], key=repr) == sorted(got[1][0], key=repr)  # (the same writes, in its order)
        assert len({via(nhg)[p][0] for p in changes if p in via(nhg)}) == 2
        assert (NH_POOL[5] in via(nhg)) == lane  # (through a gateway of the other family: a plain route)
