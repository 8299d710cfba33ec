"""The restart sync gate with a peer that does not negotiate graceful restart (BIRD `graceful
restart off`: no capability in its OPEN, no End-of-RIB).

* Readiness: the peer's first KEEPALIVE after its session came up is its implicit End-of-RIB, so
  a restarted agent is ready a keepalive interval (hold time 9 s / 3) after the peer's last
  UPDATE, not after `staleSeconds` (60 s here), and the restart still costs no route event.
* A route the peer withdraws while the gate is still closed (it waits for another peer that
  never comes up) leaves the kernel at once: the gate holds routes adopted from before the
  restart, never what a peer says now.
"""

from __future__ import annotations

import time

from conftest import agent_config, bgp_peer, tor_config

from testlab.netns import api_get, wait_for

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
STALE = agent_config("  fib:\n    staleSeconds: 60\n")
TOR4 = bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n")
# a configured peer that never comes up (BIRD has no session for it): the gate waits for it
SILENT = bgp_peer("silent", "10.0.1.1", "10.0.1.254", extra="  importPolicy: acceptAll\n")


def start_bird(lab, static4=V4):
    return lab.bird("tor", tor_config(static4, (), gr=False))


def ready(node) -> bool:
    return api_get(node.ns, "/readyz") is not None


def learned(node, prefix: str) -> bool:
    exp = node.api(f"/api/explain?prefix={prefix}")
    return bool(exp) and any(c["origin"] == "ebgp/10.0.0.1" for c in exp["candidates"])


def test_restart_without_graceful_restart_is_ready_after_the_first_keepalive_without_flap(
        bgp_lab, monitor_factory):
    node = bgp_lab.node
    start_bird(bgp_lab)
    node.write("agent.yaml", STALE)
    node.write("peers.yaml", TOR4)
    proc = node.start(wait=False)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    wait_for(lambda: ready(node), 30, what="ready (first run)")
    before = node.routes(4)
    mon = monitor_factory(node.ns)
    node.kill(proc)
    t0 = time.monotonic()
    node.start(wait=False)
    wait_for(lambda: ready(node), 30, what="ready after the restart")
    took = time.monotonic() - t0
    print(f"ready {took:.2f}s after the restart (staleSeconds 60, keepalive interval 3 s)")
    assert took < 20, took  # the first KEEPALIVE, not the stale timer, opened the gate
    assert "its first KEEPALIVE): in sync" in node.logtext() and "stale timer" not in node.logtext()
    wait_for(node.converged, 10)
    mon.mark()
    assert [e for e in mon.events() if any(p in e for p in V4)] == []  # adopted, never touched
    assert node.routes(4) == before


def test_withdrawal_during_the_gate_leaves_the_kernel_at_once(bgp_lab):
    node = bgp_lab.node
    bird = start_bird(bgp_lab)
    node.write("agent.yaml", STALE)
    node.write("peers.yaml", TOR4 + "---\n" + SILENT)
    proc = node.start(wait=False)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)  # new prefixes go in before the gate
    node.kill(proc)
    node.start(wait=False)  # the routes of the first run are adopted, the gate closed for 60 s
    wait_for(lambda: learned(node, V4[1]), 30, what="route learned again in the new session")
    assert node.api("/api/fib")["gate_open"] is False
    bird.reconfigure(tor_config(V4[:1], (), gr=False))
    t0 = time.monotonic()
    node.wait_routes(lambda r: V4[1] not in r, timeout=10)
    took = time.monotonic() - t0
    print(f"withdrawn route left the kernel {took:.2f}s after BIRD's reconfigure (gate closed, staleSeconds 60)")
    assert took < 5, took
    assert node.api("/api/fib")["gate_open"] is False and not ready(node)  # still waiting for `silent`
    assert V4[0] in node.routes(4)  # the adopted route the peer re-sent stays
