"""Import side of BGP: the hijack guard, import policy stage and max-prefix (pure logic).

DOC: ``import`` is a Python keyword, so this package is only reached through
``importlib.import_module(".import", "agent")`` (the composition root does it; tests use
``importlib.import_module("agent.import")``). Modules inside use relative imports.

* `guard` — `Guard`: routes that would hijack the node's own prefixes or addresses, martians and
  (unless allowed per peer) default routes; runs before any policy and cannot be bypassed.
* `stage` — `ImportStage`: per received route: guard, the peer's import policy (RFC 8212 default
  deny for eBGP), max-prefix, then the RIB `Update` with a `Candidate`; counters and per-route
  verdicts for ``explain``.
* `single` — the stage's shortcut for the usual outcome of a one-prefix UPDATE (new, accepted).
* `paths` — ADD-PATH (RFC 7911) routes: each (prefix, path id) of a peer a route of its own
  (guard, policy, max-prefix and counts per path; its own RIB candidate).
* `peer` — `ImportPeer` (a peer's import settings) and `PeerState` (what the stage keeps per
  peer, and how an accepted route becomes a `Candidate`).
* `maxprefix` — `MaxPrefix`: accepted-prefix counts per peer and family and what to do over the
  limit (warn, discard extra, tear down with Cease 6/1 and a restart hold-down).

The policy machinery itself (`agent.policy`; its schema in `agent.config.policy`) is shared with
export. May import: `agent.policy`, `agent.core` (see `.importlinter`).
"""

from .guard import GUARD, MARTIANS, Guard
from .maxprefix import (
    CEASE,
    CEASE_MAX_PREFIXES,
    MaxPrefix,
    MaxPrefixAction,
    MaxPrefixDecision,
    MaxPrefixLimit,
    MaxPrefixState,
    MaxPrefixStatus,
)
from .stage import ImportPeer, ImportResult, ImportStage

__all__ = [
    "CEASE", "CEASE_MAX_PREFIXES", "GUARD", "MARTIANS", "Guard", "ImportPeer", "ImportResult",
    "ImportStage", "MaxPrefix", "MaxPrefixAction", "MaxPrefixDecision", "MaxPrefixLimit",
    "MaxPrefixState", "MaxPrefixStatus",
]
