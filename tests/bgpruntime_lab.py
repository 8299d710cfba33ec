"""A `BgpRuntime` without ExaBGP, for the tests of the BGP runtime (tests/test_bgpruntime_*.py)."""

from __future__ import annotations

import importlib

from agent.config.resolve import distances
from agent.config.loader import load_text
from agent.daemon.bgp import BgpRuntime


def tor1_config(peer_as: int = 65001, families: str = "[ipv4-unicast, ipv6-unicast]", extra: str = "") -> str:
    """BgpPeer tor1 (10.0.0.1, our AS 65000, import policy acceptAll) and the pods advertisement
    (10.244.1.0/24); `extra` is more lines of the peer's spec."""
    return f"""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: tor1}}
spec:
  peerAddress: 10.0.0.1
  peerAS: {peer_as}
  localAS: 65000
  routerId: 10.0.0.254
  families: {families}
  importPolicy: acceptAll
{extra}---
apiVersion: routeagent.io/v1alpha1
kind: Advertisement
metadata: {{name: pods}}
spec: {{type: podCIDR, prefixes: [10.244.1.0/24]}}
"""


def recording_runtime(config_text: str, tmp_path) -> BgpRuntime:
    """The runtime for `config_text`; its speaker is never started and `rt.sent` records every
    command it would have sent; `rt.config` is the loaded configuration."""
    config = load_text(config_text)
    rt = BgpRuntime(importlib.import_module("agent.import"), config, distances(config), ["10.0.0.254/24"],
                    runtime_dir=str(tmp_path))
    rt.sent = []
    rt.speaker.send = rt.sent.append
    rt.config = config
    return rt
