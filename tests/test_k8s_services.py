"""Kubernetes objects -> value types -> per-selection Service VIPs of this node.

The builders produce dicts shaped exactly as the API server sends them (camelCase, optional
fields absent), which then go through the transforms and into `ServiceVips`.
"""

from __future__ import annotations

import pytest

from agent.k8s.objects import (
    NodeInfo, ServiceCidrInfo, ServiceInfo, SliceInfo, node_from, service_cidrs_from, service_from,
    slice_from,
)
from agent.k8s.services import Selection, ServiceVips

NODE = "node-a"


# --- builders: API JSON ---------------------------------------------------------------------------

def svc(name="web", ns="default", *, type=None, cluster="10.96.0.10", cluster_ips=None, external=(),
        lb=(), lb_hostnames=(), lb_class=None, etp=None, itp=None, labels=None):
    spec: dict = {"ports": [{"port": 80, "protocol": "TCP"}]}
    if type is not None:
        spec["type"] = type
    if cluster is not None:
        spec["clusterIP"] = cluster
        spec["clusterIPs"] = list(cluster_ips) if cluster_ips is not None else [cluster]
    if external:
        spec["externalIPs"] = list(external)
    if lb_class is not None:
        spec["loadBalancerClass"] = lb_class
    if etp is not None:
        spec["externalTrafficPolicy"] = etp
    if itp is not None:
        spec["internalTrafficPolicy"] = itp
    meta: dict = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": {}}
    ingress = [{"ip": ip, "ipMode": "VIP"} for ip in lb] + [{"hostname": h} for h in lb_hostnames]
    if ingress:
        obj["status"] = {"loadBalancer": {"ingress": ingress}}
    return obj


def ep(node, ip="10.244.0.5", *, ready=True, serving=None, terminating=None):
    cond: dict = {}
    for k, v in (("ready", ready), ("serving", serving), ("terminating", terminating)):
        if v is not None:
            cond[k] = v
    return {"addresses": [ip], "conditions": cond, "nodeName": node,
            "targetRef": {"kind": "Pod", "name": "p", "namespace": "default"}}


def eps(name="web-abcde", service="web", ns="default", endpoints=(), family="IPv4"):
    labels = {"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    if service is not None:
        labels["kubernetes.io/service-name"] = service
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": family,
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "endpoints": list(endpoints), "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]}


def node(name=NODE, *, pod_cidrs=None, pod_cidr=None, addresses=()):
    spec: dict = {}
    if pod_cidrs is not None:
        spec["podCIDRs"] = pod_cidrs
    if pod_cidr is not None:
        spec["podCIDR"] = pod_cidr
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": spec,
            "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]}}


def everything(labels) -> bool:
    return True


def match(**want):
    return lambda labels: all(labels.get(k) == v for k, v in want.items())


ALL = Selection(everything)


def fresh(selections=None) -> ServiceVips:
    v = ServiceVips(NODE)
    v.set_selections(selections if selections is not None else {"all": ALL})
    return v


def put_svc(v: ServiceVips, obj) -> set[str]:
    info = service_from(obj)
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return v.update_service(key, info)


def put_slice(v: ServiceVips, obj) -> set[str]:
    info = slice_from(obj)
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return v.update_slice(key, info)


# --- transforms ---------------------------------------------------------------------------------

def test_node_from():
    n = node_from(node(pod_cidrs=["10.244.1.0/24", "fd00:10:244:1::/64"], pod_cidr="10.244.1.0/24",
                       addresses=[("Hostname", "node-a"), ("InternalIP", "2001:DB8::0:5"),
                                  ("InternalIP", "192.168.1.5"), ("ExternalIP", "203.0.113.5"),
                                  ("InternalDNS", "node-a.local"), ("InternalIP", "bogus")]))
    assert n == NodeInfo("node-a", {"kubernetes.io/hostname": "node-a"},
                         ("10.244.1.0/24", "fd00:10:244:1::/64"),
                         (("InternalIP", "2001:db8::5"), ("InternalIP", "192.168.1.5"),
                          ("ExternalIP", "203.0.113.5")))
    assert n.internal_ipv4 == "192.168.1.5"
    assert n.ips == ("2001:db8::5", "192.168.1.5", "203.0.113.5")
    assert node_from(node(pod_cidr="10.244.2.0/24")).pod_cidrs == ("10.244.2.0/24",)
    assert node_from(node()).internal_ipv4 is None
    with pytest.raises(TypeError):
        n.labels["x"] = "y"  # read-only


def test_service_from_fields():
    s = service_from(svc(type="LoadBalancer", cluster_ips=["10.96.0.10", "fd00::A"], external=["198.51.100.7"],
                         lb=["203.0.113.10"], lb_class="example.com/bgp", etp="Local", itp="Local",
                         labels={"app": "web"}))
    assert s == ServiceInfo("default", "web", {"app": "web"}, "LoadBalancer", ("10.96.0.10", "fd00::a"),
                            ("198.51.100.7",), ("203.0.113.10",), "example.com/bgp", True, True)
    assert s.key == "default/web"
    # no type: ClusterIP; ingress of a non-LoadBalancer Service is not read
    c = service_from(svc(lb=["203.0.113.10"]))
    assert c.type == "ClusterIP" and c.lb_ips == () and not c.etp_local and not c.itp_local
    # clusterIPs absent: falls back to clusterIP
    o = svc(cluster="10.96.0.11")
    del o["spec"]["clusterIPs"]
    assert service_from(o).cluster_ips == ("10.96.0.11",)


def test_headless_and_external_name():
    assert service_from(svc(cluster="None")).cluster_ips == ()
    assert service_from(svc(cluster="")).cluster_ips == ()
    assert service_from({"metadata": {"name": "x", "namespace": "d"},
                         "spec": {"type": "ExternalName", "externalName": "example.com"}}) is None
    v = fresh()
    assert put_svc(v, svc(cluster="None", external=["198.51.100.7"])) == set()
    assert v.vips("all") == ()
    assert v.all_vips() == {"198.51.100.7/32"}  # still guarded


def test_lb_hostname_only_ingress():
    s = service_from(svc(type="LoadBalancer", lb_hostnames=["lb.example.com"]))
    assert s.lb_ips == ()
    s = service_from(svc(type="LoadBalancer", lb=["203.0.113.1"], lb_hostnames=["lb.example.com"]))
    assert s.lb_ips == ("203.0.113.1",)


def test_slice_from_conditions():
    s = slice_from(eps(endpoints=[
        ep("n1"),                                                    # ready
        ep("n2", ready=None),                                        # unknown: ready
        ep("n3", ready=False),                                       # not ready
        ep("n4", ready=False, serving=True, terminating=True),       # serving-terminating
        ep("n5", ready=False, serving=False, terminating=True),      # terminating, not serving
        ep("n6", ready=False, terminating=True),                     # serving unknown: serving
        {"addresses": ["10.244.0.9"], "conditions": {}},            # no nodeName
        {"addresses": [], "nodeName": "n7", "conditions": {}},      # no address
    ]))
    assert s == SliceInfo("default", "web-abcde", "default/web", frozenset({"n1", "n2"}),
                          frozenset({"n1", "n2", "n4", "n6"}), 4)
    assert slice_from(eps(service=None)) is None
    assert slice_from(eps(family="FQDN")) is None
    assert slice_from(eps(family="IPv6")).family == 6


def test_service_cidrs_from():
    obj = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "kubernetes"},
           "spec": {"cidrs": ["10.96.0.0/12", "FD00:10:96::/108", "nonsense", None]}}
    assert service_cidrs_from(obj) == ServiceCidrInfo("kubernetes", ("10.96.0.0/12", "fd00:10:96::/108"))
    assert service_cidrs_from({"metadata": {"name": "x"}, "spec": None}) == ServiceCidrInfo("x", ())


WEIRD = [
    None, 42, "x", [], {}, {"metadata": None}, {"metadata": {"name": None}}, {"metadata": []},
    {"metadata": {"name": "a", "namespace": 3, "labels": None}, "spec": None, "status": None},
    {"metadata": {"name": "a", "labels": {"k": None, 1: "v"}}, "spec": {"type": None, "clusterIPs": None,
     "clusterIP": None, "externalIPs": None, "loadBalancerClass": None}, "status": {"loadBalancer": None}},
    {"metadata": {"name": "a"}, "spec": {"clusterIPs": ["10.0.0.300", "fe80::1%eth0", 5, None, "None"],
     "externalIPs": "1.2.3.4", "type": "LoadBalancer"},
     "status": {"loadBalancer": {"ingress": [None, {"ip": None}, {"ip": "1.2.3"}, {"ip": "01.2.3.4"}, "x"]}}},
    {"metadata": {"name": "a", "labels": {"kubernetes.io/service-name": "s"}}, "addressType": "IPv4",
     "endpoints": [None, {"conditions": None, "addresses": None}, {"nodeName": 5, "addresses": ["x"]},
                   {"nodeName": "n", "addresses": ["1.1.1.1"], "conditions": {"ready": None}}]},
    {"metadata": {"name": "a", "labels": {"kubernetes.io/service-name": "s"}}, "addressType": None,
     "endpoints": None},
    {"metadata": {"name": "n"}, "spec": {"podCIDRs": None, "podCIDR": "garbage", "cidrs": [1, "1.2.3.0/33"]},
     "status": {"addresses": [None, {"type": "InternalIP"}, {"type": "InternalIP", "address": 7}]}},
]


@pytest.mark.parametrize("obj", WEIRD)
def test_transforms_never_raise(obj):
    for transform in (node_from, service_from, slice_from, service_cidrs_from):
        transform(obj)


def test_bad_ips_dropped():
    s = service_from(WEIRD[10])
    assert s is not None and s.cluster_ips == () and s.external_ips == () and s.lb_ips == ()
    n = node_from(WEIRD[13])
    assert n.pod_cidrs == () and n.addresses == ()
    sl = slice_from(WEIRD[11])
    assert sl.ready_nodes == {"n"}


# --- VIP rules ----------------------------------------------------------------------------------

def test_cluster_external_lb_all_advertised():
    v = fresh()
    assert put_svc(v, svc(type="LoadBalancer", external=["198.51.100.7"], lb=["203.0.113.10"])) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32", "198.51.100.7/32", "203.0.113.10/32")
    assert v.vips("unknown") == ()


def test_etp_local_needs_local_ready_endpoint():
    v = fresh()
    put_svc(v, svc(type="LoadBalancer", lb=["203.0.113.10"], etp="Local"))
    assert v.vips("all") == ("10.96.0.10/32",)  # no endpoints at all
    assert put_slice(v, eps(endpoints=[ep("node-b")])) == set()  # remote only
    assert v.vips("all") == ("10.96.0.10/32",)
    assert put_slice(v, eps(endpoints=[ep("node-b"), ep(NODE)])) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32", "203.0.113.10/32")
    # the local endpoint becomes unready: withdrawn
    assert put_slice(v, eps(endpoints=[ep("node-b"), ep(NODE, ready=False)])) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32",)


def test_etp_cluster_ignores_endpoints():
    v = fresh()
    put_svc(v, svc(type="LoadBalancer", lb=["203.0.113.10"], etp="Cluster"))
    assert "203.0.113.10/32" in v.vips("all")
    assert put_slice(v, eps(endpoints=[ep("node-b", ready=False)])) == set()


def test_serving_terminating_fallback():
    v = fresh()
    put_svc(v, svc(external=["198.51.100.7"], etp="Local"))
    # only serving-and-terminating locally: kube-proxy falls back to it, so attract the traffic
    assert put_slice(v, eps(endpoints=[ep(NODE, ready=False, serving=True, terminating=True),
                                       ep("node-b")])) == {"all"}
    assert "198.51.100.7/32" in v.vips("all")
    # terminating and no longer serving: nothing usable
    assert put_slice(v, eps(endpoints=[ep(NODE, ready=False, serving=False, terminating=True)])) == {"all"}
    assert "198.51.100.7/32" not in v.vips("all")
    # not ready and not terminating: not a fallback candidate
    put_slice(v, eps(endpoints=[ep(NODE, ready=False, serving=True, terminating=False)]))
    assert "198.51.100.7/32" not in v.vips("all")


def test_local_endpoint_in_any_slice():
    v = fresh()
    put_svc(v, svc(external=["198.51.100.7"], etp="Local"))
    put_slice(v, eps("web-1", endpoints=[ep("node-b")]))
    assert put_slice(v, eps("web-2", endpoints=[ep(NODE)])) == {"all"}
    assert "198.51.100.7/32" in v.vips("all")
    assert put_slice(v, eps("web-1", endpoints=[])) == set()  # the other slice changes: still local
    assert v.update_slice("default/web-2", None) == {"all"}  # the local slice goes away
    assert "198.51.100.7/32" not in v.vips("all")


def test_itp_local_cluster_ip():
    v = fresh()
    put_svc(v, svc(itp="Local", external=["198.51.100.7"]))
    assert v.vips("all") == ("198.51.100.7/32",)  # eTP Cluster: external IP always
    assert put_slice(v, eps(endpoints=[ep(NODE)])) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32", "198.51.100.7/32")


def test_dual_stack_prefixes_and_per_family_endpoints():
    v = fresh()
    put_svc(v, svc(type="LoadBalancer", cluster_ips=["10.96.0.10", "fd00:10:96::A"],
                   lb=["203.0.113.10", "2001:DB8:0:0::10"], etp="Local"))
    assert v.vips("all") == ("10.96.0.10/32", "fd00:10:96::a/128")
    put_slice(v, eps("web-v4", endpoints=[ep(NODE)]))
    assert v.vips("all") == ("10.96.0.10/32", "203.0.113.10/32", "fd00:10:96::a/128")
    put_slice(v, eps("web-v6", family="IPv6", endpoints=[ep(NODE, "fd00:10:244::5")]))
    assert v.vips("all") == ("10.96.0.10/32", "203.0.113.10/32", "2001:db8::10/128", "fd00:10:96::a/128")


def test_external_ip_of_family_without_cluster_ip_not_advertised():
    v = fresh()
    put_svc(v, svc(external=["198.51.100.7", "2001:db8::7"]))  # IPv4-only Service
    assert v.vips("all") == ("10.96.0.10/32", "198.51.100.7/32")
    assert "2001:db8::7/128" in v.all_vips()


def test_lb_class_selection():
    none_ = Selection(everything)
    one = Selection(everything, lb_classes=frozenset({"example.com/bgp"}))
    v = fresh({"none": none_, "one": one})
    put_svc(v, svc("a", type="LoadBalancer", cluster="10.96.0.1", lb=["203.0.113.1"], external=["198.51.100.1"]))
    put_svc(v, svc("b", type="LoadBalancer", cluster="10.96.0.2", lb=["203.0.113.2"], lb_class="example.com/bgp"))
    put_svc(v, svc("c", type="LoadBalancer", cluster="10.96.0.3", lb=["203.0.113.3"], lb_class="other.io/lb"))
    assert v.vips("none") == ("10.96.0.1/32", "10.96.0.2/32", "10.96.0.3/32", "198.51.100.1/32", "203.0.113.1/32")
    assert v.vips("one") == ("10.96.0.1/32", "10.96.0.2/32", "10.96.0.3/32", "198.51.100.1/32", "203.0.113.2/32")


def test_flags():
    v = fresh({"cip": Selection(everything, external_ips=False, lb_ingress=False),
               "ext": Selection(everything, cluster_ip=False, lb_ingress=False),
               "lb": Selection(everything, cluster_ip=False, external_ips=False)})
    put_svc(v, svc(type="LoadBalancer", external=["198.51.100.7"], lb=["203.0.113.10"]))
    assert v.vips("cip") == ("10.96.0.10/32",)
    assert v.vips("ext") == ("198.51.100.7/32",)
    assert v.vips("lb") == ("203.0.113.10/32",)


def test_label_selector():
    v = fresh({"pub": Selection(match(expose="bgp"))})
    assert put_svc(v, svc("a", cluster="10.96.0.1", labels={"expose": "bgp"})) == {"pub"}
    assert put_svc(v, svc("b", cluster="10.96.0.2", labels={"expose": "no"})) == set()
    assert put_svc(v, svc("c", cluster="10.96.0.3")) == set()
    assert v.vips("pub") == ("10.96.0.1/32",)
    # relabel: leaves the selection
    assert put_svc(v, svc("a", cluster="10.96.0.1", labels={})) == {"pub"}
    assert v.vips("pub") == ()


def test_slice_moved_between_services():
    v = fresh()
    put_svc(v, svc("a", cluster="10.96.0.1", external=["198.51.100.1"], etp="Local"))
    put_svc(v, svc("b", cluster="10.96.0.2", external=["198.51.100.2"], etp="Local"))
    put_slice(v, eps("s1", service="a", endpoints=[ep(NODE)]))
    assert "198.51.100.1/32" in v.vips("all")
    assert put_slice(v, eps("s1", service="b", endpoints=[ep(NODE)])) == {"all"}
    assert "198.51.100.1/32" not in v.vips("all") and "198.51.100.2/32" in v.vips("all")


def test_service_deleted_while_slices_remain_and_comes_back():
    v = fresh()
    put_slice(v, eps(endpoints=[ep(NODE)]))  # slice before its Service: kept
    assert put_svc(v, svc(external=["198.51.100.7"], etp="Local")) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32", "198.51.100.7/32")
    assert v.update_service("default/web", None) == {"all"}
    assert v.vips("all") == () and v.all_vips() == frozenset()
    assert put_slice(v, eps(endpoints=[ep(NODE), ep("node-b")])) == set()  # no Service: nothing
    assert put_svc(v, svc(external=["198.51.100.7"], etp="Local")) == {"all"}
    assert v.vips("all") == ("10.96.0.10/32", "198.51.100.7/32")


def test_shared_ip_refcount():
    v = fresh()
    put_svc(v, svc("a", cluster="10.96.0.1", external=["198.51.100.7"]))
    assert put_svc(v, svc("b", cluster="10.96.0.2", external=["198.51.100.7"])) == {"all"}
    assert v.update_service("default/a", None) == {"all"}  # 10.96.0.1 goes, the shared IP stays
    assert v.vips("all") == ("10.96.0.2/32", "198.51.100.7/32")
    assert "198.51.100.7/32" in v.all_vips()
    put_svc(v, svc("c", cluster="10.96.0.3", external=["198.51.100.7"]))
    assert put_svc(v, svc("c", cluster="10.96.0.3")) == set()  # b still gives it
    assert v.vips("all") == ("10.96.0.2/32", "10.96.0.3/32", "198.51.100.7/32")


def test_unchanged_update_is_noop():
    v = fresh()
    put_svc(v, svc())
    assert put_svc(v, svc()) == set()
    put_slice(v, eps(endpoints=[ep(NODE)]))
    assert put_slice(v, eps(endpoints=[ep(NODE)])) == set()
    assert v.update_service("default/missing", None) == set()
    assert v.update_slice("default/missing", None) == set()


def test_set_selections_changes():
    v = ServiceVips(NODE)
    put_svc(v, svc("a", cluster="10.96.0.1", labels={"tier": "front"}))
    put_svc(v, svc("b", cluster="10.96.0.2", labels={"tier": "back"}))
    front = Selection(match(tier="front"))
    assert v.set_selections({"x": front, "empty": Selection(match(tier="none"))}) == {"x"}
    assert v.vips("x") == ("10.96.0.1/32",)
    assert v.set_selections({"x": front, "empty": Selection(match(tier="none"))}) == set()
    same = v.set_selections({"x": front})  # "empty" removed: it had no VIPs
    assert same == set()
    assert v.set_selections({"x": Selection(match(tier="back"))}) == {"x"}
    assert v.vips("x") == ("10.96.0.2/32",)
    # changed object, same result: not reported
    assert v.set_selections({"x": Selection(lambda labels: labels.get("tier") == "back")}) == set()
    assert v.set_selections({}) == {"x"}
    assert v.vips("x") == ()
    # selections work incrementally after being set
    v.set_selections({"x": front})
    assert put_svc(v, svc("d", cluster="10.96.0.4", labels={"tier": "front"})) == {"x"}


def test_unchanged_selection_object_is_not_recomputed():
    v = fresh()
    put_svc(v, svc())
    calls = []
    v._select = lambda *a: calls.append(a)  # type: ignore[method-assign]
    assert v.set_selections({"all": ALL}) == set()
    assert calls == []


class _Sel:
    """A value-equal selector object, like the pydantic LabelSelector."""

    def __init__(self, **want):
        self.want = want

    def __eq__(self, other):
        return isinstance(other, _Sel) and self.want == other.want

    def matches(self, labels):
        return all(labels.get(k) == v for k, v in self.want.items())


def test_equal_bound_method_selector_is_not_recomputed():
    v = ServiceVips(NODE)
    assert v.set_selections({"x": Selection(_Sel(app="a").matches)}) == set()
    put_svc(v, svc(labels={"app": "a"}))
    calls = []
    v._select = lambda *a: calls.append(a)  # type: ignore[method-assign]
    assert v.set_selections({"x": Selection(_Sel(app="a").matches)}) == set()
    assert calls == []
    del v._select
    assert v.set_selections({"x": Selection(_Sel(app="a").matches, cluster_ip=False)}) == {"x"}
    assert v.set_selections({"x": Selection(_Sel(app="b").matches)}) == set()
    assert v.set_selections({"x": Selection(_Sel(app="a").matches)}) == {"x"}


def test_all_vips():
    v = fresh({"none": Selection(match(never="x"))})
    put_svc(v, svc("a", type="LoadBalancer", cluster_ips=["10.96.0.1", "fd00::1"], external=["198.51.100.1"],
                   lb=["203.0.113.1"], lb_class="someone.else/lb", etp="Local"))
    put_svc(v, svc("h", cluster="None", external=["198.51.100.2"]))
    expected = {"10.96.0.1/32", "fd00::1/128", "198.51.100.1/32", "203.0.113.1/32", "198.51.100.2/32"}
    assert v.all_vips() == expected
    first = v.all_vips()
    put_slice(v, eps("a-1", service="a", endpoints=[ep(NODE)]))
    assert v.all_vips() is first  # unchanged: same object
    v.update_service("default/h", None)
    assert v.all_vips() == expected - {"198.51.100.2/32"}


def test_vips_sorted_numerically():
    v = fresh()
    for i, ip in enumerate(["10.96.0.10", "10.96.0.9", "fd00::1", "10.96.0.100", "2001:db8::1"]):
        put_svc(v, svc(f"s{i}", cluster=ip))
    assert v.vips("all") == ("10.96.0.9/32", "10.96.0.10/32", "10.96.0.100/32", "2001:db8::1/128", "fd00::1/128")


# --- incremental cost ----------------------------------------------------------------------------

def test_incremental_one_service_recomputed_among_10000():
    v = fresh({"all": ALL, "lb": Selection(everything, cluster_ip=False)})
    for i in range(10_000):
        ip = f"10.96.{i // 250}.{i % 250 + 1}"
        put_svc(v, svc(f"s{i}", cluster=ip, type="LoadBalancer", lb=[f"203.0.{i // 250}.{i % 250 + 1}"],
                       etp="Local"))
        put_slice(v, eps(f"s{i}-x", service=f"s{i}", endpoints=[ep("node-b")]))
    assert len(v.vips("all")) == 10_000 and v.vips("lb") == ()
    recomputed = []
    real = v._recompute

    def counting(key):
        recomputed.append(key)
        return real(key)

    v._recompute = counting  # type: ignore[method-assign]
    assert put_slice(v, eps("s42-x", service="s42", endpoints=[ep(NODE)])) == {"all", "lb"}
    assert recomputed == ["default/s42"]
    assert v.vips("lb") == ("203.0.0.43/32",)
    recomputed.clear()
    assert put_svc(v, svc("s7", cluster="10.96.200.1", labels={"x": "y"})) == {"all"}  # ClusterIP now
    assert recomputed == ["default/s7"]
    vips = v.vips("all")
    assert len(vips) == 10_001  # 10,000 cluster IPs + the LB IP of s42, now local
    assert "10.96.200.1/32" in vips and "10.96.0.8/32" not in vips
