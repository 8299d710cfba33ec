"""The Kubernetes adapter against the test API server: credentials, status object, Events, RBAC."""

from __future__ import annotations

import pytest
from kubernetes.config import incluster_config

from agent.k8s import source
from testlab import rbac
from testlab.k8sapi import KubeApiServer, node
from testlab.netns import wait_for

RA = "routeagent.io/v1alpha1"


@pytest.fixture
def api():
    with KubeApiServer(bookmark_interval=0.2) as server:
        server.put(node("node-a"))  # the agent's Node: owner of its state, subject of its Events
        yield server


def test_in_cluster_credentials(tmp_path, monkeypatch):
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("secret-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = source.api_client().configuration
    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.api_key["BearerToken"] == "bearer secret-token"
    assert cfg.ssl_ca_cert == str(ca)
    assert cfg.connection_pool_maxsize >= 2 * len(source.RESOURCES)


def test_kubeconfig_wins_over_in_cluster(api, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    cfg = source.api_client(api.kubeconfig(tmp_path / "kc")).configuration
    assert cfg.host == api.url


def test_status_object_created_then_only_status_patched(api, tmp_path):
    ks = source.KubeSource("node-a", lambda batch: None, kubeconfig=api.kubeconfig(tmp_path / "kc"))
    try:
        ks.publish_status({"ready": False, "peersUp": 0})
        obj = wait_for(lambda: api.get(RA, "RouteAgentNodeState", "node-a"), 5, what="status object")
        assert obj["spec"] == {"nodeName": "node-a"}
        wait_for(lambda: api.get(RA, "RouteAgentNodeState", "node-a").get("status", {}).get("peersUp") == 0, 5)
        ks.publish_status({"ready": True, "peersUp": 2})
        wait_for(lambda: api.get(RA, "RouteAgentNodeState", "node-a")["status"] == {"ready": True, "peersUp": 2},
                 5, what="status patched")
        # deleted by someone: created again by the next update
        api.delete(RA, "RouteAgentNodeState", "node-a")
        ks.publish_status({"ready": True, "peersUp": 1})  # fails (404), forgets the object
        wait_for(lambda: ks.write_errors == 1, 5)
        ks.publish_status({"ready": True, "peersUp": 1})
        wait_for(lambda: (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status", {}).get("peersUp") == 1,
                 5, what="status object re-created")
    finally:
        ks.stop()
    assert [c for c in api.calls if not rbac.allowed(*c)] == []


def test_events_are_about_the_node_and_rate_limited(api, tmp_path):
    ks = source.KubeSource("node-a", lambda batch: None, kubeconfig=api.kubeconfig(tmp_path / "kc"))
    try:
        ks.event("BgpSessionDown", "BGP session with 10.0.0.1 down", warning=True)
        ks.event("BgpSessionDown", "BGP session with 10.0.0.1 down", warning=True)  # repeat: dropped
        ks.event("BgpSessionUp", "BGP session with 10.0.0.1 up")
        wait_for(lambda: len(api.objects("v1", "Event")) == 2, 5, what="two events")
    finally:
        ks.stop()
    events = {e["reason"]: e for e in api.objects("v1", "Event")}
    assert events["BgpSessionDown"]["type"] == "Warning"
    uid = api.get("v1", "Node", "node-a")["metadata"]["uid"]
    assert events["BgpSessionUp"]["involvedObject"] == {"kind": "Node", "name": "node-a", "apiVersion": "v1",
                                                        "uid": uid}
    assert events["BgpSessionUp"]["metadata"]["namespace"] == "default"
    assert [c for c in api.calls if not rbac.allowed(*c)] == []


def test_event_writes_waiting_for_a_hung_api_server_are_bounded(api, tmp_path, monkeypatch):
    """Events queue in the writer thread while the API server does not answer: at the bound the
    next ones are dropped and counted, not queued without end (issue 12 item 7)."""
    import threading

    ks = source.KubeSource("node-a", lambda batch: None, kubeconfig=api.kubeconfig(tmp_path / "kc"))
    release = threading.Event()
    monkeypatch.setattr(ks.core, "create_namespaced_event", lambda *a, **k: release.wait(10))
    try:
        for i in range(source.MAX_PENDING_EVENTS + 50):
            ks.event("BgpSessionDown", f"BGP session with 10.0.0.{i} down", warning=True)
        assert ks.events_dropped == 50
        release.set()
        wait_for(lambda: ks._events_pending == 0, 10, what="pending Event writes done")
        ks.event("BgpSessionUp", "BGP session with 10.0.0.1 up")  # room again
        assert ks.events_dropped == 50
    finally:
        release.set()
        ks.stop()


async def test_agent_without_kubernetes_credentials_fails_clearly(tmp_path, monkeypatch):
    from agent.config.loader import ConfigError
    from agent.daemon.agent import Agent

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    agent = Agent(None, kubernetes=True, kubeconfig=str(tmp_path / "missing"), node_name="node-a",
                  state_dir=str(tmp_path / "state"), api_port=0)
    with pytest.raises(ConfigError, match="cannot set up the Kubernetes client"):
        await agent.run()


def test_status_is_replaced_as_a_whole_no_key_of_an_older_status_remains(api, tmp_path):
    """Issue 16.4: a merge patch left `advertised: {ipv4: 2}` of an earlier status next to
    `advertisedTotal: 0`; the status is now replaced as a whole."""
    ks = source.KubeSource("node-a", lambda batch: None, kubeconfig=api.kubeconfig(tmp_path / "kc"))
    try:
        ks.publish_status({"advertised": {"ipv4": 2}, "advertisedTotal": 2, "peers": [{"name": "x"}]})
        wait_for(lambda: (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status", {}).get(
            "advertisedTotal") == 2, 5, what="first status")
        ks.publish_status({"advertised": {"ipv6": 0}, "advertisedTotal": 0})
        wait_for(lambda: api.get(RA, "RouteAgentNodeState", "node-a")["status"] == {
            "advertised": {"ipv6": 0}, "advertisedTotal": 0}, 5, what="status replaced")
    finally:
        ks.stop()
    assert [c for c in api.calls if not rbac.allowed(*c)] == []
