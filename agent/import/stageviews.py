"""The import stage's read side: stored verdicts for ``explain`` and the per-peer counts.

DOC: `StageViews` is the part of `agent.import.stage.ImportStage` that only reads its state (the
peers' `PeerState`, in ``_peers``): the verdict stored for a peer's route, every peer's verdicts
for a prefix (with ADD-PATH paths), and the counts ``show peers`` prints. It never changes
anything, so the API's views can call it from the owner task between events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.model import Prefix
from ..policy.verdict import Verdict

if TYPE_CHECKING:
    from .peer import PeerState


class StageViews:
    """Read-only views of the import stage's state (see the module doc)."""

    _peers: dict[str, PeerState]

    def verdict(self, peer: str, prefix: Prefix) -> Verdict | None:
        """The stored verdict of `peer`'s current route for `prefix` (None: no such route, or a
        rejection beyond `keep_rejected`)."""
        st = self._peers.get(peer)
        return None if st is None else st.stored(prefix)

    def explain(self, prefix: Prefix) -> dict[str, Verdict]:
        """Every peer's stored verdict for `prefix`."""
        out = {}
        for address, st in self._peers.items():
            v = st.stored(prefix)
            if v is not None:
                out[address] = v
        return out

    def explain_paths(self, prefix: Prefix) -> list[tuple[str, int | None, Verdict]]:
        """Every peer's stored verdicts for `prefix`: (peer, path id or None, verdict)."""
        out: list[tuple[str, int | None, Verdict]] = []
        for address, st in self._peers.items():
            v = st.stored(prefix)
            if v is not None:
                out.append((address, None, v))
            out += [(address, pid, v) for pid, v in sorted(st.paths.get(prefix, {}).items())]
        return out

    def held(self, peer: str) -> dict[int, tuple[int, int]]:
        """Current (accepted, rejected-and-kept) route counts of `peer` per family."""
        st = self._peers.get(peer)
        if st is None:
            return {4: (0, 0), 6: (0, 0)}
        h = st.held
        return {4: (h[1], h[0]), 6: (h[3], h[2])}

    def not_kept(self, peer: str) -> dict[int, int]:
        """Rejections of `peer` this session beyond `keep_rejected`, per family: not stored, so a
        re-sent one cannot be told from a new one; the current rejected count is then a lower
        bound."""
        st = self._peers.get(peer)
        return {4: 0, 6: 0} if st is None else {4: st.unkept[0], 6: st.unkept[1]}
