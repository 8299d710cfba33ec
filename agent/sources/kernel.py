"""Kernel source: foreign routes in our table become RIB candidates.

DOC: every route in our table whose protocol is not ours (connected subnets with proto kernel, and
boot, static, dhcp, ra, bird, zebra ...) is a candidate at the `connected` or `kernel` distance (0
by default), so it beats ours and we never shadow or overwrite a route someone else owns. One
origin per (protocol, metric), since the kernel keeps one route per prefix and metric; device
routes also per device (fe80::/64 exists once per IPv6 link).

Fed by the start-up dump, the route monitor, and the periodic full scan, which is a mark-and-sweep
(BIRD's rt_refresh_begin/end): whatever the scan no longer shows is withdrawn.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..fib.types import RTPROT_KERNEL, ForeignRoute, protocol_name
from ..core.model import Candidate, Origin, Prefix, SourceKind, Update, intern

Key = tuple  # prefix, protocol, metric, and the devices of a device route


def _key(fr: ForeignRoute) -> Key:
    """The kernel keeps one route per prefix and metric, except device routes of one prefix on
    several interfaces (IPv6 link-local fe80::/64 on every link): those are told apart by device."""
    return (fr.prefix, fr.protocol, fr.metric, fr.nexthops if fr.connected else ())


class KernelSource:
    def __init__(self, distances: Mapping[SourceKind, int]) -> None:
        self.distances = dict(distances)
        self.routes: dict[Key, ForeignRoute] = {}

    def _candidate(self, fr: ForeignRoute) -> Candidate:
        kind = SourceKind.CONNECTED if fr.protocol == RTPROT_KERNEL else SourceKind.KERNEL
        name = f"proto={protocol_name(fr.protocol)},metric={fr.metric}"
        if fr.connected:
            name += ",dev=" + "+".join(nh.dev for nh in fr.nexthops)
        origin = intern(Origin(kind, name))
        return intern(Candidate(origin, self.distances[kind], fr.nexthops, fr.type))

    def _update(self, fr: ForeignRoute, present: bool) -> Update:
        cand = self._candidate(fr)
        return Update(fr.prefix, cand.origin, cand if present else None)

    def seen(self, fr: ForeignRoute, deleted: bool) -> list[Update]:
        key = _key(fr)
        if deleted:
            return [self._update(fr, False)] if self.routes.pop(key, None) is not None else []
        if self.routes.get(key) == fr:
            return []
        self.routes[key] = fr
        return [self._update(fr, True)]

    def resync(self, foreign: Iterable[ForeignRoute]) -> list[Update]:
        """A full dump: announce what is new or changed, withdraw what is gone."""
        fresh = {_key(fr): fr for fr in foreign}
        out = [self._update(fr, False) for key, fr in self.routes.items() if key not in fresh]
        out += [self._update(fr, True) for key, fr in fresh.items() if self.routes.get(key) != fr]
        self.routes = fresh
        return out

    def set_distances(self, distances: Mapping[SourceKind, int]) -> list[Update]:
        if dict(distances) == self.distances:
            return []
        self.distances = dict(distances)
        return [self._update(fr, True) for fr in self.routes.values()]


class ConnectedTable:
    """Directly connected routes of the main table, for next-hop resolution only.

    When the FIB programs a table other than main, the interface subnets still live in main:
    they are not candidates there (they cannot conflict with our table) but they make gateways
    reachable. Mark-and-sweep like `KernelSource`; yields (prefix, dev, present) changes.
    """

    def __init__(self) -> None:
        self.routes: set[tuple[Prefix, str]] = set()

    @staticmethod
    def _pairs(fr: ForeignRoute) -> set[tuple[Prefix, str]]:
        return {(fr.prefix, nh.dev) for nh in fr.nexthops} if fr.connected else set()

    def seen(self, fr: ForeignRoute, deleted: bool) -> list[tuple[Prefix, str, bool]]:
        pairs = self._pairs(fr)
        if deleted:
            gone = pairs & self.routes
            self.routes -= gone
            return [(p, d, False) for p, d in gone]
        new = pairs - self.routes
        self.routes |= new
        return [(p, d, True) for p, d in new]

    def resync(self, foreign: Iterable[ForeignRoute]) -> list[tuple[Prefix, str, bool]]:
        fresh: set[tuple[Prefix, str]] = set()
        for fr in foreign:
            fresh |= self._pairs(fr)
        out = [(p, d, False) for p, d in self.routes - fresh] + [(p, d, True) for p, d in fresh - self.routes]
        self.routes = fresh
        return out
