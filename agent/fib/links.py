"""Interface name <-> ifindex map, published as immutable snapshots.

DOC: `LinkIndex` is owned by the thread that reads the kernel's link state (the agent's event
loop: link dumps of the full scan, link events of the route monitor); only that thread calls
`load()` and `apply()`. Every change builds new dicts and publishes them as one new
`LinkSnapshot` with a single attribute assignment, so a reader on another thread (the writer's
encoder) takes `links.snapshot` once and works on a consistent, never-changing map for a whole
batch: no half-loaded map (a spurious ENODEV while `load()` refilled the dicts in place) and no
ifindex cached from a map that changed under the encoder. Encoders and decoders compare the
snapshot they hold with the current one (identity) to know when to drop their caches.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping

from .types import Link, LinkEvent

_generations = itertools.count(1)


@dataclass(frozen=True, slots=True)
class LinkSnapshot:
    index_of: Mapping[str, int]  # read-only views of dicts nobody else holds
    name_of: Mapping[int, str]
    up: Mapping[int, bool]
    generation: int

    @classmethod
    def of(cls, index_of: dict, name_of: dict, up: dict) -> "LinkSnapshot":
        return cls(MappingProxyType(index_of), MappingProxyType(name_of), MappingProxyType(up),
                   next(_generations))


class LinkIndex:
    """Interface name <-> ifindex and up state (see module doc)."""

    def __init__(self, links: Iterable[Link] = ()):
        self.snapshot = LinkSnapshot.of({}, {}, {})
        self.load(links)

    @classmethod
    def from_kernel(cls) -> "LinkIndex":
        from .scanner import dump_links  # the scanner reads links with a LinkIndex of its own
        return cls(dump_links())

    # ---- the owner's side ----
    def load(self, links: Iterable[Link]) -> None:
        """Replace the whole map (after a link dump)."""
        index_of: dict[str, int] = {}
        name_of: dict[int, str] = {}
        up: dict[int, bool] = {}
        for link in links:
            _set(index_of, name_of, up, link)
        self.snapshot = LinkSnapshot.of(index_of, name_of, up)

    def apply(self, event: LinkEvent) -> None:
        """One link event from the monitor (a new, renamed, changed or deleted link)."""
        snap = self.snapshot
        index_of, name_of, up = dict(snap.index_of), dict(snap.name_of), dict(snap.up)
        link = event.link
        old = name_of.get(link.index)
        if old is not None and index_of.get(old) == link.index:
            del index_of[old]
        if event.deleted:
            name_of.pop(link.index, None)
            up.pop(link.index, None)
        else:
            _set(index_of, name_of, up, link)
        self.snapshot = LinkSnapshot.of(index_of, name_of, up)

    # ---- readers (any thread: each call reads one snapshot) ----
    @property
    def generation(self) -> int:
        return self.snapshot.generation

    @property
    def index_of(self) -> Mapping[str, int]:
        return self.snapshot.index_of

    @property
    def name_of(self) -> Mapping[int, str]:
        return self.snapshot.name_of

    def index(self, name: str) -> int | None:
        return self.snapshot.index_of.get(name)

    def name(self, index: int) -> str | None:
        return self.snapshot.name_of.get(index)

    def is_up(self, name: str) -> bool:
        snap = self.snapshot
        index = snap.index_of.get(name)
        return index is not None and snap.up.get(index, False)

    def links(self) -> list[Link]:
        snap = self.snapshot
        return [Link(name, index, snap.up.get(index, False)) for index, name in sorted(snap.name_of.items())]


def _set(index_of: dict, name_of: dict, up: dict, link: Link) -> None:
    index_of[link.name] = link.index
    name_of[link.index] = link.name
    up[link.index] = link.up
