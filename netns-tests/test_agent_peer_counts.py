"""`show peers` / /api/peers counts are current, against a real BIRD 2: a route refresh (BIRD
re-sending its table) does not count twice there; the metrics keep the cumulative counters."""

from __future__ import annotations

from testlab.netns import wait_for
from conftest import agent_config, bgp_peer, tor_config

V4 = ["192.0.2.0/24", "198.51.100.0/24", "0.0.0.0/0"]  # the default route: refused by the guard


def received_total(node):
    for line in node.api("/metrics").splitlines():
        if line.startswith('route_agent_bgp_prefixes_received_total{family="ipv4",peer="10.0.0.1"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def counts(node):
    p = (node.api("/api/peers") or [{}])[0]
    f = p.get("families", {}).get("ipv4-unicast", {})
    return tuple(f.get(k) for k in ("received", "accepted", "rejected", "installed"))


def test_peer_counts_are_current_and_a_resent_table_does_not_count_twice(bgp_lab):
    node = bgp_lab.node
    bird = bgp_lab.bird("tor", tor_config(V4, (), gr=False))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n"))
    node.start()
    node.wait_routes(lambda r: {"192.0.2.0/24", "198.51.100.0/24"} <= set(r), timeout=30)
    wait_for(lambda: counts(node) == (3, 2, 1, 2), 15)  # installed is refreshed every few seconds
    assert received_total(node) == 3
    for n in (6, 9):
        bird.cmd("reload", "out", "n4")  # BIRD sends its whole table again
        wait_for(lambda: received_total(node) >= n, 15)
        assert counts(node) == (3, 2, 1, 2)
    bird.reconfigure(tor_config(V4[:1], (), gr=False))  # withdraws two
    wait_for(lambda: counts(node)[:3] == (1, 1, 0), 15)
