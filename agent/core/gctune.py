"""The garbage collector's settings of the agent's processes (the agent, the API helper).

DOC: `tune_gc()`: the routing state is a few big dicts of ints and shared objects, with hardly any
reference cycles, while a burst of routes allocates hundreds of thousands of short-lived tuples
(in the agent; in the API helper, the decoded UPDATEs): with the default threshold (700) the cyclic
collector runs every few hundred routes and costs about a quarter of the time per route. Collect
young objects every 50,000 allocations instead, and keep what start-up created (modules,
configuration, the decoder's tables) out of every collection. Call it once start-up is done.

`LoadFreezer` (the agent's core task, after each pass over its queue): when the tracked objects
grew by `FREEZE_GROWTH` within `WINDOW` seconds, that was a load (a table arriving, a first sync):
its objects are the routing state (attribute sets, candidates, community lists), which lives as
long as its routes, holds no reference cycles and is freed by reference counting when they go.
They go to the permanent generation at once, so the collector never scans them: without it the
young collections alone took 0.54 s of the 7.1 CPU-s of a 1.2M-route table in process, the two
collections of the middle generation 0.23 s more, and every full collection afterwards scans the
whole table again (0.40 s at 1.2M routes, a pause of the core task). Ordinary operation grows
far slower and keeps the collector's normal cycle, so reference cycles made then are collected as
before; a cycle that happens to be young when a load is frozen stays (a full collection after a
1.2M-route table found no unreachable object).
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """See the module DOC."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


FREEZE_GROWTH = 20_000  # tracked objects ...
WINDOW = 1.0  # ... within this many seconds: a load (a table: ~150,000 per second)


class LoadFreezer:
    """Freezes the objects of a load (module DOC). Call `after_pass(now)` with a monotonic time
    after each pass of the owner's loop; `count` is the young generation's count (injectable)."""

    __slots__ = ("count", "freeze", "since", "base")

    def __init__(self, count=lambda: gc.get_count()[0], freeze=gc.freeze) -> None:
        self.count, self.freeze = count, freeze
        self.since, self.base = 0.0, 0  # the window: its start and the count then

    def after_pass(self, now: float) -> bool:
        n = self.count()
        if n < self.base:  # a collection ran: the count starts again
            self.since, self.base = now, n
        elif n - self.base >= FREEZE_GROWTH:
            self.freeze()  # (which starts the count again at 0)
            self.since, self.base = now, 0
            return True
        elif now - self.since > WINDOW:  # slow growth: the window moves on
            self.since, self.base = now, n
        return False
