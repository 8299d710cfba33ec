"""ADD-PATH (RFC 7911) routes through the import stage: one path = (peer, prefix, path id).

DOC: a peer with ADD-PATH negotiated for a family sends each route with a path identifier, and
may send several paths of one prefix (a local BIRD with ``add paths tx`` relays the route of each
of its upstreams). Each path is handled like a route of its own: guard, AS_PATH loop check,
policy, max-prefix, candidate; an implicit replace is per (prefix, path id), a withdrawal names
its path id, and each accepted path is its own RIB candidate (`Candidate.path_id`, `Update.path_id`:
the RIB keys candidates by origin and path id, and best path / ECMP run across them).

These functions are `ImportStage`'s (`agent.import.stage`) for UPDATEs that carry path ids
(`RouteUpdate.path_ids`); the routes without path ids never come here, so the common case keeps
its loop (`ImportStage.receive_batch`) untouched. State: `PeerState.paths`, prefix -> {path id:
`Verdict`}, beside `PeerState.verdicts` (prefix -> `Verdict` for routes without a path id); the
per-peer counts (`held`: received / accepted / rejected now, `rejected_kept`, `unkept`), the
cumulative counters and max-prefix count **paths** (as FRR does: two paths of one prefix are
two), so ``show peers`` and the max-prefix limit of an ADD-PATH peer are in paths.
A path's key outside the stage (graceful-restart stale sets, withdrawals of a peer's routes) is
the tuple ``(prefix, path_id)``; a route without path id is keyed by its `Prefix` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..core.model import Prefix, Update, new_update
from ..policy.prefixes import V6_FLAG
from ..policy.verdict import Reason, Verdict
from .maxprefix import MaxPrefixDecision
from .peer import PeerState

if TYPE_CHECKING:
    from .stage import ImportStage

_OK = MaxPrefixDecision.OK
_DISCARD = MaxPrefixDecision.DISCARD
_TEARDOWN = MaxPrefixDecision.TEARDOWN


def receive_paths(stage: ImportStage, st: PeerState, peer: str, prefixes: Sequence[Prefix],
                  path_ids: Sequence[int], nexthop: str | None, attrs: Any, out: list[Update],
                  stale: set | None) -> tuple[MaxPrefixDecision, Verdict | None]:
    """`ImportStage.receive_batch` for paths: ``prefixes[i]`` with path id ``path_ids[i]``, all
    with one next hop and attribute set. Same steps and results; keys ``(prefix, path_id)``."""
    s = st.settings
    guard, allow_default, allow_covering = stage.guard.check, s.allow_default, s.allow_covering
    admit, release = stage.maxprefix.admit, stage.maxprefix.release
    paths, held, origin = st.paths, st.held, st.origin
    fam = 6 if prefixes and prefixes[0] & V6_FLAG else 4
    base = 2 if fam == 6 else 0
    bound = st.bound
    shared = st.loop_verdict if st.looped(attrs) else (st.fixed if bound is None else None)
    per_prefix = shared is None and bound.reads_prefix  # type: ignore[union-attr]
    cand = mods = path_cand = last_pid = None
    accepted = 0
    rejected: dict[Reason, int] = {}
    decision = _OK
    verdict = shared
    for prefix, pid in zip(prefixes, path_ids):
        verdict = guard(prefix, nexthop, allow_default=allow_default, allow_covering=allow_covering)
        if verdict is None:
            if shared is not None:
                verdict = shared
            elif per_prefix:
                verdict = bound.evaluate(prefix, nexthop, attrs)  # type: ignore[union-attr]
            else:
                verdict = shared = bound.evaluate(prefix, nexthop, attrs)  # type: ignore[union-attr]
        key = (prefix, pid)
        was_stale = bool(stale) and key in stale  # type: ignore[operator]
        if was_stale:
            stale.discard(key)  # type: ignore[union-attr]
        by_id = paths.get(prefix)
        old = by_id.get(pid) if by_id is not None else None
        was_accepted = old is not None and old.accepted
        if verdict.accepted:
            if not was_accepted:
                d = admit(peer, fam)
                if d is not _OK:
                    if decision is _OK or d is _TEARDOWN:
                        decision = d
                    if d is _DISCARD or d is _TEARDOWN:
                        verdict = st.max_verdict(fam)
        elif was_accepted:
            release(peer, fam)
        if old is not None:
            held[base + old.accepted] -= 1
            if not old.accepted:
                st.rejected_kept -= 1
        if verdict.accepted:
            if by_id is None:
                by_id = paths[prefix] = {}
            by_id[pid] = verdict
            held[base + 1] += 1
            accepted += 1
            if cand is None or verdict.mods is not mods:
                mods = verdict.mods
                cand = st.candidate(nexthop, attrs, mods)
                path_cand = None
            if path_cand is None or pid != last_pid:  # (an UPDATE's paths share their id, often)
                path_cand, last_pid = st.path_candidate(cand, pid), pid
            out.append(new_update((prefix, origin, path_cand, pid)))
            continue
        rejected[verdict.reason] = rejected.get(verdict.reason, 0) + 1
        if st.rejected_kept < stage.keep_rejected:
            if by_id is None:
                by_id = paths[prefix] = {}
            by_id[pid] = verdict
            held[base] += 1
            st.rejected_kept += 1
        else:
            st.unkept[base >> 1] += 1
            if old is not None:
                del by_id[pid]  # type: ignore[union-attr]
                if not by_id:
                    del paths[prefix]
        if was_accepted or was_stale:
            out.append(new_update((prefix, origin, None, pid)))
    stage.count(st, fam, len(prefixes), accepted, rejected)
    return decision, verdict


def withdraw_path(stage: ImportStage, st: PeerState, peer: str, prefix: Prefix, pid: int) -> Update | None:
    """The peer withdrew path `pid` of `prefix`: the RIB withdraw, or None if it was not accepted."""
    by_id = st.paths.get(prefix)
    old = by_id.pop(pid, None) if by_id else None
    if old is None:
        return None
    if not by_id:
        del st.paths[prefix]
    v6 = prefix & V6_FLAG
    st.held[(2 if v6 else 0) + old.accepted] -= 1
    if not old.accepted:
        st.rejected_kept -= 1
        return None
    stage.maxprefix.release(peer, 6 if v6 else 4)
    return Update(prefix, st.origin, None, pid)


def accepted_paths(st: PeerState, prefixes: Iterable[Prefix] | None = None) -> list[tuple[Prefix, int]]:
    """The ``(prefix, path_id)`` keys of the peer's accepted paths (of `prefixes` only, if given)."""
    paths = st.paths
    pairs = paths.items() if prefixes is None else ((p, paths[p]) for p in prefixes if p in paths)
    return [(p, pid) for p, by_id in pairs for pid, v in by_id.items() if v.accepted]


def recheck_paths(stage: ImportStage, st: PeerState, peer: str, keys: list[Prefix] | None = None) -> list[Update]:
    """`ImportStage.recheck_guard` for paths: accepted paths the grown guard refuses now (only
    those of `keys`, the prefixes related to what it gained, unless None)."""
    s = st.settings
    out = []
    for prefix, pid in accepted_paths(st, keys):
        verdict = stage.guard.check(prefix, allow_default=s.allow_default, allow_covering=s.allow_covering)
        if verdict is None:
            continue
        v6 = prefix & V6_FLAG
        base = 2 if v6 else 0
        st.held[base + 1] -= 1
        st.held[base] += 1
        st.rejected_kept += 1
        st.paths[prefix][pid] = verdict
        stage.maxprefix.release(peer, 6 if v6 else 4)
        stage.count(st, 6 if v6 else 4, 0, 0, {verdict.reason: 1})
        out.append(Update(prefix, st.origin, None, pid))
    return out
