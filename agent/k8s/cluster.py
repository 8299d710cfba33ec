"""What the agent knows of its cluster: configuration objects, Nodes, Services, service CIDRs.

DOC: pure logic, owned by the agent's core task, fed with the reflectors' `Batch`es
(`agent.k8s.reflector`) and asked three things:

* `config()`: the configuration as it applies on this node. Every routeagent.io object is
  validated on its own with the same models and messages as a file (`agent.config.loader`;
  a problem reads ``BgpPeer/tor (resourceVersion 4711): spec.peerAS: ...``); an
  invalid object is reported (`problems`, with the field and the reason) and its **last good
  version keeps running** (none: it is left out), so one bad `kubectl apply` never takes the
  node's routing down. The objects are then joined (`Config.from_objects`: singletons, names,
  policy references) and resolved for this node (`agent.config.for_node`: nodeSelector over
  the Node's labels, per-node overrides, router id from its IPv4 InternalIP). A failure there is
  raised (ValueError) and the caller keeps the previous configuration.
* `expand(config)`: the Advertisements whose prefixes come from the cluster filled in:
  ``type: podCIDR`` without prefixes gets the Node's ``spec.podCIDRs``; ``type: service`` gets the
  VIPs its `ServiceSelection` selects on this node (`agent.k8s.services.ServiceVips`, which
  follows EndpointSlices for the Local traffic policies).
* `guard_inputs(config)`: what the import guard protects beyond the configuration: this node's
  pod CIDRs, every Service VIP of the cluster (whether this node advertises it or not: a route
  for a VIP from the fabric would pull the traffic kube-proxy serves locally away), the service
  CIDRs (``AgentConfig spec.serviceCIDRs`` and ServiceCIDR objects); and, apart, the other nodes'
  pod CIDRs (their exact route is accepted, more specifics are not).

`apply(batch)` returns a `Change` saying which of the three may have changed, so the caller
does only the work needed (a Service change re-expands the advertisements, it does not
re-validate the configuration). `synced` tells when every reflector has finished its first list:
the agent's restart gate waits for it, so nothing is withdrawn or deleted before.

Last-known-good snapshot (`agent.k8s.snapshot`): `snapshot()` is the state a restart needs when
the API server does not answer (valid objects, this Node, the service advertisements' prefixes,
the cluster's share of the guard); `restore(state)` seeds a fresh state with it. The seed stands
in for each resource until that resource's first live list arrives (its objects are then
replaced by the list's, so what was deleted meanwhile goes too); the Service VIPs and the guard's
cluster inputs come from the seed until every resource is listed (a VIP of an
``externalTrafficPolicy: Local`` Service needs the EndpointSlices too), and then the seed is
dropped: the live view has taken over (`seeded` is False again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from ..config.resolve import Config, NodeIdentity, for_node
from ..config.loader import ConfigError, Problem, _Loader
from ..config.kinds import KINDS
from ..core.model import Prefix
from .objects import NodeInfo, node_from
from .services import Selection, ServiceVips

GROUP, VERSION = "routeagent.io", "v1alpha1"
CONFIG_RESOURCES = {  # plural -> kind
    "agentconfigs": "AgentConfig", "staticroutes": "StaticRoutes", "bgppeers": "BgpPeer",
    "bgpspeakers": "BgpSpeaker", "routepolicies": "RoutePolicy", "advertisements": "Advertisement", "bfdprofiles": "BfdProfile",
}
assert set(CONFIG_RESOURCES.values()) == set(KINDS)
CLUSTER_RESOURCES = ("nodes", "services", "endpointslices", "servicecidrs")
RESOURCES = (*CONFIG_RESOURCES, *CLUSTER_RESOURCES)


@dataclass(slots=True)
class Change:
    config: bool = False  # configuration objects or this node's labels/addresses
    adverts: bool = False  # pod CIDRs or VIPs of this node's advertisements
    guard: bool = False  # the cluster's share of the guard
    problems: bool = False  # the set of rejected objects changed (nothing else to recompute)

    def __bool__(self) -> bool:
        return self.config or self.adverts or self.guard or self.problems


@dataclass(frozen=True, slots=True)
class Seed:
    """What a restored snapshot stands in for until every resource is listed live."""

    vips: dict = field(default_factory=dict)  # Advertisement name -> its prefixes on this node
    all_vips: frozenset = frozenset()
    service_cidrs: tuple = ()  # of ServiceCIDR objects
    other_pod_cidrs: tuple = ()


def object_label(data: dict) -> str:
    """``Kind/name (resourceVersion N)``: where a problem of a watched object is."""
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    label = f"{data.get('kind') or '?'}/{meta.get('name') or '?'}"
    rv = meta.get("resourceVersion")
    return f"{label} (resourceVersion {rv})" if rv else label


def validate_object(data: dict) -> tuple[object | None, list[Problem]]:
    """One object as the API server sent it, through the file loader's checks and messages. The
    problems name the object and its resourceVersion instead of a file and line: the line of a
    document the agent re-serialised itself means nothing to an operator."""
    loader = _Loader()
    loader.text(yaml.safe_dump(data, sort_keys=False), "kubernetes")
    where = object_label(data)
    problems = [Problem("", where, p.field, p.message) for p in loader.problems]
    return (loader.objects[0][0] if loader.objects and not loader.problems else None), problems


class ClusterState:
    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self.nodes: dict[str, NodeInfo] = {}
        self.good: dict[tuple[str, str], object] = {}  # (kind, name) -> last valid object
        self.problems: dict[tuple[str, str], list[Problem]] = {}
        self.vips = ServiceVips(node_name)
        self.service_cidrs: dict[str, tuple[str, ...]] = {}
        self.synced_resources: set[str] = set()
        self._selections: dict[str, Selection] = {}
        self._guard_cache = None
        self._expanded: dict[str, tuple] = {}  # name -> (advert, prefixes, expanded advert)
        self._parsed: dict[str, Prefix] = {}
        self.seed: Seed | None = None  # a restored snapshot, until the live view takes over
        self._seeded: set[str] = set()  # resources whose objects still come from the seed

    # ---- input ----
    def apply(self, batch) -> Change:
        res = batch.resource
        change = Change()
        if batch.synced and res not in self.synced_resources:
            if res in self._seeded:  # the first live list replaces what the seed held
                self._unseed(res)
                change.config = True
            self.synced_resources.add(res)
        if res in CONFIG_RESOURCES:
            kind = CONFIG_RESOURCES[res]
            for key in batch.deletes:
                name = key.rpartition("/")[2]
                self.good.pop((kind, name), None)
                change.problems |= self.problems.pop((kind, name), None) is not None
                change.config = True
            for raw in batch.upserts:
                config, problems = self._config_object(kind, raw)
                change.config |= config
                change.problems |= problems
            change.config |= batch.synced  # the first full list completes the configuration
        elif res == "nodes":
            me = self.nodes.get(self.node_name)
            for key in batch.deletes:
                self.nodes.pop(key.rpartition("/")[2], None)
            for node in batch.upserts:
                self.nodes[node.name] = node
            new = self.nodes.get(self.node_name)
            if new != me:
                change.config |= me is None or new is None or (dict(me.labels), me.internal_ipv4) != (
                    dict(new.labels), new.internal_ipv4)
                change.adverts |= (me and me.pod_cidrs) != (new and new.pod_cidrs)
            change.guard = True
        elif res == "services":
            changed: set[str] = set()
            for key in batch.deletes:
                changed |= self.vips.update_service(key, None)
            for svc in batch.upserts:
                changed |= self.vips.update_service(svc.key, svc)
            change.adverts = bool(changed)
            change.guard = True
        elif res == "endpointslices":
            changed = set()
            for key in batch.deletes:
                changed |= self.vips.update_slice(key, None)
            for sl in batch.upserts:
                changed |= self.vips.update_slice(sl.key, sl)
            change.adverts = bool(changed)
        elif res == "servicecidrs":
            for key in batch.deletes:
                self.service_cidrs.pop(key.rpartition("/")[2], None)
            for sc in batch.upserts:
                self.service_cidrs[sc.name] = sc.cidrs
            change.guard = True
        if self.seed is not None and self.synced:  # the live view is complete: it takes over
            self.seed = None
            change.config = change.adverts = change.guard = True
        return change

    def _unseed(self, res: str) -> None:
        self._seeded.discard(res)
        if res == "nodes":
            self.nodes.clear()
            return
        kind = CONFIG_RESOURCES[res]
        for key in [k for k in self.good if k[0] == kind]:
            del self.good[key]

    # ---- the last-known-good snapshot ----
    @property
    def seeded(self) -> bool:
        return self.seed is not None

    def snapshot(self) -> dict | None:
        """This node's view for a restart without the API server; None unless it is complete
        and live (a seed is never written back as if it were confirmed)."""
        node = self.node
        if self.seed is not None or node is None or not self.synced:
            return None
        try:
            self.config()  # the service selections of the current configuration
        except ConfigError:
            pass  # the last good ones
        return {
            "objects": [o.model_dump(mode="json", by_alias=True, exclude_unset=True)
                        for _, o in sorted(self.good.items())],
            "node": {"labels": dict(node.labels), "podCIDRs": list(node.pod_cidrs),
                     "addresses": [list(a) for a in node.addresses]},
            "vips": {name: list(self.vips.vips(name)) for name in sorted(self._selections)},
            "allVips": sorted(self.vips.all_vips()),
            "serviceCIDRs": sorted({c for cidrs in self.service_cidrs.values() for c in cidrs}),
            "otherPodCIDRs": sorted({c for n in self.nodes.values() if n.name != self.node_name
                                     for c in n.pod_cidrs}),
        }

    def restore(self, state: dict) -> list[str]:
        """Seed the resources not listed live yet from a snapshot; the objects that no longer
        validate are left out and named in the returned list. ValueError if it is malformed."""
        try:
            raw_node = state["node"]
            node = node_from({"metadata": {"name": self.node_name, "labels": raw_node["labels"]},
                              "spec": {"podCIDRs": raw_node["podCIDRs"]},
                              "status": {"addresses": [{"type": t, "address": a}
                                                       for t, a in raw_node["addresses"]]}})
            seed = Seed({str(k): tuple(map(str, v)) for k, v in state["vips"].items()},
                        frozenset(map(str, state["allVips"])), tuple(map(str, state["serviceCIDRs"])),
                        tuple(map(str, state["otherPodCIDRs"])))
            objects = list(state["objects"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed snapshot: {type(exc).__name__}: {exc}") from None
        left_out = []
        kinds = {kind: plural for plural, kind in CONFIG_RESOURCES.items()}
        for raw in objects:
            plural = kinds.get(raw.get("kind")) if isinstance(raw, dict) else None
            if plural is None or plural in self.synced_resources:
                continue
            obj, problems = validate_object(raw)
            if obj is None:
                left_out.extend(str(p) for p in problems)
            else:
                self.good[(obj.kind, obj.metadata.name)] = obj
        self._seeded = {p for p in CONFIG_RESOURCES if p not in self.synced_resources}
        if "nodes" not in self.synced_resources and node is not None:
            self.nodes[self.node_name] = node
            self._seeded.add("nodes")
        self.seed = seed
        return left_out

    def _config_object(self, kind: str, raw: dict) -> tuple[bool, bool]:
        """(the configuration changed, the object's problems changed)."""
        name = str(raw.get("metadata", {}).get("name", ""))
        obj, problems = validate_object(raw)
        before = self.problems.get((kind, name))
        if obj is None:
            self.problems[(kind, name)] = problems
            return False, before != problems  # the last good version (if any) stays
        self.problems.pop((kind, name), None)
        if self.good.get((kind, name)) == obj:
            return False, before is not None  # only server metadata or status changed
        self.good[(kind, name)] = obj
        return True, before is not None

    # ---- state ----
    @property
    def node(self) -> NodeInfo | None:
        return self.nodes.get(self.node_name)

    @property
    def config_synced(self) -> bool:
        """The configuration can be built from live objects: every config kind listed and this
        Node seen."""
        return self.node is not None and self.synced_resources.issuperset((*CONFIG_RESOURCES, "nodes"))

    @property
    def node_missing(self) -> bool:
        """Every Node is listed and this node's is not among them (a wrong NODE_NAME?)."""
        return "nodes" in self.synced_resources and self.node is None

    @property
    def synced(self) -> bool:
        return self.node is not None and self.synced_resources.issuperset(RESOURCES)

    def identity(self) -> NodeIdentity:
        node = self.node
        if node is None:
            return NodeIdentity(self.node_name)
        return NodeIdentity(self.node_name, dict(node.labels), node.internal_ipv4)

    def problem_lines(self) -> list[str]:
        return [str(p) for ps in self.problems.values() for p in ps]

    # ---- output ----
    def config(self) -> Config:
        """The configuration of this node; ConfigError when the objects do not fit together."""
        objects = sorted(self.good.values(), key=lambda o: (o.kind, o.metadata.name))
        try:
            config = for_node(Config.from_objects(objects), self.identity())
        except ValueError as exc:
            raise ConfigError([Problem("", "", "", str(exc))]) from None
        self._set_selections(config)
        return config

    def _set_selections(self, config: Config) -> None:
        sels = {}
        for adv in config.adverts:
            if adv.spec.type != "service":
                continue
            s = adv.spec.services
            if s is None:
                sels[adv.metadata.name] = Selection(selector=_match_all)
            else:
                sels[adv.metadata.name] = Selection(
                    selector=s.selector.matches, cluster_ip=s.cluster_ip, external_ips=s.external_ips,
                    lb_ingress=s.load_balancer_ingress, lb_classes=frozenset(s.load_balancer_classes))
        if sels != self._selections:
            self._selections = sels
            self.vips.set_selections(sels)

    def expand(self, config: Config) -> Config:
        """`config` with the cluster-given prefixes of its advertisements filled in."""
        node = self.node
        out = []
        for adv in config.adverts:
            spec = adv.spec
            if spec.type == "service":
                seed = self.seed
                prefixes = self.vips.vips(adv.metadata.name) if seed is None else seed.vips.get(
                    adv.metadata.name, ())
            elif spec.type == "podCIDR" and not spec.prefixes:
                prefixes = node.pod_cidrs if node is not None else ()
            else:
                out.append(adv)
                continue
            prefixes = tuple(prefixes)
            prev = self._expanded.get(adv.metadata.name)
            if prev is not None and prev[0] is adv and prev[1] is prefixes:
                out.append(prev[2])  # unchanged: the same object (the export side can tell)
                continue
            new = adv.model_copy(update={"spec": spec.model_copy(update={"prefixes": prefixes})})
            self._expanded[adv.metadata.name] = (adv, prefixes, new)
            out.append(new)
        return config.model_copy(update={"adverts": tuple(out)})

    def guard_inputs(self, config: Config) -> tuple[list[Prefix], list[Prefix]]:
        """(protected, other nodes' pod CIDRs) for the import guard. The same tuple object is
        returned while nothing it depends on changed (an EndpointSlice flap changes no VIP), so
        the caller can skip rebuilding the guard."""
        seed = self.seed
        vips = self.vips.all_vips() if seed is None else seed.all_vips  # one object until it changes
        node = self.node
        own = node.pod_cidrs if node is not None else ()
        if seed is None:
            service_cidrs = tuple(sorted(self.service_cidrs.items()))
            others_text = tuple(sorted({c for n in self.nodes.values() if n.name != self.node_name
                                        for c in n.pod_cidrs}))
        else:
            service_cidrs, others_text = (("snapshot", seed.service_cidrs),), seed.other_pod_cidrs
        key = (tuple(config.agent.service_cidrs), service_cidrs, own, others_text)
        cached = self._guard_cache
        if cached is not None and cached[0] is vips and cached[1] == key:
            return cached[2]
        parse = self._parse
        texts: set[str] = set(vips)
        texts.update(config.agent.service_cidrs)
        for _, cidrs in service_cidrs:
            texts.update(cidrs)
        texts.update(own)
        protected = [parse(t) for t in sorted(texts)]
        others = [parse(t) for t in others_text if t not in texts]
        result = (protected, others)
        self._guard_cache = (vips, key, result)
        return result

    def _parse(self, text: str) -> Prefix:
        p = self._parsed.get(text)
        if p is None:
            if len(self._parsed) > 500_000:
                self._parsed.clear()
            p = self._parsed[text] = Prefix.parse(text)
        return p

    def node_addresses(self) -> list[str]:
        """This Node's InternalIP/ExternalIP addresses (host routes only) for the guard."""
        node = self.node
        return list(node.ips) if node is not None else []


def _match_all(_labels) -> bool:
    return True
