"""What the `BgpPeer` configuration means for the parts of the BGP runtime (pure functions).

DOC: used by `agent.daemon.bgp.BgpRuntime`. `peer_key` is a peer's canonical address, its key in
the stage, the source, the export side and ExaBGP's events. `import_peer` builds the import stage's
settings of a peer (policy, distance, guard allowances, max-prefix, AS-loop detection, and the
interface of its session, for IPv6 link-local next hops). `import_key` is everything that decides
what the import side accepts: when it changes, every peer is asked for a route refresh (ExaBGP
keeps no adj-RIB-in). `protected_prefixes` is what the hijack guard protects from the
configuration (the cluster's share is added by the runtime).
"""

from __future__ import annotations

from ..config.bgp import BgpPeer
from ..core.model import canonical_address
from ..export.desired import owned_prefixes


def peer_key(peer: BgpPeer) -> str:
    return canonical_address(peer.spec.peer_address)


def import_peer(imp, peer: BgpPeer, device: str | None):
    """The `ImportPeer` of `peer` (`imp` is the keyword-named import package); `device`: the
    interface its session runs on."""
    s = peer.spec
    limits = {}
    for mp in s.max_prefix:
        limits[6 if mp.family.value.startswith("ipv6") else 4] = imp.MaxPrefixLimit(
            mp.limit, imp.MaxPrefixAction(mp.action.value), mp.restart_seconds)
    return imp.ImportPeer(
        address=peer_key(peer), asn=s.peer_as, ebgp=s.ebgp, policy=s.import_policy,
        distance=s.admin_distance, allow_default=s.allow_default_route,
        allow_covering=s.allow_covering_routes, max_prefix=limits, local_as=s.local_as,
        allow_own_as=s.allow_own_as, device=device)


def import_key(config, distances) -> tuple:
    """Everything that decides what the import side accepts: a change asks for route refresh.
    (The guard's protected prefixes are handled apart: `BgpRuntime._set_protected`.)"""
    return (
        tuple(p.model_dump_json() for p in config.policies),
        tuple((peer_key(p), p.spec.import_policy, p.spec.admin_distance, p.spec.allow_default_route,
               p.spec.allow_covering_routes, p.spec.peer_as, p.spec.local_as, p.spec.allow_own_as)
              for p in config.peers),
        tuple(sorted((k.value, v) for k, v in distances.items())),
    )


def protected_prefixes(config) -> list:
    """What the guard protects: the configured prefixes and everything the node advertises."""
    return [*config.agent.protected_prefixes, *owned_prefixes(config.adverts)]
