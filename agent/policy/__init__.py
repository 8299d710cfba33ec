"""Route policy: conditions, actions, verdicts and the prefix index (pure, shared by import and export).

DOC: `engine` compiles a `RoutePolicy` once and evaluates it per route (`Verdict`, `Reason`,
`Modifications`, `PrefixIndex`, the built-in ``acceptAll``); `aspath` translates AS-path regular
expressions (``_`` as an AS boundary). The schema of a `RoutePolicy` lives in
`agent.config.policy`; the engine reads only its shape.

May import: `agent.fib` (nothing today), `agent.core` (see `.importlinter`).
"""
