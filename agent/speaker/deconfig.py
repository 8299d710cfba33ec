"""Peers leaving the configuration: Cease 6/3 "Peer De-configured" before ExaBGP drops them.

DOC: a peer that is no longer configured (deleted, its selector no longer matching, its address
changed) whose session is up gets Cease 6/3 (RFC 4486: ``neighbor ADDR notify 6 3``) before
`Speaker.set_peers` has ExaBGP reload without it: ExaBGP would otherwise drop the session
silently, and a graceful-restart peer would keep our routes for its restart time. The speaker
waits for ExaBGP's answer, which comes once the NOTIFICATION is written, at most
`DECONFIGURE_WAIT` seconds. `deconfigured` is pure; `cease` talks to ExaBGP through the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..config.bgp import BgpPeer
from ..core.bgp import PeerStatus, SendNotification
from ..core.model import canonical_address
from .channel import ApiChannel

log = logging.getLogger("agent.speaker")

DECONFIGURE_WAIT = 10.0  # seconds to wait for the Cease 6/3 to a removed peer before the reload


def deconfigured(configured: Iterable[BgpPeer], peers: Sequence[BgpPeer],
                 states: Mapping[str, PeerStatus]) -> list[str]:
    """Addresses of the `configured` peers absent from `peers` whose session is up (in order)."""
    keep = {canonical_address(p.spec.peer_address) for p in peers}
    return [a for a in dict.fromkeys(canonical_address(p.spec.peer_address) for p in configured)
            if a not in keep and states.get(a) is PeerStatus.UP]


async def cease(channel: ApiChannel, addresses: list[str], running: Callable[[], bool]) -> None:
    """Cease 6/3 to each of `addresses`, waiting until ExaBGP has written it (its ``done``). An
    ExaBGP without the launcher's ``notify`` (unpatched: another version) answers ``error``: then
    ``teardown 3``, which it sends without graceful restart. `running`: whether ExaBGP still is."""
    if not running():
        return
    waits = {a: channel.send_waiting(SendNotification(a, 6, 3)) for a in addresses}
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*waits.values()), DECONFIGURE_WAIT)
    for address, fut in waits.items():
        if fut.done() and fut.result():
            log.info("speaker: peer %s de-configured: Cease 6/3 sent", address)
            continue
        log.warning("speaker: peer %s de-configured: ExaBGP did not confirm the Cease 6/3 (%s)%s", address,
                    "refused" if fut.done() else f"no answer within {DECONFIGURE_WAIT:.0f}s",
                    "; sending teardown 3" if fut.done() and running() else "")
        if fut.done() and running():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(channel.send_waiting(f"neighbor {address} teardown 3"), DECONFIGURE_WAIT)
