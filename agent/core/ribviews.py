"""The RIB's read side: why a prefix has the route it has, and the views of its table.

DOC: `RibViews` is the part of `agent.core.rib.Rib` that only reads: `decide` (every candidate of
one prefix with its state, best / multipath / lost / unresolved / never-install and why, the
selection's reason and the kernel route that follows: what ``explain`` prints) and the table's
size, membership and per-origin scan. It recomputes what it shows from the candidates (the RIB
stores nothing derived per route) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .model import NEVER_INSTALL, BestReason, Candidate, KernelRoute, Origin, Prefix

if TYPE_CHECKING:
    from .resolver import Resolver


@dataclass(frozen=True, slots=True)
class CandidateState:
    candidate: Candidate
    status: str  # best | multipath | lost | unresolved | never-install
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """Everything `explain` shows about one prefix's RIB decision."""

    prefix: Prefix
    candidates: tuple[CandidateState, ...]
    reason: BestReason
    desired: KernelRoute | None
    note: str = ""


class RibViews:
    """Read-only views of the RIB (see the module doc)."""

    # (the `Rib`'s own: its table, failed origins and resolver; `candidates`, `selection`,
    # `_usable` and `_kernel_route` are its methods)
    _routes: dict
    failed: set[Origin]
    resolver: Resolver

    def decide(self, prefix: Prefix) -> Decision:
        cands = self.candidates(prefix)
        sel = self.selection(prefix)
        desired = self._kernel_route(sel.winners, prefix)
        states = []
        for c in cands:
            if c.distance >= NEVER_INSTALL:
                states.append(CandidateState(c, "never-install", f"distance {c.distance}"))
            elif c.origin in self.failed:
                states.append(CandidateState(c, "unresolved", "its source failed (BFD down): being withdrawn"))
            elif not self._usable(c, prefix):
                hit = self.resolver.resolve(c.nexthops)
                why = hit[1] if not hit[0] else f"resolves only through {', '.join(map(str, hit[3]))}, which covers it"
                states.append(CandidateState(c, "unresolved", why))
            elif c in sel.winners:
                status = "best" if c is sel.winners[0] else "multipath"
                hit = self.resolver.resolve(c.nexthops)
                detail = hit[1]
                if hit[3]:
                    via = ", ".join(map(str, hit[3]))
                    detail = "; ".join(x for x in (f"resolved through {via}: {', '.join(map(str, hit[0]))}", detail) if x)
                states.append(CandidateState(c, status, detail))
            else:
                states.append(CandidateState(c, "lost"))
        note = ""
        if sel.winners and desired is None:
            note = f"a foreign kernel route ({sel.winners[0].origin}) wins: route-agent installs nothing"
        elif cands and not sel.winners:
            note = "no usable candidate: nothing installed"
        reason = sel.reason if sel.winners or not cands else BestReason.UNRESOLVED
        return Decision(prefix, tuple(states), reason, desired, note)

    # ---- views ----
    def __len__(self) -> int:
        return len(self._routes)

    def __contains__(self, prefix: Prefix) -> bool:
        return prefix in self._routes

    def prefixes(self) -> Iterator[Prefix]:
        return iter(self._routes)

    @property
    def table(self) -> Mapping[Prefix, Candidate | tuple[Candidate, ...]]:
        """The prefix -> candidates table itself (a bare candidate, or a tuple of them), for the
        owner task's readers that look up many prefixes (the import stage's `settle`). Read only."""
        return self._routes

    def routes_of(self, origin: Origin) -> Iterator[tuple[Prefix, Candidate]]:
        """Every candidate of one origin (a scan; for mark-and-sweep of small sources and views)."""
        for prefix in self._routes:
            for c in self.candidates(prefix):
                if c.origin == origin:
                    yield prefix, c
