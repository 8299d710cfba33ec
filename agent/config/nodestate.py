"""The per-node status object: `RouteAgentNodeState`, one per Node, written by that node's agent.

DOC: configuration kinds (`agent.config.kinds.KINDS`) are read; this one is only written. Its name is the
Node's name and its ``spec`` only says which node it describes; everything observed goes into
``status`` (the status subresource), so RBAC can grant the agent ``create`` on the object and
``update``/``patch`` on ``routeagentnodestates/status`` and nothing on any spec. The status shape
(`agent.daemon.status.node_status`):

    status:
      updated: "2026-12-03T10:00:00Z"
      ready: true
      peers:
      - {name: tor-a, address: 10.0.0.1, state: up, since: ..., families:
          {ipv4-unicast: {received: 10, accepted: 9, rejected: 1, installed: 9, advertised: 3}}}
      advertised: {ipv4: 3, ipv6: 1}
      installed: 9
      configErrors: ["BgpPeer/x: spec.peerAS: ..."]

It lives apart from `agent.config.kinds` so `route-agent validate` does not take it for configuration;
`agent.config.crds` generates its CRD with the others.
"""

from __future__ import annotations

from typing import Literal

from .base import DnsSubdomain, Resource, _Model


class RouteAgentNodeStateSpec(_Model):
    node_name: DnsSubdomain
    """The Node this state describes (equal to metadata.name)."""


class RouteAgentNodeState(Resource):
    """Observed routing state of one node's route-agent (peers, prefix counts), in status."""

    kind: Literal["RouteAgentNodeState"] = "RouteAgentNodeState"
    spec: RouteAgentNodeStateSpec


STATUS_KINDS = {"RouteAgentNodeState": RouteAgentNodeState}
