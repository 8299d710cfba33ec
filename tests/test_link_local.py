"""IPv6 link-local next hops learned over BGP use the interface the session runs on.

`fe80::/64` is connected on every IPv6 interface: a route learned from a peer on up2 with only a
link-local next hop was installed `via fe80::1 dev up0` (the first fe80::/64 found). The session's
interface is the device of the connected route to the peer address (`Resolver.connected_device`),
kept up to date when connected routes change (`BgpRuntime.refresh_devices`, with a route refresh of
the peer); a link-local gateway without a device never resolves.
"""

from __future__ import annotations

from agent.core.bgp import (
    Announced,
    Family,
    PathAttrs,
    PeerState,
    PeerStatus,
    RequestRouteRefresh,
    RouteUpdate,
)
from agent.core.model import NextHop, Prefix, RouteType, nexthops
from agent.core.resolver import Resolver
from agent.daemon.agent import Agent
from agent.fib.types import ForeignRoute

P = Prefix.parse
PEER = "10.0.2.1"
ROUTE = P("2001:db8:5::/48")
CONFIG = f"""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: tor2}}
spec:
  peerAddress: {PEER}
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
  families: [ipv4-unicast, ipv6-unicast]
  importPolicy: acceptAll
"""


def test_resolver_link_local_needs_a_device():
    r = Resolver()
    for prefix, dev in (("fe80::/64", "up0"), ("fe80::/64", "up2"), ("10.0.2.0/24", "up2"), ("10.0.0.0/16", "up0")):
        r.add_connected(P(prefix), dev)
    r.set_link("up0", True)
    r.set_link("up2", True)
    hops, why, *_ = r.resolve(nexthops(NextHop("fe80::1")))
    assert hops == () and why == "fe80::1 is link-local and its interface is unknown"
    assert r.resolve(nexthops(NextHop("fe80::1", "up2")))[0] == nexthops(NextHop("fe80::1", "up2"))
    # the session's interface: the longest connected route to the peer
    assert (r.connected_device("10.0.2.1"), r.connected_device("10.0.9.1"), r.connected_device("10.9.0.1")) \
        == ("up2", "up0", None)
    version = r.connected_version
    r.remove_connected(P("10.0.2.0/24"), "up2")
    assert r.connected_version == version + 1 and r.connected_device("10.0.2.1") == "up0"


def connected(prefix: str, dev: str) -> ForeignRoute:
    return ForeignRoute(P(prefix), 2, 0 if ":" not in prefix else 256, RouteType.UNICAST, nexthops(NextHop(None, dev)))


def kernel(routing, fr: ForeignRoute, deleted: bool = False) -> None:
    routing._apply_rib(routing.rib.apply(routing.kernel.seen(fr, deleted)))


async def test_link_local_next_hop_uses_the_session_interface_and_follows_it(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    agent = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n")
    routing = agent.routing
    for dev in ("up0", "up2", "up3"):
        routing.rib.set_link(dev, True)
    for fr in (connected("fe80::/64", "up0"), connected("10.0.0.0/24", "up0"),
               connected("fe80::/64", "up2"), connected("10.0.2.0/24", "up2"), connected("fe80::/64", "up3")):
        kernel(routing, fr)
    bgp = routing.bgp
    sent = []
    bgp.speaker.send = sent.append
    routing.handle_bgp(PeerState(PEER, PeerStatus.UP))
    learn = RouteUpdate(PEER, Family.IPV6_UNICAST, (Announced(ROUTE, "fe80::1", PathAttrs(as_path=(65001,))),))
    routing.handle_bgp(learn)
    route = routing.rib.desired(ROUTE)
    assert route is not None and route.nexthops == nexthops(NextHop("fe80::1", "up2"))
    assert not [c for c in sent if isinstance(c, RequestRouteRefresh)]

    # the peer's subnet moves to up3 (addresses moved): the session now runs there
    kernel(routing, connected("10.0.2.0/24", "up2"), deleted=True)
    kernel(routing, connected("10.0.2.0/24", "up3"))
    assert bgp.devices[PEER] == "up3"
    refresh = [c for c in sent if isinstance(c, RequestRouteRefresh)]
    assert {(c.peer, c.family) for c in refresh} == {(PEER, Family.IPV4_UNICAST), (PEER, Family.IPV6_UNICAST)}
    routing.handle_bgp(learn)  # the peer answers the refresh
    assert routing.rib.desired(ROUTE).nexthops == nexthops(NextHop("fe80::1", "up3"))

    # no connected route to the peer (its subnet gone): the link-local next hop has no interface
    kernel(routing, connected("10.0.2.0/24", "up3"), deleted=True)
    kernel(routing, connected("10.0.0.0/24", "up0"), deleted=True)
    routing.handle_bgp(learn)
    assert routing.rib.desired(ROUTE) is None
    assert "fe80::1 is link-local and its interface is unknown" in routing.rib.decide(ROUTE).candidates[0].detail
