"""A BFD failure ahead of the RIB (`NhLayer.without_gateway`): the groups through the dead next
hop shrink in place first (one write each, routes untouched), and the RIB's clean-up that
follows, whole or in slices, writes nothing for the routes that group already serves."""

from agent.fib.types import NhOp, OpKind

from tests.test_fib_nhg import BASE, A, B, C, Kernel, prefixes, route


def test_groups_shrink_first_then_the_rib_catches_up_in_one_write():
    k = Kernel()
    ps, qs = prefixes(500), prefixes(300, third=1)
    k.fib.want({p: route(A, B) for p in ps} | {q: route(A) for q in qs})
    k.settle()
    ab = k.nhg.via[ps[0]][0]
    assert k.nhg.without_gateway("10.0.0.1") == 1  # {A, B} shrinks; {A} alone cannot be emptied
    kops = k.flush()  # nothing planned by the RIB yet: the urgent replace alone
    assert len(kops) == 1 and isinstance(kops[0], NhOp) and kops[0].kind is OpKind.REPLACE
    assert kops[0].id == ab and kops[0].members == ((BASE + 1, 1),) and kops[0].carries == ()
    assert k.nhg.expansion[ab] == (B,) and k.nhg.via[ps[0]][0] == ab
    # the RIB's clean-up: every user of the group moves to {B} (already true: no write), the
    # others lose their route
    k.fib.want({p: route(B) for p in ps} | {q: None for q in qs})
    kops = k.flush()
    assert not [o for o in kops if isinstance(o, NhOp)]
    assert len(kops) == 300 and all(o.kind is OpKind.DELETE for o in kops)
    k.settle()
    assert k.fib.converged and all(k.fib.actual[p] == route(B) for p in ps)
    assert k.nhg.via[ps[0]][0] == ab and k.nhg.users[ab] == 500


def test_a_clean_up_in_slices_writes_nothing_and_stays_exact():
    k = Kernel()
    ps = prefixes(10)
    k.fib.want({p: route(A, B, C) for p in ps})
    k.settle()
    abc = k.nhg.via[ps[0]][0]
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
        assert k.nhg.via[p][0] == abc and k.nhg.expansion[abc] == route(B, C).nexthops
    # then a real change of those routes is a write again
    k.fib.want({p: route(C) for p in ps})
    k.settle()
    assert all(k.nhg.expansion[k.nhg.via[p][0]] == route(C).nexthops for p in ps)
