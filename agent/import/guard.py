"""The built-in hijack guard: routes a peer must never make this node install.

DOC: the guard runs on every received route before the peer's import policy, and no policy can
undo its rejections (``acceptAll`` included). It is derived live from what the node owns: the
composition root calls `Guard.set_protected` (pod CIDRs, IP pools, VIPs, Service CIDRs, from
config now and from the cluster later) and `Guard.set_node_addresses` (interface addresses with
their subnet length, e.g. ``10.0.0.5/24``) whenever those change; both replace the whole set.
After a change, routes already accepted are not re-checked here: the owner of the adj-RIB-in
re-feeds them through the import stage.

Checks, in this order (the first that hits decides; each has its `Reason`):

1. ``DEFAULT_ROUTE``: ``0.0.0.0/0`` and ``::/0``, unless the peer may send defaults
   (``allow_default``). An allowed default skips the prefix checks below (it covers everything
   by definition) but not the next-hop check.
2. ``MARTIAN``: inside or equal to loopback, ``0.0.0.0/8``, link-local (``169.254.0.0/16``,
   ``fe80::/10``), multicast, limited broadcast, ``::/128``, ``::1/128``, v4-mapped ``::ffff:0:0/96``.
   No peer has a reason to route these to us; ``169.254.169.254/32`` is a cloud metadata service.
3. ``OWN_PREFIX``: equal to a protected prefix (a hijack, or our own advertisement reflected back).
4. ``MORE_SPECIFIC_OF_OWN``: strictly inside a protected prefix: longest-prefix match would pull
   that part of our own space away from us.
5. ``NODE_ADDRESS``: the route contains a node address and is a host route (/32, /128) or longer
   than that address's connected subnet. A more specific than our subnet that contains our address
   captures traffic to the node itself. The connected subnet itself and shorter covering
   aggregates (a /16 of the fabric, the default route) are normal and allowed: the kernel's
   connected and local routes stay more specific, and the ToR commonly re-advertises the subnet.
   An address given without a length (or on a /32 loopback) only protects its host route.
6. ``NEXT_HOP_IS_NODE``: the next hop is one of the node's addresses (a loop, typically our own
   route reflected back by a route reflector with an unchanged next hop; the session's own local
   address is one of them). ``BAD_NEXT_HOP``: the next hop is no address a route can forward to:
   unspecified (``0.0.0.0``, ``::``), ``0.0.0.0/8``, loopback, multicast, ``240.0.0.0/4`` and the
   limited broadcast, v4-mapped IPv6, or not an address at all (`BAD_NEXT_HOPS`). A peer sending
   these is broken or hostile; installing ``via 0.0.0.0`` would make a device route of it.
   IPv4 link-local (``169.254.0.0/16``: RFC 5549 unnumbered set-ups use ``169.254.0.1``) and IPv6
   link-local next hops are allowed (the latter are bound to the session's interface).
7. ``INSIDE_CLUSTER_PREFIX``: strictly inside a prefix of another node of the cluster (its pod
   CIDRs, `Guard.set_cluster`). The route for another node's pod CIDR itself is how native
   routing reaches that node's pods and is accepted; a more specific one would steal part of them.
8. ``COVERS_OWN``: strictly covers a protected prefix, unless the peer allows covering routes
   (``allow_covering``). By longest-prefix match a covering route does not steal what we route
   locally, but it catches every address of ours that has no local route (an unallocated pod IP,
   a VIP while its service is down) and sends it back into the fabric, and a too-broad route from
   a peer is what a leak looks like. So it is rejected by default and a fabric that only sends
   aggregates (a cluster-wide /16 over our /24, or a corporate 10.0.0.0/8) is opted in per peer.

Lookups are O(distinct lengths) set probes and O(log n) bisects on `agent.policy.PrefixIndex`:
the guard costs about a microsecond per route. The next-hop checks are one dict probe: the verdict
per next-hop text is cached (a table has few distinct next hops). `check` is pure and returns None (pass) or a shared
`Verdict` (``policy="guard"``, ``statement`` = the protected prefix, node address or martian block
that matched); the import stage counts rejections per peer, family and reason.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from itertools import repeat
from operator import and_, rshift

from ..core.model import Prefix, as_prefix, canonical_address
from ..policy.prefixes import PrefixIndex, V6_FLAG, host_prefix
from ..policy.verdict import NO_MODS, Reason, Verdict

GUARD = "guard"

MARTIANS: tuple[str, ...] = (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32",
    "::/128", "::1/128", "::ffff:0:0/96", "fe80::/10", "ff00::/8",
)


def _first_octets(prefixes) -> frozenset[int]:
    """Every first octet an IPv4 prefix covered by one of `prefixes` can have."""
    out: set[int] = set()
    for p in map(Prefix.parse, prefixes):
        if p.family == 4:
            span = 1 << max(0, 8 - p.length)
            first = p.address >> 24
            out.update(range(first, first + span))
    return frozenset(out)


# next hops no route can use (see the module doc, check 6)
BAD_NEXT_HOPS: tuple[str, ...] = (
    "0.0.0.0/8", "127.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4",
    "::/128", "::1/128", "::ffff:0:0/96", "ff00::/8",
)
_BAD_NEXT_HOPS = tuple(ipaddress.ip_network(n) for n in BAD_NEXT_HOPS)
_MARTIAN_OCTETS4 = _first_octets(MARTIANS)
_V6_TAG = 1 << 16
_LENGTH = 0xFF  # (a `Prefix`'s low byte)
_TO_BUCKET = bytes(max(0, n - 8) for n in range(256))  # by length: the shift to the first 16 bits


def _first_octet(prefix: int, plen: int) -> int:
    """The first octet of the address of an IPv4 packed prefix of length `plen`."""
    return prefix >> plen if plen >= 8 else ((prefix >> 8) << (8 - plen))


def _buckets_of(p: Prefix) -> range | list[int]:
    """The top buckets a prefix spans (see `Guard._rebucket`)."""
    if p.family == 4:
        span = 1 << max(0, 16 - p.length)
        first = (p.address >> 16) & ~(span - 1)
        return range(first, first + span)
    span = 1 << max(0, 16 - p.length)
    first = (p.address >> 112) & ~(span - 1)
    return [_V6_TAG | b for b in range(first, first + span)]


# the top buckets (as `_buckets_of`: the first 16 bits of the address, tagged for IPv6) in which a
# martian lies or that one covers: a route at least a bucket long elsewhere is no martian's
_MARTIAN_BUCKETS = frozenset(b for m in MARTIANS for b in _buckets_of(Prefix.parse(m)))


class Guard:
    """Rejects routes that would hijack the node's own prefixes or addresses (see module doc)."""

    __slots__ = ("_protected", "_cluster", "_martians", "_node_hosts", "_node_len", "_node_texts", "_verdicts",
                 "_buckets", "_hops")

    def __init__(self, protected: Iterable[Prefix | str] = (), node_addresses: Iterable[str] = ()):
        self._martians = PrefixIndex(MARTIANS)
        self._verdicts: dict[tuple[Reason, int | str], Verdict] = {}
        self._protected = PrefixIndex()
        self._cluster = PrefixIndex()
        self._node_hosts = PrefixIndex()
        self._node_len: dict[Prefix, int] = {}
        self._node_texts: frozenset[str] = frozenset()
        self._buckets: frozenset[int] = frozenset()
        self._hops: dict[str | None, Verdict | None] = {}  # next-hop text -> its verdict (cache)
        self.set_protected(protected)
        self.set_node_addresses(node_addresses)

    # -- live configuration --------------------------------------------------------------------

    def set_protected(self, prefixes: Iterable[Prefix | str]) -> None:
        """Replace the node's own prefixes (pod CIDRs, pools, VIPs, Service CIDRs)."""
        self._protected = PrefixIndex(prefixes)
        self._verdicts.clear()
        self._rebucket()

    def set_cluster(self, prefixes: Iterable[Prefix | str]) -> None:
        """Replace the other nodes' prefixes (their pod CIDRs): only more-specifics are refused."""
        self._cluster = PrefixIndex(prefixes)
        self._verdicts.clear()
        self._rebucket()

    def set_node_addresses(self, addresses: Iterable[str]) -> None:
        """Replace the node's addresses: ``"10.0.0.5/24"`` (address and its subnet length, as
        ``ip addr`` shows it) or a bare ``"10.0.0.5"`` (host route only); a zone (``%eth0``) is
        ignored."""
        lengths: dict[Prefix, int] = {}
        texts = set()
        for text in addresses:
            address, slash, length = text.partition("/")
            iface = ipaddress.ip_interface(address.partition("%")[0] + slash + length)  # no zone
            address = canonical_address(str(iface.ip))
            host = host_prefix(address)
            plen = iface.network.prefixlen
            lengths[host] = min(plen, lengths.get(host, plen))
            texts.add(address)
        self._node_len = lengths
        self._node_hosts = PrefixIndex(lengths)
        self._node_texts = frozenset(texts)
        self._hops = {}
        self._verdicts.clear()
        self._rebucket()

    def _rebucket(self) -> None:
        """The top buckets (the first 16 bits of the address, tagged by family) in which an own
        prefix or a node address lies (16 bits, not an IPv4 octet: a fabric of 10/8 routes around
        a node in 10/8 stays on the hot path). A route at least that long in another bucket can
        neither equal, cover nor lie inside any of them: the hot path skips those checks."""
        out: set[int] = set()
        for p in (*self._protected, *self._cluster, *self._node_hosts):
            plen = p & 0xFF
            if plen >= 16:  # one bucket: no range to build
                out.add(((p >> (plen - 8)) & 0xFFFF) | (_V6_TAG if p & V6_FLAG else 0))
                continue
            out.update(_buckets_of(p))
        self._buckets = frozenset(out)

    @property
    def protected(self) -> frozenset[Prefix]:
        return self._protected._set  # immutable: no copy

    @property
    def node_addresses(self) -> tuple[str, ...]:
        """The node addresses as ``address/subnet length``."""
        return tuple(f"{host.network.network_address}/{self._node_len[host]}" for host in self._node_hosts)

    # -- the check ------------------------------------------------------------------------------

    def check(self, prefix: Prefix, nexthop: str | None = None, *, allow_default: bool = False,
              allow_covering: bool = False) -> Verdict | None:
        """None when the route may go on to the import policy, else the rejecting `Verdict`."""
        plen = prefix & 0xFF
        if plen < 16:
            bucket = None
        elif prefix & V6_FLAG:
            bucket = _V6_TAG | ((prefix >> (plen - 8)) & 0xFFFF)  # (the network's first 16 bits)
        else:
            bucket = (prefix >> (plen - 8)) & 0xFFFF
        if bucket is not None and bucket not in self._buckets:  # the common case: nothing of ours near
            if bucket in _MARTIAN_BUCKETS:
                hit = self._martians.covering(prefix)
                if hit is not None:
                    return self._verdict(Reason.MARTIAN, hit)
            hops = self._hops
            return hops[nexthop] if nexthop in hops else self._check_hop(nexthop)
        own = self._protected
        if plen == 0:
            if not allow_default:
                return self._verdict(Reason.DEFAULT_ROUTE, prefix)
        else:
            # most IPv4 routes start with an octet no martian touches: skip the index walk
            if prefix & V6_FLAG or _first_octet(prefix, plen) in _MARTIAN_OCTETS4:
                hit = self._martians.covering(prefix)
                if hit is not None:
                    return self._verdict(Reason.MARTIAN, hit)
            if own:
                if prefix in own:
                    return self._verdict(Reason.OWN_PREFIX, prefix)
                hit = own.covering(prefix, strict=True)
                if hit is not None:
                    return self._verdict(Reason.MORE_SPECIFIC_OF_OWN, hit)
            if self._node_hosts and self._node_hosts.first_inside(prefix) is not None:
                full = 128 if prefix & V6_FLAG else 32
                for host in self._node_hosts.inside(prefix):
                    if plen > self._node_len[host] or plen == full:
                        return self._verdict(Reason.NODE_ADDRESS, host)
            if self._cluster:
                hit = self._cluster.covering(prefix, strict=True)
                if hit is not None:
                    return self._verdict(Reason.INSIDE_CLUSTER_PREFIX, hit)
        hops = self._hops
        hop = hops[nexthop] if nexthop in hops else self._check_hop(nexthop)
        if hop is not None:
            return hop
        if own and plen and not allow_covering:
            hit = own.first_inside(prefix, strict=True)
            if hit is not None:
                return self._verdict(Reason.COVERS_OWN, hit)
        return None

    def refused(self, prefixes, nexthop: str | None, allow_default: bool = False,
                allow_covering: bool = False) -> dict[Prefix, Verdict] | None:
        """`check` for prefixes sharing one next hop (the NLRI of an UPDATE): None when every one
        passes, else their rejecting verdicts by prefix (the ones that pass are not in it). The
        next hop is checked once; a prefix away from everything of ours (the common case, as in
        `check`) costs a few integer operations, any other goes through `check`."""
        hops = self._hops
        hop = hops[nexthop] if nexthop in hops else self._check_hop(nexthop)
        buckets = self._buckets
        martian = _MARTIAN_BUCKETS
        if hop is None and len(prefixes) > 8 and self._one_clear_bucket(prefixes):
            return None
        out: dict[Prefix, Verdict] | None = None
        for prefix in prefixes:
            if hop is None:
                plen = prefix & 0xFF
                if plen >= 16:
                    bucket = (prefix >> (plen - 8)) & 0xFFFF  # (the network's first 16 bits)
                    if prefix & V6_FLAG:
                        bucket |= _V6_TAG
                    if bucket not in buckets and bucket not in martian:
                        continue
            verdict = self.check(prefix, nexthop, allow_default=allow_default, allow_covering=allow_covering)
            if verdict is not None:
                if out is None:
                    out = {}
                out[prefix] = verdict
        return out

    def _one_clear_bucket(self, prefixes) -> bool:
        """Are all of `prefixes` of one family, at least a bucket long, and in top buckets that
        hold nothing of ours and no martian? Then each would pass `refused`'s quick test: one
        check for the batch, in C loops (the lengths, each prefix's bucket, the set of them)."""
        lengths = bytes(map(and_, prefixes, repeat(_LENGTH)))  # (operator.and_: C, no bound method)
        if min(lengths) < 16:
            return False
        v6 = prefixes[0] & V6_FLAG
        if not (min(prefixes) >= V6_FLAG if v6 else max(prefixes) < V6_FLAG):
            return False  # (both families)
        buckets = set(map(and_, map(rshift, prefixes, lengths.translate(_TO_BUCKET)), repeat(0xFFFF)))
        if v6:
            buckets = {_V6_TAG | b for b in buckets}
        return buckets.isdisjoint(self._buckets) and buckets.isdisjoint(_MARTIAN_BUCKETS)

    def _check_hop(self, nexthop: str | None) -> Verdict | None:
        """The next-hop checks (node address, `BAD_NEXT_HOPS`), cached per next-hop text."""
        verdict = None
        if nexthop in self._node_texts:
            verdict = self._verdict(Reason.NEXT_HOP_IS_NODE, nexthop)  # type: ignore[arg-type]
        elif nexthop:
            try:
                addr = ipaddress.ip_address(nexthop.partition("%")[0])
            except ValueError:
                addr = None
            if addr is None or any(addr in net for net in _BAD_NEXT_HOPS if net.version == addr.version):
                verdict = self._verdict(Reason.BAD_NEXT_HOP, nexthop)
        if len(self._hops) >= 4096:
            self._hops = {}
        self._hops[nexthop] = verdict
        return verdict

    def _verdict(self, reason: Reason, what: Prefix | str) -> Verdict:
        key = (reason, what if isinstance(what, str) else int(what))
        v = self._verdicts.get(key)
        if v is None:
            if reason is Reason.NODE_ADDRESS:
                host = Prefix(what)  # type: ignore[arg-type]
                text = f"node address {host.network.network_address}/{self._node_len.get(host, host.bits)}"
            elif reason is Reason.NEXT_HOP_IS_NODE or reason is Reason.BAD_NEXT_HOP:
                text = f"next hop {what}"
            else:
                text = what if isinstance(what, str) else str(as_prefix(what))
            if len(self._verdicts) > 4096:
                self._verdicts.clear()
            v = self._verdicts[key] = Verdict(False, text, reason, NO_MODS, GUARD)
        return v


RELATED_MAX = 4096  # `related` gives up beyond this many prefixes to probe (a pass over the table is cheaper)


def related(gained: Iterable[Prefix]) -> list[Prefix] | None:
    """Every prefix that equals, covers or lies inside a prefix of `gained` (the only routes a
    guard grown by `gained` can refuse now: `ImportStage.recheck_guard`): the covering ones of
    each length, and the ones inside while they are at most `RELATED_MAX` in all (a /32 VIP has
    none, a /24 pod CIDR 510); None: more than that (a /16, an IPv6 /64: check every route)."""
    out: list[Prefix] = []
    for g in gained:
        plen, v6 = g & 0xFF, g & V6_FLAG
        full, net = (128 if v6 else 32), (g & ~V6_FLAG) >> 8
        if (2 << (full - plen)) - 2 + len(out) > RELATED_MAX:
            return None
        out += [_new_prefix(((net >> (plen - n)) << 8) | n | v6) for n in range(plen + 1)]
        for n in range(plen + 1, full + 1):
            k = n - plen
            out += [_new_prefix((x << 8) | n | v6) for x in range(net << k, (net + 1) << k)]
    return list(dict.fromkeys(out))


def _new_prefix(value: int) -> Prefix:
    return int.__new__(Prefix, value)
