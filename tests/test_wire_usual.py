"""The usual attribute block read straight-line (`wire_attrs.parse_usual`) gives what the general loop
(`wire_attrs.parse_general`) gives, and is taken for every block BIRD, FRR and GoBGP write.

Generated usual blocks (every optional attribute it reads, in type order, with or without the
Extended Length bit; ORIGIN without it) must take the fast path and equal the general loop's AttrInfo, interned into
the same `PathAttrs`; any mutation of them (a byte changed, cut, inserted) must either fall back
(None) or still equal the general loop; the blocks it must leave to the loop are listed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from agent.speaker import wire_values
from agent.speaker.wire_attrs import parse_general, parse_usual, parse_attributes
from testlab import bgpwire as w
from tests import test_wire_exabgp as cases

ASNS = st.integers(1, 0xFFFFFFFF)
OPTIONAL = {  # type -> strategy of its attribute, as the usual speakers write it
    3: st.sampled_from(["192.0.2.1", "10.77.0.1", "0.0.0.1", "127.0.0.1", "224.0.0.5"]).map(w.next_hop),
    4: st.integers(0, 0xFFFFFFFF).map(w.med),
    5: st.integers(0, 0xFFFFFFFF).map(w.local_pref),
    6: st.just(w.atomic_aggregate()),
    7: st.tuples(ASNS, st.just("192.0.2.9")).map(lambda a: w.aggregator(*a)),
    8: st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)), min_size=1, max_size=80).map(w.communities),
    16: st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=4)
          .map(lambda v: w.ext_communities([w.route_target(*x) for x in v])),
    32: st.lists(st.tuples(ASNS, ASNS, ASNS), min_size=1, max_size=30).map(w.large_communities),
}


def _extended(attr: bytes) -> bytes:
    """The same attribute with the Extended Length bit (a 2-octet length)."""
    if attr[0] & 0x10:
        return attr
    return bytes([attr[0] | 0x10, attr[1], 0, attr[2]]) + attr[3:]


@st.composite
def usual_blocks(draw) -> bytes:
    origin = w.origin(draw(st.integers(0, 2)))
    path = w.as_path(draw(st.lists(ASNS, min_size=1, max_size=70)))
    kinds = sorted(draw(st.sets(st.sampled_from(sorted(OPTIONAL)))))
    attrs = [path] + [draw(OPTIONAL[k]) for k in kinds]
    return origin + b"".join(_extended(a) if draw(st.booleans()) else a for a in attrs)


def both(block: bytes, start: int = 0):
    """(fast path, general loop), each with a fresh memo state and one shared intern table."""
    values: dict = {}
    wire_values.clear_memos()
    fast = parse_usual(block, start, values)
    wire_values.clear_memos()
    general, mp = parse_general(block, start, True, values)
    return fast, general, mp, values


@settings(max_examples=400, deadline=None)
@given(usual_blocks())
def test_a_usual_block_takes_the_fast_path_and_equals_the_general_loop(block):
    fast, general, mp, values = both(block)
    assert fast is not None
    assert mp is None and general.level == 0
    assert fast == general
    assert fast.attrs is general.attrs  # one interned set: the key is the same
    assert len(values) == 1
    assert parse_attributes(block, 0, True, values)[0] is not None


@settings(max_examples=300, deadline=None)
@given(usual_blocks(), st.data())
def test_a_usual_block_after_an_mp_attribute_is_read_from_its_offset(block, data):
    mp = w.mp_reach(2, 1, ["2001:db8::1"], w.prefix("2001:db8:1::/48"))
    fast, general, _, _ = both(mp + block, len(mp))
    assert fast is not None and fast == general


@settings(max_examples=1500, deadline=None)
@given(usual_blocks(), st.data())
def test_a_changed_block_falls_back_or_still_equals_the_general_loop(block, data):
    kind = data.draw(st.sampled_from(["set", "cut", "insert", "delete"]))
    at = data.draw(st.integers(0, len(block) - 1))
    if kind == "set":
        block = block[:at] + bytes([data.draw(st.integers(0, 255))]) + block[at + 1:]
    elif kind == "cut":
        block = block[:at]
    elif kind == "insert":
        block = block[:at] + bytes([data.draw(st.integers(0, 255))]) + block[at:]
    else:
        block = block[:at] + block[at + 1:]
    fast, general, mp, _ = both(block)
    if fast is not None:
        assert mp is None and fast == general


ORIGIN, PATH, HOP = w.origin(0), w.as_path([65001, 4200000000]), w.next_hop("192.0.2.1")
LEFT_TO_THE_LOOP = {
    "AS_SET": ORIGIN + w.as_path([(1, [65001, 65002])]) + HOP,
    "two segments": ORIGIN + w.as_path([(2, [65001]), (1, [65002])]) + HOP,
    "confederation": ORIGIN + w.as_path([(3, [65010]), (2, [65001])]) + HOP,
    "empty AS_PATH": ORIGIN + w.as_path([]) + HOP,
    "no AS_PATH": ORIGIN + HOP,
    "AS_PATH first": PATH + ORIGIN + HOP,
    "ORIGIN undefined": w.origin(3) + PATH + HOP,
    "ORIGIN with the Extended Length bit": _extended(ORIGIN) + PATH + HOP,
    "ORIGIN of 2 octets": w.attr(1, b"\0\0") + PATH + HOP,
    "AS_PATH flags": ORIGIN + w.attr(2, w.as_path_value([65001]), 0xC0) + HOP,
    "count lies": ORIGIN + w.attr(2, bytes([2, 2]) + (65001).to_bytes(4, "big")) + HOP,
    "NEXT_HOP of 5 octets": ORIGIN + PATH + w.attr(3, bytes(5)),
    "out of order": ORIGIN + PATH + w.med(5) + HOP,
    "repeated": ORIGIN + PATH + HOP + w.communities(["1:1"]) + w.communities(["1:2"]),
    "NEXT_HOP twice": ORIGIN + PATH + HOP + w.next_hop("192.0.2.2"),
    "partial bit": ORIGIN + PATH + HOP + w.attr(8, bytes(4), 0xE0),
    "unknown optional": ORIGIN + PATH + HOP + w.attr(99, b"x"),
    "ORIGINATOR_ID": ORIGIN + PATH + HOP + w.originator_id("192.0.2.7"),
    "CLUSTER_LIST": ORIGIN + PATH + HOP + w.cluster_list(["192.0.2.7"]),
    "MP_REACH_NLRI": ORIGIN + PATH + w.mp_reach(2, 1, ["2001:db8::1"], w.prefix("2001:db8:1::/48")),
    "COMMUNITIES of 6 octets": ORIGIN + PATH + HOP + w.attr(8, bytes(6)),
    "LARGE_COMMUNITY of 8 octets": ORIGIN + PATH + HOP + w.attr(32, bytes(8)),
    "EXTENDED_COMMUNITIES of 4 octets": ORIGIN + PATH + HOP + w.attr(16, bytes(4)),
    "MULTI_EXIT_DISC of 5 octets": ORIGIN + PATH + HOP + w.attr(4, bytes(5)),
    "LOCAL_PREF of 3 octets": ORIGIN + PATH + HOP + w.attr(5, bytes(3)),
    "empty COMMUNITIES": ORIGIN + PATH + HOP + w.attr(8, b""),
    "AGGREGATOR of 6 octets": ORIGIN + PATH + HOP + w.attr(7, bytes(6)),
    "ATOMIC_AGGREGATE with a value": ORIGIN + PATH + HOP + w.attr(6, b"\1"),
    "overrun": ORIGIN + PATH + HOP + w.attr(8, bytes(4), length=9),
    "header cut": ORIGIN + PATH + HOP + b"\xc0",
}


@pytest.mark.parametrize("case", sorted(LEFT_TO_THE_LOOP))
def test_other_blocks_are_left_to_the_general_loop(case):
    block = LEFT_TO_THE_LOOP[case]
    assert parse_usual(block, 0, {}) is None
    assert parse_attributes(block, 0, True, {}) == parse_general(block, 0, True, {})


def test_a_two_octet_session_is_left_to_the_general_loop():
    block = ORIGIN + w.as_path([65001, 65002], asn4=False) + HOP
    assert parse_attributes(block, 0, False, {}) == parse_general(block, 0, False, {})


def test_every_captured_bird_block_of_a_4_octet_session_is_usual():
    """BIRD's attribute blocks (IPv6: after the MP attribute BIRD writes first, where the decoder
    starts reading them) all take the fast path."""
    taken = set()
    for caps, body in cases.CAPTURED:
        data = bytes.fromhex(body)
        wl = int.from_bytes(data[:2], "big")
        al = int.from_bytes(data[wl + 2:wl + 4], "big")
        block = data[wl + 4:wl + 4 + al]
        if not al or not int(caps) & 1:
            continue
        start = 0
        if block[1] in (14, 15):  # MP first: the rest is read from its end (`wire.WireDecoder._decode`)
            start = (4 + int.from_bytes(block[2:4], "big")) if block[0] & 0x10 else 3 + block[2]
            if start == len(block):
                continue  # End-of-RIB, or withdrawals only
        fast, general, mp, _ = both(block, start)
        assert mp is None and fast is not None and fast == general, body
        taken.add(block[start:])
    assert len(taken) >= 5
