"""Configuration of what the node advertises: the `Advertisement` kind.

DOC: an `Advertisement` is a set of prefixes the node owns (pod CIDRs, IP pools, VIPs or plain
prefixes), with the labels of its metadata (export policies select by them) and its own BGP
attributes. Which peers get it: `peerSelector.matchLabels` over the `BgpPeer` objects' labels
(none: every peer whose session carries the family), then each peer's export policy.
`aggregateLength` announces, per family, the covering prefix of that length instead of the
members (a pool of /32 VIPs as one /24). In cluster mode the Kubernetes sources (Node podCIDRs,
Services) produce the same advertisements.

    apiVersion: routeagent.io/v1alpha1
    kind: Advertisement
    metadata: {name: pods, labels: {type: pod-cidr}}
    spec:
      type: podCIDR
      prefixes: [10.244.1.0/24, "fd00:244:1::/64"]
      communities: ["65000:100"]
      largeCommunities: ["65000:1:2"]
      med: 10
      localPref: 200               # iBGP peers only
      asPathPrepend: 1
      peerSelector: {matchLabels: {role: tor}}
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic_core import InitErrorDetails

from .base import U32_MAX, IPAddress, IPPrefix, LabelSelector, Resource, _at, _Model, _raise, unique_errors
from .policy import Community, LargeCommunity


class PeerSelector(_Model):
    """Selects BgpPeer objects by their metadata.labels."""

    match_labels: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Every one of these labels must be on the peer (empty: every peer)."""


class AggregateLength(_Model):
    ipv4: StrictInt | None = Field(None, ge=0, le=32)
    """Announce the covering /N of the IPv4 members instead of the members."""
    ipv6: StrictInt | None = Field(None, ge=0, le=128)
    """Announce the covering /N of the IPv6 members instead of the members."""


class ServiceSelection(_Model):
    """Which Service addresses a ``type: service`` advertisement announces from this node."""

    selector: LabelSelector = Field(default_factory=LabelSelector)
    """Services whose labels match (empty: every Service)."""
    cluster_ip: StrictBool = Field(True, alias="clusterIP")
    """Announce spec.clusterIPs (with internalTrafficPolicy Local: only with a ready local endpoint)."""
    external_ips: StrictBool = Field(True, alias="externalIPs")
    """Announce spec.externalIPs (with externalTrafficPolicy Local: only with a ready local endpoint)."""
    load_balancer_ingress: StrictBool = True
    """Announce status.loadBalancer.ingress[].ip of LoadBalancer Services (externalTrafficPolicy
    Local: only with a ready local endpoint)."""
    load_balancer_classes: tuple[StrictStr, ...] = Field((), max_length=64)
    """LoadBalancer ingress of Services with one of these spec.loadBalancerClass values; empty:
    only Services without a class (another implementation owns the others)."""


class AdvertisementSpec(_Model):
    type: Literal["podCIDR", "pool", "vip", "prefix", "service"] = "prefix"
    """What the prefixes are. ``podCIDR`` without prefixes: the Node's spec.podCIDRs;
    ``service``: the VIPs of the selected Services (Kubernetes mode)."""
    prefixes: tuple[IPPrefix, ...] = Field((), max_length=65536)
    """The prefixes this node owns and may announce (required for pool, vip and prefix)."""
    services: ServiceSelection | None = None
    """With ``type: service``: which Services and which of their addresses (unset: all)."""
    node_selector: LabelSelector | None = None
    """The nodes that advertise this (their Node labels); unset: every node."""
    aggregate_length: AggregateLength | None = None
    """Announce covering prefixes of these lengths instead of the members."""
    communities: tuple[Community, ...] = ()
    """Standard communities sent with these prefixes: ASN:VALUE (0-65535 each) or a well-known
    name (no-export, no-advertise, blackhole ...)."""
    large_communities: tuple[LargeCommunity, ...] = ()
    """Large communities sent with these prefixes: GLOBAL:LOCAL1:LOCAL2, three numbers 0-4294967295."""
    med: StrictInt | None = Field(None, ge=0, le=U32_MAX)
    """MULTI_EXIT_DISC sent with these prefixes; unset: none."""
    local_pref: StrictInt | None = Field(None, ge=0, le=U32_MAX)
    """Sent to iBGP peers only (LOCAL_PREF never crosses an AS boundary)."""
    as_path_prepend: StrictInt = Field(0, ge=0, le=16)
    """Extra copies of our AS in front of the path (eBGP peers only)."""
    next_hop: IPAddress | Literal["self"] = "self"
    """Next hop sent with these prefixes: ``self`` (our address on the session, of the session's
    family) or an address (needed for IPv6 prefixes over an IPv4 session and the reverse)."""
    peer_selector: PeerSelector = Field(default_factory=PeerSelector)
    """The peers that get these prefixes (through their export policy), by BgpPeer labels."""

    @model_validator(mode="after")
    def _rules(self) -> "AdvertisementSpec":
        errors: list[InitErrorDetails] = []
        if self.type in ("pool", "vip", "prefix") and not self.prefixes:
            errors.append(_at(("prefixes",), [], "no_prefixes",
                              f"type {self.type} needs at least one prefix"))
        if self.type == "service" and self.prefixes:
            errors.append(_at(("prefixes",), list(self.prefixes), "service_prefixes",
                              "type service takes its prefixes from the Services: leave prefixes empty"))
        if self.services is not None and self.type != "service":
            errors.append(_at(("services",), "...", "services_without_type",
                              f"services only applies to type service (type is {self.type})"))
        errors += unique_errors(self.prefixes, "prefixes", "prefix", "duplicate_prefix")
        agg = self.aggregate_length
        if agg is not None:
            for i, p in enumerate(self.prefixes):
                length = int(p.rsplit("/", 1)[1])
                limit = agg.ipv6 if ":" in p else agg.ipv4
                if limit is not None and limit > length:
                    family = "ipv6" if ":" in p else "ipv4"
                    errors.append(_at(("aggregateLength", family), limit, "aggregate_longer",
                                      f"aggregate /{limit} is longer than member {p}"))
        _raise(type(self).__name__, errors)
        return self


class Advertisement(Resource):
    """Prefixes this node owns and may announce to its BGP peers."""

    kind: Literal["Advertisement"] = "Advertisement"
    spec: AdvertisementSpec


KINDS = {"Advertisement": Advertisement}
