"""`route-agent show ...` as a user runs it, against the real agent with real BIRD 2 peers (v4 and
v6 sessions, a peer with a long name, learned, static and advertised prefixes): every text table
lines up with its header (testlab.tables.parse), says the same as the API's JSON, and --json in
either position parses and is the API's view."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import HEADER, agent_config, bgp_peer, static_routes, tor_config, without_nhid

from testlab.netns import wait_for
from testlab.tables import parse

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
LONG = "tor6-with-a-rather-long-name-for-the-peers-table"
POLICY = "  importPolicy: acceptAll\n  exportPolicy: acceptAll\n"
PODS = (f"{HEADER}kind: Advertisement\nmetadata:\n  name: pods\nspec:\n"
        '  prefixes: ["10.244.1.0/24", "fd00:244:1::/64"]\n  communities: ["65000:100"]\n  med: 10\n')
STATIC = "    - prefix: 192.0.2.0/24\n      nextHops: [{gateway: 10.0.1.1}]\n"  # beats the BGP one (1 < 20)


def ra(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "agent", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def text(ns: str, *args: str) -> list[str]:
    p = ra(ns, "show", *args)
    assert (p.returncode, p.stderr) == (0, ""), args
    return p.stdout.splitlines()


def as_json(ns: str, view: str):
    after, before = ra(ns, "show", view, "--json"), ra(ns, "show", "--json", view)
    assert after.returncode == before.returncode == 0, after.stderr + before.stderr
    return json.loads(after.stdout), json.loads(before.stdout)


def settled(node):
    """Both sessions up, every route in the kernel, both prefixes announced to both peers."""
    peers, fib, adverts = node.api("/api/peers"), node.converged(), node.api("/api/adverts")
    installed = [f["installed"] for p in peers or () for f in p["families"].values()]
    return (peers and [p["state"] for p in peers] == ["up", "up"] and installed == [1, 2] and fib
            and {r["prefix"] for r in fib["routes"]} >= set(V4 + V6)
            and len(adverts) == 2 and all(a["announced"] for row in adverts for a in row["peers"].values()))


def test_show_tables_line_up_and_agree_with_the_json(bgp_lab):
    node = bgp_lab.node
    bgp_lab.bird("tor", tor_config(V4, V6, export4="", export6=""))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=POLICY) + "---\n"
               + bgp_peer(LONG, "fd00::1", "fd00::254", extra=POLICY) + "---\n" + PODS)
    node.write("static.yaml", static_routes("uplinks", STATIC))
    node.start()
    wait_for(lambda: settled(node), 45, what="sessions up, routes installed, prefixes announced")

    # peers: one row per peer and family, the long name and the IPv6 address in their columns
    peers, peers2 = as_json(node.ns, "peers")
    assert [p["name"] for p in peers] == [p["name"] for p in peers2] == ["tor4", LONG]
    rows = parse(text(node.ns, "peers"))
    assert [(r["Name"], r["Address"], r["AS"], r["State"], r["Family"], r["Recv"], r["Accept"], r["Inst"])
            for r in rows] == [
        ("tor4", "10.0.0.1", "65001", "up", "ipv4-unicast", "2", "2", "1"),  # 192.0.2.0/24: the static wins
        (LONG, "fd00::1", "65001", "up", "ipv6-unicast", "2", "2", "2")]

    # rib: every prefix once, `*` where installed; 192.0.2.0/24 with both candidates
    rib, rib2 = as_json(node.ns, "rib")
    assert rib == rib2 and {r["prefix"] for r in rib} >= set(V4 + V6)
    rows = parse(text(node.ns, "rib"))
    assert [(r[" "], r["Prefix"]) for r in rows if r["Prefix"]] == [
        ("*" if r["installed"] else "", r["prefix"]) for r in rib]
    i = next(n for n, r in enumerate(rows) if r["Prefix"] == "192.0.2.0/24")
    assert [(r["Status"], r["Origin"], r["Distance"]) for r in rows[i:i + 2]] == [
        ("best", "static/uplinks", "1"), ("lost", "ebgp/10.0.0.1", "20")]
    assert rows[i]["Decided-by"] == "administrative distance" and rows[i + 1]["Prefix"] == ""
    assert rows[i + 1]["Info"].startswith("as-path 65001, local-pref 100")
    v6 = next(r for r in rows if r["Prefix"] == "2001:db8:1::/48")
    assert (v6[" "], v6["Route"]) == ("*", "via fd00::1")

    # fib: the title, then what `ip route show proto route-agent` has, all installed
    fib, fib2 = as_json(node.ns, "fib")
    lines = text(node.ns, "fib")
    assert lines[0] == f"table {fib['table']}, protocol {fib['protocol']}"
    routes, _, objects = "\n".join(lines[1:]).partition("\n\n")  # routes; our nexthop objects if any
    rows = parse(routes.splitlines())
    assert [(r["Prefix"], r["State"], r["Route"]) for r in rows] == [
        (r["prefix"], "installed", r["route"]) for r in fib["routes"]]
    assert ("192.0.2.0/24", "via 10.0.1.1 dev up1 metric 20") in [
        (r["Prefix"], without_nhid(" " + r["Route"]).strip()) for r in rows]
    if fib.get("nexthops"):  # the default: routes through nexthop objects, listed after the routes
        assert [r["Nexthop"] for r in parse(objects.splitlines())] == fib["nexthops"]
    assert {r["Prefix"] for r in rows} == set(node.routes(4)) | set(node.routes(6))

    # adverts: each prefix to each peer, announced, the prefix named on its first row only
    adverts, adverts2 = as_json(node.ns, "adverts")
    assert adverts == adverts2
    rows = parse(text(node.ns, "adverts"))
    assert [(r["Prefix"], r["Peer"], r["State"]) for r in rows] == [
        (p, peer, "announced") for row in adverts for p, peer in
        zip([row["prefix"]] + [""] * 9, row["peers"])]
    assert {r["Attributes"] for r in rows} == {"med 10, communities 65000:100"}
    assert parse(text(node.ns, "adverts", "--peer", LONG))[0]["Peer"] == "fd00::1"

    for view in ("peers", "rib", "fib", "adverts"):  # shown on failure, or with -s (docs/cli.md's examples)
        print(f"$ route-agent show {view}", *text(node.ns, view), sep="\n")

    # explain takes --json after the prefix
    p = ra(node.ns, "explain", "192.0.2.0/24", "--json")
    assert p.returncode == 0
    assert {c["origin"]: c["status"] for c in json.loads(p.stdout)["candidates"]} == {
        "static/uplinks": "best", "ebgp/10.0.0.1": "lost"}
