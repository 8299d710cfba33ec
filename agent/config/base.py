"""Configuration models: Kubernetes-shaped resources, validated once, turned into RIB inputs.

DOC: every configuration object is a resource ``{apiVersion, kind, metadata, spec}`` with
``apiVersion: routeagent.io/v1alpha1``. Standalone, the agent reads them from YAML files
(`agent.configload`); in a cluster the same objects will be CRDs whose schemas are generated from
these models. So the models obey the rules of a structural CRD schema:

* field names are camelCase in YAML/JSON (``alias_generator=to_camel``) and snake_case in Python
  (``populate_by_name`` lets code build models by Python name; the loader validates by alias only,
  so ``next_hops:`` in a file is an unknown field, as it would be for the API server);
* ``extra="forbid"`` everywhere: an unknown or misspelt field is an error, never silently ignored;
* no free-form dicts (the one exception is ``metadata.labels``, string to string), explicit types
  with bounds, strict scalars (``port: "9180"`` is rejected, as the API server would), attribute
  docstrings become the schema descriptions;
* every model is frozen; values with a canonical text (prefixes, addresses) are stored canonical.

Cross-field rules live in ``model_validator``s that report each violation at the exact field
(``spec.routes[2].nextHops[0].gateway``) by raising a `ValidationError` built from
`InitErrorDetails`, so the loader can print a precise path for every problem.

Kinds (`KINDS`):

* `AgentConfig` (at most one): FIB table/protocol/metric and timers, administrative distances,
  ECMP width, local API address. Everything has a default; no AgentConfig means all defaults.
* `StaticRoutes` (any number): static routes; the object name becomes the origin
  ``static/NAME`` of its routes.

`Config` is the whole validated configuration (`Config.from_objects` checks the rules between
objects: one AgentConfig, unique kind/name). The pure helpers `static_candidates`, `fib_settings`
and `distances` turn it into the value types of `agent.model` and `agent.fib.types`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..policy.engine import BUILTIN_POLICIES
from ..fib.types import PROTOCOL_NAMES, FibSettings
from ..core.model import (
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

API_VERSION = "routeagent.io/v1alpha1"
U32_MAX = 2**32 - 1

# rtm_protocol values that belong to the kernel and iproute2 (unspec, redirect, kernel, boot, static).
RESERVED_PROTOCOLS = range(0, 5)


# ---------------------------------------------------------------------------------------------
# Scalar types with validation and canonical form
# ---------------------------------------------------------------------------------------------


def _error(kind: str, message: str) -> PydanticCustomError:
    # No context: the message is used as is (no "{...}" templating, no "Value error, " prefix).
    return PydanticCustomError(kind, message)


_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_LABEL_VALUE_RE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def _dns_checker(kind: str, pattern: re.Pattern, limit: int, what: str):
    def check(value: str) -> str:
        if len(value) > limit or not pattern.fullmatch(value):
            raise _error(kind, f"invalid name {value!r}: a DNS-1123 {what}")
        return value
    return check


_check_dns_subdomain = _dns_checker(
    "dns_subdomain", _DNS_SUBDOMAIN_RE, 253,
    "subdomain is at most 253 characters of lowercase letters, digits, '-' and '.', "
    "starting and ending with a letter or digit")
_check_dns_label = _dns_checker(
    "dns_label", _DNS_LABEL_RE, 63,
    "label is at most 63 characters of lowercase letters, digits and '-', "
    "starting and ending with a letter or digit")


def _check_labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        prefix, slash, name = key.rpartition("/")
        if (
            (slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)))
            or not name
            or len(name) > 63
            or not _LABEL_VALUE_RE.fullmatch(name)
        ):
            raise _error(
                "label_key",
                f"invalid label key {key!r}: an optional DNS subdomain prefix and '/', then at most "
                "63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
            )
        if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value):
            raise _error(
                "label_value",
                f"invalid value {value!r} of label {key!r}: at most 63 letters, digits, '-', '_' "
                "and '.', starting and ending with a letter or digit",
            )
    return labels


def _check_prefix(value: str) -> str:
    address, slash, length = value.partition("/")
    if not slash or not length.isdigit() or "%" in address:
        raise _error(
            "ip_prefix",
            f"invalid prefix {value!r}: expected an IPv4 or IPv6 network in CIDR notation, "
            "like 10.0.0.0/24 or 2001:db8::/32",
        )
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError as exc:
        raise _error("ip_prefix", f"invalid prefix {value!r}: {exc}") from None
    if net.network_address != ipaddress.ip_address(address):
        raise _error(
            "ip_prefix_host_bits",
            f"host bits set in {value}: the network is {net}",
        )
    return str(net)


def _check_address(value: str) -> str:
    if "%" in value:
        raise _error(
            "ip_address",
            f"invalid address {value!r}: no zone index ('%'), name the interface in 'device'",
        )
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise _error("ip_address", f"invalid address {value!r}: expected an IPv4 or IPv6 address") from None
    return canonical_address(str(addr))


def _check_gateway(value: str) -> str:
    addr = ipaddress.ip_address(value)  # already canonical
    if addr.is_unspecified or addr.is_multicast:
        raise _error("ip_gateway", f"{value} cannot be a gateway (unspecified or multicast address)")
    return value


def _check_interface(value: str) -> str:
    # The kernel's dev_valid_name(): 1..15 bytes (IFNAMSIZ 16 with the NUL), not "." or "..",
    # no '/', ':' or whitespace.
    if (
        not value
        or len(value.encode()) > 15
        or value in (".", "..")
        or any(c in "/:" or c.isspace() or c == "\0" for c in value)
    ):
        raise _error(
            "interface_name",
            f"invalid interface name {value!r}: 1 to 15 bytes, no '/', ':' or whitespace, "
            "not '.' or '..'",
        )
    return value


def _check_protocol(value: int) -> int:
    if value in RESERVED_PROTOCOLS:
        raise _error(
            "reserved_protocol",
            f"protocol {value} ({PROTOCOL_NAMES[value]}) is reserved: 0-4 are unspec, redirect, "
            "kernel, boot and static, which belong to the kernel and to other tools; the agent "
            "must own its routes under a protocol number of its own (default 201)",
        )
    if value in PROTOCOL_NAMES:
        raise _error(
            "foreign_protocol",
            f"protocol {value} belongs to {PROTOCOL_NAMES[value]!r}: the agent treats every route "
            "of its protocol as its own and deletes the ones it does not want; choose a number "
            "no other routing daemon uses (default 201)",
        )
    return value


DnsSubdomain = Annotated[StrictStr, AfterValidator(_check_dns_subdomain)]
DnsLabel = Annotated[StrictStr, AfterValidator(_check_dns_label)]
IPPrefix = Annotated[StrictStr, AfterValidator(_check_prefix)]
IPAddress = Annotated[StrictStr, AfterValidator(_check_address)]
Gateway = Annotated[StrictStr, AfterValidator(_check_address), AfterValidator(_check_gateway)]
InterfaceName = Annotated[StrictStr, AfterValidator(_check_interface)]
Distance = Annotated[StrictInt, Field(ge=0, le=255)]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
    )


def _raise(title: str, errors: list[InitErrorDetails]) -> None:
    """Raise all cross-field `errors` at once, each at its own location (relative to the model)."""
    if errors:
        raise ValidationError.from_exception_data(title, errors)


def _at(loc: tuple[str | int, ...], value: object, kind: str, message: str) -> InitErrorDetails:
    return InitErrorDetails(type=_error(kind, message), loc=loc, input=value)


# ---------------------------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------------------------


class Metadata(_Model):
    """Kubernetes object metadata: only what the agent uses."""

    name: DnsSubdomain
    """Object name (DNS-1123 subdomain), unique per kind. Becomes the origin name of its routes."""
    namespace: DnsLabel | None = None
    """Namespace, when the object comes from (or is meant for) a cluster."""
    labels: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_labels)] = Field(
        default_factory=dict
    )
    """Kubernetes labels."""
    annotations: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Kubernetes annotations (kept, not used; e.g. kubectl's last-applied-configuration)."""


# ---------------------------------------------------------------------------------------------
# Label selectors (Kubernetes metav1.LabelSelector)
# ---------------------------------------------------------------------------------------------


class LabelSelectorRequirement(_Model):
    """One requirement on a label: ``In``/``NotIn`` a set of values, ``Exists``/``DoesNotExist``."""

    key: StrictStr = Field(min_length=1, max_length=317)
    """The label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key relates to the values."""
    values: tuple[StrictStr, ...] = ()
    """Non-empty for In and NotIn, empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _values(self) -> "LabelSelectorRequirement":
        if self.operator in ("In", "NotIn") and not self.values:
            _raise(type(self).__name__, [_at(("values",), [], "values_required",
                                             f"operator {self.operator} needs at least one value")])
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            _raise(type(self).__name__, [_at(("values",), list(self.values), "values_forbidden",
                                             f"operator {self.operator} takes no values")])
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # NotIn: also true without the key


class LabelSelector(_Model):
    """A Kubernetes label selector: every matchLabels pair and every expression must hold; an
    empty selector selects everything."""

    match_labels: Annotated[dict[StrictStr, StrictStr], AfterValidator(_check_labels)] = Field(
        default_factory=dict)
    """Labels that must be present with exactly these values."""
    match_expressions: tuple[LabelSelectorRequirement, ...] = Field((), max_length=64)
    """Further requirements, all of which must hold."""

    def matches(self, labels: dict[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(e.matches(labels) for e in self.match_expressions))


# ---------------------------------------------------------------------------------------------
# AgentConfig
# ---------------------------------------------------------------------------------------------


class FibSpec(_Model):
    """Where and how the agent programs its kernel routes."""

    table: StrictInt = Field(254, ge=1, le=U32_MAX)
    """Kernel routing table (254 = main)."""
    protocol: Annotated[StrictInt, Field(ge=0, le=255), AfterValidator(_check_protocol)] = 201
    """rtm_protocol of our routes; 0-4 (kernel, boot, static ...) and numbers of known daemons are refused."""
    metric: StrictInt = Field(20, ge=0, le=U32_MAX)
    """Metric (priority) of our routes."""
    full_scan_seconds: StrictInt = Field(60, ge=1)
    """Period of the full kernel table scan that catches drift the route monitor missed."""
    stale_seconds: StrictInt = Field(120, ge=0)
    """After a restart, how long adopted routes wait for their sources before being swept."""


class AdminDistanceSpec(_Model):
    """Administrative distance per source kind: lower wins, 255 = never install."""

    connected: Distance = 0
    """Foreign kernel routes of proto kernel (interface subnets)."""
    kernel: Distance = 0
    """Other foreign kernel routes (boot, static, dhcp, other daemons)."""
    static: Distance = 1
    """Static routes of this configuration (a route's own distance overrides it)."""
    ebgp: Distance = 20
    """Routes learned over eBGP."""
    ibgp: Distance = 200
    """Routes learned over iBGP."""


class ApiSpec(_Model):
    """The local HTTP API (metrics, health, JSON for the CLI)."""

    address: IPAddress = "127.0.0.1"
    """Listen address."""
    port: StrictInt = Field(9180, ge=0, le=65535)
    """Listen port (0 = any free port)."""


class AgentConfigSpec(_Model):
    fib: FibSpec = Field(default_factory=FibSpec)
    """Kernel routing table settings."""
    admin_distance: AdminDistanceSpec = Field(default_factory=AdminDistanceSpec)
    """Administrative distance per source kind."""
    max_paths: StrictInt = Field(16, ge=1, le=256)
    """Largest number of equal candidates combined into one ECMP route."""
    protected_prefixes: tuple[IPPrefix, ...] = Field((), max_length=4096)
    """The node's own prefixes (pod CIDRs, pools, VIPs): routes from BGP peers equal to, inside
    or covering them are refused by the hijack guard."""
    api: ApiSpec = Field(default_factory=ApiSpec)
    """Local HTTP API."""
    service_cidrs: tuple[IPPrefix, ...] = Field((), max_length=16, alias="serviceCIDRs")
    """The cluster's Service CIDRs (kube-apiserver --service-cluster-ip-range): protected by the
    hijack guard, with the CIDRs of ServiceCIDR objects (networking.k8s.io/v1)."""


class AgentConfig(_Model):
    """Agent-wide settings; at most one per configuration."""

    api_version: Literal["routeagent.io/v1alpha1"] = API_VERSION
    kind: Literal["AgentConfig"] = "AgentConfig"
    metadata: Metadata
    spec: AgentConfigSpec = Field(default_factory=AgentConfigSpec)


# ---------------------------------------------------------------------------------------------
# StaticRoutes
# ---------------------------------------------------------------------------------------------

_LINK_LOCAL_V6 = ipaddress.ip_network("fe80::/10")


class NextHopSpec(_Model):
    """One next hop: a gateway, a device, or both."""

    gateway: Gateway | None = None
    """Gateway address; same family as the prefix."""
    device: InterfaceName | None = None
    """Outgoing interface; required with an IPv6 link-local gateway."""
    weight: StrictInt = Field(1, ge=1, le=256)
    """Relative weight among the next hops of an ECMP route."""

    @model_validator(mode="after")
    def _gateway_or_device(self) -> "NextHopSpec":
        if self.gateway is None and self.device is None:
            raise _error("next_hop_empty", "a next hop needs a gateway, a device or both")
        if (
            self.device is None
            and self.gateway is not None
            and ipaddress.ip_address(self.gateway) in _LINK_LOCAL_V6
        ):
            _raise(
                type(self).__name__,
                [_at(("gateway",), self.gateway, "link_local_without_device",
                     f"link-local gateway {self.gateway} needs a device: link-local addresses "
                     "are only unique per interface")],
            )
        return self

    def describe(self) -> str:
        parts = [f"via {self.gateway}" if self.gateway else "", f"dev {self.device}" if self.device else ""]
        return " ".join(p for p in parts if p)


class StaticRoute(_Model):
    """One static route: next hops (one or more, ECMP) or a blackhole."""

    prefix: IPPrefix
    """Destination network, IPv4 or IPv6, in CIDR notation without host bits."""
    next_hops: tuple[NextHopSpec, ...] = Field((), max_length=256)
    """Next hops; several make an ECMP route. Exclusive with blackhole."""
    distance: Distance | None = None
    """Administrative distance of this route; default: AgentConfig adminDistance.static."""
    blackhole: StrictBool = False
    """Drop the traffic (kernel blackhole route). Exclusive with nextHops."""

    @model_validator(mode="after")
    def _rules(self) -> "StaticRoute":
        errors: list[InitErrorDetails] = []
        if self.blackhole and self.next_hops:
            errors.append(_at(("blackhole",), True, "blackhole_with_next_hops",
                              "blackhole and nextHops are exclusive: a blackhole route has no next hops"))
        elif not self.blackhole and not self.next_hops:
            errors.append(_at(("nextHops",), [], "no_next_hops",
                              "a route needs nextHops, or blackhole: true"))
        net = ipaddress.ip_network(self.prefix)
        seen: dict[tuple[str | None, str | None], int] = {}
        for i, hop in enumerate(self.next_hops):
            if hop.gateway is not None:
                gw = ipaddress.ip_address(hop.gateway)
                if gw.version != net.version:
                    errors.append(_at(
                        ("nextHops", i, "gateway"), hop.gateway, "gateway_family",
                        f"IPv{gw.version} gateway {hop.gateway} for IPv{net.version} prefix "
                        f"{self.prefix}: the families must match",
                    ))
            key = (hop.gateway, hop.device)
            if key in seen:
                errors.append(_at(
                    ("nextHops", i), hop.describe(), "duplicate_next_hop",
                    f"duplicate next hop {hop.describe()} (same as nextHops[{seen[key]}])",
                ))
            else:
                seen[key] = i
        _raise(type(self).__name__, errors)
        return self

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.prefix)


class StaticRoutesSpec(_Model):
    routes: tuple[StaticRoute, ...] = ()
    """The routes; each prefix at most once per object."""
    node_selector: LabelSelector | None = None
    """The nodes that install these routes (their Node labels); unset: every node."""

    @model_validator(mode="after")
    def _unique_prefixes(self) -> "StaticRoutesSpec":
        errors: list[InitErrorDetails] = []
        seen: dict[str, int] = {}
        for i, route in enumerate(self.routes):
            if route.prefix in seen:
                errors.append(_at(("routes", i, "prefix"), route.prefix, "duplicate_prefix",
                                  f"duplicate prefix {route.prefix} (already in routes[{seen[route.prefix]}])"))
            else:
                seen[route.prefix] = i
        _raise(type(self).__name__, errors)
        return self


class StaticRoutes(_Model):
    """A named set of static routes; their origin is ``static/<metadata.name>``."""

    api_version: Literal["routeagent.io/v1alpha1"] = API_VERSION
    kind: Literal["StaticRoutes"] = "StaticRoutes"
    metadata: Metadata
    spec: StaticRoutesSpec


Resource = Union[AgentConfig, StaticRoutes]

KINDS: dict[str, type[AgentConfig] | type[StaticRoutes]] = {
    "AgentConfig": AgentConfig,
    "StaticRoutes": StaticRoutes,
}


# ---------------------------------------------------------------------------------------------
# The whole configuration
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conflict:
    """A rule between objects broken by ``objects[index]`` (it clashes with ``objects[first]``)."""

    index: int
    first: int
    field: str  # dotted path in the offending object
    message: str


SINGLETON_KINDS = ("AgentConfig", "BgpSpeaker")


def find_conflicts(objects: Sequence[Any]) -> list[Conflict]:
    """Rules between objects: at most one AgentConfig and one BgpSpeaker; no two objects of the
    same kind and name; no two BgpPeers for one address; a peer's importPolicy must exist."""
    conflicts: list[Conflict] = []
    single_at: dict[str, int] = {}
    seen: dict[tuple[str, str], int] = {}
    peers: dict[str, int] = {}
    for i, obj in enumerate(objects):
        if obj.kind in SINGLETON_KINDS:
            if obj.kind in single_at:
                conflicts.append(Conflict(i, single_at[obj.kind], "kind", f"at most one {obj.kind} is allowed"))
                continue
            single_at[obj.kind] = i
        key = (obj.kind, obj.metadata.name)
        if key in seen:
            conflicts.append(Conflict(i, seen[key], "metadata.name",
                                      f"duplicate {obj.kind}/{obj.metadata.name}"))
        else:
            seen[key] = i
        if obj.kind == "BgpPeer" and obj.spec.node_selector is None:
            # peers selecting nodes may share an address (one anycast ToR address per rack):
            # checked again among the peers of one node (`Config.for_node`)
            addr = obj.spec.peer_address
            if addr in peers:
                conflicts.append(Conflict(i, peers[addr], "spec.peerAddress",
                                          f"another BgpPeer already has peerAddress {addr}"))
            else:
                peers[addr] = i
    policies = {o.metadata.name: i for i, o in enumerate(objects) if o.kind == "RoutePolicy"}
    for i, obj in enumerate(objects):
        if obj.kind != "BgpPeer":
            continue
        for field, name in (("importPolicy", obj.spec.import_policy), ("exportPolicy", obj.spec.export_policy)):
            if name is not None and name not in policies and name not in BUILTIN_POLICIES:
                known = ", ".join(sorted([*policies, *BUILTIN_POLICIES]))
                conflicts.append(Conflict(i, i, f"spec.{field}",
                                          f"no RoutePolicy named {name!r} (known: {known})"))
    return conflicts


class Config(_Model):
    """The whole validated configuration: agent settings and every StaticRoutes object."""

    agent: AgentConfigSpec = Field(default_factory=AgentConfigSpec)
    """The AgentConfig spec (all defaults when there is no AgentConfig)."""
    static: tuple[StaticRoutes, ...] = ()
    """StaticRoutes objects, in the order read."""
    peers: tuple[Any, ...] = ()
    """BgpPeer objects (agent.speaker.models), in the order read."""
    policies: tuple[Any, ...] = ()
    """RoutePolicy objects (agent.policy_models)."""
    speaker: Any = None
    """The BgpSpeaker object, or None (defaults)."""
    adverts: tuple[Any, ...] = ()
    """Advertisement objects (agent.export.models): what this node owns and may announce."""

    @model_validator(mode="after")
    def _unique_static_names(self) -> "Config":
        for c in find_conflicts(self.static):
            raise _error("duplicate_object", c.message)
        return self

    @classmethod
    def from_objects(cls, objects: Iterable[Resource]) -> "Config":
        """Build from resources; ValueError lists every broken rule between objects."""
        objects = list(objects)
        conflicts = find_conflicts(objects)
        if conflicts:
            raise ValueError("; ".join(
                f"{objects[c.index].kind}/{objects[c.index].metadata.name}: {c.message}" for c in conflicts
            ))
        agents = [o for o in objects if isinstance(o, AgentConfig)]
        speakers = [o for o in objects if o.kind == "BgpSpeaker"]
        return cls(
            agent=agents[0].spec if agents else AgentConfigSpec(),
            static=tuple(o for o in objects if isinstance(o, StaticRoutes)),
            peers=tuple(o for o in objects if o.kind == "BgpPeer"),
            policies=tuple(o for o in objects if o.kind == "RoutePolicy"),
            speaker=speakers[0] if speakers else None,
            adverts=tuple(o for o in objects if o.kind == "Advertisement"),
        )


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """What node-selecting configuration needs to know about the node it runs on."""

    name: str
    labels: Any = ()  # Mapping[str, str]
    ipv4: str | None = None  # default router id


def _selected(obj, labels) -> bool:
    sel = getattr(obj.spec, "node_selector", None)
    return sel is None or sel.matches(labels)


def for_node(config: Config, node: NodeIdentity) -> Config:
    """The configuration as it applies on `node`: objects whose nodeSelector does not match its
    labels left out, BgpPeer overrides applied and router ids defaulted to the node's IPv4
    address. ValueError names every peer that is still without a router id or that clashes."""
    labels = dict(node.labels)
    peers = []
    problems = []
    for p in config.peers:
        if not _selected(p, labels):
            continue
        spec = p.spec.for_node(node.name, node.ipv4)
        if spec.router_id is None:
            problems.append(f"BgpPeer/{p.metadata.name}: spec.routerId: unset, and node {node.name} "
                            "has no IPv4 address to default to: set routerId or a nodeOverride")
        peers.append(p.model_copy(update={"spec": spec}))
    seen: dict[str, str] = {}
    for p in peers:
        other = seen.setdefault(p.spec.peer_address, p.metadata.name)
        if other != p.metadata.name:
            problems.append(f"BgpPeer/{p.metadata.name}: spec.peerAddress: BgpPeer/{other} already has "
                            f"peerAddress {p.spec.peer_address} on node {node.name}")
    if problems:
        raise ValueError("; ".join(problems))
    return config.model_copy(update={
        "peers": tuple(peers),
        "static": tuple(o for o in config.static if _selected(o, labels)),
        "adverts": tuple(o for o in config.adverts if _selected(o, labels)),
    })


# ---------------------------------------------------------------------------------------------
# Pure helpers: configuration -> model values
# ---------------------------------------------------------------------------------------------


def fib_settings(config: Config) -> FibSettings:
    fib = config.agent.fib
    return FibSettings(table=fib.table, protocol=fib.protocol, metric=fib.metric)


def distances(config: Config) -> dict[SourceKind, int]:
    ad = config.agent.admin_distance
    return {
        SourceKind.CONNECTED: ad.connected,
        SourceKind.KERNEL: ad.kernel,
        SourceKind.STATIC: ad.static,
        SourceKind.EBGP: ad.ebgp,
        SourceKind.IBGP: ad.ibgp,
    }


def static_candidates(config: Config) -> dict[tuple[Prefix, Origin], Candidate]:
    """Every static route as a RIB candidate, keyed by (prefix, origin ``static/<name>``)."""
    default = config.agent.admin_distance.static
    out: dict[tuple[Prefix, Origin], Candidate] = {}
    for obj in config.static:
        origin = intern(Origin(SourceKind.STATIC, obj.metadata.name))
        for route in obj.spec.routes:
            distance = default if route.distance is None else route.distance
            if route.blackhole:
                cand = Candidate(origin, distance, (), RouteType.BLACKHOLE)
            else:
                hops = nexthops(*(
                    NextHop(
                        gateway=canonical_address(h.gateway) if h.gateway else None,
                        dev=h.device,
                        weight=h.weight,
                    )
                    for h in route.next_hops
                ))
                cand = Candidate(origin, distance, hops)
            out[(Prefix.parse(route.prefix), origin)] = intern(cand)
    return out
