"""GTSM (RFC 5082, `ttlSecurity`) against BIRD 2 `ttl security on`.

Layout: the agent's namespace (`node`, up0 10.0.0.254) and the ToR (`tor`, 10.0.0.1, BIRD with
`ttl security on`) share a link; a second BIRD (`far`, 10.0.9.2) sits one router further, behind
the ToR (forwarding on), so everything it sends reaches the agent with TTL 254.

* Both sides on, directly connected (IPv4 and IPv6 sessions): the sessions come up and routes
  are learned. BIRD with `ttl security on` drops what arrives below 255, so this also shows that
  ExaBGP sends with TTL 255 (the Linux default is 64).
* The far BIRD (`ttl security on; multihop 2`: accepts 254, sends 255) against the agent with
  `ttlSecurity: 1` (accepts 255 only): no session, and the agent's namespace counts the segments
  its kernel dropped for their TTL (`TcpExtTCPMinTTLDrop`, IP_MINTTL at work). The same peer with
  `ttlSecurity: 2` (one router between) comes up: what refused it was the TTL check alone.
"""

from __future__ import annotations

import re
import time

from conftest import bgp_peer, tor_config

from testlab.bird import Bird, base_config, bgp_protocol
from testlab.netns import ip, namespace, sh, sysctl, veth_between, wait_for

V4, V6, FAR = ["192.0.2.0/24"], ["2001:db8:1::/48"], ["198.51.100.0/24"]
GTSM = "    ttl security on;"


def peers(far_hops=None) -> str:
    extra = "  importPolicy: acceptAll\n  ttlSecurity: 1\n"
    docs = [bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=extra),
            bgp_peer("tor6", "fd00::1", "fd00::254", extra=extra)]
    if far_hops is not None:
        docs.append(bgp_peer("far", "10.0.9.2", "10.0.0.254", peer_as=65009,
                             extra=f"  importPolicy: acceptAll\n  ttlSecurity: {far_hops}\n"))
    return "---\n".join(docs)


def min_ttl_drops(ns: str) -> int:
    out = sh("nstat", "-az", "TcpExtTCPMinTTLDrop", ns=ns).stdout
    m = re.search(r"TcpExtTCPMinTTLDrop\s+(\d+)", out)
    return int(m.group(1)) if m else -1


def test_gtsm_with_bird_up_when_direct_refused_one_hop_further(bgp_lab, tmp_path):
    node, tor = bgp_lab.node, bgp_lab.tor
    bgp_lab.bird("tor", tor_config(V4, V6, bgp_extra=GTSM))
    node.write("peers.yaml", peers())
    node.start()
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    assert bgp_lab.birds["tor"].protocol_state("n4") == "Established"
    assert bgp_lab.birds["tor"].protocol_state("n6") == "Established"

    with namespace("ra-far-") as far:
        veth_between(tor, "far0", "10.0.9.1/24", far, "eth0", "10.0.9.2/24")
        sysctl(tor, "net.ipv4.ip_forward=1")
        ip(far, "route", "add", "default", "via", "10.0.9.1")
        ip(node.ns, "route", "add", "10.0.9.0/24", "via", "10.0.0.1")
        far_bird = Bird(far, tmp_path / "far", base_config("10.0.9.2", FAR) + bgp_protocol(
            "up", local="10.0.9.2", local_as=65009, neighbor="10.0.0.254", neighbor_as=65000,
            export={4: ""}, extra=GTSM + "\n    multihop 2;"))
        try:
            _far_peer(node, far_bird)
        finally:
            far_bird.close()


def _far_peer(node, far_bird) -> None:
    drops = min_ttl_drops(node.ns)
    assert drops >= 0, "the kernel has no TcpExtTCPMinTTLDrop counter"
    node.write("peers.yaml", peers(far_hops=1))
    # the agent connects (SYN out with TTL 255, BIRD accepts 254) and BIRD connects to the agent
    # (nothing listens: refused); the SYN-ACKs come back with TTL 254: dropped by IP_MINTTL 255
    wait_for(lambda: min_ttl_drops(node.ns) >= drops + 2, 30, what="segments dropped for their TTL")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3:  # several connect attempts (BIRD retries every second)
        assert far_bird.protocol_state("up") != "Established"
        assert "198.51.100.0/24" not in node.routes(4)
        time.sleep(0.2)
    assert {p["name"]: p["state"] for p in node.api("/api/peers")}["far"] != "up"
    print(f"ttlSecurity 1: {min_ttl_drops(node.ns) - drops} segments dropped for their TTL, no session")
    # one router between is what ttlSecurity 2 allows: the same peer comes up
    node.write("peers.yaml", peers(far_hops=2))
    node.wait_routes(lambda r: set(FAR) <= set(r), timeout=30)
    assert far_bird.protocol_state("up") == "Established"
    assert set(V4) <= set(node.routes(4))  # the direct sessions stayed up meanwhile
