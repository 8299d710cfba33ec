"""The import stage's one-prefix shortcut (`agent.import.single`) against the batch loop.

Every route of a sequence goes through `receive_batch` one prefix at a time, once with the
shortcut and once with it switched off: RIB updates, decisions, verdicts, counters, held counts,
max-prefix counts and stale sets must be the same after each step, whatever the outcome (new,
re-sent, stale, refused by the guard, AS_PATH loop, policy rejection, max-prefix warn / discard /
teardown).
"""

from __future__ import annotations

import importlib

import pytest

from agent.core.model import BgpAttrs, Prefix
from agent.policy.engine import ACCEPT_ALL, compile_policies
from agent.config.policy import RoutePolicy

imp = importlib.import_module("agent.import")
stage_mod = importlib.import_module("agent.import.stage")
Guard, ImportStage, ImportPeer = imp.Guard, imp.ImportStage, imp.ImportPeer
Limit, Action = imp.MaxPrefixLimit, imp.MaxPrefixAction
P = Prefix.parse
PEER = "192.0.2.1"

POLICIES = compile_policies([RoutePolicy.model_validate({
    "apiVersion": "routeagent.io/v1alpha1", "kind": "RoutePolicy", "metadata": {"name": "some"},
    "spec": {"defaultAction": "reject", "statements": [
        {"name": "no-198", "conditions": {"prefixSet": [{"prefix": "198.51.100.0/24"}]}, "actions": {"result": "reject"}},
        {"name": "lp", "conditions": {"communities": {"values": ["65000:7"]}},
         "actions": {"result": "accept", "setLocalPref": 300}},
        {"name": "rest", "conditions": {"communities": {"values": ["65000:1"]}}, "actions": {"result": "accept"}}]},
}, by_alias=True, by_name=False), RoutePolicy.model_validate({
    "apiVersion": "routeagent.io/v1alpha1", "kind": "RoutePolicy", "metadata": {"name": "comms"},
    "spec": {"defaultAction": "reject", "statements": [
        {"name": "lp", "conditions": {"communities": {"values": ["65000:7"]}},
         "actions": {"result": "accept", "setLocalPref": 300}},
        {"name": "rest", "conditions": {"communities": {"values": ["65000:1"]}}, "actions": {"result": "accept"}}]},
}, by_alias=True, by_name=False)])

ROUTES = [  # (prefix, community, AS path)
    ("203.0.113.0/24", "65000:1", (65001,)),
    ("203.0.114.0/24", "65000:7", (65001, 65002)),
    ("203.0.113.0/24", "65000:7", (65001,)),  # re-sent with other attributes
    ("10.244.3.0/24", "65000:1", (65001,)),  # the guard's (own prefix)
    ("198.51.100.0/24", "65000:1", (65001,)),  # the policy rejects it
    ("203.0.115.0/24", "65000:9", (65001,)),  # no statement: default reject
    ("203.0.116.0/24", "65000:1", (65001, 65000)),  # our AS: loop
    ("203.0.117.0/24", "65000:1", (65001,)),
    ("2001:db8:1::/48", "65000:1", (65001,)),
    ("203.0.118.0/24", "65000:1", (65001,)),
    ("203.0.119.0/24", "65000:1", (65001,)),
    ("203.0.114.0/24", "65000:9", (65001,)),  # accepted before, now rejected
    ("203.0.120.0/24", "65000:1", (65001,)),
    ("203.0.113.0/24", "65000:1", (65001,)),
]


def make(policy, limit):
    s = ImportStage(Guard(["10.244.3.0/24"], ["192.0.2.10/24"]), POLICIES)
    s.set_peer(ImportPeer(PEER, 65001, True, policy, local_as=65000,
                          max_prefix={4: limit, 6: limit} if limit else {}))
    return s


def state(s):
    st = s._peers[PEER]
    return (st.verdicts(), list(st.held), st.rejected_kept, list(st.unkept), dict(s.received),
            dict(s.accepted), dict(s.rejected), s.maxprefix.count(PEER, 4), s.maxprefix.count(PEER, 6),
            s.maxprefix.status(PEER, 4).state)


@pytest.mark.parametrize("policy", ["some", ACCEPT_ALL, None])
@pytest.mark.parametrize("limit", [None, Limit(3, Action.WARN), Limit(3, Action.DISCARD_EXTRA),
                                   Limit(3, Action.TEARDOWN)])
def test_shortcut_equals_the_batch_loop(monkeypatch, policy, limit):
    fast, slow = make(policy, limit), make(policy, limit)
    stale_fast = {P("203.0.117.0/24"), P("203.0.118.0/24")}
    stale_slow = set(stale_fast)
    taken = []
    real = stage_mod.receive_one

    def counted(*a):
        done = real(*a)
        taken.append(done is not None)
        return done

    for text, community, path in ROUTES:
        prefix = P(text)
        attrs = BgpAttrs(PEER, 65001, PEER, True, as_path=path, communities=(community,))
        nexthop = "2001:db8::1" if prefix.family == 6 else PEER
        got, want = [], []
        monkeypatch.setattr(stage_mod, "receive_one", counted)
        r_fast = fast.receive_batch(PEER, (prefix,), nexthop, attrs, got, stale_fast)
        monkeypatch.setattr(stage_mod, "receive_one", lambda *a: None)
        r_slow = slow.receive_batch(PEER, (prefix,), nexthop, attrs, want, stale_slow)
        assert (r_fast, got, stale_fast) == (r_slow, want, stale_slow), text
        assert state(fast) == state(slow), text
    if policy is not None:
        assert any(taken) and not all(taken)  # both ways were taken


@pytest.mark.parametrize("policy", ["some", "comms", ACCEPT_ALL, None])
@pytest.mark.parametrize("limit", [None, Limit(3, Action.WARN), Limit(3, Action.DISCARD_EXTRA),
                                   Limit(3, Action.TEARDOWN), Limit(6, Action.DISCARD_EXTRA)])
@pytest.mark.parametrize("chunk", [1, 4, 100])
def test_runs_equal_one_batch_each(monkeypatch, policy, limit, chunk):
    """`receive_runs` (the runs of one or more UPDATEs, in one call) does what `receive_batch`
    does for each run: same RIB updates in the same order, the decisions other than OK, and the
    same state (verdicts, counters, held and max-prefix counts, stale set) after each call; runs of
    one prefix (its own shortcut), of a few and of many (`runs.receive_run`) mixed."""
    fast, slow = make(policy, limit), make(policy, limit)
    stale_fast = {P("203.0.117.0/24"), P("203.0.118.0/24")}
    stale_slow = set(stale_fast)

    def attrs(community, path=(65001,)):
        return BgpAttrs(PEER, 65001, PEER, True, as_path=path, communities=(community,))
    runs = [((P(t),), PEER, attrs(c, path), None) for t, c, path in ROUTES if P(t).family == 4]
    def run(*texts, community="65000:1", path=(65001,)):
        return tuple(map(P, texts)), PEER, attrs(community, path), None
    runs[0:0] = [run("81.68.0.0/24", "203.0.118.0/24"), run("81.66.0.0/24", "81.66.1.0/24", "81.66.2.0/24")]
    runs[5:5] = [run(*(f"192.0.2.{i * 16}/28" for i in range(3))),  # the guard's
                 run(*(f"81.64.{i}.0/24" for i in range(20))),  # `runs.receive_run`
                 run("81.67.0.0/24", "81.67.1.0/24", "81.67.0.0/24"),  # one prefix twice
                 run("81.70.0.0/24", "81.70.1.0/24", path=(65001, 65000)),  # AS path loop
                 run("81.71.0.0/24", "81.71.1.0/24", community="65000:7"),
                 run("81.72.0.0/24", "81.72.1.0/24", community="65000:9")]  # rejected
    runs += [((P(f"81.65.{i}.0/24"),), PEER, attrs("65000:1"), None) for i in range(4)]
    runs += [run("81.69.0.0/24", "203.0.113.0/24"), run("81.73.0.0/24", "198.51.100.0/24")]  # held; no-198
    batches = []
    real_batch = fast.receive_batch
    monkeypatch.setattr(fast, "receive_batch", lambda *a, **k: batches.append(a[1]) or real_batch(*a, **k))
    for start in range(0, len(runs), chunk):
        part = runs[start:start + chunk]
        got, want, decisions = [], [], []
        found = fast.receive_runs(PEER, part, got, stale_fast)
        for prefixes, nexthop, at, _ll in part:
            d, _verdict = slow.receive_batch(PEER, prefixes, nexthop, at, want, stale_slow)
            if d != "ok":
                decisions.append(d)
        assert (found, got, stale_fast) == (decisions, want, stale_slow)
        assert state(fast) == state(slow)
    accepted = sum(fast.accepted.values())
    assert accepted >= (limit.limit if limit else 20) if policy is not None else not accepted  # (RFC 8212: nothing without a policy)
    if policy is not None and limit is None:  # both ways taken, for runs of one prefix and of a few
        assert 1 < len([b for b in batches if len(b) == 1]) < len([r for r in runs if len(r[0]) == 1])
        few = {str(r[0][0]) for r in runs if 1 < len(r[0]) < 16}
        # the batch loop: a stale prefix, the guard's, an AS path loop, one held, TEST-NET-2 (the
        # guard's); the policy's rejection; every one when the policy reads prefixes
        slow = {"81.68.0.0/24", "192.0.2.0/28", "81.70.0.0/24", "81.69.0.0/24", "81.73.0.0/24"}
        slow |= few if policy == "some" else {"81.72.0.0/24"} if policy == "comms" else set()
        assert {str(b[0]) for b in batches if 1 < len(b) < 16} == slow
        assert slow != few or policy == "some"
