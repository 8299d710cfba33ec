"""FIB failed state (issue 12 item 6): EEXIST for a route that is ours and wanted is success, a
full scan settles `failed` against the kernel, and a failure never holds back a new wanted state.

The ordering that left 768 routes "failed" although installed, and then 768 stale routes after
their withdrawal: routes deleted (a batch), added again (next batch), then the late monitor
echoes of the deletions read as deletions by someone else -> ADD -> EEXIST -> `failed`; the
conflict scan cleared `pending` but not `failed`; the backoff then held the withdrawal's DELETE
and no retry timer was left to release it."""

import errno

from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, OpError, OpKind
from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, nexthops
from tests.factories import P
from tests.fakes import FakeNetlink

A = P("10.1.0.0/24")
R1 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20)
R2 = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.2", "eth0")), 20)


def flush(fib, net, retry_failed=True):
    ops = fib.plan(retry_failed)
    fib.done(ops, net.apply(ops))
    return [(o.kind, o.prefix) for o in ops]


def fresh():
    fib = FibState(FibSettings())
    fib.open_gate()
    return fib, FakeNetlink()


def late_echo(fib, prefix, route):
    """What the agent does with a deletion of our route seen by the monitor (main's filter)."""
    if fib.actual.get(prefix) == route:
        fib.kernel_changed(prefix, None)


def test_eexist_for_a_route_the_scan_shows_as_ours_and_wanted_is_success():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    late_echo(fib, A, R1)  # looks like `ip route del`, but the kernel still has the route
    assert flush(fib, net) == [(OpKind.ADD, A)]
    assert fib.failed[A].errno == errno.EEXIST
    assert fib.retry_waiting
    fib.resync(dict(net.routes))  # the conflict scan
    assert not fib.failed and fib.converged and not fib.retry_waiting


def test_withdrawal_of_a_failed_prefix_is_planned_at_once():
    fib, net = fresh()
    fib.want({A: R1})
    flush(fib, net)
    net.fail[A] = errno.ENETUNREACH
    fib.want({A: R2})
    flush(fib, net)  # the replace fails: R1 stays, A waits for the backoff
    net.fail.clear()
    fib.want({A: None})  # withdrawn: a new target, not a retry
    assert flush(fib, net, retry_failed=False) == [(OpKind.DELETE, A)]
    assert net.routes == {} and fib.converged and not fib.failed


def test_same_target_still_waits_for_the_backoff():
    fib, _ = fresh()
    net = FakeNetlink(fail={A: errno.ENETUNREACH})
    fib.want({A: R1})
    flush(fib, net)
    fib.want({A: R1})  # the RIB says it again: no new op, the backoff holds
    assert fib.plan(retry_failed=False) == [] and fib.retry_waiting
    fib.resync({})  # the kernel does not have it: still failed, still waiting
    assert A in fib.failed and fib.retry_waiting


def test_eexist_over_our_route_with_other_next_hops_becomes_a_replace_at_once():
    fib, _ = fresh()
    net = FakeNetlink({A: R2})  # ours, but the state does not know it
    fib.want({A: R1})
    assert flush(fib, net) == [(OpKind.ADD, A)]  # EEXIST
    fib.resync(dict(net.routes))
    assert A not in fib.failed
    assert flush(fib, net, retry_failed=False) == [(OpKind.REPLACE, A)]
    assert net.routes == {A: R1} and fib.converged


def test_batch_that_timed_out_but_was_applied_is_settled_by_the_scan():
    fib, net = fresh()
    fib.want({A: R1})
    ops = fib.plan()
    net.apply(ops)  # applied, but the ACK never came: every op reported failed
    fib.done(ops, [OpError(op, errno.EIO, "timed out") for op in ops])
    assert A in fib.failed
    fib.resync(dict(net.routes))
    assert not fib.failed and fib.converged


def test_retry_waiting_ignores_prefixes_in_flight():
    fib, _ = fresh()
    net = FakeNetlink(fail={A: errno.ENETUNREACH})
    fib.want({A: R1})
    flush(fib, net)
    ops = fib.plan(retry_failed=True)
    assert not fib.retry_waiting  # the retry is in flight
    net.fail.clear()
    fib.done(ops, net.apply(ops))
    assert not fib.retry_waiting and fib.converged


def test_issue_ordering_delete_readd_late_echoes_then_withdrawal():
    fib, net = fresh()
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(768)]
    fib.want({p: R1 for p in prefixes})
    flush(fib, net)
    fib.want({p: None for p in prefixes})  # e.g. the stale timer swept them
    flush(fib, net)
    fib.want({p: R1 for p in prefixes})  # the peers sent them again
    flush(fib, net)
    for p in prefixes:  # the deletions' echoes, read only now
        late_echo(fib, p, R1)
    assert len(flush(fib, net)) == 768 and len(fib.failed) == 768  # all EEXIST
    fib.resync(dict(net.routes))  # the conflict scan
    assert not fib.failed and fib.converged
    fib.want({p: None for p in prefixes})  # withdrawn: deleted without waiting for a retry
    assert len(flush(fib, net, retry_failed=False)) == 768
    assert net.routes == {} and fib.converged
