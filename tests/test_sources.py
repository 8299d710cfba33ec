"""Sources: kernel mark-and-sweep, static diffs, the connected table, and the sync gate."""

from agent.fib.types import ForeignRoute
from agent.core.gate import SyncGate
from agent.core.model import DEFAULT_DISTANCE, NextHop, RouteType, SourceKind, nexthops
from agent.sources.kernel import ConnectedTable, KernelSource
from agent.sources.static import StaticSource
from tests.factories import P, static


def fr(prefix, proto=3, metric=0, gw=None, dev="eth0"):
    return ForeignRoute(P(prefix), proto, metric, RouteType.UNICAST, nexthops(NextHop(gw, dev)))


def test_kernel_source_classifies_and_sweeps():
    ks = KernelSource(DEFAULT_DISTANCE)
    ups = ks.resync([fr("10.0.0.0/24", proto=2), fr("0.0.0.0/0", proto=16, metric=100, gw="10.0.0.1")])
    kinds = {str(u.prefix): (u.origin.kind, u.origin.name, u.candidate.distance) for u in ups}
    assert kinds == {"10.0.0.0/24": (SourceKind.CONNECTED, "proto=kernel,metric=0,dev=eth0", 0),
                     "0.0.0.0/0": (SourceKind.KERNEL, "proto=dhcp,metric=100", 0)}
    assert ks.resync([fr("10.0.0.0/24", proto=2)]) == [ks._update(fr("0.0.0.0/0", proto=16, metric=100, gw="10.0.0.1"), False)]
    assert ks.resync([fr("10.0.0.0/24", proto=2)]) == []  # nothing changed, nothing sent


def test_kernel_source_events_and_distance_change():
    ks = KernelSource(DEFAULT_DISTANCE)
    assert len(ks.seen(fr("10.1.0.0/16"), False)) == 1
    assert ks.seen(fr("10.1.0.0/16"), False) == []
    ups = ks.set_distances({**DEFAULT_DISTANCE, SourceKind.KERNEL: 7})
    assert [u.candidate.distance for u in ups] == [7]
    assert ks.seen(fr("10.1.0.0/16"), True)[0].candidate is None
    assert ks.seen(fr("10.1.0.0/16"), True) == []


def test_static_source_sends_only_differences():
    src = StaticSource()
    a, b = static("s", blackhole=True), static("s", "10.0.0.1")
    first = src.load({(P("192.0.2.0/24"), a.origin): a, (P("198.51.100.0/24"), b.origin): b})
    assert len(first) == 2
    again = src.load({(P("192.0.2.0/24"), a.origin): a})
    assert [(str(u.prefix), u.candidate) for u in again] == [("198.51.100.0/24", None)]


def test_connected_table_tracks_device_routes_only():
    ct = ConnectedTable()
    assert ct.resync([fr("10.0.0.0/24", proto=2), fr("0.0.0.0/0", gw="10.0.0.1")]) == [(P("10.0.0.0/24"), "eth0", True)]
    assert ct.seen(fr("10.0.0.0/24", proto=2), True) == [(P("10.0.0.0/24"), "eth0", False)]


def test_gate_opens_when_all_sources_synced_or_timer_fires():
    g = SyncGate({"kernel", "config"})
    assert not g.done("kernel") and not g.open
    assert g.done("config") and g.open and not g.expire()
    g2 = SyncGate({"kernel", "bgp/192.0.2.1"})
    g2.done("kernel")
    assert g2.expire() and "bgp/192.0.2.1" in g2.opened_by


def test_device_routes_of_one_prefix_on_several_links_are_all_kept():
    ks = KernelSource(DEFAULT_DISTANCE)
    ups = ks.resync([fr("fe80::/64", proto=2, metric=256, dev="eth0"), fr("fe80::/64", proto=2, metric=256, dev="eth1")])
    assert sorted(u.origin.name for u in ups) == ["proto=kernel,metric=256,dev=eth0", "proto=kernel,metric=256,dev=eth1"]
    assert len(ks.seen(fr("fe80::/64", proto=2, metric=256, dev="eth1"), True)) == 1
    assert len(ks.routes) == 1
