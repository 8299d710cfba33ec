"""Kubernetes objects as small frozen value types: Nodes, Services, EndpointSlices, ServiceCIDRs.

DOC: pure logic. The reflector hands over each object as the plain JSON dict the API server sent
(camelCase keys, missing fields absent, optional fields sometimes ``null``). The transforms here
(`node_from`, `service_from`, `slice_from`, `service_cidrs_from`) keep only what the agent reads
and return a frozen, slotted value, or None for an object to ignore. They never raise: any field
may be missing, ``null`` or of the wrong type, and such a field counts as absent. Addresses and
prefixes come out in canonical text (``ipaddress`` form: IPv6 compressed and lower case); an
address that does not parse (or carries an IPv6 zone) is dropped, never guessed at. Duplicates are
dropped, first occurrence kept.

Meanings follow the API and kube-proxy, so that the node attracts exactly the traffic its
kube-proxy will serve:

* Node: pod CIDRs from ``spec.podCIDRs``, falling back to ``spec.podCIDR``; addresses of type
  ``InternalIP`` and ``ExternalIP`` only (Hostname and InternalDNS entries are not addresses).
* Service: ``ExternalName`` is ignored (None). Cluster IPs are ``spec.clusterIPs``, falling back to
  ``[spec.clusterIP]``; ``"None"`` (headless) and ``""`` give no cluster IP. Load-balancer ingress
  IPs are read only for ``type: LoadBalancer``, and hostname-only ingress entries are skipped.
  A missing ``type`` means ``ClusterIP``; an unknown type is ignored.
* EndpointSlice: endpoint conditions are read as kube-proxy does: ``ready`` null means ready,
  ``serving`` null means serving, ``terminating`` null means not terminating. An endpoint without
  addresses or without ``nodeName`` belongs to no node. ``serving_nodes`` holds every node with a
  ready endpoint or a serving-and-terminating one (so it contains ``ready_nodes``): the set
  kube-proxy's per-node fallback for Local traffic policies picks from. A slice with no
  ``kubernetes.io/service-name`` label, or of address type FQDN, is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SERVICE_TYPES = frozenset(("ClusterIP", "NodePort", "LoadBalancer"))
NODE_ADDRESS_TYPES = frozenset(("InternalIP", "ExternalIP"))
_EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})


# --- tolerant readers: a field of the wrong type counts as absent --------------------------------

def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _labels(meta: dict) -> Mapping[str, str]:
    raw = _dict(meta.get("labels"))
    if not raw:
        return _EMPTY_LABELS
    return MappingProxyType({k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)})


def canonical_ip(value: Any) -> str | None:
    """``value`` as canonical address text, or None when it is not a plain IPv4/IPv6 address."""
    if not isinstance(value, str) or "%" in value:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def canonical_cidr(value: Any) -> str | None:
    """``value`` as canonical network text (host bits cleared), or None when it does not parse."""
    if not isinstance(value, str) or "%" in value or "/" not in value:
        return None
    try:
        return str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        return None


def _canonical_all(values: Any, canonical) -> tuple[str, ...]:
    """The canonical texts of a list, unparsable entries and duplicates dropped, order kept."""
    return tuple(dict.fromkeys(c for c in map(canonical, _list(values)) if c is not None))


def _ips(values: Any) -> tuple[str, ...]:
    return _canonical_all(values, canonical_ip)


def _cidrs(values: Any) -> tuple[str, ...]:
    return _canonical_all(values, canonical_cidr)


def _freeze_labels(obj) -> None:
    """Labels given as a plain dict (tests, callers) are copied into a read-only mapping."""
    if not isinstance(obj.labels, MappingProxyType):
        object.__setattr__(obj, "labels", MappingProxyType(dict(obj.labels)))


def ip_family(ip: str) -> int:
    """4 or 6 for canonical address text."""
    return 6 if ":" in ip else 4


# --- Node -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY_LABELS, hash=False)
    pod_cidrs: tuple[str, ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()  # (type, address): InternalIP / ExternalIP

    def __post_init__(self) -> None:
        _freeze_labels(self)

    @property
    def internal_ipv4(self) -> str | None:
        """The first IPv4 InternalIP, or None."""
        for kind, ip in self.addresses:
            if kind == "InternalIP" and ip_family(ip) == 4:
                return ip
        return None

    @property
    def ips(self) -> tuple[str, ...]:
        """Every InternalIP and ExternalIP address, in order, without duplicates."""
        return tuple(dict.fromkeys(ip for _, ip in self.addresses))


def node_from(obj: Any) -> NodeInfo | None:
    """A Node as the API server sends it; None when it has no name."""
    obj = _dict(obj)
    meta, spec, status = _dict(obj.get("metadata")), _dict(obj.get("spec")), _dict(obj.get("status"))
    name = _str(meta.get("name"))
    if name is None:
        return None
    pod_cidrs = _cidrs(spec.get("podCIDRs"))
    if not pod_cidrs:
        pod_cidrs = _cidrs([spec.get("podCIDR")])
    addresses: dict[tuple[str, str], None] = {}
    for entry in _list(status.get("addresses")):
        entry = _dict(entry)
        kind = entry.get("type")
        ip = canonical_ip(entry.get("address"))
        if kind in NODE_ADDRESS_TYPES and ip is not None:
            addresses[(kind, ip)] = None
    return NodeInfo(name, _labels(meta), pod_cidrs, tuple(addresses))


# --- Service --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ServiceInfo:
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY_LABELS, hash=False)
    type: str = "ClusterIP"  # ClusterIP | NodePort | LoadBalancer
    cluster_ips: tuple[str, ...] = ()  # empty: headless
    external_ips: tuple[str, ...] = ()
    lb_ips: tuple[str, ...] = ()  # status.loadBalancer.ingress[].ip, LoadBalancer type only
    lb_class: str | None = None
    etp_local: bool = False  # externalTrafficPolicy: Local
    itp_local: bool = False  # internalTrafficPolicy: Local

    def __post_init__(self) -> None:
        _freeze_labels(self)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def headless(self) -> bool:
        return not self.cluster_ips


def service_from(obj: Any) -> ServiceInfo | None:
    """A Service as the API server sends it; None for ExternalName, unknown types, no name."""
    obj = _dict(obj)
    meta, spec, status = _dict(obj.get("metadata")), _dict(obj.get("spec")), _dict(obj.get("status"))
    name = _str(meta.get("name"))
    kind = spec.get("type")
    kind = "ClusterIP" if kind is None or kind == "" else kind
    if name is None or kind not in SERVICE_TYPES:
        return None
    raw_cluster = _list(spec.get("clusterIPs")) or [spec.get("clusterIP")]
    lb_ips: tuple[str, ...] = ()
    if kind == "LoadBalancer":
        lb_ips = _ips([_dict(i).get("ip") for i in _list(_dict(status.get("loadBalancer")).get("ingress"))])
    return ServiceInfo(
        namespace=_str(meta.get("namespace")) or "",
        name=name,
        labels=_labels(meta),
        type=kind,
        cluster_ips=_ips(raw_cluster),  # "None" and "" do not parse: headless
        external_ips=_ips(spec.get("externalIPs")),
        lb_ips=lb_ips,
        lb_class=_str(spec.get("loadBalancerClass")),
        etp_local=spec.get("externalTrafficPolicy") == "Local",
        itp_local=spec.get("internalTrafficPolicy") == "Local",
    )


# --- EndpointSlice --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SliceInfo:
    namespace: str
    name: str
    service: str  # "ns/svcname" from the kubernetes.io/service-name label
    ready_nodes: frozenset[str] = frozenset()
    serving_nodes: frozenset[str] = frozenset()  # ready, or serving and terminating (kube-proxy fallback)
    family: int = 4  # addressType IPv4 -> 4, IPv6 -> 6

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


_ADDRESS_TYPES = {"IPv4": 4, "IPv6": 6}


def slice_from(obj: Any) -> SliceInfo | None:
    """An EndpointSlice as the API server sends it; None without service label, FQDN, no name."""
    obj = _dict(obj)
    meta = _dict(obj.get("metadata"))
    name = _str(meta.get("name"))
    service = _str(_dict(meta.get("labels")).get(SERVICE_NAME_LABEL))
    family = _ADDRESS_TYPES.get(obj.get("addressType")) if isinstance(obj.get("addressType"), str) else None
    if name is None or service is None or family is None:
        return None
    namespace = _str(meta.get("namespace")) or ""
    ready: set[str] = set()
    serving: set[str] = set()
    for ep in _list(obj.get("endpoints")):
        ep = _dict(ep)
        node = _str(ep.get("nodeName"))
        if node is None or not _list(ep.get("addresses")):
            continue
        cond = _dict(ep.get("conditions"))
        is_ready = cond.get("ready") is not False  # null / absent: ready
        is_serving = cond.get("serving") is not False  # null / absent: serving
        is_terminating = cond.get("terminating") is True  # null / absent: not terminating
        if is_ready:
            ready.add(node)
            serving.add(node)
        elif is_serving and is_terminating:
            serving.add(node)
    return SliceInfo(namespace, name, f"{namespace}/{service}", frozenset(ready), frozenset(serving), family)


# --- ServiceCIDR ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ServiceCidrInfo:
    name: str
    cidrs: tuple[str, ...] = ()  # canonical networks


def service_cidrs_from(obj: Any) -> ServiceCidrInfo | None:
    """A networking.k8s.io/v1 ServiceCIDR; None when it has no name."""
    obj = _dict(obj)
    name = _str(_dict(obj.get("metadata")).get("name"))
    if name is None:
        return None
    return ServiceCidrInfo(name, _cidrs(_dict(obj.get("spec")).get("cidrs")))
