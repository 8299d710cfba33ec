"""The two shapes of a candidate (`agent.core.candidate`): a BGP candidate holds its path
attributes as its own fields and shares one `PeerIdentity` per peer, and still reads, compares,
copies and replaces like a candidate with a separate `BgpAttrs`."""

import copy
import gc
import importlib
import pickle
import sys

import pytest

from agent.core.model import (
    BgpAttrs, BgpCandidate, BgpOrigin, Candidate, NextHop, Origin, PeerIdentity, RouteType, SourceKind,
    nexthops,
)
from agent.core.bestpath import select
from agent.core.candidate import MARK_SHIFT, Form, form
from agent.core.communities import Communities, LargeCommunities
from agent.core.bgp import PathAttrs
from agent.policy.verdict import NO_MODS, Modifications

peer_mod = importlib.import_module("agent.import.peer")
ImportPeer, PeerState = peer_mod.ImportPeer, peer_mod.PeerState

ORIGIN = Origin(SourceKind.EBGP, "192.0.2.1")
HOPS = nexthops(NextHop("192.0.2.1"))
ATTRS = BgpAttrs("192.0.2.1", 65001, "1.1.1.1", True, local_pref=100, as_path=(65001, 65002),
                 origin=BgpOrigin.EGP, med=7, communities=("65001:1",), large_communities=("65001:1:2",))


def test_a_candidate_given_attributes_is_a_bgp_candidate_holding_them():
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS, metric=30, path_id=4)
    assert c.__class__ is BgpCandidate and isinstance(c, Candidate) and c.is_bgp
    assert (c.origin, c.distance, c.nexthops, c.type, c.metric, c.path_id) == (ORIGIN, 20, HOPS, RouteType.UNICAST, 30, 4)
    assert c.bgp == ATTRS and c.bgp.origin is BgpOrigin.EGP  # the BGP ORIGIN, as a BgpAttrs has it
    assert (c.local_pref, c.as_path, c.bgp_origin, c.med, c.communities, c.large_communities) == \
        (100, (65001, 65002), BgpOrigin.EGP, 7, ("65001:1",), ("65001:1:2",))
    assert (c.peer_address, c.peer_as, c.router_id, c.ebgp, c.neighbor_as) == ("192.0.2.1", 65001, "1.1.1.1", True, 65001)
    assert c.describe() == "via 192.0.2.1"
    # kept packed, in plain bytes (no object of their own beyond the octets), read as before
    assert c.path == bytes.fromhex("0000fde90000fdea") and c.path_length == 2
    assert c.comms == ("65001:1",)  # (texts in, as the JSON path gives them: kept as given)
    plain = Candidate(ORIGIN, 1, HOPS)
    assert plain.__class__ is Candidate and not plain.is_bgp and plain.bgp is None


def test_one_peer_identity_is_shared_and_equality_is_by_value():
    a = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    b = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(med=7))
    assert a == b and hash(a) == hash(b) and a.peer is b.peer
    assert a.peer == PeerIdentity("192.0.2.1", 65001, "1.1.1.1", True)
    assert a != Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(med=8))
    assert a != Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(router_id="2.2.2.2"))
    assert a != Candidate(ORIGIN, 20, HOPS)  # the other shape never equals


def test_replace_copy_pickle_and_repr():
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    assert c._replace(path_id=2).path_id == 2 and c._replace(path_id=2).bgp == ATTRS
    assert c._replace(med=3).bgp == ATTRS._replace(med=3)
    assert c._replace(bgp=ATTRS._replace(local_pref=50)).local_pref == 50
    assert c._replace(bgp=None) == Candidate(ORIGIN, 20, HOPS)
    with pytest.raises(ValueError):
        c._replace(peer_as=1)  # a peer's values are one shared object, not fields
    assert copy.copy(c) == c and pickle.loads(pickle.dumps(c)) == c
    assert c._asdict()["bgp_origin"] is BgpOrigin.EGP and "med=7" in repr(c)
    assert BgpCandidate._make(tuple(c)) == c
    with pytest.raises(TypeError):
        BgpCandidate(*tuple(c)[:7])


def test_a_bgp_candidate_is_one_object_smaller_than_a_candidate_and_its_attributes():
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    old = sys.getsizeof(tuple.__new__(Candidate, (ORIGIN, 20, HOPS, RouteType.UNICAST, ATTRS, None, None))) \
        + sys.getsizeof(ATTRS)
    assert gc.is_tracked(c) and sys.getsizeof(c) <= old - 64  # (one object header and collector header fewer, and the peer shared)


def test_best_path_reads_the_fields_of_both_shapes():
    ibgp = Origin(SourceKind.IBGP, "10.0.0.2")
    one = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    two = Candidate(ibgp, 20, nexthops(NextHop("10.0.0.2")),
                    bgp=ATTRS._replace(peer_address="10.0.0.2", ebgp=False, origin=BgpOrigin.IGP))
    assert select([one, two]).winners == (two,)  # IGP < EGP
    assert select([one, two._replace(bgp_origin=BgpOrigin.INCOMPLETE)]).winners == (one,)
    static = Candidate(Origin(SourceKind.STATIC, "cfg"), 20, HOPS)
    assert select([one, static]).winners == (static,)  # source kind at equal distance


def test_the_import_stage_builds_the_same_candidate_from_the_codec_record_and_from_attributes():
    st = PeerState(ImportPeer("192.0.2.1", 65001, True, router_id="1.1.1.1"))
    rec = PathAttrs(origin=BgpOrigin.EGP, as_path=(65001, 65002), med=7, local_pref=500,
                    communities=("65001:1",), large_communities=("65001:1:2",))
    from_record = st.candidate("192.0.2.1", rec, NO_MODS)
    from_attrs = st.candidate("192.0.2.1", ATTRS._replace(local_pref=500), NO_MODS)
    assert from_record.__class__ is BgpCandidate and from_record == from_attrs
    assert from_record.local_pref == 100  # eBGP: LOCAL_PREF is ours
    modded = st.candidate("192.0.2.1", rec, Modifications(local_pref=300, add_communities=("65000:9",)))
    assert modded.local_pref == 300 and modded.communities == ("65001:1", "65000:9") and modded.med == 7


def test_the_codecs_lists_are_kept_as_plain_octets_and_read_back_as_lists():
    comms, large = Communities.of_values([65001 << 16 | 1, 65001 << 16 | 7]), LargeCommunities.of_values([(65001, 1, 2)])
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(communities=comms, large_communities=large,
                                                        as_path=(4_200_000_001, 65001)))
    # one bytes: the AS path's octets, then the communities', then the large communities'; one
    # field marks where the lists are: where the communities start, plus the large ones' length
    # shifted (a set without large communities: a small int, a shared object)
    assert c.path == bytes.fromhex("fa56ea010000fde9") + comms + large and c.path.__class__ is bytes
    assert (c.comms, c.large) == (8, 16) and c.marks == 8 + (12 << MARK_SHIFT) and len(c) == 10
    other = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(communities=comms, large_communities=large,
                                                         as_path=(1, 2), med=5))
    assert other.marks == c.marks and other.marks is c.marks  # (shared, also beyond the small ints)
    no_large = c._replace(large_communities=())
    assert no_large.marks == 8 and no_large.marks is c._replace(as_path=(1, 2), large_communities=()).marks
    assert c.communities == ("65001:1", "65001:7") and isinstance(c.communities, Communities)
    assert c.large_communities == ("65001:1:2",) and isinstance(c.large_communities, LargeCommunities)
    assert c.as_path == (4_200_000_001, 65001) and c.neighbor_as == 4_200_000_001 and c.path_length == 2
    assert c.bgp.communities == comms and c._replace(communities=("65000:9",)).communities == ("65000:9",)
    longer = c._replace(as_path=(1, 2, 3))
    assert longer.path_length == 3 and longer.communities == c.communities and (longer.comms, longer.large) == (12, 20)
    assert longer.large_communities == ("65001:1:2",) and longer.neighbor_as == 1
    texts = c._replace(communities=("65000:9",))  # texts (a policy's): both lists kept as texts
    assert (texts.comms, texts.large, texts.path) == (("65000:9",), ("65001:1:2",), c.path[:8])
    assert texts.as_path == c.as_path and texts.path_length == 2 and texts.neighbor_as == 4_200_000_001
    only_large = c._replace(communities=())
    assert only_large.communities == () and only_large.large_communities == ("65001:1:2",)
    assert (only_large.comms, only_large.large) == (8, 8) and only_large == c._replace(communities=b"")
    empty = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS._replace(as_path=(), communities=(), large_communities=()))
    assert empty.as_path == () and empty.neighbor_as == 65001 and empty.communities == ()
    assert empty.path == b"" and (empty.comms, empty.large) == (0, 0) and empty.path_length == 0
    with pytest.raises(ValueError, match="set as_path"):
        c._replace(comms=4)


def test_the_stage_packs_the_codecs_lists_as_the_attributes_path_does():
    """The import stage's inline packing of a codec record (each mix of lists present or not)
    gives the candidate `Candidate(..., bgp=)` builds from the same attributes."""
    st = PeerState(ImportPeer("192.0.2.1", 65001, True, router_id="1.1.1.1"))
    comms = Communities.of_values([65001 << 16 | 1, 65001 << 16 | 9])
    large = LargeCommunities.of_values([(65001, 1, 2)])
    for c, lc in ((comms, large), (comms, ()), ((), large), ((), ())):
        rec = PathAttrs(origin=BgpOrigin.EGP, as_path=(65001, 65002), med=7, communities=c, large_communities=lc)
        got = st.candidate("192.0.2.1", rec, NO_MODS)
        want = st.candidate("192.0.2.1", ATTRS._replace(communities=c, large_communities=lc), NO_MODS)
        assert got == want and got.path.__class__ is bytes
        assert (got.communities, got.large_communities, got.as_path) == (c, lc, (65001, 65002))
        assert got.comms == 8 and got.large == 8 + len(bytes(c))  # (octets: len of a list counts values)


def test_type_metric_and_path_id_are_one_shared_field_none_in_the_common_case():
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    plain = Candidate(ORIGIN, 1, HOPS)
    assert c.form is None and plain.form is None and len(c) == 10 and len(plain) == 5
    assert (c.type, c.metric, c.path_id) == (RouteType.UNICAST, None, None)
    # the others: one shared Form per combination, read back by name through every way of building
    m = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS, metric=50)
    assert m.form == Form(RouteType.UNICAST, 50, None) and m.form is c._replace(metric=50).form
    assert (m.metric, m.path_id, m.bgp) == (50, None, ATTRS)
    both = m._replace(path_id=7)
    assert (both.type, both.metric, both.path_id) == (RouteType.UNICAST, 50, 7)
    assert both._replace(metric=None, path_id=None) == c and both._replace(metric=None, path_id=None).form is None
    hole = Candidate(ORIGIN, 1, (), type=RouteType.BLACKHOLE)
    assert hole.type is RouteType.BLACKHOLE and hole.form is form(RouteType.BLACKHOLE)
    assert hole._replace(type=RouteType.UNICAST) == Candidate(ORIGIN, 1, ())
    assert plain._replace(bgp=ATTRS, path_id=3) == Candidate(ORIGIN, 1, HOPS, bgp=ATTRS, path_id=3)
    assert both._replace(bgp=None) == Candidate(ORIGIN, 20, HOPS, metric=50, path_id=7)
    assert m != c and hash(m) != hash(c) and pickle.loads(pickle.dumps(both)) == both
    assert "metric=50" in repr(m) and both._asdict()["path_id"] == 7 and "path_id=7" in repr(both._replace(bgp=None))
    with pytest.raises(ValueError):
        plain._replace(local_pref=5)  # a plain candidate has no BGP fields


def test_a_bgp_candidate_takes_128_octets():
    # a tuple subclass is allocated with one spare item: 10 fields + 1 = 128 octets with the headers
    c = Candidate(ORIGIN, 20, HOPS, bgp=ATTRS)
    assert len(c) == 10 and sys.getsizeof(c) + 8 <= 128
