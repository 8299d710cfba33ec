"""The benchmark's Internet-like table (testlab/feed.py): deterministic, shaped as its model says,
grouped so that BIRD sends ~2.5 prefixes per UPDATE, and a configuration BIRD 2 accepts."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from testlab import feed as F

N4, N6 = 20_000, 5_000


@pytest.fixture(scope="module")
def feed():
    return F.generate(N4, N6, seed=7)


@pytest.fixture(scope="module")
def model(feed):
    return F.stats(feed)


def test_same_seed_same_feed_other_seed_other_feed(feed):
    again = F.generate(N4, N6, seed=7)
    assert again.v4 == feed.v4 and again.v6 == feed.v6
    assert again.sets4 == feed.sets4 and again.sets6 == feed.sets6
    other = F.generate(N4, N6, seed=8)
    assert other.v4 != feed.v4


def test_sizes_and_no_duplicate_prefix(feed):
    assert (len(feed.v4), len(feed.v6)) == (N4, N6)
    for rows in (feed.v4, feed.v6):
        assert len({(a, l) for a, l, _ in rows}) == len(rows)


def test_prefix_length_distribution_follows_the_model(model):
    v4, v6 = model["v4"], model["v6"]
    for fam, shares in ((v4, F.V4_SHARES), (v6, F.V6_SHARES)):
        for length, share in shares.items():  # exact counts: only rounding differs
            assert fam["shares"].get(length, 0) == pytest.approx(share, abs=0.01 + 100 / fam["prefixes"])
    assert 59 <= v4["shares"][24] <= 62 and max(v4["shares"], key=v4["shares"].get) == 24
    assert [l for l, _ in sorted(v4["shares"].items(), key=lambda x: -x[1])[:6]] == [24, 22, 23, 20, 21, 19]
    assert 45 <= v6["shares"][48] <= 48
    assert [l for l, _ in sorted(v6["shares"].items(), key=lambda x: -x[1])[:6]] == [48, 32, 44, 40, 36, 29]
    assert v4["mean_length"] == pytest.approx(22.9, abs=0.1)  # potaroo: 22.92 (IPv4), 42.8-43.2 (IPv6)
    assert v6["mean_length"] == pytest.approx(43.0, abs=0.2)
    assert max(v4["shares"]) <= 24 and min(v4["shares"]) >= 8


def test_prefixes_overlap_realistically_and_stay_in_public_space(feed, model):
    assert 45 <= model["v4"]["more_specific_pct"] <= 60
    assert 45 <= model["v6"]["more_specific_pct"] <= 65
    bad4 = {0, 10, 100, 127, 169, 172, 192, 198}
    assert all(1 <= a >> 24 <= 223 and a >> 24 not in bad4 for a, _, _ in feed.v4)
    assert all((a >> 116) in (0x240, 0x260, 0x280, 0x2A0, 0x2C0) for a, _, _ in feed.v6)
    for rows, bits in ((feed.v4, 32), (feed.v6, 128)):  # host bits are zero
        assert all(a & ((1 << (bits - l)) - 1) == 0 for a, l, _ in rows)


def test_attribute_sets_average_two_and_a_half_prefixes(feed, model):
    for fam, rows, sets in (("v4", feed.v4, feed.sets4), ("v6", feed.v6, feed.sets6)):
        assert len(sets) == round(len(rows) / 2.5)
        assert model[fam]["prefixes_per_set"] == pytest.approx(2.5, abs=0.01)
        assert len(set(sets)) == len(sets)  # distinct: equal sets would merge into one UPDATE
        assert model[fam]["single_prefix_sets_pct"] > 50 and model[fam]["largest_set"] >= 100
        used = {i for *_, i in rows}
        assert used == set(range(len(sets)))


def test_a_set_is_a_run_in_birds_table_order(feed):
    """BIRD feeds a session in its hash order and flushes every 256 routes: the members of a
    set must be adjacent in that order, or BIRD sends one prefix per UPDATE."""
    for rows, fam in ((feed.v4, 4), (feed.v6, 6)):
        order = sorted(rows, key=lambda r: F.bird_hash(r[0], r[1], fam))
        runs = sum(1 for i, r in enumerate(order) if i == 0 or r[2] != order[i - 1][2])
        assert runs == len({r[2] for r in rows})


def test_bird_hash_matches_birds_formula():
    # lib/bitops.h u32_hash: v * 2902958171; net_hash_ip4: ip4_hash(prefix) ^ pxlen << 26
    assert F.bird_hash(0x0B000000, 24, 4) == ((0x0B000000 * 2902958171) & 0xFFFFFFFF) ^ (24 << 26)
    x = 0x2A000000 ^ 0x00010000
    assert F.bird_hash((0x2A000000 << 96) | (0x00010000 << 64), 32, 6) == (
        (x ^ (x << 16) ^ (x << 24)) & 0xFFFFFFFF) ^ (32 << 26)


def test_attributes_follow_the_model(feed, model):
    for fam in ("v4", "v6"):
        m = model[fam]
        assert 3.5 <= m["mean_path_len"] <= 4.8
        assert 40 <= m["four_octet_asn_pct"] <= 60
        assert 70 <= m["communities_pct"] <= 80 and 8 <= m["large_communities_pct"] <= 16
    for s in feed.sets4 + feed.sets6:
        assert 1 <= len(s.path) <= 10
        assert all(0 < a < 4200000000 and a != 23456 and not 64496 <= a <= 131071 for a in s.path)
        assert all(a < 65535 and 0 <= v < 65536 for a, v in s.communities)
        assert s.origin in ("igp", "egp", "incomplete")


def test_bird_config_text(feed):
    text = F.bird_static(feed, 6)
    lines = [l for l in text.splitlines() if l.startswith("  route ")]
    assert len(lines) == N6 and text.startswith("protocol static s6 {\n  ipv6;\n")
    a, l, i = feed.v6[0]
    assert lines[0] == f"  route {F.prefix_text(a, l, 6)} blackhole {{ {feed.sets6[i].bird()} }};"
    path = feed.sets6[i].path
    assert feed.sets6[i].bird().startswith(f"bgp_path.prepend({path[-1]});")  # origin first: it ends up last


@pytest.mark.skipif(not shutil.which("bird"), reason="BIRD 2 not installed")
def test_bird_parses_the_config(tmp_path):
    small = F.generate(2000, 400, seed=3)
    conf = tmp_path / "bird.conf"
    conf.write_text("router id 10.0.0.1;\nprotocol device {}\n" + F.bird_static(small, 4) + F.bird_static(small, 6))
    r = subprocess.run(["bird", "-p", "-c", str(conf)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
