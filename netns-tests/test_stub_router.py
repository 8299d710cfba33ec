"""The inline stub router, exactly as docs/stub-router.md prints it: BIRD and the agent on one host.

The page's snippets (the code blocks after ``<!-- literal: NAME -->``) are extracted and run
unchanged: the local BIRD (no kernel protocol) learns from an upstream BIRD over eBGP or iBGP,
v4 and v6, and passes everything to the agent over one loopback session on 127.0.0.1:1179 <-
127.0.0.2 (ExaBGP connects, listens nowhere: no clash on port 179); the agent installs the routes,
resolving next hops that are not directly connected through the routes it learned (iBGP case).
So the documentation cannot drift from what works.
"""

from __future__ import annotations

import os
import re

import pytest

from testlab.bird import Bird, base_config, bgp_protocol
from testlab.netns import ip_json, sh, wait_for
from conftest import agent_config

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "stub-router.md")
V4 = ["10.20.0.0/24", "203.0.113.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]


def snippet(name: str) -> str:
    text = open(DOC).read()
    m = re.search(rf"<!-- literal: {re.escape(name)} -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"docs/stub-router.md has no snippet {name}"
    return m.group(1)


def upstream(asn: int) -> str:
    """The fabric side (not in the docs): a BIRD at 10.0.0.1 / fd00::1 announcing V4 and V6;
    for iBGP, 203.0.113.0/24 with a next hop that is not on the shared link."""
    nh = "if net = 203.0.113.0/24 then bgp_next_hop = 10.20.0.1;" if asn == 65000 else ""
    return base_config("10.0.0.1", V4, V6) + "".join([
        bgp_protocol("n4", local="10.0.0.1", local_as=asn, neighbor="10.0.0.254", neighbor_as=65000, export={4: nh}),
        bgp_protocol("n6", local="fd00::1", local_as=asn, neighbor="fd00::254", neighbor_as=65000,
                     families=(6,), export={6: ""}),
    ])


@pytest.mark.parametrize("kind", ["ebgp", "ibgp"])
def test_the_documented_stub_router_works_as_printed(bgp_lab, kind):
    node = bgp_lab.node
    bgp_lab.bird("upstream", upstream(65001 if kind == "ebgp" else 65000))
    local = Bird(node.ns, bgp_lab.tmp / "local", snippet(f"stub-bird-{kind}"))
    bgp_lab.birds["local"] = local
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", snippet("stub-agent"))
    node.start()
    v4 = node.wait_routes(lambda r: set(V4) <= set(r), timeout=40)
    v6 = node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=40)
    assert v4["10.20.0.0/24"]["gateway"] == "10.0.0.1" and v4["10.20.0.0/24"]["dev"] == "up0"
    assert v6["2001:db8:1::/48"]["gateway"] == "fd00::1" and v6["2001:db8:1::/48"]["dev"] == "up0"
    exp = node.api("/api/explain?prefix=203.0.113.0/24")
    assert exp["candidates"][0]["origin"] == "ibgp/127.0.0.1"
    if kind == "ibgp":  # 10.20.0.1 is not on any link: resolved through the learned 10.20.0.0/24
        assert v4["203.0.113.0/24"]["gateway"] == "10.0.0.1" and v4["203.0.113.0/24"]["dev"] == "up0"
        assert exp["candidates"][0]["route"] == "via 10.20.0.1", exp
        assert "resolved through 10.20.0.0/24" in exp["candidates"][0]["detail"]
    assert ip_json(node.ns, "route", "show", "proto", "bird") == []  # BIRD itself installs nothing
    # strict bind: BIRD listens on 127.0.0.1:1179 only
    listening = sh("ss", "-Hltn", "sport = :1179", ns=node.ns).stdout.split()
    assert "127.0.0.1:1179" in listening and "0.0.0.0:1179" not in listening and "*:1179" not in listening
    log = (bgp_lab.tmp / "local" / "bird.log").read_text()
    assert "Missing next hop" not in log and "Cannot determine router ID" not in log


def test_a_local_bird_crash_keeps_the_routes_in_the_kernel(bgp_lab, monitor_factory):
    """Graceful restart on the loopback session, as docs/stub-router.md says: BIRD killed and started
    again, the agent's routes stay in the kernel throughout (no route event)."""
    node = bgp_lab.node
    bgp_lab.bird("upstream", upstream(65001))
    local = Bird(node.ns, bgp_lab.tmp / "local", snippet("stub-bird-ebgp"))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", snippet("stub-agent"))
    node.start()
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=40)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=40)
    wait_for(node.converged, 20)
    mon = monitor_factory(node.ns)
    local.proc.kill()
    local.proc.wait(5)
    local.close()
    wait_for(lambda: any(p["state"] != "up" for p in node.api("/api/peers")), 20, what="session down")
    again = Bird(node.ns, bgp_lab.tmp / "local2", snippet("stub-bird-ebgp"), recovery=True)
    bgp_lab.birds["local"] = again
    wait_for(lambda: all(p["state"] == "up" for p in node.api("/api/peers")), 40, what="session up again")
    wait_for(lambda: again.cmd("show", "protocols").count("Established") >= 3, 40, what="BIRD re-learned")
    wait_for(node.converged, 30)
    assert [e for e in mon.events() if any(p in e for p in V4 + V6)] == []
    assert set(V4) <= set(node.routes(4)) and set(V6) <= set(node.routes(6))
