"""The restart sync gate: nothing adopted is deleted or replaced before every source is in sync.

DOC: each source registers a name and calls `done(name)` when its initial state is complete
(config loaded, kernel dumped; later each BGP peer's End-of-RIB and the Kubernetes initial list).
The agent also arms a stale timer; whichever comes first opens the gate (FRR zebra's -K sweep,
BIRD's kernel graceful restart).
"""

from __future__ import annotations


class SyncGate:
    def __init__(self, sources: set[str] | frozenset[str]) -> None:
        self.waiting = set(sources)
        self.opened_by: str | None = None

    def add(self, name: str) -> None:
        if self.opened_by is None:
            self.waiting.add(name)

    def done(self, name: str) -> bool:
        """Mark one source synced; True when this opened the gate."""
        self.waiting.discard(name)
        if not self.waiting and self.opened_by is None:
            self.opened_by = "all sources synced"
            return True
        return False

    def expire(self) -> bool:
        """The stale timer fired; True when this opened the gate."""
        if self.opened_by is None:
            self.opened_by = f"stale timer (still waiting for {', '.join(sorted(self.waiting))})"
            return True
        return False

    @property
    def open(self) -> bool:
        return self.opened_by is not None
