"""The packed prefix (`agent.core.prefix`): ``net << 8 | len`` with the network right-aligned.

Everything that makes or reads a packed prefix is checked against `ipaddress` here: the value
type's own parts, the UPDATE decoder (both of its NLRI paths, host bits set), the kernel dump
parser, the kernel encoder (op by op and by column), the policy's prefix structures, the guard's
first octet; and the point of the layout: the hash spreads a table's prefixes over a dict's slots.
"""

from __future__ import annotations

import importlib
import ipaddress

from hypothesis import given, settings, strategies as st

from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, intern, nexthops
from agent.core.prefix import address_order, pack_prefix, prefix_address
from agent.fib.codec import _prefix
from agent.fib.encoder import Encoder
from agent.fib.runops import AddRun
from agent.fib.types import FibSettings, Op, OpKind
from agent.policy.prefixes import PrefixIndex, PrefixSet
from agent.speaker.wire_nlri import prefixes as nlri_prefixes
from testlab import feed as feedmod

guard = importlib.import_module("agent.import.guard")


@st.composite
def networks(draw, family=None):
    family = draw(st.sampled_from((4, 6))) if family is None else family
    bits = 32 if family == 4 else 128
    length = draw(st.integers(0, bits))
    address = draw(st.integers(0, (1 << bits) - 1)) >> (bits - length) << (bits - length)
    cls = ipaddress.IPv4Network if family == 4 else ipaddress.IPv6Network
    return cls((address, length))


def _nlri(net, host_bits: int = 0) -> bytes:
    """A prefix as the wire carries it: its length, then its significant octets (with `host_bits`
    ORed into the last one's unused bits)."""
    n = (net.prefixlen + 7) // 8
    octets = bytearray(net.network_address.packed[:n])
    if n and net.prefixlen % 8:
        octets[-1] |= host_bits & (0xFF >> (net.prefixlen % 8))
    return bytes([net.prefixlen]) + bytes(octets)


@settings(max_examples=300, deadline=None)
@given(net=networks())
def test_a_packed_prefix_is_its_network(net):
    p = Prefix.parse(str(net))
    assert str(p) == str(net) and p.length == net.prefixlen and p.family == net.version
    assert p.address == int(net.network_address) == prefix_address(int(p))
    assert p == Prefix.of(net.version, int(net.network_address), net.prefixlen) \
        == pack_prefix(net.version, int(net.network_address), net.prefixlen)
    assert int(p) & 0xFF == net.prefixlen  # (the length stays the low octet: code reads it so)
    assert p.contains_address(net.version, int(net.broadcast_address))
    assert not p.contains_address(10 - net.version, int(net.network_address))
    if net.prefixlen:  # (the neighbour network's first address lies outside)
        other = int(net.network_address) ^ (1 << (net.max_prefixlen - net.prefixlen))
        assert not p.contains_address(net.version, other)
    # host bits are dropped by `of` (parse refuses them)
    assert Prefix.of(net.version, int(net.broadcast_address), net.prefixlen) == p
    # the kernel dump's parser
    assert _prefix(2 if net.version == 4 else 10, net.network_address.packed if net.prefixlen else b"",
                   net.prefixlen) == p


@settings(max_examples=200, deadline=None)
@given(nets=st.lists(networks(), min_size=2, max_size=30))
def test_address_order_and_covers_are_ipaddress_s(nets):
    packed = [Prefix.parse(str(n)) for n in nets]
    by_address = sorted(nets, key=lambda n: (n.version, int(n.network_address), n.prefixlen))
    assert [str(p) for p in sorted(packed, key=address_order)] == [str(n) for n in by_address]
    for a, na in zip(packed, nets):
        for b, nb in zip(packed, nets):
            assert a.covers(int(b)) == (na.version == nb.version and nb.subnet_of(na))


@settings(max_examples=200, deadline=None)
@given(family=st.sampled_from((4, 6)), data=st.data())
def test_the_update_decoder_reads_every_length_both_ways(family, data):
    """A field of mixed lengths goes prefix by prefix; one of a single length (8 or more) by
    column, with two more passes when the length is not a multiple of 8. Host bits are dropped."""
    nets = data.draw(st.lists(networks(family), min_size=1, max_size=12))
    length = data.draw(st.integers(0, 32 if family == 4 else 128))
    same = data.draw(st.lists(networks(family).map(
        lambda n: n.supernet(new_prefix=min(length, n.prefixlen)) if n.prefixlen >= length else None)
        .filter(lambda n: n is not None and n.prefixlen == length), min_size=8, max_size=20))
    junk = data.draw(st.integers(0, 255))
    for field in (nets, same):
        wire = b"".join(_nlri(n, junk) for n in field)
        got = nlri_prefixes(wire, 0, len(wire), family == 6)
        assert [str(p) for p in got] == [str(n) for n in field]


R4 = intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.1", "eth0")), 20))
R6 = intern(KernelRoute(RouteType.UNICAST, nexthops(NextHop("fd00::1", "eth0")), 20))


@settings(max_examples=100, deadline=None)
@given(family=st.sampled_from((4, 6)), data=st.data())
def test_the_kernel_encoder_writes_each_prefix_s_network(family, data):
    nets = data.draw(st.lists(networks(family).filter(lambda n: n.prefixlen > 0), min_size=1, max_size=70))
    prefixes = [Prefix.parse(str(n)) for n in nets]
    route = R4 if family == 4 else R6
    enc = Encoder(FibSettings(), {"eth0": 2})
    alen = 4 if family == 4 else 16
    one = [enc.encode(Op(OpKind.ADD, p, route), 7 + i) for i, p in enumerate(prefixes)]
    for msg, net in zip(one, nets):
        assert msg[17] == net.prefixlen  # rtm_dst_len
        assert msg[32:32 + alen] == net.network_address.packed  # RTA_DST, right after rtmsg
    assert b"".join(enc.encode_batch(AddRun(prefixes, route, None)[0:len(prefixes)], 7)) == b"".join(one)


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(networks(4), max_size=10), probe=networks(4))
def test_policy_prefix_sets_match_ipaddress(entries, probe):
    p = Prefix.parse(str(probe))
    rows = [(Prefix.parse(str(e)), e.prefixlen, 32) for e in entries]
    assert PrefixSet(rows).match(p) == any(probe.subnet_of(e) for e in entries)
    index = PrefixIndex([str(e) for e in entries])
    inside = sorted({e for e in entries if e.subnet_of(probe)}, key=lambda n: (int(n.network_address), n.prefixlen))
    assert [str(e) for e in index.inside(p)] == [str(e) for e in inside]


@given(net=networks(4))
def test_the_guard_reads_the_first_octet(net):
    p = Prefix.parse(str(net))
    assert guard._first_octet(int(p), net.prefixlen) == net.network_address.packed[0]


def _mean_probes(keys, bits: int) -> float:
    """CPython's dict probe sequence (Objects/dictobject.c: ``i = i*5 + perturb + 1``,
    ``perturb >>= 5``) over a table of 2**bits slots: steps per insert of each key in turn (and so
    per lookup of a key that is not there)."""
    mask = (1 << bits) - 1
    used = bytearray(mask + 1)
    total = 0
    for key in keys:
        h = hash(key) & ((1 << 64) - 1)
        perturb, i, n = h, h & mask, 1
        while used[i]:
            perturb >>= 5
            i = (i * 5 + perturb + 1) & mask
            n += 1
        used[i] = 1
        total += n
    return total / len(keys)


def test_a_table_s_prefixes_spread_over_a_dict_s_slots():
    """The layout's reason (the DOC of `agent.core.prefix`): 60k prefixes of the benchmark's
    Internet-like table take ~2.4 probe steps each in a dict (a random hash: ~1.5); with the
    address left-aligned, as before, 4.8."""
    feed = feedmod.scaled(0.05)
    keys = [int(Prefix.of(4, a, n)) for a, n, _s in feed.v4] + [int(Prefix.of(6, a, n)) for a, n, _s in feed.v6]
    old = [(a << 8) | n for a, n, _s in feed.v4] + [(1 << 136) | (a << 8) | n for a, n, _s in feed.v6]
    assert _mean_probes(keys, 17) < 3 < 4 < _mean_probes(old, 17)
