"""The small value types every stage shares: source kinds and distances, route types, the BGP
ORIGIN codes, the best-path reasons, `Origin`, `NextHop` and a candidate's `Form`.

DOC: split out of `agent.core.model` (which re-exports all of them) so that `agent.core.candidate`
can build on them without an import cycle. Frozen and slotted; an `Origin` caches its hash (the
RIB counts routes per origin, one hash per route).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple


class SourceKind(str, enum.Enum):
    """Where a candidate comes from. The order here is the tie-break order at equal distance."""

    CONNECTED = "connected"  # foreign kernel route with proto kernel (interface subnets)
    KERNEL = "kernel"  # any other foreign kernel route (boot, static, dhcp, bird, zebra ...)
    STATIC = "static"  # static routes from our configuration
    EBGP = "ebgp"
    IBGP = "ibgp"

    # set below for every member (plain attributes: read on hot paths)
    rank: int  # tie-break order at equal distance
    foreign: bool  # routes of this kind live in the kernel under someone else's protocol


for _rank, _kind in enumerate(SourceKind):
    _kind.rank = _rank
    _kind.foreign = _kind in (SourceKind.CONNECTED, SourceKind.KERNEL)

DEFAULT_DISTANCE: dict[SourceKind, int] = {
    SourceKind.CONNECTED: 0,
    SourceKind.KERNEL: 0,
    SourceKind.STATIC: 1,
    SourceKind.EBGP: 20,
    SourceKind.IBGP: 200,
}
NEVER_INSTALL = 255


class RouteType(enum.IntEnum):
    """Kernel route types we program or meet (values are the kernel's RTN_* numbers)."""

    UNICAST = 1
    BLACKHOLE = 6
    UNREACHABLE = 7
    PROHIBIT = 8


class BgpOrigin(enum.IntEnum):
    IGP = 0
    EGP = 1
    INCOMPLETE = 2


class BestReason(str, enum.Enum):
    """The step of the decision process that eliminated the winner's last rival."""

    ONLY_CANDIDATE = "only candidate"
    ADMIN_DISTANCE = "administrative distance"
    SOURCE_KIND = "source kind"  # equal distance, non-BGP: connected > kernel > static > bgp
    LOCAL_PREF = "local preference"
    AS_PATH = "AS path length"
    ORIGIN = "BGP origin"
    MED = "MED"
    EBGP_OVER_IBGP = "eBGP over iBGP"
    ROUTER_ID = "router id"
    PEER_ADDRESS = "peer address"
    PATH_ID = "path id"  # ADD-PATH: two paths of one peer, equal in everything else
    ORIGIN_NAME = "origin name"  # last deterministic tie-break between two non-BGP origins
    MULTIPATH = "equal-cost multipath"  # several winners, none eliminated
    UNRESOLVED = "no resolvable candidate"
    NONE = "no candidate"


@dataclass(frozen=True, slots=True)
class Origin:
    """A source of routes: its kind and name, e.g. ``static/uplinks`` or ``kernel/proto=dhcp``."""

    kind: SourceKind
    name: str
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.kind, self.name)))

    def __hash__(self) -> int:  # cached: the RIB counts routes per origin, one hash per route
        return self._hash

    def __str__(self) -> str:
        return f"{self.kind.value}/{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class NextHop:
    """One next hop. A gateway is an address string (canonical); `dev` an interface name."""

    gateway: str | None = None
    dev: str | None = None
    weight: int = 1

    def __str__(self) -> str:
        parts = []
        if self.gateway:
            parts.append(f"via {self.gateway}")
        if self.dev:
            parts.append(f"dev {self.dev}")
        if self.weight != 1:
            parts.append(f"weight {self.weight}")
        return " ".join(parts)


class Form(NamedTuple):
    """A candidate's uncommon values, in one field (``form``; None for the common case: a unicast
    route at the FIB's default metric without an ADD-PATH path id). One field instead of three
    keeps a BGP candidate at 10 fields, 128 octets (`agent.core.candidate`)."""

    type: RouteType = RouteType.UNICAST
    metric: int | None = None  # kernel metric wanted by policy; None: the FIB default
    path_id: int | None = None  # ADD-PATH path identifier


_forms: dict[Form, Form] = {}


def shared(table: dict, value):
    """The instance of `value` kept in `table` (`value` itself the first time): a few distinct
    values over the agent's life, so the table is cleared if it ever grows past 4096."""
    hit = table.get(value)
    if hit is None:
        if len(table) >= 4096:
            table.clear()
        hit = table[value] = value
    return hit


def form(type: RouteType = RouteType.UNICAST, metric: int | None = None, path_id: int | None = None) -> Form | None:
    """The ``form`` field for these values: None for the common case, else a shared `Form` (a
    few per policy metric and path id)."""
    if type == RouteType.UNICAST and metric is None and path_id is None:
        return None
    return shared(_forms, Form(RouteType(type), metric, path_id))
