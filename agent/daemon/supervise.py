"""Supervision of the agent's long-running tasks and of one-shot background tasks.

DOC: a long-running task (the core task, the periodic full scan, the config poll, the status
timer) is never expected to end. `supervised()` runs one under the agent's TaskGroup: if it
raises or returns, that is logged at ERROR with the traceback, counted in
``route_agent_task_restarts_total{task}``, and the task is started again after a backoff
(RESTART_MIN doubling to RESTART_MAX; back to RESTART_MIN once it ran RESTART_STABLE seconds).
So one failing task neither ends the process silently nor cancels its siblings through the
TaskGroup; shutdown still unwinds the one TaskGroup by cancellation. `Spawner` keeps references
to one-shot tasks (e.g. starting the BGP speaker after a reload) and logs their failures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("route_agent")

RESTART_MIN, RESTART_MAX, RESTART_STABLE = 1.0, 30.0, 60.0


async def supervised(name: str, make: Callable[[], Awaitable[None]], restarts=None) -> None:
    """Run `make()` until cancelled, restarting it (with backoff) whenever it ends."""
    delay = RESTART_MIN
    while True:
        began = time.monotonic()
        try:
            await make()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("task %s failed; restarting it in %.1f s", name, delay)
        else:
            log.error("task %s ended unexpectedly; restarting it in %.1f s", name, delay)
        if restarts is not None:
            restarts.labels(name).inc()
        if time.monotonic() - began >= RESTART_STABLE:
            delay = RESTART_MIN
        await asyncio.sleep(delay)
        delay = min(delay * 2, RESTART_MAX)


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
