"""The import stage answering from the RIB (`ImportStage.settle`, `PeerState.stored`) against the
stage that keeps every verdict itself.

Seeded random sequences go through two stages and two RIBs. The reference stage is never settled:
it keeps a verdict per route, as the stage always did. The subject is settled after every step
(the RIB has applied the step's updates) for each peer that nothing holds back, as
`agent.daemon.bgp.BgpDaemon.settle` does. The steps are UPDATEs (through every lane: one prefix,
short and long runs, withdrawals, a prefix withdrawn and announced in one step), a guard that
grows (`recheck_guard`), a session lost with graceful restart (stale prefixes, re-sent or swept
at End-of-RIB), a session lost without it, and a BFD failure (`pin`, the RIB's clean-up, updates
held back while the peer is gated, then the session torn down). After every step both must give
the same RIB updates, the same verdicts (`explain` of every prefix, `verdict`, the stored
verdicts), the same counts, the same accepted prefixes and the same RIB.
"""

from __future__ import annotations

import importlib
import random

import pytest

from agent.core.model import BgpAttrs, Prefix, Update, single_updates
from agent.core.rib import Rib
from agent.sources.bgp import withdraw_all

runs_test = importlib.import_module("tests.test_import_runs")
runs_mod = importlib.import_module("agent.import.runs")
imp = importlib.import_module("agent.import")
P = Prefix.parse
POLICIES, POOL, EBGP, IBGP = runs_test.POLICIES, runs_test.POOL, runs_test.EBGP, runs_test.IBGP
PEERS = (EBGP, IBGP)


class Side:
    """A stage, its RIB and the session state the BGP source would keep."""

    def __init__(self, policy, keep_rejected: int, settled: bool) -> None:
        self.stage = imp.ImportStage(imp.Guard(["10.244.3.0/24"], ["192.0.2.10/24"]), POLICIES,
                                     keep_rejected=keep_rejected)
        self.stage.set_peer(imp.ImportPeer(EBGP, 65001, True, policy, local_as=65000))
        self.stage.set_peer(imp.ImportPeer(IBGP, 65000, False, policy))
        self.rib = Rib(default_metric=20)
        self.rib.set_link("eth0", True)
        self.rib.set_connected([(P("192.0.2.0/24"), "eth0", True)])
        self.settled = settled
        self.stale: dict[str, set] = {EBGP: set(), IBGP: set()}
        self.gated: set[str] = set()  # BFD down: updates held, not applied
        self.held: dict[str, list] = {EBGP: [], IBGP: []}

    def apply(self, updates: list) -> list:
        """The RIB side of a step (held back for a gated peer), then settle what may be."""
        for u in single_updates(updates):
            if u.origin == self.stage.origin(EBGP) and EBGP in self.gated:
                self.held[EBGP].append(u)
            elif u.origin == self.stage.origin(IBGP) and IBGP in self.gated:
                self.held[IBGP].append(u)
            else:
                self.rib.apply([u])
        if self.settled:
            for peer in PEERS:
                if not self.stale[peer] and peer not in self.gated:
                    self.stage.settle(peer, self.rib.table)
        return list(dict.fromkeys(single_updates(updates)))

    def update(self, peer, withdrawn, announced, nexthop, attrs, how) -> list:
        stage, stale, out = self.stage, self.stale[peer], []
        for prefix in withdrawn:
            u = stage.withdraw(peer, prefix)
            if u is None and prefix in stale:  # stale: the stage forgot it (as the BGP source does)
                u = Update(prefix, stage.origin(peer), None)
            stale.discard(prefix)
            if u is not None:
                out.append(u)
        if how == "runs":
            stage.receive_runs(peer, [((p,), nexthop, attrs, None) for p in announced], out, stale)
        elif how == "runs-short":
            stage.receive_runs(peer, [(tuple(announced), nexthop, attrs, None)], out, stale)
        else:
            stage.receive_batch(peer, announced, nexthop, attrs, out, stale)
        return self.apply(out)

    def guard_grows(self, prefix) -> list:
        self.stage.guard.set_protected(self.stage.guard.protected | {prefix})
        out = []
        for peer in PEERS:
            out += self.stage.recheck_guard(peer)
        return self.apply(out)

    def down(self, peer, graceful: bool) -> list:
        stage = self.stage
        self.gated.discard(peer)
        held, self.held[peer] = self.held[peer], []
        out = [u for u in held if u.candidate is None]  # (what a clean-up had left)
        self.rib.apply(out)
        if graceful:
            self.stale[peer] |= set(stage.accepted_prefixes(peer))
            out = []
        else:
            out = withdraw_all(stage.origin(peer), sorted(set(stage.accepted_prefixes(peer)) | self.stale[peer]))
            self.stale[peer] = set()
        stage.peer_down(peer, 0.0)
        return self.apply(out)

    def end_of_rib(self, peer) -> list:
        out = withdraw_all(self.stage.origin(peer), sorted(self.stale[peer]))
        self.stale[peer] = set()
        return self.apply(out)

    def bfd_down(self, peer) -> list:
        """The RIB's clean-up of a failed peer while its session is still up (`BfdEvents`)."""
        stage = self.stage
        if self.settled:
            stage.pin(peer)
        self.gated.add(peer)
        self.rib.apply(withdraw_all(stage.origin(peer), stage.accepted_prefixes(peer)))
        return []

    def view(self) -> tuple:
        stage, peers = self.stage, []
        for peer in PEERS:
            st = stage._peers[peer]
            peers.append((st.verdicts(), list(st.held), st.rejected_kept, list(st.unkept),
                          sorted(stage.accepted_prefixes(peer)), stage.has_accepted(peer),
                          [stage.verdict(peer, p) for p in POOL]))
        routes = {p: self.rib.candidates(p) for p in self.rib.prefixes()}
        return (peers, [stage.explain(p) for p in POOL], dict(stage.received), dict(stage.accepted),
                dict(stage.rejected), routes, dict(self.rib.counts))


def steps(seed: int):
    rnd = random.Random(seed)
    attrs = {}
    yield "update", EBGP, [], [P("198.18.0.0/16")], EBGP, BgpAttrs(EBGP, 65001, EBGP, True, as_path=(65001,),
                                                                    communities=("65000:1",)), "batch"
    for _ in range(60):
        r = rnd.random()
        peer = rnd.choice((EBGP, EBGP, IBGP))
        if r < 0.04:
            yield "guard", P(f"203.0.{rnd.randrange(48)}.0/24")
            continue
        if r < 0.08:
            yield "down", peer, rnd.random() < 0.6
            continue
        if r < 0.12:
            yield "eor", peer
            continue
        if r < 0.15:
            yield "bfd", peer
            continue
        community = rnd.choice(("65000:1", "65000:1", "65000:7", "65000:9"))
        path = rnd.choice(((65001,), (65001, 65002), (65001, 65000)))
        if peer == IBGP:
            path = path[1:]
        nexthop = runs_test.RECURSIVE_NH if peer == IBGP and rnd.random() < 0.5 else peer
        key = (peer, community, path, nexthop)
        if key not in attrs:
            attrs[key] = BgpAttrs(peer, 65001 if peer == EBGP else 65000, nexthop, peer == EBGP,
                                  as_path=path, communities=(community,))
        start = rnd.randrange(len(POOL))
        announced = [POOL[(start + i) % len(POOL)] for i in range(rnd.choice((1, 2, 5, 9, 20)))]
        withdrawn = rnd.sample(POOL, rnd.choice((0, 0, 3)))
        if rnd.random() < 0.3:
            withdrawn += announced[:3]
        yield "update", peer, withdrawn, announced, nexthop, attrs[key], rnd.choice(("batch", "runs", "runs-short"))


def run(side: Side, step) -> list:
    kind, *args = step
    if kind == "update":
        return side.update(*args)
    if kind == "guard":
        return side.guard_grows(*args)
    if kind == "down":
        return side.down(*args)
    if kind == "eor":
        return side.end_of_rib(*args)
    return side.bfd_down(*args)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("policy", ["by-prefix", "by-community", None])
@pytest.mark.parametrize("keep_rejected", [100, 3])
def test_a_settled_stage_answers_as_one_that_keeps_every_verdict(monkeypatch, seed, policy, keep_rejected):
    monkeypatch.setattr(runs_mod, "MIN", 4)
    ref, sub = Side(policy, keep_rejected, False), Side(policy, keep_rejected, True)
    derived = 0
    for step in steps(seed):
        assert run(sub, step) == run(ref, step), step
        assert sub.view() == ref.view(), step
        for peer in PEERS:
            st = sub.stage._peers[peer]
            if st.rib is not None:
                derived += sum(1 for p in sub.stage.accepted_prefixes(peer) if p not in st.kept)
                assert not st.recent  # settled after every step: nothing of its own
    assert derived  # the RIB did answer for accepted routes


def test_settle_keeps_no_entry_per_accepted_route_and_pin_brings_them_back():
    side = Side(None, 100, True)
    a = BgpAttrs(IBGP, 65000, IBGP, False, as_path=(), communities=("65000:1",))
    side.update(IBGP, [], POOL[:40], IBGP, a, "batch")
    st = side.stage._peers[IBGP]
    assert st.rib is side.rib.table and not st.recent and not st.kept
    assert sorted(side.stage.accepted_prefixes(IBGP)) == sorted(POOL[:40])
    assert side.stage.verdict(IBGP, POOL[0]).accepted
    side.bfd_down(IBGP)
    assert st.rib is None and sorted(st.recent) == sorted(POOL[:40])  # the stage counts them again
    assert not any(side.rib.candidates(p) for p in POOL[:40])
    assert side.stage.verdict(IBGP, POOL[0]).accepted
    assert side.stage.withdraw(IBGP, POOL[0]) is not None  # still its route: withdrawn, counted
    assert side.stage.held(IBGP)[4] == (39, 0)
