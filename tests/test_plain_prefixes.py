"""The prefixes of a received table are plain ints: the relay's rebuild keeps the packed ints
`marshal` gives (`agent.speaker.wire_records`), so the tables (verdicts, RIB, FIB, nexthop
users) hold no `Prefix` object per route. What must still hold: every view that shows such a
prefix prints it as a network (``as_prefix``), and nothing reads a `Prefix` property off one.
The table here comes through the real records and rebuild, so its prefixes are what the agent
gets in raw mode; the other tests mostly build `Prefix` objects, which print by themselves."""

from __future__ import annotations

import errno
import marshal

from agent.api.server import rib_page
from agent.core.bgp import Announced, Family, PathAttrs, PeerState, PeerStatus, RouteUpdate
from agent.core.model import Prefix, address_order, as_prefix, prefix_family
from agent.daemon.agent import Agent
from agent.daemon.writer import _describe
from agent.fib.types import OpError
from agent.speaker.wire_records import Rebuilder, RecordWriter

PEER = "10.0.0.1"
CONFIG = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor}
spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.2, importPolicy: acceptAll}
"""
V4 = ("198.51.100.0/24", "203.0.113.0/24", "192.0.2.128/25", "0.0.0.0/0")  # the default: refused
V6 = ("2001:db8:1::/48", "2001:db8:2::/48")


def rebuilt(family: Family, texts: tuple[str, ...], nexthop: str) -> RouteUpdate:
    """The event the agent gets for one UPDATE of `texts` sharing one attribute set."""
    attrs = PathAttrs(as_path=(65001, 64512))
    event = RouteUpdate(PEER, family, tuple(Announced(Prefix.parse(t), nexthop, attrs) for t in texts))
    (out,) = Rebuilder().events_of(PEER, marshal.dumps(RecordWriter().records((event,))))
    return out


def test_rebuilt_runs_carry_plain_ints():
    ev = rebuilt(Family.IPV4_UNICAST, V4, "10.0.0.1")
    assert [type(a.prefix) for a in ev.announced] == [int] * len(V4)
    assert [str(as_prefix(a.prefix)) for a in ev.announced] == list(V4)
    assert [prefix_family(a.prefix) for a in ev.announced] == [4] * len(V4)
    assert as_prefix(Prefix.parse("10.0.0.0/8")).__class__ is Prefix
    # a `Prefix` method takes a plain int as its argument (the RIB: a route through itself)
    assert Prefix.parse("198.51.0.0/16").covers(ev.announced[0].prefix)
    assert not Prefix.parse("198.51.100.0/25").covers(ev.announced[0].prefix)
    assert not Prefix.parse("::/0").covers(ev.announced[0].prefix)


async def test_every_view_prints_plain_int_prefixes_as_networks(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    agent = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n")
    r, view = agent.routing, agent.view
    r.load_config(agent.config)
    r.rib.set_link("veth0", True)
    r.rib.set_connected([(Prefix.parse("10.0.0.0/24"), "veth0", True), (Prefix.parse("fd00::/64"), "veth0", True)])
    r.handle_bgp(PeerState(PEER, PeerStatus.UP))
    r.handle_bgp(rebuilt(Family.IPV4_UNICAST, V4, "10.0.0.1"))
    r.handle_bgp(rebuilt(Family.IPV6_UNICAST, V6, "fd00::1"))
    learned = sorted(V4[:3] + V6, key=lambda t: address_order(Prefix.parse(t)))  # (what the views show)
    keys = sorted(view.rib_prefixes(), key=address_order)
    assert {type(p) for p in keys} == {int}  # (the point of all this: no object per route)
    assert [row["prefix"] for row in view.rib_rows(keys)] == learned
    page = await rib_page(view, None, 2)
    assert [row["prefix"] for row in page["routes"]] == learned[:2] and page["next"] == learned[1]

    fib = r.fib
    fib.open_gate()
    assert [row["prefix"] for row in view.fib()["pending"]] == learned
    ops = fib.plan()
    # one write failed: the writer's log line, and the FIB's failed list
    (bad,) = [op for op in ops if as_prefix(op.prefix) == Prefix.parse("203.0.113.0/24")]
    assert type(bad.prefix) is int and _describe(bad).startswith("203.0.113.0/24 ")
    fib.done(ops, [OpError(bad, errno.EPERM, "refused")])
    shown = view.fib()
    assert [row["prefix"] for row in shown["failed"]] == ["203.0.113.0/24"]
    assert [row["prefix"] for row in shown["routes"]] == [p for p in learned if p != "203.0.113.0/24"]
    counts = view.fib_counts()
    assert (counts.ipv4, counts.ipv6) == (2, 2)
    assert view.installed_by_peer() == {(PEER, 4): 2, (PEER, 6): 2}

    out = view.explain(Prefix.parse("198.51.100.0/24"))
    assert out["prefix"] == "198.51.100.0/24" and out["fib_state"] == "installed"
    assert out["bgp"][0]["accepted"] is True
    refused = view.explain(Prefix.parse("0.0.0.0/0"))["bgp"]
    assert refused[0]["accepted"] is False and refused[0]["statement"] == "0.0.0.0/0"

    await r.bgp.stop()
