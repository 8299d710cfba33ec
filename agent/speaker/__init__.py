"""BGP speaker adapter: ExaBGP as a supervised child, typed events out, typed commands in.

DOC: the package knows nothing of the RIB. `Speaker` (`process`) supervises ExaBGP (restart with
backoff); `child` is one ExaBGP process (interpreter, runtime files, spawn, log); `channel` is
its API connection (the bounded command queue, acks matched to commands, the reader that must
never stop draining ExaBGP's output). ExaBGP runs from the configuration `exabgp_conf.render`
writes for the `BgpPeer` objects (`agent.config.bgp`); `codec.Decoder` turns its JSON API output
into the events of `agent.core.bgp`, and `encoder.encode` turns the commands of `agent.core.bgp`
(`AnnounceRoute`, `WithdrawRoute`, `AnnounceEor`, `Teardown`, `RequestRouteRefresh`) into ExaBGP
API lines. `relay` is the API helper ExaBGP runs. ExaBGP itself is started through `launcher`
(with `exabgp_patches`): two standalone files run by ExaBGP's interpreter that patch ExaBGP 5.0.15
before its own entry point runs (raw UPDATEs, unpaced export, header errors, ``notify``).

May import: `agent.config`, `agent.core` (layers below; see `.importlinter`).
"""
