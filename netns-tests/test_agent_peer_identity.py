"""A peer whose AS changes in the configuration is a new peer on the same address: the routes the
old one sent leave the kernel at the reload (they used to stay installed until the agent restarted:
the import stage started the peer afresh and forgot which routes were its own)."""

from __future__ import annotations

import signal

from testlab.netns import wait_for
from conftest import agent_config, bgp_peer, tor_config

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48"]


def peers(tor4_as: int) -> str:
    pol = "  importPolicy: acceptAll\n"
    return (bgp_peer("tor4", "10.0.0.1", "10.0.0.254", peer_as=tor4_as, extra=pol) + "---\n"
            + bgp_peer("tor6", "fd00::1", "fd00::254", extra=pol))


def test_a_peer_as_change_removes_the_old_peers_routes_and_leaves_the_others(bgp_lab):
    node = bgp_lab.node
    bgp_lab.bird("tor", tor_config(V4, V6))  # BIRD stays AS 65001
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", peers(65001))
    proc = node.start()
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    node.write("peers.yaml", peers(65002))  # tor4 is now expected to be AS 65002: BIRD cannot be it
    proc.send_signal(signal.SIGHUP)
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=10)
    state = {p["address"]: p for p in node.api("/api/peers")}
    assert state["10.0.0.1"]["peerAS"] == 65002 and state["10.0.0.1"]["state"] != "up"
    assert set(V6) <= set(node.routes(6))  # the other peer's routes stay
    assert state["fd00::1"]["state"] == "up"
    # and a peer of the right AS again brings them back
    node.write("peers.yaml", peers(65001))
    proc.send_signal(signal.SIGHUP)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    wait_for(lambda: {p["address"]: p["state"] for p in node.api("/api/peers")}["10.0.0.1"] == "up", 30,
             what="tor4 up again")
