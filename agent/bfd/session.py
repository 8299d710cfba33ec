"""One BFD session's state machine (RFC 5880 sections 6.2, 6.5, 6.8): pure, with a clock handed in.

DOC: a `Session` is driven by two calls and asked one question, all taking the current time (in
seconds, any monotonic clock: the tests use a fake one):

* `receive(packet, now)`: a control packet of this session, already validated (`packet.decode`,
  the discriminator and TTL checks of the caller); returns a `Change` when the state changed;
* `tick(now)`: returns the packets due now and a `Change` when the detection time expired;
* `deadline()`: when `tick` must be called next (transmit time, detection time, or at once when
  a packet is urgent: a Final answer to a Poll, or the first packet after a state change, which
  speeds up the three-way handshake as BIRD and FRR do).

States follow section 6.2 (Down -> Init -> Up, a Down from the peer or the detection time takes
an Up session Down, AdminDown from the peer takes it Down with diagnostic 3).

Timers (section 6.8.3): while the session is not Up the desired transmit interval is at least
one second; the configured one is used once Up. Every change of what we advertise (going Up,
going Down, a new configuration) starts a Poll sequence (P bit on every packet until the peer
answers with F). An increase of our transmit interval and a decrease of our receive interval
take effect only once the Poll sequence is over; the others at once. The transmit interval is
max(our desired min TX, the peer's required min RX), each one jittered to 75-100 % (75-90 % with
a detect multiplier of 1, section 6.8.7). Detection time (section 6.8.4): the peer's detect
multiplier x max(our required min RX, the peer's desired min TX), restarted by every packet.
A peer whose required min RX is 0 gets no periodic packets (section 6.8.7). The detection time
passing in Down clears the remote discriminator (section 6.8.1).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .packet import ControlPacket, Diag, State

SLOW_TX_US = 1_000_000  # desired min TX while not Up (RFC 5880 6.8.3: at least one second)


@dataclass(frozen=True, slots=True)
class Timers:
    """Our side's settings, in milliseconds (frr-k8s/MetalLB defaults)."""

    min_rx: int = 300
    min_tx: int = 300
    multiplier: int = 3


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    old: State
    new: State
    diag: Diag  # ours: why we went down (1: detection time expired, 3: the peer said down)
    at: float


@dataclass(frozen=True, slots=True)
class SessionView:
    """What `show peers`, the metrics and the status show of one session."""

    key: str
    state: str
    remote_state: str
    diag: str
    local_discriminator: int
    remote_discriminator: int
    tx_interval_ms: float  # the negotiated (unjittered) transmit interval
    detection_ms: float | None  # the detection time now; None before a packet came
    since: float
    transitions: int
    error: str = ""  # the sockets could not be opened (no local address yet ...)


class Session:
    def __init__(self, key: str, discriminator: int, timers: Timers, now: float,
                 rng: random.Random | None = None) -> None:
        assert discriminator != 0
        self.key = key
        self.local_discr = discriminator
        self.timers = timers
        self.rng = rng or random.Random()
        self.state = State.DOWN
        self.diag = Diag.NONE
        self.remote_state = State.DOWN
        self.remote_discr = 0
        self.remote_min_rx = 1  # microseconds (section 6.8.1: initialised to 1)
        self.remote_desired_tx = 0
        self.remote_mult = 0
        self.desired_tx = SLOW_TX_US  # what we advertise
        self.required_rx = timers.min_rx * 1000
        self.tx_in_use = self.desired_tx  # what the timers use (differs during a Poll sequence)
        self.rx_in_use = self.required_rx
        self.polling = False
        self._final_due = False
        self._urgent = True  # the first packet goes out at once
        self.next_tx = now
        self.detect_at: float | None = None
        self.since = now
        self.transitions = 0

    # ---- timers ----
    def tx_interval(self) -> float:
        """Seconds between our packets, unjittered."""
        return max(self.tx_in_use, self.remote_min_rx) / 1e6

    def detection_time(self) -> float | None:
        if not self.remote_mult:
            return None
        return self.remote_mult * max(self.rx_in_use, self.remote_desired_tx) / 1e6

    def _jittered(self) -> float:
        low, high = (0.75, 0.9) if self.timers.multiplier == 1 else (0.75, 1.0)
        return self.tx_interval() * self.rng.uniform(low, high)

    def _retarget(self, now: float) -> None:
        """Advertise what the state and the configuration want; a change starts a Poll sequence."""
        want_tx = self.timers.min_tx * 1000
        if self.state is not State.UP:
            want_tx = max(want_tx, SLOW_TX_US)
        want_rx = self.timers.min_rx * 1000
        if (want_tx, want_rx) == (self.desired_tx, self.required_rx):
            return
        up = self.state is State.UP
        if not up or want_tx < self.tx_in_use:  # an increase waits for the Final (when Up)
            self.tx_in_use = want_tx
        if not up or want_rx > self.rx_in_use:  # a decrease waits for the Final (when Up)
            self.rx_in_use = want_rx
        self.desired_tx, self.required_rx = want_tx, want_rx
        self.polling = True
        self._reschedule(now)

    def _reschedule(self, now: float) -> None:
        """A shorter interval must not wait for a timer set from the longer one (6.8.3)."""
        if self.next_tx > now + self.tx_interval():
            self.next_tx = now + self._jittered()

    def set_timers(self, timers: Timers, now: float) -> None:
        self.timers = timers
        self._retarget(now)

    def deadline(self) -> float:
        if self._urgent or self._final_due:
            return float("-inf")
        times = [self.next_tx] if self.remote_min_rx else []
        if self.detect_at is not None:
            times.append(self.detect_at)
        return min(times, default=float("inf"))

    # ---- events ----
    def receive(self, p: ControlPacket, now: float) -> Change | None:
        self.remote_discr = p.my_discriminator
        self.remote_state = p.state
        old_rx = self.remote_min_rx
        self.remote_min_rx = p.required_min_rx
        self.remote_desired_tx = p.desired_min_tx
        self.remote_mult = p.detect_mult
        if p.final and self.polling:
            self.polling = False
            self.tx_in_use, self.rx_in_use = self.desired_tx, self.required_rx
        if p.poll:
            self._final_due = True
        if self.remote_min_rx < old_rx:
            self._reschedule(now)
        self.detect_at = now + self.detection_time()
        if self.state is State.ADMIN_DOWN:
            return None
        old, new = self.state, self.state
        if p.state is State.ADMIN_DOWN:
            if old is not State.DOWN:
                new, self.diag = State.DOWN, Diag.NEIGHBOR_DOWN
        elif old is State.DOWN:
            new = {State.DOWN: State.INIT, State.INIT: State.UP}.get(p.state, old)
        elif old is State.INIT:
            new = State.UP if p.state in (State.INIT, State.UP) else old
        elif p.state is State.DOWN:  # Up
            new, self.diag = State.DOWN, Diag.NEIGHBOR_DOWN
        return self._move(new, now) if new is not old else None

    def _move(self, new: State, now: float) -> Change:
        old = self.state
        self.state, self.since = new, now
        self.transitions += 1
        if new is State.UP:
            self.diag = Diag.NONE
        self._urgent = True
        self._retarget(now)
        return Change(self.key, old, new, self.diag, now)

    def tick(self, now: float) -> tuple[list[ControlPacket], Change | None]:
        change = None
        if self.detect_at is not None and now >= self.detect_at:
            self.detect_at = None
            self.remote_discr = 0  # section 6.8.1
            if self.state in (State.INIT, State.UP):
                self.diag = Diag.DETECTION_TIME_EXPIRED
                change = self._move(State.DOWN, now)
        out = []
        if self._final_due:  # the answer to a Poll, at once and without P (section 6.5)
            out.append(self._packet(final=True))
            self._final_due = False
            self._urgent = False
        if self._urgent or (self.remote_min_rx and now >= self.next_tx):
            if not out:
                out.append(self._packet(final=False))
            self._urgent = False
            self.next_tx = now + self._jittered()
        return out, change

    def _packet(self, final: bool) -> ControlPacket:
        return ControlPacket(self.state, self.local_discr, self.remote_discr, self.desired_tx,
                             self.required_rx, self.timers.multiplier, diag=self.diag,
                             poll=self.polling and not final, final=final)

    def admin_down(self, now: float) -> Change | None:
        """Stop the session on purpose (the peer removed): the peer sees AdminDown, not a failure."""
        if self.state is State.ADMIN_DOWN:
            return None
        self.diag = Diag.ADMIN_DOWN
        return self._move(State.ADMIN_DOWN, now)

    def view(self, error: str = "") -> SessionView:
        det = self.detection_time()
        return SessionView(self.key, self.state.label, self.remote_state.label, self.diag.name.lower(),
                           self.local_discr, self.remote_discr, self.tx_interval() * 1000,
                           None if det is None else det * 1000, self.since, self.transitions, error)
