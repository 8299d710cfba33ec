"""FIB reconciler against a fake netlink: diffs, restart re-sync, drift repair, failures."""

import errno

from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, OpKind
from agent.core.model import KernelRoute, NextHop, RouteType, nexthops
from tests.factories import P
from tests.fakes import FakeNetlink

A, B, C = P("10.1.0.0/24"), P("10.2.0.0/24"), P("2001:db8::/48")
R1 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20)
R2 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.2", "eth0")), 20)
ECMP = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0"), NextHop("10.0.0.2", "eth0")), 20)
BH = KernelRoute(RouteType.BLACKHOLE, (), 20)


def flush(fib, net):
    ops = fib.plan()
    fib.done(ops, net.apply(ops))
    return ops


def fresh():
    fib = FibState(FibSettings())
    fib.open_gate()
    return fib, FakeNetlink()


def test_diff_adds_replaces_deletes_only_what_changed():
    fib, net = fresh()
    fib.want({A: R1, B: BH, C: ECMP})
    assert sorted(op.kind.value for op in flush(fib, net)) == ["add", "add", "add"]
    assert net.routes == {A: R1, B: BH, C: ECMP}
    fib.want({A: R1, B: BH, C: ECMP})  # nothing changed
    assert flush(fib, net) == [] and net.writes == 3
    fib.want({A: R2, B: None})
    ops = flush(fib, net)
    assert [(o.kind, o.prefix) for o in ops] == [(OpKind.REPLACE, A), (OpKind.DELETE, B)]
    assert net.routes == {A: R2, C: ECMP} and fib.converged


def test_default_metric_is_filled_in():
    fib, net = fresh()
    fib.want({A: KernelRoute(RouteType.BLACKHOLE, ())})
    flush(fib, net)
    assert net.routes[A].metric == 20


def test_metric_change_adds_new_then_deletes_old():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    fib.want({A: R1.with_metric(50)})
    assert [o.kind for o in flush(fib, net)] == [OpKind.ADD]  # make-before-break
    assert [(o.kind, o.route.metric) for o in flush(fib, net)] == [(OpKind.DELETE, 20)]
    assert net.table() == {(A, 50): R1.with_metric(50)} and fib.converged


def test_restart_unchanged_table_costs_zero_writes():
    net = FakeNetlink({A: R1, B: BH, C: ECMP})
    fib = FibState(FibSettings())
    fib.adopt(dict(net.routes))
    fib.want({A: R1, B: BH, C: ECMP})
    assert flush(fib, net) == []
    fib.open_gate()
    assert flush(fib, net) == [] and net.writes == 0


def test_restart_holds_adopted_until_gate_then_replaces_changed_and_sweeps_leftovers():
    net = FakeNetlink({A: R1, B: BH})
    fib = FibState(FibSettings())
    fib.adopt(dict(net.routes))
    fib.want({A: R2, C: ECMP})  # A changed, B not wanted (yet unknown), C new
    ops = flush(fib, net)
    assert [(o.kind, o.prefix) for o in ops] == [(OpKind.ADD, C)]  # new prefixes may go in
    assert net.routes[A] == R1 and B in net.routes  # adopted routes untouched before the gate
    assert fib.open_gate() == 1
    ops = flush(fib, net)
    assert sorted((o.kind.value, str(o.prefix)) for o in ops) == [("delete", "10.2.0.0/24"), ("replace", "10.1.0.0/24")]
    assert net.routes == {A: R2, C: ECMP}


def test_monitor_delete_of_our_route_is_repaired():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    del net.routes[A]  # someone ran `ip route del`
    fib.kernel_changed(A, None)
    assert [o.kind for o in flush(fib, net)] == [OpKind.ADD]
    assert net.routes[A] == R1


def test_monitor_replace_of_our_route_by_hand_is_reverted():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    net.routes[A] = R2
    fib.kernel_changed(A, R2)
    assert [o.kind for o in flush(fib, net)] == [OpKind.REPLACE] and net.routes[A] == R1


def test_echo_of_our_own_write_is_ignored():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    fib.kernel_changed(A, R1)
    assert fib.plan() == []


def test_stale_route_deleted_by_hand_before_gate_is_forgotten():
    fib = FibState(FibSettings())
    fib.adopt({A: R1})
    fib.kernel_changed(A, None)
    assert fib.open_gate() == 0 and fib.plan() == []


def test_failed_op_stays_pending_and_is_retried():
    fib, _ = fresh()
    net = FakeNetlink(fail={A: errno.ENETUNREACH})
    fib.want({A: R1, B: BH})
    flush(fib, net)
    assert net.routes == {B: BH}
    assert fib.failed[A].errno == errno.ENETUNREACH and A in fib.pending
    net.fail.clear()
    flush(fib, net)
    assert net.routes == {A: R1, B: BH} and not fib.failed and fib.converged


def test_resync_finds_missed_deletion():
    fib, net = fresh()
    fib.want({A: R1, B: BH})
    flush(fib, net)
    net.routes.pop(B)  # e.g. flushed with its link, no notification
    fib.resync(dict(net.routes))
    assert [(o.kind, o.prefix) for o in flush(fib, net)] == [(OpKind.ADD, B)]


# ---- writes in flight (the agent writes in a worker thread while the state takes changes) ----
def test_want_while_in_flight_compares_against_the_target():
    fib, net = fresh()
    fib.want({A: R1})
    ops = fib.plan()
    assert fib.inflight == {A: R1} and not fib.pending
    fib.want({A: R1})  # unchanged: nothing more to do
    assert not fib.pending
    fib.want({A: R2})  # changed while in flight: queued, not planned twice
    assert fib.plan() == []
    fib.done(ops, net.apply(ops))
    assert [(o.kind, o.route) for o in flush(fib, net)] == [(OpKind.REPLACE, R2)]
    assert fib.converged and net.routes == {A: R2}


def test_failed_op_in_flight_is_requeued_and_waits_for_the_retry():
    fib, _ = fresh()
    net = FakeNetlink(fail={A: errno.ENETUNREACH})
    fib.want({A: R1})
    ops = fib.plan()
    fib.done(ops, net.apply(ops))
    assert fib.pending == {A: R1} and A in fib.failed and not fib.inflight
    assert fib.plan(retry_failed=False) == []  # no hammering before the backoff
    net.fail.clear()
    ops = fib.plan(retry_failed=True)
    fib.done(ops, net.apply(ops))
    assert fib.converged and not fib.failed and net.routes == {A: R1}


def test_echo_of_the_write_in_flight_is_ignored_and_a_foreign_change_reasserted():
    fib, net = fresh()
    fib.want({A: R1, B: R1})
    ops = fib.plan()
    fib.kernel_changed(A, R1)  # our own echo, before done()
    fib.kernel_changed(B, R2)  # someone else's change to B during the write
    fib.done(ops, net.apply(ops))
    assert fib.pending == {} and fib.actual[B] == R1  # the write came after that change
    net.routes[B] = R2
    fib.resync(dict(net.routes))  # what the periodic scan does
    flush(fib, net)
    assert net.routes == {A: R1, B: R1} and fib.converged


def test_release_lets_an_explicit_withdrawal_through_before_the_gate():
    """A peer withdrew, after the restart, a route it had announced again: the adopted prefix is
    released and deleted at once; the other adopted prefixes stay held until the gate opens."""
    net = FakeNetlink({A: R1, B: BH, C: ECMP})
    fib = FibState(FibSettings())
    fib.adopt(dict(net.routes))
    fib.want({A: R1, B: BH})  # re-learned, unchanged: nothing to write
    assert flush(fib, net) == []
    fib.want({A: None, B: R2})  # A withdrawn by its peer; B changed (not a withdrawal)
    assert flush(fib, net) == []  # both held by the gate
    fib.release({A: None})
    ops = flush(fib, net)
    assert [(o.kind, o.prefix) for o in ops] == [(OpKind.DELETE, A)]
    assert net.routes == {B: BH, C: ECMP}  # B still as adopted, C still stale
    assert fib.open_gate() == 1  # C: nobody spoke about it
    assert sorted((o.kind.value, o.prefix) for o in flush(fib, net)) == [("delete", C), ("replace", B)]
    fib.release({B: R1})  # after the gate: nothing to do (the RIB's changes go through want)
    assert net.routes == {B: R2} and flush(fib, net) == []


def test_release_of_a_prefix_the_rib_never_reported():
    """Announced and withdrawn in one batch: the RIB reports no change, so the prefix was never
    wanted; `release` gives its wanted state and it goes at once (else it would stay stale until
    the gate opens)."""
    net = FakeNetlink({A: R1})
    fib = FibState(FibSettings())
    fib.adopt(dict(net.routes))
    fib.release({A: None})
    assert [(o.kind, o.prefix) for o in flush(fib, net)] == [(OpKind.DELETE, A)] and net.routes == {}
