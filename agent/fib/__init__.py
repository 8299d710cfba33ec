"""The FIB: what the RIB's winners become in the kernel, and the netlink adapter that writes them.

DOC: `types` (kernel-facing value types: settings, ops, route and link events), `reconciler`
(pure: actual vs wanted routes of our protocol, restart adoption, drift repair, ops to issue),
`codec` (hand-packed RTM_NEWROUTE/DELROUTE messages and route dump parsing: the measured hot
path, cross-checked against pyroute2's message classes in the tests), `netlink` (the adapter:
sockets, batched writes with errors matched by sequence number, dumps, the route monitor),
`nhg` (pure: kernel nexthop objects our routes point at, reference counts, in-place group
replace) and `nhcodec` (their messages).

May import: `agent.core` (see `.importlinter`).
"""
