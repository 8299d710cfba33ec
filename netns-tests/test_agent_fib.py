"""The real agent against the real kernel: static routes, ECMP, foreign routes, repair, restart."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from testlab.netns import ip, ip_json, wait_for
from testlab.tables import parse
from conftest import PROTO, agent_config, gateways, static_routes, without_nhid

ROUTES = """\
    - prefix: 192.0.2.0/24
      nextHops: [{gateway: 10.0.0.1}]
    - prefix: 198.18.0.0/16
      nextHops: [{gateway: 10.0.0.1}, {gateway: 10.0.1.1}]
    - prefix: 203.0.113.0/24
      blackhole: true
    - prefix: 2001:db8:10::/48
      nextHops: [{gateway: "fd00::1"}]
    - prefix: 2001:db8:20::/48
      nextHops: [{gateway: "fd00::1"}, {gateway: "fd00:1::1"}]
"""


def test_static_routes_v4_v6_ecmp_blackhole_with_our_proto_and_metric(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    v4 = node.wait_routes(lambda r: len(r) == 3)
    assert v4["192.0.2.0/24"]["gateway"] == "10.0.0.1" and v4["192.0.2.0/24"]["dev"] == "up0"
    assert v4["192.0.2.0/24"]["metric"] == 20
    # the filter above already selected our protocol; unfiltered, the kernel names it
    assert node.routes(4, proto=None)["192.0.2.0/24"]["protocol"] in ("route-agent", str(PROTO))
    assert gateways(v4["198.18.0.0/16"]) == ["10.0.0.1", "10.0.1.1"]  # one multipath route
    assert v4["203.0.113.0/24"]["type"] == "blackhole"
    v6 = node.wait_routes(lambda r: len(r) == 2, family=6)
    assert v6["2001:db8:10::/48"]["gateway"] == "fd00::1" and v6["2001:db8:10::/48"]["metric"] == 20
    assert gateways(v6["2001:db8:20::/48"]) == ["fd00:1::1", "fd00::1"]


def test_table_protocol_and_metric_are_configurable(node):
    node.write("agent.yaml", agent_config("  fib:\n    table: 100\n    protocol: 222\n    metric: 77\n"))
    node.write("static.yaml", static_routes("s", ROUTES))
    node.start()
    r = node.wait_routes(lambda r: len(r) == 3, table=100, proto=222)
    assert r["192.0.2.0/24"]["metric"] == 77
    assert node.routes(4, proto=PROTO) == {}


def test_foreign_route_wins_and_ours_appears_when_it_is_deleted(node):
    ip(node.ns, "route", "add", "192.0.2.0/24", "via", "10.0.1.1", "proto", "static")
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    node.wait_routes(lambda r: "198.18.0.0/16" in r)
    assert "192.0.2.0/24" not in node.routes(4)
    assert node.api("/api/explain?prefix=192.0.2.0/24")["note"].startswith("a foreign kernel route")
    ip(node.ns, "route", "del", "192.0.2.0/24", "proto", "static")
    r = node.wait_routes(lambda r: "192.0.2.0/24" in r, timeout=5)
    assert r["192.0.2.0/24"]["gateway"] == "10.0.0.1"
    # and a foreign route appearing later takes the prefix back: ours is removed
    ip(node.ns, "route", "add", "192.0.2.0/24", "via", "10.0.1.1", "proto", "boot", "metric", "5")
    node.wait_routes(lambda r: "192.0.2.0/24" not in r, timeout=5)
    assert node.routes(4, proto="boot")["192.0.2.0/24"]["gateway"] == "10.0.1.1"


def test_ip_route_del_of_ours_is_repaired_within_2s(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    node.wait_routes(lambda r: "192.0.2.0/24" in r)
    ip(node.ns, "route", "del", "192.0.2.0/24", "proto", str(PROTO))
    t0 = time.monotonic()
    node.wait_routes(lambda r: "192.0.2.0/24" in r, timeout=2)
    assert time.monotonic() - t0 < 2
    ip(node.ns, "-6", "route", "del", "2001:db8:20::/48", "proto", str(PROTO))
    v6 = node.wait_routes(lambda r: "2001:db8:20::/48" in r, family=6, timeout=2)
    assert len(v6["2001:db8:20::/48"]["nexthops"]) == 2


def test_routes_of_other_protocols_are_never_touched(node):
    ip(node.ns, "route", "add", "100.64.0.0/10", "via", "10.0.0.9", "proto", "static")
    ip(node.ns, "route", "add", "100.64.0.0/10", "via", "10.0.1.9", "proto", "200", "metric", "300")
    ip(node.ns, "-6", "route", "add", "2001:db8:99::/48", "via", "fd00::9", "proto", "bird")
    before = node.routes(4, proto=None), node.routes(6, proto=None)
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    proc = node.start("--flush-on-exit")
    node.wait_routes(lambda r: len(r) == 3)
    node.kill(proc, signal.SIGTERM)  # flushes ours only
    assert node.routes(4) == {} and node.routes(6) == {}
    assert (node.routes(4, proto=None), node.routes(6, proto=None)) == before


def test_unresolved_route_is_explained_then_installed_when_reachable(node):
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.0/24\n      nextHops: [{gateway: 10.7.0.1}]\n"))
    node.start()
    exp = wait_for(lambda: node.api("/api/explain?prefix=192.0.2.0/24"), 5)
    assert exp["candidates"][0]["status"] == "unresolved"
    assert "10.7.0.1 is not reachable" in exp["candidates"][0]["detail"]
    assert node.routes(4) == {}
    ip(node.ns, "addr", "add", "10.7.0.254/24", "dev", "up1")
    r = node.wait_routes(lambda r: "192.0.2.0/24" in r, timeout=5)
    assert r["192.0.2.0/24"]["dev"] == "up1"


def test_sigkill_and_restart_unchanged_config_gives_zero_route_events(node, monitor_factory):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    proc = node.start()
    node.wait_routes(lambda r: len(r) == 3)
    node.wait_routes(lambda r: len(r) == 2, family=6)
    wait_for(node.converged, 5)
    before = node.routes(4), node.routes(6)
    mon = monitor_factory(node.ns)
    node.kill(proc)  # SIGKILL: no cleanup at all
    assert (node.routes(4), node.routes(6)) == before  # routes never left the kernel
    node.start()
    wait_for(node.converged, 10)
    mon.mark()
    assert mon.events() == []
    assert (node.routes(4), node.routes(6)) == before
    metrics = node.api("/metrics")
    writes = [l for l in metrics.splitlines() if l.startswith("route_agent_netlink_operations_total{")]
    assert writes == []  # zero netlink writes after the restart


def test_route_removed_while_down_is_swept_and_others_untouched(node, monitor_factory):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    proc = node.start()
    node.wait_routes(lambda r: len(r) == 3)
    wait_for(node.converged, 5)
    node.kill(proc)
    node.write("static.yaml", static_routes("uplinks", ROUTES.replace(
        "    - prefix: 203.0.113.0/24\n      blackhole: true\n", "").replace(
        "[{gateway: 10.0.0.1}]", "[{gateway: 10.0.1.1}]", 1)))
    mon = monitor_factory(node.ns)
    node.start()
    node.wait_routes(lambda r: "203.0.113.0/24" not in r and r["192.0.2.0/24"]["gateway"] == "10.0.1.1")
    wait_for(node.converged, 5)
    mon.mark()
    events = mon.events()
    assert len(events) == 2, events  # the replaced route and the swept one, nothing else
    assert any(e.startswith("Deleted") and "203.0.113.0/24" in e for e in events)
    assert any("192.0.2.0/24 via 10.0.1.1" in without_nhid(e) for e in events)
    metrics = node.api("/metrics")
    assert "route_agent_stale_routes_swept_total 1.0" in metrics
    # exactly two netlink writes (the kernel sends no event for a rewrite of an identical route)
    writes = [l for l in metrics.splitlines() if l.startswith("route_agent_netlink_operations_total{")]
    assert sum(float(l.split()[-1]) for l in writes) == 2, writes


def test_reload_applies_valid_config_and_keeps_last_good_on_invalid(node):
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.0/24\n      nextHops: [{gateway: 10.0.0.1}]\n"))
    node.start()
    node.wait_routes(lambda r: set(r) == {"192.0.2.0/24"})
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.0/24\n      nextHops: [{gateway: 10.0.0.1}]\n"
                                                 "    - prefix: 192.0.3.0/24\n      blackhole: true\n"))
    node.wait_routes(lambda r: set(r) == {"192.0.2.0/24", "192.0.3.0/24"}, timeout=5)
    # an invalid config: rejected, counted, routes kept
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.2.1/24\n      blackhole: true\n"))
    wait_for(lambda: "route_agent_config_reload_failures_total 1.0" in node.api("/metrics"), 5)
    assert "route_agent_config_last_reload_successful 0.0" in node.api("/metrics")
    assert set(node.routes(4)) == {"192.0.2.0/24", "192.0.3.0/24"}
    assert "host bits" in node.logtext() or "192.0.2.0/24" in node.logtext()
    # SIGHUP after fixing it reloads too
    node.write("static.yaml", static_routes("s", "    - prefix: 192.0.3.0/24\n      blackhole: true\n"))
    node.wait_routes(lambda r: set(r) == {"192.0.3.0/24"}, timeout=5)


def test_readyz_metrics_and_cli_views(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    wait_for(node.converged, 5)
    assert node.api("/readyz").strip() == "ready"
    m = node.api("/metrics")
    assert 'route_agent_rib_routes{kind="static",origin="uplinks"} 5.0' in m
    assert 'route_agent_fib_routes{family="ipv4"} 3.0' in m
    assert "route_agent_reconcile_duration_seconds_count" in m
    out = subprocess.run(["ip", "netns", "exec", node.ns, sys.executable, "-m", "agent", "explain",
                          "198.18.0.0/16"], capture_output=True, text=True, check=True).stdout
    assert "static/uplinks" in out and "installed" in out
    show = subprocess.run(["ip", "netns", "exec", node.ns, sys.executable, "-m", "agent", "show", "fib"],
                          capture_output=True, text=True, check=True).stdout
    fib = {r["Prefix"]: (r["State"], without_nhid(" " + r["Route"]).strip())
           for r in parse(show.split("\n\n")[0].splitlines()[1:])}
    assert fib["192.0.2.0/24"] == ("installed", "via 10.0.0.1 dev up0 metric 20")
    rib = subprocess.run(["ip", "netns", "exec", node.ns, sys.executable, "-m", "agent", "show", "rib"],
                         capture_output=True, text=True, check=True).stdout
    row = next(r for r in parse(rib.splitlines()) if r["Prefix"] == "198.18.0.0/16")  # read page by page
    assert (row[" "], row["Origin"]) == ("*", "static/uplinks")
    page = node.api("/api/rib?limit=1")
    assert len(page["routes"]) == 1 and page["next"] == page["routes"][0]["prefix"]


def test_sigterm_keeps_routes_in_the_kernel(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    proc = node.start()
    node.wait_routes(lambda r: len(r) == 3)
    wait_for(node.converged, 5)
    before = node.routes(4), node.routes(6)
    node.kill(proc, signal.SIGTERM)
    assert proc.returncode == 0
    assert (node.routes(4), node.routes(6)) == before
    assert "routes left in the kernel" in node.logtext()


def test_readme_demo_command_runs():
    """The README's first command, exactly: install, then the demo in throw-away namespaces (its
    output is the README's 5-minute tour)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(["bash", "scripts/demo.sh"], capture_output=True, text=True, timeout=300, cwd=root)
    assert out.returncode == 0, out.stderr
    text = without_nhid(out.stdout)
    # learned from the upstream BIRD through the import policy, in the kernel with our protocol
    assert "198.18.1.0/24 via 10.99.0.1 dev ra-demo0 metric 20" in text
    # IPv6 through a one-member nexthop group (the default) prints as a multipath route of one
    assert re.search(r"2001:db8:1::/48 (via fd00:99::1 dev ra-demo0 metric 20|metric 20 pref medium\n"
                     r"\s+nexthop via fd00:99::1 dev ra-demo0 weight 1)", text), text
    # refused: the default route and our own prefix (guard), the tagged and unlisted ones (policy)
    routes = text.split("$ route-agent show peers")[0]
    for refused in ("default", "10.244.1.0/24", "192.0.2.0/24", "198.18.100.0/24", "fd00:244:1::/64"):
        assert refused not in routes, refused
    table = text.split("$ route-agent show peers\n")[1].split("\n\n")[0].splitlines()
    peers = [[r[k] for k in ("Name", "Address", "State", "Recv", "Accept", "Reject", "Inst")] for r in parse(table)]
    assert peers == [
        ["upstream4", "10.99.0.1", "up", "29", "25", "4", "25"],
        ["upstream6", "fd00:99::1", "up", "10", "8", "2", "8"]]
    assert "accepted by from-upstream benchmark-and-doc-nets" in text
    assert "rejected by guard 0.0.0.0/0 (default route" in text
    # what the upstream learned from us: the pod prefixes, with the export policy's community
    assert "10.244.1.0/24" in text.split("birdc show route protocol agent4")[1]
    assert "BGP.community: (65000,100)" in text and "fd00:244:1::/64" in text.split("birdc show route protocol agent6")[1]


def test_link_down_withdraws_routes_through_it_and_link_up_restores_them(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    node.wait_routes(lambda r: gateways(r.get("198.18.0.0/16", {})) == ["10.0.0.1", "10.0.1.1"])
    ip(node.ns, "link", "set", "up1", "down")
    # the ECMP route keeps only the hop through the link that is still up
    r = node.wait_routes(lambda r: r.get("198.18.0.0/16", {}).get("gateway") == "10.0.0.1", timeout=5)
    assert "nexthops" not in r["198.18.0.0/16"]
    exp = node.api("/api/explain?prefix=198.18.0.0/16")
    assert "10.0.1.1" in exp["candidates"][0]["detail"]
    ip(node.ns, "link", "set", "up1", "up")
    node.wait_routes(lambda r: gateways(r.get("198.18.0.0/16", {})) == ["10.0.0.1", "10.0.1.1"], timeout=5)


def test_metric_change_on_reload_moves_routes_without_leaving_old_ones(node):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    node.wait_routes(lambda r: len(r) == 3)
    node.write("agent.yaml", agent_config("  fib:\n    metric: 33\n"))
    node.wait_routes(lambda r: len(r) == 3 and all(x["metric"] == 33 for x in r.values()), timeout=5)
    node.wait_routes(lambda r: len(r) == 2 and all(x["metric"] == 33 for x in r.values()), family=6)
    # one route per prefix: the old-metric routes are gone (a dict by prefix would hide them)
    wait_for(lambda: len(ip_json(node.ns, "-4", "route", "show", "proto", str(PROTO))) == 3, 5)
    wait_for(lambda: len(ip_json(node.ns, "-6", "route", "show", "proto", str(PROTO))) == 2, 5)


def test_ipv6_link_local_gateways_on_each_link(node):
    """fe80::/64 exists once per link: a link-local next hop resolves on whichever device it names."""
    node.write("static.yaml", static_routes("ll", '    - prefix: "2001:db8:30::/48"\n'
                                                  '      nextHops: [{gateway: "fe80::1", device: up0}]\n'
                                                  '    - prefix: "2001:db8:31::/48"\n'
                                                  '      nextHops: [{gateway: "fe80::1", device: up1}]\n'))
    node.start()
    r = node.wait_routes(lambda r: {"2001:db8:30::/48", "2001:db8:31::/48"} <= set(r), family=6)
    assert (r["2001:db8:30::/48"]["dev"], r["2001:db8:31::/48"]["dev"]) == ("up0", "up1")
    assert r["2001:db8:30::/48"]["gateway"] == "fe80::1"


def test_metric_changes_are_make_before_break_and_ipv6_metric_0_is_1024(node, monitor_factory):
    node.write("static.yaml", static_routes("uplinks", ROUTES))
    node.start()
    node.wait_routes(lambda r: len(r) == 3)
    node.wait_routes(lambda r: len(r) == 2, family=6)
    wait_for(node.converged, 5)

    def metrics(family):
        return {p: r.get("metric", 0) for p, r in node.routes(family).items()}

    mon = monitor_factory(node.ns)
    for v4, v6 in ((0, 1024), (30, 30)):
        node.write("agent.yaml", agent_config(f"  fib:\n    metric: {v4}\n"))
        node.wait_routes(lambda r: {x.get("metric", 0) for x in r.values()} == {v4} and len(r) == 3, timeout=15)
        node.wait_routes(lambda r: {x.get("metric", 0) for x in r.values()} == {v6} and len(r) == 2,
                         family=6, timeout=15)
        wait_for(node.converged, 10)
    assert set(metrics(4).values()) == {30} and set(metrics(6).values()) == {30}
    mon.mark()
    events = mon.events()
    for prefix in ("192.0.2.0/24", "2001:db8:10::/48"):
        mine = [l for l in events if l.split()[0 if not l.startswith("Deleted") else 1] == prefix]
        kinds = [("del" if l.startswith("Deleted") else "add",
                  int(l.split("metric ")[1].split()[0]) if "metric " in l else 0) for l in mine]
        old = 20
        for new in ((0 if "." in prefix else 1024), 30):  # each new metric is in before the old goes
            assert kinds.index(("add", new)) < kinds.index(("del", old)), (prefix, kinds)
            old = new
    assert "route_agent_fib_failed_routes 0.0" in node.api("/metrics")


def test_links_created_later_resolve_the_routes_waiting_for_them_and_unrelated_ones_change_nothing(node):
    """A route through a device that does not exist yet is installed when the link appears (a
    device route, and a gateway on the new link's subnet); links no route uses (a pod's veth)
    come and go without touching our routes (they no longer re-evaluate the whole RIB)."""
    node.write("static.yaml", static_routes("s", ROUTES + "    - prefix: 192.0.2.128/25\n      nextHops: [{device: pod9}]\n"
                                                 "    - prefix: 198.51.100.0/24\n      nextHops: [{gateway: 10.9.0.1}]\n"))
    node.start()
    node.wait_routes(lambda r: gateways(r.get("198.18.0.0/16", {})) == ["10.0.0.1", "10.0.1.1"])
    before = node.routes(4)
    assert "192.0.2.128/25" not in before and "198.51.100.0/24" not in before
    for i in range(3):  # unrelated links: created, up, deleted
        ip(node.ns, "link", "add", f"veth{i}a", "type", "veth", "peer", "name", f"veth{i}b")
        ip(node.ns, "link", "set", f"veth{i}a", "up")
        ip(node.ns, "link", "del", f"veth{i}a")
    _veth(node, "pod9")
    r = node.wait_routes(lambda r: "192.0.2.128/25" in r, timeout=5)
    assert r["192.0.2.128/25"]["dev"] == "pod9" and "gateway" not in r["192.0.2.128/25"]
    assert {p: r[p] for p in before} == before  # the others untouched
    _veth(node, "gw9", "10.9.0.254/24")
    r = node.wait_routes(lambda r: "198.51.100.0/24" in r, timeout=5)
    assert r["198.51.100.0/24"]["gateway"] == "10.9.0.1" and r["198.51.100.0/24"]["dev"] == "gw9"
    ip(node.ns, "link", "del", "pod9")
    node.wait_routes(lambda r: "192.0.2.128/25" not in r and "198.51.100.0/24" in r, timeout=5)
    exp = node.api("/api/explain?prefix=192.0.2.128/25")
    assert exp["candidates"][0]["status"] == "unresolved", exp


def _veth(node, name: str, address: str | None = None) -> None:
    """A new link `name` that is up (a veth pair, both ends here: no dummy module on CI)."""
    ip(node.ns, "link", "add", name, "type", "veth", "peer", "name", name + "b")
    if address:
        ip(node.ns, "addr", "add", address, "dev", name)
    ip(node.ns, "link", "set", name + "b", "up")
    ip(node.ns, "link", "set", name, "up")
