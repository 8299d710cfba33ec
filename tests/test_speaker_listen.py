"""A real ExaBGP listens where the configuration says and nowhere else (issue 12 item 8)."""

from __future__ import annotations

import asyncio
import socket
import time

from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.speaker.process import Speaker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp* write them) with a listening socket on `port`."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                addr, hexport = fields[1].rsplit(":", 1)
                if int(hexport, 16) == port and fields[3] == "0A":  # TCP_LISTEN
                    out.add(addr)
    return out


async def test_exabgp_listens_on_the_passive_peers_local_address_only(tmp_path):
    port = _free_port()
    peer = BgpPeer.model_validate({"metadata": {"name": "lo"}, "spec": {
        "peerAddress": "127.0.0.2", "peerAS": 65000, "localAS": 65001, "routerId": "10.0.0.1",
        "localAddress": "127.0.0.1", "passive": True}})
    sp = Speaker((peer,), BgpSpeakerSpec(listenPort=port), runtime_dir=tmp_path / "rt",
                 backoff_min=0.1, backoff_max=0.5)
    async with sp:
        await sp.wait_running(30)
        deadline = time.monotonic() + 20
        while not _listening(port) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert _listening(port) == {"0100007F"}, _listening(port)  # 127.0.0.1, not 0.0.0.0 or ::
