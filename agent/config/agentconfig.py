"""The `AgentConfig` kind: agent-wide settings (at most one per configuration).

DOC: FIB table/protocol/metric and timers (`FibSpec`), administrative distances per source kind
(`AdminDistanceSpec`), ECMP width, the node's protected prefixes and Service CIDRs (the hijack
guard), the local API address and the optional metrics listener (`ApiSpec`). Everything has a
default; no AgentConfig means all defaults (`agent.config.resolve.Config`). The protocol number
is checked against the kernel's and other routing daemons' numbers: the agent deletes every route
of its protocol it does not want, so sharing one would delete theirs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictInt

from ..fib.types import PROTOCOL_NAMES
from .base import U32_MAX, Distance, IPAddress, IPPrefix, Resource, _error, _Model

# rtm_protocol values that belong to the kernel and iproute2 (unspec, redirect, kernel, boot, static).
RESERVED_PROTOCOLS = range(0, 5)


def _check_protocol(value: int) -> int:
    if value in RESERVED_PROTOCOLS:
        raise _error(
            "reserved_protocol",
            f"protocol {value} ({PROTOCOL_NAMES[value]}) is reserved: 0-4 are unspec, redirect, "
            "kernel, boot and static, which belong to the kernel and to other tools; the agent "
            "must own its routes under a protocol number of its own (default 201)",
        )
    if value in PROTOCOL_NAMES:
        raise _error(
            "foreign_protocol",
            f"protocol {value} belongs to {PROTOCOL_NAMES[value]!r}: the agent treats every route "
            "of its protocol as its own and deletes the ones it does not want; choose a number "
            "no other routing daemon uses (default 201)",
        )
    return value



class FibSpec(_Model):
    """Where and how the agent programs its kernel routes."""

    table: StrictInt = Field(254, ge=1, le=U32_MAX)
    """Kernel routing table (254 = main)."""
    protocol: Annotated[StrictInt, Field(ge=0, le=255), AfterValidator(_check_protocol)] = 201
    """rtm_protocol of our routes; 0-4 (kernel, boot, static ...) and numbers of known daemons are refused."""
    metric: StrictInt = Field(20, ge=0, le=U32_MAX)
    """Metric (priority) of our routes."""
    full_scan_seconds: StrictInt = Field(60, ge=1)
    """Period of the full kernel table scan that catches drift the route monitor missed."""
    stale_seconds: StrictInt = Field(120, ge=0)
    """After a restart, how long adopted routes wait for their sources before being swept."""
    nexthop_objects: Literal["auto", "on", "off"] = "auto"
    """Install routes through kernel nexthop objects (`ip nexthop`, Linux >= 5.3): a failed or
    recovered ECMP member is one group write instead of one write per route. auto: where the
    kernel has them (decided at start); changes take effect at the next restart."""


class AdminDistanceSpec(_Model):
    """Administrative distance per source kind: lower wins, 255 = never install."""

    connected: Distance = 0
    """Foreign kernel routes of proto kernel (interface subnets)."""
    kernel: Distance = 0
    """Other foreign kernel routes (boot, static, dhcp, other daemons)."""
    static: Distance = 1
    """Static routes of this configuration (a route's own distance overrides it)."""
    ebgp: Distance = 20
    """Routes learned over eBGP."""
    ibgp: Distance = 200
    """Routes learned over iBGP."""


class ApiSpec(_Model):
    """The local HTTP API (metrics, health, JSON for the CLI) and the optional metrics listener."""

    address: IPAddress = "127.0.0.1"
    """Listen address of the whole API (/api/* for the CLI included): keep it on the host."""
    port: StrictInt = Field(9180, ge=0, le=65535)
    """Listen port (0 = any free port)."""
    metrics_address: IPAddress | None = None
    """Listen address of a second listener that serves only /metrics, /healthz and /readyz, for
    scraping and probes from other hosts; unset: no second listener."""
    metrics_port: StrictInt = Field(9181, ge=0, le=65535)
    """Port of the metrics listener (0 = any free port)."""


class AgentConfigSpec(_Model):
    fib: FibSpec = Field(default_factory=FibSpec)
    """Kernel routing table settings."""
    admin_distance: AdminDistanceSpec = Field(default_factory=AdminDistanceSpec)
    """Administrative distance per source kind."""
    max_paths: StrictInt = Field(16, ge=1, le=256)
    """Largest number of equal candidates combined into one ECMP route."""
    protected_prefixes: tuple[IPPrefix, ...] = Field((), max_length=4096)
    """The node's own prefixes (pod CIDRs, pools, VIPs): routes from BGP peers equal to, inside
    or covering them are refused by the hijack guard."""
    api: ApiSpec = Field(default_factory=ApiSpec)
    """Local HTTP API."""
    service_cidrs: tuple[IPPrefix, ...] = Field((), max_length=16, alias="serviceCIDRs")
    """The cluster's Service CIDRs (kube-apiserver --service-cluster-ip-range): protected by the
    hijack guard, with the CIDRs of ServiceCIDR objects (networking.k8s.io/v1)."""



class AgentConfig(Resource):
    """Agent-wide settings; at most one per configuration."""

    kind: Literal["AgentConfig"] = "AgentConfig"
    spec: AgentConfigSpec = Field(default_factory=AgentConfigSpec)


KINDS = {"AgentConfig": AgentConfig}
