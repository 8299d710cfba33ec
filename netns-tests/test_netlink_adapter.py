"""agent.fib.netlink against a real kernel, inside a throwaway network namespace (root).

The test process itself enters the namespace with setns(2) for the duration of each test (only
the calling thread switches; the original namespace is restored in teardown), so the adapter's
sockets live in the namespace while `ip -n NAME ...` inspects it from outside. Nothing here sends
packets: routes point at gateways on veth subnets that exist only in the namespace.
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import json
import os
import select
import subprocess
import time
import uuid

import pytest

from agent.fib.netlink import LinkIndex, NetlinkFib, RouteMonitor, flush_ours
from agent.fib.types import FibSettings, ForeignRoute, LinkEvent, Op, OpKind, Overrun, RouteEvent
from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

PROTO = 201
OUR_PROTO_NAMES = {str(PROTO), "route-agent"}
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class _Netns:
    """A uniquely named namespace (ra-nl-XXXXXXXX) with veth v0 <-> v1, both ends inside it:
    v0 192.0.2.1/24 + 2001:db8:a::1/64, v1 198.51.100.1/24 + 2001:db8:b::1/64."""

    def __init__(self) -> None:
        self.name = "ra-nl-" + uuid.uuid4().hex[:8]
        self._orig: int | None = None

    def ip(self, *args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(["ip", "-n", self.name, *args], capture_output=True, text=True, input=input)
        if check and proc.returncode:
            raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def routes(self, *selector: str, family: int = 4) -> dict[str, dict]:
        """`ip -j route show` keyed by normalized prefix (host routes get /32 or /128)."""
        out = self.ip("-j", "-4" if family == 4 else "-6", "route", "show", *selector)
        routes = {}
        for r in json.loads(out or "[]"):
            dst = r["dst"]
            if dst == "default":
                dst = "0.0.0.0/0" if family == 4 else "::/0"
            routes[str(ipaddress.ip_network(dst))] = r
        return routes

    def ours(self, family: int = 4) -> dict[str, dict]:
        return {p: r for p, r in self.routes("table", "all", family=family).items()
                if r.get("protocol") in OUR_PROTO_NAMES}

    def __enter__(self) -> "_Netns":
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            self._orig = os.open("/proc/self/ns/net", os.O_RDONLY)
            fd = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
            try:
                _setns(fd)
            finally:
                os.close(fd)
            self.ip("link", "set", "lo", "up")
            self.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
            for dev, v4, v6 in (("v0", "192.0.2.1/24", "2001:db8:a::1/64"),
                                ("v1", "198.51.100.1/24", "2001:db8:b::1/64")):
                self.ip("link", "set", dev, "up")
                self.ip("addr", "add", v4, "dev", dev)
                self.ip("-6", "addr", "add", v6, "dev", dev, "nodad")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._orig is not None:
                _setns(self._orig)
                os.close(self._orig)
                self._orig = None
        finally:
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


@pytest.fixture
def ns():
    with _Netns() as netns:
        yield netns


@pytest.fixture
def fib(ns):
    links = LinkIndex.from_kernel()
    with NetlinkFib(FibSettings(), links) as f:
        yield f


def kr(*hops: NextHop, type: RouteType = RouteType.UNICAST, metric: int = 20) -> KernelRoute:
    return intern(KernelRoute(type, nexthops(*hops), metric))


GW0 = kr(NextHop("192.0.2.2", "v0"))
GW1 = kr(NextHop("198.51.100.2", "v1"))
P = Prefix.parse


def op(kind: OpKind, prefix: str, route: KernelRoute) -> Op:
    return Op(kind, P(prefix), route)


def wait_events(monitor: RouteMonitor, predicate, timeout: float = 5.0) -> list:
    """Read monitor events until one matches `predicate`; return all read."""
    seen: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([monitor], [], [], max(0.0, deadline - time.monotonic()))
        seen.extend(monitor.read())
        if any(predicate(e) for e in seen):
            return seen
    raise AssertionError(f"no matching event; saw {seen}")


# ---- tests ----


def test_links(ns, fib):
    links = {link.name: link for link in fib.links_dump()}
    assert {"lo", "v0", "v1"} <= set(links)
    assert links["v0"].up and links["lo"].index == 1
    assert fib.links.index("v1") == links["v1"].index and fib.links.is_up("v1")


def test_batch_of_5000_ipv4_routes(ns, fib):
    prefixes = [Prefix.of(4, (10 << 24) | (i << 8), 24) for i in range(5000)]
    assert fib.apply([Op(OpKind.REPLACE, p, GW0) for p in prefixes]) == []
    assert fib.ops_sent == 5000 and fib.errors == 0
    ours = ns.ours()
    assert set(ours) == {str(p) for p in prefixes}
    assert {(r["metric"], r["gateway"], r["dev"]) for r in ours.values()} == {(20, "192.0.2.2", "v0")}
    dump = fib.dump()
    assert dump.ours == {p: GW0 for p in prefixes}
    assert len({id(r) for r in dump.ours.values()}) == 1  # one shared (interned) route object for all


def test_multipath_v4_and_v6(ns, fib):
    mp4 = kr(NextHop("192.0.2.2", "v0", 3), NextHop("198.51.100.2", "v1"))
    mp6 = kr(NextHop("2001:db8:a::2", "v0"), NextHop("2001:db8:b::2", "v1", 2))
    errors = fib.apply([op(OpKind.ADD, "10.10.0.0/16", mp4), op(OpKind.ADD, "2001:db8:100::/48", mp6)])
    assert errors == []
    r4 = ns.ours()["10.10.0.0/16"]
    assert sorted((h["gateway"], h["dev"], h["weight"]) for h in r4["nexthops"]) == [
        ("192.0.2.2", "v0", 3), ("198.51.100.2", "v1", 1)]
    r6 = ns.ours(6)["2001:db8:100::/48"]
    assert r6["metric"] == 20
    assert sorted((h["gateway"], h["dev"], h["weight"]) for h in r6["nexthops"]) == [
        ("2001:db8:a::2", "v0", 1), ("2001:db8:b::2", "v1", 2)]
    dump = fib.dump()
    assert dump.ours == {P("10.10.0.0/16"): mp4, P("2001:db8:100::/48"): mp6}


def test_replace_changes_next_hop(ns, fib):
    assert fib.apply([op(OpKind.ADD, "10.20.0.0/16", GW0), op(OpKind.ADD, "2001:db8:20::/48",
                                                             kr(NextHop("2001:db8:a::2", "v0")))]) == []
    gw6 = kr(NextHop("2001:db8:b::2", "v1"))
    replaces = [op(OpKind.REPLACE, "10.20.0.0/16", GW1), op(OpKind.REPLACE, "2001:db8:20::/48", gw6)]
    assert fib.apply(replaces) == []
    r4 = ns.ours()["10.20.0.0/16"]
    assert (r4["gateway"], r4["dev"]) == ("198.51.100.2", "v1")
    r6 = ns.ours(6)["2001:db8:20::/48"]
    assert (r6["gateway"], r6["dev"]) == ("2001:db8:b::2", "v1")
    assert len(ns.ours()) == 1 and len(ns.ours(6)) == 1  # replaced, not appended
    # ADD over an existing route is refused (NLM_F_EXCL) and reported
    (err,) = fib.apply([op(OpKind.ADD, "10.20.0.0/16", GW0)])
    assert err.errno == errno.EEXIST and err.message == os.strerror(errno.EEXIST)


def test_blackhole_and_device_routes(ns, fib):
    ops = [op(OpKind.REPLACE, "10.66.0.0/16", kr(type=RouteType.BLACKHOLE)),
           op(OpKind.REPLACE, "2001:db8:66::/48", kr(type=RouteType.UNREACHABLE)),
           op(OpKind.REPLACE, "10.67.0.0/16", kr(type=RouteType.PROHIBIT)),
           op(OpKind.REPLACE, "10.68.0.0/16", kr(NextHop(None, "v1")))]
    assert fib.apply(ops) == []
    ours = {**ns.ours(), **ns.ours(6)}
    assert ours["10.66.0.0/16"]["type"] == "blackhole"
    assert ours["2001:db8:66::/48"]["type"] == "unreachable"
    assert ours["10.68.0.0/16"]["scope"] == "link" and ours["10.68.0.0/16"]["dev"] == "v1"
    assert fib.dump().ours == {o.prefix: o.route for o in ops}
    # and they delete cleanly too
    assert fib.apply([Op(OpKind.DELETE, o.prefix, o.route) for o in ops]) == []
    assert fib.dump().ours == {}


def test_delete_and_delete_of_absent_route(ns, fib):
    assert fib.apply([op(OpKind.ADD, "10.30.0.0/16", GW0), op(OpKind.ADD, "2001:db8:30::/48",
                                                             kr(NextHop("2001:db8:a::2", "v0")))]) == []
    # next hops in a delete do not matter: prefix, protocol, table and metric select the route
    deletes = [op(OpKind.DELETE, "10.30.0.0/16", GW1), op(OpKind.DELETE, "2001:db8:30::/48", GW1)]
    assert fib.apply(deletes) == []
    assert ns.ours() == {} and ns.ours(6) == {}
    assert fib.apply(deletes) == []  # already gone: success, not reported
    assert fib.apply([op(OpKind.DELETE, "10.31.0.0/16", GW0)]) == []


def test_delete_never_touches_foreign_route(ns, fib):
    ns.ip("route", "add", "10.40.0.0/16", "via", "192.0.2.2", "proto", "static", "metric", "20")
    assert fib.apply([op(OpKind.DELETE, "10.40.0.0/16", GW0)]) == []
    assert "10.40.0.0/16" in ns.routes()


def test_bad_op_is_reported_and_others_succeed(ns, fib):
    unreachable = kr(NextHop("203.0.113.1", "v0"))
    ops = [op(OpKind.REPLACE, f"10.50.{i}.0/24", GW0) for i in range(10)]
    ops.insert(4, op(OpKind.REPLACE, "10.51.0.0/16", unreachable))
    ops.insert(7, op(OpKind.REPLACE, "10.52.0.0/16", kr(NextHop("192.0.2.2", "nosuchdev"))))
    ops.append(op(OpKind.REPLACE, "10.53.0.0/16", unreachable))  # the last message carries the ACK
    errors = fib.apply(ops)
    assert [(e.op.prefix, e.errno) for e in errors] == [
        (P("10.51.0.0/16"), errno.ENETUNREACH), (P("10.52.0.0/16"), errno.ENODEV),
        (P("10.53.0.0/16"), errno.ENETUNREACH)]
    assert errors[0].message == os.strerror(errno.ENETUNREACH)
    assert set(ns.ours()) == {f"10.50.{i}.0/24" for i in range(10)}
    assert fib.errors == 3 and fib.ops_sent == 12  # the ENODEV op was never sent


def test_errors_across_batches(ns):
    links = LinkIndex.from_kernel()
    with NetlinkFib(FibSettings(), links, batch=64) as fib:
        bad = kr(NextHop("203.0.113.1", "v0"))
        ops = [Op(OpKind.REPLACE, Prefix.of(4, (10 << 24) | (i << 8), 24), bad if i % 50 == 0 else GW0)
               for i in range(1000)]
        errors = fib.apply(ops)
        assert [e.op for e in errors] == [o for i, o in enumerate(ops) if i % 50 == 0]
        assert len(ns.ours()) == 980


def test_unencodable_ops_across_batches(ns):
    """An op that cannot be encoded (unknown device) inside a batch: the batch is built op by op,
    the op fails with ENODEV unsent, and every other op of that batch and the next is written."""
    links = LinkIndex.from_kernel()
    with NetlinkFib(FibSettings(), links, batch=64) as fib:
        nodev = kr(NextHop("192.0.2.2", "nosuchdev"))
        ops = [Op(OpKind.REPLACE, Prefix.of(4, (10 << 24) | (7 << 16) | (i << 8), 24), nodev if i % 70 == 3 else GW0)
               for i in range(250)]
        errors = fib.apply(ops)
        assert [(e.op, e.errno) for e in errors] == [(o, errno.ENODEV) for i, o in enumerate(ops) if i % 70 == 3]
        assert len(ns.ours()) == 250 - 4 and fib.ops_sent == 246


def test_dump_splits_ours_and_foreign(ns, fib):
    assert fib.apply([op(OpKind.REPLACE, "10.60.0.0/16", GW0),
                      op(OpKind.REPLACE, "2001:db8:60::/48", kr(NextHop("2001:db8:b::2", "v1")))]) == []
    ns.ip("route", "add", "10.61.0.0/16", "via", "198.51.100.2", "proto", "static", "metric", "5")
    ns.ip("route", "add", "10.62.0.0/16", "via", "198.51.100.2", "table", "100", "proto", str(PROTO))
    ns.ip("-6", "route", "add", "default", "via", "2001:db8:a::2", "proto", "boot")
    dump = fib.dump()
    assert dump.ours == {P("10.60.0.0/16"): GW0, P("2001:db8:60::/48"): kr(NextHop("2001:db8:b::2", "v1"))}
    foreign = {(str(f.prefix), f.protocol): f for f in dump.foreign}
    assert foreign[("10.61.0.0/16", 4)] == ForeignRoute(P("10.61.0.0/16"), 4, 5, RouteType.UNICAST,
                                                        (NextHop("198.51.100.2", "v1"),))
    assert foreign[("::/0", 3)].nexthops == (NextHop("2001:db8:a::2", "v0"),)
    assert foreign[("::/0", 3)].metric == 1024
    assert foreign[("192.0.2.0/24", 2)].connected
    assert foreign[("2001:db8:a::/64", 2)].connected
    assert not any(str(f.prefix) == "10.62.0.0/16" for f in dump.foreign)  # table 100
    local = P("192.0.2.1/32")  # lives in the local table
    assert not any(f.prefix == local for f in dump.foreign)
    # table 100 seen through settings for it
    with NetlinkFib(FibSettings(table=100), fib.links) as fib100:
        assert fib100.dump().ours == {P("10.62.0.0/16"): kr(NextHop("198.51.100.2", "v1"), metric=0)}


def test_big_table_number(ns):
    settings = FibSettings(table=1000)
    with NetlinkFib(settings, LinkIndex.from_kernel()) as fib:
        assert fib.apply([op(OpKind.REPLACE, "10.70.0.0/16", GW0)]) == []
        assert fib.dump().ours == {P("10.70.0.0/16"): GW0}
        assert "10.70.0.0/16" in ns.routes("table", "1000")
        assert flush_ours(settings) == []
        assert ns.routes("table", "1000") == {}


def test_monitor_sees_deletion_and_foreign_route(ns, fib):
    with RouteMonitor(FibSettings(), fib.links, drop_own_additions=False) as monitor:
        assert fib.apply([op(OpKind.REPLACE, "10.80.0.0/16", GW0)]) == []
        events = wait_events(monitor, lambda e: isinstance(e, RouteEvent) and str(e.prefix) == "10.80.0.0/16")
        echo = [e for e in events if isinstance(e, RouteEvent)][-1]
        assert (echo.deleted, echo.protocol, echo.route, echo.foreign) == (False, PROTO, GW0, None)

        ns.ip("route", "del", "10.80.0.0/16", "proto", str(PROTO))
        events = wait_events(monitor, lambda e: isinstance(e, RouteEvent) and e.deleted)
        (gone,) = [e for e in events if isinstance(e, RouteEvent) and e.deleted]
        assert (gone.prefix, gone.protocol, gone.route) == (P("10.80.0.0/16"), PROTO, GW0)

        ns.ip("-6", "route", "add", "2001:db8:81::/48", "via", "2001:db8:a::2", "proto", "static")
        ns.ip("route", "add", "10.82.0.0/16", "via", "192.0.2.2", "table", "100")  # other table: unseen
        ns.ip("route", "add", "10.81.0.0/16", "via", "198.51.100.2", "proto", "static")
        events = wait_events(monitor, lambda e: isinstance(e, RouteEvent) and str(e.prefix) == "10.81.0.0/16")
        added = {str(e.prefix): e for e in events if isinstance(e, RouteEvent)}
        assert "10.82.0.0/16" not in added
        assert added["10.81.0.0/16"].foreign == ForeignRoute(P("10.81.0.0/16"), 4, 0, RouteType.UNICAST,
                                                             (NextHop("198.51.100.2", "v1"),))
        assert added["2001:db8:81::/48"].foreign.nexthops == (NextHop("2001:db8:a::2", "v0"),)

        ns.ip("link", "set", "v1", "name", "uplink1")
        events = wait_events(monitor, lambda e: isinstance(e, LinkEvent) and e.link.name == "uplink1")
        assert fib.links.index("uplink1") is not None and fib.links.index("v1") is None
        # the renamed device is what the adapter now reports and accepts
        assert fib.apply([op(OpKind.REPLACE, "10.83.0.0/16", kr(NextHop("198.51.100.2", "uplink1")))]) == []
        assert fib.dump().ours[P("10.83.0.0/16")] == kr(NextHop("198.51.100.2", "uplink1"))
        (err,) = fib.apply([op(OpKind.REPLACE, "10.84.0.0/16", GW1)])
        assert err.errno == errno.ENODEV


def test_flush_ours_keeps_foreign(ns, fib):
    ops = [Op(OpKind.REPLACE, Prefix.of(4, (10 << 24) | (i << 8), 24), GW0) for i in range(2000)]
    ops.append(op(OpKind.REPLACE, "2001:db8:90::/48", kr(NextHop("2001:db8:a::2", "v0"))))
    assert fib.apply(ops) == []
    ns.ip("route", "add", "10.250.0.0/16", "via", "192.0.2.2", "proto", "static")
    assert flush_ours(FibSettings()) == []
    assert ns.ours() == {} and ns.ours(6) == {}
    assert "10.250.0.0/16" in ns.routes()


def test_ipv6_replace_between_single_and_multipath(ns, fib):
    single = kr(NextHop("2001:db8:a::2", "v0"))
    multi = kr(NextHop("2001:db8:a::2", "v0"), NextHop("2001:db8:b::2", "v1"))
    other = kr(NextHop("2001:db8:b::3", "v1"))
    for route in (single, multi, other, multi, single):
        assert fib.apply([op(OpKind.REPLACE, "2001:db8:200::/48", route)]) == []
        assert fib.dump().ours == {P("2001:db8:200::/48"): route}
        assert len(ns.ours(6)) == 1


def test_monitor_reports_overrun(ns, fib):
    with RouteMonitor(FibSettings(), fib.links, buffer=4096, drop_own_additions=False) as monitor:
        ops = [Op(OpKind.REPLACE, Prefix.of(4, (10 << 24) | (i << 8), 24), GW0) for i in range(3000)]
        assert fib.apply(ops) == []
        events = wait_events(monitor, lambda e: isinstance(e, Overrun))
        assert monitor.overruns >= 1
        # the socket keeps working after the overrun
        ns.ip("route", "add", "10.240.0.0/16", "via", "192.0.2.2", "proto", "static")
        wait_events(monitor, lambda e: isinstance(e, RouteEvent) and str(e.prefix) == "10.240.0.0/16")
        assert events


def test_monitor_filter_drops_the_echo_of_our_additions_only(ns, fib):
    """The default monitor never wakes up for our own additions (a kernel BPF filter), but still
    sees our routes deleted and foreign routes added."""
    with RouteMonitor(FibSettings(), fib.links) as monitor:
        assert fib.apply([op(OpKind.REPLACE, "10.90.0.0/16", GW0)]) == []
        ns.ip("route", "add", "10.91.0.0/16", "via", "192.0.2.2", "proto", "static")
        events = wait_events(monitor, lambda e: isinstance(e, RouteEvent) and str(e.prefix) == "10.91.0.0/16")
        assert [e for e in events if isinstance(e, RouteEvent) and str(e.prefix) == "10.90.0.0/16"] == []
        ns.ip("route", "del", "10.90.0.0/16", "proto", str(PROTO))
        events = wait_events(monitor, lambda e: isinstance(e, RouteEvent) and e.deleted)
        assert [str(e.prefix) for e in events if isinstance(e, RouteEvent) and e.deleted] == ["10.90.0.0/16"]
