"""The core task's input: `Event` and the `EventQueue` every producer puts on.

DOC: producers (the kernel route monitor, the ExaBGP event pump, the Kubernetes reflectors, the
config watcher, SIGHUP, timers, the FIB writer's completions) only `put()` events; the core task
alone takes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("route_agent")

MAX_EVENTS = 10_000
DELTAS = frozenset({"kernel", "main-table"})
IDEMPOTENT = frozenset({"scan", "status", "retry"})
RESYNC = ("scan", "queue-full")


@dataclass(frozen=True, slots=True)
class Event:
    # kernel | main-table | config | scan | bgp | bgp-stale | flushed | k8s | status | gate-timeout | retry
    kind: str
    data: Any = None


class EventQueue:
    """A FIFO of `Event`s with the overflow policy above; `counter` is labelled (kind, action)."""

    def __init__(self, maxsize: int = MAX_EVENTS, counter=None) -> None:
        self.maxsize = maxsize
        self.counter = counter
        self._q: asyncio.Queue[Event] = asyncio.Queue()  # the bound is enforced in put()
        self._kinds: Counter[str] = Counter()
        self._resync_queued = False
        self._overflowing = False

    def put(self, ev: Event) -> None:
        self._add(ev)

    def _add(self, ev: Event) -> None:
        self._q.put_nowait(ev)
        self._kinds[ev.kind] += 1

    def _count(self, kind: str, action: str) -> None:
        if self.counter is not None:
            self.counter.labels(kind, action).inc()

    def _taken(self, ev: Event) -> Event:
        self._kinds[ev.kind] -= 1
        if ev.kind == RESYNC[0] and ev.data == RESYNC[1]:
            self._resync_queued = False
        if self._overflowing and self._q.qsize() < self.maxsize // 2:
            self._overflowing = False
        return ev

    async def get(self) -> Event:
        return self._taken(await self._q.get())

    def get_nowait(self) -> Event:
        return self._taken(self._q.get_nowait())

    def empty(self) -> bool:
        return self._q.empty()

    def qsize(self) -> int:
        return self._q.qsize()
