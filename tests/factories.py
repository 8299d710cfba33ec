"""Small builders for test candidates (keeps the tables in the tests readable)."""

from agent.core.model import (
    DEFAULT_DISTANCE, BgpAttrs, BgpOrigin, Candidate, NextHop, Origin, Prefix, RouteType,
    SourceKind, nexthops,
)

P = Prefix.parse


def static(name="cfg", *gws, distance=1, dev=None, blackhole=False, metric=None):
    hops = nexthops(*(NextHop(g, dev) for g in gws)) if not blackhole else ()
    return Candidate(Origin(SourceKind.STATIC, name), distance, hops,
                     RouteType.BLACKHOLE if blackhole else RouteType.UNICAST, metric=metric)


def kernel(proto="dhcp", gw=None, dev="eth0", distance=0, connected=False):
    kind = SourceKind.CONNECTED if connected else SourceKind.KERNEL
    return Candidate(Origin(kind, f"proto={proto}"), distance, nexthops(NextHop(gw, dev)))


def bgp(peer="192.0.2.1", *, gw=None, local_pref=100, as_path=(65001,), origin=BgpOrigin.IGP,
        med=0, ebgp=True, router_id=None, peer_as=None, distance=None):
    kind = SourceKind.EBGP if ebgp else SourceKind.IBGP
    attrs = BgpAttrs(peer_address=peer, peer_as=peer_as or (as_path[0] if as_path else 65000),
                     router_id=router_id or peer, ebgp=ebgp, local_pref=local_pref,
                     as_path=tuple(as_path), origin=origin, med=med)
    return Candidate(Origin(kind, peer), DEFAULT_DISTANCE[kind] if distance is None else distance,
                     nexthops(NextHop(gw or peer)), bgp=attrs)
