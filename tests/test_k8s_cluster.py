"""ClusterState: configuration objects, Nodes, Services and service CIDRs -> config, adverts, guard.

Batches are built as the reflectors hand them over: raw API dicts (camelCase, with server metadata
and status) for the routeagent.io kinds, transformed value types for the cluster resources.
"""

from __future__ import annotations

import pytest

from agent.config.loader import ConfigError
from agent.k8s.cluster import CLUSTER_RESOURCES, CONFIG_RESOURCES, RESOURCES, ClusterState
from agent.k8s.objects import node_from, service_cidrs_from, service_from, slice_from
from agent.k8s.reflector import Batch
from agent.core.model import Prefix

ME = "node-a"
API = "routeagent.io/v1alpha1"
PLURAL = {kind: plural for plural, kind in CONFIG_RESOURCES.items()}
P = Prefix.parse


# --- builders: API JSON as the server sends it ---------------------------------------------------

def crd(kind, name, spec, *, rv="1", labels=None, status=None, generation=1):
    meta = {"name": name, "uid": f"uid-{kind}-{name}", "resourceVersion": rv, "generation": generation,
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": API,
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]}
    if labels:
        meta["labels"] = dict(labels)
    obj = {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def peer(name, address="10.0.0.1", *, selector=None, router_id=None, overrides=None, labels=None, **extra):
    spec = {"peerAddress": address, "peerAS": 65001, "localAS": 65000, "importPolicy": "acceptAll", **extra}
    if router_id is not None:
        spec["routerId"] = router_id
    if selector is not None:
        spec["nodeSelector"] = selector
    if overrides is not None:
        spec["nodeOverrides"] = overrides
    return crd("BgpPeer", name, spec, labels=labels)


def advert(name, type, *, prefixes=None, services=None, selector=None):
    spec = {"type": type}
    if prefixes is not None:
        spec["prefixes"] = prefixes
    if services is not None:
        spec["services"] = services
    if selector is not None:
        spec["nodeSelector"] = selector
    return crd("Advertisement", name, spec)


def static(name, prefix="192.0.2.0/24", gateway="10.0.0.1", *, selector=None):
    spec = {"routes": [{"prefix": prefix, "nextHops": [{"gateway": gateway}]}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    return crd("StaticRoutes", name, spec)


def node_obj(name=ME, *, labels=None, pod_cidrs=(), ipv4="192.168.1.10", rv="1"):
    addresses = [{"type": "Hostname", "address": name}]
    if ipv4 is not None:
        addresses.append({"type": "InternalIP", "address": ipv4})
    return node_from({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": name, "resourceVersion": rv,
                                   "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                      "spec": {"podCIDRs": list(pod_cidrs)} if pod_cidrs else {},
                      "status": {"addresses": addresses}})


def svc(name, *, cluster="10.96.0.10", external=(), lb=(), lb_class=None, etp=None, type=None, labels=None,
        ns="default"):
    spec = {"clusterIP": cluster, "clusterIPs": [cluster], "ports": [{"port": 80, "protocol": "TCP"}]}
    if type is not None:
        spec["type"] = type
    if external:
        spec["externalIPs"] = list(external)
    if lb_class is not None:
        spec["loadBalancerClass"] = lb_class
    if etp is not None:
        spec["externalTrafficPolicy"] = etp
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "5"}
    if labels:
        meta["labels"] = dict(labels)
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {}}
    if lb:
        obj["status"] = {"loadBalancer": {"ingress": [{"ip": ip} for ip in lb]}}
    return service_from(obj)


def eps(name, service, nodes, ns="default"):
    return slice_from({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": service}},
        "endpoints": [{"addresses": [f"10.244.9.{i + 1}"], "conditions": {"ready": True}, "nodeName": n}
                      for i, n in enumerate(nodes)]})


def scidr(name, *cidrs):
    return service_cidrs_from({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                               "metadata": {"name": name}, "spec": {"cidrs": list(cidrs)}})


def crd_batch(*objs, deletes=(), synced=False, resource=None):
    if resource is None:
        kinds = {o["kind"] for o in objs}
        assert len(kinds) == 1
        resource = PLURAL[kinds.pop()]
    return Batch(resource, tuple(objs), tuple(deletes), synced)


def batch(resource, *upserts, deletes=(), synced=False):
    return Batch(resource, tuple(upserts), tuple(deletes), synced)


def synced_state(*objs, node=None, nodes=(), services=(), slices=(), cidrs=()) -> ClusterState:
    """A state after every reflector's first list: `objs` (raw CRDs) grouped by kind."""
    st = ClusterState(ME)
    by_res: dict[str, list] = {r: [] for r in CONFIG_RESOURCES}
    for o in objs:
        by_res[PLURAL[o["kind"]]].append(o)
    for res, items in by_res.items():
        st.apply(Batch(res, tuple(items), (), True))
    st.apply(batch("nodes", node if node is not None else node_obj(), *nodes, synced=True))
    st.apply(batch("services", *services, synced=True))
    st.apply(batch("endpointslices", *slices, synced=True))
    st.apply(batch("servicecidrs", *cidrs, synced=True))
    return st


def names(objs) -> list[str]:
    return [o.metadata.name for o in objs]


# --- synced --------------------------------------------------------------------------------------

def test_resources():
    assert set(RESOURCES) == set(CONFIG_RESOURCES) | set(CLUSTER_RESOURCES)
    assert set(CONFIG_RESOURCES) == {"agentconfigs", "staticroutes", "bgppeers", "bgpspeakers",
                                     "routepolicies", "advertisements", "bfdprofiles"}


def test_synced_only_after_every_first_list_and_own_node():
    st = ClusterState(ME)
    for res in CONFIG_RESOURCES:
        assert not st.config_synced
        st.apply(batch(res, synced=True))
    assert not st.config_synced and not st.synced  # nodes not listed yet
    # a partial nodes batch (watch event) with another node: not synced
    st.apply(batch("nodes", node_obj("node-b")))
    assert not st.config_synced
    # nodes listed, but this node is not among them
    st.apply(batch("nodes", synced=True))
    assert "nodes" in st.synced_resources and not st.config_synced
    st.apply(batch("nodes", node_obj()))
    assert st.config_synced and not st.synced
    st.apply(batch("services", synced=True))
    st.apply(batch("endpointslices", synced=True))
    assert not st.synced
    st.apply(batch("servicecidrs", synced=True))  # e.g. the empty batch of a 404
    assert st.synced
    # this node deleted: neither any more
    st.apply(batch("nodes", deletes=(ME,)))
    assert not st.config_synced and not st.synced


def test_own_node_first_then_lists():
    st = ClusterState(ME)
    st.apply(batch("nodes", node_obj(), synced=True))
    assert not st.config_synced
    for res in CONFIG_RESOURCES:
        st.apply(batch(res, synced=True))
    assert st.config_synced


def test_config_synced_batch_flags_config_change():
    st = ClusterState(ME)
    change = st.apply(batch("agentconfigs", synced=True))
    assert change.config  # the first full list completes the configuration, even empty
    change = st.apply(batch("agentconfigs"))
    assert not change


def test_identity():
    st = ClusterState(ME)
    assert st.identity().name == ME and st.identity().ipv4 is None
    st.apply(batch("nodes", node_obj(labels={"zone": "a"})))
    ident = st.identity()
    assert ident.ipv4 == "192.168.1.10" and ident.labels["zone"] == "a"


# --- validation: last good version keeps running ------------------------------------------------

def test_invalid_object_reported_and_last_good_kept():
    good = peer("tor", holdTime=30)
    st = synced_state(good)
    assert st.problem_lines() == []
    assert st.config().peers[0].spec.hold_time == 30
    bad = peer("tor", holdTime=2)
    bad["metadata"]["resourceVersion"] = "2"
    change = st.apply(crd_batch(bad))
    assert not change.config  # nothing that runs changed
    lines = st.problem_lines()
    assert len(lines) == 1
    assert "BgpPeer/tor" in lines[0] and "spec.holdTime" in lines[0] and "at least 3 seconds" in lines[0]
    assert st.config().peers[0].spec.hold_time == 30  # the last good version
    # fixed: problem gone, new version used
    fixed = peer("tor", holdTime=60)
    assert st.apply(crd_batch(fixed)).config
    assert st.problem_lines() == []
    assert st.config().peers[0].spec.hold_time == 60


def test_invalid_object_without_good_version_is_left_out():
    st = synced_state(peer("tor"))
    bad = static("uplinks")
    bad["spec"]["routes"][0]["nextHops"][0]["gateway"] = "not-an-ip"
    bad["spec"]["routes"][0]["nexthops"] = []  # unknown field too
    st.apply(crd_batch(bad))
    lines = st.problem_lines()
    assert any("StaticRoutes/uplinks" in line and "spec.routes[0].nextHops[0].gateway" in line
               and "invalid address" in line for line in lines)
    assert any("spec.routes[0].nexthops" in line and "did you mean 'nextHops'" in line for line in lines)
    assert st.config().static == ()
    assert names(st.config().peers) == ["tor"]


def test_unknown_field_in_crd_object_reported():
    obj = peer("tor")
    obj["spec"]["peer_as"] = 65009
    st = synced_state(obj)
    lines = st.problem_lines()
    assert len(lines) == 1 and "spec.peer_as" in lines[0] and "peerAS" in lines[0]
    assert st.config().peers == ()


def test_delete_drops_good_version_and_problems():
    st = synced_state(peer("tor"))
    bad = peer("tor", holdTime=1)
    st.apply(crd_batch(bad))
    assert st.problem_lines()
    change = st.apply(Batch("bgppeers", (), ("tor",), False))
    assert change.config
    assert st.problem_lines() == [] and st.config().peers == ()


def test_status_only_change_is_no_config_change():
    obj = peer("tor", holdTime=30)
    st = synced_state(obj)
    again = peer("tor", holdTime=30)
    again["metadata"]["resourceVersion"] = "99"
    again["metadata"]["managedFields"][0]["manager"] = "route-agent"
    again["status"] = {"nodes": [{"name": ME, "state": "established"}]}
    change = st.apply(crd_batch(again))
    assert not change.config and not change
    assert st.problem_lines() == []
    # a spec change is one
    changed = peer("tor", holdTime=31)
    assert st.apply(crd_batch(changed)).config


def test_label_change_of_crd_object_is_a_config_change():
    st = synced_state(peer("tor"))
    assert st.apply(crd_batch(peer("tor", labels={"role": "tor"}))).config


# --- conflicts between objects ------------------------------------------------------------------

def test_two_agent_configs_raise_config_error():
    a = crd("AgentConfig", "one", {"maxPaths": 4})
    b = crd("AgentConfig", "two", {"maxPaths": 8})
    st = synced_state(a)
    assert st.config().agent.max_paths == 4
    st.apply(crd_batch(b))
    with pytest.raises(ConfigError) as exc:
        st.config()
    assert "at most one AgentConfig" in str(exc.value)
    # either object alone is valid: the problem is between them, not in one
    assert st.problem_lines() == []
    st.apply(Batch("agentconfigs", (), ("one",), False))
    assert st.config().agent.max_paths == 8


def test_unknown_policy_reference_raises():
    st = synced_state(peer("tor", importPolicy="nope"))
    with pytest.raises(ConfigError, match="no RoutePolicy named 'nope'"):
        st.config()


# --- nodeSelector, overrides, router id ---------------------------------------------------------

RACK1 = {"matchLabels": {"rack": "r1"}}
RACK2 = {"matchLabels": {"rack": "r2"}}


def test_node_selector_filters_peers_adverts_static():
    st = synced_state(
        peer("tor1", "10.0.0.1", selector=RACK1), peer("tor2", "10.0.0.2", selector=RACK2), peer("rr", "10.0.0.3"),
        advert("pool1", "pool", prefixes=["198.51.100.0/24"], selector=RACK1),
        advert("pool2", "pool", prefixes=["203.0.113.0/24"], selector=RACK2),
        static("s1", selector=RACK1), static("s2", "192.0.3.0/24", selector=RACK2), static("all", "192.0.4.0/24"),
        node=node_obj(labels={"rack": "r1"}))
    c = st.config()
    assert names(c.peers) == ["rr", "tor1"]
    assert names(c.adverts) == ["pool1"]
    assert names(c.static) == ["all", "s1"]
    # the selector is resolved away in the node's config
    assert all(p.spec.node_selector is None for p in c.peers)

    # the Node moves to rack 2: a config change, the other objects are selected
    change = st.apply(batch("nodes", node_obj(labels={"rack": "r2"}, rv="2")))
    assert change.config
    c = st.config()
    assert names(c.peers) == ["rr", "tor2"]
    assert names(c.adverts) == ["pool2"]
    assert names(c.static) == ["all", "s2"]


def test_node_selector_match_expressions():
    sel = {"matchExpressions": [{"key": "node-role.kubernetes.io/edge", "operator": "DoesNotExist"}]}
    st = synced_state(peer("tor", selector=sel), node=node_obj())
    assert names(st.config().peers) == ["tor"]
    st.apply(batch("nodes", node_obj(labels={"node-role.kubernetes.io/edge": ""})))
    assert st.config().peers == ()


def test_node_changes_that_do_not_touch_config():
    st = synced_state(peer("tor"), node=node_obj(labels={"rack": "r1"}))
    # another node: no config change (guard: its pod CIDRs)
    change = st.apply(batch("nodes", node_obj("node-b", pod_cidrs=["10.244.2.0/24"])))
    assert not change.config and not change.adverts and change.guard
    # same labels and address, same pod CIDRs, new resourceVersion: nothing
    change = st.apply(batch("nodes", node_obj(labels={"rack": "r1"}, rv="7")))
    assert not change.config and not change.adverts
    # pod CIDRs allocated: adverts, not config
    change = st.apply(batch("nodes", node_obj(labels={"rack": "r1"}, pod_cidrs=["10.244.1.0/24"])))
    assert change.adverts and not change.config
    # the InternalIP changes: the default router id changes
    change = st.apply(batch("nodes", node_obj(labels={"rack": "r1"}, pod_cidrs=["10.244.1.0/24"],
                                              ipv4="192.168.1.11")))
    assert change.config and not change.adverts
    assert st.config().peers[0].spec.router_id == "192.168.1.11"


def test_router_id_defaults_to_node_ipv4():
    st = synced_state(peer("tor"), peer("tor-set", "10.0.0.2", router_id="10.9.9.9"))
    by = {p.metadata.name: p.spec for p in st.config().peers}
    assert by["tor"].router_id == "192.168.1.10"
    assert by["tor-set"].router_id == "10.9.9.9"


def test_router_id_missing_without_node_ipv4():
    st = synced_state(peer("tor"), node=node_obj(ipv4=None))
    with pytest.raises(ConfigError, match="routerId: unset"):
        st.config()
    # the override gives one
    st.apply(crd_batch(peer("tor", overrides=[{"nodeName": ME, "routerId": "10.1.1.1"}])))
    assert st.config().peers[0].spec.router_id == "10.1.1.1"


def test_node_overrides_apply_to_this_node_only():
    overrides = [
        {"nodeName": "node-b", "routerId": "10.2.2.2", "localAS": 65222},
        {"nodeName": ME, "routerId": "10.1.1.1", "localAddress": "10.0.0.11", "localAS": 65111},
    ]
    st = synced_state(peer("tor", overrides=overrides), peer("plain", "10.0.0.2",
                                                            overrides=[overrides[0]]))
    by = {p.metadata.name: p.spec for p in st.config().peers}
    spec = by["tor"]
    assert (spec.router_id, spec.local_address, spec.local_as) == ("10.1.1.1", "10.0.0.11", 65111)
    assert spec.node_overrides == ()
    other = by["plain"]
    assert (other.router_id, other.local_address, other.local_as) == ("192.168.1.10", None, 65000)


def test_same_peer_address_with_disjoint_selectors():
    st = synced_state(peer("tor-r1", "10.0.0.1", selector=RACK1), peer("tor-r2", "10.0.0.1", selector=RACK2),
                      node=node_obj(labels={"rack": "r1"}))
    assert names(st.config().peers) == ["tor-r1"]
    # a Node that both select (labels change so both match): an error naming both
    both = {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}
    st.apply(crd_batch(peer("tor-r2", "10.0.0.1", selector=both)))
    with pytest.raises(ConfigError) as exc:
        st.config()
    msg = str(exc.value)
    assert "spec.peerAddress" in msg and "tor-r1" in msg and "tor-r2" in msg and ME in msg


def test_same_peer_address_without_selectors_is_a_conflict():
    st = synced_state(peer("a", "10.0.0.1"), peer("b", "10.0.0.1"))
    with pytest.raises(ConfigError, match="peerAddress 10.0.0.1"):
        st.config()


def test_same_peer_address_one_unselected_one_selecting():
    st = synced_state(peer("all", "10.0.0.1"), peer("r2", "10.0.0.1", selector=RACK2),
                      node=node_obj(labels={"rack": "r1"}))
    assert names(st.config().peers) == ["all"]
    st.apply(batch("nodes", node_obj(labels={"rack": "r2"})))
    with pytest.raises(ConfigError, match="already has peerAddress 10.0.0.1"):
        st.config()


# --- expand: pod CIDRs and Service VIPs ----------------------------------------------------------

def adverts_of(config) -> dict[str, tuple[str, ...]]:
    return {a.metadata.name: tuple(a.spec.prefixes) for a in config.adverts}


def test_expand_pod_cidr():
    st = synced_state(advert("pods", "podCIDR"), advert("fixed", "podCIDR", prefixes=["10.250.0.0/24"]),
                      advert("pool", "pool", prefixes=["198.51.100.0/24"]),
                      node=node_obj(pod_cidrs=["10.244.1.0/24", "fd00:10:244:1::/64"]))
    c = st.config()
    assert adverts_of(c)["pods"] == ()  # the configuration itself stays as written
    e = st.expand(c)
    assert adverts_of(e) == {"pods": ("10.244.1.0/24", "fd00:10:244:1::/64"), "fixed": ("10.250.0.0/24",),
                             "pool": ("198.51.100.0/24",)}
    # the rest of the advertisement is kept
    assert e.adverts[[a.metadata.name for a in e.adverts].index("pods")].spec.type == "podCIDR"


def test_expand_pod_cidr_without_node_cidrs():
    st = synced_state(advert("pods", "podCIDR"))
    assert adverts_of(st.expand(st.config()))["pods"] == ()
    change = st.apply(batch("nodes", node_obj(pod_cidrs=["10.244.1.0/24"])))
    assert change.adverts
    assert adverts_of(st.expand(st.config()))["pods"] == ("10.244.1.0/24",)


def test_expand_services():
    announce = {"selector": {"matchLabels": {"announce": "yes"}}, "clusterIP": False,
                "loadBalancerClasses": ["routeagent.io/bgp"]}
    st = synced_state(
        advert("all-svc", "service"),
        advert("lb", "service", services=announce),
        services=[
            svc("web", cluster="10.96.0.10", labels={"announce": "yes"}),
            svc("ext", cluster="10.96.0.11", external=["198.51.100.7"], labels={"announce": "yes"}),
            svc("local", cluster="10.96.0.12", external=["198.51.100.8"], etp="Local", labels={"announce": "yes"}),
            svc("lb-ours", cluster="10.96.0.13", type="LoadBalancer", lb=["203.0.113.1"],
                lb_class="routeagent.io/bgp", labels={"announce": "yes"}),
            svc("lb-theirs", cluster="10.96.0.14", type="LoadBalancer", lb=["203.0.113.2"],
                lb_class="other.example/lb", labels={"announce": "yes"}),
            svc("lb-noclass", cluster="10.96.0.15", type="LoadBalancer", lb=["203.0.113.3"]),
            svc("hidden", cluster="10.96.0.16", external=["198.51.100.9"]),
        ],
        slices=[eps("local-1", "local", ["node-b"])])
    e = st.expand(st.config())
    got = adverts_of(e)
    assert got["lb"] == ("198.51.100.7/32", "203.0.113.1/32")  # local eTP: no endpoint here
    assert set(got["all-svc"]) == {
        "10.96.0.10/32", "10.96.0.11/32", "10.96.0.12/32", "10.96.0.13/32", "10.96.0.14/32", "10.96.0.15/32",
        "10.96.0.16/32", "198.51.100.7/32", "198.51.100.9/32", "203.0.113.3/32"}

    # an endpoint of the Local Service on this node: its external IP comes in
    change = st.apply(batch("endpointslices", eps("local-1", "local", ["node-b", ME])))
    assert change.adverts and not change.config and not change.guard
    got = adverts_of(st.expand(st.config()))
    assert "198.51.100.8/32" in got["lb"] and "198.51.100.8/32" in got["all-svc"]

    # and goes when it leaves
    change = st.apply(batch("endpointslices", deletes=("default/local-1",)))
    assert change.adverts
    assert "198.51.100.8/32" not in adverts_of(st.expand(st.config()))["lb"]

    # a Service deleted
    change = st.apply(batch("services", deletes=("default/ext",)))
    assert change.adverts and change.guard and not change.config
    assert adverts_of(st.expand(st.config()))["lb"] == ("203.0.113.1/32",)


def test_expand_service_selected_only_on_selected_node():
    st = synced_state(advert("svc", "service", selector=RACK1), services=[svc("web")],
                      node=node_obj(labels={"rack": "r2"}))
    assert st.expand(st.config()).adverts == ()
    st.apply(batch("nodes", node_obj(labels={"rack": "r1"})))
    assert adverts_of(st.expand(st.config())) == {"svc": ("10.96.0.10/32",)}


def test_service_change_outside_selections_is_not_an_advert_change():
    st = synced_state(advert("svc", "service", services={"selector": {"matchLabels": {"a": "b"}}}))
    st.config()
    change = st.apply(batch("services", svc("web")))
    assert not change.adverts and change.guard  # every VIP is guarded, selected or not


def test_selection_follows_config_change():
    st = synced_state(advert("svc", "service", services={"selector": {"matchLabels": {"a": "b"}}}),
                      services=[svc("web", labels={"x": "y"})])
    assert adverts_of(st.expand(st.config())) == {"svc": ()}
    st.apply(crd_batch(advert("svc", "service", services={"selector": {"matchLabels": {"x": "y"}}})))
    assert adverts_of(st.expand(st.config())) == {"svc": ("10.96.0.10/32",)}


# --- guard inputs --------------------------------------------------------------------------------

def test_guard_inputs():
    agent = crd("AgentConfig", "agent", {"serviceCIDRs": ["10.96.0.0/16"]})
    st = synced_state(
        agent,
        node=node_obj(pod_cidrs=["10.244.1.0/24", "fd00:10:244:1::/64"]),
        nodes=[node_obj("node-b", pod_cidrs=["10.244.2.0/24"]), node_obj("node-c", pod_cidrs=["10.244.3.0/24"])],
        services=[svc("web", cluster="10.96.0.10", external=["198.51.100.7"]),
                  svc("lb", cluster="10.96.0.11", type="LoadBalancer", lb=["203.0.113.1"], lb_class="x/y")],
        cidrs=[scidr("kubernetes", "10.97.0.0/16", "fd00:96::/112")])
    config = st.config()
    protected, others = st.guard_inputs(config)
    assert set(protected) == set(map(P, [
        "10.244.1.0/24", "fd00:10:244:1::/64",  # own pod CIDRs
        "10.96.0.10/32", "198.51.100.7/32", "10.96.0.11/32", "203.0.113.1/32",  # every VIP, advertised or not
        "10.96.0.0/16",  # AgentConfig spec.serviceCIDRs
        "10.97.0.0/16", "fd00:96::/112",  # ServiceCIDR objects
    ]))
    assert len(protected) == len(set(protected))
    assert set(others) == {P("10.244.2.0/24"), P("10.244.3.0/24")}

    # a node leaves, a ServiceCIDR goes, a Service goes: guard changes
    assert st.apply(batch("nodes", deletes=("node-c",))).guard
    assert st.apply(batch("servicecidrs", deletes=("kubernetes",))).guard
    assert st.apply(batch("services", deletes=("default/lb",))).guard
    protected, others = st.guard_inputs(config)
    assert set(protected) == set(map(P, ["10.244.1.0/24", "fd00:10:244:1::/64", "10.96.0.10/32",
                                         "198.51.100.7/32", "10.96.0.0/16"]))
    assert others == [P("10.244.2.0/24")]


def test_guard_inputs_without_node_and_cluster_data():
    st = ClusterState(ME)
    for res in CONFIG_RESOURCES:
        st.apply(batch(res, synced=True))
    st.apply(batch("nodes", node_obj()))
    protected, others = st.guard_inputs(st.config())
    assert protected == [] and others == []


def test_servicecidr_change_flags_guard_only():
    st = synced_state()
    change = st.apply(batch("servicecidrs", scidr("kubernetes", "10.96.0.0/12")))
    assert change.guard and not change.config and not change.adverts
    assert st.guard_inputs(st.config())[0] == [P("10.96.0.0/12")]


def test_node_addresses():
    st = ClusterState(ME)
    assert st.node_addresses() == []
    n = node_from({"metadata": {"name": ME}, "status": {"addresses": [
        {"type": "InternalIP", "address": "192.168.1.10"}, {"type": "ExternalIP", "address": "203.0.113.9"},
        {"type": "Hostname", "address": ME}]}})
    st.apply(batch("nodes", n))
    assert st.node_addresses() == ["192.168.1.10", "203.0.113.9"]


def test_problems_name_the_object_and_its_resource_version_not_a_line():
    """Issue 16.5: `kubernetes:40: BgpPeer/tor-rack1: ...` told nothing; the object does."""
    st = synced_state(peer("tor"))
    bad = peer("tor", holdTime=2)
    bad["metadata"]["resourceVersion"] = "4711"
    st.apply(crd_batch(bad))
    (line,) = st.problem_lines()
    assert line.startswith("BgpPeer/tor (resourceVersion 4711): spec.holdTime: ")
    assert "kubernetes" not in line
