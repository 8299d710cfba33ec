"""The inline stub router: BIRD and the agent on one host, peering over loopback.

BIRD (no kernel protocol) learns the fabric from an upstream BIRD and reflects it to the agent
over iBGP on 127.0.0.1:1179 <- 127.0.0.2 (ExaBGP connects, listens nowhere: no clash on port 179);
the agent installs the routes, resolving next hops that are not directly connected through the
routes it learned (recursive resolution).
"""

from __future__ import annotations

from testlab.netns import ip_json, wait_for
from testlab.bird import Bird
from conftest import HEADER, agent_config

UPSTREAM = """router id 10.0.0.1;
log stderr all;
protocol device { scan time 1; }
protocol static s4 { ipv4; route 10.20.0.0/24 blackhole; route 203.0.113.0/24 blackhole;
                     route 198.51.100.0/24 blackhole; }
protocol bgp node {
    local 10.0.0.1 as 65000; neighbor 10.0.0.254 as 65000;
    hold time 9; connect retry time 1; error wait time 1, 5;
    ipv4 { import none; export filter {
        if net = 203.0.113.0/24 then bgp_next_hop = 10.20.0.1;  # not on the shared link
        accept; }; };
}
"""

LOCAL = """router id 10.0.0.254;
log stderr all;
protocol device { scan time 1; }
# no kernel protocol: the agent programs the kernel
protocol bgp upstream {
    local 10.0.0.254 as 65000; neighbor 10.0.0.1 as 65000;
    hold time 9; connect retry time 1; error wait time 1, 5;
    ipv4 { import all; export none; };
}
protocol bgp agent {
    local 127.0.0.1 port 1179 as 65000; neighbor 127.0.0.2 port 179 as 65000;
    passive on; rr client; hold time 9; error wait time 1, 5;
    ipv4 { import none; export all; };
}
"""

AGENT = f"""{HEADER}kind: BgpPeer
metadata: {{name: local-bird}}
spec:
  peerAddress: 127.0.0.1
  port: 1179
  peerAS: 65000
  localAS: 65000
  routerId: 10.0.0.253  # not BIRD's: iBGP peers need distinct identifiers
  localAddress: 127.0.0.2
  holdTime: 9
---
{HEADER}kind: BgpSpeaker
metadata: {{name: speaker}}
spec:
  listenAddresses: []
"""


def test_agent_installs_what_the_local_bird_learned_with_recursive_next_hops(bgp_lab):
    node = bgp_lab.node
    bgp_lab.bird("upstream", UPSTREAM)
    local = Bird(node.ns, bgp_lab.tmp / "local", LOCAL)
    bgp_lab.birds["local"] = local
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", AGENT)
    node.start()
    want = {"10.20.0.0/24", "203.0.113.0/24", "198.51.100.0/24"}
    r = node.wait_routes(lambda r: want <= set(r), timeout=30)
    assert r["10.20.0.0/24"]["gateway"] == "10.0.0.1" and r["10.20.0.0/24"]["dev"] == "up0"
    # 10.20.0.1 is not on any link: resolved through the learned 10.20.0.0/24
    assert r["203.0.113.0/24"]["gateway"] == "10.0.0.1" and r["203.0.113.0/24"]["dev"] == "up0"
    exp = node.api("/api/explain?prefix=203.0.113.0/24")
    assert exp["candidates"][0]["origin"] == "ibgp/127.0.0.1"
    assert exp["candidates"][0]["route"] == "via 10.20.0.1", exp
    assert "resolved through 10.20.0.0/24" in exp["candidates"][0]["detail"]
    assert ip_json(node.ns, "route", "show", "proto", "bird") == []  # BIRD itself installs nothing
    # the covering route goes: the recursive route cannot resolve any more and leaves the kernel
    bgp_lab.birds["upstream"].reconfigure(UPSTREAM.replace("route 10.20.0.0/24 blackhole;", ""))
    node.wait_routes(lambda r: "203.0.113.0/24" not in r and "10.20.0.0/24" not in r, timeout=15)
    assert "198.51.100.0/24" in node.routes(4)
    assert wait_for(lambda: node.api("/api/explain?prefix=203.0.113.0/24")["candidates"][0]["status"]
                    == "unresolved", 5)
