"""A BFD failure ahead of the RIB (`NhLayer.without_gateway`): the groups through the dead next
hop shrink in place first (one write each, routes untouched), and the RIB's clean-up that
follows, whole or in slices, writes nothing for the routes that group already serves."""

from agent.fib.nhusers import record_outcome
from agent.core.model import KernelRoute, RouteType, intern
from agent.fib.types import NhOp, OpKind

from tests.test_fib_nhg import BASE, A, B, C, Kernel, prefixes, route


def test_groups_shrink_first_then_the_rib_catches_up_in_one_write():
    k = Kernel()
    ps, qs = prefixes(500), prefixes(300, third=1)
    k.fib.want({p: route(A, B) for p in ps} | {q: route(A) for q in qs})
    k.settle()
    ab = k.nhg.route_nhid(ps[0])
    assert k.nhg.without_gateway("10.0.0.1") == 1  # {A, B} shrinks; {A} alone cannot be emptied
    kops = k.flush()  # nothing planned by the RIB yet: the urgent replace alone
    assert len(kops) == 1 and isinstance(kops[0], NhOp) and kops[0].kind is OpKind.REPLACE
    assert kops[0].id == ab and kops[0].members == ((BASE + 1, 1),) and kops[0].carries == ()
    assert k.nhg.expansion[ab] == (B,) and k.nhg.route_nhid(ps[0]) == ab
    # the RIB's clean-up: every user of the group moves to {B} (already true: no write), the
    # others lose their route
    k.fib.want({p: route(B) for p in ps} | {q: None for q in qs})
    kops = k.flush()
    assert not [o for o in kops if isinstance(o, NhOp)]
    assert len(kops) == 300 and all(o.kind is OpKind.DELETE for o in kops)
    k.settle()
    assert k.fib.converged and all(k.fib.actual[p] == route(B) for p in ps)
    assert k.nhg.route_nhid(ps[0]) == ab and k.nhg.users[ab] == 500


def test_a_clean_up_in_slices_writes_nothing_and_stays_exact():
    k = Kernel()
    ps = prefixes(10)
    k.fib.want({p: route(A, B, C) for p in ps})
    k.settle()
    abc = k.nhg.route_nhid(ps[0])
    k.nhg.without_gateway("10.0.0.1")
    k.flush()
    k.written.clear()
    k.fib.want({p: route(B, C) for p in ps[:4]})  # only some users move in this plan
    k.settle()
    k.fib.want({p: route(B, C) for p in ps[4:]})
    k.settle()
    # settled in the plans, never written: the only write is the delete of the dead hop's
    # single, unused since the shrink
    written = [o for kops in k.written for o in kops]
    assert [(type(o).__name__, o.kind) for o in written] == [("NhOp", OpKind.DELETE)]
    assert k.fib.converged and all(k.fib.actual[p] == route(B, C) for p in ps)
    for p in ps:
        assert k.nhg.route_nhid(p) == abc and k.nhg.expansion[abc] == route(B, C).nexthops
    # then a real change of those routes is a write again
    k.fib.want({p: route(C) for p in ps})
    k.settle()
    assert all(k.nhg.expansion[k.nhg.route_nhid(p)] == route(C).nexthops for p in ps)


def test_a_group_confirmed_after_the_failure_is_shrunk_too_and_its_routes_still_cost_nothing():
    """The gateway died while the batch creating the group was in flight: `without_gateway`
    found nothing confirmed to shrink; once the batch is done the group is shrunk (the gateway
    is dead until the clean-up ends), and the clean-up planned with that shrink writes no route."""
    k = Kernel()
    ps = prefixes(50)
    k.fib.want({p: route(A, B) for p in ps})
    ops = k.fib.plan()
    kops = k.nhg.expand(ops)  # the batch in flight: singles, the group {A, B}, the routes
    assert k.nhg.without_gateway("10.0.0.1") == 0  # nothing confirmed yet
    record_outcome(k.fib, k.nhg, ops, kops, [])  # the batch completes
    (shrink,) = k.nhg.urgent
    ab = k.nhg.route_nhid(ps[0])
    assert shrink.id == ab and shrink.kind is OpKind.REPLACE
    k.fib.want({p: route(B) for p in ps})  # the RIB's clean-up, planned before the shrink is done
    ops = k.fib.plan()
    kops = k.nhg.expand(ops)
    assert kops == [shrink] and len(k.nhg.take_settled()) == 50  # the shrink alone: no route write
    record_outcome(k.fib, k.nhg, ops, kops, [])
    assert k.fib.converged and k.nhg.expansion[ab] == (B,) and not k.nhg.urgent
    k.nhg.revive("10.0.0.1")
    k.fib.want({ps[0]: route(A, B)})  # A is back: a group with it is made again, not shrunk
    k.settle()
    assert k.nhg.expansion[k.nhg.route_nhid(ps[0])] == route(A, B).nexthops and not k.nhg.urgent


BLACKHOLE = intern(KernelRoute(RouteType.BLACKHOLE, (), 20))


def test_a_clean_up_settles_only_the_routes_that_want_what_the_group_became():
    """In one plan after a shrink, users of the group move to its new members (settled: no
    write) and others to something else (a blackhole, another set): those are written, whichever
    op comes first in the plan."""
    for first_elsewhere in (False, True):
        k = Kernel()
        ps = prefixes(6)
        k.fib.want({p: route(A, B) for p in ps})
        k.settle()
        ab = k.nhg.route_nhid(ps[0])
        k.nhg.without_gateway("10.0.0.1")
        k.flush()
        moves = {ps[0]: BLACKHOLE, ps[1]: route(B), ps[2]: route(B, C), ps[3]: route(B)}
        k.fib.want(dict(reversed(moves.items())) if first_elsewhere else moves)
        k.settle()
        assert k.fib.converged
        kernel, exp = k.kernel, k.nhg.expansion
        assert kernel[ps[0]] == BLACKHOLE and kernel[ps[1]] == kernel[ps[3]] == kernel[ps[4]] == ab
        assert kernel[ps[2]] != ab and exp[kernel[ps[2]]] == route(B, C).nexthops and exp[ab] == (B,)
        assert k.nhg.users[ab] == 4 and k.nhg.route_nhid(ps[0]) is None
