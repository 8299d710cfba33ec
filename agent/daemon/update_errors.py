"""Malformed UPDATEs (RFC 7606) in the BGP runtime: counted per peer and action, logged, and a
NOTIFICATION sent for a session reset.

DOC: the wire codec (`agent.speaker.wire`) reports each malformed UPDATE as one `UpdateError`
(treat-as-withdraw and attribute discard have already been applied to the routes it reports).
`UpdateErrors.handle(event)` counts it under (peer, action), the metric
``route_agent_bgp_update_errors``, logs it with the peer (a peer sending a malformed table
would log one line per UPDATE: the first `LOG_FIRST` of each peer and action are logged, then one
line every `LOG_EVERY` with the count so far), and returns the `SendNotification` that resets the
session when the action is a session reset (the runtime sends it through ExaBGP's ``neighbor PEER
notify CODE SUBCODE [HEX]``; the session down that follows drops the peer's routes as any
NOTIFICATION does).
"""

from __future__ import annotations

import collections
import logging

from ..core.bgp import SendNotification, UpdateAction, UpdateError

log = logging.getLogger("route_agent.bgp")


class UpdateErrors:
    LOG_FIRST = 10
    LOG_EVERY = 1000

    def __init__(self) -> None:
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()  # (peer, action)

    def handle(self, ev: UpdateError) -> SendNotification | None:
        action = UpdateAction(ev.action)
        key = (ev.peer, action.value)
        self.counts[key] += 1
        n = self.counts[key]
        reset = action is UpdateAction.SESSION_RESET
        if n <= self.LOG_FIRST or not n % self.LOG_EVERY or reset:
            family = f" {ev.family.value}" if ev.family is not None else ""
            log.warning("peer %s: malformed UPDATE%s, %s (%d/%d): %s%s", ev.peer, family, action.value, ev.code,
                        ev.subcode, ev.reason, f" [{n} so far]" if n > self.LOG_FIRST else "")
        return SendNotification(ev.peer, ev.code, ev.subcode, ev.data) if reset else None
