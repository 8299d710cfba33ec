"""The BGP runtime's views are plain JSON (the API serves them), with max-prefix and export state."""

import importlib
import json

from agent.daemon.bgp import BgpRuntime
from agent.config.resolve import distances
from agent.config.loader import load_text
from agent.core.model import Prefix

CONFIG = """apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: tor1, labels: {role: tor}}
spec:
  peerAddress: 10.0.0.1
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
  importPolicy: acceptAll
  exportPolicy: acceptAll
  maxPrefix: [{family: ipv4-unicast, limit: 100, action: teardown, restartSeconds: 30}]
---
apiVersion: routeagent.io/v1alpha1
kind: Advertisement
metadata: {name: pods}
spec: {prefixes: [10.244.1.0/24], communities: ["65000:100"]}
"""


def test_views_are_json_and_show_max_prefix_and_adverts(tmp_path):
    config = load_text(CONFIG)
    rt = BgpRuntime(importlib.import_module("agent.import"), config, distances(config), ["10.0.0.254/24"],
                    runtime_dir=str(tmp_path))
    peers = json.loads(json.dumps(rt.peer_views(lambda addr: {4: 0, 6: 0})))
    assert peers[0]["families"]["ipv4-unicast"]["maxPrefix"] == {
        "limit": 100, "action": "teardown", "count": 0, "state": "ok", "discarded": 0}
    adverts = json.loads(json.dumps(rt.advert_views()))
    assert adverts[0]["prefix"] == "10.244.1.0/24"
    assert adverts[0]["peers"]["10.0.0.1"]["communities"] == ["65000:100"]
    assert adverts[0]["peers"]["10.0.0.1"]["announced"] is False  # no session yet
    export = json.loads(json.dumps(rt.explain_export(Prefix.parse("10.244.1.0/24"))))
    assert export == [{"peer": "10.0.0.1", "advertised": True, "sources": ["pods"],
                       "policy": "acceptAll/default", "announced": False}]
    # the advertised prefix is protected by the import guard
    assert rt.guard.check(Prefix.parse("10.244.1.0/25")) is not None


def test_show_peers_counts_are_current_a_route_refresh_does_not_count_twice(tmp_path):
    """Issue 14.5: received / accepted / rejected / installed are what the peer holds now; the
    cumulative counts stay in the stage's counters (metrics)."""
    from agent.core.bgp import Announced, Family, PathAttrs, PeerState, PeerStatus, RouteUpdate

    config = load_text(CONFIG)
    rt = BgpRuntime(importlib.import_module("agent.import"), config, distances(config), ["10.0.0.254/24"],
                    runtime_dir=str(tmp_path))
    rt.speaker.send = lambda cmd: None
    peer, attrs = "10.0.0.1", PathAttrs(as_path=(65001,))
    table = (Announced(Prefix.parse("192.0.2.0/24"), peer, attrs),
             Announced(Prefix.parse("198.51.100.0/24"), peer, attrs),
             Announced(Prefix.parse("10.244.1.0/24"), peer, attrs))  # our own prefix: guard rejects
    rt.handle(PeerState(peer, PeerStatus.UP), 0)
    for _ in range(3):  # the first announcement, then two route refreshes
        rt.handle(RouteUpdate(peer, Family.IPV4_UNICAST, table), 1)
    fam = rt.peer_views(lambda addr: {4: 2})[0]["families"]["ipv4-unicast"]
    assert {k: fam[k] for k in ("received", "accepted", "rejected", "rejectedNotKept", "installed")} == {
        "received": 3, "accepted": 2, "rejected": 1, "rejectedNotKept": 0, "installed": 2}
    assert rt.stage.received[(peer, 4)] == 9 and rt.stage.accepted[(peer, 4)] == 6  # metrics: cumulative
    rt.handle(RouteUpdate(peer, Family.IPV4_UNICAST, (), (Prefix.parse("198.51.100.0/24"),)), 2)
    fam = rt.peer_views(lambda addr: {4: 1})[0]["families"]["ipv4-unicast"]
    assert (fam["received"], fam["accepted"], fam["rejected"]) == (2, 1, 1)
    rt.handle(PeerState(peer, PeerStatus.DOWN, "gone"), 3)
    fam = rt.peer_views(lambda addr: {})[0]["families"]["ipv4-unicast"]
    assert (fam["received"], fam["accepted"], fam["rejected"], fam["installed"]) == (0, 0, 0, 0)
    rt._spawner.cancel()
