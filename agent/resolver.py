"""Next-hop resolution: can a candidate's next hops be reached, and through which device?

DOC: a gateway resolves when a directly connected route (a foreign kernel route with only device
next hops: the interface subnets the kernel adds, or ``ip route add P dev X``) covers it, the
longest such prefix winning, and that device is up. The resolved next hop carries the device, so a
route we write compares equal to the route the kernel reports back. A device-only next hop resolves
when the device exists and is up; blackhole routes need nothing.

Results are cached per interned next-hop tuple (many routes share a few tuples). When the
connected routes or link states change, `generation` increases and the cache is dropped; the RIB
then re-evaluates its routes. Recursive resolution through BGP routes plugs in here later.
"""

from __future__ import annotations

from collections import Counter

from .model import NextHop, Prefix, nexthops, parse_address


class Resolver:
    def __init__(self) -> None:
        self._connected: Counter[tuple[Prefix, str]] = Counter()  # refcount per (prefix, dev)
        self._by_length: list[tuple[Prefix, str]] = []
        self._links: dict[str, bool] = {}
        # keyed by id() of the interned next-hop tuple; the value holds the tuple, so the id stays
        # taken while cached
        self._cache: dict[int, tuple[tuple[NextHop, ...], str, tuple[NextHop, ...]]] = {}
        self.generation = 0

    # ---- inputs ----
    def add_connected(self, prefix: Prefix, dev: str) -> None:
        self._connected[(prefix, dev)] += 1
        if self._connected[(prefix, dev)] == 1:
            self._changed()

    def remove_connected(self, prefix: Prefix, dev: str) -> None:
        key = (prefix, dev)
        if self._connected.get(key, 0) <= 1:
            if self._connected.pop(key, None) is not None:
                self._changed()
        else:
            self._connected[key] -= 1

    def set_link(self, name: str, up: bool | None) -> bool:
        """Record a link state (None: the link is gone). Returns True when anything changed."""
        old = self._links.get(name)
        if up is None:
            self._links.pop(name, None)
        else:
            self._links[name] = up
        if old != up:
            self._changed()
            return True
        return False

    def _changed(self) -> None:
        self._by_length = sorted(self._connected, key=lambda k: -k[0].length)
        self._cache.clear()
        self.generation += 1

    # ---- queries ----
    def resolve(self, hops: tuple[NextHop, ...]) -> tuple:
        """Return (resolved next hops, reason for the ones dropped, ...). Empty hops: unresolvable."""
        hit = self._cache.get(id(hops))
        if hit is None or hit[2] is not hops:  # (a 3-tuple is returned as is: callers index 0/1)
            ok: list[NextHop] = []
            why: list[str] = []
            for nh in hops:
                resolved, reason = self._resolve_one(nh)
                if resolved is None:
                    why.append(reason)
                else:
                    ok.append(resolved)
            hit = (nexthops(*ok) if ok else (), "; ".join(why), hops)
            self._cache[id(hops)] = hit
        return hit

    def _resolve_one(self, nh: NextHop) -> tuple[NextHop | None, str]:
        if nh.gateway is None:
            if nh.dev is None:
                return None, "next hop without gateway or device"
            return (nh, "") if self._links.get(nh.dev) else (None, self._link_problem(nh.dev))
        family, addr = parse_address(nh.gateway)
        for prefix, dev in self._by_length:
            if (nh.dev is None or nh.dev == dev) and prefix.contains_address(family, addr):
                if not self._links.get(dev):
                    return None, f"{nh.gateway}: {self._link_problem(dev)}"
                return NextHop(nh.gateway, dev, nh.weight), ""
        via = f" via {nh.dev}" if nh.dev else ""
        return None, f"{nh.gateway} is not reachable{via}: no connected route covers it"

    def _link_problem(self, dev: str) -> str:
        if dev not in self._links:
            return f"device {dev} does not exist"
        return f"device {dev} is down"

    def connected_routes(self) -> list[tuple[Prefix, str]]:
        return list(self._by_length)
