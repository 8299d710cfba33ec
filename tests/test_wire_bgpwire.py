"""The message builders of `testlab.bgpwire` read back by ExaBGP 5.0.15's own parser (so the
raw speaker sends what a real BGP speaker understands), and the malformed shapes they can make."""

from __future__ import annotations

from exabgp.bgp.message import Notification, Open
from exabgp.bgp.message.open.capability import Capability
from exabgp.bgp.message.refresh import RouteRefresh

from testlab import bgpwire as w


def test_open_with_capabilities_reads_back():
    msg = w.open_msg(4_200_000_001, "192.0.2.9", 30, [w.cap_mp(1), w.cap_mp(2), w.cap_route_refresh(),
                                                       w.cap_asn4(4_200_000_001), w.cap_addpath([(1, 1, 3)]),
                                                       w.cap_graceful_restart(120, [(1, 1, 0x80)]),
                                                       w.cap_extended_message()])
    assert len(msg) == int.from_bytes(msg[16:18], "big") and msg[18] == w.OPEN
    o = Open.unpack_message(msg[19:])
    assert (int(o.asn), int(o.hold_time), str(o.router_id)) == (23456, 30, "192.0.2.9")
    caps = o.capabilities
    assert int(caps[Capability.CODE.FOUR_BYTES_ASN]) == 4_200_000_001
    assert [(str(a), str(s)) for a, s in caps[Capability.CODE.MULTIPROTOCOL]] == [("ipv4", "unicast"), ("ipv6", "unicast")]
    assert Capability.CODE.ROUTE_REFRESH in caps and Capability.CODE.EXTENDED_MESSAGE in caps
    assert list(caps[Capability.CODE.ADD_PATH].values()) == [3]
    assert caps[Capability.CODE.GRACEFUL_RESTART].restart_time == 120


def test_notification_keepalive_refresh():
    n = Notification.unpack_message(w.notification(3, 2, b"\x40\x63\x00")[19:])
    assert (n.code, n.subcode, n.data) == (3, 2, b"\x40\x63\x00")
    assert w.keepalive() == b"\xff" * 16 + b"\x00\x13\x04"
    rr = RouteRefresh.unpack_message(w.route_refresh(2, 1)[19:])
    assert (str(rr.afi), str(rr.safi)) == ("ipv6", "unicast")


def test_malformed_shapes():
    assert w.message(w.KEEPALIVE, length=5)[16:18] == b"\x00\x05"
    assert w.message(w.KEEPALIVE, marker=bytes(16))[:16] == bytes(16)
    assert w.attr(8, b"\x00" * 4, length=9) == b"\xc0\x08\x09" + bytes(4)
    assert w.attr(4, b"", flags=0x40) == b"\x40\x04\x00"
    assert w.attr(16, bytes(300))[:4] == b"\xd0\x10\x01\x2c"  # extended length when needed
    body = w.update(withdrawn=b"\x18\x0a", withdrawn_length=9, attrs=[w.origin(0)], attrs_length=1)
    assert body == b"\x00\x09\x18\x0a\x00\x01\x40\x01\x01\x00"
    assert w.prefix("10.1.2.0/23", host_bits=1) == b"\x17\x0a\x01\x03"
    assert w.nlri(["10.0.0.0/8"], [7]) == b"\x00\x00\x00\x07\x08\x0a"
    assert w.eor(2, 1) == bytes.fromhex("00000006800f03000201")
