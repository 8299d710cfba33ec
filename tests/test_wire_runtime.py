"""The BGP runtime with the wire codec's `UpdateError`: counted per peer and action (the metric),
logged with the peer, and a session reset sent to that peer as ``neighbor PEER notify ...``."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest

from agent.api.metrics import Metrics
from agent.api.readview import BgpCounts, FibCounts
from agent.core.bgp import Family, PeerState, PeerStatus, SendNotification, UpdateAction, UpdateError
from agent.daemon.update_errors import UpdateErrors
from agent.speaker.codec import Decoder
from agent.speaker.encoder import encode
from testlab import bgpwire as w
from tests.bgpruntime_lab import recording_runtime, tor1_config

PEER = "10.0.0.1"


@pytest.fixture
def rt(tmp_path):
    return recording_runtime(tor1_config(), tmp_path)


def raw(body: bytes, peer: str = PEER) -> bytes:
    return f"raw-update {peer} 1 {body.hex()}\n".encode()


def test_session_reset_sends_a_notification_to_that_peer(rt, caplog):
    bad = w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("10.0.0.1"), w.attr(99, b"x", flags=0x40)],
                   nlri=w.nlri(["192.0.2.0/24"]))
    (ev,) = Decoder().decode(raw(bad))
    with caplog.at_level(logging.WARNING, logger="route_agent.bgp"):
        rt.handle(ev, 0.0)
    assert rt.sent == [SendNotification(PEER, 3, 2, w.attr(99, b"x", flags=0x40))]
    assert encode(rt.sent[0]) == "neighbor 10.0.0.1 notify 3 2 40630178"
    assert "peer 10.0.0.1: malformed UPDATE, session-reset (3/2): unrecognized well-known attribute 99" in caplog.text
    assert rt.update_errors.counts == {(PEER, "session-reset"): 1}


def test_treat_as_withdraw_is_counted_and_the_routes_withdrawn(rt):
    good = w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("10.0.0.1")], nlri=w.nlri(["192.0.2.0/24"]))
    bad = w.update(attrs=[w.attr(1, b"\0\0"), w.as_path([65001]), w.next_hop("10.0.0.1")], nlri=w.nlri(["192.0.2.0/24"]))
    decoder = Decoder()
    rt.source.handle(PeerState(PEER, PeerStatus.UP), 0.0)
    (ev,) = decoder.decode(raw(good))
    out = rt.handle(ev, 0.0)
    assert [u.candidate is not None for u in out.updates] == [True]
    err, update = decoder.decode(raw(bad))
    assert err.action is UpdateAction.TREAT_AS_WITHDRAW
    assert rt.handle(err, 0.0).updates == []
    out = rt.handle(update, 0.0)
    assert [(str(u.prefix), u.candidate) for u in out.updates] == [("192.0.2.0/24", None)]
    assert not any(isinstance(c, SendNotification) for c in rt.sent)
    assert rt.update_errors.counts == {(PEER, "treat-as-withdraw"): 1}


def test_no_notification_for_an_unknown_peer_or_an_old_exabgp(rt):
    ev = UpdateError("10.9.9.9", UpdateAction.SESSION_RESET, "x", 3, 1)
    rt.handle(ev, 0.0)
    rt.speaker.restarts += 1  # events of the ExaBGP that died, not handled yet
    rt.handle(UpdateError(PEER, UpdateAction.SESSION_RESET, "x", 3, 1), 0.0)
    assert rt.sent == []
    assert rt.update_errors.counts[("10.9.9.9", "session-reset")] == 1


def test_logging_is_bounded_per_peer_and_action(caplog):
    errors = UpdateErrors()
    ev = UpdateError(PEER, UpdateAction.TREAT_AS_WITHDRAW, "ORIGIN of 2 octets (expected 1)", 3, 5, Family.IPV4_UNICAST)
    with caplog.at_level(logging.WARNING, logger="route_agent.bgp"):
        for _ in range(2500):
            assert errors.handle(ev) is None
    assert len(caplog.records) == errors.LOG_FIRST + 2
    assert "[2000 so far]" in caplog.records[-1].getMessage()
    assert errors.counts[(PEER, "treat-as-withdraw")] == 2500


def test_metric(rt):
    rt.handle(UpdateError(PEER, UpdateAction.ATTRIBUTE_DISCARD, "repeated MED discarded", 3, 1), 0.0)
    metrics = Metrics()

    class View:
        def rib_counts(self):
            return {}

        def fib_counts(self):
            return FibCounts(0, 0, 0, 0, 0)

        def ready(self):
            return True

        def bgp_counts(self):
            return BgpCounts(peers=(PEER,), sessions={}, received={}, accepted={}, rejected={}, held={},
                             installed={}, advertised={}, announces={}, withdraws={}, updates=0,
                             speaker_restarts=0, update_errors=dict(rt.update_errors.counts))

        def k8s_counts(self):
            return None

    metrics.bind(View())
    text = generate_latest(metrics.registry).decode()
    assert 'route_agent_bgp_update_errors_total{action="attribute-discard",peer="10.0.0.1"} 1.0' in text


@pytest.mark.parametrize("cmd, text", [
    (SendNotification("10.0.0.1", 3, 1), "neighbor 10.0.0.1 notify 3 1"),
    (SendNotification("fd00::0001", 3, 9, b"\x80\x0e\x00"), "neighbor fd00::1 notify 3 9 800e00"),
    (SendNotification("10.0.0.1", 6, 1, bytes(4075)), "neighbor 10.0.0.1 notify 6 1 " + "00" * 4075),
])
def test_send_notification_text(cmd, text):
    assert encode(cmd) == text


@pytest.mark.parametrize("cmd", [
    SendNotification("", 3, 1), SendNotification("10.0.0.1", 0, 1), SendNotification("10.0.0.1", 256, 1),
    SendNotification("10.0.0.1", 3, 256), SendNotification("10.0.0.1", 3, 1, bytes(4076)),
    SendNotification("not-an-address", 3, 1),
])
def test_malformed_send_notification_is_refused(cmd):
    with pytest.raises(ValueError):
        encode(cmd)
