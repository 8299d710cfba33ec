"""One test per decision step: the winner and the recorded BestReason."""

import random

import pytest

from agent.core.bestpath import select
from agent.core.model import BestReason, BgpOrigin
from tests.factories import bgp, kernel, static


def winners(sel):
    return [str(c.origin) for c in sel.winners]


def test_only_candidate():
    sel = select([static("a", "10.0.0.1")])
    assert sel.reason == BestReason.ONLY_CANDIDATE and winners(sel) == ["static/a"]


def test_no_candidate():
    assert select([]).reason == BestReason.NONE


def test_admin_distance_lower_wins():
    sel = select([bgp("192.0.2.1"), static("a", "10.0.0.1")])
    assert winners(sel) == ["static/a"] and sel.reason == BestReason.ADMIN_DISTANCE


def test_admin_distance_override_reverses():
    sel = select([bgp("192.0.2.1"), static("a", "10.0.0.1", distance=250)])
    assert winners(sel) == ["ebgp/192.0.2.1"] and sel.reason == BestReason.ADMIN_DISTANCE


def test_foreign_kernel_beats_static_at_equal_distance():
    sel = select([static("a", "10.0.0.1", distance=0), kernel("dhcp")])
    assert winners(sel) == ["kernel/proto=dhcp"] and sel.reason == BestReason.SOURCE_KIND


def test_local_pref_highest_wins():
    sel = select([bgp("192.0.2.1", local_pref=100), bgp("192.0.2.2", local_pref=200)])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.LOCAL_PREF


def test_as_path_shortest_wins():
    sel = select([bgp("192.0.2.1", as_path=(65001, 65010)), bgp("192.0.2.2", as_path=(65002,))])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.AS_PATH


def test_origin_lowest_wins():
    sel = select([bgp("192.0.2.1", origin=BgpOrigin.INCOMPLETE), bgp("192.0.2.2", origin=BgpOrigin.EGP)])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.ORIGIN


def test_med_lowest_wins_within_same_neighbour_as():
    sel = select([bgp("192.0.2.1", as_path=(65001,), med=50), bgp("192.0.2.2", as_path=(65001,), med=10)])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.MED


def test_med_not_compared_across_neighbour_as():
    sel = select([bgp("192.0.2.1", as_path=(65001,), med=50), bgp("192.0.2.2", as_path=(65002,), med=10)])
    # MED is skipped; the router id decides
    assert winners(sel) == ["ebgp/192.0.2.1"] and sel.reason == BestReason.ROUTER_ID


def test_ebgp_over_ibgp():
    sel = select([bgp("192.0.2.1", ebgp=False, distance=20), bgp("192.0.2.2", ebgp=True)])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.EBGP_OVER_IBGP


def test_router_id_lowest_wins():
    sel = select([bgp("192.0.2.1", router_id="10.0.0.9"), bgp("192.0.2.2", router_id="10.0.0.3")])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.ROUTER_ID


def test_peer_address_lowest_wins():
    sel = select([bgp("192.0.2.9", router_id="10.0.0.1"), bgp("192.0.2.2", router_id="10.0.0.1")])
    assert winners(sel) == ["ebgp/192.0.2.2"] and sel.reason == BestReason.PEER_ADDRESS


def test_origin_name_breaks_ties_between_foreign_routes():
    sel = select([kernel("zebra"), kernel("bird")])
    assert winners(sel) == ["kernel/proto=bird"] and sel.reason == BestReason.ORIGIN_NAME


def test_bgp_multipath_same_neighbour_as():
    sel = select([bgp("192.0.2.2"), bgp("192.0.2.1"), bgp("192.0.2.3", local_pref=50)], max_paths=4)
    assert winners(sel) == ["ebgp/192.0.2.1", "ebgp/192.0.2.2"]
    assert sel.reason == BestReason.LOCAL_PREF


def test_bgp_multipath_needs_same_neighbour_as_unless_relaxed():
    cands = [bgp("192.0.2.1", as_path=(65001,)), bgp("192.0.2.2", as_path=(65002,))]
    assert winners(select(cands, max_paths=4)) == ["ebgp/192.0.2.1"]
    assert len(select(cands, max_paths=4, multipath_relax=True).winners) == 2


def test_bgp_multipath_capped_by_max_paths():
    cands = [bgp(f"192.0.2.{i}") for i in range(1, 6)]
    sel = select(cands, max_paths=3)
    assert winners(sel) == ["ebgp/192.0.2.1", "ebgp/192.0.2.2", "ebgp/192.0.2.3"]
    assert sel.reason == BestReason.MULTIPATH


def test_static_origins_at_equal_distance_merge_into_ecmp():
    sel = select([static("b", "10.0.0.2"), static("a", "10.0.0.1")], max_paths=4)
    assert winners(sel) == ["static/a", "static/b"] and sel.reason == BestReason.MULTIPATH
    assert winners(select([static("b", "10.0.0.2"), static("a", "10.0.0.1")], max_paths=1)) == ["static/a"]


@pytest.mark.parametrize("seed", range(20))
def test_order_does_not_matter(seed):
    cands = [bgp("192.0.2.1", as_path=(65001,), med=50), bgp("192.0.2.2", as_path=(65002,), med=10),
             bgp("192.0.2.3", as_path=(65001,), med=20), bgp("192.0.2.4", as_path=(65002,), med=5),
             bgp("192.0.2.5", ebgp=False)]
    ref = select(cands, max_paths=8)
    random.Random(seed).shuffle(cands)
    assert select(cands, max_paths=8) == ref


def test_the_equal_cost_shortcut_decides_as_the_steps_do(monkeypatch):
    """Random BGP candidate sets, most of them equal-cost: `select` with the shortcut gives the
    same winners and reason as the step-by-step pipeline (the shortcut switched off)."""
    import random

    from agent.core import bestpath
    from agent.core.model import BgpAttrs, Candidate, NextHop, Origin, SourceKind

    rnd = random.Random(7)

    def rare(usual, other):
        return other if rnd.random() < 0.1 else usual

    def cand(i: int) -> Candidate:
        addr = f"10.0.{rnd.randrange(4)}.{i + 1}"
        ebgp = rare(True, False)
        attrs = BgpAttrs(addr, rare(65001, 65002), rare(addr, "10.9.9.9"), ebgp, local_pref=rare(100, 200),
                         as_path=(65001,) * rare(1, 2), med=rare(0, 5))
        return Candidate(Origin(SourceKind.EBGP if ebgp else SourceKind.IBGP, addr), rare(20, 200),
                         (NextHop(addr),), bgp=attrs, path_id=rnd.choice((None, None, 1, 2)))

    cases = [[cand(i) for i in range(rnd.randrange(2, 5))] for _ in range(2000)]
    args = [(rnd.choice((1, 2, 16)), rnd.random() < 0.3) for _ in cases]
    fast = [bestpath.select(c, m, r) for c, (m, r) in zip(cases, args)]
    monkeypatch.setattr(bestpath, "_equal_cost", lambda c: object())  # never equal: the steps decide
    slow = [bestpath.select(c, m, r) for c, (m, r) in zip(cases, args)]
    assert fast == slow
    assert sum(s.reason.name == "MULTIPATH" for s in slow) > 100  # the shortcut was exercised
