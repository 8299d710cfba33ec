"""The core task: takes events off the one queue and dispatches them; the only writer of state.

DOC: one asyncio task runs `Core.run()`: it waits for an event, then drains the queue (handling
each event with the handlers registered for its kind), then runs the end-of-pass steps (the
Kubernetes commit, the FIB flush) once for the whole burst. Handlers are plain functions that run
to completion; everything they touch (the routing state, the FIB writer's bookkeeping, the
cluster state) is owned by this task, so nothing needs a lock.

A pass ends when the queue is empty or after `PASS_BUDGET` seconds of handling, whichever comes
first, and the task then yields to the event loop: under a steady stream of events (a 100k-route
table arriving, a storm of kernel notifications) the HTTP API, the speaker's reader and the timers
still run every few tens of milliseconds, and the FIB is flushed at least that often.

When the passes make tens of thousands of objects a second (a table being loaded), they are moved
out of the cyclic collector's way (`agent.core.gctune.LoadFreezer`), and once such a load is over
(`TRIM_QUIET` seconds after the last pass that froze objects) the memos that only serve a burst
are let go (`after_load`: the speaker's decoder's) and the C allocator gives the free pages the
load left in its heap back to the system (`agent.core.gctune.malloc_trim`).

A bug or an OS error while handling one event must not take the agent (and the routing of the
node) down: it is logged, counted (``route_agent_event_handler_errors_total``) and a full kernel
resync is queued.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from ..core.gctune import LoadFreezer, malloc_trim
from .events import Event, EventQueue

log = logging.getLogger("route_agent")

SLOW_STEP = 0.25  # seconds: a core step this long is logged
PASS_BUDGET = 0.05  # seconds of event handling before the end-of-pass steps and a yield
TRIM_QUIET = 1.0  # seconds after the last pass of a load before the allocator's free pages go back


class Core:
    def __init__(self, queue: EventQueue, metrics) -> None:
        self.queue = queue
        self.metrics = metrics
        self._handlers: dict[str, list[Callable[[Any], None]]] = defaultdict(list)
        self._end_of_pass: list[tuple[str, Callable[[bool], None], bool]] = []
        # something urgent is on its way to the queue (a BFD change read by its thread): end the
        # pass and yield, so the loop can hand it over
        self.urgent_waiting: Callable[[], bool] = lambda: False
        self.freezer = LoadFreezer()
        self.trim = malloc_trim()
        self._trim_at: asyncio.TimerHandle | None = None
        self._after_load: list[Callable[[], None]] = []

    def on(self, kind: str, handler: Callable[[Any], None]) -> None:
        """Call `handler(event.data)` for every event of `kind`, in registration order."""
        self._handlers[kind].append(handler)

    def after_load(self, step: Callable[[], None]) -> None:
        """Call `step()` once a load is over, before the allocator's trim (memos that only serve
        a burst let go: their memory goes back with the rest)."""
        self._after_load.append(step)

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
            deadline = time.monotonic() + PASS_BUDGET
            while not self.queue.empty() and time.monotonic() < deadline and not self.urgent_waiting():
                ev = self.queue.get_nowait()
                retry = retry or ev.kind == "retry"
                self.handle(ev)
            for name, step, resync in self._end_of_pass:
                self._safely(name, step, retry, resync)
            if self.freezer.after_pass(time.monotonic()):  # a load's objects leave the collector's
                self._load_over_later()  # way; what it leaves, once it is over
            await asyncio.sleep(0)  # let the API, the speaker's reader and the timers run

    def _load_over_later(self) -> None:
        """(Re)arm the end of a load: once no pass has frozen objects for `TRIM_QUIET` seconds."""
        if self._trim_at is not None:
            self._trim_at.cancel()
        self._trim_at = asyncio.get_running_loop().call_later(TRIM_QUIET, self._load_over)

    def _load_over(self) -> None:
        """The `after_load` steps, then the allocator's trim (where the C library has one)."""
        self._trim_at = None
        t0 = time.monotonic()
        before = _rss_mib()
        for step in self._after_load:
            self._safely("after-load", lambda _arg: step(), None, resync=False)  # noqa: B023 (called at once)
        if self.trim is None:
            return
        self.trim()
        log.info("allocator: free memory of a load given back: RSS %.1f -> %.1f MiB in %.1f ms",
                 before, _rss_mib(), (time.monotonic() - t0) * 1000)

    def handle(self, ev: Event) -> None:
        """Handle one event now (errors are contained, see the module doc)."""
        for handler in self._handlers.get(ev.kind, ()):
            if not self._safely(ev.kind, handler, ev.data):
                return

    def _safely(self, what: str, fn: Callable[[Any], None], arg: Any, resync: bool = True) -> bool:
        t0 = time.monotonic()
        try:
            fn(arg)
            took = time.monotonic() - t0
            if took > SLOW_STEP:  # the loop (API, BFD hand-offs, the speaker's reader) waited this long
                log.info("slow core step: %s (%s) took %.3f s", what, getattr(fn, "__qualname__", fn), took)
        except Exception:
            resync = resync and what != "scan"
            log.exception("handling %s event failed%s", what, "; full resync" if resync else "")
            self.metrics.handler_errors.inc()
            if resync:
                self.queue.put(Event("scan", "handler-error"))
            return False
        return True


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:
        return 0.0


_PAGE = os.sysconf("SC_PAGE_SIZE")
