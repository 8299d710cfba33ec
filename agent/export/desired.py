"""Desired advertisements per peer: the node's prefixes through selection and export policy.

DOC: pure logic. For one peer, every `Advertisement` whose `peerSelector` matches the peer's
labels contributes its prefixes of the peer's families (or, with `aggregateLength`, the covering
prefixes of that length instead of the members). Each prefix then goes through the peer's export
policy, the same `RoutePolicy` machinery as import: conditions see the prefix, the
advertisement's communities and its labels (`advertisementLabels`), and the peer (sessionType,
peerAs, peerAddress); actions set local-pref, MED, AS-path prepend, next hop and add communities.
Without an export policy, RFC 8212: nothing goes to an eBGP peer (reason ``no_policy``), every
selected prefix to an iBGP peer.

Local-pref goes to iBGP peers only and AS-path prepending to eBGP peers only (our own AS in the
path of an iBGP route makes every router of our AS drop it as a loop).

Merge rule, when several advertisements give the same prefix to the same peer (documented in
docs/export.md): communities and large communities are the union (in order of advertisement name), the
highest local-pref, the lowest MED and the longest prepend win, and the next hop of the first
advertisement by name is used. The result does not depend on the order the advertisements came in.

Only prefixes from advertisements are ever exported: routes learned from peers never are (no
transit by accident).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..core.model import Prefix, intern
from ..policy.engine import CompiledPolicy, PeerInfo
from ..policy.verdict import NO_MODS, Reason, Verdict, shared_verdict


@dataclass(frozen=True, slots=True)
class ExportPeer:
    address: str
    asn: int
    local_as: int
    ebgp: bool
    families: frozenset[int]  # 4 and/or 6
    labels: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    policy: str | None = None
    session_family: int = 0  # 4 or 6: the family of the session's addresses (0: not checked)


@dataclass(frozen=True, slots=True)
class AdvertAttrs:
    """What goes with one announced prefix (turned into an ExaBGP announce command)."""

    next_hop: str = "self"
    local_pref: int | None = None
    med: int | None = None
    communities: tuple[str, ...] = ()
    large_communities: tuple[str, ...] = ()
    prepend: int = 0


@dataclass(frozen=True, slots=True)
class Advert:
    attrs: AdvertAttrs
    sources: tuple[str, ...]  # Advertisement names
    policy: str  # "policy/statement" that accepted it


@dataclass(frozen=True, slots=True)
class _View:
    """What export policy conditions read about an advertisement."""

    communities: tuple[str, ...]
    large_communities: tuple[str, ...]
    labels: Mapping[str, str]
    as_path: tuple[int, ...] = ()


def members(adv, families: frozenset[int]) -> list[Prefix]:
    """The prefixes an advertisement announces in `families` (aggregated when configured)."""
    agg = adv.spec.aggregate_length
    out: dict[Prefix, None] = {}
    for text in adv.spec.prefixes:
        p = Prefix.parse(text)
        if p.family not in families:
            continue
        length = None if agg is None else (agg.ipv6 if p.family == 6 else agg.ipv4)
        if length is not None:
            shift = p.bits - length
            p = Prefix.of(p.family, (p.address >> shift) << shift, length)
        out[p] = None
    return list(out)


def selects(adv, labels: Mapping[str, str]) -> bool:
    want = adv.spec.peer_selector.match_labels
    return all(labels.get(k) == v for k, v in want.items())


def _base(adv, ebgp: bool) -> AdvertAttrs:
    s = adv.spec
    return AdvertAttrs(next_hop=s.next_hop, local_pref=None if ebgp else s.local_pref, med=s.med,
                       communities=tuple(s.communities), large_communities=tuple(s.large_communities),
                       prepend=s.as_path_prepend if ebgp else 0)


def _apply(attrs: AdvertAttrs, mods, ebgp: bool) -> AdvertAttrs:
    if mods is None or mods is NO_MODS:
        return attrs
    return AdvertAttrs(
        next_hop=mods.next_hop if mods.next_hop is not None else attrs.next_hop,
        local_pref=attrs.local_pref if ebgp or mods.local_pref is None else mods.local_pref,
        med=attrs.med if mods.med is None else mods.med,
        communities=tuple(dict.fromkeys(attrs.communities + tuple(mods.add_communities))),
        large_communities=tuple(dict.fromkeys(attrs.large_communities + tuple(mods.add_large_communities))),
        prepend=attrs.prepend if mods.prepend is None or not ebgp else mods.prepend,
    )


def merge(a: AdvertAttrs, b: AdvertAttrs) -> AdvertAttrs:
    """Two advertisements of one prefix to one peer; `a` comes from the first by name."""
    return AdvertAttrs(
        next_hop=a.next_hop,
        local_pref=max((x for x in (a.local_pref, b.local_pref) if x is not None), default=None),
        med=min((x for x in (a.med, b.med) if x is not None), default=None),
        communities=tuple(dict.fromkeys(a.communities + b.communities)),
        large_communities=tuple(dict.fromkeys(a.large_communities + b.large_communities)),
        prepend=max(a.prepend, b.prepend),
    )


NO_POLICY = shared_verdict(False, "default", Reason.NO_POLICY, NO_MODS, "")
IBGP_DEFAULT = shared_verdict(True, "default", Reason.IBGP_NO_POLICY, NO_MODS, "")
UNKNOWN = shared_verdict(False, "default", Reason.UNKNOWN_POLICY, NO_MODS, "")
NO_NEXT_HOP_VERDICT = shared_verdict(False, "next hop", Reason.NO_NEXT_HOP, NO_MODS, "")


def desired_for_peer(peer: ExportPeer, adverts: Iterable, policies: Mapping[str, CompiledPolicy],
                     ) -> tuple[dict[Prefix, Advert], dict[Prefix, Verdict]]:
    """(accepted adverts, rejected prefixes with their verdict) for one peer."""
    bound = None
    fixed: Verdict | None = None
    if peer.policy is None:
        fixed = NO_POLICY if peer.ebgp else IBGP_DEFAULT
    elif peer.policy not in policies:
        fixed = UNKNOWN
    else:
        bound = policies[peer.policy].bind(PeerInfo(peer.address, peer.asn, peer.ebgp))
    out: dict[Prefix, Advert] = {}
    rejected: dict[Prefix, Verdict] = {}
    for adv in sorted(adverts, key=lambda a: a.metadata.name):
        if not selects(adv, peer.labels):
            continue
        view = _View(tuple(adv.spec.communities), tuple(adv.spec.large_communities),
                     dict(adv.metadata.labels))
        base = _base(adv, peer.ebgp)
        for prefix in members(adv, peer.families):
            verdict = fixed if bound is None else bound.evaluate(prefix, None, view)
            if not verdict.accepted:
                if prefix not in out:
                    rejected[prefix] = verdict
                continue
            attrs = _apply(base, verdict.mods, peer.ebgp)
            if attrs.next_hop == "self" and peer.session_family and prefix.family != peer.session_family:
                if prefix not in out:
                    rejected[prefix] = NO_NEXT_HOP_VERDICT
                continue
            rejected.pop(prefix, None)
            label = f"{verdict.policy}/{verdict.statement}" if verdict.policy else verdict.reason.value
            old = out.get(prefix)
            if old is None:
                out[prefix] = Advert(intern(attrs), (adv.metadata.name,), label)
            else:
                out[prefix] = Advert(intern(merge(old.attrs, attrs)), old.sources + (adv.metadata.name,),
                                     old.policy)
    return out, rejected


def owned_prefixes(adverts: Iterable) -> list[Prefix]:
    """Every prefix the node owns per its advertisements (members and aggregates): for the guard.
    Service VIPs are left out: in cluster mode the guard protects every VIP of the cluster
    anyway (`agent.k8s.cluster.ClusterState.guard_inputs`), which is a superset."""
    out: dict[Prefix, None] = {}
    for adv in adverts:
        if adv.spec.type == "service" and adv.spec.aggregate_length is None:
            continue
        if adv.spec.aggregate_length is not None:
            for p in members(adv, frozenset((4, 6))):
                out[p] = None
        for text in adv.spec.prefixes:
            out[Prefix.parse(text)] = None
    return list(out)
