"""agent.fib.codec: our hand-packed bytes checked against pyroute2's own message classes, and
decoding of kernel-shaped dump/monitor buffers (no root needed)."""

from __future__ import annotations

import errno
import struct

import pytest
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from agent.fib import codec
from agent.fib.codec import Decoder, NlDone, NlError
from agent.fib.encoder import Encoder, UnknownDevice, encode_dump_request
from agent.fib.types import FibSettings, ForeignRoute, LinkEvent, Op, OpKind, RouteEvent
from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops

INDEX = {"lo": 1, "eth0": 3, "eth1": 4}
NAMES = {v: k for k, v in INDEX.items()}
S = FibSettings()

F_REQ, F_ACK = codec.NLM_F_REQUEST, codec.NLM_F_ACK
F_CREATE, F_EXCL, F_REPLACE = codec.NLM_F_CREATE, codec.NLM_F_EXCL, codec.NLM_F_REPLACE


def kr(*hops: NextHop, type: RouteType = RouteType.UNICAST, metric: int = 20) -> KernelRoute:
    return intern(KernelRoute(type, nexthops(*hops), metric))


def parse(data: bytes) -> rtmsg:
    msg = rtmsg(data)
    msg.decode()
    assert msg["header"]["length"] == len(data)
    return msg


def encode(kind: OpKind, prefix: str, route: KernelRoute, settings: FibSettings = S, seq: int = 7,
           ack: bool = False) -> bytes:
    return Encoder(settings, INDEX).encode(Op(kind, Prefix.parse(prefix), route), seq, ack)


# ---- encoding, checked with pyroute2 ----


def test_add_ipv4_single_gateway():
    msg = parse(encode(OpKind.ADD, "10.1.2.0/24", kr(NextHop("192.0.2.1", "eth0"))))
    hdr = msg["header"]
    assert hdr["type"] == codec.RTM_NEWROUTE
    assert hdr["flags"] == F_REQ | F_CREATE | F_EXCL
    assert hdr["sequence_number"] == 7
    assert (msg["family"], msg["dst_len"], msg["table"], msg["proto"]) == (2, 24, 254, 201)
    assert (msg["scope"], msg["type"]) == (codec.RT_SCOPE_UNIVERSE, 1)
    assert msg.get_attr("RTA_DST") == "10.1.2.0"
    assert msg.get_attr("RTA_TABLE") == 254
    assert msg.get_attr("RTA_PRIORITY") == 20
    assert msg.get_attr("RTA_GATEWAY") == "192.0.2.1"
    assert msg.get_attr("RTA_OIF") == 3
    assert msg.get_attr("RTA_MULTIPATH") is None


def test_replace_flags_and_ack():
    route = kr(NextHop("192.0.2.1", "eth0"))
    msg = parse(encode(OpKind.REPLACE, "10.1.2.3/32", route, ack=True, seq=99))
    assert msg["header"]["flags"] == F_REQ | F_CREATE | F_REPLACE | F_ACK
    assert msg["header"]["sequence_number"] == 99
    assert msg["dst_len"] == 32 and msg.get_attr("RTA_DST") == "10.1.2.3"
    plain = parse(encode(OpKind.REPLACE, "10.1.2.3/32", route))
    assert plain["header"]["flags"] == F_REQ | F_CREATE | F_REPLACE


def test_ipv6_multipath_weights():
    route = kr(NextHop("2001:db8::1", "eth0", 3), NextHop("2001:db8::2", "eth1"), metric=512)
    msg = parse(encode(OpKind.REPLACE, "2001:db8:1::/48", route))
    assert (msg["family"], msg["dst_len"], msg["scope"]) == (10, 48, codec.RT_SCOPE_UNIVERSE)
    assert msg.get_attr("RTA_DST") == "2001:db8:1::"
    assert msg.get_attr("RTA_PRIORITY") == 512
    assert msg.get_attr("RTA_GATEWAY") is None and msg.get_attr("RTA_OIF") is None
    hops = [(nh.get_attr("RTA_GATEWAY"), nh["oif"], nh["hops"]) for nh in msg.get_attr("RTA_MULTIPATH")]
    assert hops == [("2001:db8::1", 3, 2), ("2001:db8::2", 4, 0)]


def test_ipv4_multipath():
    route = kr(NextHop("192.0.2.1", "eth0"), NextHop("198.51.100.1", "eth1", 2))
    msg = parse(encode(OpKind.ADD, "10.9.0.0/16", route))
    hops = [(nh.get_attr("RTA_GATEWAY"), nh["oif"], nh["hops"]) for nh in msg.get_attr("RTA_MULTIPATH")]
    assert hops == [("192.0.2.1", 3, 0), ("198.51.100.1", 4, 1)]


def test_device_only_route_has_link_scope():
    msg = parse(encode(OpKind.REPLACE, "10.5.0.0/24", kr(NextHop(None, "eth1"))))
    assert msg["scope"] == codec.RT_SCOPE_LINK
    assert msg.get_attr("RTA_OIF") == 4 and msg.get_attr("RTA_GATEWAY") is None


@pytest.mark.parametrize("rtype", [RouteType.BLACKHOLE, RouteType.UNREACHABLE, RouteType.PROHIBIT])
@pytest.mark.parametrize("prefix", ["10.66.0.0/16", "2001:db8:66::/48"])
def test_non_unicast_routes(rtype, prefix):
    msg = parse(encode(OpKind.REPLACE, prefix, kr(type=rtype)))
    assert msg["type"] == rtype.value and msg["scope"] == codec.RT_SCOPE_UNIVERSE
    names = [name for name, _ in msg["attrs"]]
    assert names == ["RTA_DST", "RTA_TABLE", "RTA_PRIORITY"]


def test_big_table_number_goes_in_rta_table_only():
    msg = parse(encode(OpKind.ADD, "10.1.0.0/16", kr(NextHop("192.0.2.1", "eth0")), FibSettings(table=1000)))
    assert msg["table"] == 0 and msg.get_attr("RTA_TABLE") == 1000
    msg = parse(encode(OpKind.ADD, "10.1.0.0/16", kr(NextHop("192.0.2.1", "eth0")), FibSettings(table=100)))
    assert msg["table"] == 100 and msg.get_attr("RTA_TABLE") == 100


def test_delete_matches_prefix_protocol_metric_only():
    route = kr(NextHop("192.0.2.1", "eth0"), NextHop("192.0.2.2", "eth1"), metric=33)
    msg = parse(encode(OpKind.DELETE, "10.1.0.0/16", route))
    assert msg["header"]["type"] == codec.RTM_DELROUTE
    assert msg["header"]["flags"] == F_REQ
    assert (msg["proto"], msg["scope"], msg["type"]) == (201, codec.RT_SCOPE_NOWHERE, 0)
    assert dict(msg["attrs"]) == {"RTA_DST": "10.1.0.0", "RTA_TABLE": 254, "RTA_PRIORITY": 33}


def test_default_routes_have_no_rta_dst():
    for prefix, family in (("0.0.0.0/0", 2), ("::/0", 10)):
        gw = "192.0.2.1" if family == 2 else "fe80::1"
        msg = parse(encode(OpKind.REPLACE, prefix, kr(NextHop(gw, "eth0"))))
        assert (msg["family"], msg["dst_len"]) == (family, 0)
        assert msg.get_attr("RTA_DST") is None and msg.get_attr("RTA_GATEWAY") == gw


def test_metric_none_uses_settings():
    route = intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("192.0.2.1", "eth0")), None))
    msg = parse(encode(OpKind.ADD, "10.1.0.0/16", route, FibSettings(metric=77)))
    assert msg.get_attr("RTA_PRIORITY") == 77


def test_unknown_device_and_family_mismatch():
    enc = Encoder(S, INDEX)
    with pytest.raises(UnknownDevice):
        enc.encode(Op(OpKind.ADD, Prefix.parse("10.0.0.0/8"), kr(NextHop("192.0.2.1", "nope0"))), 1)
    with pytest.raises(ValueError):
        enc.encode(Op(OpKind.ADD, Prefix.parse("10.0.0.0/8"), kr(NextHop("2001:db8::1", "eth0"))), 1)
    # a delete needs no device: it names prefix, protocol and metric only
    enc.encode(Op(OpKind.DELETE, Prefix.parse("10.0.0.0/8"), kr(NextHop("192.0.2.1", "nope0"))), 1)


def test_cached_tail_follows_invalidate():
    index = dict(INDEX)
    enc = Encoder(S, index)
    op = Op(OpKind.ADD, Prefix.parse("10.0.0.0/8"), kr(NextHop("192.0.2.1", "eth0")))
    assert parse(enc.encode(op, 1)).get_attr("RTA_OIF") == 3
    index["eth0"] = 42
    assert parse(enc.encode(op, 1)).get_attr("RTA_OIF") == 3  # cached
    enc.invalidate()
    assert parse(enc.encode(op, 1)).get_attr("RTA_OIF") == 42


def test_dump_request():
    data = encode_dump_request(codec.RTM_GETROUTE, 10, 5, 254)
    msg = parse(data)
    assert msg["header"]["flags"] == F_REQ | codec.NLM_F_DUMP
    assert (msg["family"], msg["table"], msg.get_attr("RTA_TABLE")) == (10, 254, 254)


# ---- round trip: our RTM_NEWROUTE bytes through our decoder ----

ROUND_TRIP = [
    ("10.1.2.0/24", kr(NextHop("192.0.2.1", "eth0"))),
    ("10.1.2.3/32", kr(NextHop("192.0.2.1", "eth0"), NextHop("198.51.100.7", "eth1", 4), metric=5)),
    ("10.7.0.0/16", kr(NextHop(None, "eth1"))),
    ("0.0.0.0/0", kr(NextHop("192.0.2.254", "eth0"), metric=0)),
    ("2001:db8:1::/48", kr(NextHop("2001:db8::1", "eth0"), NextHop("fe80::2", "eth1", 2))),
    ("::/0", kr(NextHop("fe80::1", "eth0"), metric=1024)),
    ("10.66.0.0/16", kr(type=RouteType.BLACKHOLE)),
    ("2001:db8:66::/48", kr(type=RouteType.UNREACHABLE)),
    ("2001:db8:67::/48", kr(type=RouteType.PROHIBIT)),
]


@pytest.mark.parametrize("prefix,route", ROUND_TRIP, ids=[p for p, _ in ROUND_TRIP])
def test_round_trip(prefix, route):
    for settings in (S, FibSettings(table=1000, protocol=99)):
        data = Encoder(settings, INDEX).encode(Op(OpKind.REPLACE, Prefix.parse(prefix), route), 3)
        (event,) = Decoder(settings, NAMES).decode(data)
        assert isinstance(event, RouteEvent)
        assert not event.deleted
        assert (event.prefix, event.protocol) == (Prefix.parse(prefix), settings.protocol)
        assert event.route is route  # interned: identical object
        assert event.foreign is None


# ---- decoding kernel-shaped buffers ----


def kmsg(mtype=codec.RTM_NEWROUTE, family=2, dst_len=24, table=254, proto=201, type=1, scope=0,
         flags=0, attrs=(), seq=5, nlflags=codec.NLM_F_MULTI) -> bytes:
    """A route message laid out like the kernel's (RTA_TABLE first), encoded by pyroute2."""
    m = rtmsg()
    m["header"].update({"type": mtype, "flags": nlflags, "sequence_number": seq})
    m.update({"family": family, "dst_len": dst_len, "table": table if table < 256 else 252,
              "proto": proto, "type": type, "scope": scope, "flags": flags})
    m["attrs"] = [("RTA_TABLE", table), *attrs]
    m.encode()
    return bytes(m.data)


def done(seq=5) -> bytes:
    return struct.pack("=IHHIIi", 20, codec.NLMSG_DONE, codec.NLM_F_MULTI, seq, 0, 0)


def link(name, index, up, mtype=codec.RTM_NEWLINK) -> bytes:
    m = ifinfmsg()
    m["header"]["type"] = mtype
    m["index"] = index
    m["flags"] = 0x1043 if up else 0x1002
    m["attrs"] = [("IFLA_IFNAME", name), ("IFLA_MTU", 1500)]
    m.encode()
    return bytes(m.data)


def error(seq, err) -> bytes:
    request = struct.pack("=IHHII", 16, codec.RTM_NEWROUTE, 5, seq, 0)
    return struct.pack("=IHHIIi", 36, codec.NLMSG_ERROR, 0, seq, 0, -err) + request


def test_decode_dump_buffer():
    v4gw = [("RTA_PRIORITY", 20), ("RTA_GATEWAY", "192.0.2.1"), ("RTA_OIF", 3)]
    buf = b"".join([
        kmsg(attrs=[("RTA_DST", "10.1.0.0"), *v4gw]),
        kmsg(dst_len=32, attrs=[("RTA_DST", "10.1.0.5"), *v4gw]),
        # connected route, proto kernel, scope link, no metric attribute
        kmsg(proto=2, scope=253,
             attrs=[("RTA_DST", "192.0.2.0"), ("RTA_PREFSRC", "192.0.2.10"), ("RTA_OIF", 3)]),
        # skipped: local table, local type, cloned, other table
        kmsg(table=255, type=2, proto=2, dst_len=32, attrs=[("RTA_DST", "192.0.2.10"), ("RTA_OIF", 3)]),
        kmsg(type=3, proto=2, dst_len=32, attrs=[("RTA_DST", "192.0.2.255"), ("RTA_OIF", 3)]),
        kmsg(family=10, dst_len=128, flags=codec.RTM_F_CLONED,
             attrs=[("RTA_DST", "2001:db8::9"), ("RTA_PRIORITY", 20), ("RTA_GATEWAY", "fe80::1"),
                    ("RTA_OIF", 3)]),
        kmsg(table=100, attrs=[("RTA_DST", "10.2.0.0"), *v4gw]),
        # IPv6 default route: no RTA_DST, length 0: kept as ::/0
        kmsg(family=10, dst_len=0, proto=186,
             attrs=[("RTA_PRIORITY", 1024), ("RTA_GATEWAY", "fe80::1"), ("RTA_OIF", 4), ("RTA_PREF", 0)]),
        # IPv6 blackhole of ours: the kernel reports dev lo, which is dropped
        kmsg(family=10, dst_len=48, type=6,
             attrs=[("RTA_DST", "2001:db8:66::"), ("RTA_PRIORITY", 20), ("RTA_OIF", 1)]),
        # IPv6 multipath of ours
        kmsg(family=10, dst_len=64, attrs=[
            ("RTA_DST", "2001:db8:5::"), ("RTA_PRIORITY", 20),
            ("RTA_MULTIPATH", [{"attrs": [("RTA_GATEWAY", "fe80::2")], "hops": 1, "oif": 4},
                               {"attrs": [("RTA_GATEWAY", "fe80::1")], "hops": 0, "oif": 3}]),
            ("RTA_PREF", 0)]),
        done(),
    ])
    events = Decoder(S, NAMES).decode(buf)
    assert isinstance(events[-1], NlDone)
    routes = {str(e.prefix): e for e in events if isinstance(e, RouteEvent)}
    assert sorted(routes) == ["10.1.0.0/24", "10.1.0.5/32", "192.0.2.0/24", "2001:db8:5::/64",
                              "2001:db8:66::/48", "::/0"]
    gw = kr(NextHop("192.0.2.1", "eth0"))
    assert routes["10.1.0.0/24"].route is gw and routes["10.1.0.5/32"].route is gw
    connected = routes["192.0.2.0/24"].foreign
    assert connected == ForeignRoute(Prefix.parse("192.0.2.0/24"), 2, 0, RouteType.UNICAST,
                                     (NextHop(None, "eth0"),))
    assert connected.connected
    default6 = routes["::/0"]
    assert default6.protocol == 186 and default6.foreign.metric == 1024
    assert default6.route.nexthops == (NextHop("fe80::1", "eth1"),)
    assert routes["2001:db8:66::/48"].route == KernelRoute(RouteType.BLACKHOLE, (), 20)
    mp = routes["2001:db8:5::/64"].route
    assert mp.nexthops == (NextHop("fe80::1", "eth0", 1), NextHop("fe80::2", "eth1", 2))
    assert mp is kr(NextHop("fe80::2", "eth1", 2), NextHop("fe80::1", "eth0"))


def test_decode_big_table_and_delete_event():
    settings = FibSettings(table=1000)
    buf = kmsg(mtype=codec.RTM_DELROUTE, table=1000, nlflags=0,
               attrs=[("RTA_DST", "10.3.0.0"), ("RTA_PRIORITY", 20), ("RTA_OIF", 4)])
    buf += kmsg(table=1001, attrs=[("RTA_DST", "10.4.0.0"), ("RTA_OIF", 4)])
    (event,) = Decoder(settings, NAMES).decode(buf)
    assert event.deleted and str(event.prefix) == "10.3.0.0/24"
    assert event.route == KernelRoute(RouteType.UNICAST, (NextHop(None, "eth1"),), 20)


def test_decode_without_table_attribute_uses_header():
    m = rtmsg()
    m["header"].update({"type": codec.RTM_NEWROUTE, "flags": 0, "sequence_number": 0})
    m.update({"family": 2, "dst_len": 8, "table": 254, "proto": 4, "type": 1, "scope": 0})
    m["attrs"] = [("RTA_DST", "10.0.0.0"), ("RTA_GATEWAY", "192.0.2.1"), ("RTA_OIF", 3)]
    m.encode()
    (event,) = Decoder(S, NAMES).decode(bytes(m.data))
    assert event.foreign.protocol == 4 and event.route.metric == 0


def test_unknown_ifindex_is_not_cached():
    names = dict(NAMES)
    dec = Decoder(S, names)
    buf = kmsg(attrs=[("RTA_DST", "10.1.0.0"), ("RTA_PRIORITY", 20), ("RTA_GATEWAY", "192.0.2.1"),
                      ("RTA_OIF", 9)])
    (event,) = dec.decode(buf)
    assert event.route.nexthops == (NextHop("192.0.2.1", None),)
    names[9] = "eth9"
    (event,) = dec.decode(buf)
    assert event.route.nexthops == (NextHop("192.0.2.1", "eth9"),)


def test_decode_links_errors_and_noise():
    buf = link("eth0", 3, True) + link("eth1", 4, False) + link("eth1", 4, False, codec.RTM_DELLINK)
    buf += error(11, 0) + error(12, errno.ENETUNREACH)
    # AF_MPLS: ignored
    buf += struct.pack("=IHHII", 28, codec.RTM_NEWROUTE, 0, 0, 0)
    buf += struct.pack("=BBBBBBBBI", 28, 20, 0, 0, 254, 4, 0, 1, 0)
    events = Decoder(S, NAMES).decode(buf)
    assert [(type(e).__name__, getattr(e, "deleted", None)) for e in events[:3]] == [
        ("LinkEvent", False), ("LinkEvent", False), ("LinkEvent", True)]
    assert events[0].link.name == "eth0" and events[0].link.index == 3 and events[0].link.up
    assert not events[1].link.up
    assert events[3:] == [NlError(11, 0), NlError(12, errno.ENETUNREACH)]
    assert isinstance(events[0], LinkEvent)


def test_truncated_buffer_is_not_an_exception():
    data = kmsg(attrs=[("RTA_DST", "10.1.0.0"), ("RTA_OIF", 3)])
    assert Decoder(S, NAMES).decode(data[:-3]) == []
    assert list(codec.iter_messages(b"\0" * 10)) == []


def test_encode_batch_equals_encode_op_by_op():
    """`encode_batch` (the writer's batches) makes exactly `encode`'s messages: both families, a
    default route, every kind, plain routes and routes through nexthop objects, object writes,
    routes changing from op to op and back, a big table number."""
    from agent.fib.types import NhOp, NhRouteOp

    a, b = kr(NextHop("10.0.0.1", "eth0")), kr(NextHop("10.0.0.1", "eth0"), NextHop("10.0.0.2", "eth1"))
    v6 = kr(NextHop("fd00::1", "eth0"))
    ops = []
    for i in range(40):
        ops.append(Op(OpKind.ADD, Prefix.parse(f"10.{i}.0.0/16"), a if i % 7 else b))
        ops.append(Op(OpKind.REPLACE, Prefix.parse(f"2001:db8:{i:x}::/48"), v6))
        if i % 9 == 0:
            ops += [Op(OpKind.DELETE, Prefix.parse("0.0.0.0/0"), a), Op(OpKind.DELETE, Prefix.parse("10.9.9.9/32"), b)]
        if i % 5 == 0:
            ops += [NhRouteOp(Op(OpKind.ADD, Prefix.parse(f"10.200.{i}.0/24"), a), 1000 + i % 2),
                    NhOp(OpKind.ADD, 77, 4, NextHop("10.0.0.1", "eth0"))]
    for settings in (S, FibSettings(table=1000, protocol=99, metric=5)):
        enc = Encoder(settings, INDEX)
        assert enc.encode_batch(ops, 500) == [enc.encode(op, 500 + j) for j, op in enumerate(ops)]
        assert enc.encode_batch(ops[3:], 9) == [enc.encode(op, 9 + j) for j, op in enumerate(ops[3:])]
    with pytest.raises(UnknownDevice):
        Encoder(S, {}).encode_batch(ops, 1)
