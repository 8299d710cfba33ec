"""RoutePolicy: the configuration schema of route policies (import now, export later).

DOC: a ``RoutePolicy`` is a Kubernetes-shaped resource like every other kind (`agent.config.base`):
camelCase fields, ``extra="forbid"``, frozen, canonical values, cross-field errors reported at
the exact field. Peers refer to a policy by ``metadata.name``; the built-in ``acceptAll`` (see
`agent.policy`) is not a DNS name, so no object can shadow it.

A policy is an ordered list of statements and a ``defaultAction`` (``reject`` unless said
otherwise)::

    apiVersion: routeagent.io/v1alpha1
    kind: RoutePolicy
    metadata: {name: from-tor}
    spec:
      defaultAction: reject
      statements:
        - name: no-bogons
          conditions:
            prefixSet:
              - {prefix: 10.0.0.0/8, match: orLonger}
              - {prefix: 192.168.0.0/16, le: 24}
          actions: {result: reject}
        - name: prefer-customers
          conditions:
            communities: {match: any, values: ["65000:100"]}
            asPath: {regex: "^65001_"}
          actions: {setLocalPref: 200, addCommunity: [no-export]}
        - name: the-rest
          conditions: {sessionType: ebgp}
          actions: {result: accept}

Conditions (every given one must match; none given matches every route):

* ``prefixSet``: the route's prefix matches one entry. An entry is a network and a length range:
  ``match: exact`` (default) is the network itself, ``match: orLonger`` the network and every
  more specific; ``ge``/``le`` give the range as Cisco does (``le`` alone: from the network's
  length up to ``le``; ``ge`` alone: from ``ge`` to the host length), and then ``match`` must stay
  ``exact``. Entries of both families may be mixed; a route only meets entries of its family.
* ``communities`` / ``largeCommunities``: ``match: any | all | none`` of ``values``. Standard
  communities are ``ASN:VALUE`` (16 bits each) or a well-known name (``no-export`` ...), stored as
  the numeric ``65535:65281``; large ones ``A:B:C`` (32 bits each).
* ``asPath``: ``contains`` (any of the ASNs appears in the path) and/or ``regex``: a Python regex
  searched in the path written as space-separated ASNs (``"65001 65002 65003"``), anchored only by
  ``^``/``$`` as in Cisco and BIRD; ``_`` outside brackets means an AS boundary (start, end or the
  space), so ``_65001_`` matches the ASN 65001 and not 165001.
* ``originAs``: the last AS of the path is one of these (an empty path, a route originated in the
  peer's own AS, has the peer's AS as origin).
* ``peerAddress`` (addresses or prefixes), ``peerAs``, ``sessionType`` (``ebgp``/``ibgp``): who
  sent the route (import) or who will receive it (export).
* ``nextHopIn``: the route's next hop lies in one of these prefixes.

Actions: ``result: accept | reject | continue`` (default ``continue``) and the modifications
``setLocalPref``, ``setAdminDistance``, ``addCommunity``, ``addLargeCommunity``,
``setKernelMetric``. ``accept`` and ``reject`` end the evaluation; modifications of every matching
statement accumulate (a later ``set`` wins, ``add``s are merged) and apply only if the route is
accepted, by a later statement or by ``defaultAction: accept``. A statement needs a result other
than ``continue`` or at least one modification; a ``reject`` statement cannot modify.

`KINDS` maps the kind name to its model, for the loader.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictInt, StrictStr, model_validator
from pydantic_core import InitErrorDetails

from ..policy.aspath import compile_as_path_regex
from .base import (
    U32_MAX,
    Distance,
    DnsLabel,
    IPAddress,
    IPPrefix,
    Resource,
    _at,
    _check_address,
    _check_prefix,
    _error,
    _Model,
    _raise,
    unique_errors,
)

# ---------------------------------------------------------------------------------------------
# Communities, ASNs, AS-path regexes: text forms shared with `agent.policy`
# ---------------------------------------------------------------------------------------------

WELL_KNOWN_COMMUNITIES: dict[str, str] = {
    "graceful-shutdown": "65535:0",  # RFC 8326
    "accept-own": "65535:1",  # RFC 7611
    "llgr-stale": "65535:6",  # RFC 9494
    "no-llgr": "65535:7",  # RFC 9494
    "blackhole": "65535:666",  # RFC 7999
    "no-export": "65535:65281",  # RFC 1997
    "no-advertise": "65535:65282",  # RFC 1997
    "no-export-subconfed": "65535:65283",  # RFC 1997
    "no-peer": "65535:65284",  # RFC 3765
}


def canonical_community(text: str) -> str:
    """``"65000:0100"`` -> ``"65000:100"``, ``"no-export"`` -> ``"65535:65281"``; ValueError if invalid.

    The canonical text is what `agent.core.model.BgpAttrs.communities` holds (decimal ``high:low``).
    """
    if text in WELL_KNOWN_COMMUNITIES:
        return WELL_KNOWN_COMMUNITIES[text]
    high, colon, low = text.partition(":")
    if colon and high.isdigit() and low.isdigit() and high.isascii() and low.isascii():
        h, lo = int(high), int(low)
        if h <= 0xFFFF and lo <= 0xFFFF:
            return f"{h}:{lo}"
    raise ValueError(
        f"invalid community {text!r}: expected ASN:VALUE with two numbers 0-65535, or one of "
        + ", ".join(WELL_KNOWN_COMMUNITIES)
    )


def canonical_large_community(text: str) -> str:
    """``"65000:1:2"`` in canonical decimal form; ValueError if invalid (RFC 8092: three u32)."""
    parts = text.split(":")
    if len(parts) == 3 and all(p.isdigit() and p.isascii() and int(p) <= U32_MAX for p in parts):
        return ":".join(str(int(p)) for p in parts)
    raise ValueError(
        f"invalid large community {text!r}: expected GLOBAL:LOCAL1:LOCAL2 with three numbers 0-{U32_MAX}"
    )


def _check_community(value: str) -> str:
    try:
        return canonical_community(value)
    except ValueError as exc:
        raise _error("community", str(exc)) from None


def _check_large_community(value: str) -> str:
    try:
        return canonical_large_community(value)
    except ValueError as exc:
        raise _error("large_community", str(exc)) from None


def _check_regex(value: str) -> str:
    try:
        compile_as_path_regex(value)
    except re.error as exc:
        raise _error("as_path_regex", f"invalid AS-path regex {value!r}: {exc}") from None
    return value


def _check_address_or_prefix(value: str) -> str:
    return _check_prefix(value) if "/" in value else _check_address(value)


Community = Annotated[StrictStr, AfterValidator(_check_community)]
LargeCommunity = Annotated[StrictStr, AfterValidator(_check_large_community)]
Asn = Annotated[StrictInt, Field(ge=1, le=U32_MAX)]
U32 = Annotated[StrictInt, Field(ge=0, le=U32_MAX)]
AsPathRegex = Annotated[StrictStr, AfterValidator(_check_regex)]
AddressOrPrefix = Annotated[StrictStr, AfterValidator(_check_address_or_prefix)]
AsnList = Annotated[tuple[Asn, ...], Field(min_length=1)]
PrefixList = Annotated[tuple[IPPrefix, ...], Field(min_length=1)]
AddressOrPrefixList = Annotated[tuple[AddressOrPrefix, ...], Field(min_length=1)]


# ---------------------------------------------------------------------------------------------
# Conditions
# ---------------------------------------------------------------------------------------------


class PrefixSetEntry(_Model):
    """A network and the prefix lengths it matches."""

    prefix: IPPrefix
    """Network in CIDR notation (IPv4 or IPv6)."""
    match: Literal["exact", "orLonger"] = "exact"
    """exact: the network itself; orLonger: the network and every more specific. Leave it exact with ge/le."""
    ge: StrictInt | None = Field(None, ge=0, le=128)
    """Shortest matching length (Cisco ge); alone it means up to the host length."""
    le: StrictInt | None = Field(None, ge=0, le=128)
    """Longest matching length (Cisco le); alone it means from the network's length."""

    @model_validator(mode="after")
    def _lengths(self) -> "PrefixSetEntry":
        net = ipaddress.ip_network(self.prefix)
        bits, plen = net.max_prefixlen, net.prefixlen
        errors: list[InitErrorDetails] = []
        if self.match == "orLonger" and (self.ge is not None or self.le is not None):
            errors.append(_at(("match",), self.match, "or_longer_with_range",
                              "match orLonger and ge/le are exclusive: ge/le already give the length "
                              "range (orLonger is le: " + str(bits) + ")"))
        for field in ("ge", "le"):
            value = getattr(self, field)
            if value is not None and not plen <= value <= bits:
                errors.append(_at((field,), value, "prefix_length_range",
                                  f"{field} {value} is outside {plen}..{bits}: it must be at least the "
                                  f"length of {self.prefix} and at most {bits}"))
        if self.ge is not None and self.le is not None and self.ge > self.le:
            errors.append(_at(("le",), self.le, "prefix_length_order", f"le {self.le} is below ge {self.ge}"))
        _raise(type(self).__name__, errors)
        return self

    def lengths(self) -> tuple[int, int]:
        """The inclusive range of prefix lengths this entry matches."""
        net = ipaddress.ip_network(self.prefix)
        bits, plen = net.max_prefixlen, net.prefixlen
        if self.ge is None and self.le is None:
            return (plen, bits if self.match == "orLonger" else plen)
        return (plen if self.ge is None else self.ge, bits if self.le is None else self.le)


class CommunityMatch(_Model):
    """Standard (RFC 1997) communities of the route."""

    match: Literal["any", "all", "none"] = "any"
    """any: at least one of values is present; all: every one; none: not one."""
    values: Annotated[tuple[Community, ...], Field(min_length=1)]
    """ASN:VALUE (0-65535 each) or a well-known name (no-export, no-advertise, blackhole ...)."""


class LargeCommunityMatch(_Model):
    """Large (RFC 8092) communities of the route."""

    match: Literal["any", "all", "none"] = "any"
    """any: at least one of values is present; all: every one; none: not one."""
    values: Annotated[tuple[LargeCommunity, ...], Field(min_length=1)]
    """GLOBAL:LOCAL1:LOCAL2, three numbers 0-4294967295."""


class AsPathMatch(_Model):
    """The AS path of the route; when both are given both must match."""

    contains: tuple[Asn, ...] = ()
    """The path contains at least one of these ASNs."""
    regex: AsPathRegex | None = None
    """Regex searched in the space-separated path ("65001 65002"); ^ and $ anchor, _ is an AS boundary."""

    @model_validator(mode="after")
    def _something(self) -> "AsPathMatch":
        if not self.contains and self.regex is None:
            raise _error("as_path_empty", "asPath needs contains, regex or both")
        return self


class Conditions(_Model):
    """What a route must look like for the statement to apply; all given conditions must match."""

    prefix_set: Annotated[tuple[PrefixSetEntry, ...], Field(min_length=1)] | None = None
    """The prefix matches at least one entry (of its own family)."""
    communities: CommunityMatch | None = None
    """Standard community match."""
    large_communities: LargeCommunityMatch | None = None
    """Large community match."""
    as_path: AsPathMatch | None = None
    """AS-path match."""
    origin_as: AsnList | None = None
    """The last AS of the path (the peer's AS for an empty path) is one of these."""
    peer_address: AddressOrPrefixList | None = None
    """The peer's address is one of these addresses or lies in one of these prefixes."""
    peer_as: AsnList | None = None
    """The peer's AS is one of these."""
    session_type: Literal["ebgp", "ibgp"] | None = None
    """The session with the peer is eBGP or iBGP."""
    next_hop_in: PrefixList | None = None
    """The route's next hop lies in one of these prefixes."""
    advertisement_labels: dict[StrictStr, StrictStr] | None = None
    """Export only: the advertisement (`Advertisement` metadata.labels) has all these labels."""


# ---------------------------------------------------------------------------------------------
# Actions, statements, the policy
# ---------------------------------------------------------------------------------------------

_MODIFICATIONS = ("set_local_pref", "set_admin_distance", "add_community", "add_large_community",
                  "set_kernel_metric", "set_med", "prepend_as_path", "set_next_hop")


class Actions(_Model):
    """What a matching statement does: modifications, then accept, reject or continue."""

    result: Literal["accept", "reject", "continue"] = "continue"
    """accept and reject end the evaluation; continue goes on with the next statement."""
    set_local_pref: U32 | None = None
    """LOCAL_PREF of the route."""
    set_admin_distance: Distance | None = None
    """Administrative distance of the route in the RIB (lower wins, 255 never installs)."""
    add_community: tuple[Community, ...] = ()
    """Standard communities added to the route."""
    add_large_community: tuple[LargeCommunity, ...] = ()
    """Large communities added to the route."""
    set_kernel_metric: U32 | None = None
    """Metric of the kernel route (default: the FIB's metric)."""
    set_med: U32 | None = None
    """Export: the MULTI_EXIT_DISC sent with the route."""
    prepend_as_path: StrictInt | None = Field(None, ge=1, le=16)
    """Export: prepend our AS this many extra times."""
    set_next_hop: IPAddress | Literal["self"] | None = None
    """Export: the next hop sent with the route (``self``: our session address)."""

    def modifications(self) -> list[str]:
        """Python names of the modifications this statement makes."""
        return [f for f in _MODIFICATIONS if getattr(self, f) not in (None, ())]

    @model_validator(mode="after")
    def _rules(self) -> "Actions":
        mods = self.modifications()
        if self.result == "continue" and not mods:
            raise _error("no_action", "a statement needs an action: result accept or reject, or at "
                                      "least one modification (setLocalPref, addCommunity ...)")
        if self.result == "reject" and mods:
            fields = type(self).model_fields
            _raise(type(self).__name__, [
                _at((fields[f].alias or f,), getattr(self, f), "modification_with_reject",
                    "a rejected route is not modified: drop this or use result accept/continue")
                for f in mods
            ])
        return self


class Statement(_Model):
    """One step of a policy: if the conditions match, apply the actions."""

    name: DnsLabel | None = None
    """Name shown by explain as the deciding statement (default: statements[INDEX])."""
    conditions: Conditions = Field(default_factory=Conditions)
    """Conditions; none means every route."""
    actions: Actions
    """Actions of a matching route."""


class RoutePolicySpec(_Model):
    default_action: Literal["accept", "reject"] = "reject"
    """What happens to a route no statement accepted or rejected."""
    statements: tuple[Statement, ...] = ()
    """Statements, evaluated in order."""

    @model_validator(mode="after")
    def _unique_names(self) -> "RoutePolicySpec":
        _raise(type(self).__name__, unique_errors(
            self.statements, "statements", "statement name", "duplicate_statement",
            key=lambda s: s.name, sub=("name",)))
        return self


class RoutePolicy(Resource):
    """An ordered route policy, referred to by name from peers (import) and exports."""

    kind: Literal["RoutePolicy"] = "RoutePolicy"
    spec: RoutePolicySpec = Field(default_factory=RoutePolicySpec)


KINDS: dict[str, type[RoutePolicy]] = {"RoutePolicy": RoutePolicy}
