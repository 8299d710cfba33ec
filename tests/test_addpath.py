"""ADD-PATH receive (RFC 7911) through the pure parts: import stage, BGP source, RIB, best path.

The shape under test is the inline stub router: a local BIRD relays the routes of two upstreams
over one iBGP session with ``add paths tx``, so one peer sends two paths of one prefix (path ids
told apart, different next hops); the agent must keep both and install one ECMP route.
"""

from __future__ import annotations

import importlib

import pytest

from agent.core.bestpath import select
from agent.core.bgp import (
    Announced, EndOfRib, Family, GracefulRestart, Open, PathAttrs, PeerState, PeerStatus, RouteUpdate,
)
from agent.core.model import BestReason, KernelRoute, NextHop, Prefix, RouteType, Update, nexthops
from agent.core.rib import Rib
from agent.sources.bgp import BgpPeerSettings, BgpSource

imp = importlib.import_module("agent.import")
P = Prefix.parse
BIRD = "127.0.0.1"
ROUTE = P("198.51.100.0/24")
V4 = Family.IPV4_UNICAST
UP1 = PathAttrs(as_path=(65001,))
UP2 = PathAttrs(as_path=(65001,), med=0)  # another object, equal in what best path reads


def stage(**peer):
    s = imp.ImportStage(imp.Guard([], []), {})
    s.set_peer(imp.ImportPeer(BIRD, 65000, False, None, router_id=BIRD, **peer))  # iBGP: no policy needed
    return s


def rib() -> Rib:
    r = Rib(max_paths=16)
    for net, dev in (("10.0.1.0/24", "up1"), ("10.0.2.0/24", "up2")):
        r.set_connected([(P(net), dev, True)])
        r.set_link(dev, True)
    return r


def paths_update(*routes, withdrawn=()) -> RouteUpdate:
    """`routes`: (prefix, next hop, attrs, path id); `withdrawn`: (prefix, path id)."""
    return RouteUpdate(BIRD, V4, tuple(Announced(P(p), nh, a) for p, nh, a, _ in routes),
                       tuple(P(p) for p, _ in withdrawn), tuple(i for *_, i in routes),
                       tuple(i for _, i in withdrawn))


def ecmp(*gateways_devs) -> KernelRoute:
    return KernelRoute(RouteType.UNICAST, nexthops(*(NextHop(g, d) for g, d in gateways_devs)))


class Lab:
    """Stage, source and RIB wired as the daemon wires them."""

    def __init__(self, gr: bool = True, **peer):
        self.stage = stage(**peer)
        self.source = BgpSource(self.stage, [BgpPeerSettings(BIRD, (V4,), gr)], speaker_stale_seconds=30)
        self.rib = rib()
        self.source.handle(PeerState(BIRD, PeerStatus.UP), 0.0)

    def feed(self, ev, now: float = 1.0):
        out = self.source.handle(ev, now)
        self.rib.apply(out.updates)
        return out

    def route(self, prefix=ROUTE):
        return self.rib.desired(prefix)


def test_two_paths_of_one_peer_become_one_ecmp_route():
    lab = Lab()
    out = lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    assert [(u.prefix, u.path_id, u.candidate.path_id) for u in out.updates] == [(ROUTE, 1, 1), (ROUTE, 2, 2)]
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.2.1", "up2"))
    d = lab.rib.decide(ROUTE)
    assert [(s.candidate.path_id, s.status) for s in d.candidates] == [(1, "best"), (2, "multipath")]
    assert d.reason is BestReason.MULTIPATH
    assert lab.stage.held(BIRD)[4] == (2, 0)  # paths, not prefixes
    assert [(p, i, v.accepted) for p, i, v in lab.stage.explain_paths(ROUTE)] == [(BIRD, 1, True), (BIRD, 2, True)]


def test_withdraw_names_the_path_and_implicit_replace_is_per_path():
    lab = Lab()
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.2.7", UP2, 2)))  # path 2 replaced, path 1 stays
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.2.7", "up2"))
    out = lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 1)]))
    assert [(u.path_id, u.candidate) for u in out.updates] == [(1, None)] and out.withdrawn == [ROUTE]
    assert lab.route() == ecmp(("10.0.2.7", "up2"))
    assert lab.stage.held(BIRD)[4] == (1, 0)
    lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 7)]))  # an unknown path: nothing happens
    assert lab.route() == ecmp(("10.0.2.7", "up2"))
    lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 2)]))
    assert lab.route() is None and ROUTE not in lab.rib and lab.stage.held(BIRD)[4] == (0, 0)


def test_path_ids_are_per_prefix():
    lab = Lab()
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("203.0.113.0/24", "10.0.2.1", UP2, 1)))
    lab.feed(paths_update(withdrawn=[("203.0.113.0/24", 1)]))
    assert lab.route() == ecmp(("10.0.1.1", "up1")) and lab.route(P("203.0.113.0/24")) is None


def test_unequal_paths_best_one_wins_and_the_last_tie_break_is_the_path_id():
    lab = Lab()
    longer = PathAttrs(as_path=(65002, 65003))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", longer, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    assert lab.route() == ecmp(("10.0.2.1", "up2"))
    assert lab.rib.decide(ROUTE).reason is BestReason.AS_PATH
    cands = lab.rib.candidates(ROUTE)
    equal = [c._replace(bgp=cands[1].bgp) for c in cands]  # two paths equal in every attribute
    sel = select(list(reversed(equal)), max_paths=1)
    assert [c.path_id for c in sel.winners] == [1] and sel.reason is BestReason.PATH_ID
    assert [c.path_id for c in select(equal, max_paths=4).winners] == [1, 2]


def test_different_neighbour_as_is_no_multipath_without_relax():
    """The multipath rule is ours for paths of one peer too: same neighbour AS (first AS in the
    path), unless multipathRelax."""
    lab = Lab()
    other = PathAttrs(as_path=(65002,))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", other, 2)))
    assert lab.route() == ecmp(("10.0.1.1", "up1"))
    lab.rib.multipath_relax = True
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.2.1", "up2"))


def test_max_prefix_counts_paths():
    limit = imp.MaxPrefixLimit(1, imp.MaxPrefixAction.DISCARD_EXTRA)
    lab = Lab(max_prefix={4: limit})
    out = lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    assert [u.path_id for u in out.updates if u.candidate is not None] == [1]
    rows = lab.stage.explain_paths(ROUTE)
    assert [(i, v.accepted, v.reason.value) for _, i, v in rows][1] == (2, False, "max_prefix")
    assert lab.stage.held(BIRD)[4] == (1, 1)
    lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 1)]))  # room again: the next announcement fits
    lab.feed(paths_update(("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    assert lab.route() == ecmp(("10.0.2.1", "up2"))


def test_graceful_restart_keeps_paths_stale_and_end_of_rib_sweeps_per_path():
    lab = Lab()
    lab.feed(Open(BIRD, 65000, 90, BIRD, (V4,), GracefulRestart(120, families=(V4,))))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    out = lab.feed(PeerState(BIRD, PeerStatus.DOWN), 2.0)
    assert out.updates == [] and out.timers == [(120, BIRD)]
    assert lab.source.sessions[BIRD].stale == {(ROUTE, 1), (ROUTE, 2)}
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.2.1", "up2"))  # still forwarding
    lab.feed(PeerState(BIRD, PeerStatus.UP), 3.0)
    out = lab.feed(paths_update(("198.51.100.0/24", "10.0.2.1", UP2, 2)))  # only path 2 comes back
    assert lab.source.sessions[BIRD].stale == {(ROUTE, 1)}
    assert out.updates == []  # held back until End-of-RIB (path ids may have changed)
    out = lab.feed(EndOfRib(BIRD, V4), 4.0)
    assert [(u.prefix, u.path_id, u.candidate is None) for u in out.updates] == [(ROUTE, 2, False), (ROUTE, 1, True)]
    assert out.synced == [BIRD]
    assert lab.route() == ecmp(("10.0.2.1", "up2"))


def test_paths_renumbered_by_a_restart_move_no_route():
    """BIRD allocates path ids anew after a restart: the upstreams' paths may come back under
    each other's ids. Held back until End-of-RIB and applied as one batch, the route never
    changes (applied one by one it would lose a next hop in between)."""
    lab = Lab()
    lab.feed(Open(BIRD, 65000, 90, BIRD, (V4,), GracefulRestart(120, families=(V4,))))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    lab.feed(PeerState(BIRD, PeerStatus.DOWN), 2.0)
    lab.feed(PeerState(BIRD, PeerStatus.UP), 3.0)
    changes = []
    for ev in (paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 2)),  # upstream 1 now has id 2
               paths_update(("198.51.100.0/24", "10.0.2.1", UP2, 1)),  # and upstream 2 id 1
               EndOfRib(BIRD, V4)):
        out = lab.source.handle(ev, 4.0)
        changes.append(lab.rib.apply(out.updates))
    assert changes == [{}, {}, {}]  # the last paths re-sent flushed the batch: no change at all
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.2.1", "up2"))
    assert [(c.path_id, c.nexthops[0].gateway) for c in lab.rib.candidates(ROUTE)] == [(1, "10.0.2.1"), (2, "10.0.1.1")]
    out = lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 2)]), 5.0)  # recovered: applied at once
    assert lab.route() == ecmp(("10.0.2.1", "up2"))


def test_stale_path_withdrawn_explicitly_and_session_loss_without_gr():
    lab = Lab()
    lab.feed(Open(BIRD, 65000, 90, BIRD, (V4,), GracefulRestart(120, families=(V4,))))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    lab.feed(PeerState(BIRD, PeerStatus.DOWN), 2.0)
    lab.feed(PeerState(BIRD, PeerStatus.UP), 3.0)
    out = lab.feed(paths_update(withdrawn=[("198.51.100.0/24", 2)]))  # stale: the stage forgot it
    assert out.updates == []  # in order with the rest of the recovery: at End-of-RIB
    out = lab.feed(EndOfRib(BIRD, V4), 4.0)
    assert [(u.path_id, u.candidate) for u in out.updates] == [(2, None), (1, None)]
    assert lab.route() is None
    plain = Lab(gr=False)
    plain.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    out = plain.feed(PeerState(BIRD, PeerStatus.DOWN), 2.0)
    assert sorted(u.path_id for u in out.updates) == [1, 2] and plain.route() is None
    assert ROUTE not in plain.rib


@pytest.mark.parametrize("told", [False, True])  # the guard's gain told (only related paths looked at), or not
def test_guard_growth_withdraws_paths(told):
    lab = Lab()
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2),
                          ("203.0.113.0/24", "10.0.1.1", UP1, 3)))
    gained = [P("198.51.100.0/25")]  # (the /24 covers it: refused as covering our own)
    lab.stage.guard.set_protected(frozenset(gained))
    ups = lab.stage.recheck_guard(BIRD, gained if told else None)
    assert sorted(u.path_id for u in ups) == [1, 2] and all(u.candidate is None for u in ups)
    lab.rib.apply(ups)
    assert lab.route() is None and lab.stage.held(BIRD)[4] == (1, 2)


def test_routes_without_path_ids_and_paths_of_another_peer_mix():
    """A peer without ADD-PATH beside the paths: three candidates, all equal: one ECMP route."""
    lab = Lab()
    lab.stage.set_peer(imp.ImportPeer("10.0.1.9", 65000, False, None, router_id="10.0.1.9"))
    lab.source.set_peer(BgpPeerSettings("10.0.1.9", (V4,), True))
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    lab.feed(RouteUpdate("10.0.1.9", V4, (Announced(ROUTE, "10.0.1.5", UP1),)))
    assert lab.route() == ecmp(("10.0.1.1", "up1"), ("10.0.1.5", "up1"), ("10.0.2.1", "up2"))
    assert [c.path_id for c in lab.rib.candidates(ROUTE)] == [None, 1, 2]  # origin name, then path id
    assert [(p, i) for p, i, _ in lab.stage.explain_paths(ROUTE)] == [(BIRD, 1), (BIRD, 2), ("10.0.1.9", None)]


def test_rib_keys_candidates_by_origin_and_path_id():
    lab = Lab()
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1)))
    origin = lab.stage.origin(BIRD)
    lab.rib.apply([Update(ROUTE, origin, None)])  # path id None: another candidate, absent: no-op
    assert lab.route() == ecmp(("10.0.1.1", "up1")) and lab.rib.counts[origin] == 1


@pytest.mark.parametrize("receive", [True, False])
def test_config_and_exabgp_rendering(receive):
    from agent.config.bgp import BgpPeer, BgpSpeakerSpec
    from agent.speaker.exabgp_conf import render

    peer = BgpPeer.model_validate({
        "apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "bird"},
        "spec": {"peerAddress": BIRD, "peerAS": 65000, "localAS": 65000, "routerId": "10.0.0.2",
                 "families": ["ipv4-unicast", "ipv6-unicast"], "addPath": {"receive": receive}}})
    text = render([peer], BgpSpeakerSpec(), ["/bin/true"]).text
    assert ("add-path receive;" in text) is receive


def test_config_errors_name_the_field():
    from pydantic import ValidationError

    from agent.config.bgp import BgpPeer

    with pytest.raises(ValidationError) as err:
        BgpPeer.model_validate({
            "apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "bird"},
            "spec": {"peerAddress": BIRD, "peerAS": 65000, "localAS": 65000, "addPath": {"receive": "yes",
                                                                                         "send": True}}})
    locs = {".".join(map(str, e["loc"])) for e in err.value.errors()}
    assert locs == {"spec.addPath.receive", "spec.addPath.send"}


def test_explain_text_names_the_paths(monkeypatch, capsys):
    """`route-agent explain` prints each path with its id (the API's ``pathId``)."""
    import argparse

    from agent import cli
    from agent.api import views
    from agent.core.ribviews import Decision

    lab = Lab()
    lab.feed(paths_update(("198.51.100.0/24", "10.0.1.1", UP1, 1), ("198.51.100.0/24", "10.0.2.1", UP2, 2)))
    d: Decision = lab.rib.decide(ROUTE)
    bgp = [{"peer": BIRD, "pathId": i, "accepted": v.accepted, "policy": v.policy, "statement": v.statement,
            "reason": v.reason.value, "description": v.reason.description} for _, i, v in lab.stage.explain_paths(ROUTE)]
    data = {"prefix": str(ROUTE), "candidates": views.decided_candidates(d), "reason": d.reason.value,
            "note": "", "bgp": bgp, "export": [], "desired": str(d.desired), "kernel": None,
            "fib_state": "pending"}
    assert [c["pathId"] for c in data["candidates"]] == [1, 2]
    monkeypatch.setattr(cli, "_get", lambda api, path: data)
    cli.cmd_explain(argparse.Namespace(api=None, prefix=str(ROUTE), json=False))
    text = capsys.readouterr().out
    assert "best          ibgp/127.0.0.1 path 1 distance 200: via 10.0.1.1" in text, text
    assert "multipath     ibgp/127.0.0.1 path 2" in text and f"from peer {BIRD} path 2: accepted" in text, text
