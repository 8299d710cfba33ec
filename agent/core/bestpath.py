"""The decision process: which candidates of one prefix win, and which step decided.

DOC: selection is a pipeline of small pure steps. Each step receives the surviving candidates and
keeps only the best by one criterion; the step that eliminated the winner's last rival is recorded
as the `BestReason` (GoBGP keeps the same record), so `route-agent explain` can say why a route won.

Order (lower/higher as noted):
 1. administrative distance (lowest)
 2. if not all survivors are BGP: source kind (connected > kernel > static > BGP)
 3. BGP only: local-pref (highest), AS-path length (shortest), origin (IGP < EGP < incomplete),
    MED (lowest, compared only between paths from the same neighbour AS, so the result does not
    depend on arrival order), eBGP over iBGP
    -- multipath cut: survivors here are equal-cost; those from the best path's neighbour AS
       (any AS with `multipath_relax`) become one multipath route, up to `max_paths` --
 4. BGP: router id (lowest), peer address (lowest), path id (lowest; the ADD-PATH paths of one
    peer, RFC 7911, differ in nothing else: a deterministic last step, none before any id)
 5. non-BGP: static candidates of several origins at equal distance are merged into one ECMP set
    (FRR does the same for static routes); otherwise the lowest origin name wins.

Candidates are sorted by origin (then path id) first, so the outcome never depends on the order
they arrived in. Paths of one peer (ADD-PATH) are candidates like any other: equal up to the
multipath cut, they are one ECMP route (their neighbour AS is the same when their AS paths start
alike; this is what a local BIRD relaying two upstreams through one session needs).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .model import BestReason, Candidate, SourceKind

Step = Callable[[list[Candidate]], list[Candidate]]


def _keep_min(cands: list[Candidate], key: Callable[[Candidate], object]) -> list[Candidate]:
    best = min(key(c) for c in cands)
    return [c for c in cands if key(c) == best]


def _kind_rank(c: Candidate) -> int:
    return SourceKind.EBGP.rank if c.is_bgp else c.origin.kind.rank


@functools.lru_cache(maxsize=65536)
def _addr_key(text: str) -> tuple[int, int]:
    """(version, integer) of an address: a few peers' addresses, compared for every prefix they
    share (parsing each time cost ~60 % of a best-path run with two candidates)."""
    addr = ipaddress.ip_address(text)
    return addr.version, int(addr)


def step_distance(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: c.distance)


def step_source_kind(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, _kind_rank)


def step_local_pref(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: -c.local_pref)


def step_as_path(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: c.path_length)


def step_origin(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: int(c.bgp_origin))


def step_med(cands: list[Candidate]) -> list[Candidate]:
    """Drop a path when another path from the same neighbour AS has a lower MED."""
    lowest: dict[int, int] = {}
    for c in cands:
        asn = c.neighbor_as
        lowest[asn] = min(lowest.get(asn, c.med), c.med)
    return [c for c in cands if c.med == lowest[c.neighbor_as]]


def step_ebgp(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: not c.ebgp)


def step_router_id(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: _addr_key(c.router_id))


def step_peer_address(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: _addr_key(c.peer_address))


def _path_key(c: Candidate) -> int:
    return -1 if c.path_id is None else c.path_id


def candidate_order(c: Candidate) -> tuple[str, int]:
    """The order candidates of one prefix are kept in: origin name, then path id."""
    return str(c.origin), _path_key(c)


def step_path_id(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, _path_key)


def step_origin_name(cands: list[Candidate]) -> list[Candidate]:
    return _keep_min(cands, lambda c: str(c.origin))


BGP_STEPS: tuple[tuple[Step, BestReason], ...] = (
    (step_local_pref, BestReason.LOCAL_PREF),
    (step_as_path, BestReason.AS_PATH),
    (step_origin, BestReason.ORIGIN),
    (step_med, BestReason.MED),
    (step_ebgp, BestReason.EBGP_OVER_IBGP),
)
BGP_TIE_STEPS: tuple[tuple[Step, BestReason], ...] = (
    (step_router_id, BestReason.ROUTER_ID),
    (step_peer_address, BestReason.PEER_ADDRESS),
    (step_path_id, BestReason.PATH_ID),
)


@dataclass(frozen=True, slots=True)
class Selection:
    """Winners (several for ECMP, best first) and the step that decided."""

    winners: tuple[Candidate, ...]
    reason: BestReason


def _run(cands: list[Candidate], steps, reason: BestReason | None):
    for step, why in steps:
        if len(cands) == 1:
            break
        kept = step(cands)
        if len(kept) < len(cands):
            reason = why
        cands = kept
    return cands, reason


def select(
    candidates: Sequence[Candidate], max_paths: int = 1, multipath_relax: bool = False
) -> Selection:
    """Pick the winners among usable candidates of one prefix (see the module doc for the order)."""
    if not candidates:
        return Selection((), BestReason.NONE)
    if len(candidates) == 1:
        return Selection((candidates[0],), BestReason.ONLY_CANDIDATE)
    cands = sorted(candidates, key=candidate_order)
    if all(c.is_bgp for c in cands):
        cost = _equal_cost(cands[0])
        if all(_equal_cost(c) == cost for c in cands):  # ECMP's usual case: no step can decide
            return _select_bgp(cands, None, max_paths, multipath_relax, equal=True)
    cands, reason = _run(
        cands, ((step_distance, BestReason.ADMIN_DISTANCE),), None
    )
    if not all(c.is_bgp for c in cands):
        cands, reason = _run(cands, ((step_source_kind, BestReason.SOURCE_KIND),), reason)
    if all(c.is_bgp for c in cands):
        return _select_bgp(cands, reason, max_paths, multipath_relax)
    if len(cands) > 1 and all(c.origin.kind == SourceKind.STATIC for c in cands) and max_paths > 1:
        return Selection(tuple(cands[:max_paths]), reason or BestReason.MULTIPATH)
    cands, reason = _run(cands, ((step_origin_name, BestReason.ORIGIN_NAME),), reason)
    return Selection((cands[0],), reason or BestReason.ONLY_CANDIDATE)


def _equal_cost(c: Candidate) -> tuple:
    """What the distance and BGP_STEPS read: candidates alike in all of it keep each other."""
    return c.distance, c.local_pref, c.path_length, c.bgp_origin, c.med, c.ebgp


def _select_bgp(cands, reason, max_paths: int, relax: bool, equal: bool = False) -> Selection:
    if not equal:  # (equal: every step would keep them all, see `_equal_cost`)
        cands, reason = _run(cands, BGP_STEPS, reason)
    equal = cands
    best_list, best_reason = _run(list(equal), BGP_TIE_STEPS, reason)
    best = best_list[0]
    if max_paths > 1 and len(equal) > 1:
        same = [c for c in equal if relax or c.neighbor_as == best.neighbor_as]
        if len(same) > 1:
            rest = sorted(
                (c for c in same if c is not best),
                key=lambda c: (_addr_key(c.router_id), _addr_key(c.peer_address), _path_key(c)),
            )
            return Selection((best, *rest[: max_paths - 1]), reason or BestReason.MULTIPATH)
    return Selection((best,), best_reason or BestReason.ONLY_CANDIDATE)
