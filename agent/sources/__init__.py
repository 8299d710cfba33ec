"""Route sources feeding the RIB: kernel (foreign and connected routes), static routes, node
addresses, and BGP sessions.

DOC: each source turns its input into RIB `Update`s (mark-and-sweep where the input is re-sent
whole): `kernel` (foreign routes as candidates, connected prefixes for next-hop resolution),
`static` (the configured static routes), `addresses` (the node's own addresses, for the guard),
`bgp` (session state, End-of-RIB, graceful-restart stale marking; routes go through the import
stage).

May import: `agent.speaker`, `agent.config`, `agent.import` (through the composition root),
`agent.export`, `agent.policy`, `agent.fib`, `agent.core` (see `.importlinter`).
"""
