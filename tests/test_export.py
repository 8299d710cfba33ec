"""Export: selection, policy attributes, aggregation, the merge rule, and the reconciler's diffs."""

import pytest

from agent.export.desired import AdvertAttrs, ExportPeer, desired_for_peer, owned_prefixes
from agent.config.advertisement import Advertisement
from agent.export.reconciler import ExportReconciler
from agent.policy.engine import compile_policies
from agent.config.policy import RoutePolicy
from agent.core.bgp import AnnounceAttributes, AnnounceEor, AnnounceRoute, WithdrawRoute
from agent.speaker.encoder import encode
from tests.factories import P


def adv(name, prefixes, labels=None, **spec):
    return Advertisement.model_validate({"metadata": {"name": name, "labels": labels or {}},
                                         "spec": {"prefixes": prefixes, **spec}})


def policy(name, statements, default="reject"):
    return RoutePolicy.model_validate({"metadata": {"name": name},
                                       "spec": {"defaultAction": default, "statements": statements}})


EBGP = ExportPeer("10.0.0.1", 65001, 65000, True, frozenset({4, 6}), {"role": "tor"}, "out")
IBGP = ExportPeer("10.0.0.2", 65000, 65000, False, frozenset({4}), {"role": "rr"}, None)
POLICIES = compile_policies([policy("out", [
    {"name": "pods", "conditions": {"advertisementLabels": {"type": "pod"}},
     "actions": {"result": "accept", "addCommunity": ["65000:100"], "setMed": 5}},
    {"name": "vips", "conditions": {"prefixSet": [{"prefix": "192.0.2.0/24", "match": "orLonger"}]},
     "actions": {"result": "accept", "prependAsPath": 2}},
])])


def run(peer, adverts, policies=POLICIES):
    out, rejected = desired_for_peer(peer, adverts, policies)
    return {str(p): a for p, a in out.items()}, {str(p): v.reason.value for p, v in rejected.items()}


@pytest.mark.parametrize("peer,adverts,expect,rejected", [
    # the policy selects by label and adds attributes
    (EBGP, [adv("pods", ["10.244.1.0/24", "fd00:244:1::/64"], {"type": "pod"})],
     {"10.244.1.0/24": AdvertAttrs(communities=("65000:100",), med=5),
      "fd00:244:1::/64": AdvertAttrs(communities=("65000:100",), med=5)}, {}),
    # default reject for what no statement accepts
    (EBGP, [adv("misc", ["198.51.100.0/24"])], {}, {"198.51.100.0/24": "default_reject"}),
    # prefix set statement: prepend
    (EBGP, [adv("vip", ["192.0.2.10/32"])], {"192.0.2.10/32": AdvertAttrs(prepend=2)}, {}),
    # iBGP without a policy: everything selected, local-pref kept (iBGP only), v6 not a family
    (IBGP, [adv("pods", ["10.244.1.0/24", "fd00:244:1::/64"], localPref=300)],
     {"10.244.1.0/24": AdvertAttrs(local_pref=300)}, {}),
    # eBGP: local-pref never sent
    (EBGP, [adv("pods", ["10.244.1.0/24"], {"type": "pod"}, localPref=300)],
     {"10.244.1.0/24": AdvertAttrs(communities=("65000:100",), med=5)}, {}),
    # peer selector
    (IBGP, [adv("tor-only", ["10.244.1.0/24"], peerSelector={"matchLabels": {"role": "tor"}})], {}, {}),
    # aggregation: only the covering prefix
    (IBGP, [adv("vips", ["10.96.0.10/32", "10.96.0.11/32", "10.96.1.0/32"], aggregateLength={"ipv4": 16})],
     {"10.96.0.0/16": AdvertAttrs()}, {}),
])
def test_selection_policy_and_aggregation(peer, adverts, expect, rejected):
    got, rej = run(peer, adverts)
    assert {p: a.attrs for p, a in got.items()} == expect
    assert rej == rejected


def test_ebgp_without_export_policy_exports_nothing():
    peer = ExportPeer("10.0.0.1", 65001, 65000, True, frozenset({4}), {}, None)
    got, rej = run(peer, [adv("pods", ["10.244.1.0/24"])])
    assert got == {} and rej == {"10.244.1.0/24": "no_policy"}


def test_merge_rule_is_deterministic_union_highest_local_pref_lowest_med():
    a = adv("a", ["10.244.1.0/24"], communities=["65000:1"], localPref=100, med=50, asPathPrepend=1)
    c = adv("c", ["10.244.1.0/24"], asPathPrepend=3)
    ebgp = ExportPeer("10.0.0.1", 65001, 65000, True, frozenset({4}), {}, "acceptAll")
    for order in ([a, c], [c, a]):  # prepend (eBGP only): the longest
        got, _ = desired_for_peer(ebgp, order, compile_policies([]))
        assert got[P("10.244.1.0/24")].attrs.prepend == 3
    b = adv("b", ["10.244.1.0/24"], communities=["65000:2", "65000:1"], localPref=200, med=10,
            nextHop="10.0.0.9", largeCommunities=["65000:1:1"])
    for order in ([a, b], [b, a]):
        got, _ = run(IBGP, order)
        advert = got["10.244.1.0/24"]
        assert advert.attrs == AdvertAttrs(next_hop="self", local_pref=200, med=10,
                                           communities=("65000:1", "65000:2"),
                                           large_communities=("65000:1:1",), prepend=0)
        assert advert.sources == ("a", "b")


def test_owned_prefixes_include_members_and_aggregates():
    owned = {str(p) for p in owned_prefixes([adv("v", ["10.96.0.10/32"], aggregateLength={"ipv4": 24})])}
    assert owned == {"10.96.0.0/24", "10.96.0.10/32"}


def test_aggregate_longer_than_a_member_is_rejected():
    with pytest.raises(ValueError, match="longer than member"):
        adv("v", ["10.96.0.0/16"], aggregateLength={"ipv4": 24})


# ---- reconciler ----
def adverts_for(n, med=None):
    got, _ = desired_for_peer(IBGP, [adv("many", [f"10.{i >> 8}.{i & 255}.0/24" for i in range(n)], med=med)], {})
    return got


def test_session_up_announces_everything_then_eor():
    r = ExportReconciler()
    r.configure("10.0.0.2", 65000, False)
    assert r.set_desired("10.0.0.2", adverts_for(3)) == []  # session not up: nothing sent
    cmds = r.session_up("10.0.0.2", [4])
    assert [type(c) for c in cmds] == [AnnounceAttributes, AnnounceEor]  # one shared attribute set
    assert len(cmds[0].prefixes) == 3 and encode(cmds[0]).startswith(
        "neighbor 10.0.0.2 announce attributes next-hop self nlri 10.0.0.0/24 10.0.1.0/24")


def test_one_change_among_10000_adverts_sends_exactly_one_message():
    r = ExportReconciler()
    r.configure("10.0.0.2", 65000, False)
    base = adverts_for(10000)
    r.set_desired("10.0.0.2", base)
    up = r.session_up("10.0.0.2", [4])
    assert sum(len(c.prefixes) for c in up[:-1]) == 10000 and len(up) == 21  # 20 groups of 500, EoR
    changed = dict(base)
    p = next(iter(changed))
    changed[p] = adverts_for(1, med=7)[p]
    assert r.set_desired("10.0.0.2", changed) == [AnnounceRoute(str(p), peer="10.0.0.2", med=7)]
    del changed[p]
    assert r.set_desired("10.0.0.2", changed) == [WithdrawRoute(str(p), peer="10.0.0.2")]
    assert r.set_desired("10.0.0.2", changed) == []


def test_prepend_on_ebgp_includes_our_own_as():
    r = ExportReconciler()
    r.configure("10.0.0.1", 65000, True)
    r.session_up("10.0.0.1", [])
    got, _ = desired_for_peer(EBGP, [adv("vip", ["192.0.2.10/32"])], POLICIES)
    (cmd,) = r.set_desired("10.0.0.1", got)
    assert cmd.as_path == (65000, 65000, 65000)


def test_speaker_restart_reannounces_on_the_next_session_up():
    r = ExportReconciler()
    r.configure("10.0.0.2", 65000, False)
    r.set_desired("10.0.0.2", adverts_for(2))
    r.session_up("10.0.0.2", [4])
    r.speaker_restarted()
    assert r.set_desired("10.0.0.2", adverts_for(2)) == []  # down until the new ExaBGP is up
    assert len(r.session_up("10.0.0.2", [4])) == 2


def test_next_hop_self_of_the_other_family_is_refused_with_a_reason():
    peer = ExportPeer("10.0.0.2", 65000, 65000, False, frozenset({4, 6}), {}, None, session_family=4)
    got, rej = run(peer, [adv("pods", ["10.244.1.0/24", "fd00:244:1::/64"])])
    assert set(got) == {"10.244.1.0/24"} and rej == {"fd00:244:1::/64": "no_next_hop"}
    got, rej = run(peer, [adv("pods6", ["fd00:244:1::/64"], nextHop="fd00::254")])
    assert set(got) == {"fd00:244:1::/64"} and rej == {}


# ---- what ExaBGP accepted (acks) and what the speaker dropped ----
def up_reconciler(n=3):
    r = ExportReconciler()
    r.configure("10.0.0.2", 65000, False)
    r.set_desired("10.0.0.2", adverts_for(n))
    return r, r.session_up("10.0.0.2", [4])


def test_announced_only_once_exabgp_said_done():
    r, (cmd, eor) = up_reconciler()
    p = P("10.0.0.0/24")
    assert r.announced("10.0.0.2", p) is None  # in flight
    r.acked(eor, True)  # not an advert command: ignored
    r.acked(cmd, True)
    assert r.announced("10.0.0.2", p) == AdvertAttrs() and r.refused["10.0.0.2"] == 0


def test_an_error_ack_marks_the_prefixes_not_announced_and_the_next_reconcile_sends_them_again():
    r, (cmd, _eor) = up_reconciler()
    r.acked(cmd, False)
    assert all(r.announced("10.0.0.2", p) is None for p in adverts_for(3))
    assert r.refused["10.0.0.2"] == 3
    again = r.set_desired("10.0.0.2", adverts_for(3))  # nothing changed, but ExaBGP refused them
    assert again == [cmd]
    r.acked(again[0], True)
    assert all(r.announced("10.0.0.2", p) == AdvertAttrs() for p in adverts_for(3))


def test_an_error_ack_for_a_replaced_announcement_changes_nothing():
    r, (cmd, _eor) = up_reconciler(1)
    (newer,) = r.set_desired("10.0.0.2", adverts_for(1, med=9))
    r.acked(cmd, False)  # the old attributes were refused; the new ones are on their way
    r.acked(newer, True)
    assert r.announced("10.0.0.2", P("10.0.0.0/24")).med == 9
    assert r.set_desired("10.0.0.2", adverts_for(1, med=9)) == []


def test_a_refused_withdraw_is_sent_again():
    r, (cmd, _eor) = up_reconciler(1)
    r.acked(cmd, True)
    (withdraw,) = r.set_desired("10.0.0.2", {})
    r.acked(withdraw, False)
    assert r.announced("10.0.0.2", P("10.0.0.0/24")) is None
    assert r.set_desired("10.0.0.2", {}) == [withdraw]


def test_dropped_commands_are_planned_again_with_the_eor_last():
    r, (cmd, eor) = up_reconciler(2)
    r.dropped_commands([cmd, eor])
    assert r.dropped["10.0.0.2"] == 2 and r.set_desired("10.0.0.2", adverts_for(2)) == [cmd]
    assert r.replan() == [eor] and r.replan() == []  # the routes went with set_desired
    r.dropped_commands([cmd])
    assert r.replan() == [cmd]
    assert r.announced("10.0.0.2", P("10.0.0.0/24")) is None  # in flight again
    r.acked(cmd, True)
    assert r.announced("10.0.0.2", P("10.0.0.0/24")) == AdvertAttrs()
    # a dropped withdraw: withdrawn again; a peer that went down meanwhile: nothing
    (withdraw,) = r.set_desired("10.0.0.2", {})
    r.dropped_commands([withdraw])
    assert r.replan() == [withdraw]
    r.dropped_commands([withdraw])
    r.session_down("10.0.0.2")
    assert r.replan() == []
