"""The sync gate holds routes adopted from before a restart, not what a peer says now: a route a
peer announced in its new session and then withdraws leaves the kernel before the gate opens."""

from __future__ import annotations

import pytest

from agent.core.bgp import (
    Announced,
    Family,
    PathAttrs,
    PeerState,
    PeerStatus,
    RouteUpdate,
)
from agent.core.model import KernelRoute, NextHop, Prefix, RouteType, nexthops
from agent.daemon.agent import Agent
from agent.fib.types import ForeignRoute, OpKind

P = Prefix.parse
PEER = "10.0.0.1"
A, B = P("192.0.2.0/24"), P("198.51.100.0/24")
OLD = KernelRoute(RouteType.UNICAST, nexthops(NextHop("10.0.0.9", "up0")), 20)  # before the restart
CONFIG = f"""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: tor}}
spec: {{peerAddress: {PEER}, peerAS: 65001, localAS: 65000, routerId: 10.0.0.254, importPolicy: acceptAll}}
"""


@pytest.fixture
def routing(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    r = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n").routing
    r.rib.set_link("up0", True)
    up0 = ForeignRoute(P("10.0.0.0/24"), 2, 0, RouteType.UNICAST, nexthops(NextHop(None, "up0")))
    r._apply_rib(r.rib.apply(r.kernel.seen(up0, False)))
    r.fib.adopt({A: OLD, B: OLD})  # what the restarted agent found in the kernel
    return r


def announce(*prefixes):
    return RouteUpdate(PEER, Family.IPV4_UNICAST, tuple(Announced(p, PEER, PathAttrs(as_path=(65001,))) for p in prefixes))


def withdraw(*prefixes):
    return RouteUpdate(PEER, Family.IPV4_UNICAST, withdrawn=prefixes)


@pytest.mark.parametrize("batched", [False, True])
async def test_withdrawal_of_this_sessions_route_is_not_held_by_the_gate(routing, batched):
    events = [PeerState(PEER, PeerStatus.UP), announce(A, B), withdraw(A)]
    if batched:  # as the speaker hands them over: consecutive UPDATEs in one batch
        routing.handle_bgp(tuple(events))
    else:
        for ev in events:
            routing.handle_bgp(ev)
    assert not routing.gate.open
    ops = routing.fib.plan()
    # A: withdrawn by its peer now, deleted at once; B: re-learned with another next hop, held
    assert [(op.kind, op.prefix) for op in ops] == [(OpKind.DELETE, A)]
    assert routing.fib.pending[B] is not None and B in routing.fib.adopted


async def test_withdrawal_of_something_never_announced_releases_nothing(routing):
    routing.handle_bgp((PeerState(PEER, PeerStatus.UP), withdraw(A)))
    assert routing.fib.plan() == [] and {A, B} <= routing.fib.adopted
