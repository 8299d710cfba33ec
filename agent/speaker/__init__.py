"""BGP speaker adapter: ExaBGP as a supervised child, typed events out, typed commands in.

DOC: the package knows nothing of the RIB. `Speaker` (`process`) runs ExaBGP from the
configuration `exabgp_conf.render` writes for the `BgpPeer` objects (`models`), decodes its JSON
API output into the events of `events` (`codec.Decoder`) and sends the commands of `codec`
(`AnnounceRoute`, `WithdrawRoute`, `AnnounceEor`, `Teardown`, `RequestRouteRefresh`).
`relay` is the API helper ExaBGP runs; `birdlab` runs BIRD 2 peers for tests and benchmarks.
"""

from .codec import (
    AnnounceEor,
    AnnounceRoute,
    CodecError,
    Command,
    Decoder,
    RequestRouteRefresh,
    Teardown,
    WithdrawRoute,
    decode,
    encode,
)
from ..core.bgp import (
    Ack,
    Announced,
    EndOfRib,
    Event,
    Family,
    GracefulRestart,
    Notification,
    Open,
    PathAttrs,
    PeerState,
    PeerStatus,
    RouteRefresh,
    RouteUpdate,
    SpeakerRestarted,
    SpeakerShutdown,
)
from .exabgp_conf import ExabgpConfig, read_secrets, render
from ..config.bgp import KINDS, BgpPeer, BgpPeerSpec, BgpSpeaker, BgpSpeakerSpec, MaxPrefixAction, MaxPrefixSpec, SecretError
from .process import Speaker, resolve_interpreter

__all__ = [
    "Ack", "AnnounceEor", "AnnounceRoute", "Announced", "BgpPeer", "BgpPeerSpec", "BgpSpeaker",
    "BgpSpeakerSpec", "CodecError", "Command", "Decoder", "EndOfRib", "Event", "ExabgpConfig",
    "Family", "GracefulRestart", "KINDS", "MaxPrefixAction", "MaxPrefixSpec", "Notification", "Open",
    "PathAttrs", "PeerState", "PeerStatus", "RequestRouteRefresh", "RouteRefresh", "RouteUpdate",
    "SecretError", "Speaker", "SpeakerRestarted", "SpeakerShutdown", "Teardown", "WithdrawRoute",
    "decode", "encode", "read_secrets", "render", "resolve_interpreter",
]
