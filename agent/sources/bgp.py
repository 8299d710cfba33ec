"""BGP source: speaker events -> import stage -> RIB updates, with session and graceful-restart state.

DOC: pure logic owned by the agent's core task. `handle(event, now)` takes one speaker event and
returns a `BgpOutput`: RIB updates, commands for the speaker (max-prefix teardown), peers whose
initial sync finished (for the restart gate), and timers to arm.

Sessions and graceful restart (RFC 4724, helper side):
* A session going down without graceful restart withdraws every route the peer had, at once
  (ExaBGP sends no withdraws itself).
* If the peer's OPEN carried the graceful-restart capability (and GR is on for it), its routes stay
  in the RIB, and so in the kernel, marked stale, for the restart time the peer asked for. If the
  session comes back, each re-announced prefix leaves the stale set; the peer's End-of-RIB (for all
  its families) sweeps the prefixes it did not re-announce. If the timer fires first, all stale
  routes are withdrawn.
* A session ended by a NOTIFICATION, in either direction (a `Notification` event for the peer
  since its session came up: the codec reports the ones ExaBGP sent too), or torn down by us (a
  max-prefix teardown decided here; ExaBGP closes a graceful-restart session without a
  NOTIFICATION then), is not a restart: every route of the peer, all families, is withdrawn at once.
* When ExaBGP itself dies (`SpeakerDown`, before the supervisor's ``PeerState(down)`` for each
  peer; then `SpeakerRestarted`) every peer's routes go stale the same way, for the configured
  stale time, whatever was negotiated: the peers did not go anywhere.
These are decided from those events, never from ExaBGP's free-text reasons.
End-of-RIB from a peer also reports the peer as synced (`BgpOutput.synced`), which the agent's
restart gate waits for. Only a peer whose OPEN carried the graceful-restart capability promised
one (RFC 4724 section 3: a speaker announces the capability, even without any family, to say it
will send End-of-RIB; BIRD without graceful restart and GoBGP send none). For a peer without it,
its first KEEPALIVE after the session came up stands for End-of-RIB of every family (an implicit
End-of-RIB, as FRR's update-delay takes it): KEEPALIVEs and UPDATEs arrive in the order sent,
and a peer sends its first KEEPALIVE a keepalive interval (hold time / 3) after its last message,
i.e. after its initial UPDATEs (BIRD restarts that timer with every message it sends).

Explicit withdrawals of routes the peer announced in this session are listed in
`BgpOutput.withdrawn`: the restart gate holds routes adopted from before the restart, never what
the peer says now, so the agent applies them at once (`FibState.release`).

The import stage (guard, policy, max-prefix, candidates) is `agent/import/stage.py`; this module
only routes events to it and keeps the per-peer session state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..core.model import Prefix, Update
from ..core.bgp import (
    EndOfRib,
    Family,
    Keepalive,
    Notification,
    Open,
    PeerState,
    PeerStatus,
    RouteUpdate,
    SpeakerRestarted,
)
from ..core.bgp_speaker import SpeakerDown


@dataclass(frozen=True, slots=True)
class BgpPeerSettings:
    address: str
    families: tuple[Family, ...] = (Family.IPV4_UNICAST,)
    graceful_restart: bool = True  # helper mode: keep the peer's routes over its restart


@dataclass(slots=True)
class BgpOutput:
    updates: list[Update] = field(default_factory=list)
    commands: list[tuple[str, str]] = field(default_factory=list)  # (peer, "teardown") ...
    synced: list[str] = field(default_factory=list)
    withdrawn: list[Prefix] = field(default_factory=list)  # explicit withdrawals of this session's routes
    timers: list[tuple[float, str]] = field(default_factory=list)  # (seconds, peer): stale timer
    logs: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PeerSession:
    settings: BgpPeerSettings
    state: PeerStatus = PeerStatus.DOWN
    since: float = 0.0
    gr_time: int | None = None  # from the peer's OPEN; None: no graceful restart
    eor_promised: bool = True  # the peer's OPEN had the GR capability: it sends End-of-RIB
    eor: set[Family] = field(default_factory=set)
    stale: set[Prefix] = field(default_factory=set)
    stale_until: float | None = None
    synced: bool = False
    last_reason: str = ""
    ended: bool = False  # a NOTIFICATION (sent or received) or our teardown ends this session


class BgpSource:
    def __init__(self, stage, peers: Iterable[BgpPeerSettings], speaker_stale_seconds: float = 120) -> None:
        self.stage = stage
        self.speaker_stale_seconds = speaker_stale_seconds
        self.sessions: dict[str, PeerSession] = {p.address: PeerSession(p) for p in peers}
        self.speaker_down = False  # between SpeakerDown and SpeakerRestarted

    def set_peer(self, settings: BgpPeerSettings) -> None:
        """Add a peer or change its settings (its session state is kept)."""
        s = self.sessions.get(settings.address)
        if s is None:
            self.sessions[settings.address] = PeerSession(settings)
        else:
            s.settings = settings

    def remove_peer(self, peer: str) -> list[Update]:
        """The peer left the configuration: withdraw its accepted and its stale routes."""
        s = self.sessions.pop(peer, None)
        if s is None:
            return []
        origin = self.stage.origin(peer)
        gone = set(self.stage.accepted_prefixes(peer)) | s.stale
        return [Update(p, origin, None) for p in gone]

    def handle(self, ev, now: float, out: BgpOutput | None = None) -> BgpOutput:
        """One speaker event; `out`: add to this output and return it (else a new one)."""
        if out is None:
            out = BgpOutput()
        if isinstance(ev, RouteUpdate):
            self._update(ev, out)
        elif isinstance(ev, EndOfRib):
            self._eor(ev, out)
        elif isinstance(ev, Keepalive):
            s = self.sessions.get(ev.peer)
            if s is not None and not s.eor_promised and s.state == PeerStatus.UP \
                    and not set(s.settings.families) <= s.eor:  # the first one: implicit End-of-RIB
                self._synced(s, set(s.settings.families), out)
        elif isinstance(ev, PeerState):
            self._state(ev, now, out)
        elif isinstance(ev, Open):
            s = self.sessions.get(ev.peer)
            if s is not None:
                gr = ev.graceful_restart
                s.gr_time = gr.time if gr is not None and s.settings.graceful_restart else None
                s.eor_promised = gr is not None
        elif isinstance(ev, Notification):
            s = self.sessions.get(ev.peer)
            if s is not None:
                s.ended = True
        elif isinstance(ev, SpeakerDown):
            self.speaker_down = True
        elif isinstance(ev, SpeakerRestarted):
            self.speaker_down = False
            for s in self.sessions.values():
                self._go_stale(s, self.speaker_stale_seconds, now, out)
                s.state, s.since = PeerStatus.DOWN, now
        return out

    # ---- events ----
    def _update(self, ev: RouteUpdate, out: BgpOutput) -> None:
        s = self.sessions.get(ev.peer)
        if s is None:
            return
        stage = self.stage
        for prefix in ev.withdrawn:
            u = stage.withdraw(ev.peer, prefix)
            if u is None and s.stale and prefix in s.stale:
                u = Update(prefix, stage.origin(ev.peer), None)  # stale: the stage forgot it
            s.stale.discard(prefix)
            if u is not None:
                out.updates.append(u)
                out.withdrawn.append(prefix)
        announced = ev.announced
        i, n = 0, len(announced)
        if n == 1:  # one prefix (an UPDATE of its own attribute set: the costly case, per route)
            prefix, next_hop, attrs, _link_local = announced[0]
            decision, _verdict = stage.receive_batch(ev.peer, (prefix,), next_hop, attrs, out.updates, s.stale)
            if decision != "ok":
                self._max_prefix(ev.peer, s, decision, out)
            return
        while i < n:  # runs sharing one next hop and attribute set (a whole UPDATE, usually)
            _prefix, next_hop, attrs, _link_local = announced[i]
            j = i + 1
            while j < n and announced[j][2] is attrs and announced[j][1] == next_hop:
                j += 1
            decision, _verdict = stage.receive_batch(ev.peer, [a[0] for a in announced[i:j]], next_hop,
                                                     attrs, out.updates, s.stale)
            i = j
            if decision != "ok":  # MaxPrefixDecision is a str enum: no import of the stage needed
                self._max_prefix(ev.peer, s, decision, out)

    @staticmethod
    def _max_prefix(peer: str, s: PeerSession, decision: str, out: BgpOutput) -> None:
        if decision == "teardown":
            s.ended = True
            out.commands.append((peer, "teardown"))
            out.logs.append(f"peer {peer}: max-prefix exceeded: tearing the session down")
        elif decision == "warn":
            out.logs.append(f"peer {peer}: max-prefix limit exceeded")

    def _eor(self, ev: EndOfRib, out: BgpOutput) -> None:
        s = self.sessions.get(ev.peer)
        if s is not None:
            self._synced(s, {ev.family}, out)

    def _synced(self, s: PeerSession, families: set[Family], out: BgpOutput) -> None:
        """End-of-RIB (explicit, or implicit: every family) for `families`: once every family
        of the session has had one, sweep the stale routes and report the peer synced."""
        s.eor |= families
        if set(s.settings.families) <= s.eor:
            self._sweep(s, out)
            if not s.synced:
                s.synced = True
                out.synced.append(s.settings.address)

    def _state(self, ev: PeerState, now: float, out: BgpOutput) -> None:
        s = self.sessions.get(ev.peer)
        if s is None:
            return
        old = s.state
        s.state, s.since, s.last_reason = ev.state, now, ev.reason
        if ev.state == PeerStatus.UP:
            s.eor.clear()
            s.ended = False
        elif ev.state == PeerStatus.DOWN and old != PeerStatus.DOWN:
            if self.speaker_down:  # ExaBGP died, not the peer: keep forwarding
                self._go_stale(s, self.speaker_stale_seconds, now, out)
            elif s.gr_time and not s.ended:
                # RFC 4724: graceful restart covers a session that dropped; a NOTIFICATION (an
                # administrative shutdown, an error) or our teardown ends it: the routes go at once
                self._go_stale(s, s.gr_time, now, out)
            else:
                origin = self.stage.origin(ev.peer)
                out.updates += [Update(p, origin, None) for p in self.stage.accepted_prefixes(ev.peer)]
                self.stage.peer_down(ev.peer, now)
            s.ended = False

    # ---- stale handling ----
    def _go_stale(self, s: PeerSession, seconds: float, now: float, out: BgpOutput) -> None:
        s.stale |= set(self.stage.accepted_prefixes(s.settings.address))
        self.stage.peer_down(s.settings.address, now)
        if s.stale and s.stale_until is None:  # reconnect attempts do not extend the deadline
            s.stale_until = now + seconds
            out.timers.append((seconds, s.settings.address))

    def stale_timer(self, peer: str, now: float) -> BgpOutput:
        """The stale timer of `peer` fired: withdraw what was not re-learned."""
        out = BgpOutput()
        s = self.sessions.get(peer)
        if s is not None and s.stale_until is not None and now >= s.stale_until - 0.001:
            out.logs.append(f"peer {peer}: stale timer expired: {len(s.stale)} stale routes withdrawn")
            self._sweep(s, out)
        return out

    def _sweep(self, s: PeerSession, out: BgpOutput) -> None:
        origin = self.stage.origin(s.settings.address)
        out.updates += [Update(p, origin, None) for p in s.stale]
        s.stale.clear()
        s.stale_until = None
