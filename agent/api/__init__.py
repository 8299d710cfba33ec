"""The agent's outer read-only face: the local HTTP API, the Prometheus metrics, the JSON views.

Owns: `server` (HTTP/1.1 on the agent's event loop: /metrics, /healthz, /readyz, /api/*),
`metrics` (the counters, and a collector that reads sizes at scrape time), `views` (the JSON
shapes of RIB rows, the FIB, candidates) and `readview` (`ReadView`, the narrow protocol through
which all of these read a running agent).

May import: `agent.core`, `agent.fib` (value types only, for formatting) and the layers below it
(see .importlinter), plus prometheus_client. It imports nothing from `agent.daemon`, not even for
type hints: the daemon implements `ReadView` and hands it in (`serve(view, metrics, ...)`,
`Metrics.bind(view)`).
"""
