"""Keys and expansions of kernel nexthop objects: pure functions shared by the nexthop layer
(`agent.fib.nhg`), the scanner (a dump's routes expanded through their objects) and the flush
on exit.

DOC: a route that can go through a group has the key ``("g", family, next hops)``; a single next
hop object ``("s", family, gateway, device)``. `expand_all` gives the next hops a route through
each object has, as the kernel forwards it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.model import KernelRoute, NextHop, Prefix, RouteType, nexthops
from .types import NhObject, NhOp, OpKind

_V6_FLAG = 1 << 136  # (Prefix: the IPv6 flag above the address and length bits)


def group_key(prefix: Prefix, route: KernelRoute) -> tuple | None:
    """("g", family, next hops) for a route that can go through a group; None: a plain route."""
    if route.type != RouteType.UNICAST or not route.nexthops:
        return None
    family = 6 if prefix & _V6_FLAG else 4
    for nh in route.nexthops:
        if not nh.dev or not 1 <= nh.weight <= 256:
            return None
        if nh.gateway and (":" in nh.gateway) != (family == 6):
            return None
    return ("g", family, route.nexthops)


def single_key(family: int, hop: NextHop) -> tuple:
    return ("s", family, hop.gateway, hop.dev)


def expand_all(objects: Mapping[int, NhObject]) -> dict[int, tuple[NextHop, ...]]:
    """Nexthop id -> the next hops a route through it has (groups through their members)."""
    out: dict[int, tuple[NextHop, ...]] = {}
    for nhid, obj in objects.items():
        if obj.members:
            hops = []
            for member, weight in obj.members:
                m = objects.get(member)
                if m is None or m.hop is None:
                    break
                hops.append(NextHop(m.hop.gateway, m.hop.dev, weight))
            else:
                out[nhid] = nexthops(*hops)
        elif obj.hop is not None:
            out[nhid] = nexthops(obj.hop)
    return out


def nh_deletes(objects: Mapping[int, NhObject], protocol: int) -> list[NhOp]:
    """Deletes of every nexthop object of ours in `objects` (a dump): groups, then singles
    (--flush-on-exit: after the routes)."""
    ours = [o for o in objects.values() if o.protocol == protocol]
    return ([NhOp(OpKind.DELETE, o.id) for o in ours if o.members]
            + [NhOp(OpKind.DELETE, o.id) for o in ours if not o.members])
