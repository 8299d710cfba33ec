"""The agent's side of the BFD child process (`agent.bfd.child`): start, configure, read, restart.

DOC: runs on the agent's event loop. `start()` spawns ``python -m agent.bfd.child`` (the agent's
own interpreter, `wrapper` in front when given, e.g. ``ip netns exec NS``) and a reader task that
drains its stdout for as long as it lives: a state change becomes `on_change(BfdChange)` at once
(on the loop: the caller's handler only queues an event for the core task); the periodic
snapshot replaces `views` / `counts` (read by `show peers`, the metrics and the status). The
session set given to `configure()` is kept and sent again to every new child. If the child dies
it is started again after RESTART_SECONDS; until its sessions come up again they read "down" and
no change is reported for them (a dead child is not a dead peer: nothing is torn down).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
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
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self.wrapper, self.python, "-m", "agent.bfd.child", env=env,
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=2**22)
            except OSError as exc:
                log.error("cannot start the BFD process: %s", exc)
            else:
                self._send()
                await self._read(self._proc)
                code = await self._proc.wait()
                if self._stopping:
                    return
                log.error("the BFD process exited (%s); starting it again", code)
                self.restarts += 1
                self.views = {}
            await asyncio.sleep(RESTART_SECONDS)

    async def _read(self, proc) -> None:
        while True:
            line = await proc.stdout.readline()
            if not line:
                return
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning("BFD process: unreadable line %r", line[:200])
                continue
            if "change" in msg:
                c = msg["change"]
                self.on_change(BfdChange(c["peer"], c["old"], c["new"], c["diag"], c.get("at", 0.0)))
            elif "views" in msg:
                self.views = msg["views"]
                self.counts = {(p, what): n for p, what, n in msg["counts"]}
                self.late_max_ms = msg.get("lateMaxMs", 0.0)
                self.late_p99_ms = msg.get("lateP99Ms")

    def state(self, peer: str) -> str:
        v = self.views.get(peer)
        return v["state"] if v else "down"
