"""Cluster mode end to end: the test API server, the real agent in a node namespace, a BIRD "ToR".

The API server (`agent.k8s.testapi.KubeApiServer`, the real `kubernetes` client talks to it)
listens inside the ToR namespace on 10.0.0.1, so the agent reaches it over the same veth as its
BGP session. The agent runs as node ``node-a`` (labels ``rack: r1``, pod CIDR 10.244.1.0/24,
InternalIP 10.0.0.254); ``node-b`` owns 10.244.2.0/24. BIRD announces node-b's pod CIDR (to be
installed), a more specific of it and the cluster's Service CIDR (both refused by the guard).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from testlab import rbac
from testlab.k8sapi import KubeApiServer, endpoint_slice, node, service
from testlab.netns import agent_cmd, in_netns, sh, wait_for
from conftest import tor_config

RA = "routeagent.io/v1alpha1"
POD_A, POD_B = "10.244.1.0/24", "10.244.2.0/24"
INSIDE_B, SVC_CIDR = "10.244.2.128/25", "10.96.0.0/12"
LB_VIP, LOCAL_VIP, CLUSTER_IP = "198.51.100.10", "198.51.100.20", "10.96.0.10"


def cr(kind: str, name: str, spec: dict, labels: dict | None = None) -> dict:
    return {"apiVersion": RA, "kind": kind, "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


CONFIG = [
    cr("AgentConfig", "default", {"fib": {"staleSeconds": 15}, "serviceCIDRs": [SVC_CIDR]}),
    cr("BgpPeer", "tor", {"peerAddress": "10.0.0.1", "peerAS": 65001, "localAS": 65000,
                          "localAddress": "10.0.0.254", "holdTime": 9, "importPolicy": "acceptAll",
                          "exportPolicy": "acceptAll", "nodeSelector": {"matchLabels": {"rack": "r1"}}}),
    cr("BgpPeer", "elsewhere", {"peerAddress": "10.0.0.1", "peerAS": 65009, "localAS": 65000,
                                "nodeSelector": {"matchLabels": {"rack": "r2"}}}),
    cr("Advertisement", "pods", {"type": "podCIDR"}),
    cr("Advertisement", "services", {"type": "service", "services": {"clusterIP": False}}),
]


class Cluster:
    def __init__(self, lab, tmp) -> None:
        self.lab, self.tmp = lab, tmp
        self.api = KubeApiServer(host="10.0.0.1", bookmark_interval=0.5)
        with in_netns(lab.tor):
            self.api.start()
        self.kubeconfig = self.api.kubeconfig(tmp / "kubeconfig")
        self.proc: subprocess.Popen | None = None

    def restart_api(self, compact: bool = False) -> None:
        """Restart the API server; `compact`: with its history forgotten while it is down, so that
        every watch resumes from a compacted version (no bookmark can carry a newer one)."""
        with in_netns(self.lab.tor):
            self.api.stop()
            if compact:
                self.api.compact()
            self.api.start()

    def start_agent(self) -> None:
        self.start_agent_nowait()
        self.lab.node.wait_ready(self.proc, timeout=40)

    def start_agent_nowait(self) -> None:
        n = self.lab.node
        cmd = agent_cmd(n.ns, "run", "--kubernetes", "--kubeconfig", self.kubeconfig, "--node-name", "node-a",
                        "--state-dir", str(n.state))
        out = open(n.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                     cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        n.procs.append(self.proc)

    def close(self) -> None:
        self.api.stop()


@pytest.fixture
def cluster(bgp_lab, tmp_path):
    c = Cluster(bgp_lab, tmp_path)
    try:
        yield c
    finally:
        c.close()


def bird_has(bird, prefix: str) -> bool:
    out = bird.cmd("show", "route", "for", prefix, "table", "master4", "protocol", "n4", check=False)
    return prefix.split("/")[0] in out and "Network not found" not in out and prefix in out


def test_cluster_mode_end_to_end(cluster):
    lab, api = cluster.lab, cluster.api
    bird = lab.bird("tor", tor_config([POD_B, INSIDE_B, SVC_CIDR]))
    api.put(node("node-a", [POD_A], ["10.0.0.254"], {"rack": "r1"}))
    api.put(node("node-b", [POD_B], ["10.0.1.200"], {"rack": "r1"}))
    for obj in CONFIG:
        api.put(obj)
    cluster.start_agent()
    n = lab.node

    # learned: node-b's pod CIDR is installed; its more specific and the Service CIDR are refused
    n.wait_routes(lambda r: POD_B in r, timeout=30)
    routes = n.routes()
    assert INSIDE_B not in routes and SVC_CIDR not in routes
    verdicts = {v["reason"] for p in (INSIDE_B, SVC_CIDR) for v in n.api(f"/api/explain?prefix={p}")["bgp"]}
    assert verdicts == {"inside_cluster_prefix", "own_prefix"}
    # advertised: this node's pod CIDR (router id defaulted to the Node's InternalIP)
    wait_for(lambda: bird_has(bird, POD_A), 30, what="BIRD learns the pod CIDR")
    assert "10.0.0.254" in bird.cmd("show", "protocols", "all", "n4")

    # a LoadBalancer Service: BIRD learns its ingress VIP (ClusterIPs are not selected)
    api.put(service("web", cluster_ips=[CLUSTER_IP], type="LoadBalancer", lb_ips=[LB_VIP]))
    wait_for(lambda: bird_has(bird, f"{LB_VIP}/32"), 15, what="BIRD learns the LB VIP")
    assert not bird_has(bird, f"{CLUSTER_IP}/32")

    # externalTrafficPolicy Local follows the endpoint on this node
    api.put(service("local", cluster_ips=["10.96.0.20"], type="LoadBalancer", lb_ips=[LOCAL_VIP],
                    external_traffic_policy="Local"))
    api.put(endpoint_slice("local-1", "local", addresses=["10.244.2.5"], node_name="node-b"))
    # sync point: a second Local Service whose endpoint is here, its slice after the other one
    api.put(service("marker", cluster_ips=["10.96.0.21"], type="LoadBalancer", lb_ips=["198.51.100.21"],
                    external_traffic_policy="Local"))
    api.put(endpoint_slice("marker-1", "marker", addresses=["10.244.1.6"], node_name="node-a"))
    wait_for(lambda: bird_has(bird, "198.51.100.21/32"), 15, what="marker VIP")
    assert not bird_has(bird, f"{LOCAL_VIP}/32")
    api.put(endpoint_slice("local-1", "local", addresses=["10.244.1.5"], node_name="node-a"))
    wait_for(lambda: bird_has(bird, f"{LOCAL_VIP}/32"), 15, what="VIP with a local endpoint")
    api.put(endpoint_slice("local-1", "local", addresses=["10.244.1.5"], node_name="node-a", ready=False))
    wait_for(lambda: not bird_has(bird, f"{LOCAL_VIP}/32"), 15, what="VIP withdrawn: endpoint unready")

    # status object and events
    def status():
        st = (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status", {})
        fam = st.get("peers", [{}])[0].get("families", {}).get("ipv4-unicast", {})
        return st.get("peersUp") == 1 and fam.get("installed") == 1 and st
    st = wait_for(status, 40, what="RouteAgentNodeState status")
    fam = st["peers"][0]["families"]["ipv4-unicast"]
    assert fam["received"] == 3 and fam["accepted"] == 1 and fam["rejected"] == 2
    assert fam["advertised"] >= 2 and st["ready"] is True
    events = api.objects("v1", "Event")
    assert any(e.get("reason") == "BgpSessionUp" for e in events)

    # 410 Gone and an API server restart: nothing withdrawn, later changes still followed
    before = n.routes()
    cluster.restart_api(compact=True)
    api.put(service("web2", cluster_ips=["10.96.0.30"], type="LoadBalancer", lb_ips=["198.51.100.30"]))
    wait_for(lambda: bird_has(bird, "198.51.100.30/32"), 30, what="change after the API server restart")
    assert bird_has(bird, f"{LB_VIP}/32") and bird_has(bird, POD_A)
    assert n.routes() == before
    api.delete("v1", "Service", "web", "default")
    wait_for(lambda: not bird_has(bird, f"{LB_VIP}/32"), 15, what="deleted Service withdrawn")

    # an invalid change to the BgpPeer is rejected with its field; the last good one keeps running
    bad = dict(CONFIG[1], spec=dict(CONFIG[1]["spec"], peerAS=23456))
    api.put(bad)
    st = wait_for(lambda: (api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status", {}).get(
        "configErrors"), 30, what="configErrors in the status")
    assert any("BgpPeer/tor" in e and "spec.peerAS" in e and "AS_TRANS" in e for e in st)
    wait_for(lambda: any(e.get("reason") == "ConfigRejected" for e in api.objects("v1", "Event")), 10,
             what="ConfigRejected event")
    assert n.api("/api/peers")[0]["state"] == "up" and bird_has(bird, POD_A)
    api.put(CONFIG[1])  # fixed: the error goes away
    wait_for(lambda: not api.get(RA, "RouteAgentNodeState", "node-a")["status"]["configErrors"], 30,
             what="configErrors cleared")

    metrics = n.api("/metrics")
    assert 'route_agent_k8s_synced{resource="services"} 1.0' in metrics
    # the 410 above was met by a relist, by every reflector (all resumed from a compacted version)
    def relisted():
        text = n.api("/metrics")
        return {k: float(v) for k, v in re.findall(r'route_agent_k8s_relists_total\{resource="([^"]+)"\} (\S+)', text)}
    wait_for(lambda: relisted().get("services", 0) >= 1, 10, what="a relist after the 410")
    assert relisted().get("nodes", 0) >= 1

    # every call the agent made is allowed by deploy/rbac.yaml
    calls = set(api.calls)
    assert calls, "the test API server saw no calls"
    denied = [c for c in calls if not rbac.allowed(*c)]
    assert denied == []
    assert cluster.proc.poll() is None


def test_restart_while_api_server_is_down_flaps_nothing(cluster, monitor_factory):
    """The Kubernetes source gates the restart: an agent restarted while the API server is away,
    without a snapshot to run from, waits for its first full list before touching anything, then
    adopts every route unchanged."""
    lab, api = cluster.lab, cluster.api
    bird = lab.bird("tor", tor_config([POD_B]))
    api.put(node("node-a", [POD_A], ["10.0.0.254"], {"rack": "r1"}))
    api.put(node("node-b", [POD_B], ["10.0.1.200"], {"rack": "r1"}))
    for obj in CONFIG:
        api.put(obj)
    api.put(service("web", cluster_ips=[CLUSTER_IP], type="LoadBalancer", lb_ips=[LB_VIP]))
    cluster.start_agent()
    n = lab.node
    n.wait_routes(lambda r: POD_B in r, timeout=30)
    wait_for(lambda: bird_has(bird, f"{LB_VIP}/32"), 30, what="BIRD learns the LB VIP")
    mon = monitor_factory(n.ns)

    api.stop()
    n.kill(cluster.proc)
    os.unlink(n.state / "cluster-snapshot.json")  # the snapshot's case is the test below
    log_mark = len(n.logtext())
    cluster.start_agent_nowait()
    # the new agent runs and keeps trying to reach the API server; nothing is touched meanwhile
    wait_for(lambda: "route_agent.k8s" in n.logtext()[log_mark:], 20, what="reflectors retrying")
    mon.mark()
    assert mon.events() == [] and POD_B in n.routes()
    assert n.api("/healthz").strip() == "ok" and n.api("/readyz") is None  # alive, not ready

    with in_netns(lab.tor):
        api.start()
    n.wait_ready(cluster.proc, timeout=40)
    wait_for(lambda: n.api("/api/peers")[0]["state"] == "up", 30, what="session up again")
    wait_for(lambda: bird_has(bird, f"{LB_VIP}/32") and bird_has(bird, POD_A), 30, what="adverts back")
    mon.mark()
    assert mon.events() == [], "the restart changed kernel routes"
    assert POD_B in n.routes()


def readyz_verbose(ns: str) -> str:
    """/readyz?verbose, whatever the status code (503 while not ready)."""
    code = ("import urllib.request, urllib.error\n"
            "try: print(urllib.request.urlopen('http://127.0.0.1:9180/readyz?verbose', timeout=2).read().decode())\n"
            "except urllib.error.HTTPError as e: print(e.read().decode())\n")
    return sh(sys.executable, "-c", code, ns=ns, check=False).stdout


def test_hung_api_server_detected_and_restart_runs_from_the_snapshot(cluster, monitor_factory):
    """Issue 16 items 2 and 3. A hung API server (accepts, answers nothing) is detected by the
    silent watches within the stall bound learned from the bookmarks (/readyz?verbose, metrics);
    an agent restarted while it hangs runs BGP and the advertisements from the last-known-good
    snapshot, so the ToR keeps the pod CIDR and the VIP beyond the graceful-restart time (15 s
    here) and the kernel routes stay; when the API server answers again the live view takes over
    and a change made meanwhile is applied."""
    lab, api = cluster.lab, cluster.api
    bird = lab.bird("tor", tor_config([POD_B]))
    api.put(node("node-a", [POD_A], ["10.0.0.254"], {"rack": "r1"}))
    api.put(node("node-b", [POD_B], ["10.0.1.200"], {"rack": "r1"}))
    for obj in CONFIG:
        api.put(obj)
    api.put(dict(CONFIG[1], spec=dict(CONFIG[1]["spec"], gracefulRestartSeconds=15)))
    api.put(service("web", cluster_ips=[CLUSTER_IP], type="LoadBalancer", lb_ips=[LB_VIP]))
    cluster.start_agent()
    n = lab.node
    n.wait_routes(lambda r: POD_B in r, timeout=30)
    wait_for(lambda: bird_has(bird, f"{LB_VIP}/32") and bird_has(bird, POD_A), 30, what="adverts")
    wait_for(lambda: (n.state / "cluster-snapshot.json").exists(), 15, what="the snapshot")

    # a hung API server: the silent watches say so within the learned stall bound (5 s here)
    wait_for(lambda: "stalled after 5s" in readyz_verbose(n.ns), 10, what="stall bound learned")
    api.hang()
    t0 = time.monotonic()
    try:
        wait_for(lambda: "[-]kubernetes-api" in readyz_verbose(n.ns), 20, interval=0.2, what="hung API seen")
        detected = time.monotonic() - t0
        print(f"hung API server detected after {detected:.1f}s")
        assert detected < 12
        assert "route_agent_k8s_api_connected 0.0" in n.api("/metrics")
        assert bird_has(bird, POD_A) and n.api("/api/peers")[0]["state"] == "up"  # routing unaffected
    finally:
        api.hang(False)
    wait_for(lambda: "route_agent_k8s_api_connected 1.0" in n.api("/metrics"), 30, what="API answering again")
    stalls = sum(float(v) for v in re.findall(r'route_agent_k8s_watch_stalls_total\{resource="[^"]+"\} (\S+)',
                                              n.api("/metrics")))
    assert stalls >= 1

    # restart while the API server hangs: BGP from the snapshot, nothing withdrawn at the ToR
    mon = monitor_factory(n.ns)
    api.hang()
    try:
        n.kill(cluster.proc)
        killed = time.monotonic()
        cluster.start_agent_nowait()
        missing, down, up_again = [], None, None
        while time.monotonic() - killed < 25:  # beyond the 15 s the ToR keeps stale routes
            for prefix in (POD_A, f"{LB_VIP}/32"):
                if not bird_has(bird, prefix):
                    missing.append((round(time.monotonic() - killed, 1), prefix))
            established = "Established" in bird.cmd("show", "protocols", "n4", check=False)
            if not established and down is None:
                down = time.monotonic() - killed
            elif established and down is not None and up_again is None:
                up_again = time.monotonic() - killed
        print(f"session down at the ToR {down}s after the kill, up again from the snapshot after {up_again}s")
        assert missing == [], f"withdrawn at the ToR: {missing[:5]}"
        assert up_again is not None and up_again < 15
        assert n.api("/api/peers")[0]["state"] == "up"
        verbose = readyz_verbose(n.ns)
        assert "[-]kubernetes-config not ok: running from the last-known-good snapshot" in verbose
        assert "route_agent_k8s_config_from_snapshot 1.0" in n.api("/metrics")
        # a change while the agent cannot see it
        api.put(service("web2", cluster_ips=["10.96.0.30"], type="LoadBalancer", lb_ips=["198.51.100.30"]))
    finally:
        api.hang(False)
    wait_for(lambda: bird_has(bird, "198.51.100.30/32"), 30, what="the live view's new VIP")
    wait_for(lambda: "[+]kubernetes-config ok: live" in readyz_verbose(n.ns), 10, what="live again")
    st = wait_for(lambda: ((api.get(RA, "RouteAgentNodeState", "node-a") or {}).get("status") or {}).get(
        "configSource") == "live" and api.get(RA, "RouteAgentNodeState", "node-a")["status"], 30,
        what="status: live")
    assert st["apiServer"]["connected"] is True
    assert bird_has(bird, POD_A) and bird_has(bird, f"{LB_VIP}/32")
    mon.mark()
    assert mon.events() == [], "the restart changed kernel routes"
    assert POD_B in n.routes()
