"""BFD configuration: BfdProfile objects and a peer's spec.bfd (a profile or inline timers)."""

import pytest

from agent.config.bfd import effective_timers
from agent.config.loader import ConfigError, load_text

PEER = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: {name}}}
spec:
  peerAddress: {addr}
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
  bfd: {bfd}
"""
PROFILE = """apiVersion: routeagent.io/v1alpha1
kind: BfdProfile
metadata: {{name: {name}}}
spec: {spec}
"""


def problems(text):
    with pytest.raises(ConfigError) as err:
        load_text(text, "c.yaml")
    return [(p.object, p.field, p.message) for p in err.value.problems]


def test_profile_inline_and_defaults():
    cfg = load_text("---\n".join([
        PEER.format(name="a", addr="10.0.0.1", bfd="{profile: fast}"),
        PEER.format(name="b", addr="10.0.0.2", bfd="{minRx: 50, multiplier: 5}"),
        PEER.format(name="c", addr="10.0.0.3", bfd="{}"),
        PROFILE.format(name="fast", spec="{minRx: 100, minTx: 120, multiplier: 4}"),
    ]))
    timers = {p.metadata.name: effective_timers(p.spec.bfd, cfg.bfd_profiles) for p in cfg.peers}
    assert timers == {"a": (100, 120, 4), "b": (50, 300, 5), "c": (300, 300, 3)}


def test_profile_defaults_and_peer_without_bfd():
    cfg = load_text("---\n".join([
        PROFILE.format(name="p", spec="{}"),
        PEER.format(name="a", addr="10.0.0.1", bfd="{profile: p}").replace("  bfd: {profile: p}\n", ""),
    ]))
    assert cfg.peers[0].spec.bfd is None
    assert (cfg.bfd_profiles[0].spec.min_rx, cfg.bfd_profiles[0].spec.multiplier) == (300, 3)


def test_unknown_profile_names_the_field():
    out = problems("---\n".join([PEER.format(name="a", addr="10.0.0.1", bfd="{profile: fats}"),
                                 PROFILE.format(name="fast", spec="{}")]))
    assert out == [("BgpPeer/a", "spec.bfd.profile", "no BfdProfile named 'fats' (known: fast)")]


def test_profile_and_timers_are_exclusive():
    out = problems(PEER.format(name="a", addr="10.0.0.1", bfd="{profile: fast, minTx: 100}"))
    assert [(o, f) for o, f, _ in out] == [("BgpPeer/a", "spec.bfd.minTx")]
    assert "cannot be set together with profile" in out[0][2]


@pytest.mark.parametrize("bfd,field", [
    ("{minRx: 5}", "spec.bfd.minRx"),
    ("{minTx: 60001}", "spec.bfd.minTx"),
    ("{multiplier: 1}", "spec.bfd.multiplier"),
    ("{multiplier: 256}", "spec.bfd.multiplier"),
    ("{minRx: '100'}", "spec.bfd.minRx"),
    ("{echo: true}", "spec.bfd.echo"),
])
def test_bad_peer_timers(bfd, field):
    out = problems(PEER.format(name="a", addr="10.0.0.1", bfd=bfd))
    assert [f for _, f, _ in out] == [field]


def test_bad_profile_field():
    out = problems(PROFILE.format(name="p", spec="{multiplier: 0}"))
    assert [(o, f) for o, f, _ in out] == [("BfdProfile/p", "spec.multiplier")]
