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

ADD-PATH (RFC 7911): a `RouteUpdate` with path ids goes to the stage path by path
(`ImportStage.receive_batch(path_ids=)`, `withdraw_path`); the stale set then holds ``(prefix,
path_id)`` keys, so a restarted peer's End-of-RIB sweeps exactly the paths it did not re-send
(a path re-sent under another id is a new path; the old one is swept). Path ids need not survive
the restart, so while an ADD-PATH peer has stale paths the RIB updates of its UPDATEs are held
back (the import stage has taken them: counts, max-prefix) and applied in one batch with the
sweep at its End-of-RIB or stale timer, or as soon as no stale path is left (`_flush`): the RIB
diffs the route before and after the batch, so re-numbered paths move no kernel route.

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
    AnnouncedRuns,
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


def withdraw_all(origin, keys: Iterable) -> list[Update]:
    """RIB withdrawals of a peer's routes by key: a `Prefix`, or ``(prefix, path_id)`` (ADD-PATH)."""
    return [Update(k[0], origin, None, k[1]) if k.__class__ is tuple else Update(k, origin, None) for k in keys]


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
    stale: set = field(default_factory=set)  # keys: Prefix, or (prefix, path_id) for ADD-PATH paths
    deferred: list[Update] = field(default_factory=list)  # ADD-PATH paths re-sent while recovering
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
        return [] if s is None else self._withdraw_everything(peer, s)

    def forget_routes(self, peer: str) -> list[Update]:
        """The peer's AS or session type changed (`ImportStage.replaces`): withdraw what it sent
        as the old peer, accepted or stale, before the stage forgets it. Its session restarts
        (ExaBGP resets it for the new configuration), so nothing is kept as stale: the new peer
        is not the one that sent them."""
        s = self.sessions.get(peer)
        return [] if s is None else self._withdraw_everything(peer, s)

    def _withdraw_everything(self, peer: str, s: PeerSession) -> list[Update]:
        gone = set(self.stage.accepted_prefixes(peer)) | s.stale
        s.stale, s.deferred, s.stale_until = set(), [], None
        return withdraw_all(self.stage.origin(peer), gone)

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
        if s.deferred or s.stale and (ev.path_ids is not None or ev.withdrawn_path_ids is not None):
            held = BgpOutput()  # ADD-PATH peer in graceful-restart recovery: see _flush
            self._receive(ev, s, held)
            s.deferred += held.updates
            out.commands += held.commands
            out.logs += held.logs
            if not s.stale:  # every stale path re-sent: nothing left to pair up
                self._flush(s, out)
            return
        self._receive(ev, s, out)

    def _receive(self, ev: RouteUpdate, s: PeerSession, out: BgpOutput) -> None:
        stage = self.stage
        if ev.withdrawn_path_ids is not None:
            self._withdraw_paths(ev, s, out)
        else:
            for prefix in ev.withdrawn:
                u = stage.withdraw(ev.peer, prefix)
                if u is None and s.stale and prefix in s.stale:
                    u = Update(prefix, stage.origin(ev.peer), None)  # stale: the stage forgot it
                s.stale.discard(prefix)
                if u is not None:
                    out.updates.append(u)
                    out.withdrawn.append(prefix)
        announced, ids = ev.announced, ev.path_ids
        if announced.__class__ is AnnouncedRuns and ids is None:  # runs as decoded (of one UPDATE or more)
            for decision in stage.receive_runs(ev.peer, announced.runs, out.updates, s.stale):
                self._max_prefix(ev.peer, s, decision, out)
            return
        i, n = 0, len(announced)
        if n == 1 and ids is None:  # one prefix (an UPDATE of its own attribute set: the costly case)
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
            batch = [a[0] for a in announced[i:j]]
            if ids is None:
                decision, _verdict = stage.receive_batch(ev.peer, batch, next_hop, attrs, out.updates, s.stale)
            else:
                decision, _verdict = stage.receive_batch(ev.peer, batch, next_hop, attrs, out.updates, s.stale,
                                                         path_ids=ids[i:j])
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

    def _withdraw_paths(self, ev: RouteUpdate, s: PeerSession, out: BgpOutput) -> None:
        """ADD-PATH withdrawals: each names its path (``(prefix, path_id)`` in the stale set)."""
        stage = self.stage
        for prefix, pid in zip(ev.withdrawn, ev.withdrawn_path_ids or ()):
            u = stage.withdraw_path(ev.peer, prefix, pid)
            key = (prefix, pid)
            if u is None and s.stale and key in s.stale:
                u = Update(prefix, stage.origin(ev.peer), None, pid)  # stale: the stage forgot it
            s.stale.discard(key)
            if u is not None:
                out.updates.append(u)
                out.withdrawn.append(prefix)

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
                self._flush(s, out)
                out.updates += withdraw_all(self.stage.origin(ev.peer), self.stage.accepted_prefixes(ev.peer))
                self.stage.peer_down(ev.peer, now)
            s.ended = False

    # ---- stale handling ----
    def _flush(self, s: PeerSession, out: BgpOutput) -> None:
        """The RIB updates held back while an ADD-PATH peer recovered from a graceful restart,
        in one batch. Path ids need not survive a restart (BIRD allocates them anew): applied one
        by one, a re-sent path would replace the stale path that had its id, which may be another
        path (the route of the other upstream), and the ECMP route would lose a next hop until
        that one is re-sent too. Applied together (with the sweep, at End-of-RIB) the RIB compares
        the route before and after the whole batch: no change, no kernel write."""
        if s.deferred:
            out.updates += s.deferred
            s.deferred = []

    def _go_stale(self, s: PeerSession, seconds: float, now: float, out: BgpOutput) -> None:
        self._flush(s, out)
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
        self._flush(s, out)
        out.updates += withdraw_all(self.stage.origin(s.settings.address), s.stale)
        s.stale.clear()
        s.stale_until = None
