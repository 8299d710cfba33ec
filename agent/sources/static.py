"""Static source: the configured static routes, diffed on every (re)load.

DOC: the configuration is turned into one candidate per (prefix, StaticRoutes object) by
`agent.config.static_candidates`; this source remembers the last set and emits only the
differences (mark-and-sweep), so a reload that changes one route touches one route.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.model import Candidate, Origin, Prefix, Update


class StaticSource:
    def __init__(self) -> None:
        self.current: dict[tuple[Prefix, Origin], Candidate] = {}

    def load(self, wanted: Mapping[tuple[Prefix, Origin], Candidate]) -> list[Update]:
        out = [Update(p, o, None) for (p, o) in self.current if (p, o) not in wanted]
        out += [Update(p, o, c) for (p, o), c in wanted.items() if self.current.get((p, o)) != c]
        self.current = dict(wanted)
        return out
