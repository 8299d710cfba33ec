"""BGP learning end to end: a real BIRD 2 ToR, the real agent with its real ExaBGP, the kernel."""

from __future__ import annotations

import signal
import time

from testlab.netns import ip, wait_for
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
    # raw UPDATEs (the default) were decoded by ExaBGP's API helper, none by the agent itself
    decoded = {line.split('"')[1]: float(line.rsplit(" ", 1)[1])
               for line in metric_line(node, "route_agent_bgp_update_events_decoded_total{")}
    assert decoded["relay"] >= 4 and decoded["agent"] == 0, decoded
    assert metric(node, "route_agent_exabgp_lines_not_understood_total") == 0


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


def test_two_peers_announcing_one_prefix_give_one_multipath_route_and_one_down_leaves_the_other(bgp_lab):
    from testlab.bird import base_config, bgp_protocol

    node = bgp_lab.node
    conf = base_config("10.0.0.1", ["192.0.2.0/24"]) + "".join(
        bgp_protocol(name, local=local, local_as=65001, neighbor=nbr, neighbor_as=65000, export={4: ""})
        for name, local, nbr in (("a", "10.0.0.1", "10.0.0.254"), ("b", "10.0.1.1", "10.0.1.254")))
    bird = bgp_lab.bird("tor", conf)
    node.write("agent.yaml", FAST)
    node.write("peers.yaml", bgp_peer("a", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n")
               + "---\n" + bgp_peer("b", "10.0.1.1", "10.0.1.254", extra="  importPolicy: acceptAll\n"))
    node.start()
    r = node.wait_routes(lambda r: gateways(r.get("192.0.2.0/24", {})) == ["10.0.0.1", "10.0.1.1"], timeout=30)
    assert {nh["dev"] for nh in r["192.0.2.0/24"]["nexthops"]} == {"up0", "up1"}
    bird.cmd("disable", "a")
    r = node.wait_routes(lambda r: r.get("192.0.2.0/24", {}).get("gateway") == "10.0.1.1", timeout=15)
    assert "nexthops" not in r["192.0.2.0/24"]


def test_max_prefix_teardown_closes_the_session_and_removes_its_routes(bgp_lab):
    node = bgp_lab.node
    # ExaBGP 5.0.15 closes a session silently when it announced graceful restart: Cease 6/1 needs GR off
    limit = "  maxPrefix: [{family: ipv4-unicast, limit: 1, action: teardown}]\n  gracefulRestartSeconds: 0\n"
    bird = bgp_lab.bird("tor", tor_config(V4, V6, gr=False))
    node.write("agent.yaml", FAST)
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n" + limit))
    node.start(wait=False)
    wait_for(lambda: "Maximum number of prefixes" in bird.log.read_text(), 30)  # Cease 6/1 received
    peer = wait_for(lambda: [p for p in (node.api("/api/peers") or []) if p["held_down"]], 10)[0]
    assert peer["state"] == "down"
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=10)
    # and it stays down: ExaBGP holds the peer, passive and unanswered (BIRD would otherwise reconnect at once)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert "Established" not in bgp_lab.birds["tor"].protocol_state("n4")
        time.sleep(0.2)


def test_md5_session_comes_up_and_a_wrong_password_does_not(bgp_lab, tmp_path):
    node = bgp_lab.node
    (tmp_path / "good").write_text("s3cret-Pw\n")
    (tmp_path / "bad").write_text("wrong-one\n")
    bgp_lab.bird("tor", tor_config(V4, V6, bgp_extra='    password "s3cret-Pw";'))
    node.write("agent.yaml", FAST)
    # tor4 gets the right key, tor6 the wrong one
    text = (bgp_peer("tor4", "10.0.0.1", "10.0.0.254",
                     extra=f"  importPolicy: acceptAll\n  md5PasswordFile: {tmp_path / 'good'}\n") + "---\n"
            + bgp_peer("tor6", "fd00::1", "fd00::254",
                       extra=f"  importPolicy: acceptAll\n  md5PasswordFile: {tmp_path / 'bad'}\n"))
    node.write("peers.yaml", text)
    node.start(wait=False)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    deadline = time.monotonic() + 3  # BIRD retries every second: give the wrong key a few rounds
    while time.monotonic() < deadline:
        states = {p["address"]: p["state"] for p in node.api("/api/peers")}
        assert states["fd00::1"] != "up" and node.routes(6) == {}
        time.sleep(0.2)
    assert "s3cret" not in node.logtext() and "wrong-one" not in node.logtext()


def test_a_table_of_one_attribute_set_is_installed_whole_and_withdrawn_exactly(bgp_lab):
    """3,000 IPv4 and 500 IPv6 prefixes of one attribute set (BIRD packs hundreds into an
    UPDATE: the bulk lanes of import, RIB and FIB take them a run at a time) are all installed
    through the ToR; half of them withdrawn leaves exactly the other half; announced again they
    come back, and nothing else of ours is in the kernel."""
    v4 = [f"10.{64 + i // 256}.{i % 256}.0/24" for i in range(3000)]
    v6 = [f"2001:db8:{0x100 + i:x}::/48" for i in range(500)]
    node = bgp_lab.node
    start(bgp_lab, static4=v4, static6=v6)
    got = node.wait_routes(lambda r: len(r) == 3000, timeout=60)
    assert set(got) == set(v4) and {r["gateway"] for r in got.values()} == {"10.0.0.1"}
    got6 = node.wait_routes(lambda r: len(r) == 500, family=6, timeout=60)
    assert set(got6) == set(v6) and {r["gateway"] for r in got6.values()} == {"fd00::1"}
    bgp_lab.birds["tor"].reconfigure(tor_config(v4[::2], v6[::2]))
    assert set(node.wait_routes(lambda r: len(r) == 1500, timeout=30)) == set(v4[::2])
    assert set(node.wait_routes(lambda r: len(r) == 250, family=6, timeout=30)) == set(v6[::2])
    bgp_lab.birds["tor"].reconfigure(tor_config(v4, v6))
    assert set(node.wait_routes(lambda r: len(r) == 3000, timeout=30)) == set(v4)
    assert set(node.wait_routes(lambda r: len(r) == 500, family=6, timeout=30)) == set(v6)
    assert node.api("/api/peers")[0]["state"] == "up"
