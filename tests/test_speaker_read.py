"""The speaker channel's reader (`ApiChannel.read`) splits what it reads into lines itself: every
line is decoded once and in order, whatever the chunk boundaries; a line longer than the limit is
dropped and counted, the lines around it are kept; a last line without a newline counts."""

from __future__ import annotations

import asyncio

import pytest

from agent.core.bgp import RouteUpdate
from agent.speaker import channel as channel_mod
from agent.speaker.channel import ApiChannel
from testlab import bgpwire as w


def line(i: int) -> bytes:
    body = w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.1"), w.med(i)],
                    nlri=w.prefix(f"198.51.{i}.0/24"))
    return b"raw-update 192.0.2.1 1 " + body.hex().encode()


def read_all(data: bytes) -> tuple[list, ApiChannel]:
    events: list = []
    ch = ApiChannel(events.append)

    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        await ch.read(reader)

    asyncio.run(run())
    return events, ch


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_lines_across_chunks_long_line_dropped_last_line_without_newline(monkeypatch, chunk):
    monkeypatch.setattr(channel_mod, "READ_CHUNK", chunk)
    monkeypatch.setattr(channel_mod, "READ_LIMIT", 200)
    data = b"\n".join([line(1), line(2), b"x" * 500, b"", line(3), line(4)])  # no newline at the end
    events, ch = read_all(data)
    assert all(isinstance(e, RouteUpdate) for e in events)
    assert [str(e.announced[0].prefix) for e in events] == [f"198.51.{i}.0/24" for i in (1, 2, 3, 4)]
    assert ch.decode_errors == 1


def test_a_long_line_at_the_end_is_dropped(monkeypatch):
    monkeypatch.setattr(channel_mod, "READ_CHUNK", 16)
    monkeypatch.setattr(channel_mod, "READ_LIMIT", 100)
    events, ch = read_all(line(1) + b"\n" + b"y" * 300)
    assert len(events) == 1 and ch.decode_errors == 1


def test_a_chunk_is_handed_over_at_once_and_acks_keep_their_place():
    """The reader hands a chunk's events to `put_many` together; an ack's event (`CommandAck`,
    through `put`) still comes after the events of the lines before it and before the later ones."""
    from agent.core.bgp_speaker import CommandAck
    from agent.speaker.batching import SpeakerQueue

    q = SpeakerQueue()
    calls = []
    ch = ApiChannel(q.put_nowait, put_many=lambda evs: (calls.append(len(evs)), q.put_many(evs)))
    ch._in_flight.append("cmd")  # one command written, waiting for its ack

    async def run() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"\n".join([line(1), line(2), b"done", line(3), line(4), line(5)]) + b"\n")
        reader.feed_eof()
        await ch.read(reader)

    asyncio.run(run())
    got = []
    while not q.empty():
        got.append(q.get_nowait())
    assert [e.announced[0].prefix.network.network_address.packed[2] if isinstance(e, RouteUpdate) else e
            for e in got] == [1, 2, CommandAck("cmd", True), 3, 4, 5]
    assert calls == [2, 3]


def test_speaker_queue_wakes_its_consumer_and_keeps_order():
    from agent.speaker.batching import SpeakerQueue, batches

    async def run() -> list:
        q = SpeakerQueue()
        got: list = []

        async def consume() -> None:
            async for batch in batches(q, max_events=3):
                got.append(batch)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0)  # the consumer waits on an empty queue
        q.put_nowait("a")
        await asyncio.sleep(0)
        q.put_many(["b", "c", "d", "e"])
        q.put_many([])
        q.put_nowait(None)  # the stop marker ends the stream after the events before it
        await asyncio.wait_for(task, 5)
        with pytest.raises(asyncio.QueueEmpty):
            q.get_nowait()
        return got

    assert asyncio.run(run()) == [("a",), ("b", "c", "d"), ("e",)]
