"""The running agent's reload path: a bad config is rejected, counted, and the old one kept."""

import asyncio

from agent.daemon.agent import Agent

GOOD = """apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: s}
spec:
  routes:
    - prefix: 192.0.2.0/24
      blackhole: true
"""
BAD = GOOD.replace("192.0.2.0/24", "192.0.2.1/24")


def metric(agent, name):
    return agent.metrics.registry.get_sample_value(name)


async def test_bad_reload_keeps_last_good_config_and_counts(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    good = agent.config
    path.write_text(BAD)
    assert agent.reloader.reload() is False
    assert agent.config is good
    assert metric(agent, "route_agent_config_reload_failures_total") == 1
    assert metric(agent, "route_agent_config_last_reload_successful") == 0
    assert "spec.routes[0].prefix" in agent.reloader.last_error and "c.yaml" in agent.reloader.last_error
    assert agent.queue.empty()  # nothing reaches the core task


async def test_good_reload_queues_the_new_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    path.write_text(GOOD.replace("192.0.2.0/24", "198.51.100.0/24"))
    assert agent.reloader.reload() is True
    ev = agent.queue.get_nowait()
    assert ev.kind == "config" and metric(agent, "route_agent_config_last_reload_successful") == 1
    # the core task applies it: the static source now offers the new prefix only
    agent.routing.load_config(ev.data)
    assert [str(p) for p in agent.routing.rib.prefixes()] == ["198.51.100.0/24"]


def test_invalid_config_at_start_raises_before_touching_anything(tmp_path):
    import pytest
    from agent.config.loader import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as err:
        Agent(str(path))
    assert any(p.field == "spec.routes[0].prefix" for p in err.value.problems)


async def test_monitor_overrun_and_link_down_ask_for_a_full_scan(tmp_path):
    from agent.fib.types import Link, LinkEvent, Overrun

    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    agent.routing.handle_kernel([Overrun(), LinkEvent(False, Link("eth9", 9, False))])
    kinds = [agent.queue.get_nowait() for _ in range(agent.queue.qsize())]
    assert [(e.kind, e.data) for e in kinds] == [("scan", "overrun"), ("scan", "link-down")]


SELECTED = GOOD + """---
apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: rack2}
spec:
  nodeSelector: {matchLabels: {rack: r2}}
  routes:
    - {prefix: 198.51.100.0/24, blackhole: true}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000,
       nodeOverrides: [{nodeName: other, routerId: 10.9.9.9}]}
"""


def test_standalone_resolves_for_the_host(tmp_path, monkeypatch, caplog):
    """Standalone: the router id defaults to the host's first IPv4 address, objects selecting
    Node labels are left out (with a warning), overrides of other nodes do not apply."""
    monkeypatch.setattr("agent.daemon.reload.node_addresses", lambda: ["fd00::5/64", "192.0.2.7/24"])
    path = tmp_path / "c.yaml"
    path.write_text(SELECTED)
    agent = Agent(str(path), node_name="host-a", state_dir=str(tmp_path / "state"))
    assert [o.metadata.name for o in agent.config.static] == ["s"]
    assert agent.config.peers[0].spec.router_id == "192.0.2.7"
    assert "StaticRoutes/rack2" in caplog.text


def test_standalone_without_ipv4_and_router_id_is_an_error(tmp_path, monkeypatch):
    import pytest

    from agent.config.loader import ConfigError

    monkeypatch.setattr("agent.daemon.reload.node_addresses", lambda: ["fd00::5/64"])
    path = tmp_path / "c.yaml"
    path.write_text(SELECTED)
    with pytest.raises(ConfigError, match="spec.routerId: unset"):
        Agent(str(path), node_name="host-a", state_dir=str(tmp_path / "state"))
