"""BFD against a real BIRD 2 (`protocol bfd`, ``bfd on`` in its BGP protocols), v4 and v6.

A failure is made silent for TCP by poisoning one side's neighbour entry (a permanent entry with
a MAC nobody has: the packets leave and are dropped by the other end's NIC), so only BFD can
notice within the 9 s hold time. Every wait polls with a deadline.
"""

from __future__ import annotations

import ipaddress
import re
import time

from testlab.monitor import Monitor
from testlab.netns import agent_cmd, ip, ip_json, sh, sysctl, wait_for
from conftest import bgp_peer, elapsed, tor_config

BFD = "  importPolicy: acceptAll\n  bfd: {minRx: 100, minTx: 100, multiplier: 3}\n"
V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
BIRD_BFD = ('protocol bfd { interface "tor*" { min rx interval 100 ms; min tx interval 100 ms; '
            'multiplier 3; }; }')
BOGUS_MAC = "02:00:00:00:be:ef"


def agent_cfg(max_paths: int = 1, nexthop_objects: str = "auto") -> str:
    return ("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata:\n  name: agent\nspec:\n"
            f"  maxPaths: {max_paths}\n  fib:\n    staleSeconds: 15\n    nexthopObjects: \"{nexthop_objects}\"\n")


def start(lab, bird_conf: str, peers: str, max_paths: int = 1, nexthop_objects: str = "auto"):
    bird = lab.bird("tor", bird_conf)
    lab.node.write("agent.yaml", agent_cfg(max_paths, nexthop_objects))
    lab.node.write("peers.yaml", peers)
    lab.node.start()
    return bird


def bfd_state(node, peer: str) -> str | None:
    rows = node.api("/api/peers") or []
    for row in rows:
        if row["address"] == peer:
            return (row.get("bfd") or {}).get("state")
    return None


def peer_row(node, peer: str) -> dict:
    return next(r for r in node.api("/api/peers") if r["address"] == peer)


def bird_bfd(bird, neighbor: str) -> str | None:
    """BIRD's state of its BFD session with `neighbor` (``show bfd sessions``)."""
    for line in bird.cmd("show", "bfd", "sessions").splitlines():
        parts = line.split()
        if parts and parts[0] == neighbor:
            return parts[2]
    return None


def poison(ns: str, address: str, dev: str) -> None:
    ip(ns, "-6" if ":" in address else "-4", "neigh", "replace", address, "lladdr", BOGUS_MAC, "dev", dev,
       "nud", "permanent")


def heal(ns: str, address: str, dev: str) -> None:
    ip(ns, "-6" if ":" in address else "-4", "neigh", "del", address, "dev", dev)


def test_bfd_up_v4_v6_shown_and_counted(bgp_lab):
    node = bgp_lab.node
    bird = start(bgp_lab, tor_config(V4, V6, extra=BIRD_BFD, bgp_extra="    bfd on;"),
                 bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=BFD) + "---\n"
                 + bgp_peer("tor6", "fd00::1", "fd00::254", extra=BFD))
    wait_for(lambda: bfd_state(node, "10.0.0.1") == "up" and bfd_state(node, "fd00::1") == "up", 30, what="bfd up")
    wait_for(lambda: bird_bfd(bird, "10.0.0.254") == "Up" and bird_bfd(bird, "fd00::254") == "Up", 10,
             what="BIRD sees bfd up")
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    row = peer_row(node, "10.0.0.1")["bfd"]
    assert (row["minRx"], row["minTx"], row["multiplier"]) == (100, 100, 3)
    wait_for(lambda: peer_row(node, "10.0.0.1")["bfd"]["detectionMs"] == 300, 10, what="fast timers")
    metrics = node.api("/metrics")
    assert 'route_agent_bfd_session_up{peer="10.0.0.1"} 1.0' in metrics
    assert 'route_agent_bfd_session_up{peer="fd00::1"} 1.0' in metrics
    assert re.search(r'route_agent_bfd_packets_received_total\{peer="fd00::1"\} [1-9]', metrics)
    assert "bfd up (100/100 ms x3" in sh(*agent_cmd(node.ns, "show", "peers")).stdout


def test_silent_bird_detected_routes_withdrawn_before_hold_timer_then_recovery(bgp_lab):
    node = bgp_lab.node
    bird = start(bgp_lab, tor_config(V4, V6, extra=BIRD_BFD, bgp_extra="    bfd on;"),
                 bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=BFD) + "---\n"
                 + bgp_peer("tor6", "fd00::1", "fd00::254", extra=BFD))
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    wait_for(lambda: bfd_state(node, "10.0.0.1") == "up" and bfd_state(node, "fd00::1") == "up", 30, what="bfd up")
    t0 = time.monotonic()
    poison(bgp_lab.tor, "10.0.0.254", "tor0")  # BIRD's packets to the agent vanish (v4 only)
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=5)
    took = elapsed(t0)
    assert took < 3.0, took  # hold time 9 s: only BFD can have told
    assert bfd_state(node, "10.0.0.1") in ("down", "init")
    assert set(V6) <= set(node.routes(6))  # the v6 session is another path: untouched
    assert "BFD with 10.0.0.1 down" in node.logtext()
    wait_for(lambda: peer_row(node, "10.0.0.1")["state"] != "up", 10, what="BGP session torn down")
    metrics = node.api("/metrics")
    assert 'route_agent_bfd_failures_total{peer="10.0.0.1"} 1.0' in metrics
    heal(bgp_lab.tor, "10.0.0.254", "tor0")
    wait_for(lambda: bfd_state(node, "10.0.0.1") == "up", 30, what="bfd up again")
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    assert peer_row(node, "10.0.0.1")["state"] == "up"


def test_agent_side_blocked_bird_sees_bfd_down_v6(bgp_lab):
    node = bgp_lab.node
    bird = start(bgp_lab, tor_config(V4, V6, extra=BIRD_BFD, bgp_extra="    bfd on;"),
                 bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=BFD) + "---\n"
                 + bgp_peer("tor6", "fd00::1", "fd00::254", extra=BFD))
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    wait_for(lambda: bird_bfd(bird, "fd00::254") == "Up", 30, what="BIRD bfd up")
    poison(node.ns, "fd00::1", "up0")  # the agent's packets to BIRD vanish (v6 only)
    wait_for(lambda: bird_bfd(bird, "fd00::254") in ("Down", "Init"), 5, what="BIRD sees bfd down")
    wait_for(lambda: "Established" not in bird.protocol_state("n6"), 5, what="BIRD drops the v6 session")
    # BIRD now sends Down: the agent goes down too and withdraws the peer's routes
    node.wait_routes(lambda r: not set(V6) & set(r), family=6, timeout=5)
    assert bird_bfd(bird, "10.0.0.254") == "Up"
    heal(node.ns, "fd00::1", "up0")
    wait_for(lambda: bird_bfd(bird, "fd00::254") == "Up", 30, what="BIRD bfd up again")
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)


def _prefixes(n: int) -> list[str]:
    base = int(ipaddress.IPv4Address("100.64.0.0"))
    return [f"{ipaddress.IPv4Address(base + (i << 8))}/24" for i in range(n)]


def test_10k_ecmp_routes_move_to_the_surviving_peer_before_the_hold_timer(bgp_lab):
    """One BIRD, two sessions (10.0.0.1 via tor0, 10.0.1.1 via tor1) announcing the same 10k
    prefixes: ECMP in the kernel; tor0's side goes silent; forwarding must use only 10.0.1.1."""
    node = bgp_lab.node
    sysctl(node.ns, "net.ipv4.nexthop_compat_mode=0")  # no route notification per group change
    prefixes = _prefixes(10_000)
    from testlab.bird import base_config, bgp_protocol
    conf = base_config("10.0.0.1", prefixes, [], BIRD_BFD) + "\n".join(
        bgp_protocol(name, local=local, local_as=65001, neighbor=nbr, neighbor_as=65000,
                     export={4: ""}, extra="    bfd on;")
        for name, local, nbr in (("a", "10.0.0.1", "10.0.0.254"), ("b", "10.0.1.1", "10.0.1.254")))
    start(bgp_lab, conf, bgp_peer("tora", "10.0.0.1", "10.0.0.254", extra=BFD) + "---\n"
          + bgp_peer("torb", "10.0.1.1", "10.0.1.254", extra=BFD), max_paths=2, nexthop_objects="on")
    sample = prefixes[::997]

    def gateways_of(r, p):  # through the route's group (nexthop objects)
        nhid = r.get(p, {}).get("nhid")
        if nhid is None:
            return []
        (group,) = ip_json(node.ns, "nexthop", "show", "id", str(nhid))
        singles = {o["id"]: o for o in ip_json(node.ns, "nexthop", "show")}
        return sorted(singles[m["id"]]["gateway"] for m in group.get("group", []))

    def ecmp(r):
        return len(r) >= 10_000 and all(gateways_of(r, p) == ["10.0.0.1", "10.0.1.1"] for p in sample[:3])
    node.wait_routes(ecmp, timeout=90)
    before = {p: node.routes(4)[p]["nhid"] for p in sample}
    wait_for(lambda: bfd_state(node, "10.0.0.1") == "up" and bfd_state(node, "10.0.1.1") == "up", 30, what="bfd up")
    mon = Monitor(node.ns, ("nexthop", "route"))
    t0 = time.monotonic()
    poison(bgp_lab.tor, "10.0.0.254", "tor0")

    def moved():
        for p in sample:
            out = ip(node.ns, "-4", "route", "get", p.split("/")[0].rsplit(".", 1)[0] + ".1")
            if "via 10.0.1.1" not in out:
                return False
        return True
    wait_for(moved, 9, what="forwarding through 10.0.1.1 only")
    took = elapsed(t0)
    assert took < 5.0, took  # well before the 9 s hold timer
    wait_for(lambda: 'BFD with 10.0.0.1 down: RIB clean-up done, 10000 routes withdrawn' in node.logtext(), 30, what="RIB clean-up")
    wait_for(node.converged, 30, what="FIB converged")
    routes = node.routes(4)
    assert len(routes) >= 10_000 and all(gateways_of(routes, p) == ["10.0.1.1"] for p in sample)
    assert {p: routes[p]["nhid"] for p in sample} == before  # the same groups, in place
    mon.mark()
    events = mon.events()
    mon.close()
    route_events = [e for e in events if not e.startswith(("id ", "Deleted id ")) and "route-agent" in e]
    nh_events = [e for e in events if e.startswith(("id ", "Deleted id "))]
    print(f"10k ECMP routes: forwarding moved {took:.2f} s after the silent failure; "
          f"{len(nh_events)} nexthop events, {len(route_events)} route events")
    assert route_events == [], route_events[:5]  # the group shrank in place, the routes stayed
    assert 1 <= len(nh_events) <= 10, nh_events
