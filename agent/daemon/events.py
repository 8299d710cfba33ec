"""The core task's input: `Event` and the bounded `EventQueue` every producer puts on.

DOC: producers (the kernel route monitor, the ExaBGP event pump, the Kubernetes reflectors, the
config watcher, SIGHUP, timers, the FIB writer's completions) only `put()` events; the core task
alone takes them. The queue is bounded (`MAX_EVENTS`), and what happens at the bound depends on
what the event is:

* kernel deltas (``kernel``, ``main-table``: batches read from the route monitor) are not queued;
  instead one full resync (``scan``, reason ``queue-full``) is queued, once until it has been
  taken. A full scan re-reads the kernel, so the dropped deltas are recovered, coalesced;
* derived and periodic work that is idempotent (``status``, ``retry``) is not queued twice:
  one waiting event of that kind does the same;
* everything else is never dropped: configuration, BGP session and UPDATE events, End-of-RIB
  timers, Kubernetes batches, FIB write completions and the gate timer are queued beyond the bound.
  Their producers are bounded by other means (one config per reload, one completion per batch in
  flight, the speaker's and the reflectors' own pacing).

A full scan (``scan``) is never queued twice, bound or not: a waiting one re-reads everything a
second would (periodic scans, link flaps and overruns would otherwise queue scans faster than a
100k-route scan runs); it is counted as ``coalesced``.

`put_urgent()` (a BFD state change: ``bfd``; the outcome of urgent nexthop writes sent on their
own: ``urgent-flushed``) puts an event ahead of everything queued: a failure must not wait behind
a burst of UPDATEs. `put_next()` puts one behind the urgent ones but ahead of the FIFO: the rest
of a burst of UPDATEs that stopped for a BFD change keeps its place before what came after it.

Every event met at the bound is counted in ``route_agent_event_queue_overflows_total{kind,action}``
(``action`` ``coalesced`` or ``kept``), and one warning is logged per overflow episode (the next one
once the queue has drained below half).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("route_agent")

MAX_EVENTS = 10_000
DELTAS = frozenset({"kernel", "main-table"})
IDEMPOTENT = frozenset({"status", "retry"})  # (a full scan is never queued twice, bound or not)
RESYNC = ("scan", "queue-full")


@dataclass(frozen=True, slots=True)
class Event:
    # kernel | main-table | config | scan | bgp | bgp-stale | bfd | bfd-cleanup | flushed | urgent-flushed |
    # k8s | status | gate-timeout | retry | urgent
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
        self._urgent: deque[Event] = deque()
        self._next: deque[Event] = deque()

    def put_urgent(self, ev: Event) -> None:
        """`ev` ahead of everything queued (a BFD failure must not wait behind a burst of
        UPDATEs): taken by the next `get`/`get_nowait`. A placeholder ``urgent`` event (no
        handler) goes through the FIFO so a waiting `get` wakes up and `empty()` stays true to
        what is left; never dropped, never coalesced."""
        self._urgent.append(ev)
        self._add(Event("urgent"))

    def put(self, ev: Event) -> None:
        if ev.kind == RESYNC[0] and self._kinds[ev.kind]:
            # a full scan is already queued and will see everything this one would: one is enough
            # (link flaps and periodic scans would otherwise queue scans faster than they run)
            self._count(ev.kind, "coalesced")
            return
        if self._q.qsize() >= self.maxsize:
            if not self._overflowing:
                self._overflowing = True
                log.warning("core event queue full (%d events): kernel deltas become one full "
                            "resync until it drains", self.maxsize)
            if ev.kind in DELTAS:
                self._count(ev.kind, "coalesced")
                if not self._resync_queued:
                    self._resync_queued = True
                    self._add(Event(*RESYNC))
                return
            if ev.kind in IDEMPOTENT and self._kinds[ev.kind]:
                self._count(ev.kind, "coalesced")
                return
            self._count(ev.kind, "kept")
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

    def put_next(self, ev: Event) -> None:
        """`ev` behind the urgent events but ahead of the FIFO: the rest of a burst that gave way
        to an urgent event (`Routing.handle_bgp`), so it keeps its place before what came after
        it. Placeholder as for `put_urgent`."""
        self._next.append(ev)
        self._add(Event("urgent"))

    def _front(self) -> Event | None:
        if self._urgent:  # (its placeholder stays queued: a no-op when taken)
            return self._urgent.popleft()
        if self._next:
            return self._next.popleft()
        return None

    async def get(self) -> Event:
        ev = self._front()
        if ev is not None:
            return ev
        ev = self._taken(await self._q.get())
        if ev.kind == "urgent":  # woken by put_urgent / put_next
            return self._front() or ev
        return ev

    def get_nowait(self) -> Event:
        return self._front() or self._taken(self._q.get_nowait())

    def empty(self) -> bool:
        return self._q.empty()

    def qsize(self) -> int:
        return self._q.qsize()
