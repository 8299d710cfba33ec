"""BFD (RFC 5880 asynchronous mode, RFC 5881 single hop): codec, sessions, the BFD thread.

DOC: `packet` is the control packet codec (pure), `session` the per-session state machine (pure,
driven by a clock value handed in), `sockets` the UDP sockets (TTL 255 out, TTL 255 required in),
`runtime` the dedicated thread that owns the sockets, the sessions and their timers and tells the
agent about state changes through a thread-safe callback. Nothing here knows about BGP.

May import: nothing of the agent (a leaf beside `agent.core`; see `.importlinter`).
"""
