"""The agent's side of the BFD child process (`agent.bfd.child`): start, configure, read, restart.

DOC: runs on the agent's event loop. `start()` spawns ``python -m agent.bfd.child`` (the agent's
own interpreter, `wrapper` in front when given, e.g. ``ip netns exec NS``) and a reader thread
that drains its stdout for as long as it lives: a state change becomes `on_change(BfdChange)` on
the loop at once (the caller's handler only queues an event for the core task); the periodic
snapshot replaces `views` / `counts` (read by `show peers`, the metrics and the status).
The reader is a thread, not a task, so that a change is seen even while the loop is held by a
long step: `change_waiting()` tells such a step (the full kernel scan's dump, seconds at 500k
routes) that a change is on its way to the loop, and the step gives way to it. The
session set given to `configure()` is kept and sent again to every new child. If the child dies
it is started again after RESTART_SECONDS; until its sessions come up again they read "down" and
no change is reported for them (a dead child is not a dead peer: nothing is torn down).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .runtime import SessionSpec

log = logging.getLogger("route_agent.bfd")
RESTART_SECONDS = 1.0
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True, slots=True)
class BfdChange:
    peer: str
    old: str  # "admindown", "down", "init", "up"
    new: str
    diag: str
    at: float = 0.0  # CLOCK_MONOTONIC in the BFD process when it happened (system-wide on Linux)


class BfdClient:
    def __init__(self, on_change: Callable[[BfdChange], None], *, wrapper: Sequence[str] = (),
                 python: str = sys.executable) -> None:
        self.on_change = on_change
        self.wrapper = tuple(wrapper)
        self.python = python
        self.specs: list[SessionSpec] = []
        self.views: dict[str, dict] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.late_max_ms = 0.0
        self.late_p99_ms: float | None = None  # (1 ms resolution)
        self.restarts = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._changes: collections.deque[BfdChange] = collections.deque()  # read, not yet delivered

    def change_waiting(self) -> bool:
        """A state change was read and waits for the loop (safe from any thread)."""
        return bool(self._changes)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._supervise(), name="bfd-child")

    async def stop(self) -> None:
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            proc.stdin.close()  # end of file: the child sends AdminDown-free silence and exits
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except asyncio.TimeoutError:
                proc.kill()
        if self._task is not None:
            self._task.cancel()

    def configure(self, specs: Sequence[SessionSpec]) -> None:
        self.specs = list(specs)
        self._send()

    def _send(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None or proc.stdin.is_closing():
            return
        line = {"configure": [{"peer": s.peer, "local": s.local, "minRx": s.timers.min_rx,
                               "minTx": s.timers.min_tx, "multiplier": s.timers.multiplier}
                              for s in self.specs]}
        proc.stdin.write((json.dumps(line) + "\n").encode())

    async def _supervise(self) -> None:
        while not self._stopping:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH")) if p)
            rfd, wfd = os.pipe()
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.wrapper, self.python, "-m", "agent.bfd.child", env=env,
                    stdin=asyncio.subprocess.PIPE, stdout=wfd)
            except OSError as exc:
                os.close(rfd)
                log.error("cannot start the BFD process: %s", exc)
            else:
                self._send()
                os.close(wfd)  # the child has its copy: end of file when it exits
                wfd = -1
                await self._read(rfd)
                code = await self._proc.wait()
                if self._stopping:
                    return
                log.error("the BFD process exited (%s); starting it again", code)
                self.restarts += 1
                self.views = {}
            finally:
                if wfd >= 0:
                    os.close(wfd)
            await asyncio.sleep(RESTART_SECONDS)

    async def _read(self, rfd: int) -> None:
        """Read the child's output in a thread until it ends (the child exited)."""
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        threading.Thread(target=self._reader, args=(rfd, loop, ended), name="bfd-reader", daemon=True).start()
        await ended

    def _reader(self, rfd: int, loop: asyncio.AbstractEventLoop, ended: asyncio.Future) -> None:
        try:
            with open(rfd, "rb", buffering=1 << 16) as pipe:
                for line in pipe:
                    self._line(line, loop)
        except (OSError, ValueError) as exc:
            log.warning("BFD process: reading its output failed: %s", exc)
        finally:
            try:
                loop.call_soon_threadsafe(lambda: ended.done() or ended.set_result(None))
            except RuntimeError:  # the loop is closed: the agent is gone
                pass

    def _deliver(self) -> None:
        """On the loop: hand over the changes the reader queued, in order."""
        while self._changes:
            self.on_change(self._changes.popleft())

    def _line(self, line: bytes, loop: asyncio.AbstractEventLoop) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            log.warning("BFD process: unreadable line %r", line[:200])
            return
        if "change" in msg:
            c = msg["change"]
            self._changes.append(BfdChange(c["peer"], c["old"], c["new"], c["diag"], c.get("at", 0.0)))
            try:
                loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:
                pass
        elif "views" in msg:
            self.views = msg["views"]
            self.counts = {(p, what): n for p, what, n in msg["counts"]}
            self.late_max_ms = msg.get("lateMaxMs", 0.0)
            self.late_p99_ms = msg.get("lateP99Ms")

    def state(self, peer: str) -> str:
        v = self.views.get(peer)
        return v["state"] if v else "down"
