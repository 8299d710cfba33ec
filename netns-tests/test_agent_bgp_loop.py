"""AS_PATH loop detection against a real BIRD 2: routes whose path holds the agent's AS (65000)."""

from __future__ import annotations

from testlab.netns import wait_for
from conftest import agent_config, bgp_peer, tor_config

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:3::/48"]


def rejected(node, peer, family):
    return [l for l in node.api("/metrics").splitlines()
            if l.startswith(f'route_agent_bgp_prefixes_rejected_total{{family="{family}",peer="{peer}",reason="as_loop"}}')]


def test_routes_with_our_as_in_the_path_are_dropped_unless_allow_own_as(bgp_lab):
    node = bgp_lab.node
    export4 = "if net = 198.51.100.0/24 then bgp_path.prepend(65000);"
    export6 = ("if net = 2001:db8:2::/48 then bgp_path.prepend(65000);\n"
               "if net = 2001:db8:3::/48 then { bgp_path.prepend(65000); bgp_path.prepend(65000); }")
    bgp_lab.bird("tor", tor_config(V4, V6, export4=export4, export6=export6))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n")
               + "---\n" + bgp_peer("tor6", "fd00::1", "fd00::254",
                                    extra="  importPolicy: acceptAll\n  allowOwnAs: 1\n"))
    node.start()
    node.wait_routes(lambda r: "192.0.2.0/24" in r, timeout=30)
    node.wait_routes(lambda r: {"2001:db8:1::/48", "2001:db8:2::/48"} <= set(r), family=6, timeout=30)
    wait_for(lambda: rejected(node, "10.0.0.1", "ipv4") and rejected(node, "fd00::1", "ipv6"), 10)
    assert "198.51.100.0/24" not in node.routes(4)  # (65001 65000): our AS once, allowOwnAs 0
    assert "2001:db8:3::/48" not in node.routes(6)  # (65001 65000 65000): twice, allowOwnAs 1
    exp = node.api("/api/explain?prefix=198.51.100.0/24")
    assert exp["bgp"] and not exp["bgp"][0]["accepted"] and exp["bgp"][0]["reason"] == "as_loop", exp
    exp6 = node.api("/api/explain?prefix=2001:db8:2::/48")
    assert exp6["candidates"][0]["bgp"]["asPath"] == [65001, 65000]
