"""The RIB's bulk lane: an `UpdateRun` (new prefixes of one origin sharing one candidate) taken
with whole-dict operations.

DOC: `Rib.apply` hands every `UpdateRun` of its batch to `apply_run`. When none of the run's
prefixes has a candidate yet (nor was touched earlier in the batch), the origin is not a foreign
kernel source and the candidate's kernel route does not depend on the prefix (it is not resolved
recursively), each prefix gets the candidate with one ``dict.update`` and the run's changes are
one route for all of them: no Python step per prefix. Otherwise the run is spelled out as one
`Update` per prefix and goes through `Rib.apply`'s general loop (`_per_prefix`), which stays the
reference (tests/test_import_runs.py compares both).
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING

from .model import Candidate, KernelRoute, Origin, Prefix, Update

if TYPE_CHECKING:
    from .rib import Rib


def apply_run(rib: Rib, prefixes: list[Prefix], origin: Origin, cand: Candidate,
              before: dict, changes: dict[Prefix, KernelRoute | None]) -> None:
    """Apply the run; add its changes to the batch's `changes` (`before`: the prefixes the batch
    touched so far, see `Rib.apply`)."""
    routes = rib._routes
    if (origin.kind.foreign or not routes.keys().isdisjoint(prefixes)
            or (before and not before.keys().isdisjoint(prefixes))):
        changes.update(_per_prefix(rib, prefixes, origin, cand, before))
        return
    generation, cache = rib.resolver.generation, rib._single_cache
    hit = cache.get(id(cand))
    if hit is not None and hit[0] is cand and hit[1] == generation:
        route = hit[2]
    else:
        route, shared = rib._single_route(cand, prefixes[0])
        if not shared:  # resolved recursively: the route may differ per prefix
            changes.update(_per_prefix(rib, prefixes, origin, cand, before))
            return
    n = len(routes)
    routes.update(zip(prefixes, repeat(cand)))
    rib.counts[origin] += len(routes) - n
    if route is not None:
        changes.update(zip(prefixes, repeat(route)))


def _per_prefix(rib: Rib, prefixes: list[Prefix], origin: Origin, cand: Candidate,
                before: dict) -> dict[Prefix, KernelRoute | None]:
    """The run as one `Update` per prefix, through `Rib.apply`. A prefix the outer batch touched
    before the run is left out of the result: the outer batch compares it with its state before
    the batch (the inner one would compare with its state before the run)."""
    changes = rib.apply([Update(p, origin, cand) for p in prefixes])
    if before:
        for prefix in before.keys() & changes.keys():
            del changes[prefix]
    return changes
