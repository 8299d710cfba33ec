"""The import stage: RFC 8212 default deny, guard before policy, candidates, counters, max-prefix."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from agent.core.model import BgpAttrs, BgpOrigin, NextHop, Origin, Prefix, SourceKind, Update, nexthops
from agent.policy.engine import ACCEPT_ALL, compile_policies
from agent.policy.verdict import NO_MODS, Reason
from agent.config.policy import RoutePolicy

imp = importlib.import_module("agent.import")
Guard, ImportStage, ImportPeer = imp.Guard, imp.ImportStage, imp.ImportPeer
Limit, Action, D = imp.MaxPrefixLimit, imp.MaxPrefixAction, imp.MaxPrefixDecision

P = Prefix.parse
EBGP, IBGP = "192.0.2.1", "10.0.0.2"
ROUTE = P("203.0.113.0/24")


def rp(name: str, *statements: dict, default: str = "reject") -> RoutePolicy:
    return RoutePolicy.model_validate({
        "apiVersion": "routeagent.io/v1alpha1", "kind": "RoutePolicy", "metadata": {"name": name},
        "spec": {"defaultAction": default, "statements": list(statements)},
    }, by_alias=True, by_name=False)


POLICIES = compile_policies([
    rp("tweak", {"name": "lp", "conditions": {"prefixSet": [{"prefix": "203.0.113.0/24"}]},
                 "actions": {"result": "accept", "setLocalPref": 300, "addCommunity": ["65000:7"],
                             "setAdminDistance": 15, "setKernelMetric": 1000}},
       {"name": "rest", "actions": {"result": "accept"}}),
    rp("only-customers", {"name": "cust", "conditions": {"communities": {"values": ["65000:100"]}},
                          "actions": {"result": "accept"}}),
    rp("per-peer", {"name": "tor1", "conditions": {"peerAs": [65001]}, "actions": {"result": "accept"}}),
])


def attrs(peer=EBGP, asn=65001, ebgp=True, **kw) -> BgpAttrs:
    kw.setdefault("as_path", (asn,) if ebgp else ())
    return BgpAttrs(peer, asn, peer, ebgp, **kw)


def stage(*peers, guard=None, **kw) -> ImportStage:
    s = ImportStage(guard or Guard(["10.244.3.0/24"], ["192.0.2.10/24"]), POLICIES, **kw)
    for p in peers:
        s.set_peer(p)
    return s


def ebgp(policy=None, **kw) -> ImportPeer:
    return ImportPeer(EBGP, 65001, True, policy, **kw)


def ibgp(policy=None, **kw) -> ImportPeer:
    return ImportPeer(IBGP, 65000, False, policy, **kw)


# ---------------------------------------------------------------------------------------------
# RFC 8212 and the verdict of a route per kind of peer
# ---------------------------------------------------------------------------------------------

VERDICT_CASES = [
    ("eBGP without policy: default deny", ebgp(), EBGP, ROUTE, False, Reason.NO_POLICY),
    ("iBGP without policy: accepted", ibgp(), IBGP, ROUTE, True, Reason.IBGP_NO_POLICY),
    ("eBGP acceptAll", ebgp(ACCEPT_ALL), EBGP, ROUTE, True, Reason.DEFAULT_ACCEPT),
    ("unknown policy fails closed (eBGP)", ebgp("nope"), EBGP, ROUTE, False, Reason.UNKNOWN_POLICY),
    ("unknown policy fails closed (iBGP)", ibgp("nope"), IBGP, ROUTE, False, Reason.UNKNOWN_POLICY),
    ("policy default reject", ebgp("only-customers"), EBGP, ROUTE, False, Reason.DEFAULT_REJECT),
    ("guard beats acceptAll: own prefix", ebgp(ACCEPT_ALL), EBGP, P("10.244.3.0/24"), False, Reason.OWN_PREFIX),
    ("guard beats acceptAll: more specific", ebgp(ACCEPT_ALL), EBGP, P("10.244.3.0/25"), False,
     Reason.MORE_SPECIFIC_OF_OWN),
    ("guard beats acceptAll: covering", ebgp(ACCEPT_ALL), EBGP, P("10.244.0.0/16"), False, Reason.COVERS_OWN),
    ("guard beats acceptAll: 0/0", ebgp(ACCEPT_ALL), EBGP, P("0.0.0.0/0"), False, Reason.DEFAULT_ROUTE),
    ("guard beats acceptAll: ::/0", ebgp(ACCEPT_ALL), EBGP, P("::/0"), False, Reason.DEFAULT_ROUTE),
    ("guard beats iBGP default accept", ibgp(), IBGP, P("0.0.0.0/0"), False, Reason.DEFAULT_ROUTE),
    ("guard beats acceptAll: node address", ebgp(ACCEPT_ALL), EBGP, P("192.0.2.10/32"), False, Reason.NODE_ADDRESS),
    ("peer allows defaults", ebgp(ACCEPT_ALL, allow_default=True), EBGP, P("::/0"), True, Reason.DEFAULT_ACCEPT),
    ("peer allows covering", ebgp(ACCEPT_ALL, allow_covering=True), EBGP, P("10.0.0.0/8"), True,
     Reason.DEFAULT_ACCEPT),
    ("allowed default still needs a policy", ebgp(allow_default=True), EBGP, P("0.0.0.0/0"), False,
     Reason.NO_POLICY),
]


@pytest.mark.parametrize("peer,address,prefix,accepted,reason", [c[1:] for c in VERDICT_CASES],
                         ids=[c[0] for c in VERDICT_CASES])
def test_verdict_per_peer_kind(peer, address, prefix, accepted, reason):
    s = stage(peer)
    a = attrs(address, peer.asn, peer.ebgp)
    result = s.receive(address, prefix, address, a)
    assert (result.verdict.accepted, result.verdict.reason) == (accepted, reason)
    assert (result.update is not None) is accepted
    assert s.evaluate(address, prefix, address, a) is result.verdict  # the pure variant agrees
    family = prefix.family
    assert s.received[(address, family)] == 1
    if accepted:
        assert s.accepted[(address, family)] == 1 and not s.rejected
    else:
        assert s.rejected == {(address, family, reason): 1} and (address, family) not in s.accepted


def test_no_policy_rejections_are_counted_per_family():
    s = stage(ebgp())
    for p in ("203.0.113.0/24", "198.51.100.0/24", "2001:db8:1::/48"):
        s.receive(EBGP, P(p), EBGP, attrs())
    assert s.rejected == {(EBGP, 4, Reason.NO_POLICY): 2, (EBGP, 6, Reason.NO_POLICY): 1}
    assert s.held(EBGP) == {4: (0, 2), 6: (0, 1)}
    assert s.verdict(EBGP, P("198.51.100.0/24")).reason is Reason.NO_POLICY


# ---------------------------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------------------------


def test_accepted_route_becomes_a_candidate():
    s = stage(ebgp(ACCEPT_ALL), ibgp())
    u = s.receive(EBGP, ROUTE, EBGP, attrs(med=5, origin=BgpOrigin.EGP)).update
    c = u.candidate
    assert (u.prefix, u.origin) == (ROUTE, Origin(SourceKind.EBGP, EBGP))
    assert (c.origin, c.distance, c.nexthops, c.metric) == (u.origin, 20, nexthops(NextHop(EBGP)), None)
    assert (c.bgp.med, c.bgp.origin, c.bgp.as_path) == (5, BgpOrigin.EGP, (65001,))
    c = s.receive(IBGP, ROUTE, "10.0.0.9", attrs(IBGP, 65000, False, local_pref=150)).update.candidate
    assert (c.origin, c.distance, c.nexthops) == (Origin(SourceKind.IBGP, IBGP), 200, nexthops(NextHop("10.0.0.9")))
    assert c.bgp.local_pref == 150  # iBGP keeps LOCAL_PREF


def test_ebgp_local_pref_is_ignored():
    s = stage(ebgp(ACCEPT_ALL))
    c = s.receive(EBGP, ROUTE, EBGP, attrs(local_pref=999)).update.candidate
    assert c.bgp.local_pref == 100


def test_policy_modifications_reach_the_candidate():
    s = stage(ebgp("tweak"))
    r = s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:1",)))
    c = r.update.candidate
    assert (r.verdict.statement, r.verdict.policy) == ("lp", "tweak")
    assert (c.distance, c.metric, c.bgp.local_pref, c.bgp.communities) == (15, 1000, 300, ("65000:1", "65000:7"))
    c2 = s.receive(EBGP, P("198.51.100.0/24"), EBGP, attrs()).update.candidate  # statement "rest"
    assert (c2.distance, c2.metric, c2.bgp.local_pref) == (20, None, 100)


DISTANCE_CASES = [
    ("default eBGP", ebgp(ACCEPT_ALL), None, 20),
    ("default iBGP", ibgp(ACCEPT_ALL), None, 200),
    ("configured defaults", ebgp(ACCEPT_ALL), {SourceKind.EBGP: 30, SourceKind.IBGP: 190}, 30),
    ("peer override", ebgp(ACCEPT_ALL, distance=5), {SourceKind.EBGP: 30}, 5),
    ("policy beats peer override", ebgp("tweak", distance=5), None, 15),
    ("override 255 never installs", ibgp(distance=255), None, 255),
]


@pytest.mark.parametrize("peer,distances,expected", [c[1:] for c in DISTANCE_CASES], ids=[c[0] for c in DISTANCE_CASES])
def test_distance_precedence(peer, distances, expected):
    s = stage(peer, distances=distances)
    c = s.receive(peer.address, ROUTE, peer.address, attrs(peer.address, peer.asn, peer.ebgp)).update.candidate
    assert c.distance == expected


@pytest.mark.parametrize("nexthop,device,expected", [
    ("fe80::1", "eth1", NextHop("fe80::1", "eth1")),
    ("FE80:0::1", "eth1", NextHop("fe80::1", "eth1")),
    ("2001:db8::1", "eth1", NextHop("2001:db8::1")),
    ("fe80::1", None, NextHop("fe80::1")),
])
def test_link_local_next_hop_gets_the_peer_device(nexthop, device, expected):
    s = stage(ebgp(ACCEPT_ALL, device=device))
    c = s.receive(EBGP, P("2001:db8:5::/48"), nexthop, attrs()).update.candidate
    assert c.nexthops == nexthops(expected)


def test_candidates_are_shared_for_shared_attributes():
    s = stage(ebgp(ACCEPT_ALL))
    a = attrs()
    c1 = s.receive(EBGP, P("203.0.113.0/24"), EBGP, a).update.candidate
    c2 = s.receive(EBGP, P("198.51.100.0/24"), EBGP, a).update.candidate
    c3 = s.receive(EBGP, P("198.51.101.0/24"), EBGP, attrs()).update.candidate  # equal, not the same object
    # one candidate per attributes object (the codec shares equal attribute sets; the stage does
    # not hash them to find equal ones)
    assert c1 is c2 and c3 == c1
    c4 = s.receive(EBGP, P("198.51.102.0/24"), "192.0.2.2", a).update.candidate
    assert c4.nexthops == nexthops(NextHop("192.0.2.2"))


def test_attributes_that_are_not_bgpattrs():
    s = stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL, router_id="1.1.1.1"))
    a = SimpleNamespace(as_path=[65001, 65002], communities=["65000:1"], large_communities=[], med=3,
                        origin=2, local_pref=500)
    c = s.receive(EBGP, ROUTE, EBGP, a).update.candidate
    assert c.bgp == BgpAttrs(EBGP, 65001, "1.1.1.1", True, local_pref=100, as_path=(65001, 65002),
                             origin=BgpOrigin.INCOMPLETE, med=3, communities=("65000:1",))


# ---------------------------------------------------------------------------------------------
# Re-announcements, withdrawals, session down, explain
# ---------------------------------------------------------------------------------------------


def test_reannouncement_now_rejected_withdraws_from_the_rib():
    s = stage(ebgp("only-customers"))
    r1 = s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:100",)))
    assert r1.update.candidate is not None
    r2 = s.receive(EBGP, ROUTE, EBGP, attrs())
    assert not r2.verdict.accepted and r2.update == Update(ROUTE, Origin(SourceKind.EBGP, EBGP), None)
    r3 = s.receive(EBGP, ROUTE, EBGP, attrs())  # rejected again: nothing for the RIB
    assert r3.update is None
    assert s.held(EBGP)[4] == (0, 1)


def test_withdraw():
    s = stage(ebgp("only-customers"))
    s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:100",)))
    s.receive(EBGP, P("198.51.100.0/24"), EBGP, attrs())
    assert s.withdraw(EBGP, ROUTE) == Update(ROUTE, Origin(SourceKind.EBGP, EBGP), None)
    assert s.withdraw(EBGP, P("198.51.100.0/24")) is None  # was rejected: not in the RIB
    assert s.withdraw(EBGP, P("192.0.2.0/24")) is None  # never received
    assert s.verdict(EBGP, ROUTE) is None
    assert s.held(EBGP) == {4: (0, 0), 6: (0, 0)}


def test_explain_keeps_the_deciding_statement():
    s = stage(ebgp("tweak"), ibgp("only-customers"))
    s.receive(EBGP, ROUTE, EBGP, attrs())
    s.receive(IBGP, ROUTE, IBGP, attrs(IBGP, 65000, False))
    v = s.verdict(EBGP, ROUTE)
    assert (v.accepted, v.policy, v.statement) == (True, "tweak", "lp")
    assert v.mods.local_pref == 300
    both = s.explain(ROUTE)
    assert set(both) == {EBGP, IBGP}
    assert (both[IBGP].accepted, both[IBGP].statement, both[IBGP].reason) == (False, "default", Reason.DEFAULT_REJECT)
    assert s.explain(P("192.0.2.0/24")) == {}


def test_rejections_kept_only_up_to_the_limit_but_always_counted():
    s = stage(ebgp(), keep_rejected=2)
    prefixes = [P(f"198.51.{i}.0/24") for i in range(4)]
    for p in prefixes:
        s.receive(EBGP, p, EBGP, attrs())
    assert [s.verdict(EBGP, p) is not None for p in prefixes] == [True, True, False, False]
    assert s.rejected[(EBGP, 4, Reason.NO_POLICY)] == 4
    assert s.held(EBGP)[4] == (0, 2)
    s.withdraw(EBGP, prefixes[0])  # frees a slot
    s.receive(EBGP, prefixes[3], EBGP, attrs())
    assert s.verdict(EBGP, prefixes[3]) is not None


def test_peer_down_forgets_routes():
    s = stage(ebgp(ACCEPT_ALL))
    s.receive(EBGP, ROUTE, EBGP, attrs())
    s.peer_down(EBGP, now=1.0)
    assert s.verdict(EBGP, ROUTE) is None and s.held(EBGP)[4] == (0, 0)
    assert s.received[(EBGP, 4)] == 1  # totals are monotonic
    assert s.withdraw(EBGP, ROUTE) is None


def test_unknown_peer():
    with pytest.raises(KeyError):
        stage().receive(EBGP, ROUTE, EBGP, attrs())


def test_changing_policies_and_peer_settings():
    s = stage(ebgp())
    assert not s.receive(EBGP, ROUTE, EBGP, attrs()).verdict.accepted
    s.set_peer(ebgp("only-customers"))
    assert s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:100",))).verdict.accepted
    s.set_policies(compile_policies([rp("only-customers", default="reject")]))
    assert not s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:100",))).verdict.accepted
    s.set_policies(compile_policies([]))
    assert s.receive(EBGP, ROUTE, EBGP, attrs()).verdict.reason is Reason.UNKNOWN_POLICY
    assert s.peers[EBGP].policy == "only-customers"
    s.remove_peer(EBGP)
    assert s.peers == {}


def test_policy_bound_per_peer():
    s = stage(ebgp("per-peer"), ImportPeer("192.0.2.9", 65009, True, "per-peer"))
    assert s.receive(EBGP, ROUTE, EBGP, attrs()).verdict.statement == "tor1"
    v = s.receive("192.0.2.9", ROUTE, "192.0.2.9", attrs("192.0.2.9", 65009)).verdict
    assert (v.accepted, v.statement) == (False, "default")


# ---------------------------------------------------------------------------------------------
# Max-prefix through the stage
# ---------------------------------------------------------------------------------------------


def test_max_prefix_discard_extra_counts_accepted_only():
    s = stage(ebgp("only-customers", max_prefix={4: Limit(2, Action.DISCARD_EXTRA)}))
    cust = attrs(communities=("65000:100",))
    for i in range(5):  # rejected by policy: not counted
        s.receive(EBGP, P(f"198.51.{i}.0/24"), EBGP, attrs())
    results = [s.receive(EBGP, P(f"203.0.{i}.0/24"), EBGP, cust) for i in range(3)]
    assert [r.maxprefix for r in results] == [D.OK, D.OK, D.DISCARD]
    third = results[2]
    assert (third.verdict.accepted, third.verdict.reason, third.update) == (False, Reason.MAX_PREFIX, None)
    assert (third.verdict.policy, third.verdict.statement) == ("max-prefix", "limit 2 discardExtra")
    # re-announcing an accepted prefix does not count again
    assert s.receive(EBGP, P("203.0.0.0/24"), EBGP, cust).maxprefix is D.OK
    # a withdrawal frees a slot; the discarded prefix comes back when re-sent
    s.withdraw(EBGP, P("203.0.0.0/24"))
    assert s.receive(EBGP, P("203.0.2.0/24"), EBGP, cust).verdict.accepted
    # an accepted prefix re-announced and now rejected frees its slot too
    s.receive(EBGP, P("203.0.1.0/24"), EBGP, attrs())
    assert s.receive(EBGP, P("203.0.9.0/24"), EBGP, cust).verdict.accepted
    assert s.maxprefix.count(EBGP, 4) == 2
    assert s.rejected[(EBGP, 4, Reason.MAX_PREFIX)] == 1


def test_max_prefix_teardown_then_reset_on_session_down():
    s = stage(ebgp(ACCEPT_ALL, max_prefix={4: Limit(1, Action.TEARDOWN, restart_seconds=10)}))
    assert s.receive(EBGP, P("203.0.0.0/24"), EBGP, attrs()).maxprefix is D.OK
    r = s.receive(EBGP, P("203.0.1.0/24"), EBGP, attrs())
    assert (r.maxprefix, r.verdict.reason, r.update) == (D.TEARDOWN, Reason.MAX_PREFIX, None)
    r = s.receive(EBGP, P("2001:db8:1::/48"), EBGP, attrs())  # no v6 limit, but the session is going down
    assert (r.maxprefix, r.verdict.accepted) == (D.DISCARD, False)
    s.peer_down(EBGP, now=50.0)
    assert not s.maxprefix.may_connect(EBGP, 55.0) and s.maxprefix.may_connect(EBGP, 60.0)
    assert s.receive(EBGP, P("203.0.1.0/24"), EBGP, attrs()).maxprefix is D.OK


def test_max_prefix_warn_accepts():
    s = stage(ebgp(ACCEPT_ALL, max_prefix={6: Limit(1, Action.WARN)}))
    r = [s.receive(EBGP, P(f"2001:db8:{i}::/48"), EBGP, attrs()) for i in range(3)]
    assert [x.maxprefix for x in r] == [D.OK, D.WARN, D.OK]
    assert all(x.verdict.accepted and x.update is not None for x in r)
    assert s.held(EBGP)[6] == (3, 0)


def test_guard_and_policy_rejections_do_not_touch_max_prefix():
    s = stage(ebgp(ACCEPT_ALL, max_prefix={4: Limit(0, Action.TEARDOWN)}))
    assert s.receive(EBGP, P("10.244.3.0/24"), EBGP, attrs()).maxprefix is D.OK
    assert s.receive(EBGP, P("0.0.0.0/0"), EBGP, attrs()).maxprefix is D.OK
    assert s.receive(EBGP, ROUTE, EBGP, attrs()).maxprefix is D.TEARDOWN


def test_accepted_verdict_has_no_mods_by_default():
    s = stage(ebgp(ACCEPT_ALL))
    assert s.receive(EBGP, ROUTE, EBGP, attrs()).verdict.mods is NO_MODS


def test_changing_the_peer_as_resets_its_state():
    s = stage(ebgp(ACCEPT_ALL, max_prefix={4: Limit(1)}))
    s.receive(EBGP, ROUTE, EBGP, attrs())
    s.set_peer(ImportPeer(EBGP, 65002, True, ACCEPT_ALL, max_prefix={4: Limit(1)}))
    assert s.verdict(EBGP, ROUTE) is None and s.maxprefix.count(EBGP, 4) == 0
    assert s.receive(EBGP, ROUTE, EBGP, attrs(asn=65002)).maxprefix is D.OK
    s.set_peer(ImportPeer(EBGP, 65002, True, "only-customers", max_prefix={4: Limit(1)}))  # same session: kept
    assert s.verdict(EBGP, ROUTE) is not None and s.maxprefix.count(EBGP, 4) == 1


def test_speaker_path_attrs_become_bgp_attrs():
    from agent.core.bgp import PathAttrs

    s = stage(ibgp(), ebgp(ACCEPT_ALL))
    s.set_router_id(IBGP, "10.255.0.2")
    a = PathAttrs(as_path=(65010,), med=None, local_pref=None, communities=("65000:1",))
    c = s.receive(IBGP, ROUTE, "10.0.0.9", a).update.candidate
    assert c.bgp == BgpAttrs(IBGP, 65000, "10.255.0.2", False, local_pref=100, as_path=(65010,), med=0,
                             communities=("65000:1",))
    c = s.receive(IBGP, P("198.51.100.0/24"), "10.0.0.9", PathAttrs(local_pref=250, med=7)).update.candidate
    assert (c.bgp.local_pref, c.bgp.med) == (250, 7)
    c = s.receive(EBGP, ROUTE, EBGP, PathAttrs(as_path=(65001,), local_pref=250)).update.candidate
    assert (c.bgp.local_pref, c.bgp.router_id) == (100, EBGP)  # eBGP: LOCAL_PREF ignored; no OPEN seen


def test_origin_and_accepted_prefixes_for_the_bgp_source():
    s = stage(ebgp("only-customers"), ibgp())
    assert s.origin(EBGP) == Origin(SourceKind.EBGP, EBGP) and s.origin(IBGP) == Origin(SourceKind.IBGP, IBGP)
    s.receive(EBGP, ROUTE, EBGP, attrs(communities=("65000:100",)))
    s.receive(EBGP, P("198.51.100.0/24"), EBGP, attrs())
    assert s.accepted_prefixes(EBGP) == [ROUTE]
    assert s.accepted_prefixes("192.0.2.99") == []


def test_rejections_beyond_the_store_are_reported_as_not_kept():
    s = stage(ebgp(), keep_rejected=1)
    for _ in range(2):
        s.receive(EBGP, ROUTE, EBGP, attrs())
        s.receive(EBGP, P("198.51.100.0/24"), EBGP, attrs())
    assert s.held(EBGP)[4] == (0, 1) and s.not_kept(EBGP) == {4: 2, 6: 0}  # rejected now: at least 1
    s.peer_down(EBGP, 0.0)
    assert s.not_kept(EBGP) == {4: 0, 6: 0}


@pytest.mark.parametrize("policy", [ACCEPT_ALL, "tweak", "only-customers", None])
def test_a_batch_gives_what_one_route_at_a_time_gives(policy):
    """`receive_batch` (one UPDATE: one next hop, one attribute set) == `receive` per prefix:
    same RIB updates, verdicts, counters and max-prefix decision; the guard still runs per prefix
    and a prefix-set policy per prefix."""
    prefixes = [P("203.0.113.0/24"), P("10.244.3.0/24"), P("198.51.100.0/24"), P("0.0.0.0/0"),
                P("203.0.113.0/24"), P("192.0.2.128/25")]
    limit = {4: Limit(2, Action.TEARDOWN)}
    a = attrs(communities=("65000:100",))
    one, many = stage(ebgp(policy, max_prefix=limit)), stage(ebgp(policy, max_prefix=limit))
    expected, decisions = [], []
    for p in prefixes:
        r = one.receive(EBGP, p, EBGP, a)
        decisions.append(r.maxprefix)
        if r.update is not None:
            expected.append(r.update)
    got: list = []
    decision, _ = many.receive_batch(EBGP, prefixes, EBGP, a, got)
    assert got == expected
    assert decision == (D.TEARDOWN if D.TEARDOWN in decisions else D.OK)
    assert (many.received, many.accepted, many.rejected) == (one.received, one.accepted, one.rejected)
    assert {p: many.verdict(EBGP, p) for p in prefixes} == {p: one.verdict(EBGP, p) for p in prefixes}
    assert many.held(EBGP) == one.held(EBGP)


def test_a_batch_takes_stale_prefixes_back_and_withdraws_the_rejected_ones():
    s = stage(ebgp("tweak"))  # accepts everything ("rest")
    stale = {P("203.0.113.0/24"), P("10.244.3.0/24"), P("198.51.100.0/24")}
    out: list = []
    s.receive_batch(EBGP, [P("203.0.113.0/24"), P("10.244.3.0/24")], EBGP, attrs(), out, stale)
    assert stale == {P("198.51.100.0/24")}  # the sweep at End-of-RIB takes the rest
    assert [(u.prefix, u.candidate is not None) for u in out] == [
        (P("203.0.113.0/24"), True),
        (P("10.244.3.0/24"), False),  # stale, now refused by the guard: withdrawn at once
    ]


@pytest.mark.parametrize("nexthop", ["0.0.0.0", "127.0.0.1", "224.0.0.1", "192.0.2.10"])
def test_unusable_next_hop_is_rejected_before_any_policy(nexthop):
    """A NEXT_HOP of 0.0.0.0, loopback, multicast or our own (session) address passes no policy,
    acceptAll included: rejected by the guard, counted, explainable; a route accepted before
    with a good next hop is withdrawn from the RIB when re-sent with a bad one."""
    s = stage(ebgp(ACCEPT_ALL))
    assert s.receive(EBGP, ROUTE, "192.0.2.1", attrs()).verdict.accepted
    r = s.receive(EBGP, ROUTE, nexthop, attrs())
    want = Reason.NEXT_HOP_IS_NODE if nexthop == "192.0.2.10" else Reason.BAD_NEXT_HOP
    assert (r.verdict.accepted, r.verdict.reason, r.verdict.policy) == (False, want, "guard")
    assert r.update is not None and r.update.candidate is None  # the earlier route leaves the RIB
    assert s.rejected == {(EBGP, 4, want): 1}
    assert s.explain(ROUTE)[EBGP].statement == f"next hop {nexthop}"
    assert s.held(EBGP) == {4: (0, 1), 6: (0, 0)}


def test_unspecified_ipv6_next_hop_is_rejected():
    s = stage(ebgp(ACCEPT_ALL))
    r = s.receive(EBGP, P("2001:db8:7::/48"), "::", attrs())
    assert (r.verdict.reason, r.update) == (Reason.BAD_NEXT_HOP, None)
    assert s.rejected == {(EBGP, 6, Reason.BAD_NEXT_HOP): 1}


def test_a_batch_with_an_unusable_next_hop_is_rejected_prefix_by_prefix():
    s = stage(ebgp(ACCEPT_ALL))
    out: list = []
    s.receive_batch(EBGP, [P("203.0.113.0/24"), P("198.51.100.0/24")], "0.0.0.0", attrs(), out)
    assert out == [] and s.rejected == {(EBGP, 4, Reason.BAD_NEXT_HOP): 2}
    assert s.verdict(EBGP, P("198.51.100.0/24")).statement == "next hop 0.0.0.0"
