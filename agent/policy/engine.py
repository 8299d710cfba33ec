"""Route policy machinery: compiled matchers, statements, verdicts (shared by import and export).

DOC: a `RoutePolicy` (schema in `agent.config.policy`) is compiled once into a `CompiledPolicy`;
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

Verdicts and reasons are in `verdict`, prefix structures in `prefixes`, the condition closures in
`conditions`.

Text forms: communities in attributes are canonical decimal ``"65000:100"``, large communities
``"1:2:3"`` (see `agent.config.policy.canonical_community`); next hops canonical address text.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.model import Prefix
from .conditions import (
    PREFIX_SET,
    Condition,
    as_path_contains,
    as_path_regex,
    labels_condition,
    next_hop_in,
    origin_as,
    prefix_set_condition,
    set_condition,
)
from .prefixes import PrefixIndex, PrefixSet, host_prefix
from .verdict import CACHE_LIMIT, NO_MODS, Modifications, Reason, Verdict, shared_verdict

if TYPE_CHECKING:  # the schema lives in the configuration layer above; only its shape is read here
    from ..config.policy import RoutePolicy, Statement

ACCEPT_ALL = "acceptAll"
BUILTIN_POLICIES = frozenset({ACCEPT_ALL})


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
        conds.append(prefix_set_condition(PrefixSet(
            (Prefix.parse(e.prefix), *e.lengths()) for e in c.prefix_set
        )))
    if c.communities is not None:
        conds.append(set_condition("communities", c.communities.match, c.communities.values))
    if c.large_communities is not None:
        conds.append(set_condition("large_communities", c.large_communities.match, c.large_communities.values))
    if c.as_path is not None:
        if c.as_path.contains:
            conds.append(as_path_contains(c.as_path.contains))
        if c.as_path.regex is not None:
            conds.append(as_path_regex(c.as_path.regex))
    if c.next_hop_in is not None:
        conds.append(next_hop_in(PrefixIndex(c.next_hop_in)))
    if c.advertisement_labels is not None:
        conds.append(labels_condition(dict(c.advertisement_labels)))
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

    __slots__ = ("policy", "peer", "_steps", "_default", "_merged", "_accepts", "reads_prefix")

    def __init__(self, policy: CompiledPolicy, peer: PeerInfo):
        self.policy = policy
        self.peer = peer
        steps = []
        for s in policy.statements:
            if not s.applies_to(peer):
                continue
            conds = s.conditions
            if s.origin_as is not None:
                conds = conds + (origin_as(s.origin_as, peer.asn),)
            if s.result == _REJECT:
                verdict = shared_verdict(False, s.label, Reason.POLICY_REJECT, NO_MODS, policy.name)
            elif s.result == _ACCEPT:
                verdict = shared_verdict(True, s.label, Reason.POLICY_ACCEPT, s.mods or NO_MODS, policy.name)
            else:
                verdict = None
            steps.append((conds, s.result, s.mods, verdict, s.index))
        self._steps = tuple(steps)
        # Only prefix-set conditions read the prefix: without one, every prefix of one UPDATE
        # (one attribute set, one next hop) gets the same verdict (the import stage's batches)
        self.reads_prefix = any(getattr(c, "__name__", "") == PREFIX_SET for conds, *_ in steps for c in conds)
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
            if len(self._merged) >= CACHE_LIMIT:
                self._merged.clear()
            entry = self._merged[(id(mods), index)] = (mods, mods.then(smods))
        return entry[1]

    def _accept(self, index: int, label: str, mods: Modifications) -> Verdict:
        entry = self._accepts.get((index, id(mods)))
        if entry is None or entry[0] is not mods:
            if len(self._accepts) >= CACHE_LIMIT:
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
