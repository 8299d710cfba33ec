"""Kubernetes adapters: the thin layer between the official `kubernetes` client and the agent.

DOC: `reflector` lists and watches one resource in a daemon thread and hands batches of changed
objects (plain dicts turned into the consumer's values) to a callback, detecting stalled watches;
`httpio` holds what it knows of urllib3 and the client (410/404/stall signals, read timeouts);
`objects` reduces objects at ingest to small frozen values; `services` computes Service VIPs
(eTP/iTP=Local from EndpointSlices); `cluster` turns the watched objects into this node's
configuration; `snapshot` is the envelope of the last-known-good snapshot the cluster state
produces and is seeded from; `source` wires the reflectors, status writes and Events. The test
API server these are tested against lives outside the package, in `testlab.k8sapi`.

May import: `agent.sources`, `agent.speaker`, `agent.config` and below (see `.importlinter`).
"""
