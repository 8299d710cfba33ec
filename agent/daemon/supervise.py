"""Helpers for the agent's tasks: a periodic ticker, and one-shot background tasks.

DOC: `periodic()` puts a tick on the queue every few seconds (the interval is read again each
time: a reload may change it). `Spawner` keeps references to one-shot tasks (e.g. starting the
BGP speaker after a reload) and logs their failures.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("route_agent")

async def periodic(seconds_of: Callable[[], float], tick: Callable[[], None]) -> None:
    """Call `tick()` every `seconds_of()` seconds (read again each time: config may change it)."""
    while True:
        await asyncio.sleep(seconds_of())
        tick()


class Spawner:
    """One-shot background tasks: kept referenced until done, failures logged."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def __call__(self, coro, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task %s failed", task.get_name(), exc_info=task.exception())

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
