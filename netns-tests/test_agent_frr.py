"""The agent against FRR (Debian frr 8.4: zebra, staticd, bgpd) as a second real BGP implementation.

The same namespaces as the BIRD tests (`bgp_lab`: the agent's namespace `node`, the ToR namespace
with 10.0.0.1 / fd00::1 on tor0), an FRR in the ToR namespace (`testlab.frr`, its own files,
sockets and vty; asserted through ``vtysh ... json``). Each test gets its own FRR: it starts in
well under a second, and the tests restart it, kill it, tear its sessions down and change its
passwords, so sharing one would make each test depend on what the previous one left behind (FRR
keeps a killed agent's routes as stale for the whole restart time).
"""

from __future__ import annotations

import signal
import time

import pytest

from testlab import frr as frrlab
from testlab.frr import Frr, bgp_config, prepend_route_map, static_config
from testlab.netns import sh, wait_for
from conftest import HEADER, agent_config, bgp_peer

pytestmark = pytest.mark.skipif(not frrlab.available(), reason="FRR not installed (scripts/install.sh)")

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
FAST = agent_config("  fib:\n    staleSeconds: 15\n")
POD4, POD6, VIP = "10.244.1.0/24", "fd00:244:1::/64", "192.0.2.10/32"
N4, N6 = "10.0.0.254", "fd00::254"  # the agent, as FRR's neighbors


def advert(name, prefixes, extra=""):
    plist = ", ".join(f'"{p}"' for p in prefixes)
    return (f"{HEADER}kind: Advertisement\nmetadata:\n  name: {name}\n  labels: {{type: pod}}\n"
            f"spec:\n  prefixes: [{plist}]\n{extra}")


PODS = advert("pods", [POD4, POD6], '  communities: ["65000:100", "65000:200"]\n'
              '  largeCommunities: ["65000:1:2"]\n  med: 10\n  localPref: 300\n  asPathPrepend: 1\n')


def peers(policy="acceptAll", extra="", extra6=None, export=True):
    pol = (f"  importPolicy: {policy}\n" if policy else "") + ("  exportPolicy: acceptAll\n" if export else "")
    return (bgp_peer("tor4", "10.0.0.1", N4, extra=pol + extra) + "---\n"
            + bgp_peer("tor6", "fd00::1", N6, extra=pol + (extra if extra6 is None else extra6)))


def frr_conf(static4=V4, static6=V6, **kw):
    return bgp_config(65001, "10.0.0.1", {N4: 65000, N6: 65000}, networks4=static4, networks6=static6, **kw)


def start_frr(lab, static4=V4, static6=V6, **kw) -> Frr:
    frr = Frr(lab.tor, lab.tmp / "frr", frr_conf(static4, static6, **kw), static_config(static4, static6),
              hostname="tor")
    lab.birds["frr"] = frr  # BgpLab.close() closes it (it has the same close())
    return frr


def start(lab, *objects, static4=V4, static6=V6, wait=True, **frr_kw):
    frr = start_frr(lab, static4, static6, **frr_kw)
    lab.node.write("agent.yaml", FAST)
    lab.node.write("objects.yaml", "---\n".join(objects or (peers(),)))
    proc = lab.node.start(wait=wait)
    return frr, proc


def metric_value(node, line_prefix):
    for line in (node.api("/metrics") or "").splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return None


def established(frr, *addrs):
    return all(frr.established(a) for a in addrs)


def learned_everything(node):
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)


# ------------------------------------------------------------------------------------------ learning


def test_routes_learned_from_frr_v4_v6_with_frr_next_hops_and_withdraw_removes_them(bgp_lab):
    node = bgp_lab.node
    frr, _ = start(bgp_lab)
    v4 = node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    assert v4["192.0.2.0/24"]["gateway"] == "10.0.0.1" and v4["192.0.2.0/24"]["dev"] == "up0"
    v6 = node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    # FRR sends a global and a link-local next hop on a shared link (RFC 2545): we use the global
    assert v6["2001:db8:1::/48"]["gateway"] == "fd00::1" and v6["2001:db8:1::/48"]["dev"] == "up0"
    exp = node.api("/api/explain?prefix=2001:db8:1::/48")
    assert exp["candidates"][0]["origin"] == "ebgp/fd00::1" and exp["candidates"][0]["bgp"]["asPath"] == [65001]
    nbr6 = frr.neighbor(N6)
    assert nbr6["bgpState"] == "Established" and nbr6.get("nexthopGlobal") == "fd00::1"
    assert nbr6.get("nexthopLocal", "").startswith("fe80:")  # so FRR did send the link-local one too
    # withdraw: FRR stops announcing one prefix per family
    frr.configure("router bgp 65001", "address-family ipv4 unicast", f"no network {V4[1]}",
                  "exit-address-family", "address-family ipv6 unicast", f"no network {V6[1]}")
    node.wait_routes(lambda r: V4[1] not in r and V4[0] in r, timeout=10)
    node.wait_routes(lambda r: V6[1] not in r and V6[0] in r, family=6, timeout=10)
    assert {p["address"]: p["state"] for p in node.api("/api/peers")} == {"10.0.0.1": "up", "fd00::1": "up"}


MARK = "203.0.113.0/24"  # announced without the loop, after the looped ones: the agent has seen those
LOOP_MAP = prepend_route_map("LOOP", 65000, unless=(MARK,))


def test_as_loop_from_frr_never_reaches_the_kernel(bgp_lab):
    """FRR prepends the agent's own AS 65000 toward the v4 session: the path 65001 65000 is a loop."""
    node = bgp_lab.node
    frr, _ = start(bgp_lab, extra=LOOP_MAP, route_map_out={N4: "LOOP"})
    wait_for(lambda: frr.established(N4), 30, what="v4 session")
    # FRR's adj-RIB-out toward us (its own AS is added as it sends): both prefixes with our AS
    wait_for(lambda: (lambda a: all(a.get(p, {}).get("path") == "65000" for p in V4))(frr.advertised(N4, 4)),
             15, what="looped prefixes sent by FRR")
    # then a clean prefix on the same session: once it is installed, the looped UPDATEs before it
    # have been decided (wherever the agent rejects them, counted or not)
    frr.configure(f"ip route {MARK} blackhole", "router bgp 65001", "address-family ipv4 unicast",
                  f"network {MARK}")
    node.wait_routes(lambda r: MARK in r, timeout=15)
    assert node.api(f"/api/explain?prefix={MARK}")["candidates"][0]["bgp"]["asPath"] == [65001]
    assert set(V4) & set(node.routes(4)) == set()  # dropped as AS loops (reason as_loop)
    metrics = node.api("/metrics")
    assert any("as_loop" in l and not l.rstrip().endswith(" 0.0") for l in metrics.splitlines()
               if l.startswith("route_agent_bgp_prefixes_rejected_total")), "as_loop rejections not counted"
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=15)  # the v6 session: no prepend


def test_route_refresh_both_ways(bgp_lab):
    """FRR asks us (``clear bgp ... soft in``): we answer with our routes again. A policy reload on
    our side asks FRR: the prefix the new policy accepts is installed without a session reset."""
    node = bgp_lab.node
    policy = ("apiVersion: routeagent.io/v1alpha1\nkind: RoutePolicy\nmetadata: {name: only-doc}\nspec:\n"
              "  statements:\n    - name: doc\n      conditions:\n        prefixSet: [{prefix: 192.0.2.0/24}]\n"
              "      actions: {result: accept}\n")
    frr, _ = start(bgp_lab, peers("only-doc"), policy, PODS)
    node.wait_routes(lambda r: V4[0] in r, timeout=30)
    wait_for(lambda: frr.route(POD4), 30, what="our prefix at FRR")
    before = frr.neighbor(N4)
    # FRR -> agent: ROUTE-REFRESH (no soft-reconfiguration inbound: FRR really asks)
    frr.vtysh(f"clear bgp ipv4 unicast {N4} soft in")
    after = wait_for(lambda: (lambda n: n if n["messageStats"]["updatesRecv"] > before["messageStats"]["updatesRecv"]
                              else None)(frr.neighbor(N4)), 15, what="our answer to FRR's route refresh")
    assert after["messageStats"]["routeRefreshSent"] > before["messageStats"]["routeRefreshSent"]
    assert after["bgpState"] == "Established" and after["connectionsEstablished"] == 1
    assert frr.route(POD4)
    # agent -> FRR: a policy reload asks for a refresh
    assert V4[1] not in node.routes(4)
    node.write("objects.yaml", "---\n".join([peers("acceptAll"), PODS]))
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=15)
    nbr = frr.neighbor(N4)
    assert nbr["messageStats"]["routeRefreshRecv"] >= 1 and nbr["connectionsEstablished"] == 1


# ------------------------------------------------------------------------------------------ export


def test_frr_sees_our_prefixes_with_the_exact_attributes_v4_v6_and_a_withdrawal(bgp_lab):
    node = bgp_lab.node
    # allowas-in: FRR would accept its own routes coming back, so "not sent back" is observable
    frr, _ = start(bgp_lab, peers(), PODS, advert("vip", [VIP]), neighbor_extra={N4: ("allowas-in",)})
    # the agent learns FRR's 198.51.100.0/24 (192.0.2.0/24 covers our VIP: the guard refuses it)
    bgp_lab.node.wait_routes(lambda r: V4[1] in r, timeout=30)
    for prefix, nh in ((POD4, N4), (POD6, N6)):
        r = wait_for(lambda: frr.route(prefix), 30, what=f"{prefix} at FRR")
        (path,) = r["paths"]
        assert path["aspath"]["string"] == "65000 65000"  # our AS plus one prepend
        assert path["community"]["string"] == "65000:100 65000:200"
        assert path["largeCommunity"]["string"] == "65000:1:2"
        assert path["metric"] == 10  # MED
        assert path["origin"] == "IGP"
        assert path["nexthops"][0]["ip"] == nh
        assert path["peer"]["peerId"] == nh and path["peer"]["type"] == "external"
        assert path.get("locPrf", 100) == 100  # FRR default (it ignores LOCAL_PREF from eBGP anyway)
    wait_for(lambda: frr.route(VIP), 10, what="VIP at FRR")
    node.write("objects.yaml", "---\n".join([peers(), PODS]))
    wait_for(lambda: frr.route(VIP) is None, 10, what="VIP withdrawn at FRR")
    assert frr.route(POD4) and frr.route(POD6)
    # learned routes are not sent back (FRR's routes from us: only our own prefix)
    assert set(frr.received(N4, 4)) == {POD4}
    assert "allowas-in" in frr.vtysh("show running-config", daemon="bgpd")


def _stale(frr, prefix):
    r = frr.route(prefix)
    return bool(r) and all(p.get("stale") for p in r["paths"])


def test_agent_sigkill_frr_keeps_our_routes_stale_and_restart_gives_zero_route_events(bgp_lab, monitor_factory):
    node = bgp_lab.node
    frr, proc = start(bgp_lab, peers(), PODS)
    learned_everything(node)
    wait_for(node.converged, 10)
    wait_for(lambda: frr.route(POD4) and frr.route(POD6), 30, what="our prefixes at FRR")
    before = node.routes(4), node.routes(6)
    mon = monitor_factory(node.ns)
    node.kill(proc)  # the agent dies: ExaBGP's sessions close with no NOTIFICATION (its child dies too)
    wait_for(lambda: not established(frr, N4) and not established(frr, N6), 30, what="FRR sees the sessions down")
    # FRR, the GR helper, keeps our routes, marked stale
    wait_for(lambda: _stale(frr, POD4) and _stale(frr, POD6), 10, what="our routes stale at FRR")
    node.start()
    wait_for(node.converged, 30)
    wait_for(lambda: established(frr, N4, N6), 30, what="sessions back")
    wait_for(lambda: all(p["state"] == "up" and not p["stale"] for p in node.api("/api/peers")), 30)
    wait_for(lambda: frr.route(POD4) and not _stale(frr, POD4) and frr.route(POD6) and not _stale(frr, POD6),
             15, what="our routes refreshed at FRR")
    mon.mark()
    assert mon.events() == []
    assert (node.routes(4), node.routes(6)) == before


def test_frr_restart_with_graceful_restart_keeps_our_kernel_routes(bgp_lab, monitor_factory):
    node = bgp_lab.node
    frr, _ = start(bgp_lab)
    learned_everything(node)
    wait_for(node.converged, 10)
    before = node.routes(4), node.routes(6)
    mon = monitor_factory(node.ns)
    frr.stop_bgpd(signal.SIGKILL)  # bgpd dies without a NOTIFICATION: we are the GR helper
    wait_for(lambda: all(p["state"] != "up" for p in node.api("/api/peers")), 30, what="agent sees the sessions down")
    assert all(p["stale"] for p in node.api("/api/peers"))
    assert (node.routes(4), node.routes(6)) == before  # kept
    frr.start_bgpd()
    wait_for(lambda: established(frr, N4, N6), 30, what="sessions back at FRR")
    wait_for(lambda: all(p["state"] == "up" and not p["stale"] for p in node.api("/api/peers")), 30,
             what="End-of-RIB from the restarted FRR")
    mon.mark()
    assert [e for e in mon.events() if any(p in e for p in V4 + V6)] == []
    assert (node.routes(4), node.routes(6)) == before


# ------------------------------------------------------------------------------------------ sessions


def test_max_prefix_teardown_frr_shows_the_cease_6_1(bgp_lab):
    node = bgp_lab.node
    # ExaBGP 5.0.15 closes a session silently when it announced graceful restart: Cease 6/1 needs GR off
    limit = "  maxPrefix: [{family: ipv4-unicast, limit: 1, action: teardown}]\n  gracefulRestartSeconds: 0\n"
    frr, _ = start(bgp_lab, peers(extra=limit, extra6=""), wait=False)

    def cease():  # FRR resets for other reasons first (e.g. "Waiting for peer OPEN" while we start)
        n = frr.neighbor(N4)
        return n if "lastNotificationReason" in n else None

    nbr = wait_for(cease, 30, what="FRR's last NOTIFICATION")
    assert nbr["lastNotificationReason"].startswith("Cease/Maximum Number of Prefixes Reached"), nbr
    assert nbr["lastResetDueTo"] == "BGP Notification received", nbr
    peer = wait_for(lambda: [p for p in (node.api("/api/peers") or []) if p["held_down"]], 10)[0]
    assert peer["state"] == "down" and peer["address"] == "10.0.0.1"
    node.wait_routes(lambda r: not set(V4) & set(r), timeout=10)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)  # the v6 session is not limited
    deadline = time.monotonic() + 3  # and it stays down: FRR retries every second
    while time.monotonic() < deadline:
        assert not frr.established(N4)
        time.sleep(0.2)


def test_md5_session_comes_up_and_a_wrong_password_does_not(bgp_lab, tmp_path):
    node = bgp_lab.node
    (tmp_path / "good").write_text("s3cret-Pw\n")
    (tmp_path / "bad").write_text("wrong-one\n")
    frr, _ = start(bgp_lab, peers(extra=f"  md5PasswordFile: {tmp_path / 'good'}\n",
                                  extra6=f"  md5PasswordFile: {tmp_path / 'bad'}\n"),
                   password="s3cret-Pw", wait=False)
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    assert frr.established(N4)
    deadline = time.monotonic() + 3  # both sides retry every second: give the wrong key a few rounds
    while time.monotonic() < deadline:
        states = {p["address"]: p["state"] for p in node.api("/api/peers")}
        assert states["fd00::1"] != "up" and node.routes(6) == {} and not frr.established(N6)
        time.sleep(0.2)
    assert "s3cret" not in node.logtext() and "wrong-one" not in node.logtext()


def test_frr_files_are_its_own(bgp_lab):
    """Two FRRs side by side, nothing under the system's /etc/frr or /var/run/frr."""
    frr = start_frr(bgp_lab)
    other = Frr(bgp_lab.tor, bgp_lab.tmp / "frr2", bgp_config(65002, "10.0.1.1", {"10.0.1.254": 65000}),
                hostname="tor2", bgp_port=1179)
    bgp_lab.birds["frr2"] = other
    listening = sh("ss", "-Hltn", ns=bgp_lab.tor).stdout
    assert ":179 " in listening and ":1179 " in listening, listening
    assert frr.dir != other.dir and "/etc/frr" not in str(frr.dir) and "/var/run/frr" not in str(frr.dir)
    assert frr.show("show bgp summary")["ipv4Unicast"]["as"] == 65001
    assert other.show("show bgp summary")["ipv4Unicast"]["as"] == 65002
    assert (frr.dir / "bgpd.pid").exists() and (other.dir / "bgpd.pid").exists()
    run_dir = frr.dir
    frr.close()
    assert not run_dir.exists() and (bgp_lab.tmp / "frr" / "bgpd.log").exists()
