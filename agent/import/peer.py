"""Per-peer import state: a peer's import settings, its verdicts, and the candidates built from
its routes.

DOC: owned by `stage.ImportStage` (one instance per configured peer). `PeerState.candidate` turns
an accepted route into the RIB `Candidate` (step 4 of the import stage, see `stage`): origin
``ebgp/PEER`` or ``ibgp/PEER``, distance, next hop (with the peer's device for an IPv6
link-local next hop) and `BgpAttrs` with the policy's modifications. Candidates are interned and
the last one is reused while the attributes object, the modifications and the next hop stay the
same, so a table of shared attributes builds a handful of candidates.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.model import (
    BgpAttrs,
    BgpOrigin,
    Candidate,
    NextHop,
    Origin,
    Prefix,
    RouteType,
    SourceKind,
    canonical_address,
    intern,
    nexthops,
)
from ..policy.engine import BoundPolicy, PeerInfo
from ..policy.verdict import Modifications, Verdict
from .maxprefix import MaxPrefixLimit

_LINK_LOCAL_V6 = ipaddress.ip_network("fe80::/10")


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


class PeerState:
    """What the import stage keeps per peer: settings, bound policy, verdicts, counts, and the
    last candidate built (reused while attributes, modifications and next hop stay the same)."""

    __slots__ = ("settings", "info", "bound", "fixed", "origin", "distance", "verdicts", "held",
                 "key4", "key6", "rejected_kept", "last", "base", "hops", "max_verdicts", "loop",
                 "loop_verdict", "unkept")

    def __init__(self, settings: ImportPeer) -> None:
        self.settings = settings
        self.info = PeerInfo(settings.address, settings.asn, settings.ebgp)
        kind = SourceKind.EBGP if settings.ebgp else SourceKind.IBGP
        self.origin = intern(Origin(kind, settings.address))
        self.bound: BoundPolicy | None = None
        self.fixed: Verdict | None = None  # the verdict of every route when there is no policy
        self.distance = 0
        self.verdicts: dict[Prefix, Verdict] = {}
        self.held = [0, 0, 0, 0]  # v4 rejected, v4 accepted, v6 rejected, v6 accepted
        self.key4 = (settings.address, 4)
        self.key6 = (settings.address, 6)
        self.rejected_kept = 0
        self.unkept = [0, 0]  # v4, v6: rejections this session not kept (beyond keep_rejected)
        self.last: tuple[Any, Modifications, Any, Candidate] | None = None
        self.base: tuple[Any, BgpAttrs] | None = None
        self.hops: dict[Any, tuple[NextHop, ...]] = {}
        self.max_verdicts: dict[int, Verdict] = {}
        self.loop: tuple[Any, bool] | None = None  # (attrs object, its AS_PATH loops)
        self.loop_verdict: Verdict | None = None  # set by the stage's bind

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
        last = self.last
        if last is not None and last[0] is attrs and last[1] is mods and last[2] == nexthop:
            return last[3]
        bgp = self._base_attrs(attrs)
        if mods.changes_attrs:
            bgp = mods.apply(bgp)
        hops = self.hops.get(nexthop)
        if hops is None:
            hops = self._nexthops(nexthop)
        cand = intern(Candidate(
            self.origin,
            self.distance if mods.distance is None else mods.distance,
            hops,
            RouteType.UNICAST,
            intern(bgp),
            mods.metric,
        ))
        self.last = (attrs, mods, nexthop, cand)
        return cand

    def _base_attrs(self, attrs: Any) -> BgpAttrs:
        base = self.base
        if base is not None and base[0] is attrs:
            return base[1]
        s = self.settings
        if isinstance(attrs, BgpAttrs):
            bgp = attrs
            if s.ebgp and bgp.local_pref != 100:
                bgp = bgp._replace(local_pref=100)
        else:
            local_pref = getattr(attrs, "local_pref", None)
            med = getattr(attrs, "med", None)
            bgp = BgpAttrs(
                peer_address=s.address,
                peer_as=s.asn,
                router_id=getattr(attrs, "router_id", None) or s.router_id or s.address,
                ebgp=s.ebgp,
                local_pref=100 if s.ebgp or local_pref is None else local_pref,
                as_path=tuple(getattr(attrs, "as_path", ())),
                origin=BgpOrigin(getattr(attrs, "origin", BgpOrigin.IGP)),
                med=0 if med is None else med,  # a missing MED counts as 0 (RFC 4271, FRR default)
                communities=tuple(getattr(attrs, "communities", ())),
                large_communities=tuple(getattr(attrs, "large_communities", ())),
            )
        self.base = (attrs, bgp)
        return bgp

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
