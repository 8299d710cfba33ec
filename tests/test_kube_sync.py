"""Cluster mode's KubeSync against the test API server, without a kernel (issue 16 items 2 and 6):
a restart while the API server hangs runs from the last-known-good snapshot and hands over to
the live view; a wrong node name and an ignored AgentConfig spec.api are said plainly; a deleted
RouteAgentNodeState is written again at once."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time

import pytest

from agent.api.metrics import Metrics
from agent.api.readview import FibCounts
from agent.daemon import kube as kubemod
from agent.daemon.events import EventQueue
from agent.daemon.kube import API_IGNORED, KubeSync
from agent.daemon.status import StatusPublisher
from agent.k8s import snapshot
from agent.k8s.cluster import ClusterState
from testlab.k8sapi import KubeApiServer, node, service
from testlab.netns import wait_for

RA = "routeagent.io/v1alpha1"
VIP, VIP2 = "198.51.100.10", "198.51.100.30"


def cr(kind, name, spec):
    return {"apiVersion": RA, "kind": kind, "metadata": {"name": name}, "spec": spec}


CONFIG = [
    cr("BgpPeer", "tor", {"peerAddress": "10.0.0.1", "peerAS": 65001, "localAS": 65000,
                          "importPolicy": "acceptAll", "nodeSelector": {"matchLabels": {"rack": "r1"}}}),
    cr("Advertisement", "pods", {"type": "podCIDR"}),
    cr("Advertisement", "lbs", {"type": "service", "services": {"clusterIP": False}}),
]


class FakeGate:
    def __init__(self):
        self.waiting = {"kubernetes"}


class FakeRouting:
    """What KubeSync calls on the routing state: records the configurations it is given."""

    def __init__(self):
        self.gate = FakeGate()
        self.loaded = []
        self.guard_calls = 0

    def load_config(self, config):
        self.loaded.append(config)

    def cluster_guard(self):
        self.guard_calls += 1

    def source_synced(self, name):
        self.gate.waiting.discard(name)


@pytest.fixture
def api():
    with KubeApiServer(bookmark_interval=0.2) as server:
        server.put(node("node-a", ["10.244.1.0/24"], ["10.0.0.254"], {"rack": "r1"}))
        for obj in CONFIG:
            server.put(obj)
        server.put(service("web", cluster_ips=["10.96.0.10"], type="LoadBalancer", lb_ips=[VIP]))
        yield server


def make(api, tmp_path, node_name="node-a"):
    metrics = Metrics()
    queue = EventQueue(counter=metrics.queue_overflows)
    ks = KubeSync(ClusterState(node_name), node_name, api.kubeconfig(tmp_path / "kc"), queue, metrics,
                  state_dir=str(tmp_path))
    ks.routing = FakeRouting()
    return ks


async def pump(ks: KubeSync, until, timeout: float = 10.0) -> list:
    """Run the core task's share: handle k8s batches, commit after each pass; other events are
    returned (status requests)."""
    others = []
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "timed out"
        try:
            ev = await asyncio.wait_for(ks.queue.get(), 0.2)
        except TimeoutError:
            ks.commit()  # (the core task's pass after the status tick)
            continue
        if ev.kind == "k8s":
            ks.handle(ev.data)
        else:
            others.append(ev)
        if ks.queue.empty():
            ks.commit()
    return others


async def until(cond, timeout: float, what: str):
    """`wait_for` that lets the event loop run meanwhile."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def lbs(config) -> tuple:
    return next(a.spec.prefixes for a in config.adverts if a.metadata.name == "lbs")


async def test_restart_with_a_hung_api_server_runs_from_the_snapshot_then_goes_live(api, tmp_path):
    first = make(api, tmp_path)
    await first.start()
    await pump(first, lambda: first.cluster.synced and not first.routing.gate.waiting)
    first.stop()  # writes the snapshot (it was written after the first full list too)
    path = tmp_path / snapshot.FILENAME
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert saved["version"] == snapshot.VERSION and saved["node"] == "node-a"
    assert saved["state"]["vips"] == {"lbs": [f"{VIP}/32"]}

    api.hang()  # frozen: connections accepted, nothing answered
    try:
        second = make(api, tmp_path)
        t0 = time.monotonic()
        restored = await second.start()
        waited = time.monotonic() - t0
        assert kubemod.LIVE_WAIT_SECONDS <= waited < kubemod.LIVE_WAIT_SECONDS + 2
        assert second.cluster.seeded and second.config_state()["config_source"] == "snapshot"
        assert [p.metadata.name for p in restored.peers] == ["tor"]
        assert lbs(restored) == (f"{VIP}/32",) and restored.adverts == second.cluster.expand(
            second.base_config).adverts
        # changed while the agent could not see it
        api.delete("v1", "Service", "web", "default")
        api.put(service("web2", cluster_ips=["10.96.0.30"], type="LoadBalancer", lb_ips=[VIP2]))
    finally:
        api.hang(False)
    await pump(second, lambda: not second.cluster.seeded and not second.routing.gate.waiting)
    assert lbs(second.routing.loaded[-1]) == (f"{VIP2}/32",)  # the live view took over
    assert second.config_state() == {"config_source": "live", "snapshot_age": None, "warnings": (),
                                     "node_missing": False}
    second.stop()
    assert json.loads(path.read_text())["state"]["vips"] == {"lbs": [f"{VIP2}/32"]}


async def test_without_a_snapshot_the_agent_waits_for_the_api_server(api, tmp_path):
    api.hang()
    ks = make(api, tmp_path)
    task = asyncio.create_task(ks.start())
    try:
        await asyncio.sleep(kubemod.LIVE_WAIT_SECONDS + 1)
        assert not task.done()  # nothing to run from: nothing is started
    finally:
        api.hang(False)
    await asyncio.wait_for(task, 15)
    assert not ks.cluster.seeded
    ks.stop()


async def test_a_wrong_node_name_says_the_node_does_not_exist(api, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(kubemod, "WAIT_LOG_SECONDS", 0.5)
    ks = make(api, tmp_path, node_name="node-x")
    task = asyncio.create_task(ks.start())
    try:
        await until(lambda: "Node node-x does not exist (1 Nodes listed: node-a)" in caplog.text, 10,
                    "the message")
        await asyncio.sleep(0.6)
        assert "Node node-x does not exist" in caplog.text and "still waiting" not in caplog.text
    finally:
        task.cancel()
        ks.stop()


async def test_agentconfig_spec_api_in_cluster_mode_is_warned(api, tmp_path):
    api.put(cr("AgentConfig", "default", {"api": {"port": 9999}}))
    ks = make(api, tmp_path)
    await ks.start()
    assert ks.warnings == (API_IGNORED,)
    wait_for(lambda: any(e.get("reason") == "ConfigIgnored" and e["type"] == "Warning"
                         for e in api.objects("v1", "Event")), 5, what="the Event")
    api.put(cr("AgentConfig", "default", {}))
    await pump(ks, lambda: ks.warnings == ())
    ks.stop()


class StatusView:
    """The read view as far as `node_status` needs it."""

    def ready(self):
        return True

    def bgp_counts(self):
        return None

    def peers(self):
        return []

    def config_problems(self):
        return []

    def fib_counts(self):
        return FibCounts(0, 0, 0, 0, 0)

    def k8s_counts(self):
        return None


async def test_a_deleted_node_state_is_written_again_at_once(api, tmp_path):
    ks = make(api, tmp_path)
    await ks.start()
    publisher = StatusPublisher(StatusView(), ks.kube.publish_status)
    publisher.publish("periodic")
    wait_for(lambda: (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status"), 5, what="status")
    publisher.publish("periodic")  # unchanged: nothing written
    api.delete(RA, "RouteAgentNodeState", "node-a")
    t0 = time.monotonic()
    recreate = []
    while not recreate:  # the core task's share: the watch's DELETED asks for a status write
        assert time.monotonic() - t0 < 5, "no recreate request"
        try:
            ev = await asyncio.wait_for(ks.queue.get(), 0.2)
        except TimeoutError:
            continue
        if ev.kind == "k8s":
            ks.handle(ev.data)
        elif ev.kind == "status" and ev.data == "recreate":
            recreate.append(ev)
    publisher.publish("recreate")
    wait_for(lambda: (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status", {}).get("ready"), 5,
             what="the state object written again")
    assert time.monotonic() - t0 < 3
    ks.stop()
