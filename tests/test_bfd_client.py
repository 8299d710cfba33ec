"""The BFD child process through its client: two agents' worth of BFD over loopback, a change
reported on the loop, a child that dies is started again with its sessions."""

import asyncio
import random
import time

from agent.bfd.client import BfdClient
from agent.bfd.runtime import SessionSpec
from agent.bfd.session import Timers


async def until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.02)
    return cond()


def test_child_sessions_up_down_and_restart():
    base = f"127.{random.randint(1, 250)}.{random.randint(1, 250)}"
    a_addr, b_addr = f"{base}.1", f"{base}.2"
    t = Timers(100, 100, 3)

    async def main():
        changes = []
        a, b = BfdClient(changes.append), BfdClient(lambda c: None)
        await a.start()
        await b.start()
        try:
            a.configure([SessionSpec(b_addr, a_addr, t)])
            b.configure([SessionSpec(a_addr, b_addr, t)])
            assert await until(lambda: a.state(b_addr) == "up")
            assert changes[-1].new == "up" and changes[-1].peer == b_addr
            assert await until(lambda: a.counts.get((b_addr, "rx"), 0) > 0)
            b._proc.kill()  # b's child dies: restarted with its session, which comes up again
            assert await until(lambda: b.restarts == 1)
            assert await until(lambda: any(c.new == "down" for c in changes), 5)
            assert await until(lambda: a.state(b_addr) == "up" and b.state(a_addr) == "up")
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())
