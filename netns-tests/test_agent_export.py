"""Export end to end: the agent advertises the node's prefixes to real BIRD 2 peers."""

from __future__ import annotations

import os
import re
import signal
import time

from testlab.netns import wait_for
from testlab.bird import base_config, bgp_protocol
from conftest import HEADER, agent_config, bgp_peer

FAST = agent_config("  fib:\n    staleSeconds: 15\n")
POD4, POD6, VIP = "10.244.1.0/24", "fd00:244:1::/64", "192.0.2.10/32"


def advert(name, prefixes, labels="", extra=""):
    plist = ", ".join(f'"{p}"' for p in prefixes)
    return (f"{HEADER}kind: Advertisement\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n"
            f"spec:\n  prefixes: [{plist}]\n{extra}")


PODS = advert("pods", [POD4, POD6], "type: pod",
              '  communities: ["65000:100"]\n  largeCommunities: ["65000:1:2"]\n  med: 10\n'
              "  localPref: 300\n  asPathPrepend: 1\n")

BIRD_LOG = "    debug { routes };"  # BIRD logs every route it gets and loses


def tor(static4=(), ebgp=True, gr=True):
    """BIRD with an eBGP session on up0 (AS 65001, n4 and n6) and an iBGP one on up1 (AS 65000, i4)."""
    protos = [
        bgp_protocol("n4", local="10.0.0.1", local_as=65001, neighbor="10.0.0.254", neighbor_as=65000,
                     export={4: ""} if static4 else None, graceful_restart=gr, extra=BIRD_LOG),
        bgp_protocol("n6", local="fd00::1", local_as=65001, neighbor="fd00::254", neighbor_as=65000,
                     families=(6,), graceful_restart=gr, extra=BIRD_LOG),
        bgp_protocol("i4", local="10.0.1.1", local_as=65000, neighbor="10.0.1.254", neighbor_as=65000,
                     graceful_restart=gr, extra=BIRD_LOG),
    ]
    return base_config("10.0.0.1", list(static4)) + "\n".join(protos)


def peers(export="acceptAll"):
    pol = f"  importPolicy: acceptAll\n  exportPolicy: {export}\n" if export else "  importPolicy: acceptAll\n"
    return "---\n".join([
        bgp_peer("e4", "10.0.0.1", "10.0.0.254", extra=pol).replace("metadata:\n  name: e4",
                                                                      "metadata:\n  name: e4\n  labels: {role: tor}"),
        bgp_peer("e6", "fd00::1", "fd00::254", extra=pol),
        bgp_peer("i4", "10.0.1.1", "10.0.1.254", peer_as=65000, extra="  routerId: 10.0.0.253\n"
                 .replace("  routerId: 10.0.0.253\n", "")),
    ])


def route_block(bird, prefix, table="master4"):
    """`birdc show route all PREFIX` for the route learned from the agent (None when absent)."""
    out = bird.cmd("show", "route", "all", "for", prefix, "table", table, check=False)
    return out if "BGP.as_path" in out else None


def start(lab, *objects, bird_static=()):
    bird = lab.bird("tor", tor(bird_static))
    lab.node.write("agent.yaml", FAST)
    lab.node.write("objects.yaml", "---\n".join(objects))
    proc = lab.node.start()
    return bird, proc


def test_bird_sees_our_prefixes_with_the_exact_attributes_v4_v6(bgp_lab):
    bird, _ = start(bgp_lab, peers(), PODS)
    # BIRD keeps both copies of the v4 prefix: from the eBGP (n4) and the iBGP (i4) session
    v4 = wait_for(lambda: (lambda b: b if b and b.count("BGP.as_path") == 2 else None)(
        bird.cmd("show", "route", "all", "for", POD4, "table", "master4")), 30)
    ebgp, ibgp = _by_session(v4, "n4"), _by_session(v4, "i4")
    assert "BGP.as_path: 65000 65000" in ebgp  # our AS plus one prepend
    assert "BGP.community: (65000,100)" in ebgp and "BGP.large_community: (65000, 1, 2)" in ebgp
    assert "BGP.med: 10" in ebgp and "BGP.local_pref: 300" not in ebgp  # no local-pref over eBGP
    assert "BGP.local_pref: 300" in ibgp and "BGP.med: 10" in ibgp  # iBGP: local-pref, no prepend
    assert re.search(r"BGP.as_path: *\n", ibgp)  # iBGP: empty path, no prepend
    v6 = wait_for(lambda: route_block(bird, POD6, "master6"), 30)
    assert "BGP.as_path: 65000 65000" in v6 and "BGP.community: (65000,100)" in v6
    assert "BGP.large_community: (65000, 1, 2)" in v6 and "BGP.med: 10" in v6


def _by_session(block: str, proto: str) -> str:
    """The part of `birdc show route all` output for the route BIRD's protocol `proto` learned."""
    parts = re.split(r"(?m)^(?=\S|\s+(?:unicast|unreachable))", block)
    for part in parts:
        if f"[{proto} " in part:
            return part
    raise AssertionError(f"no route from {proto} in:\n{block}")


def test_removing_a_prefix_from_the_config_withdraws_it_at_bird(bgp_lab):
    node = bgp_lab.node
    bird, _ = start(bgp_lab, peers(), PODS, advert("vip", [VIP]))
    wait_for(lambda: route_block(bird, VIP), 30)
    node.write("objects.yaml", "---\n".join([peers(), PODS]))
    wait_for(lambda: route_block(bird, VIP) is None, 10)
    assert route_block(bird, POD4)


def test_per_peer_selection_and_aggregation(bgp_lab):
    tor_only = advert("tor-only", ["10.250.0.0/24"], extra="  peerSelector: {matchLabels: {role: tor}}\n")
    vips = advert("vips", ["10.96.0.10/32", "10.96.0.11/32"], extra="  aggregateLength: {ipv4: 24}\n")
    bird, _ = start(bgp_lab, peers(), tor_only, vips)
    wait_for(lambda: route_block(bird, "10.96.0.0/24"), 30)
    block = wait_for(lambda: route_block(bird, "10.250.0.0/24"), 10)
    assert block.count("BGP.as_path") == 1  # only e4 (role: tor) got it, not the iBGP session
    assert "via 10.0.0.254" in block
    # only the aggregate: no member /32 anywhere
    routes = bird.cmd("show", "route", "table", "master4")
    assert "10.96.0.10/32" not in routes and "10.96.0.11/32" not in routes


def test_learned_routes_are_not_readvertised(bgp_lab):
    bird, _ = start(bgp_lab, peers(), PODS, bird_static=["198.51.100.0/24"])
    bgp_lab.node.wait_routes(lambda r: "198.51.100.0/24" in r, timeout=30)
    wait_for(lambda: route_block(bird, POD4), 10)
    # BIRD's own static route is its only 198.51.100.0/24: nothing came back from the agent
    out = bird.cmd("show", "route", "all", "for", "198.51.100.0/24", "table", "master4")
    assert "BGP.as_path" not in out


def _refreshed_without_withdrawal(bird, mark: int, prefixes) -> None:
    """After `mark` in BIRD's log: every prefix announced again ("added"/"ignored": BIRD had kept
    it as stale under graceful restart), and, watched for a few seconds more (the End-of-RIB that
    follows would sweep stale routes), none ever "removed"."""
    def lines():
        return [l for l in bird.log.read_text()[mark:].splitlines() if any(p + " " in l for p in prefixes)]

    wait_for(lambda: all(any(p + " " in l and ("added" in l or "ignored" in l) for l in lines())
                         for p in prefixes), 30, what="re-announcement at BIRD")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert [l for l in lines() if "removed" in l] == []
        time.sleep(0.1)
    for prefix, table in ((POD4, "master4"), (POD6, "master6")):
        assert route_block(bird, prefix, table)


def test_exabgp_killed_bird_keeps_our_routes_without_a_withdrawal(bgp_lab):
    node = bgp_lab.node
    bird, _ = start(bgp_lab, peers(), PODS)
    wait_for(lambda: route_block(bird, POD4) and route_block(bird, POD6, "master6"), 30)
    mark = len(bird.log.read_text())
    pid = int((node.state / "speaker" / "exabgp.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "route_agent_exabgp_restarts_total 1.0" in (node.api("/metrics") or ""), 30)
    _refreshed_without_withdrawal(bird, mark, [POD4, POD6])


def test_agent_restarted_bird_keeps_our_routes_without_a_withdrawal(bgp_lab):
    node = bgp_lab.node
    bird, proc = start(bgp_lab, peers(), PODS)
    wait_for(lambda: route_block(bird, POD4) and route_block(bird, POD6, "master6"), 30)
    mark = len(bird.log.read_text())
    node.kill(proc, signal.SIGTERM)
    node.start()
    _refreshed_without_withdrawal(bird, mark, [POD4, POD6])
