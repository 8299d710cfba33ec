"""The `show` tables (agent.clitable) from fake API answers: every column lines up with the header
whatever the cell widths (long peer names, IPv6), multi-row entries name themselves once, `*` marks
installed prefixes, empty views say so, and the streaming `show rib` re-prints its header only
when a page widens a column."""

from __future__ import annotations

import pytest

from agent import clitable as t
from testlab.tables import parse

LONG = "a-very-long-bgp-peer-name-from-a-kubernetes-cluster"
V6 = "2001:db8:ffff:ffff:ffff:ffff:ffff:fffe"


def fam(received, accepted, rejected, installed, not_kept=0, max_prefix=None):
    return {"received": received, "accepted": accepted, "rejected": rejected, "rejectedNotKept": not_kept,
            "installed": installed, "maxPrefix": max_prefix}


def peer(name, address, families, *, state="up", for_seconds=83.4, reason="", stale=0, held_down=False,
         peer_as=65001, kind="ebgp"):
    return {"name": name, "address": address, "peerAS": peer_as, "localAS": 65000, "type": kind,
            "state": state, "for_seconds": for_seconds, "reason": reason, "stale": stale,
            "held_down": held_down, "families": families}


PEERS = [
    peer("tor4", "10.0.0.1", {"ipv4-unicast": fam(29, 25, 4, 25)}),
    peer(LONG, V6, {"ipv4-unicast": fam(7, 5, 2, 5, not_kept=3,
                                        max_prefix={"limit": 100, "action": "warn", "count": 5, "state": "ok",
                                                    "discarded": 0}),
                    "ipv6-unicast": fam(100000, 99999, 1, 12345)},
         state="down", for_seconds=3 * 86400 + 3723, reason="Hold timer expired", stale=4, held_down=True,
         peer_as=4200000001, kind="ibgp"),
]


def test_peers_line_up_with_long_names_ipv6_and_two_families():
    lines = t.peers_lines(PEERS)
    assert lines[0].split() == list(t.PEER_COLUMNS)
    rows = parse(lines)
    assert [(r["Name"], r["Address"], r["Family"], r["Recv"], r["Accept"], r["Reject"], r["Inst"]) for r in rows] == [
        ("tor4", "10.0.0.1", "ipv4-unicast", "29", "25", "4", "25"),
        (LONG, V6, "ipv4-unicast", "7+", "5", "2+", "5"),  # rejections not kept: lower bounds
        ("", "", "ipv6-unicast", "100000", "99999", "1", "12345")]  # the peer once, on its first row
    first, second = rows[1], rows[2]
    assert (first["AS"], first["Type"], first["State"], first["Up/Down"]) == ("4200000001", "ibgp", "down", "3d01h02m")
    assert first["Max-prefix"] == "5/100 ok" and second["Max-prefix"] == "-"
    assert first["Info"] == "last: Hold timer expired; 4 stale routes; held down (max-prefix)"
    assert rows[0]["Up/Down"] == "00:01:23" and rows[0]["Info"] == "" and second["Info"] == ""
    assert all(line == line.rstrip() for line in lines)


def test_peer_columns_are_as_wide_as_their_widest_cell_not_wider():
    lines = t.peers_lines(PEERS[:1])
    assert lines[1].startswith("tor4  10.0.0.1  65001  ebgp")  # name column: "Name" is the widest
    assert lines[0].startswith("Name  Address   AS     Type")


def test_peers_empty_prints_the_header_and_says_so():
    assert t.peers_lines([]) == ["  ".join(t.PEER_COLUMNS), "(no peers)"]


def test_a_peer_without_families_and_without_a_session_time():
    rows = parse(t.peers_lines([peer("x", "10.0.0.9", {}, state="connect", for_seconds=None)]))
    assert [(r["Name"], r["Up/Down"], r["Family"], r["Recv"]) for r in rows] == [("x", "-", "-", "-")]


@pytest.mark.parametrize("seconds,text", [(0, "00:00:00"), (59.9, "00:00:59"), (3600 * 23 + 61, "23:01:01"),
                                          (86400, "1d00h00m"), (86400 * 6 + 7260, "6d02h01m"),
                                          (86400 * 16 + 3600 * 5, "2w2d05h"), (None, "-")])
def test_durations_as_vtysh_prints_them(seconds, text):
    assert t.duration(seconds) == text


def cand(status, origin, distance, route, detail="", bgp=None):
    c = {"origin": origin, "kind": origin.split("/")[0], "distance": distance, "route": route,
         "status": status, "detail": detail}
    return c | ({"bgp": bgp} if bgp else {})


BGP = {"peer": "10.0.0.1", "peerAS": 65001, "localPref": 100, "asPath": [65001, 65100], "origin": "igp",
       "med": 0, "communities": ["65001:1"], "largeCommunities": []}


def rib_row(prefix, candidates, *, installed=True, reason="only candidate", note=""):
    return {"prefix": prefix, "reason": reason, "installed": installed, "note": note, "candidates": candidates}


RIB = [
    rib_row("10.0.0.0/8", [cand("lost", f"ebgp/{LONG}", 20, "via 10.0.0.1 dev up0", bgp=BGP),  # the API's order
                           cand("best", "static/uplinks", 1, "via 10.0.0.1 dev up0")],
            reason="administrative distance"),
    rib_row("10.20.1.0/24", [cand("unresolved", "static/s", 1, "via 10.99.0.1",
                                  detail="10.99.0.1 is not reachable: no route")],
            installed=False, reason="no resolvable candidate", note="no usable candidate: nothing installed"),
    rib_row("10.1.0.0/24", [cand("best", "connected/proto=kernel,metric=0,dev=up0", 0, "dev up0")],
            installed=False, note="a foreign kernel route wins: route-agent installs nothing"),
    rib_row(f"{V6}/127", [cand("multipath", "ebgp/fd00::1", 20, "via fd00::1 dev up0", bgp=BGP),
                          cand("multipath", "ebgp/fd00:1::1", 20, "via fd00:1::1 dev up1", bgp=BGP)],
            reason="equal-cost multipath"),
]


def test_rib_one_row_per_candidate_winner_first_prefix_and_star_once():
    lines = t.rib_lines(RIB)
    rows = parse(lines)
    assert [(r[" "], r["Prefix"], r["Decided-by"], r["Status"], r["Origin"], r["Distance"]) for r in rows] == [
        ("*", "10.0.0.0/8", "administrative distance", "best", "static/uplinks", "1"),
        ("", "", "", "lost", f"ebgp/{LONG}", "20"),
        ("", "10.20.1.0/24", "no resolvable candidate", "unresolved", "static/s", "1"),
        ("", "", "", "", "", ""),  # the decision's note, on a row of its own (Info above is taken)
        ("", "10.1.0.0/24", "only candidate", "best", "connected/proto=kernel,metric=0,dev=up0", "0"),
        ("*", f"{V6}/127", "equal-cost multipath", "multipath", "ebgp/fd00::1", "20"),
        ("", "", "", "multipath", "ebgp/fd00:1::1", "20")]
    assert rows[0]["Route"] == "via 10.0.0.1 dev up0" and rows[0]["Info"] == ""
    assert rows[1]["Info"] == "as-path 65001 65100, local-pref 100, med 0, origin igp, communities 65001:1"
    assert rows[2]["Info"] == "10.99.0.1 is not reachable: no route"
    assert rows[3]["Info"] == "no usable candidate: nothing installed"
    assert rows[4]["Info"] == "a foreign kernel route wins: route-agent installs nothing"  # room on its row
    assert lines[1].startswith("*  10.0.0.0/8  ")


def test_rib_empty_prints_the_header_and_no_routes():
    assert t.rib_lines([]) == [t.line(t.RIB_COLUMNS, t.widths(t.RIB_COLUMNS, [])), "(no routes)"]
    assert t.rib_lines([])[0].split() == list(t.RIB_COLUMNS[1:])


def test_rib_pages_stream_and_repeat_the_header_only_when_a_column_grows():
    pages = [RIB[:1], RIB[1:2], RIB[2:], []]
    out, w = [], None
    for i, page in enumerate(pages):
        lines, w = t.rib_page(page, w, last=i == len(pages) - 1)
        out.append(lines)
    headers = [sum(1 for x in lines if x.split() == list(t.RIB_COLUMNS[1:])) for lines in out]
    # page 1 sets the widths; page 2 widens Status ("unresolved"; its long detail is in Info,
    # which is never padded); page 3 (an IPv6 prefix) widens Prefix; an empty last page prints nothing
    assert headers == [1, 1, 1, 0] and out[3] == []
    rows = parse([x for lines in out for x in lines])  # every row lines up with the header above it
    assert [r["Prefix"] for r in rows if r["Prefix"]] == ["10.0.0.0/8", "10.20.1.0/24", "10.1.0.0/24", f"{V6}/127"]
    again, _ = t.rib_page(RIB[:1], w, last=True)  # a page no wider than before: no header
    assert len(again) == 2 and not any(x.split() == list(t.RIB_COLUMNS[1:]) for x in again)


def advert(prefix, **peers):
    return {"prefix": prefix, "peers": peers}


def adv(next_hop="self", *, local_pref=None, med=None, prepend=0, communities=(), large=(), sources=("pods",),
        policy="acceptAll/default", announced=True):
    return {"nextHop": next_hop, "localPref": local_pref, "med": med, "communities": list(communities),
            "largeCommunities": list(large), "prepend": prepend, "sources": list(sources), "policy": policy,
            "announced": announced}


def test_adverts_one_row_per_peer_prefix_once():
    data = [advert("10.244.1.0/24", **{"10.0.0.1": adv(med=10, prepend=1, communities=["65000:100"],
                                                         large=["65000:1:2"]),
                                        V6: adv(local_pref=300, announced=False, sources=("pods", "vip-a"))}),
            advert("fd00:244:1::/64", **{"fd00::1": adv("fd00::254", policy="to-tor/v6")})]
    rows = parse(t.adverts_lines(data))
    assert [(r["Prefix"], r["Peer"], r["State"], r["Next-hop"], r["Policy"], r["Sources"], r["Attributes"])
            for r in rows] == [
        ("10.244.1.0/24", "10.0.0.1", "announced", "self", "acceptAll/default", "pods",
         "med 10, prepend 1, communities 65000:100, large 65000:1:2"),
        ("", V6, "pending", "self", "acceptAll/default", "pods, vip-a", "local-pref 300"),
        ("fd00:244:1::/64", "fd00::1", "announced", "fd00::254", "to-tor/v6", "pods", "")]
    assert t.adverts_lines([]) == ["  ".join(t.ADVERT_COLUMNS), "(no advertisements)"]


def fib(routes=(), pending=(), failed=(), gate_open=True, **extra):
    return {"table": 254, "protocol": 201, "gate_open": gate_open, "routes": list(routes),
            "pending": list(pending), "failed": list(failed)} | extra


def test_fib_routes_pending_failed_and_nexthop_objects():
    data = fib([{"prefix": "192.0.2.0/24", "route": "via 10.0.0.1 dev up0 metric 20", "stale": False},
                {"prefix": f"{V6}/128", "route": "nhid 7 via fd00::1 dev up0 metric 20", "stale": True}],
               [{"prefix": "198.18.0.0/16", "route": "delete"}],
               [{"prefix": "203.0.113.0/24", "op": "replace", "error": "Network is unreachable\n(errno 101)"}],
               gate_open=False, nexthops=["id 7 via fd00::1 dev up0", "id 9 group 7/8,2"])
    lines = t.fib_lines(data)
    assert lines[0] == "table 254, protocol 201 (sync gate closed: adopted routes held)"
    blank = lines.index("")
    rows = parse(lines[1:blank])
    assert [(r["Prefix"], r["State"], r["Route"]) for r in rows] == [
        ("192.0.2.0/24", "installed", "via 10.0.0.1 dev up0 metric 20"),
        (f"{V6}/128", "stale", "nhid 7 via fd00::1 dev up0 metric 20"),
        ("198.18.0.0/16", "pending", "delete"),
        ("203.0.113.0/24", "failed", "replace: Network is unreachable (errno 101)")]  # one line
    assert [r["Nexthop"] for r in parse(lines[blank + 1:])] == ["id 7 via fd00::1 dev up0", "id 9 group 7/8,2"]


def test_fib_empty_says_no_routes():
    assert t.fib_lines(fib()) == ["table 254, protocol 201", "Prefix  State  Route", "(no routes)"]


def test_the_table_checker_catches_a_misaligned_row():
    lines = t.peers_lines(PEERS)
    with pytest.raises(AssertionError):
        parse([lines[0], " " + lines[1]])
    with pytest.raises(AssertionError):
        parse([lines[0], lines[1].replace("10.0.0.1 ", "10.0.0.100")])


def test_the_tables_in_docs_cli_md_line_up():
    """docs/cli.md shows real output: each `$ route-agent show VIEW` example is a table that reads
    back with every cell under its header (`show fib`: after its title line)."""
    import pathlib
    import re

    doc = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    seen = set()
    for block in re.findall(r"```\n(.*?)```", doc, re.S):
        lines = block.splitlines()
        if not lines or not re.fullmatch(r"\$ route-agent show (peers|rib|fib|adverts)", lines[0]):
            continue
        view = lines[0].split()[-1]
        table = lines[2:] if view == "fib" else lines[1:]
        if table[-1].startswith("(no "):  # an empty view: the header and the message only
            assert len(table) == 2 and parse(table[:1]) == []
            continue
        rows = parse(table)
        assert rows, view
        seen.add(view)
    assert seen == {"peers", "rib", "fib", "adverts"}
