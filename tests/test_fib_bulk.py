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
        got = getattr(self.fast, method)(*args)
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
    fib.want(changes)
    ops = fib.plan()
    assert [op.kind for op in ops] == [OpKind.ADD] * 100 and [op.prefix for op in ops] == POOL[:100]
    fib.done(ops, [])
    assert fib.actual == changes and not fib.pending and not fib.inflight
    assert taken == [("want_new", True), ("plan_new", True), ("done_added", True)]
