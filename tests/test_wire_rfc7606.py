"""RFC 7606 (and RFC 4271 / 4760 / 6793) outcomes of the wire codec: one row per malformed case,
with the action (treat-as-withdraw, attribute discard, session reset), the NOTIFICATION
code/subcode and what happens to the routes of the UPDATE."""

from __future__ import annotations

import pytest

from agent.core.bgp import Family, PathAttrs, RouteUpdate, UpdateAction, UpdateError
from agent.core.model import Prefix
from agent.speaker.wire import CAP_ADDPATH_V4, CAP_ASN4, WireDecoder
from testlab import bgpwire as w

PEER = "192.0.2.1"
V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
P = Prefix.parse
TAW, DISCARD, RESET = UpdateAction.TREAT_AS_WITHDRAW, UpdateAction.ATTRIBUTE_DISCARD, UpdateAction.SESSION_RESET
NLRI = w.nlri(["10.0.0.0/24", "10.0.1.0/24"])
ROUTES = (P("10.0.0.0/24"), P("10.0.1.0/24"))
V6_NLRI = w.nlri(["2001:db8:1::/48"])
ORIGIN, AS_PATH, NH = w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.1")


def v4(*attrs: bytes, withdrawn: bytes = b"", nlri: bytes = NLRI) -> bytes:
    return w.update(withdrawn=withdrawn, attrs=list(attrs), nlri=nlri)


def v6(*attrs: bytes, hops=("2001:db8::1",)) -> bytes:
    return w.update(attrs=[w.mp_reach(2, 1, list(hops), V6_NLRI), *attrs])


TREAT_AS_WITHDRAW = [
    ("ORIGIN of 2 octets (issue 14)", v4(w.attr(1, b"\0\0"), AS_PATH, NH), 3, 5),
    ("ORIGIN of 0 octets", v4(w.attr(1, b""), AS_PATH, NH), 3, 5),
    ("ORIGIN value 3", v4(w.attr(1, b"\3"), AS_PATH, NH), 3, 6),
    ("AS_PATH segment overrun", v4(ORIGIN, w.attr(2, b"\2\3" + bytes(8)), NH), 3, 11),
    ("AS_PATH zero-length segment", v4(ORIGIN, w.attr(2, b"\2\0"), NH), 3, 11),
    ("AS_PATH unknown segment type", v4(ORIGIN, w.attr(2, b"\5\1" + bytes(4)), NH), 3, 11),
    ("AS_PATH lone octet after a segment", v4(ORIGIN, w.attr(2, b"\2\1" + bytes(4) + b"\2"), NH), 3, 11),
    ("NEXT_HOP of 5 octets", v4(ORIGIN, AS_PATH, w.attr(3, bytes([192, 0, 2, 1, 0]))), 3, 5),
    ("MED of 3 octets", v4(ORIGIN, AS_PATH, NH, w.attr(4, b"\0\0\1")), 3, 5),
    ("LOCAL_PREF of 5 octets", v4(ORIGIN, AS_PATH, NH, w.attr(5, bytes(5))), 3, 5),
    ("COMMUNITIES of 5 octets", v4(ORIGIN, AS_PATH, NH, w.attr(8, bytes(5))), 3, 5),
    ("COMMUNITIES empty", v4(ORIGIN, AS_PATH, NH, w.attr(8, b"")), 3, 5),
    ("LARGE_COMMUNITY of 11 octets", v4(ORIGIN, AS_PATH, NH, w.attr(32, bytes(11))), 3, 5),
    ("EXTENDED_COMMUNITIES of 7 octets", v4(ORIGIN, AS_PATH, NH, w.attr(16, bytes(7))), 3, 5),
    ("IPv6 extended communities of 19 octets", v4(ORIGIN, AS_PATH, NH, w.attr(25, bytes(19))), 3, 5),
    ("ORIGINATOR_ID of 5 octets", v4(ORIGIN, AS_PATH, NH, w.attr(9, bytes(5))), 3, 5),
    ("CLUSTER_LIST empty", v4(ORIGIN, AS_PATH, NH, w.attr(10, b"")), 3, 5),
    ("CLUSTER_LIST of 6 octets", v4(ORIGIN, AS_PATH, NH, w.attr(10, bytes(6))), 3, 5),
    ("ORIGIN flagged optional", v4(w.attr(1, b"\0", flags=0xC0), AS_PATH, NH), 3, 4),
    ("MED flagged well-known", v4(ORIGIN, AS_PATH, NH, w.attr(4, bytes(4), flags=0x40)), 3, 4),
    ("COMMUNITIES flagged non-transitive", v4(ORIGIN, AS_PATH, NH, w.attr(8, bytes(4), flags=0x80)), 3, 4),
    ("ATOMIC_AGGREGATE flagged optional", v4(ORIGIN, AS_PATH, NH, w.attr(6, b"", flags=0xC0)), 3, 4),
    ("ORIGIN with the Partial bit", v4(w.attr(1, b"\0", flags=0x60), AS_PATH, NH), 3, 4),
    ("MED with the Partial bit", v4(ORIGIN, AS_PATH, NH, w.attr(4, bytes(4), flags=0xA0)), 3, 4),
    ("ORIGIN missing", v4(AS_PATH, NH), 3, 3),
    ("AS_PATH missing", v4(ORIGIN, NH), 3, 3),
    ("NEXT_HOP missing with NLRI", v4(ORIGIN, AS_PATH), 3, 3),
    ("no attributes at all with NLRI", v4(), 3, 3),
    ("attribute length overruns the block", v4(ORIGIN, AS_PATH, NH, w.attr(8, bytes(4), length=9)), 3, 5),
    ("two octets left after the last attribute", v4(ORIGIN, AS_PATH, NH, b"\x40\x01"), 3, 1),
    ("NEXT_HOP 0.0.0.0 (issue 14)", v4(ORIGIN, AS_PATH, w.next_hop("0.0.0.0")), 3, 8),
    ("NEXT_HOP loopback", v4(ORIGIN, AS_PATH, w.next_hop("127.0.0.1")), 3, 8),
    ("NEXT_HOP multicast", v4(ORIGIN, AS_PATH, w.next_hop("224.0.0.5")), 3, 8),
    ("NEXT_HOP broadcast", v4(ORIGIN, AS_PATH, w.next_hop("255.255.255.255")), 3, 8),
    ("MP_REACH IPv4 next hop 0.0.0.0", w.update(attrs=[w.mp_reach(1, 1, ["0.0.0.0"], NLRI), ORIGIN, AS_PATH]), 3, 8),
]

TREAT_AS_WITHDRAW_V6 = [
    ("MP_REACH flagged transitive", w.update(attrs=[w.attr(14, bytes.fromhex("0002011020010db8000000000000000000000001")
                                                           + b"\0" + V6_NLRI, flags=0xC0), ORIGIN, AS_PATH]), 3, 4),
    ("ORIGIN missing, MP_REACH only", v6(AS_PATH), 3, 3),
    ("IPv6 next hop ::", v6(ORIGIN, AS_PATH, hops=("::",)), 3, 8),
    ("IPv6 next hop ::1", v6(ORIGIN, AS_PATH, hops=("::1",)), 3, 8),
    ("IPv6 next hop multicast", v6(ORIGIN, AS_PATH, hops=("ff02::5", "fe80::1")), 3, 8),
]


@pytest.mark.parametrize("case, body, code, subcode", TREAT_AS_WITHDRAW, ids=[c[0] for c in TREAT_AS_WITHDRAW])
def test_treat_as_withdraw_ipv4(case, body, code, subcode):
    err, update = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert (err.action, err.code, err.subcode, err.family) == (TAW, code, subcode, V4), err
    assert update == RouteUpdate(PEER, V4, (), ROUTES)


@pytest.mark.parametrize("case, body, code, subcode", TREAT_AS_WITHDRAW_V6, ids=[c[0] for c in TREAT_AS_WITHDRAW_V6])
def test_treat_as_withdraw_ipv6(case, body, code, subcode):
    err, update = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert (err.action, err.code, err.subcode, err.family) == (TAW, code, subcode, V6), err
    assert update == RouteUpdate(PEER, V6, (), (P("2001:db8:1::/48"),))


def test_missing_attribute_data_is_its_type_code():
    err, _ = WireDecoder().decode(PEER, CAP_ASN4, v4(ORIGIN, NH))
    assert err.data == b"\2" and "AS_PATH" in err.reason


def test_treat_as_withdraw_keeps_the_explicit_withdrawals():
    body = v4(w.attr(1, b"\7"), AS_PATH, NH, withdrawn=w.nlri(["10.9.0.0/16"]))
    err, update = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert update.withdrawn == (P("10.9.0.0/16"), *ROUTES) and update.announced == ()


def test_a_martian_next_hop_withdraws_only_the_routes_that_use_it():
    body = w.update(attrs=[w.mp_reach(2, 1, ["2001:db8::1"], V6_NLRI), ORIGIN, AS_PATH, w.next_hop("0.0.0.0")],
                    nlri=NLRI)
    err, up4, up6 = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert (err.action, err.family, err.reason) == (TAW, V4, "NEXT_HOP 0.0.0.0 is in 0.0.0.0/8")
    assert up4 == RouteUpdate(PEER, V4, (), ROUTES)
    assert [a.prefix for a in up6.announced] == [P("2001:db8:1::/48")]


def test_next_hop_is_not_checked_without_ipv4_nlri():
    """RFC 4760: a NEXT_HOP beside MP_REACH_NLRI only is ignored, whatever it holds."""
    (up6,) = WireDecoder().decode(PEER, CAP_ASN4, v6(ORIGIN, AS_PATH, w.next_hop("0.0.0.0")))
    assert [a.prefix for a in up6.announced] == [P("2001:db8:1::/48")]


DISCARDS = [
    ("ATOMIC_AGGREGATE of 1 octet", v4(ORIGIN, AS_PATH, NH, w.attr(6, b"\0")), CAP_ASN4, PathAttrs(as_path=(65001,))),
    ("AGGREGATOR of 7 octets", v4(ORIGIN, AS_PATH, NH, w.attr(7, bytes(7))), CAP_ASN4, PathAttrs(as_path=(65001,))),
    ("AGGREGATOR of 8 octets on a 2-octet session",
     v4(ORIGIN, w.as_path([65001], asn4=False), NH, w.attr(7, bytes(8))), 0, PathAttrs(as_path=(65001,))),
    ("repeated MED: the first kept", v4(ORIGIN, AS_PATH, NH, w.med(1), w.med(2)), CAP_ASN4,
     PathAttrs(as_path=(65001,), med=1)),
    ("repeated COMMUNITIES", v4(ORIGIN, AS_PATH, NH, w.communities(["1:1"]), w.communities(["2:2"])), CAP_ASN4,
     PathAttrs(as_path=(65001,), communities=("1:1",))),
    ("malformed AS4_PATH (RFC 6793 6)", v4(ORIGIN, w.as_path([65001, 23456], asn4=False), NH,
                                          w.attr(17, b"\2\3" + bytes(4))), 0, PathAttrs(as_path=(65001, 23456))),
    ("AS4_AGGREGATOR of 7 octets", v4(ORIGIN, w.as_path([65001], asn4=False), NH, w.attr(18, bytes(7))), 0,
     PathAttrs(as_path=(65001,))),
]


@pytest.mark.parametrize("case, body, caps, attrs", DISCARDS, ids=[c[0] for c in DISCARDS])
def test_attribute_discard(case, body, caps, attrs):
    err, update = WireDecoder().decode(PEER, caps, body)
    assert (err.action, err.code) == (DISCARD, 3)
    assert [a.prefix for a in update.announced] == list(ROUTES)
    assert update.announced[0].attrs == attrs


def test_strongest_action_wins():
    body = v4(w.attr(1, b"\0\0"), AS_PATH, NH, w.attr(6, b"\0"))  # treat-as-withdraw + discard
    err, update = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert err.action is TAW and err.reason == "ORIGIN of 2 octets (expected 1)"
    assert update.announced == ()
    both = v4(w.attr(1, b"\0\0"), w.attr(2, b"\2\0"), NH)
    err, _ = WireDecoder().decode(PEER, CAP_ASN4, both)
    assert err.reason == "ORIGIN of 2 octets (expected 1); malformed AS_PATH"


SESSION_RESETS = [
    ("unrecognized well-known attribute (issue 14)", v4(ORIGIN, AS_PATH, NH, w.attr(99, b"x", flags=0x40)), 3, 2),
    ("UPDATE shorter than its length fields", b"\0\0\0", 1, 2),
    ("withdrawn routes length overruns", w.update(withdrawn=w.nlri(["10.0.0.0/8"]), withdrawn_length=40), 3, 1),
    ("total attribute length overruns", w.update(attrs=[ORIGIN], attrs_length=200), 3, 1),
    ("NLRI prefix length 33", v4(ORIGIN, AS_PATH, NH, nlri=b"\x21" + bytes(5)), 3, 10),
    ("NLRI truncated", v4(ORIGIN, AS_PATH, NH, nlri=b"\x18\x0a\x00"), 3, 10),
    ("withdrawn routes truncated", w.update(withdrawn=b"\x18\x0a"), 3, 10),
    ("MP_REACH_NLRI twice", w.update(attrs=[w.mp_reach(2, 1, ["2001:db8::1"], V6_NLRI), ORIGIN, AS_PATH,
                                            w.mp_reach(2, 1, ["2001:db8::1"], V6_NLRI)]), 3, 1),
    ("MP_UNREACH_NLRI twice", w.update(attrs=[w.mp_unreach(2, 1, V6_NLRI), w.mp_unreach(1, 1, NLRI)]), 3, 1),
    ("MP_REACH_NLRI of 4 octets", w.update(attrs=[w.attr(14, b"\0\2\1\0"), ORIGIN, AS_PATH]), 3, 9),
    ("MP_REACH IPv6 next hop of 12 octets", w.update(attrs=[w.mp_reach(2, 1, bytes(12), V6_NLRI), ORIGIN, AS_PATH]), 3, 9),
    ("MP_REACH IPv4 next hop of 16 octets", w.update(attrs=[w.mp_reach(1, 1, ["2001:db8::1"], NLRI), ORIGIN, AS_PATH]),
     3, 9),
    ("MP_REACH next hop overruns the attribute", w.update(attrs=[w.attr(14, b"\0\2\1\x20" + bytes(16)), ORIGIN]), 3, 9),
    ("MP_REACH prefix length 129", w.update(attrs=[w.mp_reach(2, 1, ["2001:db8::1"], b"\x81" + bytes(17)), ORIGIN,
                                                   AS_PATH]), 3, 9),
    ("MP_UNREACH_NLRI of 2 octets", w.update(attrs=[w.attr(15, b"\0\2")]), 3, 9),
    ("MP_UNREACH prefix truncated", w.update(attrs=[w.mp_unreach(2, 1, b"\x30\x20\x01")]), 3, 9),
    ("MP_REACH length overruns the block", w.update(attrs=[ORIGIN, w.attr(14, b"\0\2\1", length=40)]), 3, 5),
    ("MP_REACH first, length overruns the block", w.update(attrs=[w.attr(14, b"\0\2\1", length=40)]), 3, 5),
]


@pytest.mark.parametrize("case, body, code, subcode", SESSION_RESETS, ids=[c[0] for c in SESSION_RESETS])
def test_session_reset(case, body, code, subcode):
    (err,) = WireDecoder().decode(PEER, CAP_ASN4, body)
    assert isinstance(err, UpdateError)
    assert (err.action, err.code, err.subcode) == (RESET, code, subcode), err


def test_longer_than_any_bgp_message():
    (err,) = WireDecoder().decode(PEER, CAP_ASN4 | 8, bytes(70000))
    assert (err.action, err.code, err.subcode, err.data) == (RESET, 1, 2, b"\xff\xff")


def test_unrecognized_well_known_attribute_data_is_the_attribute():
    attribute = w.attr(99, b"xyz", flags=0x40)
    (err,) = WireDecoder().decode(PEER, CAP_ASN4, v4(ORIGIN, AS_PATH, NH, attribute))
    assert err.data == attribute and err.reason == "unrecognized well-known attribute 99"


def test_mp_error_data_is_the_attribute_capped():
    attribute = w.mp_reach(2, 1, bytes(12), V6_NLRI)
    (err,) = WireDecoder().decode(PEER, CAP_ASN4, w.update(attrs=[attribute, ORIGIN, AS_PATH]))
    assert err.data == attribute and err.family is V6
    huge = w.mp_reach(2, 1, bytes(12), w.nlri([f"2001:db8:{i:x}::/48" for i in range(2000)]))
    (err,) = WireDecoder().decode(PEER, CAP_ASN4 | 8, w.update(attrs=[huge]))
    assert len(err.data) == 4096 - 21 and huge.startswith(err.data)


def test_add_path_negotiated_but_not_sent_is_malformed():
    """Without path ids the octets do not parse as ADD-PATH NLRI: a session reset."""
    (err,) = WireDecoder().decode(PEER, CAP_ASN4 | CAP_ADDPATH_V4, v4(ORIGIN, AS_PATH, NH, nlri=w.nlri(["10.0.0.0/24"])))
    assert (err.action, err.subcode) == (RESET, 10)


def test_update_errors_are_not_cached_into_good_updates():
    """The attribute cache is keyed by the octets: a bad set never taints a good one."""
    d = WireDecoder()
    d.decode(PEER, CAP_ASN4, v4(w.attr(1, b"\0\0"), AS_PATH, NH))
    (good,) = d.decode(PEER, CAP_ASN4, v4(ORIGIN, AS_PATH, NH))
    assert [a.prefix for a in good.announced] == list(ROUTES)
    (good6,) = d.decode(PEER, CAP_ASN4, v6(ORIGIN, AS_PATH))
    bad6 = d.decode(PEER, CAP_ASN4, w.update(attrs=[w.attr(14, w.mp_reach(2, 1, ["2001:db8::1"], V6_NLRI)[3:],
                                                           flags=0xC0), ORIGIN, AS_PATH]))
    assert bad6[0].action is TAW and good6.announced
