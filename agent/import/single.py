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
`receive_runs` takes the runs of one or more UPDATEs in one call (the relay's rebuild makes one
event of the successive UPDATEs that only announce: `AnnouncedRuns`) and does the same for each
run of one prefix, so the BGP source, the stage and max-prefix are entered once per line of the
relay rather than once per UPDATE, and the counts are added once; longer runs go to
`receive_batch` (and so to `runs.receive_run`).
`tests/test_import_single.py` compares the paths on the same inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.model import Prefix, Update, new_update
from ..policy.prefixes import V6_FLAG
from ..policy.verdict import Verdict
from .maxprefix import MaxPrefixDecision
from .peer import PeerState, rib_holds
from .runs import MIN

if TYPE_CHECKING:
    from .stage import ImportStage

_OK = MaxPrefixDecision.OK
_NO_REJECTIONS: dict = {}  # (never written: `count` only reads it)


def receive_one(stage: ImportStage, st: PeerState, peer: str, prefix: Prefix, nexthop: str | None,
                attrs: Any, out: list[Update], stale: set | None) -> tuple[MaxPrefixDecision, Verdict] | None:
    """`receive_batch(peer, (prefix,), ...)` when the route is new and accepted; None: nothing was
    done (see the module doc)."""
    if st.known(prefix) or (stale and prefix in stale):
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
    common = st.common
    if common is None:
        common = st.common = verdict
    (st.recent if verdict is common else st.kept)[prefix] = verdict
    st.held[3 if fam == 6 else 1] += 1
    out.append(new_update((prefix, st.origin, st.candidate(nexthop, attrs, verdict.mods), None)))
    stage.count(st, fam, 1, 1, _NO_REJECTIONS)
    return _OK, verdict


def receive_runs(stage: ImportStage, st: PeerState, peer: str, runs: Sequence[tuple], out: list[Update],
                 stale: set | None) -> list[MaxPrefixDecision]:
    """`receive_batch(peer, prefixes, next_hop, attrs, out, stale)` for each run
    ``(prefixes, next_hop, attrs, link_local)`` of `runs` (of one family: `AnnouncedRuns.runs`)
    in order; returns the decisions other than OK, in order.

    A run shorter than `runs.MIN` whose prefixes are all new, pass the guard, do not loop and are
    accepted by a policy that does not look at the prefix, within max-prefix's room, is done here
    as the batch loop would do it (the outcome of `receive_one`, for each of its prefixes; a
    prefix twice in the run is stored and counted in max-prefix and the held counts once, in the
    received and accepted counts and the RIB updates twice, as the loop does), with the peer's
    settings looked up once and the counts added once (max-prefix's before anything else reads
    it: before each run `receive_batch` takes, and at the end). Every other run goes to
    `receive_batch`, which decides every case (and takes longer runs in bulk: `runs.receive_run`)."""
    kept, recent, rib, origin = st.kept, st.recent, st.rib, st.origin
    known_any, common = st.known_any, st.common
    s = st.settings
    check, refused = stage.guard.check, stage.guard.refused
    allow_default, allow_covering = s.allow_default, s.allow_covering
    looped, candidate, bound, fixed = st.looped, st.candidate, st.bound, st.fixed
    own = s.own_as  # (`looped` is asked only for a path that holds our AS: a call per run costs here)
    one_verdict = bound is None or not bound.reads_prefix
    maxprefix, append = stage.maxprefix, out.append
    fam = 6 if runs and runs[0][0] and runs[0][0][0] & V6_FLAG else 4
    room = maxprefix.room(peer, fam)
    taken = held = counted = 0  # new prefixes not yet in max-prefix; all new ones; routes received
    decisions: list[MaxPrefixDecision] = []
    for prefixes, nexthop, attrs, _link_local in runs:
        n = len(prefixes)
        if n == 1:
            prefix = prefixes[0]  # (the tests of `PeerState.known` inline: a call per route costs here)
            if taken < room and prefix not in kept and prefix not in recent \
                    and not (rib is not None and prefix in rib and rib_holds(rib, prefix, origin)) \
                    and not (stale and prefix in stale) \
                    and not (own is not None and own in getattr(attrs, "as_path", ()) and looped(attrs)) \
                    and check(prefix, nexthop, allow_default=allow_default, allow_covering=allow_covering) is None:
                verdict = fixed if bound is None else bound.evaluate(prefix, nexthop, attrs)
                if verdict.accepted:
                    if common is None:
                        common = st.common = verdict
                    taken += 1
                    counted += 1
                    (recent if verdict is common else kept)[prefix] = verdict
                    append(new_update((prefix, origin, candidate(nexthop, attrs, verdict.mods), None)))
                    continue
        elif n < MIN and one_verdict and taken + n <= room and not known_any(prefixes) \
                and not (stale and not stale.isdisjoint(prefixes)) \
                and not (own is not None and own in getattr(attrs, "as_path", ()) and looped(attrs)) \
                and not refused(prefixes, nexthop, allow_default, allow_covering):
            verdict = fixed if bound is None else bound.evaluate(prefixes[0], nexthop, attrs)
            if verdict.accepted:
                if common is None:
                    common = st.common = verdict
                store = recent if verdict is common else kept
                before = len(store)
                cand = candidate(nexthop, attrs, verdict.mods)
                for prefix in prefixes:
                    store[prefix] = verdict
                    append(new_update((prefix, origin, cand, None)))
                taken += len(store) - before
                counted += n
                continue
        if taken:
            maxprefix.add(peer, fam, taken)
            held, taken = held + taken, 0
        decision, _verdict = stage.receive_batch(peer, prefixes, nexthop, attrs, out, stale)
        if decision is not _OK:
            decisions.append(decision)
        room = maxprefix.room(peer, fam)
        kept, recent, common = st.kept, st.recent, st.common  # (the general loop may set them)
    if taken:
        maxprefix.add(peer, fam, taken)
        held += taken
    if counted:
        st.held[3 if fam == 6 else 1] += held
        stage.count(st, fam, counted, counted, _NO_REJECTIONS)
    return decisions
