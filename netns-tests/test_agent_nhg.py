"""The real agent with kernel nexthop objects (spec.fib.nexthopObjects: on) against the real kernel:
routes through groups, one group write when an ECMP member fails or recovers, zero events on
restart, repair of `ip nexthop del`, foreign nexthop objects untouched, --flush-on-exit."""

from __future__ import annotations

import re
import signal
import time

from testlab.monitor import Monitor
from testlab.netns import ip, ip_json, sysctl, wait_for
from conftest import PROTO, agent_config, static_routes

NHG_ON = agent_config("  fib:\n    nexthopObjects: \"on\"\n")
ROUTES = """\
    - prefix: 192.0.2.0/24
      nextHops: [{gateway: 10.0.0.1}]
    - prefix: 198.18.0.0/16
      nextHops: [{gateway: 10.0.0.1}, {gateway: 10.0.1.1, weight: 3}]
    - prefix: 203.0.113.0/24
      blackhole: true
    - prefix: 2001:db8:10::/48
      nextHops: [{gateway: "fd00::1"}]
    - prefix: 2001:db8:20::/48
      nextHops: [{gateway: "fd00::1"}, {gateway: "fd00:1::1"}]
"""


def ecmp_routes(n: int, v6: bool = False) -> str:
    lines = []
    for i in range(n):
        if v6:
            lines.append(f"    - prefix: \"2001:db8:{1000 + i:x}::/48\"\n"
                         "      nextHops: [{gateway: \"fd00::1\"}, {gateway: \"fd00:1::1\"}]\n")
        else:
            lines.append(f"    - prefix: 10.{100 + i // 256}.{i % 256}.0/24\n"
                         "      nextHops: [{gateway: 10.0.0.1}, {gateway: 10.0.1.1}]\n")
    return "".join(lines)


def nexthops(ns: str) -> dict[int, dict]:
    return {n["id"]: n for n in ip_json(ns, "nexthop", "show")}


def ours(objs: dict[int, dict]) -> dict[int, dict]:
    return {i: n for i, n in objs.items() if n.get("protocol") in ("route-agent", str(PROTO), PROTO)}


def members(objs: dict[int, dict], gid: int) -> list[tuple[str, str, int]]:
    """(gateway, dev, weight) of each member of group `gid`."""
    return sorted((objs[m["id"]]["gateway"], objs[m["id"]]["dev"], m.get("weight", 1))
                  for m in objs[gid]["group"])


def start(node, routes: str, *extra: str):
    node.write("agent.yaml", NHG_ON)
    node.write("static.yaml", static_routes("uplinks", routes))
    return node.start(*extra)


def test_routes_point_at_groups_of_ours_v4_v6_ecmp_weights(node):
    start(node, ROUTES)
    v4 = node.wait_routes(lambda r: len(r) == 3)
    v6 = node.wait_routes(lambda r: len(r) == 2, family=6)
    objs = nexthops(node.ns)
    mine = ours(objs)
    assert mine and all(n.get("protocol") for n in mine.values())
    g1 = v4["192.0.2.0/24"]["nhid"]
    assert "group" in mine[g1] and members(objs, g1) == [("10.0.0.1", "up0", 1)]
    g2 = v4["198.18.0.0/16"]["nhid"]
    assert members(objs, g2) == [("10.0.0.1", "up0", 1), ("10.0.1.1", "up1", 3)]
    assert "nhid" not in v4["203.0.113.0/24"] and v4["203.0.113.0/24"]["type"] == "blackhole"
    g6 = v6["2001:db8:20::/48"]["nhid"]
    assert members(objs, g6) == [("fd00:1::1", "up1", 1), ("fd00::1", "up0", 1)]
    assert members(objs, v6["2001:db8:10::/48"]["nhid"]) == [("fd00::1", "up0", 1)]
    # the kernel forwards through the group
    assert "via 10.0.0.1 dev up0" in ip(node.ns, "route", "get", "192.0.2.7")
    # show fib and explain name the group
    fib = node.converged() or wait_for(node.converged, 5)
    row = next(r for r in fib["routes"] if r["prefix"] == "198.18.0.0/16")
    assert f"nhid {g2}" in row["route"]
    exp = node.api("/api/explain?prefix=198.18.0.0/16")
    assert exp["nexthop_group"].startswith(f"id {g2} group ")
    assert f"nhid {g2}" in exp["kernel"]


def _ops(node) -> dict[str, float]:
    text = node.api("/metrics")
    out = {}
    for kind in ("add", "replace", "delete"):
        m = re.search(rf'route_agent_netlink_operations_total{{op="{kind}"}} (\S+)', text)
        out[kind] = float(m.group(1)) if m else 0.0
    return out


def test_ecmp_member_failure_and_recovery_is_one_group_write_routes_untouched(node):
    # without compat mode the kernel does not re-announce every route using a changed group,
    # so `ip monitor route` shows exactly the route writes
    sysctl(node.ns, "net.ipv4.nexthop_compat_mode=0")
    n = 300
    start(node, ecmp_routes(n) + ecmp_routes(50, v6=True))
    node.wait_routes(lambda r: len(r) == n)
    node.wait_routes(lambda r: len(r) == 50, family=6)
    wait_for(node.converged, 10)
    gid = {r["nhid"] for r in node.routes(4).values()}
    assert len(gid) == 1
    gid = gid.pop()
    mon = Monitor(node.ns, ("nexthop", "route"))
    before = _ops(node)
    ip(node.ns, "addr", "del", "10.0.1.254/24", "dev", "up1")  # 10.0.1.1 is no longer reachable
    ip(node.ns, "addr", "del", "fd00:1::254/64", "dev", "up1")
    objs = wait_for(lambda: (lambda o: o if gid in o and len(o[gid]["group"]) == 1 else None)(
        nexthops(node.ns)), 10, what="group shrinks")
    assert members(objs, gid) == [("10.0.0.1", "up0", 1)]
    wait_for(node.converged, 10)
    assert {r["nhid"] for r in node.routes(4).values()} == {gid}  # same group, same routes
    assert "via 10.0.0.1" in ip(node.ns, "route", "get", "10.100.7.1")
    mon.mark()
    events = mon.events()
    route_events = [e for e in events if not e.startswith(("id ", "Deleted id "))
                    and "route-agent" in e]  # (the kernel drops the connected routes itself)
    assert route_events == [], route_events
    group_events = [e for e in events if e.startswith(f"id {gid} ")]
    assert len(group_events) == 1, events
    after = _ops(node)
    # one v4 group replace + one v6 group replace (+ possibly the now unused single deleted)
    assert after["replace"] - before["replace"] == 2, (before, after)
    assert after["add"] - before["add"] == 0
    # recovery: the member comes back, again in place
    mon.mark()
    start_lines = len(mon.lines)
    ip(node.ns, "addr", "add", "10.0.1.254/24", "dev", "up1")
    wait_for(lambda: len(nexthops(node.ns).get(gid, {}).get("group", [])) == 2, 10, what="group grows")
    wait_for(node.converged, 10)
    mon.mark()
    events = [e for e in mon.lines[start_lines:] if "198.51.100." not in e]
    assert [e for e in events if not e.startswith(("id ", "Deleted id ")) and "route-agent" in e] == []
    assert {r["nhid"] for r in node.routes(4).values()} == {gid}
    mon.close()


def test_sigkill_and_restart_with_nexthop_objects_gives_zero_events(node):
    proc = start(node, ROUTES + ecmp_routes(200))
    node.wait_routes(lambda r: len(r) == 203)
    node.wait_routes(lambda r: len(r) == 2, family=6)
    wait_for(node.converged, 10)
    before = node.routes(4), node.routes(6), nexthops(node.ns)
    mon = Monitor(node.ns, ("nexthop", "route"))
    node.kill(proc)  # SIGKILL: no cleanup at all
    node.start()
    wait_for(node.converged, 10)
    mon.mark()
    assert mon.events() == []
    assert (node.routes(4), node.routes(6), nexthops(node.ns)) == before
    mon.close()


def test_unused_adopted_objects_are_swept_after_the_gate_opens(node):
    proc = start(node, ROUTES)
    node.wait_routes(lambda r: len(r) == 3)
    node.kill(proc)
    node.write("static.yaml", static_routes("uplinks", "    - prefix: 192.0.2.0/24\n"
                                                       "      nextHops: [{gateway: 10.0.0.1}]\n"))
    node.start()
    node.wait_routes(lambda r: list(r) == ["192.0.2.0/24"], timeout=10)
    node.wait_routes(lambda r: not r, family=6, timeout=10)
    gid = node.routes(4)["192.0.2.0/24"]["nhid"]
    # only the group in use and its single are left
    objs = wait_for(lambda: (lambda o: o if len(o) == 2 else None)(ours(nexthops(node.ns))), 10,
                    what="unused objects swept")
    assert gid in objs


def test_ip_nexthop_del_of_ours_is_repaired(node):
    start(node, ROUTES)
    v4 = node.wait_routes(lambda r: len(r) == 3)
    gid = v4["198.18.0.0/16"]["nhid"]
    ip(node.ns, "nexthop", "del", "id", str(gid))  # the kernel removes the routes using it too
    t0 = time.monotonic()
    r = node.wait_routes(lambda r: "198.18.0.0/16" in r, timeout=5)
    assert time.monotonic() - t0 < 5
    assert members(nexthops(node.ns), r["198.18.0.0/16"]["nhid"]) == [
        ("10.0.0.1", "up0", 1), ("10.0.1.1", "up1", 3)]
    # a member single deleted by hand: the kernel shrinks the groups; repaired as well
    single = next(i for i, o in ours(nexthops(node.ns)).items() if o.get("gateway") == "fd00::1")
    ip(node.ns, "nexthop", "del", "id", str(single))
    v6 = node.wait_routes(lambda r: len(r) == 2, family=6, timeout=5)
    wait_for(lambda: len(nexthops(node.ns).get(node.routes(6)["2001:db8:20::/48"]["nhid"], {})
                         .get("group", [])) == 2, 5, what="v6 group repaired")
    assert v6["2001:db8:10::/48"]["nhid"]


def test_foreign_nexthop_objects_are_never_touched(node):
    ip(node.ns, "nexthop", "add", "id", str(PROTO << 20), "via", "10.0.0.9", "dev", "up0", "proto", "static")
    ip(node.ns, "nexthop", "add", "id", "7", "via", "10.0.1.9", "dev", "up1", "proto", "bird")
    ip(node.ns, "nexthop", "add", "id", "8", "group", "7", "proto", "bird")
    ip(node.ns, "route", "add", "100.64.0.0/10", "nhid", "8", "proto", "bird")
    before = nexthops(node.ns), node.routes(4, proto="bird")
    proc = start(node, ROUTES, "--flush-on-exit")
    v4 = node.wait_routes(lambda r: len(r) == 3)
    assert v4["192.0.2.0/24"]["nhid"] not in (7, 8, PROTO << 20)  # the taken id is skipped
    node.kill(proc, signal.SIGTERM)  # flushes ours only: routes, then objects
    assert node.routes(4) == {} and node.routes(6) == {}
    assert ours(nexthops(node.ns)) == {}
    assert (nexthops(node.ns), node.routes(4, proto="bird")) == before
