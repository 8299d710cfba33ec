"""A peer removed from the configuration gets Cease 6/3 (Peer De-configured, RFC 4486): BIRD
withdraws our routes at once instead of keeping them for a graceful restart (issue 16, item 1)."""

from __future__ import annotations

import re
import signal
import time

from testlab.bird import base_config, bgp_protocol
from testlab.netns import wait_for
from conftest import HEADER, agent_config, bgp_peer

POD4, POD6 = "10.244.1.0/24", "fd00:244:1::/64"
PODS = (f"{HEADER}kind: Advertisement\nmetadata:\n  name: pods\n  labels: {{type: pod}}\nspec:\n"
        f"  prefixes: [\"{POD4}\", \"{POD6}\"]\n")
POLICY = "  importPolicy: acceptAll\n  exportPolicy: acceptAll\n"


def tor() -> str:
    """BIRD with graceful restart on both sessions (n4 over IPv4, n6 over IPv6)."""
    protos = [
        bgp_protocol("n4", local="10.0.0.1", local_as=65001, neighbor="10.0.0.254", neighbor_as=65000),
        bgp_protocol("n6", local="fd00::1", local_as=65001, neighbor="fd00::254", neighbor_as=65000, families=(6,)),
    ]
    return base_config("10.0.0.1") + "\n".join(protos)


def has_route(bird, prefix: str, table: str) -> bool:
    return "BGP.as_path" in bird.cmd("show", "route", "all", "for", prefix, "table", table, check=False)


def test_removed_peer_gets_cease_6_3_and_withdraws_at_once(bgp_lab):
    node = bgp_lab.node
    bird = bgp_lab.bird("tor", tor())
    e4 = bgp_peer("e4", "10.0.0.1", "10.0.0.254", extra=POLICY)
    e6 = bgp_peer("e6", "fd00::1", "fd00::254", extra=POLICY)
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("objects.yaml", "---\n".join([e4, e6, PODS]))
    proc = node.start()
    wait_for(lambda: has_route(bird, POD4, "master4") and has_route(bird, POD6, "master6"), 30,
             what="our prefixes at BIRD")
    assert "Graceful restart" in bird.cmd("show", "protocols", "all", "n4")  # negotiated
    # e4 deleted from the configuration (e6 stays)
    node.write("objects.yaml", "---\n".join([e6, PODS]))
    t0 = time.monotonic()
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: not has_route(bird, POD4, "master4"), 10, interval=0.02, what="POD4 withdrawn at BIRD")
    elapsed = time.monotonic() - t0
    log = bird.log.read_text()
    assert re.search(r"n4: Received: Peer de-configured", log), log[-2000:]
    assert "n4: Neighbor graceful restart detected" not in log
    print(f"withdrawn at BIRD {elapsed:.3f}s after the SIGHUP")
    assert elapsed < 2.0, f"BIRD kept our route {elapsed:.2f}s after the reload"  # not 120 s of GR
    assert has_route(bird, POD6, "master6")  # the other session is untouched
    assert "n6: Received" not in log
    peers = node.api("/api/peers")
    assert peers is not None and "10.0.0.1" not in str(peers)  # the agent forgot the peer
