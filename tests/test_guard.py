"""The hijack guard: own prefixes, node addresses, default routes, martians, next hop self."""

from __future__ import annotations

import importlib

import pytest

from agent.core.model import Prefix
from agent.policy.verdict import Reason

guard_mod = importlib.import_module("agent.import.guard")
Guard = guard_mod.Guard
P = Prefix.parse

PROTECTED = ["10.244.3.0/24", "10.96.0.0/12", "198.51.100.10/32", "fd00:10:244:3::/64"]
NODE = ["192.0.2.10/24", "2001:db8::10/64", "10.1.1.1", "fe80::1/64", "203.0.113.5/32"]


@pytest.fixture
def guard():
    return Guard(PROTECTED, NODE)


OK = None
CASES = [
    # default routes
    ("v4 default", "0.0.0.0/0", {}, Reason.DEFAULT_ROUTE, "0.0.0.0/0"),
    ("v6 default", "::/0", {}, Reason.DEFAULT_ROUTE, "::/0"),
    ("v4 default allowed", "0.0.0.0/0", {"allow_default": True}, OK, None),
    ("v6 default allowed", "::/0", {"allow_default": True}, OK, None),
    ("half default covers own", "0.0.0.0/1", {}, Reason.COVERS_OWN, "10.96.0.0/12"),
    # own prefixes: equal, more specific, covering
    ("own pod CIDR", "10.244.3.0/24", {}, Reason.OWN_PREFIX, "10.244.3.0/24"),
    ("more specific of pod CIDR", "10.244.3.128/25", {}, Reason.MORE_SPECIFIC_OF_OWN, "10.244.3.0/24"),
    ("pod host route", "10.244.3.7/32", {}, Reason.MORE_SPECIFIC_OF_OWN, "10.244.3.0/24"),
    ("covering pod CIDR", "10.244.0.0/16", {}, Reason.COVERS_OWN, "10.244.3.0/24"),
    ("covering allowed", "10.244.0.0/16", {"allow_covering": True}, OK, None),
    ("sibling pod CIDR", "10.244.4.0/24", {}, OK, None),
    ("service CIDR more specific", "10.100.0.0/16", {}, Reason.MORE_SPECIFIC_OF_OWN, "10.96.0.0/12"),
    ("corporate aggregate covers", "10.0.0.0/8", {}, Reason.COVERS_OWN, "10.96.0.0/12"),
    ("VIP", "198.51.100.10/32", {}, Reason.OWN_PREFIX, "198.51.100.10/32"),
    ("covering VIP", "198.51.100.0/24", {}, Reason.COVERS_OWN, "198.51.100.10/32"),
    ("VIP neighbour", "198.51.100.11/32", {}, OK, None),
    ("v6 own", "fd00:10:244:3::/64", {}, Reason.OWN_PREFIX, "fd00:10:244:3::/64"),
    ("v6 more specific", "fd00:10:244:3:1::/80", {}, Reason.MORE_SPECIFIC_OF_OWN, "fd00:10:244:3::/64"),
    ("v6 covering", "fd00:10::/32", {}, Reason.COVERS_OWN, "fd00:10:244:3::/64"),
    ("v6 sibling", "fd00:10:244:4::/64", {}, OK, None),
    # node addresses
    ("node /32", "192.0.2.10/32", {}, Reason.NODE_ADDRESS, "node address 192.0.2.10/24"),
    ("more specific than subnet with node", "192.0.2.8/29", {}, Reason.NODE_ADDRESS, "node address 192.0.2.10/24"),
    ("node subnet itself", "192.0.2.0/24", {}, OK, None),
    ("aggregate over node", "192.0.0.0/16", {}, OK, None),
    ("more specific without node", "192.0.2.128/25", {}, OK, None),
    ("node /128", "2001:db8::10/128", {}, Reason.NODE_ADDRESS, "node address 2001:db8::10/64"),
    ("v6 longer than subnet", "2001:db8::/96", {}, Reason.NODE_ADDRESS, "node address 2001:db8::10/64"),
    ("v6 node subnet", "2001:db8::/64", {}, OK, None),
    ("v6 aggregate", "2001:db8::/32", {}, OK, None),
    ("bare address host route", "10.1.1.1/32", {}, Reason.NODE_ADDRESS, "node address 10.1.1.1/32"),
    ("bare address covered", "10.1.1.0/24", {}, OK, None),
    ("loopback /32 address", "203.0.113.5/32", {}, Reason.NODE_ADDRESS, "node address 203.0.113.5/32"),
    ("loopback /32 covered", "203.0.113.0/24", {}, OK, None),
    # martians
    ("loopback", "127.0.0.1/32", {}, Reason.MARTIAN, "127.0.0.0/8"),
    ("metadata service", "169.254.169.254/32", {}, Reason.MARTIAN, "169.254.0.0/16"),
    ("multicast", "239.1.1.0/24", {}, Reason.MARTIAN, "224.0.0.0/4"),
    ("this network", "0.0.0.0/8", {}, Reason.MARTIAN, "0.0.0.0/8"),
    ("v6 loopback", "::1/128", {}, Reason.MARTIAN, "::1/128"),
    ("v6 link-local", "fe80::/64", {}, Reason.MARTIAN, "fe80::/10"),
    ("v6 multicast", "ff02::/16", {}, Reason.MARTIAN, "ff00::/8"),
    ("v4-mapped", "::ffff:10.0.0.0/104", {}, Reason.MARTIAN, "::ffff:0:0/96"),
    # ordinary routes
    ("ordinary v4", "203.0.114.0/24", {}, OK, None),
    ("ordinary v6", "2001:db9::/48", {}, OK, None),
]


@pytest.mark.parametrize("prefix,kwargs,reason,matched", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_guard(guard, prefix, kwargs, reason, matched):
    v = guard.check(P(prefix), "192.0.2.1", **kwargs)
    if reason is None:
        assert v is None
    else:
        assert v is not None and not v.accepted
        assert (v.reason, v.statement, v.policy) == (reason, matched, "guard")


@pytest.mark.parametrize("prefix,nexthop,kwargs,reason", [
    ("203.0.114.0/24", "192.0.2.10", {}, Reason.NEXT_HOP_IS_NODE),
    ("2001:db9::/48", "2001:db8::10", {}, Reason.NEXT_HOP_IS_NODE),
    ("2001:db9::/48", "fe80::1", {}, Reason.NEXT_HOP_IS_NODE),
    ("0.0.0.0/0", "192.0.2.10", {"allow_default": True}, Reason.NEXT_HOP_IS_NODE),
    ("203.0.114.0/24", "192.0.2.11", {}, None),
    ("203.0.114.0/24", None, {}, None),
])
def test_next_hop_is_node(guard, prefix, nexthop, kwargs, reason):
    v = guard.check(P(prefix), nexthop, **kwargs)
    assert (v and v.reason) == reason
    if reason:
        assert v.statement == f"next hop {nexthop}"


def test_checks_in_order_first_hit_decides():
    g = Guard(["192.0.2.0/24"], ["192.0.2.10/24"])
    # equal to an own prefix that also holds a node address: OWN_PREFIX comes first
    assert g.check(P("192.0.2.0/24")).reason is Reason.OWN_PREFIX
    assert g.check(P("192.0.2.10/32")).reason is Reason.MORE_SPECIFIC_OF_OWN
    # a covering route with our next hop: the next hop is reported before covering
    assert g.check(P("192.0.0.0/16"), "192.0.2.10").reason is Reason.NEXT_HOP_IS_NODE


def test_live_updates_replace_the_sets(guard):
    assert guard.check(P("10.244.3.0/24")).reason is Reason.OWN_PREFIX
    guard.set_protected([P("10.244.7.0/24")])
    assert guard.check(P("10.244.3.0/24")) is None
    assert guard.check(P("10.244.7.0/24")).reason is Reason.OWN_PREFIX
    assert guard.protected == {P("10.244.7.0/24")}

    assert guard.check(P("192.0.2.10/32")).reason is Reason.NODE_ADDRESS
    guard.set_node_addresses(["192.0.2.10/28"])
    assert guard.check(P("192.0.2.0/24")) is None
    v = guard.check(P("192.0.2.8/29"))
    assert (v.reason, v.statement) == (Reason.NODE_ADDRESS, "node address 192.0.2.10/28")
    guard.set_node_addresses([])
    assert guard.check(P("192.0.2.10/32")) is None
    assert guard.node_addresses == ()


def test_zone_index_is_ignored():
    g = Guard([], ["fe80::1%eth0/64", "FE80::2"])
    assert g.node_addresses == ("fe80::1/64", "fe80::2/128")
    assert g.check(P("2001:db8::/48"), "fe80::2").reason is Reason.NEXT_HOP_IS_NODE


def test_address_on_two_interfaces_uses_the_shorter_subnet():
    g = Guard([], ["192.0.2.10/24", "192.0.2.10/28"])
    assert g.check(P("192.0.2.0/25")).reason is Reason.NODE_ADDRESS  # longer than /24
    assert g.node_addresses == ("192.0.2.10/24",)


def test_several_node_addresses_in_one_route():
    g = Guard([], ["192.0.2.10/24", "192.0.2.200/26", "192.0.2.100/32"])
    assert g.check(P("192.0.2.0/24")) is None  # the subnet of .10, shorter than .200's /26
    assert g.check(P("192.0.2.128/25")) is None  # holds .200 only, and is shorter than its /26
    v = g.check(P("192.0.2.192/27"))
    assert (v.reason, v.statement) == (Reason.NODE_ADDRESS, "node address 192.0.2.200/26")
    v = g.check(P("192.0.2.0/25"))  # holds .10 (longer than its /24) and .100 (a /32: allowed)
    assert (v.reason, v.statement) == (Reason.NODE_ADDRESS, "node address 192.0.2.10/24")
    v = g.check(P("192.0.2.100/32"))  # a host route of an address is always refused
    assert (v.reason, v.statement) == (Reason.NODE_ADDRESS, "node address 192.0.2.100/32")


def test_empty_guard_still_refuses_defaults_and_martians():
    g = Guard()
    assert g.check(P("0.0.0.0/0")).reason is Reason.DEFAULT_ROUTE
    assert g.check(P("127.0.0.0/8")).reason is Reason.MARTIAN
    assert g.check(P("10.0.0.0/8")) is None


def test_verdicts_are_shared(guard):
    a = guard.check(P("10.244.3.1/32"))
    b = guard.check(P("10.244.3.2/32"))
    assert a is b
    assert str(a).startswith("rejected by guard 10.244.3.0/24 (more_specific_of_own")


def test_bucket_fast_path_keeps_every_verdict():
    """The per-bucket shortcut must not change a verdict: own prefixes shorter than a bucket,
    IPv6, covering routes, node addresses, next hops of the node, martians."""
    import importlib

    guard_mod = importlib.import_module("agent.import.guard")
    from agent.core.model import Prefix

    g = guard_mod.Guard(["10.0.0.0/7", "fd00:244::/32", "192.0.2.0/24"], ["172.16.5.9/24", "2001:db8::9/64"])
    cases = {
        "11.1.0.0/16": "more_specific_of_own",      # inside a /7 spanning two buckets
        "10.0.0.0/7": "own_prefix",
        "fd00:244:1::/48": "more_specific_of_own",
        "192.0.0.0/16": "covers_own",
        "172.16.5.9/32": "node_address",
        "2001:db8::9/128": "node_address",
        "127.0.0.0/16": "martian",
        "ff02::/16": "martian",
        "198.51.100.0/24": None,
        "2a00:1::/32": None,
    }
    for text, reason in cases.items():
        v = g.check(Prefix.parse(text), "203.0.113.1")
        assert (v.reason.value if v else None) == reason, text
    assert g.check(Prefix.parse("198.51.100.0/24"), "172.16.5.9").reason.value == "next_hop_is_node"


@pytest.mark.parametrize("nexthop", ["192.0.2.1", "192.0.2.10", "2001:db8::10", "127.0.0.1", None])
@pytest.mark.parametrize("kwargs", [{}, {"allow_default": True}, {"allow_covering": True}])
def test_batch_check_agrees_with_check(guard, nexthop, kwargs):
    """`refused` (one UPDATE's prefixes at once) gives exactly `check`'s verdict for each prefix:
    every case of the table, in one batch, with good and refused next hops."""
    prefixes = [P(c[1]) for c in CASES] + [P(t) for t in (
        "198.51.100.0/24", "2a00:1::/32", "1.0.0.0/8", "1.2.3.0/24", "0:1::/32", "::2/128", "fec0::/16", "fe90::/32")]
    got = guard.refused(prefixes, nexthop, **kwargs) or {}
    want = {p: v for p in prefixes if (v := guard.check(p, nexthop, **kwargs)) is not None}
    assert got == want
    assert all(got[p] is want[p] for p in want)  # the shared verdict objects
    assert (guard.refused([P("203.0.114.0/24")], nexthop, **kwargs) is None) == (nexthop in ("192.0.2.1", None))


@pytest.mark.parametrize("extra", [None, "2.0.0.0/7", "2.255.0.0/16", "1.255.0.0/16", "10.244.3.0/25", "2001:db8:5::/48"])
@pytest.mark.parametrize("base", ["2.2.{i}.0/24", "10.50.{i}.0/24", "2a00:1:{i:x}::/48"])
def test_a_batch_in_one_clear_bucket_agrees_with_check(guard, base, extra):
    """A run of prefixes in top buckets clear of everything of ours passes as a whole; one
    shorter than a bucket, in a bucket of ours, or in the other family among them
    makes it go prefix by prefix, with `check`'s verdicts."""
    prefixes = [P(base.format(i=i)) for i in range(20)] + ([P(extra)] if extra else [])
    got = guard.refused(prefixes, "192.0.2.1") or {}
    assert got == {p: v for p in prefixes if (v := guard.check(p, "192.0.2.1")) is not None}
    # (buckets are the first 16 bits: 1.255, 2.255 and 2.2 are clear, whatever the distance;
    # 10.50 is clear though the node and its protected prefixes are in 10/8)
    assert guard._one_clear_bucket(prefixes) == (
        extra is None or extra in ("1.255.0.0/16", "2.255.0.0/16") and not base.startswith("2a00"))


@pytest.mark.parametrize("nexthop,reason", [
    ("0.0.0.0", Reason.BAD_NEXT_HOP),
    ("0.1.2.3", Reason.BAD_NEXT_HOP),  # 0.0.0.0/8: "this network"
    ("127.0.0.1", Reason.BAD_NEXT_HOP),
    ("224.0.0.5", Reason.BAD_NEXT_HOP),
    ("239.255.255.250", Reason.BAD_NEXT_HOP),
    ("255.255.255.255", Reason.BAD_NEXT_HOP),
    ("240.0.0.1", Reason.BAD_NEXT_HOP),
    ("::", Reason.BAD_NEXT_HOP),
    ("::1", Reason.BAD_NEXT_HOP),
    ("ff02::1", Reason.BAD_NEXT_HOP),
    ("::ffff:10.0.0.1", Reason.BAD_NEXT_HOP),
    ("not-an-address", Reason.BAD_NEXT_HOP),
    ("192.0.2.10", Reason.NEXT_HOP_IS_NODE),  # our own (session local) address
    ("169.254.0.1", None),  # RFC 5549 unnumbered set-ups use it as an IPv4 gateway
    ("fe80::2", None),  # link-local: bound to the session's interface
    ("198.51.100.1", None),
    ("2001:db9::1", None),
])
@pytest.mark.parametrize("prefix", ["203.0.114.0/24", "10.244.3.0/25", "2001:db9::/48"])
def test_bad_next_hops_are_refused(guard, prefix, nexthop, reason):
    """Checked in both paths of `check` (a prefix near our own space or not), whatever family."""
    v = guard.check(P(prefix), nexthop)
    if P(prefix) == P("10.244.3.0/25"):  # inside our pod CIDR: the prefix check comes first
        assert v.reason is Reason.MORE_SPECIFIC_OF_OWN
        return
    assert (v and v.reason) == reason
    if reason:
        assert (v.statement, v.policy, v.accepted) == (f"next hop {nexthop}", "guard", False)
        assert v is guard.check(P("198.18.0.0/15"), nexthop)  # one shared verdict per next hop


def test_bad_next_hop_of_an_allowed_default_route():
    g = Guard()
    assert g.check(P("0.0.0.0/0"), "0.0.0.0", allow_default=True).reason is Reason.BAD_NEXT_HOP
    assert g.check(P("::/0"), "::", allow_default=True).reason is Reason.BAD_NEXT_HOP
    assert g.check(P("0.0.0.0/0"), "192.0.2.1", allow_default=True) is None


def test_next_hop_cache_follows_node_addresses():
    g = Guard([], ["192.0.2.10/24"])
    assert g.check(P("203.0.114.0/24"), "192.0.2.10").reason is Reason.NEXT_HOP_IS_NODE
    g.set_node_addresses(["192.0.2.11/24"])
    assert g.check(P("203.0.114.0/24"), "192.0.2.10") is None
    assert g.check(P("203.0.114.0/24"), "192.0.2.11").reason is Reason.NEXT_HOP_IS_NODE
