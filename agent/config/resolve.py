"""Cross-object resolution: the whole configuration, the rules between objects, one node's view.

DOC: `Config` is the whole validated configuration (`Config.from_objects` checks the rules
between objects with `find_conflicts`: at most one AgentConfig and one BgpSpeaker, unique
kind/name, one BgpPeer per address, policies that exist). `for_node` turns it into the
configuration of one node (`NodeIdentity`): nodeSelectors applied, BgpPeer node overrides and
router ids resolved. The pure helpers `static_candidates`, `fib_settings` and `distances` turn it
into the value types of `agent.core.model` and `agent.fib.types`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from ..core.model import Candidate, NextHop, Origin, Prefix, RouteType, SourceKind, canonical_address, intern, nexthops
from ..fib.types import FibSettings
from ..policy.engine import BUILTIN_POLICIES
from .agentconfig import AgentConfig, AgentConfigSpec
from .base import Resource, _error, _Model
from .static import StaticRoutes



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
    same kind and name; no two BgpPeers for one address; a peer's importPolicy must exist; a
    BfdProfiles that exist; a
    passive peer has a localAddress unless the BgpSpeaker lists listen addresses; ttlSecurity
    only where every listening socket of the peer can enforce it (`_ttl_security_listeners`)."""
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
    conflicts += _passive_without_address(objects)
    conflicts += _ttl_security_listeners(objects)
    policies = {o.metadata.name: i for i, o in enumerate(objects) if o.kind == "RoutePolicy"}
    for i, obj in enumerate(objects):
        if obj.kind != "BgpPeer":
            continue
        for field, name in (("importPolicy", obj.spec.import_policy), ("exportPolicy", obj.spec.export_policy)):
            if name is not None and name not in policies and name not in BUILTIN_POLICIES:
                known = ", ".join(sorted([*policies, *BUILTIN_POLICIES]))
                conflicts.append(Conflict(i, i, f"spec.{field}",
                                          f"no RoutePolicy named {name!r} (known: {known})"))
    profiles = {o.metadata.name for o in objects if o.kind == "BfdProfile"}
    for i, obj in enumerate(objects):
        bfd = obj.spec.bfd if obj.kind == "BgpPeer" else None
        if bfd is not None and bfd.profile is not None and bfd.profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            conflicts.append(Conflict(i, i, "spec.bfd.profile", f"no BfdProfile named {bfd.profile!r} (known: {known})"))
    return conflicts


PASSIVE_NEEDS_ADDRESS = ("a passive peer needs localAddress: ExaBGP listens for it there only "
                         "(or list the listen addresses in BgpSpeaker spec.listenAddresses)")


def _passive_without_address(objects: Sequence[Any]) -> list[Conflict]:
    """Passive peers that leave the listen address open while no BgpSpeaker gives one (a
    nodeOverride giving the address counts: `for_node` checks the peers of each node)."""
    if any(o.kind == "BgpSpeaker" and o.spec.listen_addresses is not None for o in objects):
        return []
    return [Conflict(i, i, "spec.localAddress", PASSIVE_NEEDS_ADDRESS) for i, o in enumerate(objects)
            if o.kind == "BgpPeer" and o.spec.passive and o.spec.local_address is None
            and not any(n.local_address for n in o.spec.node_overrides)]


def _ttl_security_listeners(objects: Sequence[Any]) -> list[Conflict]:
    """GTSM needs a minimum TTL on every socket a peer's segments reach. ExaBGP 5.0.15 sets none
    on the shared listening sockets of BgpSpeaker listenAddresses (any peer may connect there),
    and one listening socket serves all passive peers of a local address: they must agree."""
    speaker = next((o for o in objects if o.kind == "BgpSpeaker"), None)
    shared = speaker is not None and bool(speaker.spec.listen_addresses)
    out, by_local = [], {}
    for i, o in enumerate(objects):
        if o.kind != "BgpPeer":
            continue
        if shared and o.spec.ttl_security is not None:
            out.append(Conflict(i, i, "spec.ttlSecurity",
                                "ttlSecurity needs BgpSpeaker listenAddresses unset or empty: ExaBGP "
                                "sets no minimum TTL on those shared listening sockets"))
        elif not shared and o.spec.passive and o.spec.local_address is not None:
            first = by_local.setdefault(o.spec.local_address, i)
            if objects[first].spec.ttl_security != o.spec.ttl_security:
                out.append(Conflict(i, first, "spec.ttlSecurity",
                                    f"passive peers listening on {o.spec.local_address} share one socket "
                                    "and its minimum TTL: they must have the same ttlSecurity"))
    return out


class Config(_Model):
    """The whole validated configuration: agent settings and every StaticRoutes object."""

    agent: AgentConfigSpec = Field(default_factory=AgentConfigSpec)
    """The AgentConfig spec (all defaults when there is no AgentConfig)."""
    static: tuple[StaticRoutes, ...] = ()
    """StaticRoutes objects, in the order read."""
    peers: tuple[Any, ...] = ()
    """BgpPeer objects (`agent.config.bgp`), in the order read."""
    policies: tuple[Any, ...] = ()
    """RoutePolicy objects (`agent.config.policy`)."""
    speaker: Any = None
    """The BgpSpeaker object, or None (defaults)."""
    adverts: tuple[Any, ...] = ()
    """Advertisement objects (`agent.config.advertisement`): what this node owns and may announce."""
    bfd_profiles: tuple[Any, ...] = ()
    """BfdProfile objects (`agent.config.bfd`), named by BgpPeer spec.bfd.profile."""

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
            bfd_profiles=tuple(o for o in objects if o.kind == "BfdProfile"),
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
    listen_open = config.speaker is None or config.speaker.spec.listen_addresses is None
    peers = []
    problems = []
    for p in config.peers:
        if not _selected(p, labels):
            continue
        spec = p.spec.for_node(node.name, node.ipv4)
        if spec.router_id is None:
            problems.append(f"BgpPeer/{p.metadata.name}: spec.routerId: unset, and node {node.name} "
                            "has no IPv4 address to default to: set routerId or a nodeOverride")
        if spec.passive and spec.local_address is None and listen_open:
            problems.append(f"BgpPeer/{p.metadata.name}: spec.localAddress: unset on node {node.name}: "
                            + PASSIVE_NEEDS_ADDRESS)
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
    return FibSettings(table=fib.table, protocol=fib.protocol, metric=fib.metric,
                       nexthop_objects=fib.nexthop_objects)


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
