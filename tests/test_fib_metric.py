"""FIB metrics (issue 12 item 5): IPv6 metric 0 as the kernel stores it, make-before-break
metric changes, and two routes of ours on one prefix found by a scan."""

import errno

from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, OpKind
from agent.core.model import KernelRoute, NextHop, RouteType, nexthops
from tests.factories import P
from tests.fakes import FakeNetlink

A, V6 = P("10.1.0.0/24"), P("2001:db8::/48")
R20 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20)
R50 = R20.with_metric(50)
R6 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("fe80::1", "eth0")), 20)


def flush(fib, net, retry_failed=True):
    ops = fib.plan(retry_failed)
    fib.done(ops, net.apply(ops))
    return [(o.kind, o.prefix, o.route.metric) for o in ops]


def fresh(metric=20):
    fib = FibState(FibSettings(metric=metric))
    fib.open_gate()
    return fib, FakeNetlink()


# ---- metric 0 ----
def test_ipv6_metric_0_is_planned_as_1024_like_the_kernel_stores_it():
    fib, net = fresh()
    fib.want({V6: R6.with_metric(0), A: R20.with_metric(0)})
    assert sorted(flush(fib, net)) == [(OpKind.ADD, A, 0), (OpKind.ADD, V6, 1024)]  # IPv4 keeps 0
    fib.resync(dict(net.routes))  # the scan reads back 1024: no difference, nothing to do
    assert fib.plan() == [] and fib.converged


def test_the_metric_0_rule_reads_received_prefixes_as_plain_ints():
    """Received prefixes reach the FIB as plain ints (`agent.core.prefix`): the family is read
    off the int, not a property."""
    fib, net = fresh()
    fib.want({int(V6): R6.with_metric(0), int(A): R20.with_metric(0)})
    assert sorted(flush(fib, net)) == [(OpKind.ADD, A, 0), (OpKind.ADD, V6, 1024)]


def test_default_metric_0_is_1024_for_ipv6_only():
    fib, net = fresh(metric=0)
    fib.want({V6: KernelRoute(RouteType.UNICAST, R6.nexthops), A: KernelRoute(RouteType.BLACKHOLE, ())})
    assert sorted(flush(fib, net)) == [(OpKind.ADD, A, 0), (OpKind.ADD, V6, 1024)]


def test_switching_ipv6_metric_from_0_back_deletes_the_1024_route_never_metric_0():
    """An IPv6 delete with metric 0 matches any metric: it removed the new route of the metric
    change and left the 1024 one until the periodic scan."""
    fib, net = fresh()
    fib.want({V6: R6.with_metric(0)})
    flush(fib, net)
    fib.want({V6: R6})
    ops = flush(fib, net) + flush(fib, net)
    assert ops == [(OpKind.ADD, V6, 20), (OpKind.DELETE, V6, 1024)]
    assert net.table() == {(V6, 20): R6} and fib.converged


# ---- make-before-break ----
def test_metric_change_deletes_the_old_route_only_after_the_new_one_is_confirmed():
    fib, net = fresh()
    fib.want({A: R20})
    flush(fib, net)
    fib.want({A: R50})
    ops = fib.plan()
    assert [(o.kind, o.route.metric) for o in ops] == [(OpKind.ADD, 50)]
    assert fib.plan() == []  # nothing about A before the ADD is confirmed
    fib.done(ops, net.apply(ops))
    assert net.table() == {(A, 20): R20, (A, 50): R50}  # both, for one batch
    assert flush(fib, net) == [(OpKind.DELETE, A, 20)]
    assert net.table() == {(A, 50): R50} and fib.converged and not fib.failed


def test_failed_add_of_a_metric_change_keeps_the_old_route():
    fib, net = fresh()
    fib.want({A: R20})
    flush(fib, net)
    net.fail[A] = errno.ENETUNREACH
    fib.want({A: R50})
    assert flush(fib, net) == [(OpKind.ADD, A, 50)]
    assert net.table() == {(A, 20): R20}  # still forwarding
    assert fib.actual[A] == R20 and fib.pending[A] == R50 and A in fib.failed
    assert flush(fib, net, retry_failed=False) == []  # waits for the backoff
    net.fail.clear()
    assert flush(fib, net) == [(OpKind.ADD, A, 50)]
    assert flush(fib, net) == [(OpKind.DELETE, A, 20)]
    assert net.table() == {(A, 50): R50} and fib.converged and not fib.failed


def test_withdrawal_during_a_metric_change_deletes_both():
    fib, net = fresh()
    fib.want({A: R20})
    flush(fib, net)
    fib.want({A: R50})
    flush(fib, net)  # the ADD; the old one is still there
    fib.want({A: None})
    assert sorted(flush(fib, net)) == [(OpKind.DELETE, A, 20), (OpKind.DELETE, A, 50)]
    assert net.table() == {} and fib.converged


def test_scan_between_add_and_delete_keeps_the_wanted_route_whatever_the_dump_prefers():
    """The scanner reports the route at its configured metric in `ours` and the other one in
    `extra`: the reconciler keeps the one it wants and deletes the other (no ADD, no EEXIST)."""
    fib, net = fresh()
    fib.want({A: R20})
    flush(fib, net)
    fib.want({A: R50})
    flush(fib, net)
    fib.resync({A: R20}, {A: (R50,)})  # the dump prefers metric 20 (the old setting)
    assert flush(fib, net) == [(OpKind.DELETE, A, 20)]
    assert fib.actual == {A: R50} and net.table() == {(A, 50): R50} and fib.converged


def test_leftover_of_ours_found_at_start_is_deleted_after_the_gate():
    net = FakeNetlink({A: R50})
    net.others[A] = {20: R20}  # a crash between the ADD and the DELETE of a metric change
    fib = FibState(FibSettings())
    fib.adopt({A: R20}, {A: (R50,)})
    fib.want({A: R50})
    assert flush(fib, net) == []  # adopted: untouched before the gate
    fib.open_gate()
    assert flush(fib, net) == [(OpKind.DELETE, A, 20)]
    assert net.table() == {(A, 50): R50} and fib.converged
