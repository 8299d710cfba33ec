"""RIB: candidates per prefix, resolution, ECMP, foreign routes, and order independence."""

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.fib.reconciler import FibState
from agent.fib.types import FibSettings
from agent.core.model import KernelRoute, NextHop, Origin, RouteType, SourceKind, Update, nexthops
from agent.core.rib import Rib
from tests.factories import P, bgp, kernel, static
from tests.fakes import FakeNetlink

NET = P("10.0.0.0/24")
NET6 = P("fd00::/64")


def connected(prefix=NET, dev="eth0"):
    c = kernel("kernel", dev=dev, connected=True)
    return Update(prefix, c.origin, c)


def rib_with_links(*devs, max_paths=16):
    rib = Rib(max_paths=max_paths)
    for d in devs:
        rib.set_link(d, True)
    return rib


def up(prefix, cand):
    return Update(P(prefix) if isinstance(prefix, str) else prefix, cand.origin, cand)


def test_static_route_resolves_through_connected_route_and_gets_device():
    rib = rib_with_links("eth0")
    rib.apply([connected()])
    changes = rib.apply([up("192.168.1.0/24", static("a", "10.0.0.1"))])
    assert changes == {P("192.168.1.0/24"): KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")))}


def test_unresolved_route_is_not_installed_and_explained_then_installed_when_resolvable():
    rib = rib_with_links("eth0")
    assert rib.apply([up("192.168.1.0/24", static("a", "10.0.0.1"))]) == {}
    d = rib.decide(P("192.168.1.0/24"))
    assert d.desired is None and d.candidates[0].status == "unresolved"
    assert "10.0.0.1 is not reachable" in d.candidates[0].detail
    changes = rib.apply([connected()])
    assert changes[P("192.168.1.0/24")].nexthops == (NextHop("10.0.0.1", "eth0"),)


def test_link_down_makes_route_unresolved():
    rib = rib_with_links("eth0")
    rib.apply([connected(), up("192.168.1.0/24", static("a", "10.0.0.1"))])
    assert rib.set_link("eth0", False) == {P("192.168.1.0/24"): None}
    assert "device eth0 is down" in rib.decide(P("192.168.1.0/24")).candidates[0].detail


def test_flapping_link_that_no_route_uses_reevaluates_nothing_and_the_used_one_still_does():
    """A link flap costs a re-evaluation of every route only when some next hop depends on it
    (chaos bench: a flapping spare interface under a 50k-route table starved the loop)."""
    rib = rib_with_links("eth0", "spare0")
    rib.apply([connected(), up("192.168.1.0/24", static("a", "10.0.0.1")),
               up("192.168.2.0/24", static("b", "10.0.0.2"))])
    generation = rib.resolver.generation
    for state in (False, True, False, True):
        assert rib.set_link("spare0", state) == {}
    assert rib.resolver.generation == generation  # cached resolutions kept
    assert rib.set_link("eth0", False) == {P("192.168.1.0/24"): None, P("192.168.2.0/24"): None}
    assert rib.set_link("eth0", True)[P("192.168.1.0/24")].nexthops == (NextHop("10.0.0.1", "eth0"),)


def test_link_coming_up_resolves_a_device_route_that_waited_for_it():
    rib = rib_with_links("eth0")
    rib.set_link("eth1", False)
    assert rib.apply([up("192.168.3.0/24", static("c", None, dev="eth1"))]) == {}
    assert rib.set_link("eth1", True)[P("192.168.3.0/24")].nexthops == (NextHop(None, "eth1"),)


def test_links_created_and_deleted_that_nothing_uses_reevaluate_nothing_and_the_used_ones_do():
    """A pod's veth appearing or going (a Kubernetes node makes one per pod) re-evaluated every
    route: only a link a next hop names, or with the connected route of a gateway, does now."""
    rib = rib_with_links("eth0")
    rib.apply([connected(), up("192.168.1.0/24", static("a", "10.0.0.1"))])
    generation = rib.resolver.generation
    for name in ("veth1", "veth2"):
        assert rib.set_link(name, True) == {} and rib.set_link(name, None) == {}
    assert rib.resolver.generation == generation
    # a device route waiting for a link that does not exist yet: its creation resolves it
    assert rib.apply([up("192.168.3.0/24", static("c", None, dev="eth9"))]) == {}
    assert rib.set_link("eth9", True)[P("192.168.3.0/24")].nexthops == (NextHop(None, "eth9"),)
    assert rib.set_link("eth9", None) == {P("192.168.3.0/24"): None, P("192.168.1.0/24"): rib.desired(P("192.168.1.0/24"))}
    # a gateway whose connected route is on a link that appears only now (its address came first)
    rib.apply([up("192.168.4.0/24", static("d", "10.9.0.1"))])
    assert rib.set_connected([(P("10.9.0.0/24"), "eth7", True)])[P("192.168.4.0/24")] is None  # eth7 unknown yet
    assert rib.set_link("eth7", True)[P("192.168.4.0/24")].nexthops == (NextHop("10.9.0.1", "eth7"),)
    assert rib.set_link("eth7", None)[P("192.168.4.0/24")] is None


def test_a_new_links_ipv6_link_local_route_leaves_link_local_next_hops_on_other_links_alone():
    """Every veth gets fe80::/64: it covers a peer's link-local next hop on the uplink, which only
    the uplink's own routes can resolve (a next hop given with its device)."""
    def link_local(dev, present=True):  # (one origin per device, as the kernel source makes them)
        c = kernel(f"kernel,dev={dev}", dev=dev, connected=True)
        return Update(P("fe80::/64"), c.origin, c if present else None)

    rib = rib_with_links("up0", "eth0")
    rib.apply([link_local("up0"), up("2001:db8::/48", static("a", "fe80::1", dev="up0")),
               connected(), up("192.168.1.0/24", static("b", "10.0.0.1"))])
    assert rib.desired(P("2001:db8::/48")).nexthops == (NextHop("fe80::1", "up0"),)
    generation = rib.resolver.generation
    rib.set_link("veth0", True)
    assert rib.apply([link_local("veth0")]) == {} and rib.apply([link_local("veth0", False)]) == {}
    assert rib.set_link("veth0", None) == {} and rib.resolver.generation == generation
    # a more specific subnet of a gateway given without a device, and the uplink itself, still count
    rib.apply([connected(P("10.0.0.0/25"), "eth5")])
    assert rib.resolver.generation != generation
    assert rib.set_link("up0", False)[P("2001:db8::/48")] is None


def test_ecmp_static_route_is_one_multipath_route():
    rib = rib_with_links("eth0")
    rib.apply([connected()])
    ch = rib.apply([up("192.168.1.0/24", static("a", "10.0.0.1", "10.0.0.2"))])
    assert ch[P("192.168.1.0/24")].nexthops == (NextHop("10.0.0.1", "eth0"), NextHop("10.0.0.2", "eth0"))


def test_partially_resolvable_ecmp_installs_the_reachable_hops():
    rib = rib_with_links("eth0")
    rib.apply([connected()])
    ch = rib.apply([up("192.168.1.0/24", static("a", "10.0.0.1", "10.9.9.9"))])
    assert ch[P("192.168.1.0/24")].nexthops == (NextHop("10.0.0.1", "eth0"),)


def test_foreign_route_wins_and_ours_returns_when_it_goes():
    rib = rib_with_links("eth0")
    rib.apply([connected()])
    ours = static("a", "10.0.0.1")
    assert rib.apply([up("192.168.1.0/24", ours)])
    foreign = kernel("dhcp", gw="10.0.0.254")
    assert rib.apply([up("192.168.1.0/24", foreign)]) == {P("192.168.1.0/24"): None}
    assert "foreign" in rib.decide(P("192.168.1.0/24")).note
    back = rib.apply([Update(P("192.168.1.0/24"), foreign.origin, None)])
    assert back[P("192.168.1.0/24")].nexthops == (NextHop("10.0.0.1", "eth0"),)


def test_blackhole_needs_no_resolution():
    rib = Rib()
    ch = rib.apply([up("203.0.113.0/24", static("a", blackhole=True))])
    assert ch == {P("203.0.113.0/24"): KernelRoute(RouteType.BLACKHOLE, ())}


def test_distance_255_is_never_installed():
    rib = Rib()
    assert rib.apply([up("203.0.113.0/24", static("a", blackhole=True, distance=255))]) == {}
    assert rib.decide(P("203.0.113.0/24")).candidates[0].status == "never-install"


def test_withdraw_removes_and_counts_by_origin():
    rib = Rib()
    c = static("a", blackhole=True)
    rib.apply([up("203.0.113.0/24", c), up("203.0.114.0/24", c)])
    assert rib.counts[c.origin] == 2
    assert rib.apply([Update(P("203.0.113.0/24"), c.origin, None)]) == {P("203.0.113.0/24"): None}
    assert rib.counts[c.origin] == 1 and len(rib) == 1


def test_ipv6_with_link_local_gateway():
    rib = rib_with_links("eth0")
    rib.apply([connected(P("fe80::/64"), "eth0")])
    c = static("a", "fe80::1", dev="eth0")
    ch = rib.apply([up("2001:db8::/32", c)])
    assert ch[P("2001:db8::/32")].nexthops == (NextHop("fe80::1", "eth0"),)


def test_only_real_changes_go_downstream():
    rib = Rib()
    a = static("a", blackhole=True)
    rib.apply([up("203.0.113.0/24", a)])
    # a worse candidate arrives: the kernel route does not change
    assert rib.apply([up("203.0.113.0/24", static("b", blackhole=True, distance=5))]) == {}


# ---- property: any order of the same updates gives the same winners and the same FIB ----
PREFIXES = [P(f"192.168.{i}.0/24") for i in range(4)] + [P("2001:db8:1::/48")]
ORIGINS = [static("s1", "10.0.0.1"), static("s2", "10.0.0.2", distance=5), static("s3", "10.0.0.3"),
           static("bh", blackhole=True, distance=3), kernel("dhcp", gw="10.0.0.9"),
           bgp("10.0.0.4"), bgp("10.0.0.5", local_pref=300), bgp("10.0.0.6", ebgp=False)]
updates_st = st.lists(
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(ORIGINS), st.booleans()), max_size=40)


def run(updates, batch):
    rib = rib_with_links("eth0", max_paths=2)
    fib = FibState(FibSettings())
    fib.open_gate()
    net = FakeNetlink()
    rib.apply([connected()])
    ordered = [Update(p, c.origin, c if present else None) for p, c, present in updates]
    for i in range(0, len(ordered), batch):
        fib.want(rib.apply(ordered[i:i + batch]))
        ops = fib.plan()
        fib.done(ops, net.apply(ops))
    winners = {p: rib.selection(p).winners for p in PREFIXES}
    return winners, net.routes


@settings(max_examples=150, deadline=None)
@given(updates_st, st.randoms(use_true_random=False), st.integers(1, 5))
def test_any_order_gives_same_winners_and_fib(updates, rnd, batch):
    """The whole history, applied one by one, ends where its final state applied in any order
    and any batching ends."""
    ref = run(updates, 1)
    final = {}
    for prefix, cand, present in updates:
        final[(prefix, cand.origin)] = (prefix, cand, present)
    last = list(final.values())
    rnd.shuffle(last)
    assert run(last, batch) == ref


def test_prefix_parse_fast_path_matches_ipaddress_and_rejects_bad_input():
    import ipaddress

    import pytest

    from agent.core.model import Prefix

    for text in ["0.0.0.0/0", "10.0.0.0/8", "192.0.2.128/25", "203.0.113.7/32", "::/0",
                 "2001:db8::/32", "fe80::/64", "2001:db8::1/128"]:
        p = Prefix.parse(text)
        net = ipaddress.ip_network(text)
        assert (p.family, p.address, p.length, str(p)) == (net.version, int(net.network_address),
                                                         net.prefixlen, str(net))
    for bad in ["10.0.0.1/8", "10.0.0.0/33", "10.0.0/8", "10.0.0.0/+8", "2001:db8::1/32", "x/8", "::/129"]:
        with pytest.raises(ValueError):
            Prefix.parse(bad)
    assert sorted([Prefix.parse("::/0"), Prefix.parse("10.0.0.0/8"), Prefix.parse("9.0.0.0/8")]) == [
        Prefix.parse("9.0.0.0/8"), Prefix.parse("10.0.0.0/8"), Prefix.parse("::/0")]


# ---- recursive next-hop resolution (iBGP / multihop next hops) ----
def recursive_rib():
    rib = rib_with_links("eth0")
    rib.apply([connected()])
    return rib


def test_recursive_next_hop_resolves_through_a_covering_route_and_follows_it():
    rib = recursive_rib()
    igp = static("igp", "10.0.0.1")
    rib.apply([up("10.30.0.0/24", igp)])
    ch = rib.apply([up("10.20.0.0/16", bgp("10.30.0.1", ebgp=False))])
    assert ch[P("10.20.0.0/16")].nexthops == (NextHop("10.0.0.1", "eth0"),)
    assert "resolved through 10.30.0.0/24" in rib.decide(P("10.20.0.0/16")).candidates[0].detail
    # the covering route moves: the recursive route follows
    ch = rib.apply([up("10.30.0.0/24", static("igp", "10.0.0.2"))])
    assert ch[P("10.20.0.0/16")].nexthops == (NextHop("10.0.0.2", "eth0"),)
    # and goes when nothing resolves it any more
    ch = rib.apply([Update(P("10.30.0.0/24"), igp.origin, None)])
    assert ch[P("10.20.0.0/16")] is None


def test_recursive_resolution_through_a_foreign_kernel_route():
    rib = recursive_rib()
    rib.apply([up("10.30.0.0/24", kernel("bird", gw="10.0.0.9"))])
    ch = rib.apply([up("10.20.0.0/16", bgp("10.30.0.1", ebgp=False))])
    assert ch[P("10.20.0.0/16")].nexthops == (NextHop("10.0.0.9", "eth0"),)


def test_a_route_never_resolves_through_itself_or_the_default_route():
    rib = recursive_rib()
    assert rib.apply([up("10.30.0.0/16", bgp("10.30.0.1", ebgp=False))]) == {}
    rib.apply([up("0.0.0.0/0", static("default", "10.0.0.1"))])
    assert rib.apply([up("10.20.0.0/16", bgp("10.40.0.1", ebgp=False))]) == {}
    assert rib.desired(P("10.20.0.0/16")) is None
    states = rib.decide(P("10.20.0.0/16")).candidates
    assert states[0].status == "unresolved" and "no route resolves it" in states[0].detail


def test_recursive_route_appears_when_its_covering_route_arrives():
    rib = recursive_rib()
    assert rib.apply([up("10.20.0.0/16", bgp("10.30.0.1", ebgp=False))]) == {}
    ch = rib.apply([up("10.30.0.0/24", static("igp", "10.0.0.1"))])
    assert ch[P("10.20.0.0/16")].nexthops == (NextHop("10.0.0.1", "eth0"),)


def test_an_unrelated_connected_route_does_not_reevaluate_the_table():
    rib = rib_with_links("eth0", "eth1")
    rib.apply([connected()])
    rib.apply([up(f"192.168.{i}.0/24", static("a", "10.0.0.1")) for i in range(10)])
    generation = rib.resolver.generation
    assert rib.apply([connected(P("172.16.0.0/24"), "eth1"), connected(P("fe80::/64"), "eth1")]) == {}
    assert rib.resolver.generation == generation
    # one that covers a gateway in use does
    ch = rib.apply([connected(P("10.0.0.0/25"), "eth1")])
    assert ch[P("192.168.3.0/24")].nexthops == (NextHop("10.0.0.1", "eth1"),)


def test_intern_table_is_bounded_and_keeps_sharing_values_in_use():
    """A peer sending one community per prefix makes every attribute set distinct: the intern
    table must not keep them all after their routes are gone (issue 12 item 10)."""
    from agent.core import model

    live = model.intern(("a value in use",))
    for i in range(3 * model.INTERN_GENERATION):
        model.intern(("distinct", i))
        if i % 1000 == 0:
            assert model.intern(("a value in use",)) is live  # still shared while in use
    assert model.intern_size() <= 2 * model.INTERN_GENERATION


# ---- prefixes sharing one candidate tuple (an ECMP table from two peers) ----
def test_prefixes_offered_by_the_same_two_peers_share_one_tuple_and_its_route_follows_changes():
    rib = rib_with_links("eth0", "eth1")
    rib.apply([connected(), connected(P("10.0.1.0/24"), "eth1")])
    a, b = bgp("10.0.0.1", as_path=(65001,)), bgp("10.0.1.1", as_path=(65001,))
    nets = [P(f"10.9.{i}.0/24") for i in range(50)]
    rib.apply([Update(n, a.origin, a) for n in nets] + [Update(n, b.origin, b) for n in nets])
    assert len({id(rib._routes[n]) for n in nets}) == 1  # one tuple for all 50
    both = nexthops(NextHop("10.0.0.1", "eth0"), NextHop("10.0.1.1", "eth1"))
    assert {rib.desired(n).nexthops for n in nets} == {both}
    # max-paths 1: the remembered route is not reused
    rib.max_paths = 1
    assert {len(rib.desired(n).nexthops) for n in nets} == {1}
    rib.max_paths = 16
    # the link to one peer goes down: every prefix moves to the other, none keeps the old route
    ch = rib.set_link("eth0", False)
    assert {ch[n].nexthops for n in nets} == {(NextHop("10.0.1.1", "eth1"),)}
    rib.set_link("eth0", True)
    # one peer withdraws everything: each prefix changes to the survivor
    ch = rib.apply([Update(n, a.origin, None) for n in nets])
    assert {ch[n].nexthops for n in nets} == {(NextHop("10.0.1.1", "eth1"),)}


def test_a_shared_tuple_with_a_recursive_candidate_is_decided_per_prefix():
    """A recursive next hop may resolve through one of the prefixes sharing the tuple: that
    prefix must not get the route the others got (it would resolve through itself), whichever
    of them is decided first."""
    rib = recursive_rib()
    rib.apply([up("10.30.0.0/24", static("igp", "10.0.0.1"))])
    i1, i2 = bgp("10.30.0.1", ebgp=False), bgp("10.30.0.2", ebgp=False, router_id="9.9.9.9")
    outer, inner = P("10.20.0.0/16"), P("10.30.0.0/25")
    ch = rib.apply([Update(p, c.origin, c) for p in (outer, inner) for c in (i1, i2)])
    assert rib._routes[outer] is rib._routes[inner]
    assert ch[outer].nexthops == (NextHop("10.0.0.1", "eth0"),)
    # 10.30.0.1/.2 resolve through the /25 itself there (longest match): not installed
    assert inner not in ch and rib.desired(inner) is None and rib.desired(outer) is not None
    assert rib.decide(inner).desired is None
