"""Next-hop resolution: can a candidate's next hops be reached, and through which device?

DOC: a gateway resolves when a directly connected route (a foreign kernel route with only device
next hops: the interface subnets the kernel adds, or ``ip route add P dev X``) covers it, the
longest such prefix winning, and that device is up. The resolved next hop carries the device, so a
route we write compares equal to the route the kernel reports back. A device-only next hop resolves
when the device exists and is up; blackhole routes need nothing.

A gateway that no connected route covers is resolved **recursively** (iBGP and multihop next
hops, FRR's nexthop tracking): the longest prefix in the RIB that covers it and has a usable route
(`lookup`, given by the RIB: the winner's resolved next hops, ours or a foreign route's) lends its
next hops, keeping the gateway itself when that route is on-link (device only). The default route
is never used for that (as FRR without `resolve-via-default`), nor a route that covers the prefix
being resolved (it would resolve through itself); the RIB checks the latter with `vias`.
Every gateway looked up recursively is *watched*: when the RIB's route for a prefix covering a
watched gateway changes (`affects`), the cache is dropped and routes are re-evaluated.

An IPv6 link-local gateway means something only on one link: without a device it never resolves
(``fe80::/64`` is connected on every IPv6 interface, and the first one found would be a guess);
BGP gives it the device of the peer's session (`connected_device` of the peer address), static
routes must name one.

Results are cached per interned next-hop tuple (many routes share a few tuples). When the
connected routes, link states or a route a watched gateway resolves through change, `generation`
increases and the cache is dropped; the RIB then re-evaluates its routes. Changes that cannot
matter to any cached resolution (a connected route covering none of the gateways, the state of a
link no next hop uses) leave the cache and the routes alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from .model import V6_FLAG, NextHop, Prefix, nexthops, parse_address, prefix_address


MAX_DEPTH = 3  # recursive resolution through at most this many routes
_LINK_LOCAL6 = frozenset({"fe8", "fe9", "fea", "feb"})  # fe80::/10, as canonical (lower-case) text


class Resolver:
    def __init__(self, lookup: Callable[[Prefix, int], tuple[NextHop, ...] | None] | None = None) -> None:
        self.lookup = lookup  # (prefix, depth) -> the RIB's resolved next hops there, or None
        self._watch: dict[tuple[int, int], set[int]] = {}  # (family, length) -> masked gateways
        self._depth = 0
        self._connected: Counter[tuple[Prefix, str]] = Counter()  # refcount per (prefix, dev)
        self._by_length: list[tuple[Prefix, str]] = []
        self._links: dict[str, bool] = {}
        # keyed by id() of the interned next-hop tuple; the value holds the tuple, so the id stays
        # taken while cached
        self._cache: dict[int, tuple] = {}
        self.generation = 0
        self.connected_version = 0  # counts changes of the set of connected routes
        # every decision of the current generation resolved through `_cache` (False after an
        # `invalidate` that the RIB did not follow with a re-evaluation: link and connected
        # changes then count as used, as nothing cached tells what the installed routes use)
        self.complete = True

    # ---- inputs ----
    def add_connected(self, prefix: Prefix, dev: str) -> None:
        self._connected[(prefix, dev)] += 1
        if self._connected[(prefix, dev)] == 1:
            self._connected_changed(prefix, dev)

    def remove_connected(self, prefix: Prefix, dev: str) -> None:
        key = (prefix, dev)
        if self._connected.get(key, 0) <= 1:
            if self._connected.pop(key, None) is not None:
                self._connected_changed(prefix, dev)
        else:
            self._connected[key] -= 1

    def _connected_changed(self, prefix: Prefix, dev: str) -> None:
        """A connected route came or went: only when it covers a gateway some cached resolution
        used or looked for on that device (an interface address on an unrelated subnet, the IPv6
        link-local route of a new pod's veth beside a peer's link-local next hop on the uplink)
        does anything need re-evaluating."""
        self.connected_version += 1
        if not self.complete or any(prefix.contains_address(*parse_address(gw))
                                    for gw, on in self._cached_gateways() if on is None or on == dev):
            self._changed()
        else:
            self._by_length = sorted(self._connected, key=lambda k: -k[0].length)

    def _cached_gateways(self) -> set[tuple[str, str | None]]:
        """(gateway, device) of every cached resolution: the device it was given with (None: any
        connected route may resolve it), or None for one a recursive resolution reached."""
        out = set()
        for resolved, _why, original, _vias in self._cache.values():
            given = {nh.gateway for nh in original}
            out.update((nh.gateway, nh.dev) for nh in original if nh.gateway)
            out.update((nh.gateway, None) for nh in resolved if nh.gateway and nh.gateway not in given)
        return out

    def set_link(self, name: str, up: bool | None) -> bool:
        """Record a link state (None: the link is gone). Returns True when a resolution may have
        changed: the state changed and the link is one a cached resolution used or looked at (a
        flapping interface that no route goes through costs nothing, and so does a link created
        or deleted that no next hop names and no connected route of a gateway is on: a pod's
        veth on a Kubernetes node, each of which re-evaluated every route of the RIB)."""
        old = self._links.get(name)
        if up is None:
            self._links.pop(name, None)
        else:
            self._links[name] = up
        if old != up and (self._watch or not self.complete or self._link_used(name)):
            self._changed()
            return True
        return False

    def _link_used(self, name: str) -> bool:
        """True when a cached resolution names device `name` (given or resolved), or a connected
        route on it covers a gateway some cached resolution used or looked for."""
        for resolved, _why, original, _vias in self._cache.values():
            if any(nh.dev == name for nh in original) or any(nh.dev == name for nh in resolved):
                return True
        on_link = [prefix for prefix, dev in self._connected if dev == name]
        if not on_link:
            return False
        gateways = [parse_address(gw) for gw, on in self._cached_gateways() if on is None or on == name]
        return any(prefix.contains_address(*gw) for prefix in on_link for gw in gateways)

    def affects(self, prefix: Prefix) -> bool:
        """True when `prefix` covers a gateway that was resolved recursively."""
        watched = self._watch.get((6 if prefix & V6_FLAG else 4, prefix & 0xFF))
        return watched is not None and prefix_address(prefix) in watched

    @property
    def watching(self) -> bool:
        return bool(self._watch)

    def invalidate(self) -> None:
        """A route some recursive resolution may depend on changed, or the RIB's decisions are
        void (`complete` is False until the RIB has re-evaluated every route: `settled`)."""
        self._changed()
        self.complete = False

    def settled(self) -> None:
        """The RIB re-decided every route of the current generation (`complete`)."""
        self.complete = True

    def _changed(self) -> None:
        self._watch.clear()  # re-registered as routes are resolved again
        self._by_length = sorted(self._connected, key=lambda k: -k[0].length)
        self._cache.clear()
        self.generation += 1

    # ---- queries ----
    def resolve(self, hops: tuple[NextHop, ...]) -> tuple:
        """Return (resolved next hops, reason for the ones dropped, hops, vias). Empty next hops:
        unresolvable. `vias` lists the prefixes a recursive resolution went through."""
        hit = self._cache.get(id(hops))
        if hit is None or hit[2] is not hops:
            ok: list[NextHop] = []
            why: list[str] = []
            vias: list[Prefix] = []
            for nh in hops:
                resolved, reason = self._resolve_one(nh)
                if not resolved:
                    why.append(reason)
                else:
                    ok += resolved
                    if reason:
                        vias.append(reason)  # the prefix resolved through
            hit = (nexthops(*ok) if ok else (), "; ".join(why), hops, tuple(vias))
            if self._depth == 0:
                self._cache[id(hops)] = hit
        return hit

    def _resolve_one(self, nh: NextHop) -> tuple[list[NextHop] | None, str | Prefix]:
        if nh.dev is None and nh.gateway is not None and nh.gateway[:3] in _LINK_LOCAL6:
            return None, f"{nh.gateway} is link-local and its interface is unknown"
        one, reason = self._resolve_connected(nh)
        if one is not None:
            return [one], ""
        if nh.gateway is None or nh.dev is not None or self.lookup is None or self._depth >= MAX_DEPTH:
            return None, reason  # a next hop given with its device is meant on-link
        family, addr = parse_address(nh.gateway)
        bits = 32 if family == 4 else 128
        for length in range(bits, 0, -1):  # never through the default route
            masked = (addr >> (bits - length)) << (bits - length)
            self._watch.setdefault((family, length), set()).add(masked)
        self._depth += 1
        try:
            for length in range(bits, 0, -1):
                masked = (addr >> (bits - length)) << (bits - length)
                prefix = Prefix.of(family, masked, length)
                hops = self.lookup(prefix, self._depth)
                if hops:
                    hops = [h for h in hops if h.dev is None or self._links.get(h.dev)]
                if hops:
                    return [NextHop(h.gateway or nh.gateway, h.dev, nh.weight) for h in hops], prefix
        finally:
            self._depth -= 1
        if "no connected route covers it" in reason:
            return None, f"{nh.gateway} is not reachable: no connected route covers it and no route resolves it"
        return None, reason  # e.g. "device eth0 is down": the more useful reason

    def _resolve_connected(self, nh: NextHop) -> tuple[NextHop | None, str]:
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

    def connected_device(self, address: str) -> str | None:
        """The device of the longest connected route covering `address` (whatever its state):
        the link a directly connected neighbour is reached on. None when no connected route
        covers it (a neighbour further away)."""
        family, addr = parse_address(address)
        for prefix, dev in self._by_length:
            if prefix.contains_address(family, addr):
                return dev
        return None
