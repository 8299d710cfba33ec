"""The bulk lanes for a table being learned (`agent.import.runs`, `agent.core.ribruns`) against
the general per-prefix loops.

Seeded random sequences of UPDATEs (batches of new, re-sent and overlapping prefixes, withdrawals,
a second peer offering the same prefixes, a stale set of a graceful restart, prefixes the guard
refuses, an AS_PATH loop, policies with and without prefix conditions, max-prefix limits, next
hops resolved directly and recursively) go through an import stage and a RIB twice: once with
the lanes (their threshold lowered so that small batches take them) and once with them switched
off. After every step the RIB updates (runs spelled out), the RIB's changes, its candidates and
counts, and the stage's verdicts, counters, held counts and max-prefix counts must be the same.
"""

from __future__ import annotations

import importlib
import random

import pytest

from agent.config.policy import RoutePolicy
from agent.core import ribruns
from agent.core.model import BgpAttrs, Prefix, UpdateRun, single_updates
from agent.core.rib import Rib
from agent.policy.engine import ACCEPT_ALL, compile_policies

imp = importlib.import_module("agent.import")
runs_mod = importlib.import_module("agent.import.runs")
stage_mod = importlib.import_module("agent.import.stage")
Guard, ImportStage, ImportPeer = imp.Guard, imp.ImportStage, imp.ImportPeer
Limit, Action = imp.MaxPrefixLimit, imp.MaxPrefixAction
P = Prefix.parse
EBGP, IBGP = "192.0.2.1", "192.0.2.2"

POLICIES = compile_policies([RoutePolicy.model_validate({
    "apiVersion": "routeagent.io/v1alpha1", "kind": "RoutePolicy", "metadata": {"name": name},
    "spec": {"defaultAction": "reject", "statements": statements},
}, by_alias=True, by_name=False) for name, statements in (
    ("by-prefix", [
        {"name": "no-7", "conditions": {"prefixSet": [{"prefix": "203.0.7.0/24"}]}, "actions": {"result": "reject"}},
        {"name": "rest", "conditions": {"communities": {"values": ["65000:1"]}}, "actions": {"result": "accept"}}]),
    ("by-community", [
        {"name": "lp", "conditions": {"communities": {"values": ["65000:7"]}},
         "actions": {"result": "accept", "setLocalPref": 300}},
        {"name": "rest", "conditions": {"communities": {"values": ["65000:1"]}}, "actions": {"result": "accept"}}]),
)])
# the guard refuses 10.244.3.0/24; 198.18.0.0/24 covers IBGP's recursive next hop (RECURSIVE_NH)
POOL = [P(f"203.0.{i}.0/24") for i in range(48)] + [P("10.244.3.0/24"), P("198.18.0.0/24")]
RECURSIVE_NH = "198.18.0.1"  # IBGP's next hop, resolved through EBGP's 198.18.0.0/16


def make(policy, limit):
    stage = ImportStage(Guard(["10.244.3.0/24"], ["192.0.2.10/24"]), POLICIES)
    limits = {4: limit, 6: limit} if limit else {}
    stage.set_peer(ImportPeer(EBGP, 65001, True, policy, local_as=65000, max_prefix=limits))
    stage.set_peer(ImportPeer(IBGP, 65000, False, policy, max_prefix=limits))
    rib = Rib(default_metric=20)
    rib.set_link("eth0", True)
    rib.set_connected([(P("192.0.2.0/24"), "eth0", True)])
    return stage, rib


def state(stage, rib):
    out = []
    for peer in (EBGP, IBGP):
        st = stage._peers[peer]
        out.append((st.verdicts(), list(st.held), st.rejected_kept, list(st.unkept),
                    stage.maxprefix.count(peer, 4), stage.maxprefix.status(peer, 4).state))
    routes = {p: rib.candidates(p) for p in rib.prefixes()}
    return (out, dict(stage.received), dict(stage.accepted), dict(stage.rejected), routes, dict(rib.counts),
            {p: rib.desired(p) for p in rib.prefixes()})


def steps(seed):
    """(peer, withdrawn, announced prefixes, next hop, attributes) for one random sequence."""
    rnd = random.Random(seed)
    cache = {}
    yield EBGP, [], [P("198.18.0.0/16")], EBGP, BgpAttrs(EBGP, 65001, EBGP, True, as_path=(65001,),
                                                          communities=("65000:1",))
    for _ in range(40):
        peer = rnd.choice((EBGP, EBGP, IBGP))
        community = rnd.choice(("65000:1", "65000:1", "65000:7", "65000:9"))
        path = rnd.choice(((65001,), (65001, 65002), (65001, 65000)))  # the last: a loop for EBGP
        if peer == IBGP:
            path = path[1:]
        nexthop = RECURSIVE_NH if peer == IBGP and rnd.random() < 0.5 else peer
        key = (peer, community, path, nexthop)
        if key not in cache:  # (the codec shares one attributes object per attribute set)
            cache[key] = BgpAttrs(peer, 65001 if peer == EBGP else 65000, nexthop, peer == EBGP,
                                  as_path=path, communities=(community,))
        start = rnd.randrange(len(POOL))
        announced = [POOL[(start + i) % len(POOL)] for i in range(rnd.choice((2, 5, 9, 20)))]
        if rnd.random() < 0.1:
            announced.append(announced[0])  # a prefix twice in one UPDATE
        withdrawn = rnd.sample(POOL, rnd.choice((0, 0, 3)))
        if rnd.random() < 0.3:  # withdrawn and announced again in one batch
            withdrawn += announced[:3]
        yield peer, withdrawn, announced, nexthop, cache[key]


def feed(stage, rib, stale, peer, withdrawn, announced, nexthop, attrs):
    updates = []
    for prefix in withdrawn:
        u = stage.withdraw(peer, prefix)
        if u is not None:
            updates.append(u)
    decision, _v = stage.receive_batch(peer, announced, nexthop, attrs, updates, stale.get(peer))
    return decision, updates, rib.apply(updates)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("policy", ["by-prefix", "by-community", ACCEPT_ALL, None])
@pytest.mark.parametrize("limit", [None, Limit(40, Action.WARN), Limit(30, Action.DISCARD_EXTRA)])
def test_lanes_equal_the_general_loops(monkeypatch, seed, policy, limit):
    monkeypatch.setattr(runs_mod, "MIN", 2)
    fast, slow = make(policy, limit), make(policy, limit)
    stale_fast = {EBGP: set(POOL[40:46])}
    stale_slow = {EBGP: set(POOL[40:46])}
    real_run, real_apply_run = stage_mod.receive_run, ribruns.apply_run
    lanes = 0
    for step in steps(seed):
        got = feed(*fast, stale_fast, *step)
        lanes += sum(isinstance(u, UpdateRun) for u in got[1])
        monkeypatch.setattr(stage_mod, "receive_run", lambda *a: None)
        want = feed(*slow, stale_slow, *step)
        monkeypatch.setattr(stage_mod, "receive_run", real_run)
        # (a prefix twice in one UPDATE: the loop sends it twice, a run once)
        assert got[0] == want[0] and list(dict.fromkeys(single_updates(got[1]))) == list(dict.fromkeys(want[1])), step
        assert {p: r for p, r in got[2].items()} == want[2], step
        assert stale_fast == stale_slow
        assert state(*fast) == state(*slow), step
    if policy != "by-prefix" and policy is not None:
        assert lanes  # the lanes were taken
    assert real_apply_run is ribruns.apply_run


def test_rib_run_falls_back_per_prefix_where_it_must():
    """A run over prefixes another origin offers, or touched earlier in the batch, or with a
    recursively resolved next hop, takes the general loop; the outcome is the same."""
    stage, rib = make(ACCEPT_ALL, None)
    attrs = BgpAttrs(EBGP, 65001, EBGP, True, as_path=(65001,))
    first = []
    stage.receive_batch(EBGP, POOL[:20], EBGP, attrs, first)
    assert [type(u) for u in first] == [UpdateRun]
    changes = rib.apply(first)
    assert set(changes) == set(POOL[:20]) and len(set(changes.values())) == 1
    other = []
    stage.receive_batch(IBGP, POOL[10:30], EBGP, BgpAttrs(IBGP, 65000, EBGP, False), other)
    assert [type(u) for u in other] == [UpdateRun]  # new to IBGP: a run; 10 of them in the RIB
    changes = rib.apply(other)
    assert set(changes) == set(POOL[20:30])  # eBGP (distance 20) keeps the first ten
    assert all(len(rib.candidates(p)) == 2 for p in POOL[10:20])
    assert rib.counts[stage.origin(IBGP)] == 20


def test_a_recursive_next_hop_is_decided_per_prefix(monkeypatch):
    """IBGP's run resolves through EBGP's 198.18.0.0/16; one of its prefixes covers the next hop
    itself (it would resolve through itself: not installed), the others are."""
    monkeypatch.setattr(runs_mod, "MIN", 2)
    stage, rib = make(ACCEPT_ALL, None)
    first = []
    stage.receive_batch(EBGP, [P("198.18.0.0/16")], EBGP, BgpAttrs(EBGP, 65001, EBGP, True, as_path=(65001,)), first)
    rib.apply(first)
    run = []
    prefixes = [P("198.18.0.0/24"), *POOL[:5]]
    stage.receive_batch(IBGP, prefixes, RECURSIVE_NH, BgpAttrs(IBGP, 65000, RECURSIVE_NH, False), run)
    assert [type(u) for u in run] == [UpdateRun]
    changes = rib.apply(run)
    assert set(changes) == set(POOL[:5])
    assert rib.desired(P("198.18.0.0/24")) is None
    assert all(rib.desired(p).nexthops[0].gateway == EBGP for p in POOL[:5])


def test_runs_as_decoded_equal_the_announced_tuples():
    """An UPDATE rebuilt from the relay's records keeps its runs (`AnnouncedRuns`): the BGP
    source gives each run to the stage as one batch; the RIB ends up as with the same UPDATE
    as `Announced` tuples, with and without ADD-PATH path ids."""
    from agent.core.bgp import Announced, AnnouncedRuns, RouteUpdate
    from tests.test_addpath import BIRD, UP1, UP2, V4, Lab

    runs = ((tuple(POOL[:20]), "10.0.1.1", UP1, None), ((POOL[20],), "10.0.2.1", UP2, None),
            (tuple(POOL[21:40]), "10.0.2.1", UP2, None))
    flat = tuple(Announced(p, nh, a, ll) for ps, nh, a, ll in runs for p in ps)
    assert AnnouncedRuns(runs) == flat and flat == AnnouncedRuns(runs) and len(AnnouncedRuns(runs)) == 40
    for ids in (None, tuple(range(1, 41))):
        as_runs, as_tuples = Lab(), Lab()
        out_runs = as_runs.feed(RouteUpdate(BIRD, V4, AnnouncedRuns(runs), (), ids))
        out_tuples = as_tuples.feed(RouteUpdate(BIRD, V4, flat, (), ids))
        assert single_updates(out_runs.updates) == single_updates(out_tuples.updates)
        assert any(isinstance(u, UpdateRun) for u in out_runs.updates) == (ids is None)
        assert {p: as_runs.route(p) for p in POOL} == {p: as_tuples.route(p) for p in POOL}
        assert as_runs.stage.held(BIRD) == as_tuples.stage.held(BIRD) == {4: (40, 0), 6: (0, 0)}
