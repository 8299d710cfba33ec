"""BgpRuntime and the speaker: acks, dropped commands, a restarted ExaBGP, sessions ended by a
NOTIFICATION or by our own teardown (no ExaBGP: the speaker's events are handed in by hand)."""

from __future__ import annotations

import asyncio

import pytest

from agent.core.bgp import (
    Announced, AnnounceEor, AnnounceRoute, Family, GracefulRestart, Open, PathAttrs, PeerState, PeerStatus,
    RouteUpdate, SpeakerRestarted, Teardown,
)
from agent.core.model import Prefix
from agent.core.bgp_speaker import CommandAck, CommandsDropped
from tests.bgpruntime_lab import recording_runtime, tor1_config

PEER = "10.0.0.1"
CONFIG = tor1_config(peer_as=65000, families="[ipv4-unicast]",
                     extra="  maxPrefix: [{family: ipv4-unicast, limit: 2, action: teardown}]\n")
POD = AnnounceRoute("10.244.1.0/24", peer=PEER)
P = Prefix.parse
ATTRS = PathAttrs(as_path=())  # iBGP (peerAS = localAS): our own AS in the path would be a loop


@pytest.fixture
def rt(tmp_path):
    return recording_runtime(CONFIG, tmp_path)  # no ExaBGP: rt.sent records the commands


def take(rt) -> list:
    out, rt.sent[:] = list(rt.sent), []
    return out


def announced(rt) -> bool:
    (row,) = rt.advert_views()
    return row["peers"][PEER]["announced"]


def test_session_up_is_announced_once_exabgp_says_done(rt):
    rt.handle(PeerState(PEER, PeerStatus.UP), 0)
    assert take(rt) == [POD, AnnounceEor(Family.IPV4_UNICAST, PEER)]
    assert not announced(rt)  # sent, not answered
    rt.handle(CommandAck(POD, True), 1)
    assert announced(rt)


def test_an_error_ack_is_not_announced_and_the_next_reconcile_sends_it_again(rt):
    rt.handle(PeerState(PEER, PeerStatus.UP), 0)
    take(rt)
    rt.handle(CommandAck(POD, False), 1)
    assert not announced(rt) and rt.refused == 1 and rt.export.refused[PEER] == 1
    rt.refresh_exports()
    assert take(rt) == [POD]


async def test_dropped_commands_are_planned_again_once_the_queue_drained_and_a_teardown_resent(rt):
    rt.handle(PeerState(PEER, PeerStatus.UP), 0)
    eor = AnnounceEor(Family.IPV4_UNICAST, PEER)
    assert take(rt) == [POD, eor]
    rt.held_down[PEER] = None  # as after a max-prefix teardown
    drained = asyncio.Event()
    rt.speaker.drained = drained.wait
    rt.handle(CommandsDropped((POD, eor, Teardown(PEER, 1)), "queue full"), 1)
    rt.handle(CommandsDropped((Teardown(PEER, 1),), "queue full"), 1)
    assert not announced(rt)
    await asyncio.sleep(0.01)
    assert take(rt) == []  # the queue is still full: nothing yet
    drained.set()
    await asyncio.sleep(0.01)
    assert take(rt) == [POD, eor, Teardown(PEER, 1)]  # once each


def test_commands_planned_from_the_dead_exabgps_events_do_not_reach_the_new_one(rt):
    """Events of the old ExaBGP still in the agent's queue when the new one connected (here a
    session up) must not send anything: the new process gets only the re-announcement."""
    rt.handle(PeerState(PEER, PeerStatus.UP), 0)
    take(rt)
    rt.handle(PeerState(PEER, PeerStatus.DOWN, "hold timer expired"), 1)
    rt.speaker.restarts = 1  # ExaBGP died and a new one connected; SpeakerRestarted is queued
    rt.handle(PeerState(PEER, PeerStatus.UP), 2)  # a late event of the old process
    assert take(rt) == []
    rt.handle(SpeakerRestarted(1, "exited with signal SIGKILL"), 3)
    rt.handle(PeerState(PEER, PeerStatus.UP), 4)
    assert take(rt) == [POD, AnnounceEor(Family.IPV4_UNICAST, PEER)]


DUAL = tor1_config(peer_as=65000, extra="  maxPrefix: [{family: ipv4-unicast, limit: 2, action: teardown}]\n")


async def test_max_prefix_teardown_under_graceful_restart_withdraws_both_families_at_once(tmp_path):
    """Issue 14.4, with the real import stage: one session, both families, graceful restart
    negotiated; IPv4 goes over its limit, we tear the session down (ExaBGP closes it without the
    Cease under GR): the IPv6 route goes with the IPv4 ones, at once, no stale timer."""
    rt = recording_runtime(DUAL, tmp_path)
    both = (Family.IPV4_UNICAST, Family.IPV6_UNICAST)
    try:
        rt.handle(Open(PEER, 65000, 90, "10.0.0.1", both, GracefulRestart(120, False, both, both)), 0)
        rt.handle(PeerState(PEER, PeerStatus.UP), 0)
        v6 = rt.handle(RouteUpdate(PEER, both[1], (Announced(P("2001:db8:1::/48"), "fe80::1", ATTRS),)), 1)
        assert len(v6.updates) == 1
        v4 = rt.handle(RouteUpdate(PEER, both[0], tuple(Announced(P(f"198.51.100.{i}/32"), PEER, ATTRS)
                                                         for i in range(3))), 2)
        assert v4.commands == [(PEER, "teardown")] and Teardown(PEER, 1) in rt.sent
        out = rt.handle(PeerState(PEER, PeerStatus.DOWN,
                                  "graceful restarted negotiated, closing without sending any notification"), 3)
        assert sorted(str(u.prefix) for u in out.updates if u.candidate is None) == [
            "198.51.100.0/32", "198.51.100.1/32", "2001:db8:1::/48"]
        assert out.timers == [] and rt.source.sessions[PEER].stale == set()
    finally:
        rt._spawner.cancel()


RESTART = tor1_config(peer_as=65000, families="[ipv4-unicast]", extra=(
    "  maxPrefix: [{family: ipv4-unicast, limit: 1, action: teardown, restartSeconds: 1}]\n"
    "  gracefulRestartSeconds: 0\n"))


async def test_max_prefix_hold_down_ends_at_restart_seconds_after_the_session_down(tmp_path):
    """Issue 14.2: the session goes down a little after the teardown; the hold-down deadline runs
    from the down (the import stage's), and the restore timer sleeps until that deadline, so the
    peer is put back into ExaBGP's configuration once, ~restartSeconds after the down."""
    import time

    rt = recording_runtime(RESTART, tmp_path)
    configured = []

    async def set_peers(peers, held=()):
        rt.speaker.held = frozenset(held)
        configured.append((time.monotonic(), [p.spec.peer_address for p in peers if p.metadata.name not in held]))

    rt.speaker.set_peers = set_peers
    try:
        rt.handle(PeerState(PEER, PeerStatus.UP), time.monotonic())
        out = rt.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(
            Announced(P(f"198.51.100.{i}/32"), PEER, ATTRS) for i in range(2))), time.monotonic())
        assert out.commands == [(PEER, "teardown")] and PEER in rt.held_down
        await asyncio.sleep(0.2)  # the Cease goes out, the session goes down a little later
        down = time.monotonic()
        rt.handle(PeerState(PEER, PeerStatus.DOWN, "we sent Cease 6/1"), down)
        assert rt.stage.maxprefix.hold_until(PEER) == pytest.approx(down + 1)
        await asyncio.sleep(0.05)
        assert configured and configured[-1][1] == []  # held in ExaBGP's configuration
        assert rt.speaker.held == {"tor1"}
        assert rt.peer_views(lambda a: {})[0]["held_down"]
        await asyncio.sleep(0.8)
        assert PEER in rt.held_down  # not before the deadline
        await asyncio.sleep(0.4)
        assert PEER not in rt.held_down and configured[-1][1] == [PEER]
        assert 0.95 <= configured[-1][0] - down <= 1.2
        assert rt.stage.maxprefix.may_connect(PEER, time.monotonic())
        assert rt.peer_views(lambda a: {})[0]["families"]["ipv4-unicast"]["maxPrefix"]["state"] == "ok"
    finally:
        rt._spawner.cancel()


async def test_a_new_hold_down_replaces_the_restore_timer(tmp_path):
    import time

    rt = recording_runtime(RESTART, tmp_path)
    rt.speaker.set_peers = lambda peers, held=(): asyncio.sleep(0)
    try:
        for _ in range(2):
            rt.handle(PeerState(PEER, PeerStatus.UP), time.monotonic())
            rt.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(
                Announced(P(f"198.51.100.{i}/32"), PEER, ATTRS) for i in range(2))), time.monotonic())
            rt.handle(PeerState(PEER, PeerStatus.DOWN, "we sent Cease 6/1"), time.monotonic())
            rt.held_down[PEER] = None
        await asyncio.sleep(0)
        assert len(rt._restores) == 1
        await asyncio.sleep(1.2)
        assert PEER not in rt.held_down and not rt._restores
    finally:
        rt._spawner.cancel()


async def test_a_configuration_change_releases_a_held_peer_from_exabgp(tmp_path):
    import time

    rt = recording_runtime(RESTART, tmp_path)
    calls = []

    async def set_peers(peers, held=()):
        rt.speaker.held = frozenset(held)
        calls.append(sorted(held))

    rt.speaker.set_peers = set_peers
    try:
        rt.handle(PeerState(PEER, PeerStatus.UP), time.monotonic())
        rt.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(
            Announced(P(f"198.51.100.{i}/32"), PEER, ATTRS) for i in range(2))), time.monotonic())
        rt.handle(PeerState(PEER, PeerStatus.DOWN, "we sent Cease 6/1"), time.monotonic())
        await asyncio.sleep(0.05)
        assert calls == [["tor1"]]
        from agent.config.resolve import distances
        rt.reconfigure(rt.config, distances(rt.config))  # e.g. a policy changed; the peer did not
        await asyncio.sleep(0.05)
        assert calls[-1] == [] and not rt.held_down and rt.stage.maxprefix.may_connect(PEER, time.monotonic())
    finally:
        rt._spawner.cancel()
