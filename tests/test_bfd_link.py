"""`BfdLink`: which peers get BFD sessions, the hold of a peer's routes while BFD is not Up, and
what a BFD failure returns (withdrawals and a teardown)."""

from agent.bfd.client import BfdChange
from agent.config.loader import load_text
from agent.core.model import Origin, Prefix, SourceKind, Update
from agent.daemon.bfd import BfdLink
from agent.daemon.bgp_config import peer_key

CFG = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: a}
spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254, bfd: {profile: fast}}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: b}
spec: {peerAddress: 10.0.1.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254, localAddress: 10.0.1.254}
---
apiVersion: routeagent.io/v1alpha1
kind: BfdProfile
metadata: {name: fast}
spec: {minRx: 100, minTx: 100, multiplier: 3}
"""
A, B = Origin(SourceKind.EBGP, "10.0.0.1"), Origin(SourceKind.EBGP, "10.0.1.1")
P1, P2 = Prefix.parse("192.0.2.0/24"), Prefix.parse("198.51.100.0/24")


def link(text=CFG):
    config = load_text(text)
    sent = []
    link = BfdLink(lambda c: None)
    link.client.configure = sent.append  # no child process here
    link.configure(config.peers, config.bfd_profiles, lambda p: {"10.0.0.1": A, "10.0.1.1": B}[p], peer_key)
    return link, sent, config


def test_sessions_for_peers_with_bfd_only():
    l, sent, _ = link()
    (specs,) = sent
    assert [(s.peer, s.local, s.timers.min_rx, s.timers.multiplier) for s in specs] == [("10.0.0.1", None, 100, 3)]
    assert l.gated("10.0.0.1") and not l.gated("10.0.1.1")


def test_routes_held_until_up_then_released_and_failure_withdraws():
    l, _, _ = link()
    cand = object()
    out = l.filter([Update(P1, A, cand), Update(P2, A, cand), Update(P1, B, cand), Update(P2, A, None)])
    assert out == [Update(P1, B, cand)]  # peer a is held: BFD not up yet
    assert l.view("10.0.0.1")["routesHeld"] == 1
    updates, teardown = l.changed(BfdChange("10.0.0.1", "down", "up", "none"), A)
    assert updates == [Update(P1, A, cand)] and not teardown
    assert l.filter([Update(P2, A, cand)]) == [Update(P2, A, cand)]  # up: passes
    updates, teardown = l.changed(BfdChange("10.0.0.1", "up", "down", "detection_time_expired"), A)
    assert teardown and updates == []  # forwarding is repaired first, then the clean-up is built
    l.start_cleanup("10.0.0.1", A, [P1, P2])
    assert l.next_cleanup("10.0.0.1") == [Update(P1, A, None), Update(P2, A, None)]
    assert l.filter([Update(P1, A, cand)]) == [] and l.failures == {"10.0.0.1": 1}
    # Down again while already down (init -> down): nothing more
    assert l.changed(BfdChange("10.0.0.1", "init", "down", "none"), A) == ([], False)


def test_bfd_removed_from_peer_releases_its_routes():
    l, sent, config = link()
    cand = object()
    l.filter([Update(P1, A, cand)])
    plain = CFG.replace(", bfd: {profile: fast}", "")
    cfg2 = load_text(plain)
    released = l.configure(cfg2.peers, cfg2.bfd_profiles, lambda p: A, peer_key)
    assert released == [Update(P1, A, cand)] and not l.gated("10.0.0.1") and sent[-1] == []


def test_a_restarted_bfd_process_is_not_a_failure():
    l, _, _ = link()
    l.changed(BfdChange("10.0.0.1", "down", "up", "none"), A)
    # the BFD process restarted: its new session reports Down -> Init -> Up
    assert l.changed(BfdChange("10.0.0.1", "down", "init", "none"), A) == ([], False)
    assert l.changed(BfdChange("10.0.0.1", "init", "up", "none"), A) == ([], False)
    assert not l.gated("10.0.0.1") and l.failures == {}


def test_bfd_added_to_a_running_session_keeps_its_routes():
    config = load_text(CFG.replace(", bfd: {profile: fast}", ""))
    l = BfdLink(lambda c: None)
    l.client.configure = lambda specs: None
    l.configure(config.peers, config.bfd_profiles, lambda p: A, peer_key)
    cfg2 = load_text(CFG)
    l.configure(cfg2.peers, cfg2.bfd_profiles, lambda p: A, peer_key, in_use=lambda p: True)
    assert "10.0.0.1" in l.specs and not l.gated("10.0.0.1")


def failed(accepted):
    """A link whose peer 10.0.0.1 was Up and failed, its clean-up of `accepted` started."""
    l, _, _ = link()
    l.changed(BfdChange("10.0.0.1", "down", "up", "none"), A)
    assert l.changed(BfdChange("10.0.0.1", "up", "down", "detection_time_expired"), A) == ([], True)
    l.start_cleanup("10.0.0.1", A, accepted)
    return l


def test_the_clean_up_after_a_failure_comes_in_slices_with_add_path_ids():
    l = failed([P1, (P2, 7), P2])
    assert l.next_cleanup("10.0.0.1", 2) == [Update(P1, A, None), Update(P2, A, None, 7)]
    assert l.next_cleanup("10.0.0.1", 2) == [Update(P2, A, None)]
    assert l.next_cleanup("10.0.0.1", 2) == [] and "10.0.0.1" not in l.cleanup


def test_bfd_up_again_applies_the_rest_of_the_clean_up_before_the_held_routes():
    l = failed([P1, P2])
    cand = object()
    assert l.next_cleanup("10.0.0.1", 1) == [Update(P1, A, None)]
    l.filter([Update(P2, A, cand)])  # the new session announces P2 again: held
    updates, _ = l.changed(BfdChange("10.0.0.1", "down", "up", "none"), A)
    assert updates == [Update(P2, A, None), Update(P2, A, cand)]  # old withdrawn, then the new one
    assert not l.cleanup


def test_a_peer_removed_during_its_clean_up_still_gets_it_applied():
    l = failed([P1, P2])
    cand = object()
    l.filter([Update(P1, A, cand)])
    only_b = load_text(CFG.split("---\n", 1)[1])
    released = l.configure(only_b.peers, only_b.bfd_profiles, lambda p: A, peer_key)
    assert released == [Update(P1, A, None), Update(P2, A, None)]
