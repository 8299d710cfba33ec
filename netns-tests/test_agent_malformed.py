"""A malformed UPDATE from a raw test speaker, through the real agent (ExaBGP with the launcher,
raw UPDATEs, the agent's decoder), handled per RFC 7606 while another peer's routes stay.

The raw speaker (testlab/rawspeaker.py, AS 65002, 10.0.1.1 in the ToR namespace) is the
agent's second peer beside a BIRD (10.0.0.1): it announces one valid route, then re-announces
it with an ORIGIN of two octets (treat-as-withdraw: the route leaves the kernel, the session
stays), then sends an UPDATE with an unrecognised well-known attribute (flags 0x40, type 99:
NOTIFICATION 3/2 with the attribute as data, RFC 4271 6.3). BIRD's routes never move.
"""

from __future__ import annotations

import asyncio

from testlab import bgpwire as w
from testlab.rawspeaker import RawSpeaker
from conftest import agent_config, bgp_peer, tor_config

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
RAW = "203.0.113.0/24"
PEERS = (bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra="  importPolicy: acceptAll\n") + "---\n"
         + bgp_peer("raw", "10.0.1.1", "10.0.1.254", peer_as=65002,
                    extra="  importPolicy: acceptAll\n  gracefulRestartSeconds: 0\n"))


def announce(prefix: str, origin: bytes = w.origin(0), extra: bytes = b"") -> bytes:
    return w.update(attrs=origin + w.as_path([65002]) + w.next_hop("10.0.1.1") + extra, nlri=w.nlri([prefix]))


def update_errors(node) -> dict[str, float]:
    out = {}
    for line in node.api("/metrics").splitlines():
        if line.startswith('route_agent_bgp_update_errors_total{') and 'peer="10.0.1.1"' in line:
            action = line.split('action="')[1].split('"')[0]
            out[action] = float(line.rsplit(" ", 1)[1])
    return out


async def test_malformed_updates_are_handled_per_rfc7606_and_other_peers_keep_their_routes(bgp_lab):
    node = bgp_lab.node
    bgp_lab.bird("tor", tor_config(V4, (), bgp_extra="    strict bind on;"))  # 10.0.1.1:179 is the raw speaker's
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    node.write("peers.yaml", PEERS)
    raw = RawSpeaker(65002, "10.0.1.1", hold_time=30)
    await raw.listen("10.0.1.1", 179, netns=bgp_lab.tor)
    node.start(wait=False)
    try:
        await raw.accepted(timeout=30)
        await raw.establish(timeout=20)
        await asyncio.to_thread(node.wait_routes, lambda r: set(V4) <= set(r), timeout=30)

        raw.send_update(announce(RAW))
        r = await asyncio.to_thread(node.wait_routes, lambda r: RAW in r, timeout=15)
        assert r[RAW]["gateway"] == "10.0.1.1"

        # ORIGIN of length 2: treat-as-withdraw (RFC 7606 7.1); the session stays up
        raw.send_update(announce(RAW, origin=w.attr(w.ORIGIN, b"\x00\x00")))
        r = await asyncio.to_thread(node.wait_routes, lambda r: RAW not in r, timeout=15)
        assert set(V4) <= set(r) and raw.notification is None and not raw.closed

        # an unrecognised well-known attribute: NOTIFICATION 3/2 with the attribute as data
        bad = w.attr(99, b"\x01\x02", flags=0x40)
        raw.send_update(announce("198.18.0.0/24", extra=bad))
        note = await raw.wait_for(lambda m: m.type == w.NOTIFICATION, timeout=15)
        assert (note.code, note.subcode) == (3, 2) and note.data == bad, note
        await raw.wait_closed(timeout=15)
        r = node.routes(4)
        assert "198.18.0.0/24" not in r and RAW not in r and set(V4) <= set(r)
        errors = await asyncio.to_thread(lambda: node.api("/metrics") and update_errors(node))
        assert errors == {"treat-as-withdraw": 1.0, "session-reset": 1.0}, errors
        exp = node.api("/api/explain?prefix=192.0.2.0/24")
        assert exp["candidates"][0]["origin"] == "ebgp/10.0.0.1"  # BIRD's routes never moved
    finally:
        await raw.close()
