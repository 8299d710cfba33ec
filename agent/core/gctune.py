"""The garbage collector's settings of the agent's processes (the agent, the API helper).

DOC: `tune_gc()`: the routing state is a few big dicts of ints and shared objects, with hardly any
reference cycles, while a burst of routes allocates hundreds of thousands of short-lived tuples
(in the agent; in the API helper, the decoded UPDATEs): with the default threshold (700) the cyclic
collector runs every few hundred routes and costs about a quarter of the time per route. Collect
young objects every 50,000 allocations instead, and keep what start-up created (modules,
configuration, the decoder's tables) out of every collection. Call it once start-up is done.
"""

from __future__ import annotations

import gc


def tune_gc() -> None:
    """See the module DOC."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
