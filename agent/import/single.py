"""The import stage's shortcut for an UPDATE of one prefix: the common outcome without the batch set-up.

DOC: a table in which every route has attributes of its own (a MED or community per prefix) comes
one prefix per UPDATE, so `ImportStage.receive_batch`'s per-batch set-up (the loop check, the
guard over the batch, max-prefix room, counters) is paid per route. `receive_one` does the one
outcome that such a table is made of, in the same order and with the same effects as the batch
loop: the prefix is not stale and not held by the peer yet, the guard passes it, the AS_PATH does
not loop, the policy (or the RFC 8212 default) accepts it and max-prefix has room: the verdict is
stored, the counts go up by one, the RIB update with the peer's candidate is appended. Anything
else (a re-sent or stale prefix, a rejection, the max-prefix limit reached) returns None before
changing anything, and the caller runs the batch loop, which decides every case. The guard and
the policy are pure (cached verdicts only), so asking them again there changes nothing.
`tests/test_import_single.py` compares both paths on the same inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.model import Prefix, Update, new_update
from ..policy.prefixes import V6_FLAG
from ..policy.verdict import Verdict
from .maxprefix import MaxPrefixDecision
from .peer import PeerState

if TYPE_CHECKING:
    from .stage import ImportStage

_OK = MaxPrefixDecision.OK
_NO_REJECTIONS: dict = {}  # (never written: `count` only reads it)


def receive_one(stage: ImportStage, st: PeerState, peer: str, prefix: Prefix, nexthop: str | None,
                attrs: Any, out: list[Update], stale: set | None) -> tuple[MaxPrefixDecision, Verdict] | None:
    """`receive_batch(peer, (prefix,), ...)` when the route is new and accepted; None: nothing was
    done (see the module doc)."""
    verdicts = st.verdicts
    if prefix in verdicts or (stale and prefix in stale):
        return None
    s = st.settings
    if stage.guard.check(prefix, nexthop, allow_default=s.allow_default, allow_covering=s.allow_covering) is not None \
            or st.looped(attrs):
        return None
    bound = st.bound
    verdict = st.fixed if bound is None else bound.evaluate(prefix, nexthop, attrs)
    if not verdict.accepted:
        return None
    fam = 6 if prefix & V6_FLAG else 4
    maxprefix = stage.maxprefix
    if maxprefix.room(peer, fam) < 1:
        return None
    maxprefix.add(peer, fam, 1)
    verdicts[prefix] = verdict
    st.held[3 if fam == 6 else 1] += 1
    out.append(new_update((prefix, st.origin, st.candidate(nexthop, attrs, verdict.mods), None)))
    stage.count(st, fam, 1, 1, _NO_REJECTIONS)
    return _OK, verdict
