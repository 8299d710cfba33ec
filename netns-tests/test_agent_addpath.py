"""ADD-PATH receive (RFC 7911) in the inline stub-router shape: two upstreams, one ECMP route.

Two upstream BIRDs (namespace `tor`: 10.0.0.1 / fd00::1 on the link to up0, 10.0.1.1 / fd00:1::1
on the link to up1, both AS 65001) announce the same prefixes to the local BIRD in the agent's
namespace (no kernel protocol, no ``merge paths``), which relays both paths of each prefix to the
agent over its one loopback session with ``add paths tx``. The agent (BgpPeer ``addPath:
{receive: true}``) keeps both as candidates of their own and installs one route with two next
hops; a path withdrawn by one upstream leaves a single-path route, and comes back as ECMP when
re-announced. IPv4 and IPv6 (MP-BGP over the one IPv4 session), raw and json UPDATEs. Without ``addPath`` the agent
gets BIRD's best path only: one next hop.
"""

from __future__ import annotations

import signal

import pytest

from testlab.bird import Bird, base_config, bgp_protocol
from testlab.netns import wait_for
from conftest import agent_config, gateways

V4 = ["198.51.100.0/24", "203.0.113.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
BOTH4 = ["10.0.0.1", "10.0.1.1"]
BOTH6 = ["fd00:1::1", "fd00::1"]


def upstream(i: int, v4=V4, v6=V6) -> str:
    """Upstream BIRD number `i` (0 or 1): its link's addresses, strict bind (two BIRDs share the
    `tor` namespace, so neither may listen on the wildcard address)."""
    return base_config(f"10.0.{i}.1", list(v4), list(v6)) + "".join([
        bgp_protocol("n4", local=f"10.0.{i}.1", local_as=65001, neighbor=f"10.0.{i}.254", neighbor_as=65000,
                     export={4: ""}, extra="    strict bind on;\n"),
        bgp_protocol("n6", local=f"fd00:{i}::1", local_as=65001, neighbor=f"fd00:{i}::254", neighbor_as=65000,
                     families=(6,), export={6: ""}, extra="    strict bind on;\n"),
    ])


def local_bird(add_paths: bool) -> str:
    """The README's local BIRD (eBGP upstreams), with two upstream links and ``add paths tx``."""
    tx = " add paths tx;" if add_paths else ""
    ups = "".join(
        f"protocol bgp up{i}v{v} {{ local {a}{i}{s}254 as 65000; neighbor {a}{i}{s}1 as 65001;"
        f" graceful restart on; ipv{v} {{ import all; export none; }}; }}\n"
        for i in (0, 1) for v, a, s in ((4, "10.0.", "."), (6, "fd00:", "::")))
    return ("router id 10.0.0.254;\nprotocol device { }\n" + ups +
            "protocol bgp agent {\n"
            "    local 127.0.0.1 port 1179 as 65000; neighbor 127.0.0.2 port 179 as 65000;\n"
            "    strict bind on; passive on; graceful restart on;\n"
            f"    ipv4 {{ import none; export all;{tx} }};\n"
            f"    ipv6 {{ import none; export all; next hop address ::1;{tx} }};\n"
            "}\n")


def agent_peer(add_path: bool, updates: str = "raw") -> str:
    extra = ", addPath: {receive: true}" if add_path else ""
    return ("apiVersion: routeagent.io/v1alpha1\nkind: BgpPeer\nmetadata: {name: local-bird}\n"
            "spec: {peerAddress: 127.0.0.1, port: 1179, peerAS: 65000, localAS: 65000,\n"
            "       routerId: 10.0.0.253, localAddress: 127.0.0.2, holdTime: 9,\n"
            f"       families: [ipv4-unicast, ipv6-unicast]{extra}}}\n---\n"
            "apiVersion: routeagent.io/v1alpha1\nkind: BgpSpeaker\nmetadata: {name: speaker}\n"
            f"spec: {{listenAddresses: [], updates: {updates}}}\n")


def start(bgp_lab, add_path: bool, updates: str = "raw"):
    node = bgp_lab.node
    ups = [Bird(bgp_lab.tor, bgp_lab.tmp / f"up{i}", upstream(i)) for i in (0, 1)]
    for i, b in enumerate(ups):
        bgp_lab.birds[f"up{i}"] = b
    bgp_lab.birds["local"] = Bird(node.ns, bgp_lab.tmp / "local", local_bird(add_path))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", agent_peer(add_path, updates))
    node.start()
    return node, ups


def hops(routes: dict, prefixes) -> dict:
    return {p: gateways(routes[p]) if p in routes else None for p in prefixes}


@pytest.mark.parametrize("updates", ["raw", "json"])
def test_two_upstreams_through_one_add_path_session_become_ecmp(bgp_lab, updates):
    """Both ways UPDATEs reach the agent: the wire codec (raw) and ExaBGP's JSON
    (``path-information``)."""
    node, ups = start(bgp_lab, add_path=True, updates=updates)
    ecmp4 = {p: BOTH4 for p in V4}
    ecmp6 = {p: BOTH6 for p in V6}
    node.wait_routes(lambda r: hops(r, V4) == ecmp4, timeout=60)
    node.wait_routes(lambda r: hops(r, V6) == ecmp6, family=6, timeout=60)
    v4 = node.routes(4)
    assert sorted(nh["dev"] for nh in v4[V4[0]]["nexthops"]) == ["up0", "up1"]
    exp = node.api(f"/api/explain?prefix={V4[0]}")
    cands = exp["candidates"]
    assert [c["origin"] for c in cands] == ["ibgp/127.0.0.1"] * 2, exp
    assert sorted(c["status"] for c in cands) == ["best", "multipath"], exp
    assert len({c["pathId"] for c in cands}) == 2 and exp["reason"] == "equal-cost multipath", exp
    assert sorted(c["route"] for c in cands) == ["via 10.0.0.1", "via 10.0.1.1"]
    assert len(exp["bgp"]) == 2 and {b["pathId"] for b in exp["bgp"]} == {c["pathId"] for c in cands}
    (peer,) = node.api("/api/peers")
    for fam, n in (("ipv4-unicast", len(V4)), ("ipv6-unicast", len(V6))):  # counted per path
        counts = peer["families"][fam]
        assert (counts["received"], counts["accepted"], counts["installed"]) == (2 * n, 2 * n, 2 * n), peer

    # upstream 1 withdraws one prefix per family: its path goes, the route keeps upstream 0's
    ups[1].reconfigure(upstream(1, V4[1:], V6[1:]))
    node.wait_routes(lambda r: hops(r, V4) == {V4[0]: ["10.0.0.1"], V4[1]: BOTH4}, timeout=30)
    node.wait_routes(lambda r: hops(r, V6) == {V6[0]: ["fd00::1"], V6[1]: BOTH6}, family=6, timeout=30)
    exp = node.api(f"/api/explain?prefix={V4[0]}")
    assert [(c["status"], c["route"]) for c in exp["candidates"]] == [("best", "via 10.0.0.1")], exp
    assert exp["reason"] == "only candidate"
    # and announces it again: ECMP again
    ups[1].reconfigure(upstream(1))
    node.wait_routes(lambda r: hops(r, V4) == ecmp4, timeout=30)
    node.wait_routes(lambda r: hops(r, V6) == ecmp6, family=6, timeout=30)
    # upstream 0 loses everything (its BIRD stops): upstream 1's paths alone remain
    ups[0].close()
    node.wait_routes(lambda r: hops(r, V4) == {p: ["10.0.1.1"] for p in V4}, timeout=30)
    node.wait_routes(lambda r: hops(r, V6) == {p: ["fd00:1::1"] for p in V6}, family=6, timeout=30)
    wait_for(node.converged, 20)


def test_without_add_path_the_agent_sees_birds_best_path_only(bgp_lab):
    """The reason for ADD-PATH: the same setup without it gives a single next hop. Turning
    ``addPath`` on with a reload resets the session (ExaBGP re-opens it with the capability)
    and the routes become ECMP."""
    node, _ = start(bgp_lab, add_path=False)
    routes = node.wait_routes(lambda r: all(hops(r, V4)[p] for p in V4), timeout=60)
    wait_for(lambda: bgp_lab.birds["local"].cmd("show", "protocols").count("Established") >= 5, 30,
             what="every BIRD session up")
    wait_for(node.converged, 20)
    routes = node.routes(4)
    assert all(len(hops(routes, V4)[p]) == 1 for p in V4), routes
    exp = node.api(f"/api/explain?prefix={V4[0]}")
    assert len(exp["candidates"]) == 1 and "pathId" not in exp["candidates"][0]
    bgp_lab.birds["local"].reconfigure(local_bird(add_paths=True))  # BIRD offers it (its session resets)
    node.write("peers.yaml", agent_peer(add_path=True))
    node.procs[-1].send_signal(signal.SIGHUP)
    node.wait_routes(lambda r: hops(r, V4) == {p: BOTH4 for p in V4}, timeout=60)
    node.wait_routes(lambda r: hops(r, V6) == {p: BOTH6 for p in V6}, family=6, timeout=60)


def test_restarts_keep_the_ecmp_routes_untouched(bgp_lab, monitor_factory):
    """Per-path state through both restarts: the agent SIGKILLed and started again (its ECMP
    routes adopted, the gate opens at BIRD's End-of-RIB, zero route events), then the local BIRD
    killed and started with -R (graceful restart: both paths of each prefix stale, re-sent with
    their ids, nothing swept: zero route events)."""
    node, _ = start(bgp_lab, add_path=True)
    node.wait_routes(lambda r: hops(r, V4) == {p: BOTH4 for p in V4}, timeout=60)
    node.wait_routes(lambda r: hops(r, V6) == {p: BOTH6 for p in V6}, family=6, timeout=60)
    wait_for(node.converged, 20)
    before = node.routes(4), node.routes(6)
    mon = monitor_factory(node.ns)
    node.kill(node.procs[-1])
    node.start()
    wait_for(lambda: all(p["state"] == "up" for p in node.api("/api/peers")), 40, what="session up")
    wait_for(node.converged, 30)
    mon.mark()
    assert [e for e in mon.events() if any(p in e for p in V4 + V6)] == []
    assert (node.routes(4), node.routes(6)) == before
    local = bgp_lab.birds["local"]
    local.proc.kill()
    local.proc.wait(5)
    local.close()
    wait_for(lambda: any(p["state"] != "up" for p in node.api("/api/peers")), 20, what="session down")
    peer = node.api("/api/peers")[0]
    assert peer["stale"] == 2 * (len(V4) + len(V6)), peer  # stale per path
    again = Bird(node.ns, bgp_lab.tmp / "local2", local_bird(True), recovery=True)
    bgp_lab.birds["local"] = again
    wait_for(lambda: all(p["state"] == "up" for p in node.api("/api/peers")), 40, what="session up again")
    wait_for(lambda: node.api("/api/peers")[0]["stale"] == 0, 60, what="End-of-RIB: nothing stale")
    wait_for(node.converged, 30)
    mon.mark()
    assert [e for e in mon.events() if any(p in e for p in V4 + V6)] == []
    assert (node.routes(4), node.routes(6)) == before
