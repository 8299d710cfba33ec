"""BFD for the BGP peers: the sessions from the configuration, and what a state change does.

DOC: `BfdLink` is owned by the core task (`agent.daemon.routing.Routing` calls it); the BFD
sessions themselves run in the child process (`agent.bfd.client` / `agent.bfd.child`), which
reports each state change as a ``bfd`` event on the core queue.

Which peers: those whose `BgpPeer` has ``spec.bfd`` (timers: `agent.config.bfd.effective_timers`),
one session each, from the peer's localAddress (unset: the kernel's source address for the peer).

**Routes are used only while BFD is Up** (for a peer with BFD). A peer is *gated* from the start
(BFD starts Down) and whenever its session leaves Up: its RIB updates are not applied but kept
in `held` (the last announce or withdraw per prefix, the peer's adj-RIB-in as the import stage
accepted it), and applied as one change when BFD comes Up. Holding rather than dropping means no
route refresh is needed when BFD comes up after the BGP session (the usual order: BGP needs a
few round trips, BFD a second at the slow start-up rate). The restart gate waits for it too: the
End-of-RIB of a gated peer counts only once BFD is Up (`synced_waiting`), otherwise the routes
adopted from before a restart would be swept while the peer's new ones are still held (the stale
timer still bounds the wait).

**BFD Up -> Down** (detection time expired, or the peer said Down/AdminDown): `changed()` returns
a teardown and the peer is gated. The caller first replaces the nexthop groups that went
through the peer in place (one write per group, `agent.fib.nhg`: forwarding is repaired here),
then sends Cease 6/10 "BFD Down" (RFC 9384) through ExaBGP (``neighbor X notify``), then starts
the RIB's clean-up (`start_cleanup`): the withdrawal of every route of the peer, applied a slice
per core step (``bfd-cleanup`` events) so that the loop, the API and another peer's BFD Down are
not held for seconds; releasing the peer applies what is left of it before anything new.
ExaBGP reconnects as usual; the new session's routes are held until BFD is Up again.
A peer whose BFD configuration is removed is released (its held routes applied).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..bfd.client import BfdChange, BfdClient
from ..bfd.runtime import SessionSpec
from ..bfd.session import Timers
from ..config.bfd import effective_timers
from ..core.model import Origin, Update, single_updates

log = logging.getLogger("route_agent.bfd")
CEASE, BFD_DOWN = 6, 10  # NOTIFICATION Cease, subcode "BFD Down" (RFC 9384)
CLEANUP_SLICE = 20_000  # withdrawals per core step after a failure (~0.2 s at 100k ECMP routes)


class BfdLink:
    def __init__(self, on_change: Callable[[BfdChange], None]) -> None:
        self.client = BfdClient(on_change)
        self.specs: dict[str, SessionSpec] = {}
        self.state: dict[str, str] = {}  # peer -> last state reported ("down" until one came)
        self.held: dict[str, dict] = {}  # gated peer -> {prefix: Update}
        self._gated_origins: dict[Origin, str] = {}
        self.synced_waiting: set[str] = set()
        self.failures: dict[str, int] = {}  # peer -> Up -> Down transitions (routes withdrawn)
        # failed peer -> its clean-up: (origin, routes to withdraw, how many done, started at)
        self.cleanup: dict[str, tuple[Origin, list, int, float]] = {}
        self.scan_waiting: str | None = None  # the reason of a full scan put off until the clean-ups end
        self.started = False

    # ---- configuration ----
    def configure(self, peers, profiles, origin_of: Callable[[str], Origin], key_of,
                  in_use: Callable[[str], bool] = lambda peer: False) -> list[Update]:
        """The BgpPeers (and BfdProfiles) now configured; returns the held updates of peers that
        lost BFD (to apply now). A peer that gets BFD while its routes are in use (`in_use`: a
        reload adding BFD to a running session) keeps them until its first BFD failure: holding
        them would cut traffic that works until the new session is Up."""
        specs = {}
        for p in peers:
            if p.spec.bfd is not None:
                key = key_of(p)
                specs[key] = SessionSpec(key, p.spec.local_address,
                                         Timers(*effective_timers(p.spec.bfd, profiles)))
        configured = {key_of(p) for p in peers}
        released = []
        for peer in [p for p in self.held if p not in specs]:
            held = self._release(peer)
            if peer in configured:  # BFD removed from a peer: its routes may be used now
                released += held
            else:  # the peer is gone: what was left of a clean-up still has to be applied
                released += [u for u in held if u.candidate is None]
        for peer in specs:
            if peer not in self.specs and peer not in self.held and self.state.get(peer) != "up" \
                    and not in_use(peer):
                self._gate(peer, origin_of(peer))
        for peer in [p for p in self.state if p not in specs]:
            del self.state[peer]
        if specs != self.specs:
            self.specs = specs
            self.client.configure(list(specs.values()))
        return released

    # ---- the gate ----
    def _gate(self, peer: str, origin: Origin) -> None:
        self.held[peer] = {}
        self._gated_origins[origin] = peer

    def _release(self, peer: str) -> list[Update]:
        """The updates that make the RIB what the peer now offers: the rest of a clean-up still
        under way first, then the held updates."""
        rest = self.next_cleanup(peer, n=len(self.cleanup[peer][1])) if peer in self.cleanup else []
        held = self.held.pop(peer, {})
        for origin in [o for o, p in self._gated_origins.items() if p == peer]:
            del self._gated_origins[origin]
        self.synced_waiting.discard(peer)
        return rest + [u for u in held.values() if u.candidate is not None]

    def gated(self, peer: str) -> bool:
        return peer in self.held

    def filter(self, updates: list) -> list:
        """The updates that may reach the RIB now; those of gated peers are kept in `held`."""
        gated = self._gated_origins
        if not gated:
            return updates
        out = []
        for u in single_updates(updates):  # (held per prefix)
            peer = gated.get(u.origin)
            if peer is None:
                out.append(u)
            elif u.candidate is None:
                self.held[peer].pop(u.prefix, None)
            else:
                self.held[peer][u.prefix] = u
        return out

    # ---- state changes ----
    def changed(self, change: BfdChange, origin: Origin | None) -> tuple[list[Update], bool]:
        """A state change of `change.peer` (`origin`: its RIB origin). Returns (RIB updates to
        apply now, whether it failed). On a failure the caller repairs forwarding first (the
        nexthop groups) and only then starts the RIB's clean-up (`start_cleanup`): with 500k
        routes its list alone takes ~0.4 s."""
        peer = change.peer
        if peer not in self.specs or origin is None:
            return [], False
        self.state[peer] = change.new
        if change.new == "up":
            log.info("BFD with %s up: its routes are used", peer)
            return self._release(peer), False
        # a failure is a session leaving Up; a restarted BFD process starts its sessions Down,
        # so its first changes never count as one (a dead BFD process is not a dead peer)
        if change.old != "up" or self.gated(peer):
            return [], False
        self.failures[peer] = self.failures.get(peer, 0) + 1
        self._gate(peer, origin)
        log.warning("BFD with %s down (%s, %.0f ms ago): its routes are withdrawn, BGP session torn down "
                    "(Cease 6/10)", peer, change.diag, (time.monotonic() - change.at) * 1000)
        return [], True

    def start_cleanup(self, peer: str, origin: Origin, accepted: list) -> None:
        """After a failure: the RIB's clean-up, every accepted route of the peer (a `Prefix`, or
        ``(prefix, path_id)`` for an ADD-PATH path) to withdraw, taken in slices by
        `next_cleanup` so that the core task never holds the loop for the whole table (at 500k
        routes that is seconds; another peer's BFD Down must not wait for it)."""
        self.cleanup[peer] = (origin, accepted, 0, time.monotonic())

    def next_cleanup(self, peer: str, n: int | None = None) -> list[Update]:
        """The next slice of `peer`'s clean-up, CLEANUP_SLICE long by default (empty: nothing left)."""
        if peer not in self.cleanup:
            return []
        n = n or CLEANUP_SLICE
        origin, accepted, at, started = self.cleanup[peer]
        out = [Update(p[0], origin, None, p[1]) if p.__class__ is tuple else Update(p, origin, None)
               for p in accepted[at:at + n]]
        if at + n >= len(accepted):
            del self.cleanup[peer]
            log.info("BFD with %s down: RIB clean-up done, %d routes withdrawn in %.3f s", peer,
                     len(accepted), time.monotonic() - started)
        else:
            self.cleanup[peer] = (origin, accepted, at + n, started)
        return out

    def view(self, peer: str) -> dict | None:
        """The BFD part of a `show peers` row (None: no BFD for the peer)."""
        if peer not in self.specs:
            return None
        t = self.specs[peer].timers
        v = self.client.views.get(peer) or {}
        return {"state": v.get("state", "down"), "remoteState": v.get("remote_state", "down"),
                "diag": v.get("diag", "none"), "minRx": t.min_rx, "minTx": t.min_tx,
                "multiplier": t.multiplier, "txIntervalMs": v.get("tx_interval_ms"),
                "detectionMs": v.get("detection_ms"), "routesHeld": len(self.held.get(peer, ())),
                "failures": self.failures.get(peer, 0), "error": v.get("error", "")}
