"""The guard's cluster share (other nodes' pod CIDRs) and the import stage's re-check when it grows."""

from __future__ import annotations

import importlib
import ipaddress
import random

import pytest

from agent.core.model import BgpAttrs, Prefix, Update
from agent.policy.engine import ACCEPT_ALL, compile_policies
from agent.policy.verdict import Reason

imp = importlib.import_module("agent.import")
Guard, ImportStage, ImportPeer = imp.Guard, imp.ImportStage, imp.ImportPeer
related = importlib.import_module("agent.import.guard").related
Limit, Action, D = imp.MaxPrefixLimit, imp.MaxPrefixAction, imp.MaxPrefixDecision

P = Prefix.parse
OWN = ["10.244.1.0/24", "fd00:10:244:1::/64"]
OTHERS = ["10.244.2.0/24", "10.244.3.0/24", "fd00:10:244:2::/64"]
NODE = ["192.168.1.10/24"]
EBGP, IBGP = "192.0.2.1", "10.0.0.2"


@pytest.fixture
def guard():
    g = Guard(OWN, NODE)
    g.set_cluster(OTHERS)
    return g


CASES = [
    ("other node's pod CIDR itself", "10.244.2.0/24", {}, None, None),
    ("other node's v6 pod CIDR itself", "fd00:10:244:2::/64", {}, None, None),
    ("more specific of another node", "10.244.2.0/25", {}, Reason.INSIDE_CLUSTER_PREFIX, "10.244.2.0/24"),
    ("pod host route of another node", "10.244.3.17/32", {}, Reason.INSIDE_CLUSTER_PREFIX, "10.244.3.0/24"),
    ("v6 more specific of another node", "fd00:10:244:2:1::/80", {}, Reason.INSIDE_CLUSTER_PREFIX,
     "fd00:10:244:2::/64"),
    ("more specific with allow_covering", "10.244.2.128/25", {"allow_covering": True},
     Reason.INSIDE_CLUSTER_PREFIX, "10.244.2.0/24"),
    ("covering two other nodes only", "10.244.2.0/23", {}, None, None),
    ("covering other nodes and own", "10.244.0.0/16", {}, Reason.COVERS_OWN, "10.244.1.0/24"),
    ("covering own allowed", "10.244.0.0/16", {"allow_covering": True}, None, None),
    ("v6 covering other and own", "fd00:10:244::/48", {}, Reason.COVERS_OWN, "fd00:10:244:1::/64"),
    ("own pod CIDR still own", "10.244.1.0/24", {}, Reason.OWN_PREFIX, "10.244.1.0/24"),
    ("own more specific still own", "10.244.1.0/25", {}, Reason.MORE_SPECIFIC_OF_OWN, "10.244.1.0/24"),
    ("unrelated neighbour", "10.244.4.0/24", {}, None, None),
    ("unrelated more specific", "10.244.4.0/25", {}, None, None),
]


@pytest.mark.parametrize("prefix,kwargs,reason,statement", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cluster_prefixes(guard, prefix, kwargs, reason, statement):
    v = guard.check(P(prefix), "192.168.1.1", **kwargs)
    if reason is None:
        assert v is None
    else:
        assert v is not None and not v.accepted
        assert (v.reason, v.statement, v.policy) == (reason, statement, "guard")


def test_cluster_set_is_replaced(guard):
    assert guard.check(P("10.244.2.0/25")).reason is Reason.INSIDE_CLUSTER_PREFIX
    guard.set_cluster(["10.244.5.0/24"])
    assert guard.check(P("10.244.2.0/25")) is None  # that node left: its verdict is not cached
    assert guard.check(P("10.244.5.128/25")).reason is Reason.INSIDE_CLUSTER_PREFIX
    guard.set_cluster([])
    assert guard.check(P("10.244.5.128/25")) is None
    # cluster prefixes are not protected prefixes
    assert guard.protected == frozenset(map(P, OWN))


def test_cluster_prefix_far_from_own_space():
    """The fast path skips buckets with nothing of ours: cluster prefixes count as ours there."""
    g = Guard([], [])
    assert g.check(P("172.16.5.0/25")) is None
    g.set_cluster([P("172.16.5.0/24"), "2001:db8:5::/48"])
    assert g.check(P("172.16.5.0/25")).reason is Reason.INSIDE_CLUSTER_PREFIX
    assert g.check(P("2001:db8:5:1::/64")).reason is Reason.INSIDE_CLUSTER_PREFIX
    assert g.check(P("172.16.5.0/24")) is None
    assert g.check(P("172.17.0.0/24")) is None


def test_own_checks_come_before_cluster():
    """An own prefix inside another node's CIDR (misconfiguration): the own-prefix reason wins."""
    g = Guard(["10.244.2.128/25"], [])
    g.set_cluster(["10.244.2.0/24"])
    assert g.check(P("10.244.2.128/25")).reason is Reason.OWN_PREFIX
    assert g.check(P("10.244.2.192/26")).reason is Reason.MORE_SPECIFIC_OF_OWN
    assert g.check(P("10.244.2.0/26")).reason is Reason.INSIDE_CLUSTER_PREFIX
    assert g.check(P("10.244.2.0/24")).reason is Reason.COVERS_OWN  # the CIDR covers our prefix


# ---------------------------------------------------------------------------------------------
# ImportStage.recheck_guard
# ---------------------------------------------------------------------------------------------

POLICIES = compile_policies([])


def attrs(peer=EBGP, asn=65001, ebgp=True) -> BgpAttrs:
    return BgpAttrs(peer, asn, peer, ebgp, as_path=(asn,) if ebgp else ())


def make_stage(*peers, guard=None) -> ImportStage:
    s = ImportStage(guard or Guard(OWN, NODE), POLICIES)
    for p in peers:
        s.set_peer(p)
    return s


ROUTES = ["10.244.2.0/24", "10.244.2.64/26", "198.51.100.0/24", "203.0.113.7/32", "fd00:10:244:2::/64",
          "fd00:10:244:2:1::/80"]


def feed(s: ImportStage, peer: str, prefixes, asn=65001, ebgp=True):
    a = attrs(peer, asn, ebgp)
    return [s.receive(peer, P(p), peer, a) for p in prefixes]


def test_recheck_withdraws_routes_now_inside_cluster_prefix():
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL))
    results = feed(s, EBGP, ROUTES)
    assert all(r.verdict.accepted for r in results)
    assert s.held(EBGP) == {4: (4, 0), 6: (2, 0)}
    origin = s.origin(EBGP)

    assert s.recheck_guard(EBGP) == []  # nothing changed yet
    s.guard.set_cluster(OTHERS)
    updates = s.recheck_guard(EBGP)
    assert sorted(updates) == sorted([Update(P("10.244.2.64/26"), origin, None),
                                      Update(P("fd00:10:244:2:1::/80"), origin, None)])
    assert all(u.candidate is None for u in updates)
    assert s.held(EBGP) == {4: (3, 1), 6: (1, 1)}
    assert s.rejected[(EBGP, 4, Reason.INSIDE_CLUSTER_PREFIX)] == 1
    assert s.rejected[(EBGP, 6, Reason.INSIDE_CLUSTER_PREFIX)] == 1
    assert s.accepted[(EBGP, 4)] == 4  # monotonic: not taken back

    # explain shows the guard's verdict
    v = s.explain(P("10.244.2.64/26"))[EBGP]
    assert (v.accepted, v.reason, v.policy, v.statement) == (False, Reason.INSIDE_CLUSTER_PREFIX, "guard",
                                                             "10.244.2.0/24")
    assert s.verdict(EBGP, P("10.244.2.64/26")) is v
    # the routes the guard still lets through are untouched
    for p in ("10.244.2.0/24", "198.51.100.0/24", "203.0.113.7/32", "fd00:10:244:2::/64"):
        assert s.verdict(EBGP, P(p)).accepted
    assert sorted(map(str, s.accepted_prefixes(EBGP))) == sorted(
        ["10.244.2.0/24", "198.51.100.0/24", "203.0.113.7/32", "fd00:10:244:2::/64"])

    # a second recheck finds nothing more
    assert s.recheck_guard(EBGP) == []
    assert s.held(EBGP) == {4: (3, 1), 6: (1, 1)}


def test_recheck_withdraws_routes_now_protected():
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL), ImportPeer(IBGP, 65000, False))
    feed(s, EBGP, ["198.51.100.0/24", "203.0.113.7/32", "10.96.0.10/32"])
    feed(s, IBGP, ["203.0.113.7/32", "192.0.2.128/25"], asn=65000, ebgp=False)
    # a new Service VIP and a service CIDR
    s.guard.set_protected([*OWN, "203.0.113.7/32", "10.96.0.0/12"])
    e = s.recheck_guard(EBGP)
    i = s.recheck_guard(IBGP)
    assert sorted(e) == sorted([Update(P("203.0.113.7/32"), s.origin(EBGP), None),
                                Update(P("10.96.0.10/32"), s.origin(EBGP), None)])
    assert i == [Update(P("203.0.113.7/32"), s.origin(IBGP), None)]
    explained = s.explain(P("203.0.113.7/32"))
    assert {a: v.reason for a, v in explained.items()} == {EBGP: Reason.OWN_PREFIX, IBGP: Reason.OWN_PREFIX}
    assert s.explain(P("10.96.0.10/32"))[EBGP].reason is Reason.MORE_SPECIFIC_OF_OWN
    assert s.held(EBGP)[4] == (1, 2) and s.held(IBGP)[4] == (1, 1)
    assert s.verdict(IBGP, P("192.0.2.128/25")).accepted
    assert s.rejected[(EBGP, 4, Reason.OWN_PREFIX)] == 1
    assert s.rejected[(EBGP, 4, Reason.MORE_SPECIFIC_OF_OWN)] == 1


def test_recheck_respects_peer_allowances():
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL, allow_covering=True, allow_default=True),
                   ImportPeer(IBGP, 65000, False))
    feed(s, EBGP, ["172.16.0.0/12", "0.0.0.0/0"])
    feed(s, IBGP, ["172.16.0.0/12"], asn=65000, ebgp=False)
    assert s.held(EBGP)[4] == (2, 0) and s.held(IBGP)[4] == (1, 0)
    s.guard.set_protected([*OWN, "172.20.0.0/16"])  # now covered by 172.16/12: only the iBGP peer's goes
    assert s.recheck_guard(EBGP) == []
    assert [u.prefix for u in s.recheck_guard(IBGP)] == [P("172.16.0.0/12")]
    assert s.explain(P("172.16.0.0/12"))[IBGP].reason is Reason.COVERS_OWN
    assert s.verdict(EBGP, P("172.16.0.0/12")).accepted
    assert s.verdict(EBGP, P("0.0.0.0/0")).accepted


def test_recheck_leaves_rejected_routes_alone():
    s = make_stage(ImportPeer(EBGP, 65001, True, None))  # RFC 8212: everything rejected
    feed(s, EBGP, ["10.244.2.64/26"])
    s.guard.set_cluster(OTHERS)
    assert s.recheck_guard(EBGP) == []
    assert s.explain(P("10.244.2.64/26"))[EBGP].reason is Reason.NO_POLICY  # not re-evaluated
    assert s.held(EBGP)[4] == (0, 1)
    assert (EBGP, 4, Reason.INSIDE_CLUSTER_PREFIX) not in s.rejected


def test_recheck_unknown_peer():
    assert make_stage().recheck_guard("198.18.0.1") == []


def test_recheck_releases_max_prefix():
    limit = Limit(2, Action.DISCARD_EXTRA)
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL, max_prefix={4: limit}))
    r = feed(s, EBGP, ["10.244.2.64/26", "198.51.100.0/24", "198.51.101.0/24"])
    assert [x.verdict.accepted for x in r] == [True, True, False]
    assert r[2].verdict.reason is Reason.MAX_PREFIX
    s.guard.set_cluster(OTHERS)
    assert [u.prefix for u in s.recheck_guard(EBGP)] == [P("10.244.2.64/26")]
    # the slot is free again: the discarded route gets in when re-sent (route refresh)
    again = feed(s, EBGP, ["198.51.101.0/24"])[0]
    assert again.verdict.accepted and again.maxprefix is D.OK
    assert s.held(EBGP)[4] == (2, 1)


def test_route_after_recheck_then_withdraw_and_resend():
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL))
    feed(s, EBGP, ["10.244.2.64/26"])
    s.guard.set_cluster(OTHERS)
    s.recheck_guard(EBGP)
    # the peer withdraws it: nothing for the RIB (it was withdrawn already), counts back to zero
    assert s.withdraw(EBGP, P("10.244.2.64/26")) is None
    assert s.held(EBGP)[4] == (0, 0)
    # the node left the cluster and the route comes again: accepted
    s.guard.set_cluster([])
    r = feed(s, EBGP, ["10.244.2.64/26"])[0]
    assert r.verdict.accepted and r.update.candidate is not None
    assert s.held(EBGP)[4] == (1, 0)


def test_re_announcement_after_recheck_stays_rejected():
    s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL))
    feed(s, EBGP, ["10.244.2.64/26"])
    s.guard.set_cluster(OTHERS)
    s.recheck_guard(EBGP)
    r = feed(s, EBGP, ["10.244.2.64/26"])[0]
    assert not r.verdict.accepted and r.update is None  # nothing more to withdraw
    assert s.held(EBGP)[4] == (0, 1)


# ---------------------------------------------------------------------------------------------
# guard.related: what a grown guard has to look at again
# ---------------------------------------------------------------------------------------------

def test_related_gives_the_covering_and_inside_prefixes_of_what_the_guard_gained():
    vip = related([P("203.0.113.7/32")])
    assert len(vip) == 33 and P("203.0.113.7/32") in vip and P("0.0.0.0/0") in vip and P("203.0.113.0/24") in vip
    pod = related([P("10.244.2.0/24")])
    assert len(pod) == 25 + 510 and P("10.244.2.64/26") in pod and P("10.244.2.255/32") in pod
    assert P("10.244.3.0/26") not in pod and P("10.244.2.0/23") in pod
    assert len(related([P("fd00::7/128")])) == 129 and related([P("fd00:10:244:2::/64")]) is None
    assert related([P(f"203.0.113.{i}/32") for i in range(200)]) is None  # past RELATED_MAX: every route
    # exactly the prefixes that cover or lie inside a gained one, each once (both families)
    rng = random.Random(7)
    for _ in range(300):
        v6 = rng.random() < 0.3
        full = 128 if v6 else 32
        g = _random_prefix(rng, full, full - 8, full)
        got = related([g])
        assert len(got) == len(set(got))
        for _ in range(50):
            p = _random_prefix(rng, full, 0, full, inside=g)
            assert (p in got) == (p.covers(g) or g.covers(p)), (g, p)


def _random_prefix(rng, full: int, lo: int, hi: int, inside: Prefix | None = None) -> Prefix:
    """A random prefix of `lo`..`hi` bits (its address mostly inside `inside`, when given)."""
    if inside is not None and rng.random() < 0.7:
        addr = int(inside.network.network_address) + rng.randrange(inside.network.num_addresses)
    else:
        addr = rng.getrandbits(full)
    return P(str(ipaddress.ip_network((addr, full)).supernet(new_prefix=rng.randint(lo, hi))))


def test_recheck_with_what_the_guard_gained_withdraws_what_the_full_pass_does():
    for gained in ([P("10.244.2.0/24")], [P("203.0.113.7/32"), P("10.244.2.64/26")], [P("198.51.100.0/23")],
                   [P("fd00:10:244:2:1::/80")], [P("fd00:10:244::/48")]):
        runs = []
        for partial in (False, True):
            s = make_stage(ImportPeer(EBGP, 65001, True, ACCEPT_ALL))
            feed(s, EBGP, ROUTES)
            s.guard.set_protected(set(OWN) | set(gained))
            runs.append(sorted(s.recheck_guard(EBGP, gained if partial else None)))
        assert runs[0] == runs[1] and runs[0], gained
