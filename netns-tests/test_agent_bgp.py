"""BGP learning end to end: a real BIRD 2 ToR, the real agent with its real ExaBGP, the kernel."""

from __future__ import annotations

import signal
import time

from agent.nsutil import ip, wait_for
from conftest import PROTO, agent_config, bgp_peer, gateways, static_routes, tor_config

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
FAST = agent_config("  fib:\n    staleSeconds: 15\n")


def peers(policy="acceptAll", extra=""):
    pol = f"  importPolicy: {policy}\n" if policy else ""
    return (bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=pol + extra) + "---\n"
            + bgp_peer("tor6", "fd00::1", "fd00::254", extra=pol + extra))


def start(lab, config=None, static4=V4, static6=V6, **tor):
    lab.bird("tor", tor_config(static4, static6, **tor))
    lab.node.write("agent.yaml", FAST)
    lab.node.write("peers.yaml", config or peers())
    return lab.node.start()


def metric(node, name):
    for line in node.api("/metrics").splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{") and line.split(" ")[0] == name:
            return float(line.rsplit(" ", 1)[1])
        if line.startswith(name):
            pass
    return None


def metric_line(node, prefix):
    return [l for l in node.api("/metrics").splitlines() if l.startswith(prefix)]


def test_routes_learned_v4_v6_with_our_proto_and_withdraw_removes_them(bgp_lab):
    node = bgp_lab.node
    start(bgp_lab)
    v4 = node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    assert v4["192.0.2.0/24"]["gateway"] == "10.0.0.1" and v4["192.0.2.0/24"]["dev"] == "up0"
    v6 = node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    assert v6["2001:db8:1::/48"]["gateway"] == "fd00::1"
    exp = node.api("/api/explain?prefix=192.0.2.0/24")
    assert exp["candidates"][0]["origin"] == "ebgp/10.0.0.1" and exp["candidates"][0]["distance"] == 20
    assert exp["bgp"][0]["accepted"] and exp["candidates"][0]["bgp"]["asPath"] == [65001]
    bgp_lab.birds["tor"].reconfigure(tor_config(V4[:1], V6[:1]))
    node.wait_routes(lambda r: "198.51.100.0/24" not in r and "192.0.2.0/24" in r, timeout=10)
    node.wait_routes(lambda r: "2001:db8:2::/48" not in r and "2001:db8:1::/48" in r, family=6, timeout=10)
    peers_view = node.api("/api/peers")
    assert {p["address"]: p["state"] for p in peers_view} == {"10.0.0.1": "up", "fd00::1": "up"}


def test_default_deny_and_policy_reject_leave_routes_out_and_counted(bgp_lab):
    node = bgp_lab.node
    policy = ("apiVersion: routeagent.io/v1alpha1\nkind: RoutePolicy\nmetadata: {name: only-doc}\nspec:\n"
              "  statements:\n    - name: doc\n      conditions:\n        prefixSet: [{prefix: 192.0.2.0/24}]\n"
              "      actions: {result: accept}\n")
    config = (bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: only-doc\n") + "---\n"
              + bgp_peer("tor6", "fd00::1", "fd00::254") + "---\n" + policy)  # tor6: no policy
    start(bgp_lab, config)
    node.wait_routes(lambda r: "192.0.2.0/24" in r, timeout=30)
    wait_for(lambda: metric_line(node, 'route_agent_bgp_prefixes_rejected_total{family="ipv6",peer="fd00::1",reason="no_policy"} 2.0'), 10)
    assert metric_line(node, 'route_agent_bgp_prefixes_rejected_total{family="ipv4",peer="10.0.0.1",reason="policy_reject"}') \
        or metric_line(node, 'route_agent_bgp_prefixes_rejected_total{family="ipv4",peer="10.0.0.1",reason="default_reject"}')
    assert "198.51.100.0/24" not in node.routes(4) and node.routes(6) == {}
    exp = node.api("/api/explain?prefix=198.51.100.0/24")
    assert exp["bgp"] and not exp["bgp"][0]["accepted"] and exp["bgp"][0]["policy"] == "only-doc"


def test_hijack_attempts_never_reach_the_kernel(bgp_lab):
    node = bgp_lab.node
    hijack4 = ["10.244.1.0/24", "10.244.1.128/25", "0.0.0.0/0", "10.0.0.254/32"]
    hijack6 = ["::/0", "fd00:244:1::/64"]
    bgp_lab.bird("tor", tor_config(V4 + hijack4, V6 + hijack6))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n  protectedPrefixes: [10.244.1.0/24, \"fd00:244:1::/64\"]\n"))
    node.write("peers.yaml", peers())
    node.start()
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    wait_for(lambda: len(metric_line(node, "route_agent_bgp_prefixes_rejected_total{")) >= 4, 10)
    assert not set(hijack4) & set(node.routes(4)) and not set(hijack6) & set(node.routes(6))
    assert "default" not in node.routes(4) and "default" not in node.routes(6)
    reasons = {l.split('reason="')[1].split('"')[0] for l in metric_line(node, "route_agent_bgp_prefixes_rejected_total{")}
    assert {"own_prefix", "more_specific_of_own", "default_route", "node_address"} <= reasons, reasons


def test_static_beats_bgp_by_distance_and_an_override_reverses_it(bgp_lab):
    node = bgp_lab.node
    start(bgp_lab)
    node.wait_routes(lambda r: r.get("192.0.2.0/24", {}).get("gateway") == "10.0.0.1", timeout=30)
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.0/24\n      nextHops: [{gateway: 10.0.1.1}]\n"))
    node.wait_routes(lambda r: r.get("192.0.2.0/24", {}).get("gateway") == "10.0.1.1", timeout=5)
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.0/24\n      distance: 50\n"
                                                 "      nextHops: [{gateway: 10.0.1.1}]\n"))
    node.wait_routes(lambda r: r.get("192.0.2.0/24", {}).get("gateway") == "10.0.0.1", timeout=5)
    assert node.api("/api/explain?prefix=192.0.2.0/24")["reason"] == "administrative distance"


def test_a_foreign_kernel_route_wins_over_bgp(bgp_lab):
    node = bgp_lab.node
    start(bgp_lab)
    node.wait_routes(lambda r: "198.51.100.0/24" in r, timeout=30)
    ip(node.ns, "route", "add", "198.51.100.0/24", "via", "10.0.1.1", "proto", "static", "metric", "50")
    node.wait_routes(lambda r: "198.51.100.0/24" not in r, timeout=5)
    ip(node.ns, "route", "del", "198.51.100.0/24", "proto", "static")
    node.wait_routes(lambda r: "198.51.100.0/24" in r, timeout=5)


def test_session_down_without_graceful_restart_removes_routes(bgp_lab):
    node = bgp_lab.node
    start(bgp_lab, gr=False)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    bgp_lab.birds["tor"].cmd("disable", "n4")
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=10)
    assert set(V6) <= set(node.routes(6))  # the other session is untouched


def test_session_down_with_graceful_restart_keeps_routes_until_the_restart_time(bgp_lab):
    node = bgp_lab.node
    start(bgp_lab, bgp_extra="    graceful restart time 6;")
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    bird = bgp_lab.birds["tor"]
    bird.proc.send_signal(signal.SIGKILL)  # BIRD dies: no NOTIFICATION, GR helper mode
    bird.proc.wait(5)
    t0 = time.monotonic()
    wait_for(lambda: any(p["state"] == "down" for p in node.api("/api/peers")), 30)
    assert set(V4) <= set(node.routes(4))  # kept, stale
    assert any(p["stale"] for p in node.api("/api/peers"))
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=20)
    assert time.monotonic() - t0 >= 3  # not before (most of) the restart time


def test_exabgp_killed_routes_never_leave_the_kernel_and_converge_again(bgp_lab, monitor_factory):
    node = bgp_lab.node
    start(bgp_lab)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    wait_for(node.converged, 10)
    mon = monitor_factory(node.ns)
    pid = int((node.state / "speaker" / "exabgp.pid").read_text())
    import os
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "route_agent_exabgp_restarts_total 1.0" in node.api("/metrics"), 30)
    wait_for(lambda: all(p["state"] == "up" for p in node.api("/api/peers")), 30)
    wait_for(lambda: all(not p["stale"] for p in node.api("/api/peers")), 30)
    mon.mark()
    assert [e for e in mon.events() if any(p in e for p in V4 + V6)] == []


def test_agent_sigkill_and_restart_while_bird_announces_gives_zero_route_events(bgp_lab, monitor_factory):
    node = bgp_lab.node
    proc = start(bgp_lab)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    wait_for(node.converged, 10)
    before = node.routes(4), node.routes(6)
    mon = monitor_factory(node.ns)
    node.kill(proc)
    node.start()
    wait_for(node.converged, 30)
    wait_for(lambda: all(p["state"] == "up" for p in node.api("/api/peers")), 30)
    mon.mark()
    assert mon.events() == []
    assert (node.routes(4), node.routes(6)) == before
