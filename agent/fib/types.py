"""Value types at the border between the FIB logic and the netlink adapter.

DOC: the reconciler (pure) plans `Op`s; the adapter (`agent.fib.netlink`) turns a list of ops into
batched netlink messages and reports back only the failures. Dumps and monitor events come back as
the same value types, with interface indexes already translated to names, so the logic never sees
netlink.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from typing import NamedTuple

from ..core.model import KernelRoute, NextHop, Prefix, RouteType

RT_TABLE_MAIN = 254
RTPROT_KERNEL = 2
DEFAULT_PROTOCOL = 201
DEFAULT_METRIC = 20
# The kernel stores an IPv6 route added with metric 0 at IP6_RT_PRIO_USER (1024), and an IPv6
# delete with metric 0 matches any metric. So an IPv6 metric 0 is taken as 1024 everywhere
# (`kernel_metric`); IPv4 keeps metric 0 as given.
IP6_RT_PRIO_USER = 1024


def kernel_metric(family: int, metric: int) -> int:
    """The metric the kernel stores for a route of `family` added with `metric`."""
    return IP6_RT_PRIO_USER if metric == 0 and family == 6 else metric

# Names iproute2 prints for well-known protocol numbers (rtnetlink.h / rt_protos).
PROTOCOL_NAMES = {
    0: "unspec", 1: "redirect", 2: "kernel", 3: "boot", 4: "static", 8: "gated", 9: "ra",
    10: "mrt", 11: "zebra", 12: "bird", 13: "dnrouted", 14: "xorp", 15: "ntk", 16: "dhcp",
    17: "mrouted", 18: "keepalived", 42: "babel", 99: "openr", 186: "bgp", 187: "isis",
    188: "ospf", 189: "rip", 192: "eigrp",
}


def protocol_name(number: int, ours: int | None = None) -> str:
    if number == ours:
        return "route-agent"
    return PROTOCOL_NAMES.get(number, str(number))


@dataclass(frozen=True, slots=True)
class FibSettings:
    table: int = RT_TABLE_MAIN
    protocol: int = DEFAULT_PROTOCOL
    metric: int = DEFAULT_METRIC
    # kernel nexthop objects (`agent.fib.nhg`): "off", "on", or "auto" (on where the kernel has them)
    nexthop_objects: str = "off"


class OpKind(enum.Enum):
    ADD = "add"  # NLM_F_CREATE | NLM_F_EXCL: never clobbers a route we did not know was there
    REPLACE = "replace"  # NLM_F_CREATE | NLM_F_REPLACE: only over a route of ours
    DELETE = "delete"  # a delete of a route that is already gone counts as success


class Op(NamedTuple):
    """One route write. A named tuple: the reconciler makes one per changed route. Ops are
    matched to their errors by identity, never by value."""

    kind: OpKind
    prefix: Prefix
    route: KernelRoute  # metric always filled in (never None)


class NhOp(NamedTuple):
    """One write of a kernel nexthop object of ours (`agent.fib.nhg`). A single next hop has
    `family` 4 or 6 and `hop`; a group has `family` 0 and `members` ((id, weight), ...).
    `carries`: the route ops an in-place group replace stands for (they succeed or fail with it)."""

    kind: OpKind
    id: int
    family: int = 0
    hop: NextHop | None = None
    members: tuple[tuple[int, int], ...] = ()
    carries: tuple[Op, ...] = ()


class NhRouteOp(NamedTuple):
    """A route write that points the route at nexthop object `nhid` (RTA_NH_ID) instead of
    carrying its next hops; `op` is the reconciler's op it stands for."""

    op: Op
    nhid: int

    @property
    def kind(self) -> OpKind:
        return self.op.kind

    @property
    def prefix(self) -> Prefix:
        return self.op.prefix

    @property
    def route(self) -> KernelRoute:
        return self.op.route


# the route ops without the named tuples' Python-level __new__ (one per changed route: hot path)
new_op = functools.partial(tuple.__new__, Op)  # new_op((kind, prefix, route))
new_nh_route_op = functools.partial(tuple.__new__, NhRouteOp)  # new_nh_route_op((op, nhid))


@dataclass(frozen=True, slots=True)
class NhObject:
    """A kernel nexthop object as dumped: a single next hop (`hop`, `family` 4/6) or a group
    (`members`: (id, weight) pairs, `family` 0)."""

    id: int
    protocol: int
    family: int = 0
    hop: NextHop | None = None
    members: tuple[tuple[int, int], ...] = ()

    @property
    def is_group(self) -> bool:
        return bool(self.members)


@dataclass(frozen=True, slots=True)
class NhEvent:
    """RTM_NEWNEXTHOP / RTM_DELNEXTHOP seen by the monitor (not caused by our own writer)."""

    deleted: bool
    id: int
    protocol: int


@dataclass(frozen=True, slots=True)
class OpError:
    op: Op
    errno: int
    message: str


@dataclass(frozen=True, slots=True)
class ForeignRoute:
    """A route in our table whose protocol is not ours (connected, boot, static, dhcp, bird ...)."""

    prefix: Prefix
    protocol: int
    metric: int
    type: RouteType
    nexthops: tuple[NextHop, ...]

    @property
    def connected(self) -> bool:
        """Directly connected: unicast with only device next hops (no gateway)."""
        return self.type == RouteType.UNICAST and bool(self.nexthops) and all(
            nh.gateway is None and nh.dev for nh in self.nexthops
        )


@dataclass(frozen=True, slots=True)
class Dump:
    ours: dict[Prefix, KernelRoute]
    foreign: list[ForeignRoute]
    # further routes of ours on a prefix of `ours` (other metrics): a metric change in progress,
    # or a leftover of one; the reconciler keeps the one it wants and deletes the others
    extra: dict[Prefix, tuple[KernelRoute, ...]] = field(default_factory=dict)
    # with nexthop objects: every nexthop object in the namespace (ours and foreign), and the
    # nexthop id each route of ours in `ours` points at
    nexthops: dict[int, NhObject] | None = None
    nhid: dict[Prefix, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Link:
    name: str
    index: int
    up: bool


# ---- monitor events ----
@dataclass(frozen=True, slots=True)
class RouteEvent:
    """RTM_NEWROUTE / RTM_DELROUTE in our table, ours or foreign."""

    deleted: bool
    prefix: Prefix
    protocol: int
    route: KernelRoute  # metric filled in
    foreign: ForeignRoute | None  # set when protocol is not ours


@dataclass(frozen=True, slots=True)
class LinkEvent:
    deleted: bool
    link: Link


@dataclass(frozen=True, slots=True)
class Overrun:
    """The monitor socket overflowed (ENOBUFS): events were lost, a full resync is needed."""
