"""BGP source: session loss with and without graceful restart, End-of-RIB sweep, speaker restart."""


from agent.core.model import Candidate, NextHop, Origin, SourceKind, Update, nexthops
from agent.sources.bgp import BgpPeerSettings, BgpSource
from agent.core.bgp import (
    Announced, EndOfRib, Family, GracefulRestart, Keepalive, Notification, Open, PathAttrs, PeerState, PeerStatus,
    RouteUpdate, SpeakerRestarted,
)
from agent.core.bgp_speaker import SpeakerDown
from tests.factories import P

PEER = "192.0.2.1"
ATTRS = PathAttrs()


class FakeStage:
    """Accepts every route except those in `reject`; keeps what it accepted per peer."""

    def __init__(self):
        self.accepted = {}
        self.reject = set()
        self.limit = None  # max-prefix teardown once a peer holds more than this many prefixes

    def origin(self, peer):
        return Origin(SourceKind.EBGP, peer)

    def receive(self, peer, prefix, nexthop, attrs):
        mine = self.accepted.setdefault(peer, set())
        if prefix in self.reject:
            was = prefix in mine
            mine.discard(prefix)
            return (None, Update(prefix, self.origin(peer), None) if was else None, "ok")
        if self.limit is not None and prefix not in mine and len(mine) >= self.limit:
            return (None, None, "teardown")
        mine.add(prefix)
        cand = Candidate(self.origin(peer), 20, nexthops(NextHop(nexthop)))
        return (None, Update(prefix, self.origin(peer), cand), "ok")  # (verdict, update, max-prefix)

    def receive_batch(self, peer, prefixes, nexthop, attrs, out, stale=None):
        """As `ImportStage.receive_batch`: stale prefixes re-announced leave `stale`, and go when now rejected."""
        decision = "ok"
        for prefix in prefixes:
            was_stale = bool(stale) and prefix in stale
            if was_stale:
                stale.discard(prefix)
            _verdict, update, d = self.receive(peer, prefix, nexthop, attrs)
            if update is None and was_stale:
                update = Update(prefix, self.origin(peer), None)
            if update is not None:
                out.append(update)
            if d != "ok" and (decision == "ok" or d == "teardown"):
                decision = d
        return decision, None

    def withdraw(self, peer, prefix):
        if prefix in self.accepted.get(peer, set()):
            self.accepted[peer].discard(prefix)
            return Update(prefix, self.origin(peer), None)
        return None

    def peer_down(self, peer, now):
        self.accepted[peer] = set()

    def accepted_prefixes(self, peer):
        return sorted(self.accepted.get(peer, ()))


def announce(*prefixes, peer=PEER, family=Family.IPV4_UNICAST):
    return RouteUpdate(peer, family, tuple(Announced(P(p), "10.0.0.1", ATTRS) for p in prefixes))


def withdrawn(out):
    return sorted(str(u.prefix) for u in out.updates if u.candidate is None)


def source(gr=True):
    return BgpSource(FakeStage(), [BgpPeerSettings(PEER, (Family.IPV4_UNICAST,), gr)], speaker_stale_seconds=30)


def established(gr_time: int, *prefixes: str) -> BgpSource:
    """A session up whose peer's OPEN asked for graceful restart, with `prefixes` received."""
    src = source()
    src.handle(Open(PEER, 65001, 90, "1.1.1.1", (Family.IPV4_UNICAST,), GracefulRestart(gr_time)), 0)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce(*prefixes), 1)
    return src


def test_session_down_without_graceful_restart_withdraws_everything_at_once():
    src = source()
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    assert len(src.handle(announce("10.1.0.0/16", "10.2.0.0/16"), 1).updates) == 2
    out = src.handle(PeerState(PEER, PeerStatus.DOWN, "hold timer"), 2)
    assert withdrawn(out) == ["10.1.0.0/16", "10.2.0.0/16"] and out.timers == []


def test_graceful_restart_keeps_routes_then_eor_sweeps_what_was_not_reannounced():
    src = established(120, "10.1.0.0/16", "10.2.0.0/16")
    down = src.handle(PeerState(PEER, PeerStatus.DOWN), 2)
    assert down.updates == [] and down.timers == [(120, PEER)]
    src.handle(PeerState(PEER, PeerStatus.UP), 10)
    src.handle(announce("10.1.0.0/16"), 11)
    out = src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 12)
    assert withdrawn(out) == ["10.2.0.0/16"] and out.synced == [PEER]
    assert src.stale_timer(PEER, 122).updates == []  # nothing left stale


def test_graceful_restart_timer_withdraws_stale_routes_when_the_peer_stays_away():
    src = established(60, "10.1.0.0/16")
    src.handle(PeerState(PEER, PeerStatus.DOWN), 2)
    assert src.stale_timer(PEER, 30).updates == []  # not yet
    assert withdrawn(src.stale_timer(PEER, 62)) == ["10.1.0.0/16"]


def test_gr_disabled_locally_ignores_the_peers_capability():
    src = source(gr=False)
    src.handle(Open(PEER, 65001, 90, "1.1.1.1", (Family.IPV4_UNICAST,), GracefulRestart(120)), 0)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("10.1.0.0/16"), 1)
    assert withdrawn(src.handle(PeerState(PEER, PeerStatus.DOWN), 2)) == ["10.1.0.0/16"]


def test_speaker_restart_makes_routes_stale_and_reannounce_rejected_removes_them():
    src = source(gr=False)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"), 1)
    out = src.handle(SpeakerRestarted(1, "killed"), 2)
    assert out.updates == [] and out.timers == [(30, PEER)]
    src.stage.reject.add(P("10.2.0.0/16"))
    src.handle(PeerState(PEER, PeerStatus.UP), 3)
    out = src.handle(announce("10.1.0.0/16", "10.2.0.0/16"), 4)
    assert withdrawn(out) == ["10.2.0.0/16"]  # stale, re-announced, now rejected: removed
    assert withdrawn(src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 5)) == ["10.3.0.0/16"]


def test_eor_needs_every_family_of_the_peer():
    src = BgpSource(FakeStage(), [BgpPeerSettings(PEER, (Family.IPV4_UNICAST, Family.IPV6_UNICAST))])
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    assert src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 1).synced == []
    assert src.handle(EndOfRib(PEER, Family.IPV6_UNICAST), 1).synced == [PEER]


def test_withdraw_of_a_stale_prefix_removes_it():
    src = established(60, "10.1.0.0/16")
    src.handle(PeerState(PEER, PeerStatus.DOWN), 2)
    src.handle(PeerState(PEER, PeerStatus.UP), 3)
    out = src.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, withdrawn=(P("10.1.0.0/16"),)), 4)
    assert src.sessions[PEER].stale == set()
    # the stage had forgotten it (peer down): the source itself must withdraw the stale route
    assert withdrawn(out) == ["10.1.0.0/16"]


def test_peers_reported_down_because_exabgp_died_go_stale_not_away():
    src = source(gr=False)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("10.1.0.0/16"), 1)
    src.handle(SpeakerDown("exited with signal 9"), 2)  # the supervisor's structured fact, then
    out = src.handle(PeerState(PEER, PeerStatus.DOWN, "speaker exited with signal 9"), 2)
    assert out.updates == [] and out.timers == [(30, PEER)]
    src.handle(SpeakerRestarted(1), 3)
    src.handle(PeerState(PEER, PeerStatus.UP), 4)
    src.handle(announce("10.1.0.0/16"), 5)
    assert withdrawn(src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 6)) == []


def test_failed_reconnect_attempts_do_not_extend_the_stale_deadline():
    src = established(60, "10.1.0.0/16")
    assert src.handle(PeerState(PEER, PeerStatus.DOWN), 2).timers == [(60, PEER)]
    for t in (10, 20, 30):  # TCP connects, the OPEN exchange fails
        src.handle(PeerState(PEER, PeerStatus.CONNECTED), t)
        assert src.handle(PeerState(PEER, PeerStatus.DOWN), t + 1).timers == []
    assert withdrawn(src.stale_timer(PEER, 62)) == ["10.1.0.0/16"]


def test_a_notification_ends_graceful_restart_and_withdraws_at_once():
    src = established(120, "10.1.0.0/16")
    src.handle(Notification(PEER, 6, 2), 2)  # as ExaBGP: the NOTIFICATION, then the state
    out = src.handle(PeerState(PEER, PeerStatus.DOWN, "notification received (6,2)"), 2)
    assert withdrawn(out) == ["10.1.0.0/16"] and out.timers == []


def test_a_notification_we_sent_ends_graceful_restart_too():
    src = established(120, "10.1.0.0/16")
    src.handle(Notification(PEER, 4, 0, b"", "send"), 2)  # hold timer expired (the codec's event)
    out = src.handle(PeerState(PEER, PeerStatus.DOWN, "notification sent (4,0)"), 2)
    assert withdrawn(out) == ["10.1.0.0/16"] and out.timers == []


def test_the_reason_text_decides_nothing_only_the_events_do():
    src = established(120, "10.1.0.0/16")
    # no Notification event and no SpeakerDown: a plain session loss, graceful restart applies
    out = src.handle(PeerState(PEER, PeerStatus.DOWN, "notification received (6,2)"), 2)
    assert out.updates == [] and out.timers == [(120, PEER)]
    # a NOTIFICATION of an earlier session does not end the next one
    src.handle(PeerState(PEER, PeerStatus.UP), 3)
    src.handle(announce("10.1.0.0/16"), 4)
    src.handle(PeerState(PEER, PeerStatus.DOWN, "speaker exited with signal 9"), 5)
    assert src.sessions[PEER].stale == {P("10.1.0.0/16")}
    src.handle(PeerState(PEER, PeerStatus.UP), 6)
    assert withdrawn(src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 7)) == ["10.1.0.0/16"]
    src.handle(Notification(PEER, 6, 2), 8)
    src.handle(PeerState(PEER, PeerStatus.DOWN, "notification received (6,2)"), 8)
    src.handle(PeerState(PEER, PeerStatus.UP), 9)
    src.handle(announce("10.2.0.0/16"), 10)
    assert src.handle(PeerState(PEER, PeerStatus.DOWN, "closing connection"), 11).timers == [(120, PEER)]


def test_our_max_prefix_teardown_withdraws_every_family_at_once_under_graceful_restart():
    """Issue 14.4: with graceful restart negotiated ExaBGP closes the session without the Cease;
    the routes of the peer we threw out, all families, must go at once, not stay stale for the
    restart time (an IPv6 route outlived our Cease by 114 s)."""
    both = (Family.IPV4_UNICAST, Family.IPV6_UNICAST)
    src = BgpSource(FakeStage(), [BgpPeerSettings(PEER, both)], speaker_stale_seconds=30)
    src.handle(Open(PEER, 65001, 90, "1.1.1.1", both, GracefulRestart(120, False, both, both)), 0)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("2001:db8:1::/48", family=Family.IPV6_UNICAST), 1)
    src.handle(announce("10.1.0.0/16"), 1)
    src.stage.limit = 2
    out = src.handle(announce("10.2.0.0/16"), 2)
    assert out.commands == [(PEER, "teardown")]
    out = src.handle(PeerState(PEER, PeerStatus.DOWN,
                               "graceful restarted negotiated, closing without sending any notification"), 3)
    assert withdrawn(out) == ["10.1.0.0/16", "2001:db8:1::/48"] and out.timers == []
    assert src.sessions[PEER].stale == set()


def test_removing_a_peer_withdraws_its_accepted_and_its_stale_routes():
    src = established(60, "10.1.0.0/16")
    src.handle(PeerState(PEER, PeerStatus.DOWN), 2)  # 10.1.0.0/16 is now stale
    src.handle(PeerState(PEER, PeerStatus.UP), 3)
    src.handle(announce("10.2.0.0/16"), 4)  # accepted again
    assert sorted(str(u.prefix) for u in src.remove_peer(PEER)) == ["10.1.0.0/16", "10.2.0.0/16"]
    assert PEER not in src.sessions and src.remove_peer(PEER) == []


def test_explicit_withdrawals_of_this_sessions_routes_are_listed_for_the_gate():
    src = source(gr=False)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.stage.reject.add(P("10.3.0.0/16"))
    src.handle(announce("10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"), 1)
    out = src.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, withdrawn=(
        P("10.1.0.0/16"), P("10.3.0.0/16"), P("10.9.0.0/16"))), 2)
    # 10.3 was rejected, 10.9 never announced: nothing of theirs is in the RIB, nothing to release
    assert out.withdrawn == [P("10.1.0.0/16")] and withdrawn(out) == ["10.1.0.0/16"]


def gr_open(gr):
    return Open(PEER, 65001, 9, "1.1.1.1", (Family.IPV4_UNICAST, Family.IPV6_UNICAST), gr)


def two_families(gr):
    src = BgpSource(FakeStage(), [BgpPeerSettings(PEER, (Family.IPV4_UNICAST, Family.IPV6_UNICAST))])
    src.handle(gr_open(gr), 0)
    return src


def test_without_graceful_restart_the_first_keepalive_after_up_is_an_implicit_end_of_rib():
    """RFC 4724 3: only the capability promises End-of-RIB. Without it, the peer's first
    KEEPALIVE after its session came up follows its initial UPDATEs: synced, every family."""
    src = two_families(None)
    assert src.handle(Keepalive(PEER), 0).synced == []  # the OPENCONFIRM one: before the session is up
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("10.1.0.0/16"), 1)
    assert src.handle(Keepalive(PEER), 4).synced == [PEER]
    assert src.handle(Keepalive(PEER), 7).synced == []  # once
    # next session: no second "synced" (the gate opened once), but End-of-RIB state is per session
    src.handle(PeerState(PEER, PeerStatus.DOWN), 8)
    src.handle(PeerState(PEER, PeerStatus.UP), 9)
    assert src.sessions[PEER].eor == set()
    src.handle(Keepalive(PEER), 12)
    assert src.sessions[PEER].eor == {Family.IPV4_UNICAST, Family.IPV6_UNICAST}


def test_with_the_capability_only_end_of_rib_counts():
    for gr in (GracefulRestart(120), GracefulRestart(0)):  # also "no families, time 0": EoR promised
        src = two_families(gr)
        src.handle(PeerState(PEER, PeerStatus.UP), 0)
        assert src.handle(Keepalive(PEER), 3).synced == []
        src.handle(EndOfRib(PEER, Family.IPV4_UNICAST), 4)
        assert src.handle(EndOfRib(PEER, Family.IPV6_UNICAST), 4).synced == [PEER]


def test_implicit_end_of_rib_sweeps_routes_left_stale_by_a_speaker_restart():
    src = BgpSource(FakeStage(), [BgpPeerSettings(PEER, (Family.IPV4_UNICAST,), False)], speaker_stale_seconds=30)
    src.handle(Open(PEER, 65001, 9, "1.1.1.1", (Family.IPV4_UNICAST,), None), 0)
    src.handle(PeerState(PEER, PeerStatus.UP), 0)
    src.handle(announce("10.1.0.0/16", "10.2.0.0/16"), 1)
    src.handle(SpeakerRestarted(1, "killed"), 2)
    src.handle(Open(PEER, 65001, 9, "1.1.1.1", (Family.IPV4_UNICAST,), None), 3)
    src.handle(PeerState(PEER, PeerStatus.UP), 3)
    src.handle(announce("10.1.0.0/16"), 4)
    out = src.handle(Keepalive(PEER), 7)
    assert withdrawn(out) == ["10.2.0.0/16"]  # not re-sent before the KEEPALIVE: gone
