"""The max-prefix teardown of the BGP runtime: Cease 6/1, the peer held in ExaBGP, its restore.

DOC: part of `agent.daemon.bgp.BgpRuntime` (a mixin on its state: the speaker, the configured
peers, the held-down peers and their restore timers, the import stage). When a peer exceeds its
max-prefix limit with action ``teardown``, `_teardown` sends a Cease 6/1 (sent with graceful
restart too: `agent.speaker.launcher`) and holds the peer in ExaBGP's configuration (passive, an
MD5 key the peer does not know): ExaBGP would reconnect at once, and a peer removed would get
Cease 6/3 on each retry. The hold starts once the session is down (so the NOTIFICATION goes out
first), or after 5 s whatever happened. `_schedule_restore` starts one timer per peer on the
session down; it sleeps until the import stage's deadline (`MaxPrefix.hold_until`, which may
move) and then puts the peer back as configured; without ``restartSeconds`` (deadline math.inf)
only a configuration change, which clears the hold, lets it connect again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time

from ..core.bgp import Teardown

log = logging.getLogger("route_agent.bgp")


class MaxPrefixHoldDown:
    """Cease 6/1, hold-down and restore of peers over their max-prefix limit (see the module doc)."""

    def _teardown(self, peer: str, now: float) -> None:
        if peer in self.held_down:
            return
        self.speaker.send(Teardown(peer, subcode=1))  # Cease 6/1: maximum number of prefixes
        self.held_down[peer] = None
        # ExaBGP would reconnect at once: the peer is held (passive, unknown MD5 key) as soon as the
        # session is down (so the Cease 6/1 goes out first; see handle()), or after 5 s whatever happened
        self._spawn(self._remove_held_down(peer, delay=5))

    async def _remove_held_down(self, peer: str, delay: float = 0) -> None:
        """Hold the peer in ExaBGP's configuration (passive, connections unanswered)."""
        if delay:
            await asyncio.sleep(delay)
        if peer in self.held_down and self.peers[peer].metadata.name not in self.speaker.held:
            await self._set_speaker_peers()

    async def _set_speaker_peers(self) -> None:
        await self.speaker.set_peers(list(self.peers.values()),
                                     held=[self.peers[a].metadata.name for a in self.held_down if a in self.peers])

    def _schedule_restore(self, peer: str) -> None:
        """One restore timer per peer, from the max-prefix deadline (`MaxPrefix.hold_until`)."""
        old = self._restores.pop(peer, None)
        if old is not None:
            old.cancel()
        self._restores[peer] = self._spawn(self._restore_when_due(peer))

    async def _restore_when_due(self, peer: str) -> None:
        """Sleep until the hold-down deadline the import stage holds, check, sleep again if it
        moved; then put the peer back into ExaBGP's configuration. A deadline of math.inf (no
        restartSeconds) waits for a configuration change, which clears `held_down`."""
        maxprefix = self.stage.maxprefix
        try:
            while peer in self.held_down:
                until = maxprefix.hold_until(peer)
                if until is not None and math.isinf(until):
                    return
                now = time.monotonic()
                if until is not None and now < until:
                    await asyncio.sleep(until - now)
                    continue
                assert maxprefix.may_connect(peer, now)  # past the deadline
                del self.held_down[peer]
                maxprefix.clear(peer)
                log.info("peer %s: max-prefix hold-down over, session allowed again", peer)
                await self._set_speaker_peers()
                return
        finally:
            if self._restores.get(peer) is asyncio.current_task():
                del self._restores[peer]
