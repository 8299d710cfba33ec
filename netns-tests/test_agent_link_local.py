"""An IPv6 route learned with only a link-local next hop goes out of the session's interface.

The agent's namespace has two uplinks into the ToR (up0, up1: `fe80::/64` on both). BIRD peers on
the second one (fd00:1::1 <-> fd00:1::254) and its export filter sets the next hop to its
link-local address on that link, so the UPDATE carries that link-local address alone. The kernel
route must be `via fe80::1:1 dev up1` (it was `dev up0`: the first fe80::/64 found), and follow the
session when its subnet moves to another interface.
"""

from __future__ import annotations

import time

from conftest import bgp_peer

from testlab.bird import base_config, bgp_protocol
from testlab.netns import ip, ip_json, wait_for

LL = "fe80::1:1"  # BIRD's link-local address on the second link
V6 = ["2001:db8:7::/48"]


def bird_config() -> str:
    return base_config("10.0.1.1", (), V6) + bgp_protocol(
        "n6", local="fd00:1::1", local_as=65001, neighbor="fd00:1::254", neighbor_as=65000,
        families=(6,), export={6: f"bgp_next_hop = {LL};"})


def test_link_local_only_next_hop_uses_the_session_interface(bgp_lab):
    node, tor = bgp_lab.node, bgp_lab.tor
    ip(tor, "addr", "add", f"{LL}/64", "dev", "tor1", "nodad")
    bird = bgp_lab.bird("tor", bird_config())
    node.write("peers.yaml", bgp_peer("tor6b", "fd00:1::1", "fd00:1::254", extra="  importPolicy: acceptAll\n"))
    node.start()
    r = node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)[V6[0]]
    assert (r["gateway"], r["dev"]) == (LL, "up1"), r
    exp = node.api(f"/api/explain?prefix={V6[0]}")  # the next hop as received: the link-local one
    assert exp["candidates"][0]["route"] == f"via {LL} dev up1" and exp["fib_state"] == "installed"
    # traffic goes there: the kernel's own lookup agrees
    [got] = ip_json(node.ns, "-6", "route", "get", "2001:db8:7::1")
    assert (got["gateway"], got["dev"]) == (LL, "up1")

    # the session's subnet moves to a third interface, up2 (a new veth into the ToR): both ends
    # readdressed, the session comes back over up2 and the route follows
    ip(node.ns, "link", "add", "up2", "type", "veth", "peer", "name", "tor2", "netns", tor)
    ip(node.ns, "addr", "del", "fd00:1::254/64", "dev", "up1")
    ip(tor, "addr", "del", "fd00:1::1/64", "dev", "tor1")
    ip(tor, "addr", "del", f"{LL}/64", "dev", "tor1")
    ip(node.ns, "addr", "add", "fd00:1::254/64", "dev", "up2", "nodad")
    ip(tor, "addr", "add", "fd00:1::1/64", "dev", "tor2", "nodad")
    ip(tor, "addr", "add", f"{LL}/64", "dev", "tor2", "nodad")
    ip(tor, "link", "set", "tor2", "up")
    ip(node.ns, "link", "set", "up2", "up")
    t0 = time.monotonic()
    r = node.wait_routes(lambda r: r.get(V6[0], {}).get("dev") == "up2", family=6, timeout=45)[V6[0]]
    print(f"route moved to dev up2 {time.monotonic() - t0:.2f}s after up2 came up")
    assert r["gateway"] == LL
    wait_for(lambda: bird.protocol_state("n6") == "Established", 30, what="session over up2")
