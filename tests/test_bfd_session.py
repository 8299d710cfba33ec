"""The BFD session state machine against a fake clock: handshake, timers, Poll/Final, detection
time, jitter (RFC 5880 6.2, 6.5, 6.8)."""

import random

from agent.bfd.packet import ControlPacket, Diag, State
from agent.bfd.session import SLOW_TX_US, Session, Timers


def peer_pkt(state, mine=99, yours=0, tx=300_000, rx=300_000, mult=3, **kw):
    return ControlPacket(state, mine, yours, tx, rx, mult, **kw)


def up_session(now=0.0, timers=Timers(), rng=None):
    s = Session("192.0.2.1", 42, timers, now, rng or random.Random(1))
    s.tick(now)
    assert s.receive(peer_pkt(State.DOWN), now).new is State.INIT
    assert s.receive(peer_pkt(State.UP, yours=42), now).new is State.UP
    return s


def test_three_way_handshake_and_first_packet():
    s = Session("192.0.2.1", 42, Timers(), 0.0, random.Random(1))
    assert s.deadline() == float("-inf")  # the first packet goes out at once
    out, change = s.tick(0.0)
    assert change is None and len(out) == 1
    p = out[0]
    assert p.state is State.DOWN and p.my_discriminator == 42 and p.your_discriminator == 0
    assert p.desired_min_tx == SLOW_TX_US  # not Up: at least one second (6.8.3)
    assert p.required_min_rx == 300_000 and p.detect_mult == 3
    c = s.receive(peer_pkt(State.DOWN), 0.1)
    assert (c.old, c.new) == (State.DOWN, State.INIT)
    out, _ = s.tick(0.1)  # state change: a packet at once, carrying their discriminator
    assert out[0].state is State.INIT and out[0].your_discriminator == 99
    c = s.receive(peer_pkt(State.UP, yours=42), 0.2)
    assert c.new is State.UP and c.diag is Diag.NONE


def test_down_straight_to_up_on_init():
    s = Session("p", 1, Timers(), 0.0)
    assert s.receive(peer_pkt(State.INIT, yours=1), 0.0).new is State.UP


def test_down_ignores_up():
    s = Session("p", 1, Timers(), 0.0)
    assert s.receive(peer_pkt(State.UP, yours=1), 0.0) is None and s.state is State.DOWN


def test_going_up_starts_poll_with_faster_tx_and_final_ends_it():
    s = up_session()
    out, _ = s.tick(0.0)
    p = out[0]
    assert p.poll and p.desired_min_tx == 300_000  # advertised the configured interval, polling
    assert s.tx_interval() == 0.3  # a decrease takes effect at once
    s.receive(peer_pkt(State.UP, yours=42, final=True), 0.05)
    assert not s.polling
    out, _ = s.tick(s.next_tx)
    assert not out[0].poll


def test_poll_from_peer_answered_at_once_with_final():
    s = up_session()
    s.tick(0.0)
    s.receive(peer_pkt(State.UP, yours=42, poll=True), 0.01)
    assert s.deadline() == float("-inf")
    out, _ = s.tick(0.01)
    assert len(out) == 1 and out[0].final and not out[0].poll


def test_tx_interval_increase_waits_for_final():
    s = up_session()
    s.receive(peer_pkt(State.UP, yours=42, final=True), 0.0)
    s.set_timers(Timers(min_tx=1000, min_rx=300, multiplier=3), 1.0)
    assert s.polling and s.desired_tx == 1_000_000
    assert s.tx_interval() == 0.3  # still the old one
    s.receive(peer_pkt(State.UP, yours=42, final=True), 1.1)
    assert s.tx_interval() == 1.0


def test_rx_decrease_waits_for_final_in_detection_time():
    s = up_session(timers=Timers(min_rx=500, min_tx=300, multiplier=3))
    s.receive(peer_pkt(State.UP, yours=42, final=True, tx=100_000), 0.0)
    assert s.detection_time() == 3 * 0.5
    s.set_timers(Timers(min_rx=100, min_tx=300, multiplier=3), 1.0)
    s.receive(peer_pkt(State.UP, yours=42, tx=100_000), 1.0)
    assert s.detection_time() == 3 * 0.5  # the old receive interval until the Final
    s.receive(peer_pkt(State.UP, yours=42, tx=100_000, final=True), 1.1)
    assert abs(s.detection_time() - 0.3) < 1e-9


def test_detection_time_uses_remote_multiplier_and_slower_of_rx_and_remote_tx():
    s = up_session(timers=Timers(min_rx=100, min_tx=100, multiplier=3))
    s.receive(peer_pkt(State.UP, yours=42, tx=250_000, mult=5), 1.0)
    assert abs(s.detection_time() - 5 * 0.25) < 1e-9
    assert s.detect_at == 1.0 + s.detection_time()


def test_detection_time_expiry_takes_session_down():
    s = up_session()
    s.receive(peer_pkt(State.UP, yours=42, final=True), 1.0)
    at = s.detect_at
    assert abs(at - 1.9) < 1e-9
    _, change = s.tick(at - 0.001)
    assert change is None and s.state is State.UP
    out, change = s.tick(at)
    assert change.new is State.DOWN and change.diag is Diag.DETECTION_TIME_EXPIRED
    assert s.remote_discr == 0
    assert out and out[0].state is State.DOWN and out[0].diag is Diag.DETECTION_TIME_EXPIRED
    assert out[0].desired_min_tx == SLOW_TX_US  # back to slow while not Up, at once


def test_peer_down_and_admin_down_take_us_down_with_diag_3():
    s = up_session()
    c = s.receive(peer_pkt(State.DOWN, yours=42), 1.0)
    assert c.new is State.DOWN and c.diag is Diag.NEIGHBOR_DOWN
    s = up_session()
    c = s.receive(peer_pkt(State.ADMIN_DOWN, yours=42), 1.0)
    assert c.new is State.DOWN and c.diag is Diag.NEIGHBOR_DOWN


def test_admin_down_local_ignores_peer():
    s = up_session()
    assert s.admin_down(1.0).new is State.ADMIN_DOWN
    out, _ = s.tick(1.0)
    assert out[0].state is State.ADMIN_DOWN and out[0].diag is Diag.ADMIN_DOWN
    assert s.receive(peer_pkt(State.UP, yours=42), 1.1) is None and s.state is State.ADMIN_DOWN


def test_jitter_between_75_and_100_percent():
    s = up_session(rng=random.Random(7))
    s.receive(peer_pkt(State.UP, yours=42, final=True), 0.0)
    gaps = []
    t = s.next_tx
    for _ in range(2000):
        before = t
        s.tick(t)
        t = s.next_tx
        gaps.append(t - before)
        s.receive(peer_pkt(State.UP, yours=42), t)  # keep it up
    assert 0.3 * 0.75 - 1e-9 <= min(gaps) < 0.3 * 0.76
    assert 0.3 * 0.99 < max(gaps) <= 0.3 + 1e-9


def test_jitter_at_most_90_percent_with_multiplier_1():
    s = up_session(timers=Timers(multiplier=1), rng=random.Random(3))
    gaps = []
    for _ in range(500):
        t = s.next_tx
        s.tick(t)
        gaps.append(s.next_tx - t)
    assert max(gaps) <= s.tx_interval() * 0.9 + 1e-9


def test_tx_interval_is_slower_of_ours_and_remote_min_rx():
    s = up_session(timers=Timers(min_tx=100, min_rx=100, multiplier=3))
    s.receive(peer_pkt(State.UP, yours=42, rx=500_000), 0.0)
    assert s.tx_interval() == 0.5


def test_remote_min_rx_zero_stops_periodic_packets():
    s = up_session()
    s.tick(0.0)
    s.receive(peer_pkt(State.UP, yours=42, rx=0), 0.0)
    s.tick(0.0)
    assert s.deadline() == s.detect_at
    out, change = s.tick(0.8)
    assert out == [] and change is None


def test_shorter_remote_rx_reschedules_a_far_timer():
    s = Session("p", 1, Timers(min_tx=100, min_rx=100), 0.0, random.Random(1))
    s.tick(0.0)
    assert s.next_tx > 0.7  # slow (1 s) while Down
    s.receive(peer_pkt(State.DOWN, rx=50_000), 0.01)
    assert s.next_tx > 0.7  # still 1 s: our own desired TX is the slower one
