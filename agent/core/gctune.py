"""The garbage collector's settings of the agent's processes (the agent, the API helper), and
giving the C allocator's free pages back after a load.

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

`malloc_trim()`: a load also leaves free memory inside the C allocator's heap. Python's own
allocator takes small objects from 1 MiB arenas it maps itself, but everything bigger (the tables
of the dicts that grow with the load, lists of updates, lines read from the speaker, netlink
messages) comes from glibc's malloc, whose heap only shrinks from its top: the chunks freed in
its middle stay mapped. glibc's ``malloc_trim(0)`` gives their pages back (19 MiB of 312 at the
full table of bench/bgp_learn.py, in a few ms); the core task calls it once a load is over (one
second after the last pass that froze objects). Where the C library has no ``malloc_trim`` (musl)
nothing is done.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable


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


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` (module DOC), or None where the C library has none."""
    try:
        fn = ctypes.CDLL(None).malloc_trim  # (the process's own C library)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: fn(0)
