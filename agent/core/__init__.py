"""The routing core: value types and the decision logic every stage shares (pure, no I/O).

DOC: `model` (prefixes packed in one int, next hops, BGP attributes, candidates, kernel routes,
RIB updates), `bgp` (what crosses the speaker boundary: received routes, peer states, End-of-RIB,
and the commands to announce, withdraw or tear down; `bgp_speaker`: what the speaker says about
itself and about the commands it was given), `bestpath` (BGP decision steps, each
recording its `BestReason`), `resolver` (next-hop reachability through connected routes), `rib`
(administrative distance, then best path and ECMP; emits old-best vs new-best changes), `gate`
(the sync gate that opens when every source finished its initial sync) and `gctune` (the garbage
collector's settings of the agent's processes).

May import: nothing of the agent (the bottom layer; see `.importlinter`).
"""
