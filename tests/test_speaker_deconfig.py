"""Peer de-configuration in the speaker: which peers get Cease 6/3, and waiting for one answer.

`ApiChannel.send_waiting` is exercised over a real socket pair (the channel's own writer and
reader, a stand-in for ExaBGP answering ``done``/``error``); `Speaker.set_peers` with a real ExaBGP
child is in ``netns-tests/test_agent_deconfig.py`` (against BIRD).
"""

from __future__ import annotations

import asyncio
import socket

from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.core.bgp import AnnounceRoute, PeerStatus
from agent.speaker.channel import ApiChannel
from agent.speaker.deconfig import deconfigured
from agent.speaker.process import Speaker


def peer(name: str, address: str) -> BgpPeer:
    return BgpPeer.model_validate({"metadata": {"name": name}, "spec": {
        "peerAddress": address, "peerAS": 65000, "localAS": 65001, "routerId": "10.0.0.1"}})


def test_only_removed_peers_whose_session_is_up_are_deconfigured(tmp_path):
    a, b, c, d = peer("a", "10.0.0.1"), peer("b", "10.0.0.2"), peer("c", "fd00::0:1"), peer("d", "10.0.0.4")
    sp = Speaker([a, b, c, d], BgpSpeakerSpec(), runtime_dir=tmp_path)
    sp.channel.peer_states.update({"10.0.0.1": PeerStatus.UP, "10.0.0.2": PeerStatus.DOWN,
                                   "fd00::1": PeerStatus.UP, "10.0.0.4": PeerStatus.UP})
    moved = peer("d", "10.0.0.5")  # same name, new address: the old address is de-configured
    assert deconfigured(sp.peers, [b, moved], sp.channel.peer_states) == ["10.0.0.1", "fd00::1", "10.0.0.4"]
    assert deconfigured(sp.peers, [a, b, c, d], sp.channel.peer_states) == []


async def exabgp_stand_in(sock: socket.socket, answers: list[str]) -> None:
    """Read command lines; answer each with the next of `answers` (None: no answer)."""
    reader, writer = await asyncio.open_connection(sock=sock)
    for answer in answers:
        line = await reader.readline()
        if not line:
            return
        if answer is not None:
            writer.write(answer.encode() + b"\n")
            await writer.drain()
    await reader.read()  # until the channel side closes


async def test_send_waiting_gets_its_own_answer_in_order():
    ours, theirs = socket.socketpair()
    channel = ApiChannel(lambda ev: None)
    stand_in = asyncio.create_task(exabgp_stand_in(theirs, ["done", "error", "done"]))
    reader, writer = await asyncio.open_connection(sock=ours)
    tasks = [asyncio.create_task(channel.read(reader)), asyncio.create_task(channel.write(writer))]
    try:
        channel.send(AnnounceRoute("10.1.0.0/24", peer="10.0.0.1"))
        refused = channel.send_waiting("neighbor 10.0.0.1 notify 6 3")
        done = channel.send_waiting("neighbor 10.0.0.2 notify 6 3")
        assert await asyncio.wait_for(refused, 5) is False
        assert await asyncio.wait_for(done, 5) is True
        assert channel._waiters == {}
    finally:
        for t in tasks:
            t.cancel()
        writer.close()
        stand_in.cancel()
        theirs.close()


async def test_send_waiting_is_false_when_its_command_is_dropped():
    channel = ApiChannel(lambda ev: None, max_queued=2)
    first = channel.send_waiting("neighbor 10.0.0.1 notify 6 3")
    channel.send("neighbor 10.0.0.9 teardown 2")
    channel.send("neighbor 10.0.0.9 teardown 3")  # the queue was full: both queued ones dropped
    assert first.done() and first.result() is False
    second = channel.send_waiting("neighbor 10.0.0.2 notify 6 3")
    channel.connected(first=False)  # a new ExaBGP: what was queued for the old one is dropped
    assert second.done() and second.result() is False
    third = channel.send_waiting("neighbor 10.0.0.3 notify 6 3")
    channel.peers_down("exited")  # ExaBGP gone before answering
    assert third.done() and third.result() is False
