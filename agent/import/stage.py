"""The import stage: every route a BGP peer sends goes guard -> policy -> max-prefix -> RIB update.

DOC: `ImportStage` is pure logic owned by one task (the BGP source): it receives the routes the
speaker decoded, one call per prefix, and returns an `ImportResult` with the `Verdict`, the RIB
`Update` to forward (None when the RIB has nothing to do) and the max-prefix decision the caller
must act on (log a warning, or tear the session down with Cease 6/1).

For each received route (`receive`):

1. The hijack guard (`guard.Guard`), which no policy can bypass; then AS_PATH loop detection
   (RFC 4271 9.1.2, no policy can bypass it either): a route whose AS_PATH holds our AS (the
   session's local AS) more often than the peer's ``allowOwnAs`` (default 0) is rejected with
   ``AS_LOOP``. (No confederations and no route reflection in the model: no confederation
   member ASes or CLUSTER_LIST to check.)
2. The peer's import policy, bound to the peer once (`agent.policy.BoundPolicy`). Without a
   policy, RFC 8212: an **eBGP** peer's routes are all rejected (reason ``NO_POLICY``, counted);
   an **iBGP** peer's routes are accepted (``IBGP_NO_POLICY``). RFC 8212 is about eBGP sessions
   only: iBGP peers are our own AS (route reflectors, other nodes), filtering is expected at the
   AS edge, and refusing iBGP routes by default would break every iBGP-only setup for no safety
   gain. ``acceptAll`` must still be named explicitly for eBGP. A policy name that does not
   exist (the configuration layer should prevent it) fails closed: ``UNKNOWN_POLICY``.
3. Max-prefix (`maxprefix.MaxPrefix`) for a prefix that becomes accepted (counts accepted
   prefixes, as FRR); ``DISCARD`` or ``TEARDOWN`` turn the verdict into a ``MAX_PREFIX`` rejection.
4. An accepted route becomes a `BgpCandidate` (`agent.core.candidate`): origin ``ebgp/PEER``
   or ``ibgp/PEER``; distance from the policy's ``setAdminDistance``, else the peer's override,
   else the configured default per kind (eBGP 20, iBGP 200); next hop ``via NH`` (with the
   peer's device for an IPv6 link-local next hop); the path attributes, as fields of the
   candidate, with the policy's modifications applied (a LOCAL_PREF received over eBGP is reset
   to 100 first: RFC 4271 says to ignore it); the kernel metric of ``setKernelMetric``. Attributes may be a `BgpAttrs` or the speaker's received-attributes record
   (same field names; absent LOCAL_PREF -> 100, absent MED -> 0, router id from `set_router_id`).
   One candidate is built per attribute set (`peer.PeerState.candidate`) and reused while the
   attributes object, the modifications and the next hop stay the same (the codec shares one
   attributes object between the prefixes of an UPDATE): a table builds a handful of them
   (and, new and all accepted, reaches the RIB as one `UpdateRun` per UPDATE: `runs`).

ADD-PATH (RFC 7911): a batch with path ids (`receive_batch(..., path_ids=)`), `withdraw_path`,
and the paths in `accepted_prefixes`, `recheck_guard`, `explain_paths` are `agent.import.paths`:
each path is a route of its own (counted, max-prefix included, per path).

A re-announcement that is now rejected gives a withdraw `Update`; `withdraw` does the same for a
withdrawn prefix that was accepted. `peer_down` forgets the peer's routes and resets max-prefix
(the RIB side of a session loss, stale marking under graceful restart, is the BGP source's job).

State kept per peer, for ``explain`` and max-prefix: the shared `Verdict` of every route the peer
sent (a reference to an interned object; the policy's verdicts are one per statement). Accepted
routes are always known (max-prefix needs to know what is already counted); rejected ones up to
`keep_rejected` per peer, so a peer sending a full table through a tight policy cannot grow the
agent without bound: beyond it a rejection is counted but `verdict()` answers None. An accepted
route is in the RIB under the peer's origin anyway: once the owner says the RIB holds all the
stage gave for a peer (`settle`, after each applied output, for a peer with no graceful-restart
stale routes and nothing held back by BFD or an ADD-PATH recovery) the RIB answers for it, as
BIRD's table does: the stage keeps its rejections, the accepted routes whose verdict is not the
peer's usual one (`PeerState.common`), and what changed since (one dict slot less per route of a
full table). Before the RIB loses routes the stage still counts (a BFD failure's clean-up while
the session is up) the owner calls `pin`: the stage holds them again until the next `settle`.

Counters (plain dicts, monotonic, for the metrics layer): `received[(peer, family)]`,
`accepted[(peer, family)]`, `rejected[(peer, family, Reason)]`; a re-sent route (route refresh)
counts again. Current counts per peer and family (what ``show peers`` shows): `held(peer)`
(accepted now, rejected now) and `not_kept(peer)` (rejections beyond `keep_rejected`: the
rejected-now count is then a lower bound). Changing policies, guard sets or peer settings does not
re-evaluate routes already received: the caller re-feeds them (adj-RIB-in or route refresh).
The read side (stored verdicts, explain, the counts) is `agent.import.stageviews.StageViews`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

from ..core.model import DEFAULT_DISTANCE, Origin, Prefix, SourceKind, Update, new_update
from ..policy.engine import CompiledPolicy
from ..policy.prefixes import V6_FLAG
from ..policy.verdict import Reason, Verdict, shared_verdict
from .guard import Guard, related
from .maxprefix import MaxPrefix, MaxPrefixDecision
from .paths import accepted_paths, receive_paths, recheck_paths, withdraw_path
from .peer import ImportPeer, PeerState
from .runs import receive_run
from .single import receive_one, receive_runs
from .stageviews import StageViews

_OK = MaxPrefixDecision.OK
_DISCARD = MaxPrefixDecision.DISCARD
_TEARDOWN = MaxPrefixDecision.TEARDOWN


class ImportResult(NamedTuple):
    verdict: Verdict
    update: Update | None  # forward to the RIB when not None
    maxprefix: MaxPrefixDecision  # OK, or WARN / DISCARD / TEARDOWN for the caller to act on


_result = partial(tuple.__new__, ImportResult)  # NamedTuples without their Python __new__


class ImportStage(StageViews):
    """Guard, import policy and max-prefix for every peer; see the module doc."""

    def __init__(
        self,
        guard: Guard,
        policies: Mapping[str, CompiledPolicy] | None = None,
        *,
        distances: Mapping[SourceKind, int] | None = None,
        maxprefix: MaxPrefix | None = None,
        keep_rejected: int = 100_000,
    ) -> None:
        self.guard = guard
        self.maxprefix = maxprefix if maxprefix is not None else MaxPrefix()
        self.keep_rejected = keep_rejected
        self._policies: Mapping[str, CompiledPolicy] = dict(policies or {})
        self._distances = dict(DEFAULT_DISTANCE if distances is None else distances)
        self._peers: dict[str, PeerState] = {}
        self.received: dict[tuple[str, int], int] = {}
        self.accepted: dict[tuple[str, int], int] = {}
        self.rejected: dict[tuple[str, int, Reason], int] = {}

    # -- configuration --------------------------------------------------------------------------

    def replaces(self, settings: ImportPeer) -> bool:
        """Would `set_peer(settings)` start a known peer afresh (its AS or session type changed)?"""
        old = self._peers.get(settings.address)
        return old is not None and (old.settings.ebgp != settings.ebgp or old.settings.asn != settings.asn)

    def set_peer(self, settings: ImportPeer) -> None:
        """Add a peer or change its settings. Routes it already sent are not re-evaluated. If its AS
        or session type (eBGP/iBGP) changes (`replaces`), its routes and max-prefix state are
        forgotten (the session restarts anyway; the caller withdraws the old origin's routes from
        the RIB first: `BgpSource.forget_routes`)."""
        old = self._peers.get(settings.address)
        if old is None or self.replaces(settings):
            if old is not None:
                self.maxprefix.forget(settings.address)
            peer = PeerState(settings)
            self._peers[settings.address] = peer
        else:
            peer = old
            peer.settings = settings
            peer.forget_candidates()
            peer.hops.clear()
            peer.max_verdicts.clear()
        self._bind(peer)
        for family in (4, 6):
            self.maxprefix.configure(settings.address, family, settings.max_prefix.get(family))

    def remove_peer(self, address: str) -> None:
        self._peers.pop(address, None)
        self.maxprefix.forget(address)

    def set_policies(self, policies: Mapping[str, CompiledPolicy]) -> None:
        """Replace the compiled policies (built-ins included) and re-bind every peer."""
        self._policies = dict(policies)
        for peer in self._peers.values():
            peer.forget_candidates()
            self._bind(peer)

    def set_distances(self, distances: Mapping[SourceKind, int]) -> None:
        self._distances = dict(distances)
        for peer in self._peers.values():
            peer.forget_candidates()
            self._bind(peer)

    def _bind(self, peer: PeerState) -> None:
        s = peer.settings
        peer.distance = s.distance if s.distance is not None else self._distances[peer.origin.kind]
        peer.bound = None
        peer.loop = None
        peer.loop_verdict = shared_verdict(False, f"AS {s.own_as} in AS_PATH, allowOwnAs {s.allow_own_as}",
                                           Reason.AS_LOOP, policy="as-loop")
        if s.policy is None:
            peer.fixed = (shared_verdict(False, "", Reason.NO_POLICY) if s.ebgp
                          else shared_verdict(True, "", Reason.IBGP_NO_POLICY))
        elif s.policy not in self._policies:
            peer.fixed = shared_verdict(False, "", Reason.UNKNOWN_POLICY, policy=s.policy)
        else:
            peer.fixed = None
            peer.bound = self._policies[s.policy].bind(peer.info)

    def set_router_id(self, peer: str, router_id: str) -> None:
        """The BGP identifier from the peer's OPEN (used for attributes that do not carry it)."""
        st = self._peers[peer]
        if st.settings.router_id != router_id:
            st.settings = replace(st.settings, router_id=router_id)
            st.forget_candidates()

    def origin(self, peer: str) -> Origin:
        """The RIB origin of `peer`'s routes (``ebgp/ADDRESS`` or ``ibgp/ADDRESS``)."""
        return self._peers[peer].origin

    def accepted_prefixes(self, peer: str) -> list:
        """The routes of `peer` currently accepted (so in the RIB under its origin): a `Prefix`
        each, or ``(prefix, path_id)`` for an ADD-PATH path (`agent.import.paths`)."""
        st = self._peers.get(peer)
        if st is None:
            return []
        out: list = st.accepted_keys()
        return out + accepted_paths(st) if st.paths else out

    def has_accepted(self, peer: str) -> bool:
        """Does `peer` have routes accepted now? (The counts: no scan.)"""
        st = self._peers.get(peer)
        return st is not None and bool(st.held[1] or st.held[3])  # (ADD-PATH paths included)

    def settle(self, peer: str, rib: Mapping) -> None:
        """The RIB's table (`Rib.table`) holds every update given for `peer` and nothing holds
        them back: it answers for the peer's accepted routes from now on (module doc)."""
        st = self._peers.get(peer)
        if st is not None and (st.recent or st.rib is not rib):
            st.settle(rib)

    def pin(self, peer: str) -> None:
        """The RIB is about to lose `peer`'s routes the stage still counts: keep them here again
        until the next `settle` (module doc)."""
        st = self._peers.get(peer)
        if st is not None:
            st.pin()

    @property
    def peers(self) -> dict[str, ImportPeer]:
        return {address: p.settings for address, p in self._peers.items()}

    # -- routes ---------------------------------------------------------------------------------

    def receive(self, peer: str, prefix: Prefix, nexthop: str | None, attrs: Any) -> ImportResult:
        """One announced route of `peer` (KeyError for an unknown peer)."""
        updates: list[Update] = []
        decision, verdict = self.receive_batch(peer, (prefix,), nexthop, attrs, updates)
        return _result((verdict, updates[0] if updates else None, decision))

    def receive_runs(self, peer: str, runs: Sequence[tuple], out: list[Update],
                     stale: set | None = None) -> list[MaxPrefixDecision]:
        """`receive_batch(peer, prefixes, next_hop, attrs, out, stale)` for each run
        ``(prefixes, next_hop, attrs, link_local)`` of `runs` (one family: `AnnouncedRuns.runs`,
        of one UPDATE or more), in order, in one call (`single.receive_runs`); the max-prefix
        decisions other than OK, in order."""
        return receive_runs(self, self._peers[peer], peer, runs, out, stale)

    def receive_batch(self, peer: str, prefixes: Sequence[Prefix], nexthop: str | None, attrs: Any,
                      out: list[Update], stale: set | None = None,
                      path_ids: Sequence[int] | None = None) -> tuple[MaxPrefixDecision, Verdict]:
        """Prefixes of `peer` of one family announced with one next hop and one attribute set (one
        UPDATE): append the RIB updates to `out`; return the max-prefix decision the caller must act
        on (TEARDOWN if any, else the first other one) and the last prefix's verdict.

        The guard runs per prefix (`Guard.refused`: the next hop once); the AS-path loop check,
        the policy (unless it has a prefix condition) and the candidate once per batch; max-prefix
        only beyond the room it had at the start (`MaxPrefix.room`); new prefixes all accepted are
        one `UpdateRun` (`runs`). `stale`: the peer's stale prefixes (graceful restart): a
        re-announced one leaves it, one now rejected is withdrawn (the stage forgot it when the
        session went down). `path_ids` (ADD-PATH) sends the batch to `paths.receive_paths`."""
        st = self._peers[peer]
        if path_ids is not None:
            return receive_paths(self, st, peer, prefixes, path_ids, nexthop, attrs, out, stale)  # type: ignore[return-value]
        if len(prefixes) == 1:  # an UPDATE of its own attribute set: its usual outcome, cheaply
            done = receive_one(self, st, peer, prefixes[0], nexthop, attrs, out, stale)
        else:  # new prefixes all accepted (a table being learned): one `UpdateRun`
            done = receive_run(self, st, peer, prefixes, nexthop, attrs, out, stale)
        if done is not None:
            return done
        s = st.settings
        maxprefix = self.maxprefix
        held, origin = st.held, st.origin
        fam = 6 if prefixes and prefixes[0] & V6_FLAG else 4
        base = 2 if fam == 6 else 0
        bound = st.bound
        shared = st.loop_verdict if st.looped(attrs) else (st.fixed if bound is None else None)
        per_prefix = shared is None and bound.reads_prefix  # type: ignore[union-attr]
        refused = self.guard.refused(prefixes, nexthop, s.allow_default, s.allow_covering)
        cand = mods = None
        rejected: dict[Reason, int] = {}
        decision = _OK
        verdict = shared
        # max-prefix: `room` admissions are OK without asking (counted in `taken`, added at the end
        # or before anything else touches the count); beyond it each one goes through `admit`
        room, taken = maxprefix.room(peer, fam), 0
        n_acc = 0  # accepted prefixes (held[base + 1]), added at the end
        for prefix in prefixes:
            verdict = refused.get(prefix) if refused else None
            if verdict is None:
                if shared is not None:
                    verdict = shared
                elif per_prefix:
                    verdict = bound.evaluate(prefix, nexthop, attrs)  # type: ignore[union-attr]
                else:
                    verdict = shared = bound.evaluate(prefix, nexthop, attrs)  # type: ignore[union-attr]
            was_stale = bool(stale) and prefix in stale  # type: ignore[operator]
            if was_stale:
                stale.discard(prefix)  # type: ignore[union-attr]
            old = st.stored(prefix)
            was_accepted = old is not None and old.accepted
            if verdict.accepted:
                if not was_accepted:
                    if taken < room:
                        taken += 1
                    else:  # the room is used up (the limit reached): no room after this either
                        maxprefix.add(peer, fam, taken)
                        d, room, taken = maxprefix.admit(peer, fam), 0, 0
                        if d is not _OK:
                            if decision is _OK or d is _TEARDOWN:
                                decision = d
                            if d is _DISCARD or d is _TEARDOWN:
                                verdict = st.max_verdict(fam)
            elif was_accepted:
                maxprefix.add(peer, fam, taken)
                maxprefix.release(peer, fam)
                room, taken = maxprefix.room(peer, fam), 0
            if old is not None:
                held[base + old.accepted] -= 1
                if not old.accepted:
                    st.rejected_kept -= 1
            if verdict.accepted:
                st.accept(prefix, verdict)
                n_acc += 1
                if cand is None or verdict.mods is not mods:
                    mods = verdict.mods
                    cand = st.candidate(nexthop, attrs, mods)
                out.append(new_update((prefix, origin, cand, None)))
                continue
            rejected[verdict.reason] = rejected.get(verdict.reason, 0) + 1
            if st.rejected_kept < self.keep_rejected:
                st.reject(prefix, verdict)
                held[base] += 1
                st.rejected_kept += 1
            else:
                st.unkept[base >> 1] += 1
                if old is not None:
                    st.forget(prefix)
            if was_accepted or was_stale:
                out.append(new_update((prefix, origin, None, None)))
        maxprefix.add(peer, fam, taken)
        held[base + 1] += n_acc
        self.count(st, fam, len(prefixes), n_acc, rejected)
        return decision, verdict  # type: ignore[return-value]

    def count(self, st: PeerState, fam: int, received: int, accepted: int, rejected: dict[Reason, int]) -> None:
        """Add to the cumulative counters of peer `st` in family `fam` (4 or 6)."""
        key = st.key6 if fam == 6 else st.key4
        self.received[key] = self.received.get(key, 0) + received
        if accepted:
            self.accepted[key] = self.accepted.get(key, 0) + accepted
        for reason, n in rejected.items():
            rkey = (st.settings.address, fam, reason)
            self.rejected[rkey] = self.rejected.get(rkey, 0) + n

    def withdraw_path(self, peer: str, prefix: Prefix, path_id: int) -> Update | None:
        """ADD-PATH: `peer` withdrew path `path_id` of `prefix` (see `withdraw`)."""
        return withdraw_path(self, self._peers[peer], peer, prefix, path_id)

    def withdraw(self, peer: str, prefix: Prefix) -> Update | None:
        """`peer` withdrew `prefix`: the RIB withdraw to forward (None: it was not accepted)."""
        st = self._peers[peer]
        old = st.stored(prefix)
        if old is None:
            return None
        st.forget(prefix)
        v6 = prefix & V6_FLAG
        st.held[(2 if v6 else 0) + old.accepted] -= 1
        if not old.accepted:
            st.rejected_kept -= 1
            return None
        self.maxprefix.release(peer, 6 if v6 else 4)
        return Update(prefix, st.origin, None)

    def recheck_guard(self, peer: str, gained: Iterable[Prefix] | None = None) -> list[Update]:
        """The guard grew by `gained` (a new VIP, pod CIDR, service CIDR; None: unknown): withdraw
        the accepted routes of `peer` it now refuses (explainable with the guard's verdict). Only
        routes `guard.related` to a gained prefix are checked (a VIP: ~33 dict probes), or every
        one when those are too many. (What passes now needs the peer to send it again: refresh.)"""
        st = self._peers.get(peer)
        if st is None:
            return []
        s = st.settings
        out = []
        keys = None if gained is None else related(gained)
        for prefix in st.accepted_keys() if keys is None else filter(st.is_accepted, keys):
            verdict = self.guard.check(prefix, allow_default=s.allow_default, allow_covering=s.allow_covering)
            if verdict is None:
                continue
            v6 = prefix & V6_FLAG
            base = 2 if v6 else 0
            st.held[base + 1] -= 1
            st.held[base] += 1
            st.rejected_kept += 1
            st.reject(prefix, verdict)
            self.maxprefix.release(peer, 6 if v6 else 4)
            rkey = (peer, 6 if v6 else 4, verdict.reason)
            self.rejected[rkey] = self.rejected.get(rkey, 0) + 1
            out.append(Update(prefix, st.origin, None))
        return out + recheck_paths(self, st, peer, keys) if st.paths else out

    def peer_down(self, peer: str, now: float) -> None:
        """The session went down: forget its routes, reset max-prefix (starting a hold-down after
        a max-prefix teardown). `now` is monotonic seconds."""
        st = self._peers.get(peer)
        if st is not None:
            st.reset()
            st.paths = {}
            st.held = [0, 0, 0, 0]
            st.rejected_kept = 0
            st.unkept = [0, 0]
            st.forget_candidates()
        self.maxprefix.session_down(peer, now)

    def evaluate(self, peer: str, prefix: Prefix, nexthop: str | None, attrs: Any) -> Verdict:
        """Guard and policy verdict for a route, without counting or storing (for explain)."""
        st = self._peers[peer]
        s = st.settings
        verdict = self.guard.check(prefix, nexthop, allow_default=s.allow_default,
                                   allow_covering=s.allow_covering)
        if verdict is not None:
            return verdict
        if st.looped(attrs):
            return st.loop_verdict
        return st.fixed if st.bound is None else st.bound.evaluate(prefix, nexthop, attrs)  # type: ignore[return-value]
