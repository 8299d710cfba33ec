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
