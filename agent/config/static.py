"""The `StaticRoutes` kind: named sets of static routes (any number per configuration).

DOC: a route is a prefix with next hops (several make an ECMP route; a next hop is a gateway, a
device or both) or a blackhole, and an optional administrative distance (default: AgentConfig
``adminDistance.static``). The object name becomes the origin ``static/NAME`` of its routes
(`agent.config.resolve.static_candidates`); a ``nodeSelector`` limits the nodes that install them.
Rules checked here: gateway and prefix of one family, a link-local gateway needs a device, no
duplicate next hop in a route, each prefix at most once per object.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, StrictBool, StrictInt, model_validator
from pydantic_core import InitErrorDetails

from .base import (
    Distance,
    Gateway,
    InterfaceName,
    IPPrefix,
    LabelSelector,
    Resource,
    _at,
    _error,
    _Model,
    _raise,
    unique_errors,
)

_LINK_LOCAL_V6 = ipaddress.ip_network("fe80::/10")


class NextHopSpec(_Model):
    """One next hop: a gateway, a device, or both."""

    gateway: Gateway | None = None
    """Gateway address; same family as the prefix."""
    device: InterfaceName | None = None
    """Outgoing interface; required with an IPv6 link-local gateway."""
    weight: StrictInt = Field(1, ge=1, le=256)
    """Relative weight among the next hops of an ECMP route."""

    @model_validator(mode="after")
    def _gateway_or_device(self) -> "NextHopSpec":
        if self.gateway is None and self.device is None:
            raise _error("next_hop_empty", "a next hop needs a gateway, a device or both")
        if (
            self.device is None
            and self.gateway is not None
            and ipaddress.ip_address(self.gateway) in _LINK_LOCAL_V6
        ):
            _raise(
                type(self).__name__,
                [_at(("gateway",), self.gateway, "link_local_without_device",
                     f"link-local gateway {self.gateway} needs a device: link-local addresses "
                     "are only unique per interface")],
            )
        return self

    def describe(self) -> str:
        parts = [f"via {self.gateway}" if self.gateway else "", f"dev {self.device}" if self.device else ""]
        return " ".join(p for p in parts if p)


class StaticRoute(_Model):
    """One static route: next hops (one or more, ECMP) or a blackhole."""

    prefix: IPPrefix
    """Destination network, IPv4 or IPv6, in CIDR notation without host bits."""
    next_hops: tuple[NextHopSpec, ...] = Field((), max_length=256)
    """Next hops; several make an ECMP route. Exclusive with blackhole."""
    distance: Distance | None = None
    """Administrative distance of this route; default: AgentConfig adminDistance.static."""
    blackhole: StrictBool = False
    """Drop the traffic (kernel blackhole route). Exclusive with nextHops."""

    @model_validator(mode="after")
    def _rules(self) -> "StaticRoute":
        errors: list[InitErrorDetails] = []
        if self.blackhole and self.next_hops:
            errors.append(_at(("blackhole",), True, "blackhole_with_next_hops",
                              "blackhole and nextHops are exclusive: a blackhole route has no next hops"))
        elif not self.blackhole and not self.next_hops:
            errors.append(_at(("nextHops",), [], "no_next_hops",
                              "a route needs nextHops, or blackhole: true"))
        net = ipaddress.ip_network(self.prefix)
        for i, hop in enumerate(self.next_hops):
            if hop.gateway is not None:
                gw = ipaddress.ip_address(hop.gateway)
                if gw.version != net.version:
                    errors.append(_at(
                        ("nextHops", i, "gateway"), hop.gateway, "gateway_family",
                        f"IPv{gw.version} gateway {hop.gateway} for IPv{net.version} prefix "
                        f"{self.prefix}: the families must match",
                    ))
        errors += unique_errors(self.next_hops, "nextHops", "next hop", "duplicate_next_hop",
                                key=lambda h: (h.gateway, h.device), shown=NextHopSpec.describe)
        _raise(type(self).__name__, errors)
        return self

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.prefix)


class StaticRoutesSpec(_Model):
    routes: tuple[StaticRoute, ...] = ()
    """The routes; each prefix at most once per object."""
    node_selector: LabelSelector | None = None
    """The nodes that install these routes (their Node labels); unset: every node."""

    @model_validator(mode="after")
    def _unique_prefixes(self) -> "StaticRoutesSpec":
        _raise(type(self).__name__, unique_errors(self.routes, "routes", "prefix", "duplicate_prefix",
                                                  key=lambda r: r.prefix, sub=("prefix",)))
        return self


class StaticRoutes(Resource):
    """A named set of static routes; their origin is ``static/<metadata.name>``."""

    kind: Literal["StaticRoutes"] = "StaticRoutes"
    spec: StaticRoutesSpec


KINDS = {"StaticRoutes": StaticRoutes}
