"""The core task's handlers of BFD events: a mixin of `agent.daemon.routing.Routing`.

DOC: kept apart from `Routing` only for size; they run on the core task like every other
handler and use Routing's state (`bfd`, `bgp`, `nhg`, `rib`, the queue). What a change means
(the hold of a peer's routes, a failure, the clean-up in slices) is `agent.daemon.bfd.BfdLink`;
these functions put it to work in order: on a failure, forwarding first (the nexthop groups
through the peer shrink in place and are flushed at once), then the Cease to the peer, then the
RIB's clean-up a slice per core step (``bfd-cleanup`` events).

While the clean-up is under way the RIB still holds the failed peer's candidates, and the FIB's
wanted state of the prefixes not reached yet still names the peer: so the RIB is told to ignore
the peer's candidates at once (`Rib.set_failed`: anything re-decided meanwhile, by another
peer's UPDATE or a link change, leaves the dead peer out), and a full scan waits until the
clean-up is done (`BfdLink.scan_waiting`: it would find the kernel forwarding without the peer,
as the shrunk groups do, and "repair" those routes back towards it).
"""

from __future__ import annotations

import logging
import time

from ..core.bgp import PeerStatus, SendNotification
from .bfd import BFD_DOWN, CEASE
from .events import Event

log = logging.getLogger("route_agent")


class BfdEvents:
    def handle_bfd(self, change) -> None:
        """A BFD state change (`agent.daemon.bfd`): routes withdrawn and the session torn down, or
        the held routes applied (and the restart gate told, if it waited for them)."""
        if self.bgp is None or self.bfd is None:
            return
        peer = change.peer
        origin = self.bgp.stage.origin(peer) if peer in self.bgp.peers else None
        waiting = peer in self.bfd.synced_waiting
        updates, teardown = self.bfd.changed(change, origin)
        if teardown:
            if self.nhg is not None and self.nhg.without_gateway(peer):
                self.flush_now()  # the groups first (one write each), then the RIB's clean-up
            self.rib.set_failed(origin, True)  # every decision from now on ignores its routes
            self.bgp.stage.pin(peer)  # the RIB loses them, the stage still counts them
            self.bfd.start_cleanup(peer, origin, self.bgp.stage.accepted_prefixes(peer))
            session = self.bgp.source.sessions.get(peer)
            if session is not None and session.state is not PeerStatus.DOWN:
                self.bgp.speaker.send(SendNotification(peer, CEASE, BFD_DOWN))
            self.notice("BfdSessionDown", f"BFD with {peer} down ({change.diag}): routes withdrawn, "
                        "BGP session torn down", warning=True)
            self.handle_bfd_cleanup(peer)
        if updates:
            t0 = time.monotonic()
            self.apply_released(updates)
            log.info("BFD %s %s: %d RIB updates applied in %.3f s", peer, change.new, len(updates),
                     time.monotonic() - t0)
        self.clear_failed()
        if change.new == "up" and waiting:
            self.source_synced(f"bgp/{peer}")

    def apply_withdrawals(self, updates) -> None:
        """Apply RIB updates that withdraw a failed peer's routes (with others after them). The
        RIB's decisions already leave the peer out (`Rib.set_failed`), so for the RIB nothing
        changes; the FIB still wants the old route for those prefixes and is told anew."""
        changes = self.rib.apply(updates)
        if self.rib.failed:
            desired = self.rib.desired
            for u in updates:
                if u.candidate is None and u.prefix not in changes:
                    changes[u.prefix] = desired(u.prefix)
        self._apply_rib(changes)

    def apply_released(self, updates) -> None:
        """The updates a released peer's routes come back with (`BfdLink._release`): the rest of
        its clean-up first, then, once its candidates count again, its held announcements."""
        rest = [u for u in updates if u.candidate is None]
        if rest:
            self.apply_withdrawals(rest)
        self.clear_failed()
        fresh = [u for u in updates if u.candidate is not None]
        if fresh:
            self._apply_rib(self.rib.apply(fresh))

    def clear_failed(self) -> None:
        """Origins whose clean-up is over (done, or applied at once by a release) count again;
        a full scan that waited for the clean-ups runs now."""
        cleaning = {c[0] for c in self.bfd.cleanup.values()}
        for origin in [o for o in self.rib.failed if o not in cleaning]:
            self.rib.set_failed(origin, False)
        if self.nhg is not None:
            for gateway in [g for g in self.nhg.dead if g not in self.bfd.cleanup]:
                self.nhg.revive(gateway)
        if not cleaning and self.bfd.scan_waiting:
            self.queue.put(Event("scan", self.bfd.scan_waiting))
            self.bfd.scan_waiting = None

    def handle_bfd_cleanup(self, peer) -> None:
        """One slice of a failed peer's RIB clean-up (`BfdLink.start_cleanup`); the next one is
        queued behind whatever else waits, so other events interleave."""
        if self.bfd is None:
            return
        updates = self.bfd.next_cleanup(peer)
        if updates:
            self.apply_withdrawals(updates)
        if peer in self.bfd.cleanup:
            self.queue.put(Event("bfd-cleanup", peer))
        else:
            self.clear_failed()

