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


USES_ETH9 = GOOD + """    - prefix: 198.51.100.0/24
      nextHops: [{device: eth9}]
"""


def _scans(agent) -> list:
    return [(e.kind, e.data) for e in (agent.queue.get_nowait() for _ in range(agent.queue.qsize()))]


def _with_eth9(tmp_path) -> Agent:
    """The agent with its static route through eth9, which is up."""
    from agent.fib.types import Link, LinkEvent

    path = tmp_path / "c.yaml"
    path.write_text(USES_ETH9)
    agent = Agent(str(path))
    agent.routing.load_config(agent.config)  # (as the core task does at start)
    agent.routing.handle_kernel([LinkEvent(False, Link("eth9", 9, True))])
    _scans(agent)
    return agent


async def test_monitor_overrun_and_a_used_link_going_down_ask_for_a_full_scan(tmp_path):
    from agent.core.model import Prefix
    from agent.fib.types import Link, LinkEvent, Overrun

    agent = _with_eth9(tmp_path)
    r = agent.routing
    assert r.rib.desired(Prefix.parse("198.51.100.0/24")).nexthops[0].dev == "eth9"
    for ev, reason in ((Overrun(), "overrun"), (LinkEvent(False, Link("eth9", 9, False)), "link-down")):
        r.handle_kernel([ev])
        assert _scans(agent) == [("scan", reason)]
    # both at once: one full scan covers both (a waiting scan absorbs the next)
    r.handle_kernel([Overrun(), LinkEvent(True, Link("eth9", 9, False))])
    assert _scans(agent) == [("scan", "overrun")]


async def test_a_link_no_route_uses_going_down_or_away_asks_for_no_scan_unless_adopted_routes_wait(tmp_path):
    """A pod's veth on a Kubernetes node: created, deleted, no route of ours through it."""
    from agent.core.model import Prefix
    from agent.fib.types import Link, LinkEvent

    agent = _with_eth9(tmp_path)
    r = agent.routing
    generation = r.rib.resolver.generation
    for i in range(3):
        r.handle_kernel([LinkEvent(False, Link(f"veth{i}", 20 + i, True))])
        r.handle_kernel([LinkEvent(False, Link(f"veth{i}", 20 + i, False)), LinkEvent(True, Link(f"veth{i}", 20 + i, False))])
    assert _scans(agent) == [] and r.rib.resolver.generation == generation
    r.fib.stale.add(Prefix.parse("203.0.113.0/24"))  # adopted at start, not decided yet: what it uses is unknown
    r.handle_kernel([LinkEvent(True, Link("veth0", 20, False))])
    assert _scans(agent) == [("scan", "link-down")]
    r.fib.stale.clear()
    r.rib.set_failed(next(iter(r.rib.counts)), True)  # decisions void, not re-made yet
    r.handle_kernel([LinkEvent(True, Link("veth1", 21, False))])
    assert _scans(agent) == [("scan", "link-down")]


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


# ---------------------------------------------------------------- never taken down by a reload
def _raising_loader(monkeypatch, exc=RecursionError("maximum recursion depth exceeded")):
    calls = []

    def load(path):
        calls.append(path)
        raise exc

    monkeypatch.setattr("agent.daemon.reload.load_path", load)
    return calls


async def test_reload_that_raises_anything_keeps_the_last_good_config(tmp_path, monkeypatch, caplog):
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    good = agent.config
    _raising_loader(monkeypatch)
    path.write_text(GOOD.replace("192.0.2.0/24", "198.51.100.0/24"))
    assert agent.reloader.reload() is False  # no exception escapes
    agent._sighup()  # SIGHUP takes the same path
    assert agent.config is good and agent.queue.empty()
    assert metric(agent, "route_agent_config_reload_errors_total") == 2
    assert metric(agent, "route_agent_config_reload_failures_total") == 2
    assert metric(agent, "route_agent_config_last_reload_successful") == 0
    assert "RecursionError" in agent.reloader.last_error
    assert "RecursionError" in caplog.text


async def test_config_poll_task_survives_a_raising_loader_and_reads_a_broken_file_once(
        tmp_path, monkeypatch):
    monkeypatch.setattr("agent.daemon.reload.CONFIG_POLL_SECONDS", 0.01)
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    calls = _raising_loader(monkeypatch)
    task = asyncio.create_task(agent.reloader.watch())
    path.write_text(GOOD + "\n# changed\n")
    await asyncio.sleep(0.2)
    assert not task.done(), task.exception() if task.done() else None
    assert len(calls) == 1  # logged and counted once, not at every poll
    assert metric(agent, "route_agent_config_reload_errors_total") == 1
    # a fixed file is picked up by the same task
    monkeypatch.undo()
    monkeypatch.setattr("agent.daemon.reload.CONFIG_POLL_SECONDS", 0.01)
    path.write_text(GOOD.replace("192.0.2.0/24", "198.51.100.0/24"))
    for _ in range(100):
        if not agent.queue.empty():
            break
        await asyncio.sleep(0.01)
    assert agent.queue.get_nowait().kind == "config"
    task.cancel()


async def test_a_failing_long_running_task_is_logged_counted_and_restarted(tmp_path, monkeypatch, caplog):
    """An exception in a supervised task neither ends the agent silently nor stops the others."""
    monkeypatch.setattr("agent.daemon.supervise.RESTART_MIN", 0.01, raising=False)
    path = tmp_path / "c.yaml"
    path.write_text(GOOD)
    agent = Agent(str(path))
    runs = []

    async def flaky_watch():
        runs.append(1)
        if len(runs) == 1:
            raise RecursionError("boom")
        await asyncio.Event().wait()

    agent.reloader.watch = flaky_watch
    tasks = asyncio.create_task(agent._run_tasks())
    for _ in range(200):
        if len(runs) >= 2:
            break
        await asyncio.sleep(0.01)
    assert not tasks.done(), tasks.exception() if tasks.done() else None
    assert len(runs) == 2
    assert agent.metrics.registry.get_sample_value(
        "route_agent_task_restarts_total", {"task": "config-watch"}) == 1
    assert "task config-watch failed" in caplog.text and "RecursionError: boom" in caplog.text
    agent.stop()
    await asyncio.wait_for(tasks, 5)  # shutdown still unwinds the one TaskGroup
