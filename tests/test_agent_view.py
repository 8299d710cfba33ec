"""The daemon's read view (what the API, the metrics and the status see), without a kernel."""

from prometheus_client import generate_latest

from agent.core.model import Prefix
from agent.daemon.agent import Agent
from agent.daemon.status import node_status

CONFIG = """apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: s}
spec:
  routes:
    - {prefix: 192.0.2.0/24, blackhole: true}
    - {prefix: 2001:db8::/32, blackhole: true}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.2}
"""


def make(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    agent = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n")
    agent.routing.load_config(agent.config)
    return agent


async def test_view_rows_metrics_and_status(tmp_path):
    agent = make(tmp_path)
    view = agent.view
    rows = view.rib_rows(sorted(view.rib_prefixes()))
    assert [r["prefix"] for r in rows] == ["192.0.2.0/24", "2001:db8::/32"]
    assert rows[0]["candidates"][0]["origin"] == "static/s" and rows[0]["installed"] is False
    assert view.fib()["gate_open"] is False and view.ready() is False
    assert [p["address"] for p in view.peers()] == ["10.0.0.1"]
    text = generate_latest(agent.metrics.registry).decode()
    assert 'route_agent_rib_routes{kind="static",origin="s"} 2.0' in text
    assert 'route_agent_bgp_session_up{peer="10.0.0.1"} 0.0' in text  # not up yet
    assert 'route_agent_bgp_prefixes_advertised{family="ipv4",peer="10.0.0.1"} 0.0' in text
    assert 'route_agent_fib_routes{family="ipv6"} 0.0' in text
    status = node_status(view)
    assert status["peersTotal"] == 1 and status["ready"] is False and status["configErrors"] == []
    explained = view.explain(Prefix.parse("192.0.2.0/24"))
    assert explained["fib_state"].startswith("pending") and explained["bgp"] == []


def _check_invariants(status: dict) -> None:
    """What the CRD's field descriptions promise (agent.config.nodestate)."""
    from agent.config.nodestate import RouteAgentNodeStateStatus

    RouteAgentNodeStateStatus.model_validate(status, by_alias=True, by_name=False)  # every field described
    assert status["peersTotal"] == len(status["peers"]) and status["peersUp"] <= status["peersTotal"]
    sums = {"ipv4": 0, "ipv6": 0}
    for peer in status["peers"]:
        for fam, c in peer["families"].items():
            assert c["received"] == c["accepted"] + c["rejected"], (peer["name"], fam, c)
            sums["ipv6" if fam.startswith("ipv6") else "ipv4"] += c["advertised"]
    assert status["advertised"] == sums
    assert status["advertisedTotal"] == sums["ipv4"] + sums["ipv6"]


async def test_status_counters_add_up_after_refreshes_and_without_peers(tmp_path):
    """Issue 16.4: after route refreshes the status read received 9, accepted 1, rejected 6 (two
    cumulative, one current), and without peers advertised {ipv4: 2} with advertisedTotal 0."""
    from agent.config.loader import load_text
    from agent.core.bgp import Announced, Family, PathAttrs, PeerState, PeerStatus, RouteUpdate

    text = CONFIG.replace("routerId: 10.0.0.2}", "routerId: 10.0.0.2, importPolicy: acceptAll, exportPolicy: acceptAll}") + """---
apiVersion: routeagent.io/v1alpha1
kind: Advertisement
metadata: {name: pods}
spec: {type: podCIDR, prefixes: [10.244.1.0/24, 10.244.9.0/24]}
"""
    agent = make(tmp_path)
    config = agent.reloader.standalone(load_text(text))
    agent.routing.load_config(config)
    peer = "10.0.0.1"
    attrs = PathAttrs(as_path=(65001,))
    table = tuple(Announced(Prefix.parse(p), peer, attrs) for p in
                  ("198.51.100.0/24", "203.0.113.0/24", "10.244.1.0/24", "192.0.2.0/24"))
    agent.routing.handle_bgp(PeerState(peer, PeerStatus.UP))
    for _ in range(3):  # the first announcement, then two route refreshes
        agent.routing.handle_bgp(RouteUpdate(peer, Family.IPV4_UNICAST, table))
    status = node_status(agent.view)
    _check_invariants(status)
    fam = status["peers"][0]["families"]["ipv4-unicast"]
    assert (fam["received"], fam["accepted"], fam["rejected"]) == (4, 3, 1)  # our pod CIDR: guard
    assert status["advertised"] == {"ipv4": 2, "ipv6": 0} and status["advertisedTotal"] == 2
    # the peer removed: nothing advertised, and the status says so in every field
    agent.routing.load_config(agent.reloader.standalone(load_text(text.split("---\n", 1)[0] + "---\n"
                                                                  + text.split("---\n", 2)[2])))
    status = node_status(agent.view)
    _check_invariants(status)
    assert status["peers"] == [] and status["advertised"] == {"ipv4": 0, "ipv6": 0}
    assert status["advertisedTotal"] == 0
    await agent.routing.bgp.stop() if agent.routing.bgp is not None else None


async def test_bfd_in_peer_rows_metrics_and_status(tmp_path):
    """A peer with BFD: its row, the metrics and the node status show the BFD state (down: no
    child process runs here, nothing reported yet) and that its routes are held."""
    from agent.config.nodestate import RouteAgentNodeStateStatus

    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.replace("routerId: 10.0.0.2}", "routerId: 10.0.0.2, bfd: {minTx: 150}}"))
    agent = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n")
    agent.routing.load_config(agent.config)
    view = agent.view
    (row,) = view.peers()
    assert row["bfd"]["state"] == "down" and (row["bfd"]["minRx"], row["bfd"]["minTx"]) == (300, 150)
    text = agent.metrics.registry and __import__("prometheus_client").generate_latest(agent.metrics.registry).decode()
    assert 'route_agent_bfd_session_up{peer="10.0.0.1"} 0.0' in text
    assert 'route_agent_bfd_session_state{peer="10.0.0.1",state="down"} 1.0' in text
    status = node_status(view)
    assert status["peers"][0]["bfd"] == "down"
    RouteAgentNodeStateStatus.model_validate(status, by_alias=True, by_name=False)
