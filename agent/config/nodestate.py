"""The per-node status object: `RouteAgentNodeState`, one per Node, written by that node's agent.

DOC: configuration kinds (`agent.config.kinds.KINDS`) are read; this one is only written. Its name is the
Node's name and its ``spec`` only says which node it describes; everything observed goes into
``status`` (the status subresource), so RBAC can grant the agent ``create`` on the object and
``update``/``patch`` on ``routeagentnodestates/status`` and nothing on any spec. The status shape
(`agent.daemon.status.node_status`):

    status:
      updated: "2026-12-03T10:00:00Z"
      ready: true
      configSource: live
      apiServer: {connected: true, watchStalls: 0, lastError: ""}
      peersUp: 1
      peersTotal: 1
      peers:
      - {name: tor-a, address: 10.0.0.1, state: up, reason: "", families:
          {ipv4-unicast: {received: 10, accepted: 9, rejected: 1, rejectedNotKept: 0,
                          installed: 9, advertised: 3}}}
      installed: 9
      advertised: {ipv4: 3, ipv6: 0}
      advertisedTotal: 3
      configErrors: ["BgpPeer/x (resourceVersion 12): spec.peerAS: ..."]
      warnings: []

`RouteAgentNodeStateStatus` models it, with a description per field saying whether a count is
current or cumulative (the CRD's status schema is generated from it, so ``kubectl explain
routeagentnodestate.status.peers.families`` says the same). Every count is current, so they add
up: received = accepted + rejected per peer and family, ``advertised.<family>`` is the sum of
the peers' ``advertised`` in that family, ``advertisedTotal`` the sum of both, ``peersUp <=
peersTotal = len(peers)``. The agent replaces the whole status at each write (a JSON patch, not a
merge patch, which would leave keys of an older status behind).

It lives apart from `agent.config.kinds` so `route-agent validate` does not take it for configuration;
`agent.config.crds` generates its CRD with the others.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from .base import DnsSubdomain, Resource, _Model


class RouteAgentNodeStateSpec(_Model):
    node_name: DnsSubdomain
    """The Node this state describes (equal to metadata.name)."""


def _count():
    return Field(ge=0)



class FamilyCounts(_Model):
    """One peer's prefixes of one address family. Every count is current (what holds now), never a
    total since start: received = accepted + rejected always, and a route refresh or a session
    re-established does not count a prefix twice. Totals since start are Prometheus counters
    (route_agent_bgp_prefixes_received_total ...)."""

    received: StrictInt = _count()
    """Current: prefixes the peer advertises to this node now (accepted + rejected)."""
    accepted: StrictInt = _count()
    """Current: received prefixes the import guard and policy accepted (in the RIB)."""
    rejected: StrictInt = _count()
    """Current: received prefixes refused by the guard, the policy or max-prefix."""
    rejected_not_kept: StrictInt = _count()
    """Current: rejected prefixes beyond the store of rejected routes; when > 0, received and
    rejected are lower bounds."""
    installed: StrictInt = _count()
    """Current: accepted prefixes of this peer that are RIB winners installed in the kernel (a
    multipath route counts at each of its peers; refreshed at most every 10 s, so for a few
    seconds it may lag accepted)."""
    advertised: StrictInt = _count()
    """Current: prefixes this node wants advertised to the peer in this family."""


class PeerStatus(_Model):
    """One BGP peer configured for this node."""

    name: StrictStr
    """The BgpPeer's name."""
    address: StrictStr
    """The peer's address."""
    state: StrictStr
    """Session state: up, down, connected (TCP up, OPEN pending) ..."""
    reason: StrictStr = ""
    """Why the session last went down (empty when it never did)."""
    families: dict[StrictStr, FamilyCounts] = Field(default_factory=dict)
    """Counts per configured address family (ipv4-unicast, ipv6-unicast)."""
    bfd: StrictStr | None = None
    """BFD session state (up, down, init, admindown); unset: no BFD for this peer. While it is
    not up the peer's routes are not used."""


class AdvertisedCounts(_Model):
    """Prefixes advertised, per family, summed over the peers (both keys always present)."""

    ipv4: StrictInt = _count()
    """Current: the sum of the peers' ipv4-unicast advertised (a prefix sent to two peers
    counts twice)."""
    ipv6: StrictInt = _count()
    """Current: the sum of the peers' ipv6-unicast advertised."""


class ApiServerStatus(_Model):
    """The agent's connection to the Kubernetes API server."""

    connected: StrictBool
    """Every watch is open and answering: a watch that fails, or stays silent (no event and no
    bookmark) longer than its stall bound, makes this false until it is re-listed."""
    watch_stalls: StrictInt = _count()
    """Cumulative since the agent started: silent watches abandoned and re-listed."""
    last_error: StrictStr = ""
    """The latest error of a watch or list (empty once every watch answers again)."""


class RouteAgentNodeStateStatus(_Model):
    """Observed state, written by the node's agent (status subresource) at most every 10 s and
    when it changed; replaced as a whole at each write. All counts are current values."""

    updated: StrictStr | None = None
    """When the agent wrote this status (RFC 3339, UTC)."""
    ready: StrictBool = False
    """The initial re-sync after the agent's start is done (what /readyz answers)."""
    config_source: Literal["live", "snapshot"] = "live"
    """Where the running configuration comes from: live (the API server's objects) or snapshot (the
    last-known-good snapshot in the state directory, used when the API server could not be listed
    at start; the live view takes over once every resource is listed)."""
    api_server: ApiServerStatus | None = None
    """The connection to the API server."""
    peers_up: StrictInt = _count()
    """Current: peers whose session is up (at most peersTotal)."""
    peers_total: StrictInt = _count()
    """Current: BGP peers configured for this node (the length of peers)."""
    peers: list[PeerStatus] = Field(default_factory=list)
    """Per peer: session state and current counts per family."""
    installed: StrictInt = _count()
    """Current: routes of route-agent in the kernel table, of every origin (BGP, static) and both
    families; a multipath route counts once (so it can be less than the peers' installed summed)."""
    advertised: AdvertisedCounts = Field(default_factory=AdvertisedCounts)
    """Current: prefixes advertised per family, summed over the peers."""
    advertised_total: StrictInt = _count()
    """Current: advertised.ipv4 + advertised.ipv6 (0 without peers)."""
    config_errors: list[StrictStr] = Field(default_factory=list)
    """Configuration problems that are not running (the last good version of each object runs);
    at most 20."""
    warnings: list[StrictStr] = Field(default_factory=list)
    """Configuration accepted but not applied as written (e.g. AgentConfig spec.api in cluster mode)."""


class RouteAgentNodeState(Resource):
    """Observed routing state of one node's route-agent (peers, prefix counts), in status."""

    kind: Literal["RouteAgentNodeState"] = "RouteAgentNodeState"
    spec: RouteAgentNodeStateSpec
    status_model: ClassVar[type[_Model]] = RouteAgentNodeStateStatus


STATUS_KINDS = {"RouteAgentNodeState": RouteAgentNodeState}
