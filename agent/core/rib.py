"""The RIB: every source's candidates per prefix, and the kernel route each prefix should have.

DOC: one dict maps a `Prefix` to its candidates: a bare `Candidate` when only one origin offers the
prefix (the common case, and the cheap one in memory), else a tuple sorted by origin (then path
id). A candidate is keyed by (origin, path id): a BGP peer with ADD-PATH offers one candidate per
path (`Update.path_id`, `Candidate.path_id`), each replaced or withdrawn on its own; without
ADD-PATH the path id is None and an origin has one candidate per prefix. `counts` counts
candidates per origin (so paths, for an ADD-PATH peer). Nothing
derived is stored per route: the winner is recomputed from the candidates when a prefix changes,
which keeps a million routes at a dict slot, an int key and a shared candidate each.

`apply(updates)` takes a batch of source updates (`UpdateRun`s among them: `ribruns`) and
returns the prefixes whose desired kernel route changed (old best vs new best), mapped to the new
`KernelRoute` or None (nothing of ours: no usable candidate, or a foreign route wins so we never
shadow what another daemon owns).

Next hops are resolved through the `Resolver`, which learns directly connected routes from the
foreign kernel candidates passing through here. When connectivity changes (an interface address or
link state), every prefix with next hops is re-emitted; the FIB drops what did not change.

The read side (`decide` for ``explain``, size, membership, a scan per origin) is
`agent.core.ribviews.RibViews`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .bestpath import Selection, candidate_order, select
from .model import (
    NEVER_INSTALL, RUN, Candidate, KernelRoute, NextHop, Origin, Prefix, RouteType,
    Update, intern, nexthops
)
from .resolver import Resolver
from .ribruns import apply_run
from .ribviews import RibViews

Entry = Candidate | tuple[Candidate, ...]
_UNICAST = RouteType.UNICAST  # (an enum member's lookup on its class costs ~60 ns in 3.11: once per set here)


def _through_itself(vias: tuple[Prefix, ...], prefix: Prefix) -> bool:
    return any(v.covers(prefix) for v in vias)


def _connected_devs(c: Candidate | None) -> tuple[str, ...]:
    """Devices through which a foreign candidate makes its prefix directly reachable."""
    if c is None or not c.origin.kind.foreign or c.type != RouteType.UNICAST or not c.nexthops:
        return ()
    if any(nh.gateway is not None or nh.dev is None for nh in c.nexthops):
        return ()
    return tuple(nh.dev for nh in c.nexthops)


class Rib(RibViews):
    def __init__(
        self, max_paths: int = 16, resolver: Resolver | None = None, multipath_relax: bool = False,
        default_metric: int | None = None,
    ) -> None:
        self.max_paths = max_paths
        # the FIB's metric, filled into routes that policy gave none (None: leave it to the FIB)
        self.default_metric = default_metric
        self.multipath_relax = multipath_relax
        self.resolver = resolver or Resolver()
        self.resolver.lookup = self._lookup
        self._routes: dict[Prefix, Entry] = {}
        self._route_cache: dict[tuple[int, int | None], KernelRoute] = {}
        self._single_cache: dict[int, tuple[Candidate, int, KernelRoute | None]] = {}
        self._hops_cache: dict[int, tuple[tuple, int, int | None, KernelRoute | None]] = {}
        # prefixes offered by the same origins with the same attributes share one candidate
        # tuple (`_shared`), and its kernel route is remembered like a single candidate's
        self._tuples: dict[tuple[int, ...], tuple[Candidate, ...]] = {}
        self._multi_cache: dict[int, tuple[tuple, int, int, bool, KernelRoute | None]] = {}
        self.counts: Counter[Origin] = Counter()
        self.failed: set[Origin] = set()  # origins whose candidates are unusable (`set_failed`)

    # ---- updates ----
    def apply(self, updates: Iterable[Update]) -> dict[Prefix, KernelRoute | None]:
        generation = self.resolver.generation
        before: dict[Prefix, KernelRoute | None] = {}
        changes: dict[Prefix, KernelRoute | None] = {}
        routes, desired, set_, counts = self._routes, self.desired, self._set, self.counts
        single = self._single_cache
        added_origin, added = None, 0  # new prefixes of one origin, counted once (Origin's hash is Python)
        for prefix, origin, cand, path_id in updates:
            if path_id is RUN:  # an `UpdateRun` (`prefix`: its prefixes): `ribruns`
                if added:
                    counts[added_origin] += added
                    added_origin, added = None, 0
                apply_run(self, prefix, origin, cand, before, changes)
                continue
            if prefix not in before:
                cur = routes.get(prefix)
                if cur is None:
                    if cand is not None and not origin.kind.foreign:
                        # a new prefix with one candidate: the common case of a big table
                        routes[prefix] = cand
                        if origin is not added_origin:
                            if added:
                                counts[added_origin] += added
                            added_origin, added = origin, 0
                        added += 1
                        hit = single.get(id(cand))  # desired(prefix), inlined for the hot path
                        if hit is not None and hit[0] is cand and hit[1] == generation:
                            route = hit[2]
                        else:
                            route = self._single_route(cand, prefix)[0]
                        if route is not None:
                            changes[prefix] = route
                        continue
                    before[prefix] = None
                elif prefix in changes:  # added by the fast path earlier in this batch
                    del changes[prefix]
                    before[prefix] = None
                else:
                    before[prefix] = desired(prefix)
            if added:  # (exact counts before a change that may decrement them)
                counts[added_origin] += added
                added_origin, added = None, 0
            set_(prefix, origin, cand, path_id)
        if added:
            counts[added_origin] += added
        if self.resolver.generation != generation:
            return self.reevaluate() | {p: desired(p) for p in (before | changes)}
        for prefix, old in before.items():
            new = desired(prefix)
            if new is not old and new != old:
                changes[prefix] = new
        resolver = self.resolver
        if resolver.watching and any(resolver.affects(p) for p in changes):
            resolver.invalidate()  # a route that recursive next hops resolve through changed
            return self.reevaluate() | changes
        return changes

    def set_default_metric(self, metric: int | None) -> dict[Prefix, KernelRoute | None]:
        """The FIB's metric changed: every desired route changes with it."""
        self.default_metric = metric
        self._single_cache.clear()
        self._hops_cache.clear()
        self._multi_cache.clear()
        return {p: self.desired(p) for p in self._routes}

    def set_connected(self, changes: Iterable[tuple[Prefix, str, bool]]) -> dict[Prefix, KernelRoute | None]:
        """Connected routes known outside our table (prefix, device, present): resolution only."""
        generation = self.resolver.generation
        for prefix, dev, present in changes:
            if present:
                self.resolver.add_connected(prefix, dev)
            else:
                self.resolver.remove_connected(prefix, dev)
        return self.reevaluate() if self.resolver.generation != generation else {}

    def set_failed(self, origin: Origin, failed: bool) -> None:
        """A source failed (BFD down for a BGP peer) while its candidates are still here, to be
        withdrawn in slices: from now on every decision ignores them, so nothing re-decided
        meanwhile (another peer's update, a rescan, a link change) puts them back. The caller
        clears it once they are all withdrawn. Nothing is re-decided here."""
        if failed != (origin in self.failed):
            (self.failed.add if failed else self.failed.discard)(origin)
            self.resolver.invalidate()  # (the generation: remembered decisions are void)

    def set_link(self, name: str, up: bool | None) -> dict[Prefix, KernelRoute | None]:
        return self.reevaluate() if self.resolver.set_link(name, up) else {}

    def reevaluate(self) -> dict[Prefix, KernelRoute | None]:
        """The desired route of every prefix whose candidates have next hops (after connectivity
        changed). The FIB ignores the ones equal to what is installed."""
        out = {}
        for prefix, entry in self._routes.items():
            cands = (entry,) if isinstance(entry, Candidate) else entry
            if any(c.nexthops and not c.origin.kind.foreign for c in cands):
                out[prefix] = self.desired(prefix)
        self.resolver.settled()
        return out

    def _set(self, prefix: Prefix, origin: Origin, cand: Candidate | None, path_id: int | None = None) -> None:
        cur = self._routes.get(prefix)
        old: Candidate | None = None
        if cur is None:
            if cand is None:
                return
            self._routes[prefix] = cand
            self.counts[origin] += 1
            if cand.origin.kind.foreign:
                for dev in _connected_devs(cand):
                    self.resolver.add_connected(prefix, dev)
            return
        if isinstance(cur, Candidate):
            if cur.origin == origin and cur.path_id == path_id:
                old = cur
                if cand is None:
                    del self._routes[prefix]
                else:
                    self._routes[prefix] = cand
            elif cand is not None:
                self._routes[prefix] = self._shared(tuple(sorted((cur, cand), key=candidate_order)))
        else:
            rest = []
            for c in cur:
                if c.origin == origin and c.path_id == path_id:
                    old = c
                else:
                    rest.append(c)
            if cand is not None:
                rest.append(cand)
                rest.sort(key=candidate_order)
            if not rest:
                del self._routes[prefix]
            else:
                self._routes[prefix] = rest[0] if len(rest) == 1 else self._shared(tuple(rest))
        if old is None and cand is not None:
            self.counts[origin] += 1
        elif old is not None and cand is None:
            self.counts[origin] -= 1
            if not self.counts[origin]:
                del self.counts[origin]
        for dev in _connected_devs(old):
            self.resolver.remove_connected(prefix, dev)
        for dev in _connected_devs(cand):
            self.resolver.add_connected(prefix, dev)

    # ---- decisions ----
    def candidates(self, prefix: Prefix) -> tuple[Candidate, ...]:
        entry = self._routes.get(prefix)
        if entry is None:
            return ()
        return (entry,) if isinstance(entry, Candidate) else entry

    def _usable(self, c: Candidate, prefix: Prefix) -> bool:
        if c.distance >= NEVER_INSTALL or (self.failed and c.origin in self.failed):
            return False
        if c.origin.kind.foreign or c.type != RouteType.UNICAST:
            return True
        hit = self.resolver.resolve(c.nexthops)
        return bool(hit[0]) and not (hit[3] and _through_itself(hit[3], prefix))

    def selection(self, prefix: Prefix) -> Selection:
        return select(
            [c for c in self.candidates(prefix) if self._usable(c, prefix)],
            self.max_paths,
            self.multipath_relax,
        )

    def desired(self, prefix: Prefix) -> KernelRoute | None:
        entry = self._routes.get(prefix)
        if entry is None:
            return None
        if entry.__class__ is not tuple:  # one origin (a bare candidate, of either shape): no selection needed
            hit = self._single_cache.get(id(entry))
            if hit is not None and hit[0] is entry and hit[1] == self.resolver.generation:
                return hit[2]
            return self._single_route(entry, prefix)[0]
        return self._desired_multi(entry, prefix)

    def _shared(self, cands: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
        """One tuple object for every prefix with exactly these candidates (by identity: the
        candidates of a shared UPDATE are shared), so `_desired_multi` can remember its route;
        a prefix costs a reference instead of a tuple. Bounded like the other caches (a
        cleared entry only stops being shared)."""
        key = tuple(map(id, cands))  # the stored tuple keeps its members alive: ids stay theirs
        shared = self._tuples.get(key)
        if shared is not None:
            return shared
        if len(self._tuples) > 8192:
            self._tuples.clear()
        self._tuples[key] = cands
        return cands

    def _desired_multi(self, entry: tuple[Candidate, ...], prefix: Prefix) -> KernelRoute | None:
        """The kernel route of a prefix with several candidates, remembered per candidate tuple
        (`_shared`) for the current resolver generation and multipath settings, unless a
        candidate resolves recursively (then the result depends on the prefix). A failed peer's
        clean-up reads this for every prefix it offered, before and after."""
        generation, max_paths, relax = self.resolver.generation, self.max_paths, self.multipath_relax
        hit = self._multi_cache.get(id(entry))
        if hit is not None and hit[0] is entry and hit[1] == generation and hit[2] == max_paths \
                and hit[3] == relax:
            return hit[4]
        route = self._kernel_route(self.selection(prefix).winners, prefix)
        resolve = self.resolver.resolve
        if not any(c.type is RouteType.UNICAST and not c.origin.kind.foreign and resolve(c.nexthops)[3]
                   for c in entry):
            if len(self._multi_cache) > 8192:
                self._multi_cache.clear()
            self._multi_cache[id(entry)] = (entry, generation, max_paths, relax, route)
        return route

    def _single_route(self, c: Candidate, prefix: Prefix) -> tuple[KernelRoute | None, bool]:
        """The kernel route of a prefix whose only candidate is `c`, and whether it is the route
        of every prefix with `c` alone (False: `c` resolves recursively, through a route that
        may cover the prefix itself). Candidates are shared by
        many prefixes: each one's route is remembered for the current resolver generation (keyed
        by identity; the value keeps it alive). Candidates of distinct attribute sets share their
        next hops: a BGP candidate's route is remembered per next-hop tuple and metric too."""
        if self.failed and c.origin in self.failed:
            return None, True  # (not remembered: the caches are shared by next hops)
        generation = self.resolver.generation
        hops = c.nexthops
        f = c[3]  # (``form``: None for a unicast route at the default metric, the common case)
        metric = None if f is None else f.metric
        plain = c.distance < NEVER_INSTALL and (f is None or f.type is _UNICAST) and not c.origin.kind.foreign
        hit = self._hops_cache.get(id(hops)) if plain else None
        if hit is not None and hit[0] is hops and hit[1] == generation and hit[2] == metric:
            route, recursive = hit[3], False  # remembered for `c` below: its next prefix costs no call
        else:
            route, recursive = self._single(c, prefix)
            hit = None
        if not recursive:  # a recursive result depends on the prefix: not shareable
            if len(self._single_cache) > 8192:  # (a candidate's prefixes come together)
                self._single_cache.clear()
                self._hops_cache.clear()
                hit = None
            self._single_cache[id(c)] = (c, generation, route)
            if plain and hit is None:  # (a hit is already there as it would be written)
                self._hops_cache[id(hops)] = (hops, generation, metric, route)
        return route, not recursive

    def _single(self, c: Candidate, prefix: Prefix) -> tuple[KernelRoute | None, bool]:
        if c.distance >= NEVER_INSTALL or c.origin.kind.foreign:
            return None, False
        if c.type is not _UNICAST:
            return self._kernel_route((c,), prefix), False
        hit = self.resolver.resolve(c.nexthops)
        if hit[3] and _through_itself(hit[3], prefix):
            return None, True
        return (self._cached_route(hit[0], c.metric) if hit[0] else None), bool(hit[3])

    def _lookup(self, prefix: Prefix, depth: int) -> tuple[NextHop, ...] | None:
        """For recursive resolution: the resolved next hops of the route at exactly `prefix`."""
        entry = self._routes.get(prefix)
        if entry is None:
            return None
        winners = self.selection(prefix).winners
        if not winners:
            return None
        if winners[0].origin.kind.foreign:
            return winners[0].nexthops if winners[0].type == RouteType.UNICAST else None
        route = self._kernel_route(winners, prefix)
        return route.nexthops if route is not None else None

    def _kernel_route(self, winners: tuple[Candidate, ...], prefix: Prefix) -> KernelRoute | None:
        if not winners or any(w.origin.kind.foreign for w in winners):
            return None
        first = winners[0]
        if first.type != RouteType.UNICAST:
            metric = self.default_metric if first.metric is None else first.metric
            return intern(KernelRoute(first.type, (), metric))
        if len(winners) == 1:
            hops = self.resolver.resolve(first.nexthops)[0]
        else:
            hops = nexthops(*(nh for w in winners for nh in self.resolver.resolve(w.nexthops)[0]))
        return self._cached_route(hops, first.metric)

    def _cached_route(self, hops: tuple, metric: int | None) -> KernelRoute:
        if metric is None:
            metric = self.default_metric
        key = (id(hops), metric)  # hops are interned, so their id is stable
        route = self._route_cache.get(key)
        if route is None or route.nexthops is not hops:
            route = self._route_cache[key] = intern(KernelRoute(RouteType.UNICAST, hops, metric))
        return route
