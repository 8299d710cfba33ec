"""Frozen value types shared by every stage: prefixes, origins, candidates, kernel routes.

DOC: the RIB holds up to millions of routes, so the types are built for memory first.

* `Prefix` (`agent.core.prefix`, re-exported here) is one int per network: the network, its
  length and its family packed, hashing well as a dict key; received prefixes stay plain ints.
* Everything else is a frozen, slotted dataclass, except what is built per received attribute
  set: `Candidate` and its BGP shape `BgpCandidate` (`agent.core.candidate`), named tuples
  (several times cheaper to build). The small shared types (kinds, route types, `Origin`,
  `NextHop`) are in `agent.core.values`; all are re-exported here. Values that many routes share (origins, next-hop
  tuples, BGP attribute sets, whole candidates) are interned with `intern()` so a million routes
  point at a few thousand objects.
* `Candidate` is one origin's offer for one prefix (one per ADD-PATH path: `Candidate.path_id`). `KernelRoute` is what the FIB wants (or found)
  in the kernel for one prefix: type, resolved next hops (a gateway always carries its device),
  metric.

Administrative distance: lower wins; 255 means never install. It is never called preference
(BIRD's preference is the opposite).
"""

from __future__ import annotations

import functools
import ipaddress
import sys
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .prefix import (  # noqa: F401 (re-exported: the value types' one import)
    V6_FLAG, Prefix, address_order, as_prefix, pack_prefix, prefix_address, prefix_family
)
from .values import (  # noqa: F401 (re-exported)
    DEFAULT_DISTANCE, NEVER_INSTALL, BestReason, BgpOrigin, NextHop, Origin, RouteType, SourceKind
)
from .candidate import (  # noqa: F401 (re-exported)
    PATH_PACKERS, BgpAttrs, BgpCandidate, Candidate, Form, PeerIdentity, bgp_candidate, form, keep_communities,
    pack_attrs, pack_path, path_asns, peer_identity
)

def parse_address(text: str) -> tuple[int, int]:
    """Return (family, address int) of an IP address string."""
    addr = ipaddress.ip_address(text)
    return addr.version, int(addr)


def canonical_address(text: str) -> str:
    """The canonical (compressed) text of an address, interned."""
    return sys.intern(str(ipaddress.ip_address(text)))


@dataclass(frozen=True, slots=True)
class KernelRoute:
    """What one prefix looks like in the kernel (our protocol, our table).

    Next hops are sorted; a gateway next hop always carries its device (the resolver fills it in,
    and the kernel reports it), so a route read back from the kernel compares equal to the route
    we wrote. `metric` None means "the FIB's configured metric".
    """

    type: RouteType = RouteType.UNICAST
    nexthops: tuple[NextHop, ...] = ()
    metric: int | None = None
    # with nexthop objects: the group of ours the kernel route points at, as the FIB last wrote or
    # read it (`agent.fib.nhg`); not part of the route's value (outside equality and hash), and
    # never set on a route that is interned: a stamped route is the FIB's own copy
    nhid: int = field(default=0, compare=False, repr=False)

    def with_metric(self, metric: int) -> "KernelRoute":
        return self if self.metric == metric else intern(KernelRoute(self.type, self.nexthops, metric))

    def with_nhid(self, nhid: int) -> "KernelRoute":
        """This route pointing at group `nhid` (0: at none); a new object unless it already does."""
        return self if self.nhid == nhid else KernelRoute(self.type, self.nexthops, self.metric, nhid)

    def __str__(self) -> str:
        head = "" if self.type == RouteType.UNICAST else self.type.name.lower()
        hops = " ".join(f"nexthop {nh}" if len(self.nexthops) > 1 else str(nh) for nh in self.nexthops)
        metric = "" if self.metric is None else f"metric {self.metric}"
        return " ".join(p for p in (head, hops, metric) if p)


INTERN_GENERATION = 1 << 17  # entries per generation of the intern table
_young: dict[Any, Any] = {}
_old: dict[Any, Any] = {}


def intern(value: Any) -> Any:
    """Return a shared instance equal to `value` (for origins, next hops, candidates ...).

    Most routes share a few values (next-hop sets, attribute sets), but a peer that sends one
    community per prefix makes every candidate distinct, and a table that kept every value ever
    seen would keep them after their routes are gone. So the table has two generations of at most
    `INTERN_GENERATION` entries: a hit in the old one moves to the young one, and when the young
    one is full it becomes the old one and the previous old one is dropped. Values in use keep
    being found (and shared); values seen once stop costing memory two generations later. Sharing
    is an optimisation only: code compares with ``is`` first and ``==`` after.
    """
    hit = _young.get(value)
    if hit is None:
        hit = _intern_miss(value)
    return hit


def _intern_miss(value: Any) -> Any:
    global _young, _old
    hit = _old.get(value, value)
    if len(_young) >= INTERN_GENERATION:
        _old, _young = _young, {}
    _young[value] = hit
    return hit


def intern_size() -> int:
    """Entries held by the intern table (both generations), for tests and metrics."""
    return len(_young) + len(_old)


def nexthops(*hops: NextHop) -> tuple[NextHop, ...]:
    """An interned, sorted next-hop tuple (the canonical form used everywhere)."""
    return intern(tuple(sorted(set(hops), key=_nh_key)))


def _nh_key(nh: NextHop) -> tuple:
    return (nh.gateway or "", nh.dev or "", nh.weight)


class Update(NamedTuple):
    """A source's message to the RIB: `candidate` for `prefix` from `origin`, or None to withdraw.
    `path_id` names one of the origin's ADD-PATH paths (the candidate's own `path_id`; None for
    every source without ADD-PATH). (A named tuple: sources create one per route, and tuples are
    the cheapest immutable record.)"""

    prefix: Prefix
    origin: Origin
    candidate: Candidate | None = None
    path_id: int | None = None


# an `Update` without the named tuple's Python-level __new__ (sources make one per route):
# new_update((prefix, origin, candidate, path_id))
new_update = functools.partial(tuple.__new__, Update)


class _RunMarker:
    """The `UpdateRun.marker`: in the place of `Update.path_id`, never a path id."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "RUN"


RUN = _RunMarker()


class UpdateRun(NamedTuple):
    """New announcements of one origin sharing one candidate, as one item of an update list: what
    an `Update(prefix, origin, candidate)` per prefix says (no ADD-PATH). The BGP import stage
    makes one per UPDATE whose prefixes its peer had not sent before (`agent.import.runs`), so
    that the RIB can take a table being learned with whole-dict operations. `marker` is `RUN`
    where an `Update` has its path id: a loop unpacking four fields tells the two apart with
    one identity test. Consumers that want single updates use `single_updates`."""

    prefixes: list[Prefix]
    origin: Origin
    candidate: Candidate
    marker: _RunMarker = RUN


def single_updates(updates: list) -> list:
    """`updates` with every `UpdateRun` spelled out as one `Update` per prefix."""
    if not any(u[3] is RUN for u in updates):
        return updates
    out: list = []
    for u in updates:
        if u[3] is RUN:
            out += [Update(p, u.origin, u.candidate) for p in u.prefixes]
        else:
            out.append(u)
    return out
