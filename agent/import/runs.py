"""The bulk lane of the import stage: an UPDATE's prefixes that are all new and all accepted
become one `UpdateRun` instead of an `Update` each.

DOC: while a peer sends its table, almost every UPDATE is a run of prefixes it never sent
before, sharing one next hop and one attribute set, all accepted by a policy that does not look
at the prefix, far from everything the hijack guard protects, and well within max-prefix. For
that shape `ImportStage.receive_batch`'s per-prefix loop only counts and copies: `receive_run`
checks the shape for the whole batch first, with set and dict operations (no Python step per
prefix, but the guard's for a run near something of ours), and then records the verdicts with one ``dict.update``, counts once
and hands the RIB one `UpdateRun` (`agent.core.model`), which `Rib.apply` takes the same way.
Anything else (a prefix already received, a stale one of a graceful restart, a rejection by the
guard or the policy, a policy with prefix conditions, max-prefix near its limit, ADD-PATH)
returns None before changing anything, and the general loop runs: it stays the reference, and
tests/test_import_runs.py checks that both leave the same state.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

from ..core.model import Prefix, Update, UpdateRun
from ..policy.prefixes import V6_FLAG
from .maxprefix import MaxPrefixDecision

if TYPE_CHECKING:
    from ..policy.verdict import Verdict
    from .peer import PeerState
    from .stage import ImportStage

MIN = 16  # shorter batches take the general loop
_OK = MaxPrefixDecision.OK


def receive_run(stage: ImportStage, st: PeerState, peer: str, prefixes: Sequence[Prefix],
                nexthop: str | None, attrs: Any, out: list[Update], stale: set | None,
                ) -> tuple[MaxPrefixDecision, Verdict] | None:
    """`receive_batch` for a batch of the shape in the module doc, else None (nothing done)."""
    n = len(prefixes)
    if n < MIN or (stale and not stale.isdisjoint(prefixes)):
        return None
    if st.known_any(prefixes):
        return None
    if st.looped(attrs):
        return None
    bound = st.bound
    if bound is None:
        verdict = st.fixed
    elif bound.reads_prefix:
        return None
    else:
        verdict = bound.evaluate(prefixes[0], nexthop, attrs)
    if verdict is None or not verdict.accepted:
        return None
    fam = 6 if prefixes[0] & V6_FLAG else 4
    if stage.maxprefix.room(peer, fam) < n:
        return None
    s = st.settings
    if stage.guard.refused(prefixes, nexthop, s.allow_default, s.allow_covering):
        return None
    if st.common is None:
        st.common = verdict
    store = st.recent if verdict is st.common else st.kept  # (none of them is in either: `known_any`)
    before = len(store)
    store.update(zip(prefixes, repeat(verdict)))
    new = len(store) - before  # (a prefix twice in one UPDATE counts once, as in the loop)
    st.held[(2 if fam == 6 else 0) + 1] += new
    stage.maxprefix.add(peer, fam, new)
    stage.count(st, fam, n, n, {})
    out.append(UpdateRun(prefixes if new == n else list(dict.fromkeys(prefixes)), st.origin,
                         st.candidate(nexthop, attrs, verdict.mods)))
    return _OK, verdict
