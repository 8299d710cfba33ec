"""The cyclic garbage collector, tuned for a few big dicts of routing state.

DOC: the routing state is millions of small objects (prefixes, candidates, attribute tuples,
kernel routes) with hardly any reference cycles: they are freed by reference counting, and the
cyclic collector only has to look at them. A full (oldest-generation) collection walks every
tracked object, about 1 µs each here: ~0.7 s with 100k learned routes, ~5 s with 500k, during
which the event loop does nothing else (a BFD Down waited that long behind it, measured with
bench/failover.py). So:

  * `tune()` at start: collect young objects every 50,000 allocations instead of 700 (a burst of
    routes allocates hundreds of thousands of short-lived tuples), and freeze what start-up made;
  * `settle(why)` once a table has been loaded (a peer's End-of-RIB, the agent ready): freeze
    everything alive into the permanent generation, which no collection walks (``gc.freeze``
    moves lists, it does not traverse them). Routes learned later are walked until the next
    settle; frozen objects are still freed by reference counting as routes go away. The price:
    a reference cycle that was garbage at that moment is never collected (we make none on
    purpose).
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("route_agent")


def tune() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def settle(why: str) -> None:
    before = gc.get_freeze_count()
    gc.freeze()
    log.debug("gc: %d objects frozen (%s; %d before)", gc.get_freeze_count(), why, before)
