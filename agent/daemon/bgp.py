"""BGP inside the agent: the supervised speaker, the import stage and the BGP source, from config.

DOC: built by the composition root (`agent.daemon.agent`), which hands in the keyword-named import package
(`imp`), so this module never imports it itself. It owns:

* the `Speaker` (ExaBGP child) for the configured `BgpPeer`s;
* the `ImportStage` (hijack guard, import policy with RFC 8212 default deny, max-prefix), fed with
  the node's protected prefixes (config) and interface addresses (kernel), and with each peer's
  session interface for IPv6 link-local next hops (`device_of`, `refresh_devices`);
* the `BgpSource` (sessions, graceful-restart stale routes, End-of-RIB for the restart gate).

`handle(event)` is called by the agent's core task for every speaker event and returns the
`BgpOutput` (RIB updates, synced peers, timers). Side effects towards ExaBGP happen here:
End-of-RIB to a peer whose session came up (ExaBGP runs with ``manual-eor``; a BIRD restarting
gracefully waits for it), and the max-prefix teardown: a Cease 6/1, then the peer is held in
ExaBGP's configuration and put back as configured after ``restartSeconds`` from the session down
(`agent.daemon.bgp_holddown.MaxPrefixHoldDown`).

A malformed UPDATE (`UpdateError`, from the wire codec) is counted and logged, and a session
reset is sent to that peer as a NOTIFICATION (`agent.daemon.update_errors`).

What ExaBGP made of our commands comes back as events: `CommandAck` goes to the export
reconciler (a prefix counts as announced once ExaBGP said ``done``; an ``error`` is counted,
logged, and the prefix sent again at the next reconcile); `CommandsDropped` (the speaker's queue
reached its bound) is undone in the reconciler at once and planned again once the speaker's queue
has drained: the adverts from the desired state, a Teardown again if the peer is still held down,
route refreshes once per peer and family. Export commands planned while an ExaBGP restart is not
yet handled here (events of the dead process still queued) are not sent: the new process gets
only the re-announcement that follows `SpeakerRestarted`.

The read-only views (peers, adverts, explanations) are `agent.daemon.bgp_views.BgpViews`.

`reconfigure(config)` applies a reload: peers added or removed (ExaBGP reloads its configuration,
other sessions stay up; a removed peer first gets Cease 6/3, see `Speaker.set_peers`), policies and distances recompiled, and a route refresh asked from every
peer so its routes go through the new policy (ExaBGP keeps no adj-RIB-in). A peer whose AS or
session type (eBGP/iBGP) changed is a new peer on the same address: the routes the old one sent,
accepted or stale, are withdrawn at once (as for a removed peer), not kept over the restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..core.model import Prefix, SourceKind
from ..policy.engine import compile_policies
from ..sources.bgp import BgpOutput, BgpPeerSettings, BgpSource
from ..export.desired import ExportPeer, desired_for_peer
from ..export.reconciler import ExportReconciler
from ..core.bgp import (AnnounceEor, Open, PeerState, PeerStatus, RequestRouteRefresh, RouteUpdate,
                        SpeakerRestarted, Teardown, UpdateError)
from ..core.bgp_speaker import CommandAck, CommandsDropped
from ..speaker.process import Speaker
from .bgp_config import import_key, import_peer, peer_key, protected_prefixes
from .bgp_holddown import MaxPrefixHoldDown
from .bgp_views import BgpViews
from .supervise import Spawner
from .update_errors import UpdateErrors
from ..config.bgp import BgpPeer

log = logging.getLogger("route_agent.bgp")
REFRESH_DELAY = 10.0


class BgpRuntime(BgpViews, MaxPrefixHoldDown):
    def __init__(self, imp, config, distances: dict[SourceKind, int], node_addresses: list[str],
                 *, runtime_dir: str | None = None, wrapper: tuple[str, ...] = (),
                 device_of: Callable[[str], str | None] = lambda address: None) -> None:
        self.imp = imp
        self.device_of = device_of  # the session's interface: for IPv6 link-local next hops
        self.devices: dict[str, str | None] = {}
        protected = protected_prefixes(config)
        self.guard = imp.Guard(protected, node_addresses)
        self.policies = compile_policies(config.policies)
        self.stage = imp.ImportStage(self.guard, self.policies, distances=distances)
        self.export = ExportReconciler()
        self.adverts = tuple(config.adverts)
        self.export_rejected: dict[str, dict] = {}
        self.peers: dict[str, BgpPeer] = {}
        self.held_down: dict[str, float | None] = {}  # peer -> until (None: until config change)
        self._apply_peers(config.peers)
        self.source = BgpSource(self.stage, [self._settings(p) for p in config.peers],
                                speaker_stale_seconds=config.agent.fib.stale_seconds)
        # ExaBGP logs one INFO line per announce, which the agent reads only to drop it
        self.speaker = Speaker(list(config.peers), config.speaker.spec if config.speaker else None,
                               runtime_dir=runtime_dir, wrapper=wrapper, exabgp_log_level="WARNING")
        self._import_key = import_key(config, distances)
        self.cluster_protected: list | tuple = ()  # kept as given: its identity marks a change
        self._protected_key: tuple | None = None
        self._cluster_others: frozenset = frozenset()
        self._refresh_handle = None
        self.updates = 0
        self.refused = 0  # commands ExaBGP answered "error"
        self.update_errors = UpdateErrors()  # malformed UPDATEs (RFC 7606), by peer and action
        self._restarts_seen = 0  # SpeakerRestarted.restarts of the last one handled
        self._replanning = False  # a re-plan waits for the speaker's queue to drain
        self._resend: dict = {}  # Teardowns and route refreshes dropped by the speaker, to send again
        self._spawner = Spawner()  # one-shot tasks: peer updates, the event pump, hold-down timers
        self._restores: dict[str, asyncio.Task] = {}  # peer -> its max-prefix restore timer
        self._attempting: dict[str, int] = {}  # peer -> connection attempts since its last session (logs)
        self.refresh_exports()  # desired state ready before any session comes up

    # ---- configuration ----
    def _import_peer(self, peer: BgpPeer):
        addr = peer_key(peer)
        device = self.devices[addr] = self.device_of(addr)
        return import_peer(self.imp, peer, device)

    def refresh_devices(self) -> None:
        """Connected routes changed: a session's interface (`device_of` its peer address) may have
        moved. The peer's next routes get the new one; those it sent already are asked again
        (route refresh: their link-local next hops name the old one; ExaBGP keeps no adj-RIB-in)."""
        for addr, peer in self.peers.items():
            if self.devices.get(addr) != self.device_of(addr):
                self.stage.set_peer(self._import_peer(peer))
                if self.stage.has_accepted(addr):
                    self._refresh_all({addr: peer})

    @staticmethod
    def _settings(peer: BgpPeer) -> BgpPeerSettings:
        return BgpPeerSettings(peer_key(peer), tuple(peer.spec.families),
                               graceful_restart=peer.spec.graceful_restart_seconds > 0)

    def _apply_peers(self, peers) -> list[str]:
        """Set the stage's peers; returns the addresses that were removed."""
        new = {peer_key(p): p for p in peers}
        removed = [a for a in self.peers if a not in new]
        for addr in removed:
            self.stage.remove_peer(addr)
        for addr, peer in new.items():
            self.stage.set_peer(self._import_peer(peer))
        self.peers = new
        return removed

    def _export_peer(self, peer: BgpPeer) -> ExportPeer:
        s = peer.spec
        return ExportPeer(peer_key(peer), s.peer_as, s.local_as, s.ebgp,
                          frozenset(6 if f.value.startswith("ipv6") else 4 for f in s.families),
                          dict(peer.metadata.labels), s.export_policy,
                          session_family=6 if ":" in s.peer_address else 4)

    def refresh_exports(self) -> None:
        """Recompute every peer's desired advertisements; send the differences to up sessions."""
        for addr, peer in self.peers.items():
            self.export.configure(addr, peer.spec.local_as, peer.spec.ebgp)
            desired, rejected = desired_for_peer(self._export_peer(peer), self.adverts, self.policies)
            self.export_rejected[addr] = rejected
            self._send_exports(self.export.set_desired(addr, desired))

    def _send_exports(self, commands: list) -> None:
        """Export commands to the speaker, unless ExaBGP restarted since the last
        `SpeakerRestarted` handled here: they were planned for the old process (from events it
        sent before it died), `export.speaker_restarted()` is about to reset what they assumed,
        and the new process must get only the re-announcement that follows."""
        if self.speaker.restarts != self._restarts_seen:
            return
        for cmd in commands:
            self.speaker.send(cmd)

    def gate_names(self) -> set[str]:
        return {f"bgp/{addr}" for addr in self.peers}

    def reconfigure(self, config, distances: dict[SourceKind, int]) -> BgpOutput:
        out = BgpOutput()
        old_peers = dict(self.peers)
        wanted = {peer_key(p) for p in config.peers}
        for addr in self.peers:
            if addr not in wanted:  # withdraw before the stage forgets the peer's origin
                out.updates += self.source.remove_peer(addr)
        for p in config.peers:  # a new AS or session type: the old peer's routes go the same way
            if peer_key(p) in self.peers and self.stage.replaces(self._import_peer(p)):
                out.updates += self.source.forget_routes(peer_key(p))
        removed = self._apply_peers(config.peers)
        for addr in removed:
            self.export.forget(addr)
            self.export_rejected.pop(addr, None)
        for p in config.peers:
            self.source.set_peer(self._settings(p))
            self.stage.maxprefix.clear(peer_key(p))  # a config change ends a max-prefix hold-down
        self.held_down.clear()
        self.policies = compile_policies(config.policies)
        self.stage.set_policies(self.policies)
        self.stage.set_distances(distances)
        self.adverts = tuple(config.adverts)
        out.updates += self._set_protected(protected_prefixes(config))
        self.refresh_exports()
        self.source.speaker_stale_seconds = config.agent.fib.stale_seconds
        if [p.model_dump() for p in old_peers.values()] != [p.model_dump() for p in self.peers.values()] \
                or removed or self.speaker.held:  # (a held peer is released by any change)
            self._spawn(self.speaker.set_peers(list(self.peers.values())))
        key = import_key(config, distances)
        if key != self._import_key:  # re-run every received route through the new import side
            self._import_key = key
            self._refresh_all()
        return out

    def set_cluster_guard(self, config, protected, others) -> list:
        """The cluster's share of the guard: `protected` (this node's pod CIDRs, every Service VIP,
        the service CIDRs) and `others` (the other nodes' pod CIDRs). Returns RIB withdraws.
        A node gone from `others` is a shrink like any other: its more-specifics refused before
        may pass now, so a route refresh is scheduled."""
        others = frozenset(others)
        gained = others - self._cluster_others
        shrank = bool(self._cluster_others - others)
        if others != self._cluster_others:
            self.guard.set_cluster(others)
            self._cluster_others = others
        self.cluster_protected = protected
        return self._set_protected(protected_prefixes(config), gained=gained, refresh=shrank)

    def _set_protected(self, own, gained: frozenset = frozenset(), refresh: bool = False) -> list:
        """Replace the guard's protected prefixes. Grown: accepted routes the guard now refuses
        are withdrawn at once. Shrunk: routes refused before may be acceptable now, but ExaBGP
        keeps no adj-RIB-in, so a route refresh is asked from every peer, at most every
        `REFRESH_DELAY` seconds (Service churn must not turn into a refresh per change)."""
        key = (tuple(own), id(self.cluster_protected))
        if key == self._protected_key:  # (the cluster's list is a new object when it changed)
            return []
        self._protected_key = key
        old = self.guard.protected
        new = frozenset(Prefix.parse(p) if isinstance(p, str) else p for p in (*own, *self.cluster_protected))
        if new != old:  # (10,000 VIPs: rebuilding the index costs more than comparing)
            self.guard.set_protected(new)
        updates = []
        gained = gained | (new - old)  # (another node's pod CIDR, or one of ours)
        if gained:
            for addr in self.peers:
                updates += self.stage.recheck_guard(addr, gained)
        if refresh or old - new:
            self._schedule_refresh()
        return updates

    def _schedule_refresh(self) -> None:
        if self._refresh_handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not running (tests): at once
            self._refresh_all()
            return

        def fire() -> None:
            self._refresh_handle = None
            self._refresh_all()

        self._refresh_handle = loop.call_later(REFRESH_DELAY, fire)

    def _refresh_all(self, peers: dict[str, BgpPeer] | None = None) -> None:
        for addr, peer in (self.peers if peers is None else peers).items():
            for fam in peer.spec.families:
                self.speaker.send(RequestRouteRefresh(fam, addr))

    def set_node_addresses(self, addresses: list[str]) -> None:
        self.guard.set_node_addresses(addresses)

    # ---- events ----
    async def start(self, put: Callable[[object], None]) -> None:
        await self.speaker.start()

        async def pump() -> None:
            async for batch in self.speaker.batches():
                put(batch)

        self._spawn(pump())

    async def stop(self) -> None:
        await self.speaker.stop()
        self._spawner.cancel()

    def _spawn(self, coro) -> asyncio.Task:
        return self._spawner(coro, name=f"bgp-{coro.__qualname__}")

    def settle(self, table, gated: Callable[[str], bool]) -> None:
        """The RIB (`table`: `Rib.table`) has applied every output so far: let it answer for the
        accepted routes of each peer that nothing holds back from it (`ImportStage.settle`): not
        a peer with graceful-restart stale routes (the RIB holds routes the stage forgot), nor one
        whose ADD-PATH updates wait for its End-of-RIB, nor one whose BFD is not Up (`gated`:
        its updates are held)."""
        stage = self.stage
        for addr, s in self.source.sessions.items():
            if not s.stale and not s.deferred and not gated(addr):
                stage.settle(addr, table)

    def handle(self, ev, now: float, out: BgpOutput | None = None) -> BgpOutput:
        if ev.__class__ is RouteUpdate:  # the hot path; `out`: the output of UPDATEs before it
            self.updates += ev.messages
            done = len(out.commands) if out is not None else 0
            out = self.source.handle(ev, now, out)
            return self._teardowns(out, now, done) if len(out.commands) > done else out
        if isinstance(ev, Open) and ev.peer in self.peers:
            self.stage.set_router_id(ev.peer, ev.router_id)
        out = self.source.handle(ev, now, out)
        if isinstance(ev, PeerState):
            self._log_state(ev)
            if ev.state is PeerStatus.DOWN and ev.peer in self.held_down:
                self._spawn(self._remove_held_down(ev.peer))
                self._schedule_restore(ev.peer)  # the source just started the hold-down
            if ev.state is PeerStatus.UP and ev.peer in self.peers:
                # everything we advertise, then End-of-RIB (manual-eor): a graceful-restart peer
                # that kept our routes as stale sees them refreshed, nothing withdrawn
                families = self._export_peer(self.peers[ev.peer]).families
                self._send_exports(self.export.session_up(ev.peer, families))
            elif ev.state is PeerStatus.DOWN:
                self.export.session_down(ev.peer)
        elif isinstance(ev, SpeakerRestarted):
            self._restarts_seen = ev.restarts
            self.export.speaker_restarted()
        elif isinstance(ev, CommandAck):
            self._acked(ev)
        elif isinstance(ev, CommandsDropped):
            self._dropped(ev)
        elif isinstance(ev, UpdateError):
            reset = self.update_errors.handle(ev)
            if reset is not None and ev.peer in self.peers and self.speaker.restarts == self._restarts_seen:
                self.speaker.send(reset)  # (not to a new ExaBGP: its session is not the one that erred)
        return self._teardowns(out, now)

    def _teardowns(self, out: BgpOutput, now: float, done: int = 0) -> BgpOutput:
        for peer, command in out.commands[done:]:
            if command == "teardown":
                self._teardown(peer, now)
        return out

    def _log_state(self, ev: PeerState) -> None:
        """ExaBGP says ``connected`` when it starts a connection attempt and ``down`` when that
        or the OPEN exchange fails: log one line per streak of failed attempts, not a pair each."""
        reason = f" ({ev.reason})" if ev.reason else ""
        tries = self._attempting
        if ev.state is PeerStatus.CONNECTED:
            tries[ev.peer] = tries.get(ev.peer, 0) + 1
            log.debug("peer %s: connecting, OPEN exchange under way", ev.peer)
        elif ev.state is PeerStatus.UP:
            tries[ev.peer] = 0
            log.info("peer %s up", ev.peer)
        elif tries.get(ev.peer):
            log.log(logging.INFO if tries[ev.peer] == 1 else logging.DEBUG, "peer %s: no session: the connection "
                    "attempt or the OPEN exchange failed%s; retrying (further failures at debug level)", ev.peer, reason)
        else:
            log.info("peer %s down%s", ev.peer, reason)

    def _acked(self, ev: CommandAck) -> None:
        self.export.acked(ev.command, ev.ok)
        if not ev.ok:
            self.refused += 1
            # End-of-RIB and route refresh to a peer whose session is not up are refused routinely
            quiet = isinstance(ev.command, (AnnounceEor, RequestRouteRefresh))
            log.log(logging.DEBUG if quiet else logging.WARNING, "ExaBGP refused a command: %s",
                    _brief(ev.command))

    def _dropped(self, ev: CommandsDropped) -> None:
        """The speaker's queue overflowed: plan again once it has drained (a plan sent into a
        queue still full would only be dropped again). Adverts from the desired state; a Teardown
        again if the peer is still held down; route refreshes once per peer and family."""
        log.warning("speaker dropped %d queued commands (%s): planning again once its queue drained",
                    len(ev.commands), ev.reason)
        self.export.dropped_commands(ev.commands)
        for cmd in ev.commands:
            if isinstance(cmd, (Teardown, RequestRouteRefresh)):
                self._resend[cmd] = None
            elif isinstance(cmd, str):
                log.warning("dropped command not sent again: %s", cmd[:200])
        if not self._replanning:
            self._replanning = True
            self._spawn(self._replan_when_drained())

    async def _replan_when_drained(self) -> None:
        try:
            await self.speaker.drained()
        finally:
            self._replanning = False
        self._send_exports(self.export.replan())
        again, self._resend = self._resend, {}
        for cmd in again:
            if not isinstance(cmd, Teardown) or cmd.peer in self.held_down:
                self.speaker.send(cmd)


def _brief(command) -> str:
    text = repr(command)
    return text if len(text) <= 300 else text[:300] + "..."
