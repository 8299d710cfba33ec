"""Speaker events handed to the agent in batches, through a cheap single-consumer queue.

DOC: `SpeakerQueue` holds the speaker's events for the agent: a deque and one wake-up future.
`asyncio.Queue` keeps per-item bookkeeping (unfinished-task counts, getter and putter futures)
that cost about as much per one-prefix UPDATE as the guard; this queue is unbounded (the speaker's
reader must never wait: ExaBGP blocks when its API pipe is not read), has one consumer at a time,
and takes a decoded chunk's events in one `put_many`.

`batches(queue)` yields every event of the speaker's queue, in order, in tuples of what is
already waiting (at least one; at most `BATCH_EVENTS` events or about `BATCH_ROUTES` prefixes),
until the stop marker (None): the agent handles a burst of UPDATEs as one RIB change instead of
one per UPDATE, and the bound keeps the core loop's pass budget meaningful.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterable

from ..core.bgp import Event, RouteUpdate

BATCH_EVENTS = 256
BATCH_ROUTES = 4096


class SpeakerQueue:
    """An unbounded FIFO with one consumer (see the module doc); the `asyncio.Queue` calls the
    speaker uses, and `put_many`."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque = deque()
        self._waiter: asyncio.Future | None = None

    def put_nowait(self, item) -> None:
        self._items.append(item)
        if self._waiter is not None:
            self._wake()

    def put_many(self, items: Iterable) -> None:
        self._items.extend(items)
        if self._waiter is not None and self._items:
            self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if not waiter.done():
            waiter.set_result(None)

    async def get(self):
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        return self._items.popleft()

    def get_nowait(self):
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


def _routes(event: Event) -> int:
    if event.__class__ is RouteUpdate:
        return len(event.announced) + len(event.withdrawn) or 1
    return len(getattr(event, "announced", ())) + len(getattr(event, "withdrawn", ())) or 1


async def batches(queue: SpeakerQueue | asyncio.Queue, max_events: int = BATCH_EVENTS,
                  max_routes: int = BATCH_ROUTES) -> AsyncIterator[tuple[Event, ...]]:
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
