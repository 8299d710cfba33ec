"""Packed community lists (`agent.core.communities`): to every reader they are the tuple of texts
they stand for; policy conditions and modifications work on them as on tuples."""

from __future__ import annotations

import gc
import pickle
import sys

import pytest

from agent.core.bgp import PathAttrs
from agent.core.communities import Communities, LargeCommunities
from agent.policy.conditions import set_condition
from agent.policy.verdict import Modifications
from agent.speaker.wire_values import community_list, large_list
from tests.factories import P, bgp

TEXTS = ("65001:7", "65535:65281")
RAW = bytes.fromhex("fde90007ffffff01")


def test_a_packed_list_is_the_tuple_of_its_texts():
    c = Communities(RAW)
    assert tuple(c) == TEXTS and list(c) == list(TEXTS) and len(c) == 2 and c
    assert c[0] == "65001:7" and c[-1] == "65535:65281" and c[:1] == ("65001:7",)
    assert "65001:7" in c and "65001:8" not in c
    assert c == TEXTS and TEXTS == c and not (c != TEXTS) and c != ("65001:7",)
    assert hash(c) == hash(TEXTS) and {TEXTS: 1}[c] == 1
    assert c + ("1:1",) == TEXTS + ("1:1",) and ("1:1",) + c == ("1:1",) + TEXTS
    assert repr(c) == repr(TEXTS) and c.values() == (0xFDE90007, 0xFFFFFF01)
    assert Communities.of_values([0xFDE90007, 0xFFFFFF01]) == c and Communities(RAW) == c
    assert not Communities(b"") and Communities(b"") == ()
    assert pickle.loads(pickle.dumps(c)) == c


def test_a_packed_list_is_one_object_the_size_of_its_octets():
    """A full table holds one per attribute set: no wrapper object around the octets (the
    collector's header is the only cost over a plain `bytes`: every heap type has one)."""
    for c in (Communities(RAW), LargeCommunities(bytes(12)), Communities.packed(RAW)):
        assert sys.getsizeof(c) <= sys.getsizeof(bytes(c)) + 16 and gc.get_referents(c) == [type(c)]
        assert c.raw.__class__ is bytes and c.raw == bytes(c)
    assert Communities(RAW) != RAW and RAW != Communities(RAW)  # (octets are not a list of texts)
    assert str(Communities(RAW)) == str(TEXTS) and f"{Communities(RAW)}" == str(TEXTS)


def test_large_communities_are_three_words_each_and_never_equal_a_standard_list():
    raw = bytes.fromhex("000111700000000100000002")
    large = LargeCommunities(raw)
    assert large == ("70000:1:2",) and len(large) == 1 and large.values() == (70000, 1, 2)
    assert LargeCommunities.of_values([(70000, 1, 2)]) == large
    assert large != Communities(raw) and Communities(raw) != large  # the same octets, another kind


def test_packed_lists_are_immutable_and_checked():
    c = Communities(RAW)
    with pytest.raises(AttributeError):
        c.raw = b""  # type: ignore[misc]
    with pytest.raises(ValueError, match="not a multiple of 4"):
        Communities(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="not a multiple of 12"):
        LargeCommunities(RAW)


def test_wire_values_are_sorted_and_large_ones_without_duplicates():
    assert community_list(bytes.fromhex("ffffff01fde90007ffffff01")) == ("65001:7", "65535:65281", "65535:65281")
    one, two = bytes.fromhex("000111700000000100000002"), bytes.fromhex("000000010000000200000003")
    assert large_list(one + two + one) == ("1:2:3", "70000:1:2")


def test_policy_conditions_and_modifications_read_packed_lists():
    attrs = bgp().bgp._replace(communities=Communities(RAW), large_communities=LargeCommunities.of_values([(7, 8, 9)]))
    prefix = P("198.51.100.0/24")
    assert set_condition("communities", "any", ["65535:65281", "1:1"])(prefix, None, attrs)
    assert set_condition("communities", "all", list(TEXTS))(prefix, None, attrs)
    assert not set_condition("communities", "none", ["65001:7"])(prefix, None, attrs)
    assert set_condition("large_communities", "any", ["7:8:9"])(prefix, None, attrs)
    assert Modifications(add_communities=("65001:7",)).apply(attrs) is attrs  # already there: unchanged
    added = Modifications(add_communities=("1:1",)).apply(attrs)
    assert added.communities == TEXTS + ("1:1",)


def test_path_attributes_with_packed_lists_equal_the_json_decoders():
    packed = PathAttrs(as_path=(65001,), communities=Communities(RAW), large_communities=LargeCommunities(b""))
    texts = PathAttrs(as_path=(65001,), communities=TEXTS)
    assert packed == texts and hash(packed) == hash(texts)
