"""BGP speaker adapter: ExaBGP as a supervised child, typed events out, typed commands in.

DOC: the package knows nothing of the RIB. `Speaker` (`process`) runs ExaBGP from the
configuration `exabgp_conf.render` writes for the `BgpPeer` objects (`agent.config.bgp`), decodes
its JSON API output into the events of `agent.core.bgp` (`codec.Decoder`) and encodes the commands
of `agent.core.bgp` (`AnnounceRoute`, `WithdrawRoute`, `AnnounceEor`, `Teardown`,
`RequestRouteRefresh`) as ExaBGP API lines (`codec.encode`). `relay` is the API helper ExaBGP runs.

May import: `agent.config`, `agent.core` (layers below; see `.importlinter`).
"""
