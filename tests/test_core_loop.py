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
