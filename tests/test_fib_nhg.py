"""The nexthop-object layer (agent.fib.nhg) and its codec, without a kernel: group identity,
reference counts, order of object and route writes, in-place replace, adoption, garbage."""

from __future__ import annotations

import errno

from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops
from agent.fib.codec import RTM_NEWROUTE, Decoder, iter_messages
from agent.fib.nhcodec import (
    RTM_DELNEXTHOP, RTM_NEWNEXTHOP, decode_nexthop, encode_nh, encode_nh_route,
)
from agent.fib.nhg import NhLayer
from agent.fib.nhusers import record_outcome
from agent.fib.nhkeys import expand_all, nh_deletes
from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, NhObject, NhOp, NhRouteOp, Op, OpError, OpKind

A = NextHop("10.0.0.1", "up0")
B = NextHop("10.0.1.1", "up1")
C = NextHop("10.0.2.1", "up2")
SETTINGS = FibSettings(nexthop_objects="on")
BASE = 201 << 20


def route(*hops, metric=20):
    return intern(KernelRoute(RouteType.UNICAST, nexthops(*hops), metric))


def prefixes(n, third=0):
    return [Prefix.parse(f"10.{third}.{i // 256}.{i % 256}/32") for i in range(n)]


class Kernel:
    """FibState + NhLayer with every write succeeding (or failing as told)."""

    def __init__(self):
        self.fib = FibState(SETTINGS)
        self.nhg = NhLayer(201, self.fib)
        self.fib.gate_open = self.nhg.gate_open = True
        self.written: list[list] = []
        self.kernel: dict = {}  # prefix -> the group id its route points at, or its plain route

    def flush(self, fail=lambda k: None):
        ops = self.fib.plan()
        kops = self.nhg.expand(ops)
        self.nhg.take_settled()  # (recorded as done below, with the rest)
        self.written.append(kops)
        errors = [OpError(k, e, "x") for k in kops if (e := fail(k))]
        self._apply(kops, {id(e.op) for e in errors})
        record_outcome(self.fib, self.nhg, ops, kops, errors)
        return kops

    def _apply(self, kops, failed):
        for k in kops:
            if id(k) in failed:
                continue
            if isinstance(k, NhOp):
                self.kernel.update((o.prefix, k.id) for o in k.carries)
            elif k.kind is OpKind.DELETE:
                self.kernel.pop(k.prefix, None)
            else:
                self.kernel[k.prefix] = k.nhid if isinstance(k, NhRouteOp) else k.route

    def settle(self):
        while self.flush():
            pass


def kinds(kops):
    return [(type(k).__name__, k.kind.value) for k in kops]


def test_routes_share_one_group_created_before_them():
    k = Kernel()
    ps = prefixes(100)
    k.fib.want({p: route(A, B) for p in ps})
    kops = k.flush()
    assert kinds(kops[:3]) == [("NhOp", "add")] * 3  # two singles, then the group
    assert kops[0].hop == A and kops[1].hop == B and kops[2].members == ((BASE, 1), (BASE + 1, 1))
    assert all(isinstance(o, NhRouteOp) and o.nhid == BASE + 2 for o in kops[3:])
    assert len(kops) == 103
    assert k.nhg.users[BASE + 2] == 100
    assert k.nhg.expansion[BASE + 2] == nexthops(A, B)


def test_a_member_failing_for_every_user_is_one_in_place_replace():
    k = Kernel()
    ps = prefixes(1000)
    k.fib.want({p: route(A, B) for p in ps})
    k.settle()
    k.fib.want({p: route(B) for p in ps})
    kops = k.flush()
    assert len(kops) == 1 and kops[0].kind is OpKind.REPLACE and kops[0].id == BASE + 2
    assert kops[0].members == ((BASE + 1, 1),) and len(kops[0].carries) == 1000
    assert all(k.fib.actual[p] == route(B) for p in ps) and k.fib.converged
    # the single for A is unused now: deleted in the next batch, never before
    assert k.flush() == [NhOp(OpKind.DELETE, BASE)]
    assert not k.flush()
    # recovery for every user at once: in place again (A gets a new single)
    k.fib.want({p: route(A, B) for p in ps})
    kops = k.flush()
    assert kinds(kops) == [("NhOp", "add"), ("NhOp", "replace")]
    assert k.nhg.route_nhid(ps[0]) == BASE + 2 and k.nhg.group_writes == 2


def test_partial_move_rewrites_only_the_movers_and_reuses_groups():
    k = Kernel()
    ps = prefixes(10)
    k.fib.want({p: route(A, B) for p in ps})
    k.settle()
    k.fib.want({p: route(B) for p in ps[:3]})
    kops = k.flush()
    assert [type(o).__name__ for o in kops] == ["NhOp"] + ["NhRouteOp"] * 3  # a new group for {B}
    new = kops[0].id
    assert {k.nhg.route_nhid(p) for p in ps[:3]} == {new}
    assert {k.nhg.route_nhid(p) for p in ps[3:]} == {BASE + 2}
    # a new prefix for {B} reuses that group
    q = Prefix.parse("10.9.0.0/24")
    k.fib.want({q: route(B)})
    kops = k.flush()
    assert kops == [NhRouteOp(kops[0].op, new)]


def test_group_is_deleted_only_after_its_last_route_and_failures_keep_it():
    k = Kernel()
    ps = prefixes(2)
    k.fib.want({p: route(A, C) for p in ps})
    k.settle()
    gid = k.nhg.route_nhid(ps[0])
    k.fib.want({ps[0]: None})
    assert kinds(k.flush()) == [("Op", "delete")]
    assert not k.flush()  # one user left: nothing to delete
    # the last route's delete fails: the group stays
    k.fib.want({ps[1]: None})
    k.flush(fail=lambda o: errno.EIO)
    assert gid in k.nhg.objects and k.nhg.users[gid] == 1 and k.nhg.route_nhid(ps[1]) == gid
    assert not any(isinstance(o, NhOp) for o in k.flush(fail=lambda o: errno.EIO))
    k.flush()  # the retry succeeds
    assert kinds(k.flush()) == [("NhOp", "delete")]  # the group, then its singles
    assert kinds(k.flush()) == [("NhOp", "delete")] * 2
    assert k.nhg.objects == {} and not k.flush()


def test_failed_in_place_replace_fails_every_route_it_carried():
    k = Kernel()
    ps = prefixes(5)
    k.fib.want({p: route(A, B) for p in ps})
    k.settle()
    k.fib.want({p: route(A) for p in ps})
    k.flush(fail=lambda o: errno.EINVAL if isinstance(o, NhOp) else 0)
    assert set(k.fib.failed) == set(ps) and all(k.fib.actual[p] == route(A, B) for p in ps)
    k.flush()
    assert all(k.fib.actual[p] == route(A) for p in ps) and not k.fib.failed


def test_blackhole_and_family_mixes_stay_plain_routes():
    k = Kernel()
    bh = intern(KernelRoute(RouteType.BLACKHOLE, (), 20))
    v4_via_v6 = route(NextHop("fd00::1", "up0"))
    p, q = Prefix.parse("192.0.2.0/24"), Prefix.parse("198.51.100.0/24")
    k.fib.want({p: bh, q: v4_via_v6})
    assert all(type(o) is Op for o in k.flush())


def test_adoption_writes_nothing_and_sweeps_unused_objects_after_the_gate():
    objs = {BASE: NhObject(BASE, 201, 4, A), BASE + 1: NhObject(BASE + 1, 201, 4, B),
            BASE + 2: NhObject(BASE + 2, 201, 0, None, ((BASE, 1), (BASE + 1, 1))),
            BASE + 3: NhObject(BASE + 3, 201, 0, None, ((BASE, 1),)),  # unused
            7: NhObject(7, 12, 4, C)}  # foreign
    ps = prefixes(3)
    ours = {p: route(A, B) for p in ps}
    fib = FibState(SETTINGS)
    nhg = NhLayer(201, fib)
    fib.adopt(ours)
    nhg.resync(objs, {p: BASE + 2 for p in ps}, ours)
    assert nhg.expand(fib.plan()) == []  # gate closed: nothing, not even the sweep
    fib.want(ours)
    fib.open_gate()
    nhg.gate_open = True
    assert fib.plan() == []
    kops = nhg.expand([])
    assert kops == [NhOp(OpKind.DELETE, BASE + 3)]  # never the foreign one, never one in use
    nhg.done(kops, [])
    assert nhg.expand([]) == []
    # a new route for {A, B} reuses the adopted group; a new id skips every taken one
    assert nhg._alloc({}) == BASE + 3  # (freed by the sweep)


def test_flush_deletes_groups_before_singles_and_only_ours():
    objs = {1: NhObject(1, 201, 4, A), 2: NhObject(2, 201, 0, None, ((1, 1),)), 3: NhObject(3, 12, 4, B)}
    assert nh_deletes(objs, 201) == [NhOp(OpKind.DELETE, 2), NhOp(OpKind.DELETE, 1)]


def test_expand_all_resolves_groups_through_members_with_weights():
    objs = {1: NhObject(1, 201, 4, A), 2: NhObject(2, 12, 4, B),
            3: NhObject(3, 201, 0, None, ((1, 1), (2, 3))), 4: NhObject(4, 201, 0, None, ((9, 1),))}
    exp = expand_all(objs)
    assert exp[3] == nexthops(A, NextHop(B.gateway, B.dev, 3)) and 4 not in exp


# ---- codec ----
INDEX = {"up0": 5, "up1": 6}
NAMES = {5: "up0", 6: "up1"}


def _one(msg):
    [(mtype, _flags, _seq, off, end)] = list(iter_messages(msg))
    return mtype, off, end


def test_nexthop_messages_round_trip():
    single = NhOp(OpKind.ADD, 42, 6, NextHop("fd00::1", "up1"))
    mtype, off, end = _one(encode_nh(single, 201, INDEX.__getitem__, 7))
    assert mtype == RTM_NEWNEXTHOP
    assert decode_nexthop(encode_nh(single, 201, INDEX.__getitem__, 7), off, end, NAMES) == NhObject(
        42, 201, 6, NextHop("fd00::1", "up1"))
    group = NhOp(OpKind.REPLACE, 43, 0, None, ((42, 1), (44, 256)))
    msg = encode_nh(group, 201, INDEX.__getitem__, 8)
    mtype, off, end = _one(msg)
    assert decode_nexthop(msg, off, end, NAMES) == NhObject(43, 201, 0, None, ((42, 1), (44, 256)))
    delete = encode_nh(NhOp(OpKind.DELETE, 43), 201, INDEX.__getitem__, 9)
    mtype, off, end = _one(delete)
    assert mtype == RTM_DELNEXTHOP and delete[off + 2] == 0  # no protocol in a delete's header


def test_encoder_packs_routes_through_objects_as_nhcodec_does():
    """The Encoder's cached template for a route through an object gives nhcodec's bytes: both
    families, a default route, ADD and REPLACE, ACK or not, metric from the route or the settings,
    and a changed nexthop id or metric for the same route is not served from the cache."""
    from agent.fib.encoder import Encoder

    enc = Encoder(SETTINGS, INDEX)
    v6 = intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("fd00::1", "up1")), 1024))
    unset = intern(KernelRoute(RouteType.UNICAST, nexthops(A), None))
    cases = [
        (OpKind.ADD, "198.18.0.0/16", route(A, B), 99),
        (OpKind.REPLACE, "198.18.0.0/16", route(A, B), 99),
        (OpKind.ADD, "198.18.0.0/16", route(A, B), 100),
        (OpKind.ADD, "0.0.0.0/0", route(A), 7),
        (OpKind.ADD, "10.1.2.3/32", unset, 7),
        (OpKind.REPLACE, "2001:db8::/32", v6, 8),
        (OpKind.ADD, "::/0", v6, 8),
    ]
    for kind, text, r, nhid in cases * 2:  # the second round comes from the cache
        nop = NhRouteOp(Op(kind, Prefix.parse(text), r), nhid)
        for ack in (False, True):
            assert enc.encode(nop, 5, ack=ack) == encode_nh_route(nop, SETTINGS, 5, ack), (kind, text, nhid, ack)


def test_route_through_an_object_decodes_with_the_objects_hops():
    op = Op(OpKind.REPLACE, Prefix.parse("198.18.0.0/16"), route(A, B))
    msg = encode_nh_route(NhRouteOp(op, 99), SETTINGS, 3)
    mtype, off, end = _one(msg)
    assert mtype == RTM_NEWROUTE

    class Layer:
        expansion = {99: nexthops(A, B)}
        version = 1

    dec = Decoder(SETTINGS, NAMES, Layer)
    prefix, proto, got = dec.route(msg, off, end)
    assert (prefix, proto, got, dec.last_nhid) == (op.prefix, 201, route(A, B), 99)
    Layer.expansion = {99: nexthops(B)}
    Layer.version = 2
    dec.sync_nexthops()  # the group changed in place: cached routes are dropped
    assert dec.route(msg, off, end)[2] == route(B)
