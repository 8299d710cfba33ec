"""BGP speaker adapter: ExaBGP as a supervised child, typed events out, typed commands in.

DOC: the package knows nothing of the RIB. `Speaker` (`process`) supervises ExaBGP (restart with
backoff); `child` is one ExaBGP process (interpreter, runtime files, spawn, log); `channel` is
its API connection (the bounded command queue, acks matched to commands, the reader that must
never stop draining ExaBGP's output). ExaBGP runs from the configuration `exabgp_conf.render`
writes for the `BgpPeer` objects (`agent.config.bgp`); `codec.Decoder` turns its JSON API output
into the events of `agent.core.bgp` (raw UPDATEs through the agent's own pure UPDATE decoder:
`wire`, `wire_nlri`, `wire_attrs`, `wire_values`), and `encoder.encode` turns the commands of
`agent.core.bgp` (`AnnounceRoute`, `WithdrawRoute`, `AnnounceEor`, `Teardown`,
`RequestRouteRefresh`, `SendNotification`) into ExaBGP API lines. `relay` is the API helper ExaBGP
runs; in raw-UPDATE mode it decodes the UPDATEs there, in its own process, and hands the agent
records (`wire_records`). ExaBGP itself is started through `launcher` (with `exabgp_patches`, `exabgp_reading`):
standalone files run by ExaBGP's interpreter that patch ExaBGP 5.0.15 before its own entry point
runs (raw UPDATEs, unpaced export, header errors, ``notify``). `batching` hands events over in batches.

May import: `agent.config`, `agent.core` (layers below; see `.importlinter`).
"""
