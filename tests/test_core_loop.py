"""The core task: a failing handler is contained (logged, counted, full resync queued); a failing
end-of-pass step registered without resync does not keep the loop spinning."""

import asyncio

from agent.api.metrics import Metrics
from agent.daemon.core import Core
from agent.daemon.events import Event, EventQueue


async def test_handler_errors_are_contained_and_ask_for_a_resync():
    m = Metrics()
    q = EventQueue()
    core = Core(q, m)
    seen, passes = [], []

    def bad(data):
        raise ValueError(data)

    core.on("kernel", bad)
    core.on("scan", seen.append)
    core.at_end_of_pass("count", passes.append)
    core.at_end_of_pass("flush", lambda retry: 1 / 0, resync=False)
    task = asyncio.create_task(core.run())
    q.put(Event("kernel", "x"))
    q.put(Event("retry"))
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    assert seen == ["handler-error"]  # one resync, from the handler, none from the flush step
    assert passes == [True]  # one pass (the resync was taken in it too), with a retry event
    assert m.registry.get_sample_value("route_agent_event_handler_errors_total") == 2


async def test_the_allocator_is_trimmed_once_a_load_is_over(monkeypatch):
    """`Core` arms the trim on every pass that froze a load, so it runs once, `TRIM_QUIET` after
    the last of them, and not while the load goes on."""
    import agent.daemon.core as core_mod
    monkeypatch.setattr(core_mod, "TRIM_QUIET", 0.5)
    q = EventQueue()
    core = Core(q, Metrics())
    trims, loads = [], [True, True, True]
    core.trim = lambda: trims.append(len(loads))
    core.after_load(lambda: trims.append("memos"))  # (before the trim: their pages go back with it)
    core.after_load(lambda: 1 / 0)  # (a failing step is logged; the trim still runs)

    class Freezer:
        def after_pass(self, now):
            return loads.pop() if loads else False
    core.freezer = Freezer()
    core.on("kernel", lambda data: None)
    task = asyncio.create_task(core.run())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(3):  # three passes of a load, closer together than TRIM_QUIET
        q.put(Event("kernel"))
        for _ in range(5):
            await asyncio.sleep(0)
    assert loads == [] and (trims == [] or loop.time() - t0 > 0.5)  # the load went on: not yet
    deadline = loop.time() + 5
    while not trims and loop.time() < deadline:
        await asyncio.sleep(0.01)
    q.put(Event("kernel"))  # a pass that froze nothing arms nothing
    await asyncio.sleep(0.7)
    task.cancel()
    assert trims == ["memos", 0]  # once, after the last pass of the load


def test_malloc_trim_is_glibc_s():
    from agent.core.gctune import malloc_trim
    trim = malloc_trim()
    assert trim is not None and trim() in (0, 1)  # (glibc: 1 when memory was given back)


async def test_the_end_of_a_load_runs_its_steps_without_a_trim_too(monkeypatch):
    """Where the C library has no malloc_trim (musl) the memos still go once a load is over."""
    import agent.daemon.core as core_mod
    monkeypatch.setattr(core_mod, "TRIM_QUIET", 0.05)
    q = EventQueue()
    core = Core(q, Metrics())
    core.trim = None
    steps, loads = [], [True]

    class Freezer:
        def after_pass(self, now):
            return loads.pop() if loads else False
    core.freezer = Freezer()
    core.after_load(lambda: steps.append("memos"))
    core.on("kernel", lambda data: None)
    task = asyncio.create_task(core.run())
    q.put(Event("kernel"))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not steps and loop.time() < deadline:
        await asyncio.sleep(0.01)
    task.cancel()
    assert steps == ["memos"]
