"""A peer whose AS or session type changes in the configuration: the routes it sent under the old
one leave the RIB at once (the session restarts anyway; what the new session does not send again
must not stay installed forever)."""

from __future__ import annotations

import time

import pytest

from agent.config.loader import load_text
from agent.config.resolve import distances
from agent.core.bgp import Announced, Family, GracefulRestart, Open, PathAttrs, PeerState, PeerStatus, RouteUpdate
from agent.core.model import Prefix
from tests.bgpruntime_lab import recording_runtime, tor1_config

PEER = "10.0.0.1"
P = Prefix.parse


def _learn(rt, prefixes, as_path, now):
    rt.handle(Open(PEER, as_path[0] if as_path else 65000, 90, "1.1.1.1", (Family.IPV4_UNICAST,),
                   GracefulRestart(120)), now)
    rt.handle(PeerState(PEER, PeerStatus.UP), now)
    out = rt.handle(RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(
        Announced(P(p), PEER, PathAttrs(as_path=as_path)) for p in prefixes)), now)
    return out.updates


@pytest.mark.parametrize("new_as", [65002, 65000])  # another eBGP AS; our own AS: iBGP now
async def test_a_peer_whose_as_changes_loses_the_routes_it_sent_under_the_old_one(tmp_path, new_as):
    rt = recording_runtime(tor1_config(peer_as=65001, families="[ipv4-unicast]"), tmp_path)
    try:
        _as_changes(rt, new_as)
    finally:
        rt._spawner.cancel()


def _as_changes(rt, new_as):
    now = time.monotonic()
    got = _learn(rt, ["198.51.100.0/24", "203.0.113.0/24"], (65001,), now)
    old_origin = rt.stage.origin(PEER)
    assert {u.prefix for u in got if u.candidate is not None} == {P("198.51.100.0/24"), P("203.0.113.0/24")}
    same = rt.reconfigure(rt.config, distances(rt.config))  # nothing about the peer changed
    assert same.updates == [] and rt.stage.has_accepted(PEER)
    config = load_text(tor1_config(peer_as=new_as, families="[ipv4-unicast]"))
    out = rt.reconfigure(config, distances(config))
    withdrawn = {u.prefix for u in out.updates if u.candidate is None and u.origin == old_origin}
    assert withdrawn == {P("198.51.100.0/24"), P("203.0.113.0/24")}
    assert not rt.stage.has_accepted(PEER)
    # the new session's routes come as usual, under the new identity
    again = _learn(rt, ["198.51.100.0/24"], (new_as,) if new_as != 65000 else (), now)
    assert [u.prefix for u in again if u.candidate is not None] == [P("198.51.100.0/24")]
    assert again[0].origin == rt.stage.origin(PEER)


async def test_the_stale_routes_of_a_restarting_peer_go_too(tmp_path):
    rt = recording_runtime(tor1_config(peer_as=65001, families="[ipv4-unicast]"), tmp_path)
    try:
        _stale_go(rt)
    finally:
        rt._spawner.cancel()


def _stale_go(rt):
    now = time.monotonic()
    _learn(rt, ["198.51.100.0/24"], (65001,), now)
    rt.handle(PeerState(PEER, PeerStatus.DOWN, "hold timer expired"), now)  # graceful restart: kept stale
    assert rt.source.sessions[PEER].stale == {P("198.51.100.0/24")}
    config = load_text(tor1_config(peer_as=65002, families="[ipv4-unicast]"))
    out = rt.reconfigure(config, distances(config))
    assert [(u.prefix, u.candidate) for u in out.updates] == [(P("198.51.100.0/24"), None)]
    assert not rt.source.sessions[PEER].stale
