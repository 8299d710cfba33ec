"""Route policy machinery: compiled matchers, statements, verdicts (shared by import and export).

DOC: a `RoutePolicy` (schema in `agent.policy_models`) is compiled once into a `CompiledPolicy`;
evaluating it on a route is then a few dict/set operations per statement, because every learned
route (~100k/s at peak) goes through it.

Two steps, so that nothing that depends only on the peer is looked at per route:

* `compile_policy(obj)` builds the peer-independent matchers: prefix sets become per-length dicts
  (network key -> bitmask of accepted lengths; one dict probe per distinct entry length), community
  lists frozensets, AS-path regexes compiled patterns with a small result cache keyed by the path
  tuple (many routes share a path).
* `CompiledPolicy.bind(PeerInfo)` specialises it for one peer (the sender on import, the receiver
  on export): statements whose ``peerAddress``/``peerAs``/``sessionType`` do not match that peer
  are dropped, the peer conditions of the others are removed, and ``originAs`` learns the peer's
  AS (the origin of an empty path). `BoundPolicy.evaluate(prefix, nexthop, attrs)` only runs the
  route conditions.

Evaluation: statements in order; all conditions of a statement must match. Modifications of every
matching statement accumulate (later ``set``s win, ``add``s are merged) and are kept only if the
route ends up accepted; ``accept``/``reject`` end the evaluation; when no statement decides,
``defaultAction`` does (statement ``"default"``). The result is a frozen `Verdict`. Verdicts and
`Modifications` are shared objects (one per statement and set of accumulated modifications), so
a stage may keep one per route for ``explain`` at the cost of a reference.

Built-in policy: ``acceptAll`` (`ACCEPT_ALL`) accepts everything; it exists in every result of
`compile_policies` but is never implied: a peer must name it.

`Reason` is the one enum of why a route was accepted or rejected, for policy verdicts and for the
import stage's guard, RFC 8212 default deny and max-prefix (they all produce `Verdict`s).

`PrefixIndex` (a set of prefixes answering "which entry covers P" and "which entries lie inside
P" in O(distinct lengths) and O(log n)) is shared with the hijack guard.

Text forms: communities in attributes are canonical decimal ``"65000:100"``, large communities
``"1:2:3"`` (see `agent.policy_models.canonical_community`); next hops canonical address text.
"""

from __future__ import annotations

import enum
import socket
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core.model import BgpAttrs, Prefix
from .aspath import compile_as_path_regex

if TYPE_CHECKING:  # the schema lives in the configuration layer above; only its shape is read here
    from ..config.policy import RoutePolicy, Statement

V6_FLAG = 1 << 136
ACCEPT_ALL = "acceptAll"
BUILTIN_POLICIES = frozenset({ACCEPT_ALL})
_CACHE_LIMIT = 8192

# ---------------------------------------------------------------------------------------------
# Reasons, modifications, verdicts
# ---------------------------------------------------------------------------------------------


class Reason(str, enum.Enum):
    """Why a route was accepted or rejected. The value is the metric label."""

    POLICY_ACCEPT = "policy_accept"
    POLICY_REJECT = "policy_reject"
    DEFAULT_ACCEPT = "default_accept"
    DEFAULT_REJECT = "default_reject"
    NO_POLICY = "no_policy"  # eBGP peer without import policy (RFC 8212)
    IBGP_NO_POLICY = "ibgp_no_policy"  # iBGP peer without import policy: accepted
    UNKNOWN_POLICY = "unknown_policy"  # the named policy does not exist: fail closed
    OWN_PREFIX = "own_prefix"
    MORE_SPECIFIC_OF_OWN = "more_specific_of_own"
    COVERS_OWN = "covers_own"
    NODE_ADDRESS = "node_address"
    NEXT_HOP_IS_NODE = "next_hop_is_node"
    DEFAULT_ROUTE = "default_route"
    MARTIAN = "martian"
    MAX_PREFIX = "max_prefix"
    INSIDE_CLUSTER_PREFIX = "inside_cluster_prefix"
    NO_NEXT_HOP = "no_next_hop"  # export: next-hop self of the other family than the session's

    description: str  # set below

    def __str__(self) -> str:
        return self.value


_DESCRIPTIONS = {
    Reason.POLICY_ACCEPT: "accepted by a policy statement",
    Reason.POLICY_REJECT: "rejected by a policy statement",
    Reason.DEFAULT_ACCEPT: "accepted by the policy's defaultAction",
    Reason.DEFAULT_REJECT: "rejected by the policy's defaultAction (no statement decided)",
    Reason.NO_POLICY: "eBGP peer without import policy: nothing is accepted (RFC 8212)",
    Reason.IBGP_NO_POLICY: "iBGP peer without import policy: accepted (RFC 8212 covers eBGP only)",
    Reason.UNKNOWN_POLICY: "the peer's import policy does not exist: nothing is accepted",
    Reason.OWN_PREFIX: "equal to a prefix of this node (pod CIDR, pool, VIP, service CIDR)",
    Reason.MORE_SPECIFIC_OF_OWN: "inside a prefix of this node",
    Reason.COVERS_OWN: "covers a prefix of this node (allowCovering not set on the peer)",
    Reason.NODE_ADDRESS: "captures an address of this node (host route or longer than its subnet)",
    Reason.NEXT_HOP_IS_NODE: "the next hop is an address of this node",
    Reason.DEFAULT_ROUTE: "default route from a peer not allowed to send defaults",
    Reason.INSIDE_CLUSTER_PREFIX: "inside another node's pod CIDR (only the CIDR itself is accepted)",
    Reason.MARTIAN: "martian prefix (loopback, link-local, multicast ...)",
    Reason.MAX_PREFIX: "over the peer's max-prefix limit",
    Reason.NO_NEXT_HOP: "the session is of the other address family: 'self' is no next hop for "
                        "this prefix; set nextHop on the Advertisement or setNextHop in the policy",
}
for _reason in Reason:
    _reason.description = _DESCRIPTIONS[_reason]


def _merge(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    """`old` followed by the items of `new` it lacks (order kept, no duplicates)."""
    return old + tuple(x for x in dict.fromkeys(new) if x not in old)


@dataclass(frozen=True, slots=True)
class Modifications:
    """What accepted statements change on a route. None / () means unchanged."""

    local_pref: int | None = None
    distance: int | None = None
    add_communities: tuple[str, ...] = ()
    add_large_communities: tuple[str, ...] = ()
    metric: int | None = None
    med: int | None = None  # export
    prepend: int | None = None  # export: extra copies of our AS
    next_hop: str | None = None  # export: an address or "self"

    def then(self, later: "Modifications") -> "Modifications":
        """These modifications followed by `later`'s: later sets win, adds are merged."""
        def pick(name):
            value = getattr(later, name)
            return getattr(self, name) if value is None else value

        return Modifications(
            local_pref=pick("local_pref"),
            distance=pick("distance"),
            add_communities=_merge(self.add_communities, later.add_communities),
            add_large_communities=_merge(self.add_large_communities, later.add_large_communities),
            metric=pick("metric"),
            med=pick("med"),
            prepend=pick("prepend"),
            next_hop=pick("next_hop"),
        )

    def apply(self, attrs: BgpAttrs) -> BgpAttrs:
        """`attrs` with local-pref and communities changed (distance and metric are not attributes)."""
        changes: dict[str, Any] = {}
        if self.local_pref is not None and self.local_pref != attrs.local_pref:
            changes["local_pref"] = self.local_pref
        if self.add_communities:
            merged = _merge(attrs.communities, self.add_communities)
            if merged != attrs.communities:
                changes["communities"] = merged
        if self.add_large_communities:
            merged = _merge(attrs.large_communities, self.add_large_communities)
            if merged != attrs.large_communities:
                changes["large_communities"] = merged
        return replace(attrs, **changes) if changes else attrs

    @property
    def changes_attrs(self) -> bool:
        return self.local_pref is not None or bool(self.add_communities or self.add_large_communities)

    def __bool__(self) -> bool:
        return self != NO_MODS

    def __str__(self) -> str:
        parts = []
        if self.local_pref is not None:
            parts.append(f"local-pref {self.local_pref}")
        if self.distance is not None:
            parts.append(f"distance {self.distance}")
        if self.add_communities:
            parts.append("add community " + " ".join(self.add_communities))
        if self.add_large_communities:
            parts.append("add large-community " + " ".join(self.add_large_communities))
        if self.metric is not None:
            parts.append(f"metric {self.metric}")
        if self.med is not None:
            parts.append(f"med {self.med}")
        if self.prepend is not None:
            parts.append(f"prepend {self.prepend}")
        if self.next_hop is not None:
            parts.append(f"next-hop {self.next_hop}")
        return ", ".join(parts) or "no change"

    def __repr__(self) -> str:
        fields = (f"{f}={getattr(self, f)!r}" for f in self.__dataclass_fields__
                  if getattr(self, f) not in (None, ()))
        return f"Modifications({', '.join(fields)})"


NO_MODS = Modifications()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one route: accepted or not, who decided (policy + statement) and why.

    `statement` is the deciding statement's name (``statements[I]`` when unnamed), ``"default"``
    for a policy's defaultAction, or the matched object for guard / max-prefix verdicts
    (``"10.244.1.0/24"``, ``"limit 1000"``). `mods` are the modifications of an accepted route.
    """

    accepted: bool
    statement: str
    reason: Reason
    mods: Modifications = NO_MODS
    policy: str = ""

    def __str__(self) -> str:
        head = "accepted" if self.accepted else "rejected"
        who = " ".join(p for p in (self.policy, self.statement) if p)
        text = f"{head} by {who}" if who else head
        text += f" ({self.reason.value}: {self.reason.description})"
        return text + (f"; {self.mods}" if self.mods else "")

    def __repr__(self) -> str:
        extra = "".join((f", mods={self.mods!r}" if self.mods else "",
                         f", policy={self.policy!r}" if self.policy else ""))
        return f"Verdict({self.accepted}, {self.statement!r}, {self.reason.name}{extra})"


_VERDICTS: dict[Verdict, Verdict] = {}


def shared_verdict(accepted: bool, statement: str, reason: Reason, mods: Modifications = NO_MODS,
                   policy: str = "") -> Verdict:
    """The one shared `Verdict` with these fields (so stores of many routes hold references only)."""
    v = Verdict(accepted, statement, reason, mods, policy)
    if len(_VERDICTS) > 4 * _CACHE_LIMIT:
        _VERDICTS.clear()
    return _VERDICTS.setdefault(v, v)


# ---------------------------------------------------------------------------------------------
# Prefix structures
# ---------------------------------------------------------------------------------------------


def length_mask(v6: bool, length: int) -> int:
    """AND-mask that turns a packed `Prefix` into the packed network of its first `length` bits
    (family flag kept, length byte cleared)."""
    bits = 128 if v6 else 32
    return (V6_FLAG if v6 else 0) | ((((1 << length) - 1) << (bits - length)) << 8)


def host_prefix(address: str) -> Prefix:
    """The /32 or /128 of an address text."""
    if ":" in address:
        return Prefix.of(6, int.from_bytes(socket.inet_pton(socket.AF_INET6, address), "big"), 128)
    return Prefix.of(4, int.from_bytes(socket.inet_pton(socket.AF_INET, address), "big"), 32)


class PrefixIndex:
    """An immutable set of prefixes with the two containment lookups route filters need.

    * `covering(p)`: the longest entry that contains `p` (equal or shorter): one set probe per
      distinct entry length of `p`'s family (at most 33 / 129, typically a handful).
    * `inside(p)`: the entries that `p` contains (equal or longer): a bisect over the sorted
      packed ints (a network's more specifics are contiguous in that order).
    """

    __slots__ = ("_set", "_lengths", "_sorted")

    def __init__(self, prefixes: Iterable[Prefix | str] = ()):
        items = {Prefix.parse(p) if isinstance(p, str) else Prefix(p) for p in prefixes}
        self._set = frozenset(items)
        self._lengths: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]] = tuple(  # type: ignore[assignment]
            tuple((n, length_mask(v6, n)) for n in sorted({p.length for p in items if bool(p & V6_FLAG) == v6}))
            for v6 in (False, True)
        )
        self._sorted = sorted(items)

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._set

    def __len__(self) -> int:
        return len(self._set)

    def __iter__(self) -> Iterator[Prefix]:
        return iter(self._sorted)

    def __bool__(self) -> bool:
        return bool(self._set)

    def covering(self, prefix: Prefix, strict: bool = False) -> Prefix | None:
        """The longest entry containing `prefix` (equal allowed unless `strict`), or None."""
        plen = prefix & 0xFF
        if strict:
            plen -= 1
        found = None
        entries = self._set
        for length, mask in self._lengths[1 if prefix & V6_FLAG else 0]:
            if length > plen:
                break
            key = (prefix & mask) | length
            if key in entries:
                found = key
        return None if found is None else Prefix(found)

    def inside(self, prefix: Prefix, strict: bool = False) -> Iterator[Prefix]:
        """Entries that `prefix` contains (equal allowed unless `strict`), in address order."""
        plen = prefix & 0xFF
        bits = 128 if prefix & V6_FLAG else 32
        low = prefix & ~0xFF
        high = low | (((1 << (bits - plen)) - 1) << 8) | 0xFF
        items = self._sorted
        i = bisect_left(items, low)
        n = len(items)
        while i < n and items[i] <= high:
            entry = items[i]
            elen = entry & 0xFF
            if elen > plen or (elen == plen and not strict):
                yield entry
            i += 1

    def first_inside(self, prefix: Prefix, strict: bool = False) -> Prefix | None:
        """The first entry (in address order) that `prefix` contains, or None (no generator: hot)."""
        plen = prefix & 0xFF
        low = prefix & ~0xFF
        high = low | (((1 << ((128 if prefix & V6_FLAG else 32) - plen)) - 1) << 8) | 0xFF
        items = self._sorted
        i = bisect_left(items, low)
        n = len(items)
        while i < n and items[i] <= high:
            elen = items[i] & 0xFF
            if elen > plen or (elen == plen and not strict):
                return items[i]
            i += 1
        return None


class PrefixSet:
    """A compiled prefix set: does a prefix match an entry (network + range of lengths)?

    Per family, per distinct entry length L: a dict from the packed network to a bitmask of the
    accepted prefix lengths. A lookup masks the prefix to each L not longer than itself and
    probes the dict: O(distinct lengths), independent of the number of entries.
    """

    __slots__ = ("_tables",)

    def __init__(self, entries: Iterable[tuple[Prefix, int, int]]):
        tables: tuple[dict[int, dict[int, int]], dict[int, dict[int, int]]] = ({}, {})
        for net, low, high in entries:
            net = Prefix(net)
            plen = net.length
            if not plen <= low <= high <= net.bits:
                raise ValueError(f"bad length range {low}..{high} for {net}")
            bitmask = ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
            table = tables[1 if net & V6_FLAG else 0].setdefault(plen, {})
            table[int(net)] = table.get(int(net), 0) | bitmask
        self._tables = tuple(
            tuple((n, length_mask(v6, n), tables[v6][n]) for n in sorted(tables[v6]))
            for v6 in (0, 1)
        )

    def match(self, prefix: Prefix) -> bool:
        plen = prefix & 0xFF
        for length, mask, table in self._tables[1 if prefix & V6_FLAG else 0]:
            if length > plen:
                return False
            lengths = table.get((prefix & mask) | length)
            if lengths is not None and lengths >> plen & 1:
                return True
        return False

    __contains__ = match


# ---------------------------------------------------------------------------------------------
# Conditions: closures (prefix, nexthop, attrs) -> bool
# ---------------------------------------------------------------------------------------------

Condition = Callable[[Prefix, Any, Any], bool]


def _bounded(cache: dict) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()


def _prefix_set_condition(pset: PrefixSet) -> Condition:
    match = pset.match

    def prefix_set(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        return match(prefix)

    return prefix_set


def _set_condition(field: str, mode: str, values: Iterable[str]) -> Condition:
    wanted = frozenset(values)
    if mode == "any":
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return not wanted.isdisjoint(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return not wanted.isdisjoint(attrs.large_communities)
    elif mode == "all":
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.issubset(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.issubset(attrs.large_communities)
    else:  # none
        if field == "communities":
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.isdisjoint(attrs.communities)
        else:
            def cond(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
                return wanted.isdisjoint(attrs.large_communities)
    cond.__name__ = f"{field}_{mode}"
    return cond


def _as_path_contains(asns: Iterable[int]) -> Condition:
    wanted = frozenset(asns)

    def as_path_contains(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        return not wanted.isdisjoint(attrs.as_path)

    return as_path_contains


def _as_path_regex(text: str) -> Condition:
    search = compile_as_path_regex(text).search
    cache: dict[tuple[int, ...], bool] = {}

    def as_path_regex(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        path = attrs.as_path
        hit = cache.get(path)
        if hit is None:
            hit = search(" ".join(map(str, path))) is not None
            _bounded(cache)
            cache[path] = hit
        return hit

    return as_path_regex


def _origin_as(asns: frozenset[int], peer_as: int) -> Condition:
    def origin_as(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        path = attrs.as_path
        return (path[-1] if path else peer_as) in asns

    return origin_as


def _next_hop_in(index: PrefixIndex) -> Condition:
    cache: dict[Any, bool] = {}

    def next_hop_in(prefix: Prefix, nexthop: Any, attrs: Any) -> bool:
        hit = cache.get(nexthop)
        if hit is None:
            try:
                hit = index.covering(host_prefix(nexthop)) is not None
            except (OSError, TypeError, ValueError):
                hit = False  # no next hop, "self", or not an address
            _bounded(cache)
            cache[nexthop] = hit
        return hit

    return next_hop_in


def _labels_condition(want: dict[str, str]) -> Condition:
    """Export: the advertisement carries all of `want` (routes without labels never match)."""
    items = tuple(want.items())

    def labels(prefix, nexthop, attrs) -> bool:
        have = getattr(attrs, "labels", None)
        return have is not None and all(have.get(k) == v for k, v in items)

    return labels


# ---------------------------------------------------------------------------------------------
# Compiled and bound policies
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """The peer a policy is bound to: the sender of imported routes, the receiver of exports."""

    address: str  # canonical address text
    asn: int
    ebgp: bool


_CONTINUE, _ACCEPT, _REJECT = 0, 1, 2
_RESULTS = {"continue": _CONTINUE, "accept": _ACCEPT, "reject": _REJECT}


@dataclass(frozen=True, slots=True)
class _CompiledStatement:
    index: int
    label: str
    conditions: tuple[Condition, ...]  # peer-independent route conditions
    origin_as: frozenset[int] | None
    peer_addresses: PrefixIndex | None
    peer_as: frozenset[int] | None
    session_ebgp: bool | None
    result: int
    mods: Modifications | None

    def applies_to(self, peer: PeerInfo) -> bool:
        if self.peer_as is not None and peer.asn not in self.peer_as:
            return False
        if self.session_ebgp is not None and self.session_ebgp != peer.ebgp:
            return False
        if self.peer_addresses is not None:
            try:
                host = host_prefix(peer.address)
            except (OSError, ValueError):
                return False
            if self.peer_addresses.covering(host) is None:
                return False
        return True


def _compile_statement(index: int, stmt: Statement) -> _CompiledStatement:
    c, a = stmt.conditions, stmt.actions
    conds: list[Condition] = []
    if c.prefix_set is not None:
        conds.append(_prefix_set_condition(PrefixSet(
            (Prefix.parse(e.prefix), *e.lengths()) for e in c.prefix_set
        )))
    if c.communities is not None:
        conds.append(_set_condition("communities", c.communities.match, c.communities.values))
    if c.large_communities is not None:
        conds.append(_set_condition("large_communities", c.large_communities.match, c.large_communities.values))
    if c.as_path is not None:
        if c.as_path.contains:
            conds.append(_as_path_contains(c.as_path.contains))
        if c.as_path.regex is not None:
            conds.append(_as_path_regex(c.as_path.regex))
    if c.next_hop_in is not None:
        conds.append(_next_hop_in(PrefixIndex(c.next_hop_in)))
    if c.advertisement_labels is not None:
        conds.append(_labels_condition(dict(c.advertisement_labels)))
    peer_addresses = None
    if c.peer_address is not None:
        peer_addresses = PrefixIndex(p if "/" in p else str(host_prefix(p)) for p in c.peer_address)
    mods = Modifications(
        local_pref=a.set_local_pref,
        distance=a.set_admin_distance,
        add_communities=tuple(dict.fromkeys(a.add_community)),
        add_large_communities=tuple(dict.fromkeys(a.add_large_community)),
        metric=a.set_kernel_metric,
        med=a.set_med,
        prepend=a.prepend_as_path,
        next_hop=a.set_next_hop,
    )
    return _CompiledStatement(
        index=index,
        label=stmt.name or f"statements[{index}]",
        conditions=tuple(conds),
        origin_as=frozenset(c.origin_as) if c.origin_as is not None else None,
        peer_addresses=peer_addresses,
        peer_as=frozenset(c.peer_as) if c.peer_as is not None else None,
        session_ebgp=None if c.session_type is None else c.session_type == "ebgp",
        result=_RESULTS[a.result],
        mods=mods if mods != NO_MODS else None,
    )


class CompiledPolicy:
    """A policy ready to be bound to peers. Immutable; share it between peers."""

    __slots__ = ("name", "default_accept", "statements")

    def __init__(self, name: str, statements: Iterable[_CompiledStatement] = (), default_accept: bool = False):
        self.name = name
        self.default_accept = default_accept
        self.statements = tuple(statements)

    def bind(self, peer: PeerInfo) -> "BoundPolicy":
        return BoundPolicy(self, peer)

    def __repr__(self) -> str:
        action = "accept" if self.default_accept else "reject"
        return f"<CompiledPolicy {self.name}: {len(self.statements)} statements, default {action}>"


class BoundPolicy:
    """A policy specialised for one peer. `evaluate` is the hot path."""

    __slots__ = ("policy", "peer", "_steps", "_default", "_merged", "_accepts")

    def __init__(self, policy: CompiledPolicy, peer: PeerInfo):
        self.policy = policy
        self.peer = peer
        steps = []
        for s in policy.statements:
            if not s.applies_to(peer):
                continue
            conds = s.conditions
            if s.origin_as is not None:
                conds = conds + (_origin_as(s.origin_as, peer.asn),)
            if s.result == _REJECT:
                verdict = shared_verdict(False, s.label, Reason.POLICY_REJECT, NO_MODS, policy.name)
            elif s.result == _ACCEPT:
                verdict = shared_verdict(True, s.label, Reason.POLICY_ACCEPT, s.mods or NO_MODS, policy.name)
            else:
                verdict = None
            steps.append((conds, s.result, s.mods, verdict, s.index))
        self._steps = tuple(steps)
        self._default = shared_verdict(
            policy.default_accept, "default",
            Reason.DEFAULT_ACCEPT if policy.default_accept else Reason.DEFAULT_REJECT,
            NO_MODS, policy.name,
        )
        # Caches keyed by object ids (hashing a Modifications per route would cost more than the
        # evaluation): (id(accumulated mods), statement index) -> (those mods, the mods after that
        # statement); (statement index or -1 for default, id(mods)) -> (those mods, accept verdict).
        # Each value holds the object whose id is in its key, so the id cannot be reused while the
        # entry exists, and the identity check guards against anything else.
        self._merged: dict[tuple[int, int], tuple[Modifications, Modifications]] = {}
        self._accepts: dict[tuple[int, int], tuple[Modifications, Verdict]] = {}

    def evaluate(self, prefix: Prefix, nexthop: Any, attrs: Any) -> Verdict:
        """The verdict of this policy for one route.

        `attrs` needs ``as_path``, ``communities`` and ``large_communities`` (a `BgpAttrs`);
        `nexthop` is the next hop's canonical address text (only ``nextHopIn`` reads it).
        """
        mods = None
        for conds, result, smods, verdict, index in self._steps:
            for cond in conds:
                if not cond(prefix, nexthop, attrs):
                    break
            else:
                if smods is not None:
                    mods = smods if mods is None else self._merge(mods, smods, index)
                if result == _CONTINUE:
                    continue
                if result == _REJECT or mods is None or mods is smods:
                    return verdict
                return self._accept(index, verdict.statement, mods)
        if mods is None or not self.policy.default_accept:
            return self._default
        return self._accept(-1, "default", mods)

    def _merge(self, mods: Modifications, smods: Modifications, index: int) -> Modifications:
        entry = self._merged.get((id(mods), index))
        if entry is None or entry[0] is not mods:
            if len(self._merged) >= _CACHE_LIMIT:
                self._merged.clear()
            entry = self._merged[(id(mods), index)] = (mods, mods.then(smods))
        return entry[1]

    def _accept(self, index: int, label: str, mods: Modifications) -> Verdict:
        entry = self._accepts.get((index, id(mods)))
        if entry is None or entry[0] is not mods:
            if len(self._accepts) >= _CACHE_LIMIT:
                self._accepts.clear()
            reason = Reason.DEFAULT_ACCEPT if index == -1 else Reason.POLICY_ACCEPT
            entry = self._accepts[(index, id(mods))] = (
                mods, shared_verdict(True, label, reason, mods, self.policy.name))
        return entry[1]

    def __repr__(self) -> str:
        return f"<BoundPolicy {self.policy.name} for {self.peer.address}: {len(self._steps)} statements>"


def compile_policy(obj: RoutePolicy) -> CompiledPolicy:
    """Compile one validated `RoutePolicy`."""
    return CompiledPolicy(
        obj.metadata.name,
        (_compile_statement(i, s) for i, s in enumerate(obj.spec.statements)),
        default_accept=obj.spec.default_action == "accept",
    )


def builtin_policies() -> dict[str, CompiledPolicy]:
    return {ACCEPT_ALL: CompiledPolicy(ACCEPT_ALL, (), default_accept=True)}


def compile_policies(objects: Iterable[RoutePolicy]) -> dict[str, CompiledPolicy]:
    """Every policy by name, the built-ins included (no object can take a built-in's name: it is
    not a DNS-1123 name)."""
    out = builtin_policies()
    for obj in objects:
        out[obj.metadata.name] = compile_policy(obj)
    return out


def evaluate(policies: Mapping[str, CompiledPolicy], name: str, peer: PeerInfo, prefix: Prefix,
             nexthop: Any, attrs: Any) -> Verdict:
    """One-off evaluation (binds on the fly; for explain and tests, not for the hot path)."""
    return policies[name].bind(peer).evaluate(prefix, nexthop, attrs)
