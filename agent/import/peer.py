"""Per-peer import state: a peer's import settings, its verdicts, and the candidates built from
its routes.

DOC: owned by `stage.ImportStage` (one instance per configured peer). `PeerState.candidate` turns
an accepted route into the RIB `Candidate` (step 4 of the import stage, see `stage`): origin
``ebgp/PEER`` or ``ibgp/PEER``, distance, next hop (with the peer's device for an IPv6
link-local next hop) and the path attributes with the policy's modifications (a `BgpCandidate`:
the attributes are fields of the candidate). One candidate is built per
(attributes object, modifications, next hop) and reused from a bounded cache keyed by identity:
the codec gives equal attribute sets the same object, so a table of shared attributes builds one
candidate per attribute set, and a table of distinct ones hashes no attribute set here. ADD-PATH
routes (`agent.import.paths`) are kept in `PeerState.paths` and get a copy of that candidate with
their path id (`path_candidate`, cached the same way).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..core.bgp import PathAttrs
from ..core.model import (
    PATH_PACKERS,
    BgpAttrs,
    BgpCandidate,
    BgpOrigin,
    Candidate,
    NextHop,
    Origin,
    PeerIdentity,
    Prefix,
    RouteType,
    SourceKind,
    bgp_candidate,
    canonical_address,
    form,
    intern,
    keep_communities,
    nexthops,
    pack_attrs,
    pack_path,
    peer_identity,
)
from ..policy.engine import BoundPolicy, PeerInfo
from ..policy.verdict import NO_MODS, Modifications, Reason, Verdict, shared_verdict
from .maxprefix import MaxPrefixLimit

_LINK_LOCAL_V6 = ipaddress.ip_network("fe80::/10")
# cached candidates per peer (cleared when full): keyed by the identity of the codec's attribute
# objects, which the codec shares for at most 4096 sets at a time, so more would not hit more
CANDIDATE_CACHE = 1 << 13
MAX_PREFIX = "max-prefix"  # the policy name of max-prefix rejections
_bgp_candidate = partial(tuple.__new__, BgpCandidate)  # a named tuple without its Python-level __new__
_join = b"".join  # (bytes + a `Communities` would ask the subclass's __radd__ first: 1.7x slower)
_MISSING = object()
_UNICAST = RouteType.UNICAST  # (an enum member's lookup on its class costs ~60 ns in 3.11: once per set here)


@dataclass(frozen=True, slots=True)
class ImportPeer:
    """Import settings of one peer (built from the peer configuration)."""

    address: str  # canonical address text; the peer's key and origin name
    asn: int
    ebgp: bool
    policy: str | None = None  # import policy name; None: RFC 8212 default
    distance: int | None = None  # admin distance override for this peer's routes
    allow_default: bool = False  # may send 0.0.0.0/0 and ::/0
    allow_covering: bool = False  # may send routes covering the node's own prefixes
    device: str | None = None  # interface for IPv6 link-local next hops
    router_id: str | None = None  # BGP identifier (only used when attrs are not a BgpAttrs)
    max_prefix: Mapping[int, MaxPrefixLimit] = field(default_factory=dict, hash=False)  # family -> limit
    local_as: int | None = None  # our AS on the session (loop detection); None: asn for iBGP, none for eBGP
    allow_own_as: int = 0  # routes whose AS_PATH holds local_as more often are dropped (as_loop)

    @property
    def own_as(self) -> int | None:
        return self.local_as if self.local_as is not None else (None if self.ebgp else self.asn)


def rib_holds(table: Mapping, prefix: Prefix, origin: Origin) -> bool:
    """Does the RIB's table (`Rib.table`) hold a candidate of `origin` without path id for `prefix`?
    (`origin` by identity: the candidates a `PeerState` builds all carry its own origin object.)"""
    e = table.get(prefix)
    if e is None:
        return False
    if e.__class__ is tuple:  # several origins (a bare candidate is a tuple subclass)
        for c in e:
            if c[0] is origin and (c[3] is None or c[3][2] is None):  # (``form``: no path id)
                return True
        return False
    return e[0] is origin and (e[3] is None or e[3][2] is None)


def rib_holds_any(table: Mapping, prefixes: Sequence[Prefix], origin: Origin) -> bool:
    """`rib_holds` for any of `prefixes` (one C-level test while no other origin has them)."""
    if table.keys().isdisjoint(prefixes):
        return False
    for prefix in prefixes:
        if rib_holds(table, prefix, origin):
            return True
    return False


class PeerState:
    """What the import stage keeps per peer: settings, bound policy, verdicts, counts, and the
    last candidate built (reused while attributes, modifications and next hop stay the same).

    The verdicts (see `agent.import.stage`, "State kept per peer") are `stored(prefix)`: `kept`
    (rejections kept, and accepted routes whose verdict is not `common`), then `recent` (accepted
    with the `common` verdict since the last `settle`, or None: not accepted, whatever the RIB
    still holds), then, once settled (`rib` set), the RIB: a prefix the RIB holds a candidate of
    this peer for is accepted, with the `common` verdict."""

    __slots__ = ("settings", "info", "bound", "fixed", "origin", "distance", "kept", "recent", "common",
                 "rib", "held", "key4", "key6", "rejected_kept", "cands", "identity", "hops", "max_verdicts",
                 "loop", "loop_verdict", "unkept", "paths", "path_cands")

    def __init__(self, settings: ImportPeer) -> None:
        self.settings = settings
        self.info = PeerInfo(settings.address, settings.asn, settings.ebgp)
        kind = SourceKind.EBGP if settings.ebgp else SourceKind.IBGP
        self.origin = intern(Origin(kind, settings.address))
        self.bound: BoundPolicy | None = None
        self.fixed: Verdict | None = None  # the verdict of every route when there is no policy
        self.distance = 0
        self.kept: dict[Prefix, Verdict] = {}  # rejections kept; accepted with another verdict than `common`
        self.recent: dict[Prefix, Verdict | None] = {}  # since the last settle: `common`, or None (not
        # accepted, whatever the RIB holds)
        self.common: Verdict | None = None  # the verdict of the accepted routes not in `kept`
        self.rib: Mapping | None = None  # the RIB's table once settled (None: `recent` holds every one)
        self.paths: dict[Prefix, dict[int, Verdict]] = {}  # ADD-PATH routes: prefix -> path id -> verdict
        self.held = [0, 0, 0, 0]  # v4 rejected, v4 accepted, v6 rejected, v6 accepted
        self.key4 = (settings.address, 4)
        self.key6 = (settings.address, 6)
        self.rejected_kept = 0
        self.unkept = [0, 0]  # v4, v6: rejections this session not kept (beyond keep_rejected)
        # (id(attrs), id(mods), next hop) -> (attrs, mods, candidate): the entry holds the objects
        # whose ids are its key, so an id cannot be reused while the entry exists
        self.cands: dict[tuple[int, int, Any], tuple[Any, Modifications, Candidate]] = {}
        self.identity: PeerIdentity | None = None  # (built on first use: `_identity`)
        self.hops: dict[Any, tuple[NextHop, ...]] = {}
        self.max_verdicts: dict[int, Verdict] = {}
        self.path_cands: dict[tuple[int, int], tuple[Candidate, Candidate]] = {}  # see path_candidate
        self.loop: tuple[Any, bool] | None = None  # (attrs object, its AS_PATH loops)
        self.loop_verdict: Verdict | None = None  # set by the stage's bind

    # -- verdicts ---------------------------------------------------------------------------------

    def stored(self, prefix: Prefix) -> Verdict | None:
        """The stored verdict of this peer's route for `prefix` (None: no route, or a rejection not kept)."""
        v = self.kept.get(prefix)
        if v is not None:
            return v
        v = self.recent.get(prefix, _MISSING)
        if v is not _MISSING:
            return v  # type: ignore[return-value]
        rib = self.rib
        return self.common if rib is not None and rib_holds(rib, prefix, self.origin) else None

    def known(self, prefix: Prefix) -> bool:
        """Has the stage anything for `prefix` (a verdict, or a "not accepted" to tell the RIB apart)?"""
        if prefix in self.kept or prefix in self.recent:
            return True
        rib = self.rib
        return rib is not None and rib_holds(rib, prefix, self.origin)

    def known_any(self, prefixes: Sequence[Prefix]) -> bool:
        """`known` for any of `prefixes` (C-level tests while nothing is known of them)."""
        if not self.kept.keys().isdisjoint(prefixes) or not self.recent.keys().isdisjoint(prefixes):
            return True
        rib = self.rib
        return rib is not None and rib_holds_any(rib, prefixes, self.origin)

    def accept(self, prefix: Prefix, verdict: Verdict) -> None:
        """Store an accepted route's verdict (the general loop's way; the bulk lanes write `recent`)."""
        common = self.common
        if common is None:
            common = self.common = verdict
        if verdict is common:
            self.recent[prefix] = verdict
            if self.kept:
                self.kept.pop(prefix, None)
        else:
            self.kept[prefix] = verdict
            self.recent.pop(prefix, None)

    def reject(self, prefix: Prefix, verdict: Verdict) -> None:
        """Keep a rejection's verdict (the RIB may hold the route until the withdraw is applied:
        `kept` answers first)."""
        self.forget(prefix)
        self.kept[prefix] = verdict

    def forget(self, prefix: Prefix) -> None:
        """Nothing is stored for `prefix` any more (withdrawn, or a rejection not kept)."""
        if self.kept:
            self.kept.pop(prefix, None)
        if self.rib is None:
            self.recent.pop(prefix, None)
        else:
            self.recent[prefix] = None

    def is_accepted(self, prefix: Prefix) -> bool:
        """Is `prefix` accepted now (`accepted_keys` for one prefix)?"""
        v = self.stored(prefix)
        return v is not None and v.accepted

    def accepted_keys(self) -> list[Prefix]:
        """The prefixes accepted now (a scan of the RIB for this peer's candidates, once settled)."""
        kept, recent = self.kept, self.recent
        out = [p for p, v in kept.items() if v.accepted]
        out += [p for p, v in recent.items() if v is not None and p not in kept]
        return out + self._rib_only() if self.rib is not None else out

    def _rib_only(self) -> list[Prefix]:
        """The accepted prefixes only the RIB answers for (neither in `kept` nor in `recent`): a scan."""
        rib, kept, recent, origin = self.rib or {}, self.kept, self.recent, self.origin
        return [p for p in rib if p not in recent and p not in kept and rib_holds(rib, p, origin)]

    def verdicts(self) -> dict[Prefix, Verdict]:
        """Every stored verdict by prefix, accepted or kept rejection (a scan: for tests and views)."""
        out = {p: self.stored(p) for p in self.accepted_keys()}
        out.update((p, v) for p, v in self.kept.items() if not v.accepted)
        return out  # type: ignore[return-value]

    def settle(self, rib: Mapping) -> None:
        """The RIB (`rib`, `Rib.table`) holds every update the stage gave for this peer: the
        accepted routes in `recent` are in it, the ones not accepted are not; from now on it
        answers for them."""
        if self.recent:
            self.recent = {}
        self.rib = rib

    def pin(self) -> None:
        """The RIB is about to lose this peer's routes while the stage keeps them (a BFD
        failure's clean-up): `recent` holds every accepted route again (a scan of the RIB)."""
        if self.rib is None:
            return
        pinned = dict.fromkeys(self._rib_only(), self.common)
        pinned.update((p, v) for p, v in self.recent.items() if v is not None)
        self.recent, self.rib = pinned, None

    def reset(self) -> None:
        """Nothing stored (the session went down)."""
        self.kept, self.recent, self.common, self.rib = {}, {}, None, None

    def looped(self, attrs: Any) -> bool:
        """Does the AS_PATH of `attrs` hold our AS more often than allowed? (Cached per attributes
        object: the prefixes of one UPDATE share it.)"""
        loop = self.loop
        if loop is not None and loop[0] is attrs:
            return loop[1]
        own = self.settings.own_as
        path = getattr(attrs, "as_path", ())
        hit = own is not None and own in path and path.count(own) > self.settings.allow_own_as
        self.loop = (attrs, hit)
        return hit

    def candidate(self, nexthop: str | None, attrs: Any, mods: Modifications) -> Candidate:
        """The candidate for routes with these attributes, modifications and next hop: one object
        per combination while it is cached (the codec gives equal attribute sets of one peer the
        same object, so this shares candidates across UPDATEs without hashing attribute sets; a
        candidate names its peer, so sharing across peers is impossible anyway). A
        `BgpCandidate`: the attributes are its own fields, built here in one tuple from the
        codec's record."""
        key = (id(attrs), id(mods), nexthop)
        hit = self.cands.get(key)
        if hit is not None and hit[0] is attrs and hit[1] is mods:
            return hit[2]
        hops = self.hops.get(nexthop)
        if hops is None:
            hops = self._nexthops(nexthop)
        distance = self.distance if mods.distance is None else mods.distance
        if attrs.__class__ is PathAttrs:  # the codecs' record: its fields are there, as tuples
            ident = self.identity
            if ident is None:
                ident = self._identity(None)
            local_pref, med, origin, path, comms, large = attrs.local_pref, attrs.med, attrs.origin, \
                attrs.as_path, attrs.communities, attrs.large_communities
            path = PATH_PACKERS[len(path)](*path) if len(path) < 64 else pack_path(path)  # (`pack_path`, inline)
            # `pack_attrs`' common cases, inline (and no truth test of a `Communities`: a Python call)
            if large.__class__ is tuple and not large:  # no large communities
                if comms.__class__ is not tuple:  # the codec's octets
                    marks = len(path)
                    path = _join((path, comms))
                elif not comms:
                    marks = len(path)
                else:
                    path, marks = pack_attrs(path, comms, large)
            else:
                path, marks = pack_attrs(path, comms, large)
            cand = _bgp_candidate((
                self.origin, distance, hops, None if mods.metric is None else form(_UNICAST, mods.metric), ident,
                100 if ident.ebgp or local_pref is None else local_pref, path,
                origin if origin.__class__ is BgpOrigin else BgpOrigin(origin),
                0 if med is None else med,  # a missing MED counts as 0 (RFC 4271, FRR default)
                marks))
        else:
            cand = self._other_candidate(attrs, distance, hops, mods.metric)
        if mods is not NO_MODS and mods.changes_attrs:
            cand = mods.apply(cand)
        if len(self.cands) >= CANDIDATE_CACHE:
            self.cands.clear()
        self.cands[key] = (attrs, mods, cand)
        return cand

    def path_candidate(self, cand: Candidate, path_id: int) -> Candidate:
        """`cand` for ADD-PATH path `path_id` (one object per candidate and path id while cached,
        so the routes of one path share it as routes without path id share `cand`)."""
        key = (id(cand), path_id)
        hit = self.path_cands.get(key)
        if hit is not None and hit[0] is cand:
            return hit[1]
        out = cand._replace(path_id=path_id)
        if len(self.path_cands) >= CANDIDATE_CACHE:
            self.path_cands.clear()
        self.path_cands[key] = (cand, out)
        return out

    def max_verdict(self, family: int) -> Verdict:
        """The shared rejection of a prefix max-prefix refused (discarded, or the session torn down)."""
        v = self.max_verdicts.get(family)
        if v is None:
            limit = self.settings.max_prefix.get(family)
            text = f"limit {limit.limit} {limit.action.value}" if limit is not None else "torn down"
            v = self.max_verdicts[family] = shared_verdict(False, text, Reason.MAX_PREFIX, policy=MAX_PREFIX)
        return v

    def forget_candidates(self) -> None:
        """Settings, policies or distances changed: build candidates anew."""
        self.cands.clear()
        self.path_cands.clear()
        self.identity = None

    def _identity(self, router_id: str | None) -> PeerIdentity:
        """The shared identity of this peer's paths (`router_id`: one the attributes name)."""
        s = self.settings
        ident = peer_identity(s.address, s.asn, router_id or s.router_id or s.address, s.ebgp)
        if router_id is None:
            self.identity = ident
        return ident

    def _other_candidate(self, attrs: Any, distance: int, hops: tuple[NextHop, ...],
                         metric: int | None) -> BgpCandidate:
        """The candidate for attributes that are not the codecs' record: a `BgpAttrs` (kept as
        it is, but an eBGP route's LOCAL_PREF is ours: 100) or any object with some of the
        attribute names (the JSON path, tests)."""
        ebgp = self.settings.ebgp
        if isinstance(attrs, BgpAttrs):
            if ebgp and attrs.local_pref != 100:
                attrs = attrs._replace(local_pref=100)
            return bgp_candidate(self.origin, distance, hops, _UNICAST, attrs, metric)
        local_pref = getattr(attrs, "local_pref", None)
        med = getattr(attrs, "med", None)
        origin = getattr(attrs, "origin", BgpOrigin.IGP)
        path, marks = pack_attrs(pack_path(getattr(attrs, "as_path", ())),
                                 keep_communities(getattr(attrs, "communities", ())),
                                 keep_communities(getattr(attrs, "large_communities", ())))
        return _bgp_candidate((
            self.origin, distance, hops, form(_UNICAST, metric), self._identity(getattr(attrs, "router_id", None)),
            100 if ebgp or local_pref is None else local_pref, path,
            origin if origin.__class__ is BgpOrigin else BgpOrigin(origin),
            0 if med is None else med,  # a missing MED counts as 0 (RFC 4271, FRR default)
            marks))

    def _nexthops(self, nexthop: str | None) -> tuple[NextHop, ...]:
        if not nexthop:
            hops = nexthops()
        else:
            gateway = canonical_address(nexthop)
            ip = ipaddress.ip_address(gateway)
            dev = self.settings.device if ip.version == 6 and ip in _LINK_LOCAL_V6 else None
            hops = nexthops(NextHop(gateway, dev))
        if len(self.hops) >= 4096:
            self.hops.clear()
        self.hops[nexthop] = hops
        return hops
