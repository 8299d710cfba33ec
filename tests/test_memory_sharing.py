"""What the agent keeps per learned route is shared where it can be (bench/learn_memory.py measures
the bytes): AS numbers and community lists of the codec (packed, `agent.core.communities`), the nexthop layer's (id, metric) pairs
and reference counts, and the RIB's kernel route of candidates that differ only in attributes
(remembered per next-hop tuple, which must still follow the metric, the resolver and the FIB's
default metric)."""

from __future__ import annotations

from agent.core.communities import Communities, LargeCommunities
from agent.core.model import Candidate, KernelRoute, NextHop, RouteType, Update, intern, nexthops
from agent.core.rib import Rib
from agent.fib.nhg import NhLayer
from agent.fib.nhusers import record_outcome
from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings, OpKind
from agent.speaker.wire import CAP_ASN4, WireDecoder
from testlab import bgpwire as w
from tests.factories import P, bgp, kernel

PEER = "192.0.2.1"


def attrs_of(path, comms, large=(), med=None):
    extra = [w.med(med)] if med is not None else []
    body = w.update(attrs=[w.origin(0), w.as_path(path), w.next_hop(PEER), w.communities(comms),
                           *([w.large_communities(large)] if large else []), *extra],
                    nlri=w.nlri(["198.51.100.0/24"]))
    (ev,) = WireDecoder().decode(PEER, CAP_ASN4, body)
    return ev.announced[0].attrs


def test_codec_packs_community_lists_and_shares_them():
    a = attrs_of([65001, 4_200_000_001, 70000], ["65001:200", "65001:100"], ["70000:1:2"], med=1)
    b = attrs_of([65001, 3_000_000_000, 70000], ["65001:200", "65001:300"], ["70000:1:2"], med=2)
    c = attrs_of([65001, 3_000_000_000, 70000], ["65001:200", "65001:100"], [], med=3)
    assert a is not b and a.as_path == (65001, 4_200_000_001, 70000)
    assert isinstance(a.communities, Communities) and a.communities.raw == bytes.fromhex("fde90064fde900c8")
    assert a.communities == ("65001:100", "65001:200") and b.communities == ("65001:200", "65001:300")
    assert c.communities is a.communities  # one list however many sets carry the same octets (memo)
    assert isinstance(a.large_communities, LargeCommunities) and a.large_communities is b.large_communities
    assert a.large_communities == ("70000:1:2",) and c.large_communities == ()


def test_routes_carry_their_group_in_shared_stamped_objects_and_users_are_counted():
    fib = FibState(FibSettings(nexthop_objects="on"))
    nhg = NhLayer(201, fib)
    fib.gate_open = nhg.gate_open = True
    route = intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20))
    ps = [P(f"198.51.{i}.0/24") for i in range(3)]

    def flush():
        ops = fib.plan()
        kops = nhg.expand(ops)
        record_outcome(fib, nhg, ops, kops, [])
        return ops

    fib.want({p: route for p in ps})
    flush()
    gid = nhg.route_nhid(ps[0])
    assert fib.actual[ps[0]] is fib.actual[ps[1]] is fib.actual[ps[2]] == route  # one stamped copy
    assert fib.actual[ps[0]] is not route and fib.actual[ps[0]].nhid == gid and route.nhid == 0
    assert nhg.users == {gid: 3}
    fib.want({ps[0]: None})
    assert [op.kind for op in flush()] == [OpKind.DELETE]
    assert nhg.users == {gid: 2} and ps[0] not in fib.actual


def test_rib_route_per_next_hop_tuple_follows_metric_resolver_and_default_metric():
    rib = Rib(default_metric=20)
    rib.set_link("eth0", True)
    c = kernel("kernel", dev="eth0", connected=True)
    rib.apply([Update(P("192.0.2.0/24"), c.origin, c)])
    one, two = bgp(med=1), bgp(med=2)  # distinct attribute sets, one next hop tuple
    assert one is not two and one.nexthops is two.nexthops
    changes = rib.apply([Update(P("198.51.100.0/24"), one.origin, one), Update(P("198.51.101.0/24"), two.origin, two)])
    first, second = changes[P("198.51.100.0/24")], changes[P("198.51.101.0/24")]
    assert first is second and first.metric == 20 and first.nexthops[0].dev == "eth0"
    three = Candidate(two.origin, two.distance, two.nexthops, bgp=two.bgp._replace(med=3), metric=7)
    assert rib.apply([Update(P("198.51.102.0/24"), three.origin, three)])[P("198.51.102.0/24")].metric == 7
    changes = rib.set_default_metric(30)
    assert changes[P("198.51.100.0/24")].metric == 30 and changes[P("198.51.102.0/24")].metric == 7
    four = bgp(med=4)
    assert rib.apply([Update(P("198.51.103.0/24"), four.origin, four)])[P("198.51.103.0/24")].metric == 30
    changes = rib.set_link("eth0", False)  # the next hop is no longer reachable: nothing installed
    assert changes[P("198.51.100.0/24")] is None
    five = bgp(med=5)
    assert rib.apply([Update(P("198.51.104.0/24"), five.origin, five)]) == {}
