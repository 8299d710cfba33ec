"""Export side of BGP: which prefixes each peer should receive, and the difference to send.

DOC: `desired` (pure: the node's advertisements through each peer's export policy into
per-peer desired adverts with their attributes) and `reconciler` (pure + diff: desired vs what
the speaker was told, as `agent.core.bgp` commands; re-announce on session up, End-of-RIB).

May import: `agent.policy`, `agent.fib`, `agent.core` (see `.importlinter`).
"""
