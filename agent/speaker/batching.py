"""Speaker events handed to the agent in batches.

DOC: `batches(queue)` yields every event of the speaker's queue, in order, in tuples of what is
already waiting (at least one; at most `BATCH_EVENTS` events or about `BATCH_ROUTES` prefixes),
until the stop marker (None): the agent handles a burst of UPDATEs as one RIB change instead of
one per UPDATE, and the bound keeps the core loop's pass budget meaningful.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..core.bgp import Event

BATCH_EVENTS = 256
BATCH_ROUTES = 4096


def _routes(event: Event) -> int:
    return len(getattr(event, "announced", ())) + len(getattr(event, "withdrawn", ())) or 1


async def batches(queue: asyncio.Queue, max_events: int = BATCH_EVENTS, max_routes: int = BATCH_ROUTES
                  ) -> AsyncIterator[tuple[Event, ...]]:
    while True:
        event = await queue.get()
        if event is None:
            return
        batch = [event]
        routes = _routes(event)
        while routes < max_routes and len(batch) < max_events and not queue.empty():
            event = queue.get_nowait()
            if event is None:
                yield tuple(batch)
                return
            batch.append(event)
            routes += _routes(event)
        yield tuple(batch)
