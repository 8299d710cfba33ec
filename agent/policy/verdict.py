"""Verdicts: why a route was accepted or rejected, and what accepted statements change on it.

DOC: `Reason` is the one enum of why (policy verdicts, and the import stage's guard, RFC 8212
default deny and max-prefix: they all produce `Verdict`s); `Modifications` are the accumulated
changes of accepted statements; `Verdict` is the frozen outcome. Verdicts and modifications are
shared objects (`shared_verdict`), so a stage may keep one per route at the cost of a reference.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..core.model import BgpAttrs, BgpCandidate

CACHE_LIMIT = 8192

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
    BAD_NEXT_HOP = "bad_next_hop"  # unspecified, loopback, multicast, broadcast, 0.0.0.0/8, 240/4
    DEFAULT_ROUTE = "default_route"
    MARTIAN = "martian"
    MAX_PREFIX = "max_prefix"
    AS_LOOP = "as_loop"  # our own AS in the AS_PATH (RFC 4271 9.1.2), beyond the peer's allowOwnAs
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
    Reason.BAD_NEXT_HOP: "the next hop is no unicast address a route can use (unspecified, "
                         "loopback, multicast, broadcast, reserved)",
    Reason.DEFAULT_ROUTE: "default route from a peer not allowed to send defaults",
    Reason.INSIDE_CLUSTER_PREFIX: "inside another node's pod CIDR (only the CIDR itself is accepted)",
    Reason.MARTIAN: "martian prefix (loopback, link-local, multicast ...)",
    Reason.MAX_PREFIX: "over the peer's max-prefix limit",
    Reason.AS_LOOP: "AS_PATH loop: the path holds our own AS (more often than the peer's allowOwnAs)",
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

    def apply(self, attrs: BgpAttrs | BgpCandidate) -> BgpAttrs | BgpCandidate:
        """`attrs` (attributes, or a BGP candidate: its attributes are its fields) with local-pref
        and communities changed (distance and metric are not attributes)."""
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
        return attrs._replace(**changes) if changes else attrs

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
    if len(_VERDICTS) > 4 * CACHE_LIMIT:
        _VERDICTS.clear()
    return _VERDICTS.setdefault(v, v)


