"""The local API server (agent.k8s.testapi) driven by the real `kubernetes` client."""

import functools
import json
import time

import pytest
import urllib3
from kubernetes import client, config

from testlab.netns import wait_for
from testlab.k8sapi import KubeApiServer, endpoint_slice, node, service

RA = ("routeagent.io", "v1alpha1")


@pytest.fixture
def server():
    srv = KubeApiServer(bookmark_interval=0.1).start()
    yield srv
    srv.stop()


@pytest.fixture
def api(server, tmp_path):
    c = config.new_client_from_config(server.kubeconfig(tmp_path / "kubeconfig"))
    yield c
    c.close()


poll = functools.partial(wait_for, timeout=5.0, interval=0.01)


class Stream:
    """A raw watch: `next_event()` reads one line of the chunked response."""

    def __init__(self, list_fn, *args, **kwargs):
        self.resp = list_fn(*args, watch=True, _preload_content=False, **kwargs)
        self._lines = self._iter()

    def _iter(self):
        buf = b""
        for chunk in self.resp.stream(amt=None, decode_content=False):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            yield from (json.loads(line) for line in lines if line.strip())

    def next_event(self):
        return next(self._lines)

    def events(self, n):
        return [self.next_event() for _ in range(n)]

    def rest(self):
        return list(self._lines)

    def close(self):
        self.resp.close()


def test_core_list_get_watch(server, api):
    v1 = client.CoreV1Api(api)
    server.put(node("a", ["10.0.0.0/24"], ["192.168.0.1"], labels={"role": "x"}))
    v1.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}})

    patched = v1.patch_node("a", [{"op": "add", "path": "/metadata/labels/z", "value": "1"}])  # JSON patch
    assert patched.metadata.labels == {"role": "x", "z": "1"}
    typed = v1.list_node()
    assert [n.metadata.name for n in typed.items] == ["a", "b"]
    assert typed.items[0].spec.pod_cidrs == ["10.0.0.0/24"]
    raw = json.loads(v1.list_node(_preload_content=False).data)
    assert raw["kind"] == "NodeList" and raw["metadata"]["resourceVersion"] == server.resource_version
    assert "kind" not in raw["items"][0]  # like the real server: list items of built-ins have no TypeMeta
    got = json.loads(v1.read_node("a", _preload_content=False).data)
    assert got["kind"] == "Node" and got["metadata"]["uid"] and got["metadata"]["creationTimestamp"]

    w = Stream(v1.list_node, resource_version=raw["metadata"]["resourceVersion"], timeout_seconds=5)
    server.put(node("a", ["10.0.1.0/24"], ["192.168.0.1"]))
    v1.delete_node("b")
    ev = w.events(2)
    w.close()
    assert [e["type"] for e in ev] == ["MODIFIED", "DELETED"]
    assert ev[0]["object"]["spec"]["podCIDRs"] == ["10.0.1.0/24"] and ev[0]["object"]["kind"] == "Node"
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in ev]
    assert rvs[1] > rvs[0]
    assert server.get("v1", "Node", "b") is None


def test_watch_without_version_starts_with_current_objects(server, api):
    v1 = client.CoreV1Api(api)
    server.put(node("a"))
    w = Stream(v1.list_node, timeout_seconds=5)
    assert w.next_event()["type"] == "ADDED"
    server.put(node("c"))
    assert w.next_event()["object"]["metadata"]["name"] == "c"
    w.close()


def test_namespaced_services_and_endpointslices(server, api):
    v1, disc = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    server.put(service("web", "default", ["10.96.0.10"]))
    server.put(service("dns", "kube-system", ["10.96.0.11"]))
    server.put(endpoint_slice("web-1", "web", "default", ["10.0.0.5"], node_name="a"))
    server.put(endpoint_slice("dns-1", "dns", "kube-system", ["10.0.0.6"]))

    assert [s.metadata.name for s in v1.list_namespaced_service("default").items] == ["web"]
    assert len(v1.list_service_for_all_namespaces().items) == 2
    slices = disc.list_endpoint_slice_for_all_namespaces(label_selector="kubernetes.io/service-name=dns")
    assert [s.metadata.name for s in slices.items] == ["dns-1"]
    assert slices.items[0].endpoints[0].addresses == ["10.0.0.6"]
    rv = v1.list_service_for_all_namespaces().metadata.resource_version

    w = Stream(v1.list_namespaced_service, "kube-system", resource_version=rv, timeout_seconds=5)
    server.put(service("web", "default", ["10.96.0.12"]))  # other namespace: not seen
    server.delete("v1", "Service", "dns", "kube-system")
    assert w.next_event()["type"] == "DELETED"
    w.close()
    with pytest.raises(client.ApiException) as e:
        v1.read_namespaced_service("dns", "kube-system")
    assert e.value.status == 404 and json.loads(e.value.body)["reason"] == "NotFound"


def test_field_and_label_selectors(server, api):
    v1 = client.CoreV1Api(api)
    for name in ("node-a", "node-b"):
        server.put(node(name, labels={"zone": "z1"}))
    assert [n.metadata.name for n in v1.list_node(field_selector="metadata.name=node-a").items] == ["node-a"]
    assert v1.list_node(label_selector="zone=z2").items == []
    rv = server.resource_version
    w = Stream(v1.list_node, field_selector="metadata.name=node-a", resource_version=rv, timeout_seconds=5)
    server.put(node("node-b", ["10.0.2.0/24"], labels={"zone": "z1"}))
    server.put(node("node-a", ["10.0.1.0/24"], labels={"zone": "z1"}))
    ev = w.next_event()
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("MODIFIED", "node-a")
    w.close()
    # a label-selector watch sees an object leave and enter the selection
    w = Stream(v1.list_node, label_selector="zone=z1", resource_version=server.resource_version,
               timeout_seconds=5)
    server.put(node("node-a", labels={"zone": "z2"}))
    server.put(node("node-a", labels={"zone": "z1"}))
    assert [e["type"] for e in w.events(2)] == ["DELETED", "ADDED"]
    w.close()


def test_custom_resources_and_status_subresource(server, api):
    co = client.CustomObjectsApi(api)
    body = {"apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "tor1"},
            "spec": {"peerAS": 65001}, "status": {"state": "made-up"}}
    created = co.create_cluster_custom_object(*RA, "bgppeers", body)
    assert "status" not in created and created["metadata"]["generation"] == 1  # create ignores status
    with pytest.raises(client.ApiException) as e:
        co.create_cluster_custom_object(*RA, "bgppeers", body)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"

    st = co.patch_cluster_custom_object_status(*RA, "bgppeers", "tor1", {"status": {"state": "up"},
                                                                         "spec": {"peerAS": 1}})
    assert st["status"] == {"state": "up"} and st["spec"] == {"peerAS": 65001}
    assert st["metadata"]["generation"] == 1

    replaced = co.replace_cluster_custom_object(*RA, "bgppeers", "tor1", {
        **st, "spec": {"peerAS": 65002}, "status": {"state": "down"}})
    assert replaced["spec"] == {"peerAS": 65002} and replaced["status"] == {"state": "up"}
    assert replaced["metadata"]["generation"] == 2
    with pytest.raises(client.ApiException) as e:  # stale resourceVersion
        co.replace_cluster_custom_object(*RA, "bgppeers", "tor1", st)
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "Conflict"
    patched = co.patch_cluster_custom_object(*RA, "bgppeers", "tor1", {"metadata": {"labels": {"a": "b"}},
                                                                       "status": {"state": "x"}})
    assert patched["status"] == {"state": "up"} and patched["metadata"]["generation"] == 2
    got = co.get_cluster_custom_object_status(*RA, "bgppeers", "tor1")
    assert got["metadata"]["labels"] == {"a": "b"}
    st2 = co.replace_cluster_custom_object_status(*RA, "bgppeers", "tor1", {**got, "status": {"state": "idle"}})
    assert st2["status"] == {"state": "idle"}

    # any plural of the group works, and the test-side API derives plurals from kinds
    server.put({"apiVersion": "routeagent.io/v1alpha1", "kind": "RouteAgentNodeState",
                "metadata": {"name": "n1"}, "status": {"peers": []}})
    lst = co.list_cluster_custom_object(*RA, "routeagentnodestates")
    assert lst["items"][0]["kind"] == "RouteAgentNodeState" and lst["items"][0]["status"] == {"peers": []}
    co.delete_cluster_custom_object(*RA, "bgppeers", "tor1")
    assert co.list_cluster_custom_object(*RA, "bgppeers")["items"] == []
    with pytest.raises(client.ApiException) as e:
        co.list_cluster_custom_object("example.com", "v1", "things")
    assert e.value.status == 404 and json.loads(e.value.body)["kind"] == "Status"

    assert server.calls[("create", "routeagent.io", "bgppeers", "")] == 2
    assert server.calls[("patch", "routeagent.io", "bgppeers", "status")] == 1
    assert server.calls[("update", "routeagent.io", "bgppeers", "status")] == 1
    assert server.calls[("get", "routeagent.io", "bgppeers", "status")] == 1
    assert server.calls[("delete", "routeagent.io", "bgppeers", "")] == 1


def test_events_and_servicecidrs(server, api):
    v1, net = client.CoreV1Api(api), client.NetworkingV1Api(api)
    v1.create_namespaced_event("default", {"metadata": {"name": "e1"}, "reason": "PeerUp",
                                           "involvedObject": {"kind": "Node", "name": "a"}})
    v1.patch_namespaced_event("e1", "default", {"count": 2})
    assert v1.read_namespaced_event("e1", "default").count == 2
    server.put({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "kubernetes"},
                "spec": {"cidrs": ["10.96.0.0/16"]}})
    assert net.list_service_cidr().items[0].spec.cidrs == ["10.96.0.0/16"]
    assert server.calls[("patch", "", "events", "")] == 1
    assert server.calls[("list", "networking.k8s.io", "servicecidrs", "")] == 1


def test_noop_write_keeps_version(server):
    a = server.put(node("a", ["10.0.0.0/24"]))
    again = server.put(node("a", ["10.0.0.0/24"]))
    assert again["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    assert server.resource_version == a["metadata"]["resourceVersion"]


def test_bookmarks_advance_the_version(server, api):
    co = client.CustomObjectsApi(api)
    rv = server.resource_version
    w = Stream(co.list_cluster_custom_object, *RA, "bgppeers", resource_version=rv,
               allow_watch_bookmarks=True, timeout_seconds=5)
    server.put(node("a"))  # another resource moves the global version
    poll(lambda: w.next_event()["object"]["metadata"]["resourceVersion"] != rv)
    ev = w.next_event()
    assert ev["type"] == "BOOKMARK" and ev["object"]["metadata"]["resourceVersion"] == server.resource_version
    w.close()


def test_watch_from_compacted_version_gets_410(server, api):
    v1 = client.CoreV1Api(api)
    server.put(node("a"))
    old = server.resource_version
    server.put(node("a", ["10.0.0.0/24"]))
    server.compact()
    events = Stream(v1.list_node, resource_version=old, timeout_seconds=5).rest()
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    # from the current version the watch works
    w = Stream(v1.list_node, resource_version=server.resource_version, timeout_seconds=5)
    server.put(node("a", ["10.0.1.0/24"]))
    assert w.next_event()["type"] == "MODIFIED"
    w.close()


def test_history_window_overflow_gets_410():
    with KubeApiServer(history=5) as srv:
        api = client.ApiClient(client.Configuration(host=srv.url))
        first = srv.put(node("a"))["metadata"]["resourceVersion"]
        for i in range(10):
            srv.put(node("a", [f"10.0.{i}.0/24"]))
        events = Stream(client.CoreV1Api(api).list_node, resource_version=first, timeout_seconds=5).rest()
        assert events[0]["object"]["code"] == 410
        recent = str(int(srv.resource_version) - 3)
        w = Stream(client.CoreV1Api(api).list_node, resource_version=recent, timeout_seconds=5)
        assert len(w.events(3)) == 3
        w.close()


def test_timeout_ends_stream_cleanly_and_connection_is_reused(server, api):
    v1 = client.CoreV1Api(api)
    t0 = time.monotonic()
    assert Stream(v1.list_node, resource_version=server.resource_version, timeout_seconds=1).rest() == []
    assert 0.9 < time.monotonic() - t0 < 3
    assert v1.list_node().items == []


def test_close_watches_and_restart(server, api):
    v1 = client.CoreV1Api(api)
    server.put(node("a"))
    url = server.url
    w = Stream(v1.list_node, resource_version=server.resource_version, timeout_seconds=30)
    server.close_watches()
    with pytest.raises((urllib3.exceptions.HTTPError, OSError)):
        w.rest()
    w = Stream(v1.list_node, resource_version=server.resource_version, timeout_seconds=30)
    rv = server.resource_version
    server.restart()
    with pytest.raises((urllib3.exceptions.HTTPError, OSError)):
        w.rest()
    assert server.url == url and server.resource_version == rv
    assert [n.metadata.name for n in v1.list_node().items] == ["a"]


def test_many_objects():
    with KubeApiServer() as srv:
        t0 = time.monotonic()
        for i in range(2000):
            srv.put(service(f"s{i}", "default", [f"10.96.{i // 250}.{i % 250}"]))
        api = client.ApiClient(client.Configuration(host=srv.url))
        raw = json.loads(client.CoreV1Api(api).list_service_for_all_namespaces(_preload_content=False).data)
        assert len(raw["items"]) == 2000
        assert time.monotonic() - t0 < 5


def test_hang_answers_nothing_until_released(server, api):
    """A hung server accepts and reads requests, answers nothing, and open watches fall silent;
    released, the waiting requests are answered."""
    import threading

    v1 = client.CoreV1Api(api)
    server.put(node("a"))
    w = Stream(v1.list_node, resource_version=server.resource_version, allow_watch_bookmarks=True,
               timeout_seconds=30)
    poll(lambda: w.next_event()["type"] == "BOOKMARK")
    server.hang()
    answers = []
    t = threading.Thread(target=lambda: answers.append(v1.list_node()), daemon=True)
    t.start()
    t.join(1.0)
    assert answers == []  # the list waits
    with pytest.raises((urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.MaxRetryError)):
        Stream(v1.list_node, _request_timeout=(2, 0.5)).next_event()
    server.put(node("b"))  # the test side still works
    server.hang(False)
    t.join(5)
    assert sorted(n.metadata.name for n in answers[0].items) == ["a", "b"]
    ev = w.next_event()
    while ev["type"] == "BOOKMARK":  # the open watch carries on
        ev = w.next_event()
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "b"
