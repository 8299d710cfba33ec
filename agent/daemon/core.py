"""The core task: takes events off the one queue and dispatches them; the only writer of state.

DOC: one asyncio task runs `Core.run()`: it waits for an event, then drains the queue (handling
each event with the handlers registered for its kind), then runs the end-of-pass steps (the
Kubernetes commit, the FIB flush) once for the whole burst. Handlers are plain functions that run
to completion; everything they touch (the routing state, the FIB writer's bookkeeping, the
cluster state) is owned by this task, so nothing needs a lock.

A bug or an OS error while handling one event must not take the agent (and the routing of the
node) down: it is logged, counted (``route_agent_event_handler_errors_total``) and a full kernel
resync is queued.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from .events import Event, EventQueue

log = logging.getLogger("route_agent")


class Core:
    def __init__(self, queue: EventQueue, metrics) -> None:
        self.queue = queue
        self.metrics = metrics
        self._handlers: dict[str, list[Callable[[Any], None]]] = defaultdict(list)
        self._end_of_pass: list[tuple[str, Callable[[bool], None], bool]] = []

    def on(self, kind: str, handler: Callable[[Any], None]) -> None:
        """Call `handler(event.data)` for every event of `kind`, in registration order."""
        self._handlers[kind].append(handler)

    def at_end_of_pass(self, name: str, step: Callable[[bool], None], resync: bool = True) -> None:
        """Call `step(retry)` after each pass over the queue; `retry` when a retry event came.
        Without `resync`, a failing step is only logged and counted (no full scan is queued, so
        a step that keeps failing cannot keep the loop spinning)."""
        self._end_of_pass.append((name, step, resync))

    async def run(self) -> None:
        while True:
            ev = await self.queue.get()
            retry = ev.kind == "retry"
            self.handle(ev)
            while not self.queue.empty():
                ev = self.queue.get_nowait()
                retry = retry or ev.kind == "retry"
                self.handle(ev)
            for name, step, resync in self._end_of_pass:
                self._safely(name, step, retry, resync)

    def handle(self, ev: Event) -> None:
        """Handle one event now (errors are contained, see the module doc)."""
        for handler in self._handlers.get(ev.kind, ()):
            if not self._safely(ev.kind, handler, ev.data):
                return

    def _safely(self, what: str, fn: Callable[[Any], None], arg: Any, resync: bool = True) -> bool:
        try:
            fn(arg)
        except Exception:
            resync = resync and what != "scan"
            log.exception("handling %s event failed%s", what, "; full resync" if resync else "")
            self.metrics.handler_errors.inc()
            if resync:
                self.queue.put(Event("scan", "handler-error"))
            return False
        return True
