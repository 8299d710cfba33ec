"""The reflector (agent.k8s.reflector) with the real `kubernetes` client against the local API server."""

import functools
import threading
import time

import pytest
from kubernetes import client

from agent.k8s.reflector import Batch, Reflector, default_key
from testlab.netns import wait_for
from testlab.k8sapi import KubeApiServer, endpoint_slice, node, service

RA = ("routeagent.io", "v1alpha1")


poll = functools.partial(wait_for, timeout=5.0, interval=0.01)


class Sink:
    """Collects batches (called from the reflector thread) and applies them to `state`."""

    def __init__(self, key=default_key):
        self.batches: list[Batch] = []
        self.state: dict = {}
        self._key = key
        self._lock = threading.Lock()

    def __call__(self, batch: Batch) -> None:
        with self._lock:
            self.batches.append(batch)
            for k in batch.deletes:
                assert k in self.state, f"delete of unknown key {k}"
                del self.state[k]
            for obj in batch.upserts:
                self.state[self._key(obj)] = obj

    def since(self, n):
        with self._lock:
            return self.batches[n:]

    def names(self):
        with self._lock:
            return sorted(self.state)


@pytest.fixture
def server():
    srv = KubeApiServer(bookmark_interval=0.1).start()
    yield srv
    srv.stop()


@pytest.fixture
def api(server):
    c = client.ApiClient(client.Configuration(host=server.url))
    yield c
    c.close()


@pytest.fixture
def run():
    started = []

    def make(name, list_fn, sink, **kw):
        kw.setdefault("backoff", (0.02, 0.1))
        kw.setdefault("watch_timeout", 30)
        r = Reflector(name, list_fn, sink, **kw)
        r.start()
        started.append(r)
        return r

    yield make
    for r in started:
        r.stop()


def rv_of(obj):
    return obj["metadata"]["resourceVersion"]


def test_initial_list_then_live_changes(server, api, run):
    server.put(node("a", ["10.0.0.0/24"]))
    server.put(node("b", ["10.0.1.0/24"]))
    sink = Sink()
    r = run("nodes", client.CoreV1Api(api).list_node, sink)
    poll(lambda: r.synced)
    first = sink.batches[0]
    assert first.synced and first.resource == "nodes" and first.deletes == ()
    assert sorted(o["metadata"]["name"] for o in first.upserts) == ["a", "b"]
    assert first.upserts[0]["kind"] == "Node"  # list items get their kind back

    server.put(node("a", ["10.0.9.0/24"]))
    poll(lambda: sink.state["a"]["spec"]["podCIDRs"] == ["10.0.9.0/24"])
    server.put(node("c"))
    server.delete("v1", "Node", "b")
    poll(lambda: sink.names() == ["a", "c"])
    later = sink.since(1)
    assert not any(b.synced for b in later)
    assert sum(len(b.upserts) for b in later) == 2 and [k for b in later for k in b.deletes] == ["b"]
    assert r.relists == 0 and r.events == 3


def test_410_relists_and_emits_only_real_changes(server, api, run):
    for name in ("keep", "change", "drop"):
        server.put(service(name, "default", ["10.96.0.1"]))
    sink = Sink()
    r = run("services", client.CoreV1Api(api).list_service_for_all_namespaces, sink)
    poll(lambda: r.synced)
    n = len(sink.batches)

    server.stop()  # disconnected: the reflector misses these changes
    server.put(service("change", "default", ["10.96.0.2"]))
    server.delete("v1", "Service", "drop", "default")
    server.put(service("new", "kube-system", ["10.96.0.3"]))
    server.compact()  # and its version is too old when it comes back
    server.start()

    poll(lambda: r.relists == 1)
    poll(lambda: len(sink.batches) > n)
    (batch,) = sink.since(n)
    assert batch.synced
    assert sorted(default_key(o) for o in batch.upserts) == ["default/change", "kube-system/new"]
    assert batch.deletes == ("default/drop",)
    assert sink.names() == ["default/change", "default/keep", "kube-system/new"]
    # watching again from the relist (whether the disconnect surfaced as an error, `restarts`, or
    # urllib3 retried the watch request by itself, which a loaded machine's timing makes likely)
    server.put(service("later", "default", ["10.96.0.4"]))
    poll(lambda: "default/later" in sink.names())


def test_410_without_changes_is_an_empty_synced_batch(server, api, run):
    server.put(endpoint_slice("web-1", "web", "default", ["10.0.0.5"]))
    sink = Sink()
    r = run("endpointslices", client.DiscoveryV1Api(api).list_endpoint_slice_for_all_namespaces, sink)
    poll(lambda: r.synced)
    server.compact()
    server.close_watches()
    poll(lambda: r.relists == 1)
    poll(lambda: len(sink.batches) == 2)
    assert sink.batches[1] == Batch("endpointslices", (), (), True)
    server.put(endpoint_slice("web-1", "web", "default", ["10.0.0.6"]))
    poll(lambda: sink.state["default/web-1"]["endpoints"][0]["addresses"] == ["10.0.0.6"])


def test_restart_is_survived_by_rewatching(server, api, run):
    sink = Sink()
    lister = functools.partial(client.CustomObjectsApi(api).list_cluster_custom_object, *RA, "bgppeers")
    r = run("bgppeers", lister, sink)
    poll(lambda: r.synced)
    server.put({"apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "tor1"},
                "spec": {"peerAS": 65001}})
    poll(lambda: sink.names() == ["tor1"])

    server.restart()  # connections drop; objects and versions survive
    server.put({"apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "tor2"},
                "spec": {"peerAS": 65002}})
    poll(lambda: sink.names() == ["tor1", "tor2"])

    server.stop()  # down for a while, changes meanwhile; history still covers them: no relist
    server.delete("routeagent.io/v1alpha1", "BgpPeer", "tor1")
    server.start()
    poll(lambda: sink.names() == ["tor2"])
    assert r.relists == 0 and r.restarts >= 1
    assert not any(b.synced for b in sink.batches[1:])


def test_bookmarks_advance_the_version(server, api, run):
    sink = Sink()
    watches = []
    lister = functools.partial(client.CustomObjectsApi(api).list_cluster_custom_object, *RA, "staticroutes")

    def recording(**kw):
        if kw.get("watch"):
            watches.append(kw["resource_version"])
        return lister(**kw)

    r = run("staticroutes", recording, sink)
    poll(lambda: r.synced)
    start = r.resource_version
    server.put(node("a"))  # another resource moves the global version
    poll(lambda: r.resource_version == server.resource_version != start)
    server.close_watches()  # the re-watch resumes from the bookmarked version
    poll(lambda: watches[-1] == server.resource_version)
    server.put({"apiVersion": "routeagent.io/v1alpha1", "kind": "StaticRoutes", "metadata": {"name": "s"},
                "spec": {}})
    poll(lambda: sink.names() == ["s"])
    assert r.relists == 0


def test_field_selector_and_transform(server, api, run):
    server.put(node("node-a", ["10.0.0.0/24"]))
    server.put(node("node-b", ["10.0.1.0/24"]))

    def transform(obj):
        if obj["metadata"].get("labels", {}).get("ignore"):
            return None
        return obj["metadata"]["name"], tuple(obj["spec"].get("podCIDRs", ()))

    sink = Sink(key=lambda value: value[0])
    r = run("node", client.CoreV1Api(api).list_node, sink, transform=transform,
            list_kwargs={"field_selector": "metadata.name=node-a"})
    poll(lambda: r.synced)
    assert sink.state == {"node-a": ("node-a", ("10.0.0.0/24",))}
    server.put(node("node-b", ["10.0.2.0/24"]))
    server.put(node("node-a", ["10.0.3.0/24"]))
    poll(lambda: sink.state["node-a"] == ("node-a", ("10.0.3.0/24",)))
    server.put(node("node-a", ["10.0.3.0/24"], labels={"ignore": "yes"}))  # now ignored: a delete
    poll(lambda: sink.state == {})
    assert sink.batches[-1].deletes == ("node-a",)


def test_not_served_resource_is_an_empty_synced_batch_once(server, api, run):
    calls = []
    lister = functools.partial(client.CustomObjectsApi(api).list_cluster_custom_object, "example.com", "v1",
                               "things")

    def counting(**kw):
        calls.append(kw)
        return lister(**kw)

    sink = Sink()
    r = run("things", counting, sink, not_found_retry=0.05)
    poll(lambda: len(calls) >= 4)
    assert sink.batches == [Batch("things", (), (), True)] and r.synced


def test_starts_while_the_server_is_down(server, api, run):
    server.put(node("a"))
    server.stop()
    sink = Sink()
    r = run("nodes", client.CoreV1Api(api).list_node, sink)
    poll(lambda: r.errors >= 1)
    assert not r.synced and sink.batches == []
    server.start()
    poll(lambda: r.synced)
    assert sink.names() == ["a"]


def test_burst_arrives_complete(server, api, run):
    sink = Sink()
    r = run("services", client.CoreV1Api(api).list_service_for_all_namespaces, sink)
    poll(lambda: r.synced)
    for i in range(500):
        server.put(service(f"s{i}", "default", [f"10.96.{i // 250}.{i % 250}"]))
    for i in range(0, 500, 2):
        server.delete("v1", "Service", f"s{i}", "default")
    poll(lambda: len(sink.names()) == 250)
    assert sink.names() == sorted(f"default/s{i}" for i in range(1, 500, 2))
    assert r.events == 750 and len(sink.batches) <= 751


def test_stop_is_prompt(server, api, run):
    sink = Sink()
    r = run("nodes", client.CoreV1Api(api).list_node, sink, watch_timeout=300)
    poll(lambda: r.synced)
    poll(lambda: r._resp is not None)  # inside the watch
    t0 = time.monotonic()
    r.stop()
    assert time.monotonic() - t0 < 1.0 and not r._thread.is_alive()


def test_list_in_pages_is_one_synced_batch(server, api, run):
    for i in range(10):
        server.put(node(f"n{i}", [f"10.244.{i}.0/24"]))
    sink = Sink()
    r = run("nodes", client.CoreV1Api(api).list_node, sink, page_size=3)
    poll(lambda: r.synced)
    assert [len(b.upserts) for b in sink.batches] == [10] and sink.batches[0].synced
    assert sink.names() == [f"n{i}" for i in range(10)]
    assert server.calls[("list", "", "nodes", "")] == 4  # 3 + 3 + 3 + 1


def test_expired_continue_token_relists_without_half_applied_state(server, api):
    """A 410 on a continue token (the snapshot expired between two pages) restarts the list; the
    store is only written when the last page has been read."""
    for i in range(4):
        server.put(node(f"n{i}", []))
    sink = Sink()
    r = Reflector("nodes", client.CoreV1Api(api).list_node, sink, page_size=2, backoff=(0.01, 0.05))
    real = r._call
    calls = []

    def flaky(**kw):
        calls.append(kw.get("_continue"))
        if kw.get("_continue") and len(calls) == 2:
            server._snapshots.clear()  # the server forgot the snapshot: 410 Expired
        return real(**kw)

    r._call = flaky
    r.start()
    try:
        poll(lambda: r.synced)
    finally:
        r.stop()
    assert calls[0] is None and calls[1] and calls[2] is None  # the list started over
    assert [len(b.upserts) for b in sink.batches] == [4]
    assert sink.names() == ["n0", "n1", "n2", "n3"]


def test_stall_bound_is_learned_from_the_bookmarks():
    r = Reflector("x", lambda **kw: None, lambda b: None, watch_timeout=300)
    assert r.stall_bound == 330  # no bookmark seen yet: the server may send none
    r._bookmark_gap, r._bookmarks_seen = 60.2, 5  # kube-apiserver: about one a minute
    assert r.stall_bound == pytest.approx(91.3)
    r._bookmark_gap = 0.1  # a fast test server: the floor
    assert r.stall_bound == 5.0
    r._bookmark_gap = 400
    assert r.stall_bound == 330  # never beyond the request timeout
    assert Reflector("y", None, None, stall_timeout=2.5).stall_bound == 2.5


def test_hung_server_is_detected_by_the_silent_watch_and_relisted(server, api, run):
    """Issue 16.3: a hung API server (accepts, answers nothing) stops the bookmarks; after the
    learned stall bound the watch counts as stalled, connectivity says so, and the resource is
    re-listed when the server answers again, changes made meanwhile included."""
    server.put(node("a"))
    sink = Sink()
    r = run("nodes", client.CoreV1Api(api).list_node, sink, watch_timeout=300, list_timeout=30)
    poll(lambda: r.synced and r.connected)
    poll(lambda: r.stall_bound == 5.0)  # learned from bookmarks every 0.1 s: the floor
    server.hang()
    hung = time.monotonic()
    try:
        wait_for(lambda: r.stalls == 1, 15, interval=0.05, what="stall detected")
        detected = time.monotonic() - hung
        assert 4.5 <= detected < 9, detected
        assert not r.connected and "stalled" in r.last_error
        server.put(node("b"))  # written while hung (the test side still works)
    finally:
        server.hang(False)
    poll(lambda: sink.names() == ["a", "b"] and r.connected)
    assert r.relists == 1
