"""BFD configuration: the `BfdProfile` kind, and a peer's ``bfd`` settings.

DOC: as frr-k8s and MetalLB model it, a named `BfdProfile` (cluster-scoped, any number) holds
the timers, and a `BgpPeer` turns BFD on with ``spec.bfd``: either ``{profile: NAME}`` (the
profile must exist: `agent.config.resolve.find_conflicts`) or the timers inline
(``{minRx, minTx, multiplier}``, every one optional), never both; ``bfd: {}`` is BFD with the
defaults. Timers in milliseconds; defaults 300 / 300 / 3 as frr-k8s and MetalLB; bounds as
MetalLB's (10-60000 ms, multiplier 2-255). `effective_timers(bfd, profiles)` resolves a peer's
settings into the (min_rx, min_tx, multiplier) triple the BFD sessions use.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictInt, model_validator

from .base import DnsSubdomain, Resource, _at, _Model, _raise

DEFAULT_MIN_RX = 300
DEFAULT_MIN_TX = 300
DEFAULT_MULTIPLIER = 3


class BfdProfileSpec(_Model):
    """BFD timers, shared by the peers that name this profile."""

    min_rx: StrictInt = Field(DEFAULT_MIN_RX, ge=10, le=60000)
    """Shortest interval between received control packets we ask of the peer, in ms."""
    min_tx: StrictInt = Field(DEFAULT_MIN_TX, ge=10, le=60000)
    """Shortest interval between the control packets we send, in ms (the peer may ask for fewer)."""
    multiplier: StrictInt = Field(DEFAULT_MULTIPLIER, ge=2, le=255)
    """Packets the peer may miss before it declares the session down (its detection time is
    this times the interval it receives at)."""


class BfdProfile(Resource):
    """Named BFD timers (``BgpPeer spec.bfd.profile``)."""

    kind: Literal["BfdProfile"] = "BfdProfile"
    spec: BfdProfileSpec = Field(default_factory=BfdProfileSpec)


class PeerBfd(_Model):
    """BFD (RFC 5880/5881, single hop) for this session: a profile, or timers given here."""

    profile: DnsSubdomain | None = None
    """Name of a BfdProfile; not with the timers below."""
    min_rx: StrictInt | None = Field(None, ge=10, le=60000)
    """Shortest interval between received control packets, in ms; default 300."""
    min_tx: StrictInt | None = Field(None, ge=10, le=60000)
    """Shortest interval between sent control packets, in ms; default 300."""
    multiplier: StrictInt | None = Field(None, ge=2, le=255)
    """Detect multiplier; default 3."""

    @model_validator(mode="after")
    def _profile_or_timers(self) -> "PeerBfd":
        if self.profile is not None:
            errors = [_at((name,), value, "bfd_profile_and_timers",
                          f"{name} cannot be set together with profile (the profile {self.profile!r} "
                          "holds the timers)")
                      for name, value in (("minRx", self.min_rx), ("minTx", self.min_tx),
                                          ("multiplier", self.multiplier)) if value is not None]
            _raise(type(self).__name__, errors)
        return self


def effective_timers(bfd: PeerBfd, profiles) -> tuple[int, int, int]:
    """(min_rx, min_tx, multiplier) of a peer: its profile's (`profiles`: BfdProfile objects, one
    of them named so: checked by the loader), else its own values, else the defaults."""
    if bfd.profile is not None:
        spec = next(p.spec for p in profiles if p.metadata.name == bfd.profile)
        return spec.min_rx, spec.min_tx, spec.multiplier
    return (DEFAULT_MIN_RX if bfd.min_rx is None else bfd.min_rx,
            DEFAULT_MIN_TX if bfd.min_tx is None else bfd.min_tx,
            DEFAULT_MULTIPLIER if bfd.multiplier is None else bfd.multiplier)


KINDS = {"BfdProfile": BfdProfile}
