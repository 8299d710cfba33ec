"""Rules between BGP objects: unique peers, known import policies, one BgpSpeaker."""

import pytest

from agent.config.loader import ConfigError, load_text

PEER = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: {name}}}
spec:
  peerAddress: {addr}
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
{extra}"""
POLICY = """apiVersion: routeagent.io/v1alpha1
kind: RoutePolicy
metadata: {name: fabric}
spec:
  statements:
    - name: pods
      conditions:
        prefixSet: [{prefix: 10.0.0.0/8, match: orLonger}]
      actions: {result: accept}
"""


def problems(text):
    with pytest.raises(ConfigError) as err:
        load_text(text, "c.yaml")
    return [(p.object, p.field, p.message) for p in err.value.problems]


def test_peers_policies_and_speaker_load_together():
    cfg = load_text("---\n".join([
        PEER.format(name="tor1", addr="10.0.0.1", extra="  importPolicy: fabric\n"),
        PEER.format(name="tor2", addr="10.0.1.1", extra="  importPolicy: acceptAll\n"),
        POLICY,
        "apiVersion: routeagent.io/v1alpha1\nkind: BgpSpeaker\nmetadata: {name: s}\nspec: {listenPort: 1790}\n",
    ]))
    assert [p.metadata.name for p in cfg.peers] == ["tor1", "tor2"]
    assert [p.metadata.name for p in cfg.policies] == ["fabric"]
    assert cfg.speaker.spec.listen_port == 1790


def test_unknown_import_policy_is_an_error_naming_the_known_ones():
    out = problems(PEER.format(name="tor1", addr="10.0.0.1", extra="  importPolicy: fabirc\n") + "---\n" + POLICY)
    assert out == [("BgpPeer/tor1", "spec.importPolicy", "no RoutePolicy named 'fabirc' (known: acceptAll, fabric)")]


def test_two_peers_with_one_address_and_two_speakers_are_errors():
    speaker = "apiVersion: routeagent.io/v1alpha1\nkind: BgpSpeaker\nmetadata: {name: %s}\n"
    out = problems("---\n".join([PEER.format(name="a", addr="10.0.0.1", extra=""),
                                 PEER.format(name="b", addr="10.0.0.1", extra=""),
                                 speaker % "s1", speaker % "s2"]))
    fields = sorted((o, f) for o, f, _ in out)
    assert fields == [("BgpPeer/b", "spec.peerAddress"), ("BgpSpeaker/s2", "kind")]
