"""The wire codec (`agent.speaker.wire`, `wire_attrs`) on hand-built UPDATEs: one table row per
attribute and per NLRI shape, 2- and 4-octet sessions, the RFC 6793 merge, MP_REACH/MP_UNREACH
for both families, End-of-RIB, ADD-PATH, extended-message lengths; and the ``raw-update`` line
through `agent.speaker.codec.Decoder` (attribute sets shared, malformed lines refused)."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from agent.core.bgp import (
    EndOfRib, Family, PathAttrs, RouteUpdate, UpdateAction, UpdateError,
)
from agent.core.model import BgpOrigin, Prefix
from agent.speaker import wire_attrs, wire_values
from agent.speaker.codec import CodecError, Decoder
from agent.speaker.wire_nlri import nlri_entries, prefixes
from agent.speaker.wire import (
    CAP_ADDPATH_V4, CAP_ADDPATH_V6, CAP_ASN4, CAP_EXTENDED, WireDecoder,
)
from testlab import bgpwire as w

PEER = "192.0.2.1"
V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
P = Prefix.parse
BASE = [w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.1")]


def dec(body: bytes, caps: int = CAP_ASN4):
    return WireDecoder().decode(PEER, caps, body)


def routes(body: bytes, caps: int = CAP_ASN4) -> RouteUpdate:
    (ev,) = dec(body, caps)
    assert isinstance(ev, RouteUpdate), ev
    return ev


def attrs_of(*extra: bytes, caps: int = CAP_ASN4, base=None) -> PathAttrs:
    ev = routes(w.update(attrs=[*(BASE if base is None else base), *extra], nlri=w.nlri(["10.0.0.0/24"])), caps)
    return ev.announced[0].attrs


# ---- attributes -------------------------------------------------------------------------------

ATTRIBUTE_TABLE = [
    ("origin igp", [], PathAttrs(as_path=(65001,))),
    ("origin egp", [w.origin(1), w.as_path([65001]), w.next_hop("192.0.2.1")],
     PathAttrs(origin=BgpOrigin.EGP, as_path=(65001,))),
    ("origin incomplete", [w.origin(2), w.as_path([65001]), w.next_hop("192.0.2.1")],
     PathAttrs(origin=BgpOrigin.INCOMPLETE, as_path=(65001,))),
    ("empty as-path (iBGP)", [w.origin(0), w.as_path([]), w.next_hop("192.0.2.1")], PathAttrs()),
    ("as-path 4-octet", [w.origin(0), w.as_path([65001, 4_200_000_000]), w.next_hop("192.0.2.1")],
     PathAttrs(as_path=(65001, 4_200_000_000))),
    ("as-path sequence and set", [w.origin(0), w.as_path([(2, [65001, 65002]), (1, [65010, 65011])]),
                                  w.next_hop("192.0.2.1")],
     PathAttrs(as_path=(65001, 65002, 65010, 65011), as_set=True)),
    ("confederation segments", [w.origin(0), w.as_path([(3, [64512, 64513]), (2, [65001]), (4, [64514])]),
                                w.next_hop("192.0.2.1")],
     PathAttrs(as_path=(65001,), confed_path=(64512, 64513, 64514))),
    ("med", [w.med(0)], PathAttrs(as_path=(65001,), med=0)),
    ("med max", [w.med(0xFFFFFFFF)], PathAttrs(as_path=(65001,), med=0xFFFFFFFF)),
    ("local-pref", [w.local_pref(250)], PathAttrs(as_path=(65001,), local_pref=250)),
    ("atomic aggregate + aggregator", [w.atomic_aggregate(), w.aggregator(65001, "192.0.2.9")],
     PathAttrs(as_path=(65001,), atomic_aggregate=True)),
    ("communities sorted, duplicates kept", [w.communities(["65000:2", "65000:1", "65000:2", "1:65535"])],
     PathAttrs(as_path=(65001,), communities=("1:65535", "65000:1", "65000:2", "65000:2"))),
    ("large communities sorted, duplicates removed (RFC 8092)",
     [w.large_communities(["65000:2:1", "65000:1:9", "65000:2:1", "4200000000:0:0"])],
     PathAttrs(as_path=(65001,), large_communities=("65000:1:9", "65000:2:1", "4200000000:0:0"))),
    ("extended communities as text", [w.ext_communities([
        bytes.fromhex("0002fde800000064"),   # target:65000:100
        bytes.fromhex("0102c000020900 07"),  # target:192.0.2.9:7
        bytes.fromhex("0202fa56ea0000 05"),  # target:4200000000:5
        bytes.fromhex("0003fde8c0000201"),   # origin:65000:192.0.2.1
        bytes.fromhex("0103c000020100 07"),  # origin:192.0.2.1:7
        bytes.fromhex("030c000000000008"),   # encapsulation: opaque
        bytes.fromhex("4002fde800000001"),   # non-transitive route target
    ])],
     PathAttrs(as_path=(65001,), extended_communities=(
         "target:65000:100", "origin:65000:192.0.2.1", "target:192.0.2.9:7", "origin:192.0.2.1:7",
         "target:4200000000:5", "0x30c000000000008", "target:65000:1"))),
    ("originator id and cluster list", [w.originator_id("10.9.9.9"), w.cluster_list(["10.0.0.2", "10.0.0.1"])],
     PathAttrs(as_path=(65001,), originator_id="10.9.9.9", cluster_list=("10.0.0.2", "10.0.0.1"))),
    ("unknown optional transitive ignored", [w.attr(99, b"\x01\x02", flags=0xC0)], PathAttrs(as_path=(65001,))),
    ("unknown optional non-transitive ignored", [w.attr(200, b"x" * 300, flags=0x80)], PathAttrs(as_path=(65001,))),
    ("AIGP / PMSI (recognised by ExaBGP only) ignored", [w.attr(26, bytes(11), flags=0x80),
                                                         w.attr(22, bytes(5), flags=0xC0)],
     PathAttrs(as_path=(65001,))),
    ("IPv6 extended communities validated, ignored", [w.attr(25, bytes(20))], PathAttrs(as_path=(65001,))),
    ("extended length flag on a short attribute", [w.attr(4, b"\0\0\0\x07", extended=True)],
     PathAttrs(as_path=(65001,), med=7)),
    ("partial bit on an optional attribute", [w.attr(8, b"\xfd\xe8\0\x01", flags=0xE0)],
     PathAttrs(as_path=(65001,), communities=("65000:1",))),
]


@pytest.mark.parametrize("case, extra, expected", ATTRIBUTE_TABLE, ids=[c[0] for c in ATTRIBUTE_TABLE])
def test_attributes(case, extra, expected):
    base = extra if extra and extra[0][1] == 1 else None
    got = attrs_of(*([] if base else extra), base=base)
    assert got == expected


def test_two_octet_session_as_path_and_aggregator():
    body = w.update(attrs=[w.origin(0), w.as_path([65001, 65002], asn4=False), w.next_hop("192.0.2.1"),
                           w.aggregator(65002, "192.0.2.9", asn4=False)], nlri=w.nlri(["10.0.0.0/24"]))
    (ev,) = dec(body, caps=0)
    assert ev.announced[0].attrs == PathAttrs(as_path=(65001, 65002))
    # the same octets read on a 4-octet session: a malformed AS_PATH (treat-as-withdraw)
    err, ev4 = dec(body, caps=CAP_ASN4)
    assert (err.action, err.reason.split(";")[0]) == (UpdateAction.TREAT_AS_WITHDRAW, "malformed AS_PATH")
    assert ev4 == RouteUpdate(PEER, V4, (), (P("10.0.0.0/24"),))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4), st.binary(max_size=24)), max_size=3),
       st.binary(max_size=3))
def test_as_path_of_one_sequence_read_at_once_as_the_segment_loop_reads_it(segs, tail):
    """`wire_values.as_path4` reads a path of one AS_SEQUENCE (most paths) without the segment
    loop: the same value for every octet string, malformed ones (False) included."""
    raw = b"".join(bytes([kind, count]) + data[:4 * count] for kind, count, data in segs) + tail
    if raw:
        loop = wire_values.segments(raw, 0, len(raw), 4)
        assert wire_values.as_path4(raw) == (False if loop is None else (loop, wire_values.flatten(loop)))


AS4_TABLE = [
    # (AS_PATH on the 2-octet wire, AS4_PATH, extra attributes, expected as_path)
    ("AS_TRANS replaced", [65001, 23456], [4_200_000_000], [], (65001, 4_200_000_000)),
    ("leading ASes kept", [65001, 65002, 23456, 23456], [4_200_000_000, 4_200_000_001], [],
     (65001, 65002, 4_200_000_000, 4_200_000_001)),
    ("AS4_PATH longer: ignored", [65001], [4_200_000_000, 4_200_000_001], [], (65001,)),
    ("aggregator with a real AS beside AS4_AGGREGATOR: AS4_PATH ignored", [65001, 23456], [4_200_000_000],
     [w.aggregator(65009, "192.0.2.9", asn4=False), w.as4_aggregator(4_200_000_009, "192.0.2.9")],
     (65001, 23456)),
    ("aggregator AS_TRANS: merged", [65001, 23456], [4_200_000_000],
     [w.aggregator(23456, "192.0.2.9", asn4=False), w.as4_aggregator(4_200_000_009, "192.0.2.9")],
     (65001, 4_200_000_000)),
    ("confederation segments of AS4_PATH dropped", [65001, 23456], [(3, [64512]), (2, [4_200_000_000])], [],
     (65001, 4_200_000_000)),
]


@pytest.mark.parametrize("case, path2, path4, extra, expected", AS4_TABLE, ids=[c[0] for c in AS4_TABLE])
def test_as4_path_merge_on_two_octet_sessions(case, path2, path4, extra, expected):
    body = w.update(attrs=[w.origin(0), w.as_path(path2, asn4=False), w.next_hop("192.0.2.1"),
                           w.as4_path(path4), *extra], nlri=w.nlri(["10.0.0.0/24"]))
    (ev,) = dec(body, caps=0)
    assert ev.announced[0].attrs.as_path == expected


def test_as4_path_ignored_on_four_octet_sessions():
    body = w.update(attrs=[*BASE, w.as4_path([4_200_000_000, 4_200_000_001])], nlri=w.nlri(["10.0.0.0/24"]))
    assert routes(body).announced[0].attrs.as_path == (65001,)


# ---- NLRI, families ---------------------------------------------------------------------------

def test_ipv4_nlri_of_every_length():
    texts = ["0.0.0.0/0", "128.0.0.0/1", "10.0.0.0/8", "10.128.0.0/9", "10.1.0.0/16", "10.1.2.0/23",
             "10.1.2.0/24", "10.1.2.128/25", "10.1.2.3/32"]
    ev = routes(w.update(attrs=BASE, nlri=w.nlri(texts)))
    assert [str(a.prefix) for a in ev.announced] == texts
    assert all(a.next_hop == "192.0.2.1" and a.link_local is None for a in ev.announced)


def test_many_prefixes_of_one_length_and_mixed():
    same = [f"10.{i >> 8}.{i & 255}.0/24" for i in range(500)]
    mixed = [f"10.{i >> 8}.{i & 255}.0/24" if i % 3 else f"11.{i}.0.0/16" for i in range(200)]
    thirty = [f"10.0.{i}.{4 * j}/30" for i in range(20) for j in range(10)]
    for texts in (same, mixed, thirty):
        data = w.nlri(texts)
        assert [str(p) for p in prefixes(data, 0, len(data), False)] == texts


def test_host_bits_are_cleared():
    body = w.update(attrs=BASE, nlri=w.prefix("10.1.2.0/23", host_bits=0x01) + w.prefix("10.0.0.0/20", host_bits=0x0F))
    assert [a.prefix for a in routes(body).announced] == [P("10.1.2.0/23"), P("10.0.0.0/20")]


def test_withdrawn_and_announced_in_one_update():
    body = w.update(withdrawn=w.nlri(["10.9.0.0/16", "10.8.0.0/24"]), attrs=BASE, nlri=w.nlri(["10.0.0.0/24"]))
    ev = routes(body)
    assert ev.withdrawn == (P("10.9.0.0/16"), P("10.8.0.0/24"))
    assert [a.prefix for a in ev.announced] == [P("10.0.0.0/24")]


def test_withdraw_only_update_needs_no_attributes():
    assert dec(w.update(withdrawn=w.nlri(["10.9.0.0/16"]))) == (RouteUpdate(PEER, V4, (), (P("10.9.0.0/16"),)),)


def test_mp_reach_ipv6_global_and_link_local():
    attrs = [w.mp_reach(2, 1, ["2001:db8::1", "fe80::1"], w.nlri(["2001:db8:1::/48", "2001:db8:2::/64"])),
             w.origin(0), w.as_path([65001])]
    ev = routes(w.update(attrs=attrs))
    assert ev.family is V6
    assert [(str(a.prefix), a.next_hop, a.link_local) for a in ev.announced] == [
        ("2001:db8:1::/48", "2001:db8::1", "fe80::1"), ("2001:db8:2::/64", "2001:db8::1", "fe80::1")]


@pytest.mark.parametrize("hops, next_hop, link_local", [
    (["fe80::1"], "fe80::1", None),                         # link-local only: kept (RFC 2545)
    (["2001:db8::1"], "2001:db8::1", None),
    (["2001:db8::1", "::"], "2001:db8::1", None),           # a zero link-local part is no next hop
    (["::", "fe80::1"], "fe80::1", None),                   # a zero global part: the link-local alone
    (["fe80::1", "2001:db8::1"], "2001:db8::1", "fe80::1"),  # the wrong order
])
def test_mp_reach_ipv6_next_hop_shapes(hops, next_hop, link_local):
    ev = routes(w.update(attrs=[w.mp_reach(2, 1, hops, w.nlri(["2001:db8:1::/48"])), w.origin(0), w.as_path([])]))
    assert (ev.announced[0].next_hop, ev.announced[0].link_local) == (next_hop, link_local)


def test_mp_reach_ipv4_and_classic_nlri_together():
    body = w.update(attrs=[*BASE, w.mp_reach(1, 1, ["192.0.2.7"], w.nlri(["10.7.0.0/16"]))], nlri=w.nlri(["10.0.0.0/24"]))
    ev = routes(body)
    assert [(str(a.prefix), a.next_hop) for a in ev.announced] == [("10.0.0.0/24", "192.0.2.1"),
                                                                   ("10.7.0.0/16", "192.0.2.7")]


def test_mp_unreach_both_families_and_classic_withdrawn():
    body = w.update(withdrawn=w.nlri(["10.9.0.0/16"]), attrs=[w.mp_unreach(2, 1, w.nlri(["2001:db8::/32"]))])
    assert dec(body) == (RouteUpdate(PEER, V4, (), (P("10.9.0.0/16"),)),
                         RouteUpdate(PEER, V6, (), (P("2001:db8::/32"),)))


def test_mp_attribute_not_first_and_after_others():
    body = w.update(attrs=[w.origin(0), w.as_path([65001]), w.mp_reach(2, 1, ["2001:db8::1"], w.nlri(["2001:db8::/32"]))])
    assert [a.prefix for a in routes(body).announced] == [P("2001:db8::/32")]


def test_other_families_are_ignored():
    vpn = w.mp_reach(1, 128, bytes(12), bytes([88]) + bytes(11))
    flow = w.mp_unreach(1, 133, b"\x05\x01\x18\x0a\x00\x00")
    assert dec(w.update(attrs=[vpn, w.origin(0), w.as_path([])])) == ()
    assert dec(w.update(attrs=[flow])) == ()
    assert dec(w.eor(25, 70)) == ()  # End-of-RIB of a family the agent does not handle


@pytest.mark.parametrize("body, family", [
    (w.eor(), V4),
    (w.eor(2, 1), V6),
    (w.eor(1, 1), V4),  # the MP_UNREACH form of the IPv4 marker
    (w.update(attrs=[w.attr(15, b"\0\x02\x01", extended=True)]), V6),  # extended length flag
])
def test_end_of_rib(body, family):
    assert dec(body) == (EndOfRib(PEER, family),)


def test_mp_unreach_without_prefixes_beside_attributes_is_no_end_of_rib():
    assert dec(w.update(attrs=[w.mp_unreach(2, 1), w.origin(0)])) == ()


def test_add_path_ids_kept_beside_the_prefixes():
    data = w.nlri(["10.0.0.0/24", "10.0.0.0/24", "10.1.0.0/16"], [1, 2, 7])
    assert nlri_entries(data, 0, len(data), False, True) == [(1, P("10.0.0.0/24")), (2, P("10.0.0.0/24")),
                                                             (7, P("10.1.0.0/16"))]
    ev = routes(w.update(withdrawn=w.nlri(["10.5.0.0/16"], [3]), attrs=BASE, nlri=data),
                CAP_ASN4 | CAP_ADDPATH_V4)
    assert [a.prefix for a in ev.announced] == [P("10.0.0.0/24"), P("10.0.0.0/24"), P("10.1.0.0/16")]
    assert ev.path_ids == (1, 2, 7)
    assert ev.withdrawn == (P("10.5.0.0/16"),) and ev.withdrawn_path_ids == (3,)
    v6 = w.nlri(["2001:db8::/32", "2001:db8::/32"], [9, 0])
    ev6 = routes(w.update(attrs=[w.mp_reach(2, 1, ["2001:db8::1", "fe80::1"], v6), w.origin(0), w.as_path([]),
                                 w.mp_unreach(2, 1, w.nlri(["2001:db8:5::/48"], [4]))]),
                 CAP_ASN4 | CAP_ADDPATH_V6)
    assert [(a.prefix, a.next_hop, a.link_local) for a in ev6.announced] == [
        (P("2001:db8::/32"), "2001:db8::1", "fe80::1")] * 2
    assert ev6.path_ids == (9, 0) and ev6.withdrawn_path_ids == (4,)


@pytest.mark.parametrize("v6, plen", [(False, 24), (False, 0), (False, 32), (True, 48), (True, 128), (True, 61)])
def test_add_path_field_of_one_length_read_by_columns(v6, plen):
    """A big ADD-PATH field of one prefix length takes the column path: same entries as one by one."""
    import ipaddress
    net = ipaddress.ip_network("2001:db8::/32" if v6 else "10.0.0.0/8")
    nets = [str(n) for n, _ in zip(net.subnets(new_prefix=max(plen, net.prefixlen)), range(40))] if plen >= 8 \
        else ["0.0.0.0/0"] * 40
    ids = [(i * 7919) % 2**32 for i in range(len(nets))]
    data = w.nlri(nets, ids)
    slow = [(i, P(n)) for i, n in zip(ids, nets)]
    assert nlri_entries(data, 0, len(data), v6, True) == slow
    assert nlri_entries(data + b"\0", 0, len(data) + 1, v6, True) is None  # a short last entry


def test_add_path_one_prefix_fast_path_and_mp_ipv4():
    """The one-prefix shortcut is not taken with ADD-PATH; IPv4 in MP_REACH keeps its ids too."""
    ev = routes(w.update(attrs=BASE, nlri=w.nlri(["10.0.0.0/24"], [5])), CAP_ASN4 | CAP_ADDPATH_V4)
    assert [a.prefix for a in ev.announced] == [P("10.0.0.0/24")] and ev.path_ids == (5,)
    body = w.update(attrs=[*BASE, w.mp_reach(1, 1, ["192.0.2.7"], w.nlri(["10.7.0.0/16"], [8]))],
                    nlri=w.nlri(["10.0.0.0/24"], [6]))
    ev = routes(body, CAP_ASN4 | CAP_ADDPATH_V4)
    assert [(a.prefix, a.next_hop) for a in ev.announced] == [(P("10.0.0.0/24"), "192.0.2.1"),
                                                               (P("10.7.0.0/16"), "192.0.2.7")]
    assert ev.path_ids == (6, 8) and ev.withdrawn_path_ids == ()
    plain = routes(w.update(attrs=BASE, nlri=w.nlri(["10.0.0.0/24"])), CAP_ASN4)
    assert plain.path_ids is None and plain.withdrawn_path_ids is None


def test_add_path_treat_as_withdraw_keeps_the_ids():
    """A malformed attribute withdraws every announced path: by (prefix, path id)."""
    body = w.update(attrs=[w.origin(0), w.next_hop("192.0.2.1")], nlri=w.nlri(["10.0.0.0/24"], [2]))  # no AS_PATH
    evs = WireDecoder().decode(PEER, CAP_ASN4 | CAP_ADDPATH_V4, body)
    (ev,) = [e for e in evs if isinstance(e, RouteUpdate)]
    assert ev.announced == () and ev.withdrawn == (P("10.0.0.0/24"),) and ev.withdrawn_path_ids == (2,)


def test_add_path_only_where_negotiated():
    """ADD-PATH for IPv6 only: the IPv4 NLRI field has no path ids."""
    body = w.update(attrs=BASE, nlri=w.nlri(["10.0.0.0/24"]))
    assert [a.prefix for a in routes(body, CAP_ASN4 | CAP_ADDPATH_V6).announced] == [P("10.0.0.0/24")]


def test_extended_message_lengths():
    many = [f"10.{i >> 8}.{i & 255}.0/24" for i in range(3000)]  # 12,000 octets of NLRI
    body = w.update(attrs=BASE, nlri=w.nlri(many))
    assert len(routes(body, CAP_ASN4 | CAP_EXTENDED).announced) == 3000
    (err,) = dec(body, CAP_ASN4)
    assert (err.action, err.code, err.subcode) == (UpdateAction.SESSION_RESET, 1, 2)
    assert err.data == (len(body) + 19).to_bytes(2, "big")
    fits = w.update(attrs=BASE, nlri=w.nlri(many[:1000]))  # 4,000 octets: no capability needed
    assert len(fits) + 19 <= 4096 and len(routes(fits).announced) == 1000
    big_attr = w.update(attrs=[*BASE, w.attr(99, bytes(5000), flags=0xC0)], nlri=w.nlri(["10.0.0.0/24"]))
    assert len(routes(big_attr, CAP_ASN4 | CAP_EXTENDED).announced) == 1


# ---- sharing, the codec line --------------------------------------------------------------------

def test_attribute_sets_shared_within_and_across_updates():
    d = WireDecoder()
    one = d.decode(PEER, 1, w.update(attrs=BASE, nlri=w.nlri(["10.0.0.0/24", "10.0.1.0/24"])))[0]
    other_nh = d.decode(PEER, 1, w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.2")],
                                          nlri=w.nlri(["10.0.2.0/24"])))[0]
    reordered = d.decode(PEER, 1, w.update(attrs=[w.next_hop("192.0.2.3"), w.as_path([65001]), w.origin(0)],
                                           nlri=w.nlri(["10.0.3.0/24"])))[0]
    v6 = d.decode(PEER, 1, w.update(attrs=[w.mp_reach(2, 1, ["2001:db8::1"], w.nlri(["2001:db8::/32"])),
                                           w.origin(0), w.as_path([65001])]))[0]
    objs = {id(a.attrs) for ev in (one, other_nh, reordered, v6) for a in ev.announced}
    assert len(objs) == 1


def test_path_attrs_builder_equals_the_constructor():
    values = dict(origin=BgpOrigin.EGP, as_path=(1, 2), as_set=True, med=3, local_pref=4, communities=("1:2",),
                  large_communities=("1:2:3",), extended_communities=("x",), atomic_aggregate=True,
                  originator_id="1.2.3.4", cluster_list=("5.6.7.8",), confed_path=(9,))
    assert list(PathAttrs._fields) == list(values)
    built = wire_attrs.new_path_attrs(tuple(values.values()))
    assert built == PathAttrs(**values) and hash(built) == hash(PathAttrs(**values))
    assert type(built) is PathAttrs and built.med == 3
    with pytest.raises(AttributeError):
        built.med = 5


def test_raw_update_line_through_the_codec():
    body = w.update(attrs=BASE, nlri=w.nlri(["10.0.0.0/24"]))
    d = Decoder()
    for line in (f"raw-update 192.0.2.1 1 {body.hex()}\n".encode(), f"raw-update 192.0.2.1 1 {body.hex()}",
                 f"raw-update 192.0.2.1 1 {body.hex().upper()}\n".encode()):
        (ev,) = d.decode(line)
        assert ev.peer == "192.0.2.1" and ev.announced[0].prefix == P("10.0.0.0/24")
    (eor,) = d.decode(b"raw-update fd00::0001 5 00000000\n")
    assert eor == EndOfRib("fd00::1", V4)


@pytest.mark.parametrize("line", [
    b"raw-update 192.0.2.1 1\n", b"raw-update 192.0.2.1 1 0000 extra\n", b"raw-update 192.0.2.1 x 00000000\n",
    b"raw-update 192.0.2.1 1 0000000\n", b"raw-update 192.0.2.1 1 zz000000\n", b"raw-update not-an-ip 1 00000000\n",
])
def test_malformed_raw_update_lines_are_codec_errors(line):
    with pytest.raises(CodecError):
        Decoder().decode(line)


def test_malformed_body_in_a_good_line_is_an_update_error():
    (err,) = Decoder().decode(b"raw-update 192.0.2.1 1 0001\n")
    assert isinstance(err, UpdateError) and err.action is UpdateAction.SESSION_RESET


def test_caches_are_bounded():
    d = WireDecoder()
    d.CACHE_SIZE = 50
    for i in range(400):
        d.decode(PEER, 1, w.update(attrs=[*BASE, w.med(i)], nlri=w.nlri(["10.0.0.0/24"])))
        d.decode(PEER, 1, w.update(attrs=[w.mp_reach(2, 1, [f"2001:db8::{i + 1:x}"], w.nlri(["2001:db8::/32"])),
                                          w.origin(0), w.as_path([])]))
    assert len(d._values) <= 50 and all(len(c) <= 50 for c in d._infos) and len(d._nexthops) <= 50
