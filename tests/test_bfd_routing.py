"""BFD in the routing state (`Routing.handle_bfd`, no child process, no kernel): a peer's routes
wait for BFD Up (and so does the restart gate), BFD Up -> Down withdraws them and tears the BGP
session down with Cease 6/10, and the routes that come back are held until BFD is Up again."""

from __future__ import annotations

import pytest

from agent.bfd.client import BfdChange
from agent.core.bgp import Announced, EndOfRib, Family, PathAttrs, PeerState, PeerStatus, RouteUpdate, SendNotification
from agent.core.model import NextHop, Prefix, RouteType, nexthops
from agent.daemon.agent import Agent
from agent.fib.types import ForeignRoute

P = Prefix.parse
PEER = "10.0.0.1"
A, B = P("192.0.2.0/24"), P("198.51.100.0/24")
CONFIG = f"""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: tor}}
spec: {{peerAddress: {PEER}, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254, importPolicy: acceptAll,
        bfd: {{minRx: 100, minTx: 100, multiplier: 3}}}}
"""


@pytest.fixture
def routing(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    r = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n").routing
    r.rib.set_link("up0", True)
    up0 = ForeignRoute(P("10.0.0.0/24"), 2, 0, RouteType.UNICAST, nexthops(NextHop(None, "up0")))
    r._apply_rib(r.rib.apply(r.kernel.seen(up0, False)))
    r.source_synced("kernel")
    r.source_synced("config")
    sent = []
    r.bgp.speaker.send = sent.append
    r.sent = sent
    return r


def announce(*prefixes):
    return RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(Announced(p, PEER, PathAttrs(as_path=(65001,))) for p in prefixes))


def in_rib(r, p):
    return r.rib.desired(p) is not None


async def test_routes_and_gate_wait_for_bfd_up_then_failure_withdraws_and_tears_down(routing):
    r = routing
    r.handle_bgp((PeerState(PEER, PeerStatus.UP), announce(A, B)))
    r.handle_bgp(EndOfRib(PEER, Family.IPV4_UNICAST))
    assert not in_rib(r, A) and not r.gate.open  # BFD not up: held, and the gate waits
    assert r.bfd.view(PEER)["routesHeld"] == 2
    r.handle_bfd(BfdChange(PEER, "down", "up", "none"))
    assert in_rib(r, A) and in_rib(r, B) and r.gate.open
    r.handle_bfd(BfdChange(PEER, "up", "down", "detection_time_expired"))
    assert not in_rib(r, A) and not in_rib(r, B)
    assert r.sent[-1] == SendNotification(PEER, 6, 10)
    r.handle_bgp(announce(A))  # the session still delivers (or a new one does): held
    assert not in_rib(r, A)
    r.handle_bfd(BfdChange(PEER, "init", "up", "none"))
    assert in_rib(r, A) and not in_rib(r, B)
    assert r.bfd.failures == {PEER: 1}


def test_the_stage_leaves_a_peers_accepted_routes_to_the_rib_only_while_nothing_holds_them(routing):
    """`ImportStage.settle` after each output: not while BFD holds the peer's updates, and a BFD
    failure puts them back into the stage (`pin`) before the RIB's clean-up withdraws them."""
    r = routing
    st = r.bgp.stage._peers[PEER]
    r.handle_bgp((PeerState(PEER, PeerStatus.UP), announce(A, B)))
    assert st.rib is None and set(st.recent) == {A, B}  # held by BFD: not in the RIB
    r.handle_bfd(BfdChange(PEER, "down", "up", "none"))
    r.handle_bgp(EndOfRib(PEER, Family.IPV4_UNICAST))
    assert st.rib is r.rib.table and not st.recent and not st.kept  # the RIB answers for them
    assert r.bgp.stage.verdict(PEER, A).accepted and r.bgp.stage.held(PEER)[4] == (2, 0)
    r.handle_bfd(BfdChange(PEER, "up", "down", "detection_time_expired"))
    assert not in_rib(r, A) and st.rib is None and set(st.recent) == {A, B}  # pinned
    r.handle_bgp(RouteUpdate(PEER, Family.IPV4_UNICAST, (), withdrawn=(A,)))
    assert r.bgp.stage.held(PEER)[4] == (1, 0) and r.bgp.stage.verdict(PEER, A) is None
    assert r.bgp.stage.accepted_prefixes(PEER) == [B]


PEER2 = "10.0.1.1"
TWO_PEERS = CONFIG + f"""---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: tor2}}
spec: {{peerAddress: {PEER2}, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254, importPolicy: acceptAll}}
"""


def two_peers(tmp_path):
    """Routing with PEER (BFD, via up0) and PEER2 (no BFD, via up1), and six prefixes to offer."""
    path = tmp_path / "c.yaml"
    path.write_text(TWO_PEERS)
    r = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n").routing
    for i, dev in enumerate(("up0", "up1")):
        r.rib.set_link(dev, True)
        net = ForeignRoute(P(f"10.0.{i}.0/24"), 2, 0, RouteType.UNICAST, nexthops(NextHop(None, dev)))
        r._apply_rib(r.rib.apply(r.kernel.seen(net, False)))
    r.bgp.speaker.send = lambda cmd: None
    return r, [P(f"203.0.113.{i * 16}/28") for i in range(6)]


def test_during_the_clean_up_nothing_re_decided_uses_the_failed_peer_and_scans_wait(tmp_path, monkeypatch):
    """The clean-up comes in slices (here 2 prefixes each): meanwhile the failed peer's candidates
    are still in the RIB, but nothing decided in between may use them (an UPDATE from the other
    peer re-decides a prefix), and a full scan waits for the end of the clean-up."""
    import agent.daemon.bfd as bfdmod
    monkeypatch.setattr(bfdmod, "CLEANUP_SLICE", 2)
    r, nets = two_peers(tmp_path)

    def from_peer(peer, med=0):
        return RouteUpdate(peer, Family.IPV4_UNICAST, tuple(
            Announced(p, peer, PathAttrs(as_path=(65001,), med=med)) for p in nets))
    r.handle_bgp((PeerState(PEER, PeerStatus.UP), PeerState(PEER2, PeerStatus.UP), from_peer(PEER), from_peer(PEER2)))
    r.handle_bfd(BfdChange(PEER, "down", "up", "none"))
    both = {nh.gateway for nh in r.rib.desired(nets[-1]).nexthops}
    assert both == {PEER, PEER2}
    r.handle_bfd(BfdChange(PEER, "up", "down", "detection_time_expired"))
    assert PEER in r.bfd.cleanup and len(r.rib.candidates(nets[-1])) == 2  # not reached yet
    assert {nh.gateway for nh in r.rib.desired(nets[-1]).nexthops} == {PEER2}
    assert "BFD down" in r.rib.decide(nets[-1]).candidates[0].detail
    via2 = (NextHop(PEER2, "up1"),)
    assert [r.fib.pending[p].nexthops == via2 for p in nets] == [True] * 2 + [False] * 4  # one slice
    r.handle_bgp(from_peer(PEER2, med=5))  # re-decides every prefix: none may go back to PEER
    assert [r.fib.pending[p].nexthops == via2 for p in nets] == [True] * 2 + [False] * 4
    r.full_scan("periodic")
    assert r.bfd.scan_waiting == "periodic"
    queued = []
    while not r.queue.empty():
        ev = r.queue.get_nowait()
        if ev.kind == "bfd-cleanup":
            r.handle_bfd_cleanup(ev.data)
        else:
            queued.append(ev.kind)
    assert PEER not in r.bfd.cleanup and not r.rib.failed and "scan" in queued
    assert all(r.fib.pending[p].nexthops == via2 for p in nets)  # (nothing is written here)
    assert all(r.rib.candidates(p) and len(r.rib.candidates(p)) == 1 for p in nets)


def test_bfd_up_again_during_the_clean_up_brings_the_peers_new_routes_back(tmp_path, monkeypatch):
    """BFD flaps back Up before the clean-up is over: the rest of it is applied, then the routes
    the peer announced meanwhile (held) count again at once, with the other peer's as ECMP."""
    import agent.daemon.bfd as bfdmod
    monkeypatch.setattr(bfdmod, "CLEANUP_SLICE", 2)
    r, nets = two_peers(tmp_path)

    def from_peer(peer):
        return RouteUpdate(peer, Family.IPV4_UNICAST, tuple(Announced(p, peer, PathAttrs(as_path=(65001,))) for p in nets))
    r.handle_bgp((PeerState(PEER, PeerStatus.UP), PeerState(PEER2, PeerStatus.UP), from_peer(PEER), from_peer(PEER2)))
    r.handle_bfd(BfdChange(PEER, "down", "up", "none"))
    r.handle_bfd(BfdChange(PEER, "up", "down", "detection_time_expired"))
    assert PEER in r.bfd.cleanup  # 2 of 6 done
    r.handle_bgp((PeerState(PEER, PeerStatus.UP), from_peer(PEER)))  # the new session: held
    r.handle_bfd(BfdChange(PEER, "init", "up", "none"))
    assert not r.bfd.cleanup and not r.rib.failed
    for p in nets:
        assert {nh.gateway for nh in r.rib.desired(p).nexthops} == {PEER, PEER2}
        assert {nh.gateway for nh in r.fib.pending[p].nexthops} == {PEER, PEER2}


def test_a_load_over_lets_the_speakers_decoder_memo_go(routing):
    """`Core.after_load` -> `Routing.release_memos` -> the speaker's current decoder."""
    from agent.speaker.codec import Decoder
    r = routing
    r.release_memos()  # (no connection yet: nothing to do)
    channel = r.bgp.speaker.channel
    channel.decoder = Decoder()
    channel.decoder.records._values[("x",)] = ("x",)
    r.release_memos()
    assert not channel.decoder.records._values
