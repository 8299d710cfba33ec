"""Route policy: the RoutePolicy schema, every condition and action, ordering, defaults, built-ins."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.core.model import BgpAttrs, Prefix, address_order
from agent.policy.engine import (
    ACCEPT_ALL,
    BUILTIN_POLICIES,
    PeerInfo,
    compile_policies,
    compile_policy,
    evaluate,
)
from agent.policy.prefixes import PrefixIndex, PrefixSet
from agent.policy.verdict import Modifications, NO_MODS, Reason, Verdict
from agent.config.policy import (
    KINDS,
    RoutePolicy,
    canonical_community,
    canonical_large_community,
)
from agent.policy.aspath import translate_as_path_regex

P = Prefix.parse
API = "routeagent.io/v1alpha1"
EBGP = PeerInfo("192.0.2.1", 65001, True)
IBGP = PeerInfo("10.0.0.2", 65000, False)


def doc(*statements: dict, default: str | None = None, name: str = "p") -> dict:
    spec: dict = {"statements": list(statements)}
    if default is not None:
        spec["defaultAction"] = default
    return {"apiVersion": API, "kind": "RoutePolicy", "metadata": {"name": name}, "spec": spec}


def model(*statements: dict, default: str | None = None, name: str = "p") -> RoutePolicy:
    return RoutePolicy.model_validate(doc(*statements, default=default, name=name), by_alias=True, by_name=False)


def policy(*statements: dict, default: str | None = None):
    return compile_policy(model(*statements, default=default))


def attrs(path=(65001,), comms=(), large=(), local_pref=100) -> BgpAttrs:
    return BgpAttrs("192.0.2.1", 65001, "192.0.2.1", True, local_pref=local_pref, as_path=tuple(path),
                    communities=tuple(comms), large_communities=tuple(large))


def run(pol, prefix="203.0.113.0/24", nexthop="192.0.2.1", a=None, peer=EBGP) -> Verdict:
    return pol.bind(peer).evaluate(P(prefix), nexthop, a if a is not None else attrs())


def errors(document: dict) -> set[tuple[str, str]]:
    with pytest.raises(ValidationError) as info:
        RoutePolicy.model_validate(document, by_alias=True, by_name=False)
    return {(".".join(str(x) for x in e["loc"]), e["type"]) for e in info.value.errors()}


# ---------------------------------------------------------------------------------------------
# Conditions: one statement "if CONDITIONS then accept", default reject
# ---------------------------------------------------------------------------------------------

R = dict  # a route: prefix, nexthop, attrs, peer

CONDITION_CASES = [
    # prefixSet: exact (default), orLonger, le, ge, ge+le, families
    ("exact equal", {"prefixSet": [{"prefix": "10.0.0.0/8"}]}, R(prefix="10.0.0.0/8"), True),
    ("exact longer", {"prefixSet": [{"prefix": "10.0.0.0/8"}]}, R(prefix="10.1.0.0/16"), False),
    ("exact shorter", {"prefixSet": [{"prefix": "10.0.0.0/8"}]}, R(prefix="10.0.0.0/7"), False),
    ("orLonger equal", {"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger"}]}, R(prefix="10.0.0.0/8"), True),
    ("orLonger host", {"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger"}]}, R(prefix="10.9.9.9/32"), True),
    ("orLonger shorter", {"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger"}]}, R(prefix="0.0.0.0/0"), False),
    ("orLonger sibling", {"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger"}]}, R(prefix="11.0.0.0/8"), False),
    ("le inside", {"prefixSet": [{"prefix": "10.0.0.0/8", "le": 24}]}, R(prefix="10.1.2.0/24"), True),
    ("le network", {"prefixSet": [{"prefix": "10.0.0.0/8", "le": 24}]}, R(prefix="10.0.0.0/8"), True),
    ("le too long", {"prefixSet": [{"prefix": "10.0.0.0/8", "le": 24}]}, R(prefix="10.1.2.0/25"), False),
    ("ge alone to host", {"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 16}]}, R(prefix="10.1.2.3/32"), True),
    ("ge too short", {"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 16}]}, R(prefix="10.0.0.0/12"), False),
    ("ge le low", {"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 16, "le": 24}]}, R(prefix="10.1.0.0/16"), True),
    ("ge le high", {"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 16, "le": 24}]}, R(prefix="10.1.1.0/24"), True),
    ("ge le out", {"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 16, "le": 24}]}, R(prefix="10.1.1.0/25"), False),
    ("any /25+", {"prefixSet": [{"prefix": "0.0.0.0/0", "ge": 25}]}, R(prefix="198.51.100.128/25"), True),
    ("any /25+ miss", {"prefixSet": [{"prefix": "0.0.0.0/0", "ge": 25}]}, R(prefix="198.51.100.0/24"), False),
    ("v4 set, v6 route", {"prefixSet": [{"prefix": "0.0.0.0/0", "le": 32}]}, R(prefix="2001:db8::/32"), False),
    ("v6 le 48", {"prefixSet": [{"prefix": "::/0", "le": 48}]}, R(prefix="2001:db8::/32"), True),
    ("v6 le 48 miss", {"prefixSet": [{"prefix": "::/0", "le": 48}]}, R(prefix="2001:db8::/56"), False),
    ("mixed set second entry",
     {"prefixSet": [{"prefix": "2001:db8::/32", "match": "orLonger"}, {"prefix": "192.0.2.0/24"}]},
     R(prefix="192.0.2.0/24"), True),
    ("mixed set v6 entry",
     {"prefixSet": [{"prefix": "2001:db8::/32", "match": "orLonger"}, {"prefix": "192.0.2.0/24"}]},
     R(prefix="2001:db8:1::/48"), True),
    # standard communities: any / all / none, well-known names
    ("community any hit", {"communities": {"values": ["65000:1", "65000:2"]}}, R(comms=["65000:2"]), True),
    ("community any miss", {"communities": {"values": ["65000:1"]}}, R(comms=["65000:2"]), False),
    ("community any empty", {"communities": {"values": ["65000:1"]}}, R(comms=[]), False),
    ("community all hit", {"communities": {"match": "all", "values": ["65000:1", "65000:2"]}},
     R(comms=["65000:2", "65000:3", "65000:1"]), True),
    ("community all partial", {"communities": {"match": "all", "values": ["65000:1", "65000:2"]}},
     R(comms=["65000:1"]), False),
    ("community none hit", {"communities": {"match": "none", "values": ["no-export"]}}, R(comms=["65000:1"]), True),
    ("community none miss", {"communities": {"match": "none", "values": ["no-export"]}},
     R(comms=["65535:65281"]), False),
    ("well-known name", {"communities": {"values": ["no-export"]}}, R(comms=["65535:65281"]), True),
    ("well-known blackhole", {"communities": {"values": ["blackhole"]}}, R(comms=["65535:666"]), True),
    ("community canonical", {"communities": {"values": ["065000:0001"]}}, R(comms=["65000:1"]), True),
    # large communities
    ("large any", {"largeCommunities": {"values": ["65000:1:2"]}}, R(large=["65000:1:2"]), True),
    ("large any miss", {"largeCommunities": {"values": ["65000:1:2"]}}, R(large=["65000:1:3"]), False),
    ("large all", {"largeCommunities": {"match": "all", "values": ["1:2:3", "4:5:6"]}},
     R(large=["4:5:6", "1:2:3"]), True),
    ("large all partial", {"largeCommunities": {"match": "all", "values": ["1:2:3", "4:5:6"]}},
     R(large=["4:5:6"]), False),
    ("large none", {"largeCommunities": {"match": "none", "values": ["1:2:3"]}}, R(large=[]), True),
    ("large vs standard", {"largeCommunities": {"values": ["65000:1:2"]}}, R(comms=["65000:1"]), False),
    # AS path
    ("contains hit", {"asPath": {"contains": [174, 3356]}}, R(path=[65001, 3356, 65010]), True),
    ("contains miss", {"asPath": {"contains": [174]}}, R(path=[65001, 1174]), False),
    ("regex first AS", {"asPath": {"regex": "^65001_"}}, R(path=[65001, 65002]), True),
    ("regex not a prefix of an AS", {"asPath": {"regex": "^65001_"}}, R(path=[650011, 65002]), False),
    ("regex boundary", {"asPath": {"regex": "_65002_"}}, R(path=[65001, 65002, 65003]), True),
    ("regex boundary miss", {"asPath": {"regex": "_65002_"}}, R(path=[65001, 165002]), False),
    ("regex unanchored substring", {"asPath": {"regex": "5002"}}, R(path=[65001, 65002]), True),
    ("regex last AS", {"asPath": {"regex": "_65003$"}}, R(path=[65001, 65003]), True),
    ("regex whole path", {"asPath": {"regex": "^65001 65002$"}}, R(path=[65001, 65002]), True),
    ("regex whole path longer", {"asPath": {"regex": "^65001 65002$"}}, R(path=[65001, 65002, 1]), False),
    ("regex empty path", {"asPath": {"regex": "^$"}}, R(path=[]), True),
    ("regex prepends", {"asPath": {"regex": "^(65001_)+65010$"}}, R(path=[65001, 65001, 65010]), True),
    ("contains and regex both", {"asPath": {"contains": [65010], "regex": "^65001_"}},
     R(path=[65001, 65010]), True),
    ("contains and regex one fails", {"asPath": {"contains": [65010], "regex": "^65002_"}},
     R(path=[65001, 65010]), False),
    # origin AS
    ("origin AS", {"originAs": [65010, 65011]}, R(path=[65001, 65011]), True),
    ("origin AS is last only", {"originAs": [65001]}, R(path=[65001, 65011]), False),
    ("origin AS empty path is the peer's", {"originAs": [65000]}, R(path=[], peer=IBGP), True),
    # peer and session
    ("peer address", {"peerAddress": ["192.0.2.1"]}, R(), True),
    ("peer address miss", {"peerAddress": ["192.0.2.2"]}, R(), False),
    ("peer address prefix", {"peerAddress": ["192.0.2.0/24"]}, R(), True),
    ("peer address v6", {"peerAddress": ["2001:DB8::1"]}, R(peer=PeerInfo("2001:db8::1", 65001, True)), True),
    ("peer AS", {"peerAs": [65001, 65002]}, R(), True),
    ("peer AS miss", {"peerAs": [65002]}, R(), False),
    ("session ebgp", {"sessionType": "ebgp"}, R(), True),
    ("session ebgp on ibgp", {"sessionType": "ebgp"}, R(peer=IBGP), False),
    ("session ibgp", {"sessionType": "ibgp"}, R(peer=IBGP), True),
    # next hop
    ("next hop in", {"nextHopIn": ["192.0.2.0/24"]}, R(nexthop="192.0.2.7"), True),
    ("next hop out", {"nextHopIn": ["192.0.2.0/24"]}, R(nexthop="198.51.100.1"), False),
    ("next hop v6", {"nextHopIn": ["2001:db8::/64"]}, R(prefix="2001:db8:5::/48", nexthop="2001:db8::1"), True),
    ("next hop family", {"nextHopIn": ["0.0.0.0/0"]}, R(nexthop="2001:db8::1"), False),
    ("next hop none", {"nextHopIn": ["0.0.0.0/0"]}, R(nexthop=None), False),
    ("next hop not an address", {"nextHopIn": ["0.0.0.0/0"]}, R(nexthop="self"), False),
    # no condition, and several (all must match)
    ("no conditions", {}, R(), True),
    ("all of: both", {"prefixSet": [{"prefix": "203.0.113.0/24"}], "communities": {"values": ["65000:1"]}},
     R(comms=["65000:1"]), True),
    ("all of: one fails", {"prefixSet": [{"prefix": "203.0.113.0/24"}], "communities": {"values": ["65000:1"]}},
     R(comms=["65000:2"]), False),
]


@pytest.mark.parametrize("conditions,route,expected",
                         [c[1:] for c in CONDITION_CASES], ids=[c[0] for c in CONDITION_CASES])
def test_condition(conditions, route, expected):
    pol = policy({"name": "s", "conditions": conditions, "actions": {"result": "accept"}})
    a = attrs(path=route.get("path", (65001,)), comms=route.get("comms", ()), large=route.get("large", ()))
    v = run(pol, route.get("prefix", "203.0.113.0/24"), route.get("nexthop", "192.0.2.1"), a,
            route.get("peer", EBGP))
    assert v.accepted is expected
    assert (v.statement, v.reason) == (("s", Reason.POLICY_ACCEPT) if expected else ("default", Reason.DEFAULT_REJECT))


def test_regex_result_is_cached_per_path_but_correct_for_each():
    pol = policy({"conditions": {"asPath": {"regex": "_174_"}}, "actions": {"result": "reject"}}, default="accept")
    shared = attrs(path=(65001, 174))
    for _ in range(3):
        assert not run(pol, a=shared).accepted
        assert run(pol, a=attrs(path=(65001, 1740))).accepted


@pytest.mark.parametrize("text,expected", [
    ("_65001_", "(?:^| |$)65001(?:^| |$)"),
    ("^65001$", "^65001$"),
    (r"\_", r"\_"),
    ("[_0-9]+", "[_0-9]+"),
    ("[]_]_", "[]_](?:^| |$)"),
    ("[^_]_", "[^_](?:^| |$)"),
])
def test_as_path_regex_translation(text, expected):
    assert translate_as_path_regex(text) == expected


# ---------------------------------------------------------------------------------------------
# Actions and their accumulation
# ---------------------------------------------------------------------------------------------

ACTION_CASES = [
    ("setLocalPref", {"setLocalPref": 250}, Modifications(local_pref=250)),
    ("setAdminDistance", {"setAdminDistance": 15}, Modifications(distance=15)),
    ("addCommunity", {"addCommunity": ["65000:1", "no-export", "65000:1"]},
     Modifications(add_communities=("65000:1", "65535:65281"))),
    ("addLargeCommunity", {"addLargeCommunity": ["65000:0:1"]}, Modifications(add_large_communities=("65000:0:1",))),
    ("setKernelMetric", {"setKernelMetric": 500}, Modifications(metric=500)),
    ("all", {"setLocalPref": 1, "setAdminDistance": 2, "addCommunity": ["1:1"], "addLargeCommunity": ["1:1:1"],
             "setKernelMetric": 3},
     Modifications(1, 2, ("1:1",), ("1:1:1",), 3)),
]


@pytest.mark.parametrize("actions,mods", [c[1:] for c in ACTION_CASES], ids=[c[0] for c in ACTION_CASES])
def test_action_on_accept(actions, mods):
    v = run(policy({"actions": {"result": "accept", **actions}}))
    assert v.accepted and v.reason is Reason.POLICY_ACCEPT
    assert v.mods == mods


@pytest.mark.parametrize("actions,mods", [c[1:] for c in ACTION_CASES], ids=[c[0] for c in ACTION_CASES])
def test_action_continue_then_default_accept(actions, mods):
    v = run(policy({"actions": actions}, default="accept"))
    assert (v.accepted, v.statement, v.reason, v.mods) == (True, "default", Reason.DEFAULT_ACCEPT, mods)


@pytest.mark.parametrize("actions", [c[1] for c in ACTION_CASES], ids=[c[0] for c in ACTION_CASES])
def test_action_continue_then_default_reject_drops_modifications(actions):
    v = run(policy({"actions": actions}))
    assert (v.accepted, v.statement, v.reason, v.mods) == (False, "default", Reason.DEFAULT_REJECT, NO_MODS)


def test_modifications_apply_to_attributes():
    a = attrs(comms=("65000:9", "65000:1"), large=("1:1:1",), local_pref=100)
    mods = Modifications(local_pref=300, distance=5, add_communities=("65000:1", "65000:2"),
                         add_large_communities=("2:2:2",), metric=7)
    out = mods.apply(a)
    assert out.local_pref == 300
    assert out.communities == ("65000:9", "65000:1", "65000:2")
    assert out.large_communities == ("1:1:1", "2:2:2")
    assert (out.as_path, out.peer_address) == (a.as_path, a.peer_address)
    assert NO_MODS.apply(a) is a
    assert Modifications(distance=3, metric=1).apply(a) is a  # not path attributes
    assert Modifications(add_communities=("65000:9",)).apply(a) is a  # already there


def test_modifications_accumulate_later_set_wins_adds_merge():
    pol = policy(
        {"name": "a", "actions": {"setLocalPref": 200, "addCommunity": ["65000:1"], "setKernelMetric": 10}},
        {"name": "b", "conditions": {"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger"}]},
         "actions": {"setLocalPref": 300, "addCommunity": ["65000:2", "65000:1"]}},
        {"name": "c", "actions": {"result": "accept", "addLargeCommunity": ["1:2:3"]}},
    )
    v = run(pol, "10.1.0.0/16")
    assert (v.accepted, v.statement, v.policy) == (True, "c", "p")
    assert v.mods == Modifications(local_pref=300, add_communities=("65000:1", "65000:2"),
                                   add_large_communities=("1:2:3",), metric=10)
    v = run(pol, "192.0.2.0/24")  # "b" does not match
    assert v.mods == Modifications(local_pref=200, add_communities=("65000:1",), add_large_communities=("1:2:3",),
                                   metric=10)


def test_accept_after_continue_carries_earlier_modifications():
    pol = policy({"actions": {"setLocalPref": 200}}, {"name": "acc", "actions": {"result": "accept"}})
    v = run(pol)
    assert (v.statement, v.mods) == ("acc", Modifications(local_pref=200))


def test_reject_after_modifications_rejects_without_them():
    pol = policy({"actions": {"setLocalPref": 200}}, {"name": "no", "actions": {"result": "reject"}})
    v = run(pol)
    assert (v.accepted, v.statement, v.reason, v.mods) == (False, "no", Reason.POLICY_REJECT, NO_MODS)


# ---------------------------------------------------------------------------------------------
# Ordering, terminal results, defaults, names
# ---------------------------------------------------------------------------------------------

ORDER_CASES = [
    ("first terminal wins: accept", [("a", "accept"), ("r", "reject")], None, (True, "a")),
    ("first terminal wins: reject", [("r", "reject"), ("a", "accept")], None, (False, "r")),
    ("non-matching skipped", [("x", "reject", "198.51.100.0/24"), ("a", "accept")], None, (True, "a")),
    ("no statement: default reject", [], None, (False, "default")),
    ("no statement: default accept", [], "accept", (True, "default")),
    ("only non-matching: default", [("x", "accept", "198.51.100.0/24")], None, (False, "default")),
    ("only non-matching: default accept", [("x", "reject", "198.51.100.0/24")], "accept", (True, "default")),
    ("continue then reject", [("c", "continue"), ("r", "reject")], "accept", (False, "r")),
    ("unnamed statement label", [(None, "continue"), (None, "reject")], None, (False, "statements[1]")),
]


@pytest.mark.parametrize("steps,default,expected", [c[1:] for c in ORDER_CASES], ids=[c[0] for c in ORDER_CASES])
def test_ordering_and_terminal_semantics(steps, default, expected):
    statements = []
    for step in steps:
        name, result, *prefix = step
        stmt: dict = {"actions": {"result": result} if result != "continue" else {"setLocalPref": 1}}
        if name:
            stmt["name"] = name
        if prefix:
            stmt["conditions"] = {"prefixSet": [{"prefix": prefix[0]}]}
        statements.append(stmt)
    v = run(policy(*statements, default=default))
    assert (v.accepted, v.statement) == expected


def test_default_action_is_reject():
    assert model().spec.default_action == "reject"
    v = run(policy())
    assert (v.accepted, v.reason, v.policy) == (False, Reason.DEFAULT_REJECT, "p")


def test_verdicts_are_shared_objects():
    pol = policy({"name": "a", "conditions": {"prefixSet": [{"prefix": "10.0.0.0/8", "le": 32}]},
                  "actions": {"result": "accept", "setLocalPref": 5}},
                 {"actions": {"setLocalPref": 7}}, default="accept")
    bound = pol.bind(EBGP)
    first = [bound.evaluate(P(p), "192.0.2.1", attrs()) for p in ("10.1.0.0/16", "192.0.2.0/24")]
    again = [bound.evaluate(P(p), "192.0.2.1", attrs()) for p in ("10.2.0.0/16", "198.51.100.0/24")]
    assert all(a is b for a, b in zip(first, again))
    # another peer bound to the same policy gets the same verdict objects
    other = pol.bind(PeerInfo("192.0.2.9", 65009, True)).evaluate(P("10.3.0.0/16"), None, attrs())
    assert other is first[0]


def test_peer_conditions_are_resolved_at_bind():
    pol = policy({"name": "tor1", "conditions": {"peerAs": [65001]}, "actions": {"result": "accept"}},
                 {"name": "ibgp", "conditions": {"sessionType": "ibgp"}, "actions": {"result": "accept"}})
    assert run(pol, peer=EBGP).statement == "tor1"
    assert run(pol, peer=IBGP).statement == "ibgp"
    assert run(pol, peer=PeerInfo("192.0.2.9", 65009, True)).statement == "default"
    assert "1 statements" in repr(pol.bind(IBGP))


def test_accept_all_builtin_must_be_named():
    policies = compile_policies([model(name="from-tor")])
    assert set(policies) == {"from-tor", ACCEPT_ALL} and BUILTIN_POLICIES == {ACCEPT_ALL}
    v = evaluate(policies, ACCEPT_ALL, EBGP, P("203.0.113.0/24"), "192.0.2.1", attrs())
    assert (v.accepted, v.statement, v.reason, v.policy) == (True, "default", Reason.DEFAULT_ACCEPT, ACCEPT_ALL)
    # no object can shadow it: acceptAll is not a DNS-1123 name
    assert ("metadata.name", "dns_subdomain") in errors(doc(name=ACCEPT_ALL))


def test_verdict_text():
    v = run(policy({"name": "lp", "actions": {"result": "accept", "setLocalPref": 200}}))
    assert str(v) == ("accepted by p lp (policy_accept: accepted by a policy statement); local-pref 200")
    assert repr(v) == "Verdict(True, 'lp', POLICY_ACCEPT, mods=Modifications(local_pref=200), policy='p')"


# ---------------------------------------------------------------------------------------------
# Schema: canonical values and field-named errors
# ---------------------------------------------------------------------------------------------


def test_kinds_and_canonical_values():
    assert KINDS == {"RoutePolicy": RoutePolicy}
    m = model({"name": "s", "conditions": {
        "communities": {"values": ["no-export", "00065000:007"]},
        "largeCommunities": {"values": ["065000:0:01"]},
        "peerAddress": ["2001:DB8:0::1", "10.0.0.0/8"],
        "nextHopIn": ["2001:DB8::/32"],
    }, "actions": {"result": "accept", "addCommunity": ["graceful-shutdown"]}})
    s = m.spec.statements[0]
    assert s.conditions.communities.values == ("65535:65281", "65000:7")
    assert s.conditions.large_communities.values == ("65000:0:1",)
    assert s.conditions.peer_address == ("2001:db8::1", "10.0.0.0/8")
    assert s.conditions.next_hop_in == ("2001:db8::/32",)
    assert s.actions.add_community == ("65535:0",)
    assert canonical_community("65535:65281") == "65535:65281"
    assert canonical_large_community("4294967295:0:1") == "4294967295:0:1"


def _one(conditions=None, actions=None, **extra) -> dict:
    stmt = {"conditions": conditions or {}, "actions": {"result": "accept"} if actions is None else actions,
            **extra}
    return doc(stmt)


S0 = "spec.statements.0"
C0 = f"{S0}.conditions"

SCHEMA_ERRORS = [
    ("orLonger with le", _one({"prefixSet": [{"prefix": "10.0.0.0/8", "match": "orLonger", "le": 24}]}),
     (f"{C0}.prefixSet.0.match", "or_longer_with_range")),
    ("ge below length", _one({"prefixSet": [{"prefix": "10.0.0.0/16", "ge": 8}]}),
     (f"{C0}.prefixSet.0.ge", "prefix_length_range")),
    ("le above 32", _one({"prefixSet": [{"prefix": "10.0.0.0/8", "le": 64}]}),
     (f"{C0}.prefixSet.0.le", "prefix_length_range")),
    ("le below ge", _one({"prefixSet": [{"prefix": "10.0.0.0/8", "ge": 24, "le": 16}]}),
     (f"{C0}.prefixSet.0.le", "prefix_length_order")),
    ("host bits", _one({"prefixSet": [{"prefix": "10.0.0.1/8"}]}),
     (f"{C0}.prefixSet.0.prefix", "ip_prefix_host_bits")),
    ("empty prefix set", _one({"prefixSet": []}), (f"{C0}.prefixSet", "too_short")),
    ("bad community", _one({"communities": {"values": ["65536:1"]}}), (f"{C0}.communities.values.0", "community")),
    ("unknown well-known", _one({"communities": {"values": ["no-exprot"]}}),
     (f"{C0}.communities.values.0", "community")),
    ("bad large community", _one({"largeCommunities": {"values": ["1:2"]}}),
     (f"{C0}.largeCommunities.values.0", "large_community")),
    ("bad match mode", _one({"communities": {"match": "some", "values": ["1:1"]}}),
     (f"{C0}.communities.match", "literal_error")),
    ("bad regex", _one({"asPath": {"regex": "(65001"}}), (f"{C0}.asPath.regex", "as_path_regex")),
    ("empty asPath", _one({"asPath": {}}), (f"{C0}.asPath", "as_path_empty")),
    ("ASN 0", _one({"originAs": [0]}), (f"{C0}.originAs.0", "greater_than_equal")),
    ("bad peer address", _one({"peerAddress": ["192.0.2.300"]}), (f"{C0}.peerAddress.0", "ip_address")),
    ("bad session type", _one({"sessionType": "confed"}), (f"{C0}.sessionType", "literal_error")),
    ("no action", _one(actions={}), (f"{S0}.actions", "no_action")),
    ("reject modifies", _one(actions={"result": "reject", "setLocalPref": 5}),
     (f"{S0}.actions.setLocalPref", "modification_with_reject")),
    ("distance > 255", _one(actions={"setAdminDistance": 256}), (f"{S0}.actions.setAdminDistance", "less_than_equal")),
    ("unknown field", _one({"prefixList": []}), (f"{C0}.prefixList", "extra_forbidden")),
    ("snake case refused", _one({"prefix_set": [{"prefix": "10.0.0.0/8"}]}), (f"{C0}.prefix_set", "extra_forbidden")),
    ("bad default action", {**doc(), "spec": {"defaultAction": "permit"}}, ("spec.defaultAction", "literal_error")),
    ("bad statement name", _one(name="Bad_Name"), (f"{S0}.name", "dns_label")),
]


@pytest.mark.parametrize("document,expected", [c[1:] for c in SCHEMA_ERRORS], ids=[c[0] for c in SCHEMA_ERRORS])
def test_schema_error_at_field(document, expected):
    assert expected in errors(document)


def test_duplicate_statement_names():
    d = doc({"name": "a", "actions": {"result": "accept"}}, {"name": "a", "actions": {"result": "reject"}})
    assert ("spec.statements.1.name", "duplicate_statement") in errors(d)


def test_models_are_frozen():
    m = model()
    with pytest.raises(ValidationError):
        m.spec.default_action = "accept"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Prefix structures against brute force
# ---------------------------------------------------------------------------------------------


def _contains(outer: Prefix, inner: Prefix) -> bool:
    return outer.family == inner.family and outer.length <= inner.length and \
        inner.network.subnet_of(outer.network)  # type: ignore[arg-type]


prefixes_v4 = st.builds(
    lambda addr, plen: Prefix.of(4, addr >> (32 - plen) << (32 - plen) if plen else 0, plen),
    st.integers(0, 2**32 - 1).map(lambda a: a & 0xFF0000FF | 0x0A000000), st.integers(0, 32),
)
prefixes_v6 = st.builds(
    lambda addr, plen: Prefix.of(6, addr >> (128 - plen) << (128 - plen) if plen else 0, plen),
    st.integers(0, 2**128 - 1).map(lambda a: a & ((0xFF << 120) | 0xFF) | (0x20 << 120)), st.integers(0, 128),
)
prefixes = st.one_of(prefixes_v4, prefixes_v6)


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(prefixes, max_size=12), probe=prefixes)
def test_prefix_index_matches_brute_force(entries, probe):
    index = PrefixIndex(entries)
    covering = [e for e in set(entries) if _contains(e, probe)]
    assert index.covering(probe) == (max(covering, key=lambda e: e.length) if covering else None)
    strict = [e for e in covering if e.length < probe.length]
    assert index.covering(probe, strict=True) == (max(strict, key=lambda e: e.length) if strict else None)
    inside = sorted((e for e in set(entries) if _contains(probe, e)), key=address_order)
    assert list(index.inside(probe)) == inside
    assert index.first_inside(probe) == (inside[0] if inside else None)
    assert list(index.inside(probe, strict=True)) == [e for e in inside if e != probe]
    assert (probe in index) == (probe in set(entries))


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(st.tuples(prefixes, st.integers(0, 128), st.integers(0, 128)), max_size=8), probe=prefixes)
def test_prefix_set_matches_brute_force(entries, probe):
    ranges = []
    for net, a, b in entries:
        low = min(max(a, net.length), net.bits)
        high = min(max(b, low), net.bits)
        ranges.append((net, low, high))
    pset = PrefixSet(ranges)
    expected = any(_contains(net, probe) and low <= probe.length <= high for net, low, high in ranges)
    assert pset.match(probe) is expected


def test_loader_reports_policy_problems_at_yaml_fields(monkeypatch):
    """Once KINDS are merged into the loader, a RoutePolicy problem names its YAML path and line."""
    import agent.config.loader as configload
    from agent.config.kinds import KINDS as CONFIG_KINDS

    monkeypatch.setattr(configload, "KINDS", {**CONFIG_KINDS, **KINDS})
    text = """\
apiVersion: routeagent.io/v1alpha1
kind: RoutePolicy
metadata: {name: from-tor}
spec:
  statements:
    - name: customers
      conditions:
        prefixSet:
          - prefix: 10.0.0.0/8
            le: 4
        asPath: {regex: "(65001"}
      actions: {result: reject, setLocalPref: 5}
"""
    with pytest.raises(configload.ConfigError) as info:
        configload.load_text(text, "p.yaml")
    got = {(p.field, p.line) for p in info.value.problems}
    assert ("spec.statements[0].conditions.prefixSet[0].le", 10) in got
    assert ("spec.statements[0].conditions.asPath.regex", 11) in got
    assert ("spec.statements[0].actions.setLocalPref", 12) in got
