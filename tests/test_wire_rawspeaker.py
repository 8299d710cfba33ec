"""The raw test speaker (`testlab.rawspeaker`) against itself on loopback: a session comes up with
the capabilities given, arbitrary octets go through, every message is recorded, a NOTIFICATION
is read with its code/subcode/data, a malformed framing and the peer's close are seen. What one
speaker receives is what the wire codec decodes."""

from __future__ import annotations

import asyncio

from agent.core.bgp import RouteUpdate, UpdateAction
from agent.core.model import Prefix
from agent.speaker.wire import CAP_ASN4, WireDecoder
from testlab import bgpwire as w
from testlab.rawspeaker import RawSpeaker


async def pair(**kw) -> tuple[RawSpeaker, RawSpeaker]:
    a = RawSpeaker(65001, "192.0.2.1", hold_time=30, caps=(w.cap_mp(1), w.cap_mp(2), w.cap_asn4(4_200_000_001),
                                                            w.cap_addpath([(1, 1, 1)])))
    b = RawSpeaker(65002, "192.0.2.2", **kw)
    port = await a.listen("127.0.0.1", 0)
    await asyncio.gather(a.accepted(), b.connect("127.0.0.1", port))
    await asyncio.gather(a.establish(), b.establish())
    return a, b


async def test_session_and_capabilities():
    a, b = await pair()
    try:
        assert b.peer_caps[65] == [(4_200_000_001).to_bytes(4, "big")]
        assert b.peer_caps[69] == [bytes.fromhex("00010101")]
        assert a.peer_caps[2] == [b""] and 1 in a.peer_caps
        assert a.peer_open.body[1:3] == (65002).to_bytes(2, "big")
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_updates_arrive_in_order_and_decode():
    a, b = await pair()
    try:
        good = w.update(attrs=[w.origin(0), w.as_path([65002]), w.next_hop("192.0.2.2")], nlri=w.nlri(["10.0.0.0/24"]))
        bad = w.update(attrs=[w.attr(1, b"\0\0"), w.as_path([65002]), w.next_hop("192.0.2.2")], nlri=w.nlri(["10.0.0.0/24"]))
        b.send_update(good)
        b.send(w.message(w.UPDATE, bad) + w.message(w.UPDATE, w.eor()))  # two messages in one write
        await a.wait_for(lambda m: m.type == w.UPDATE and m.body == w.eor())
        bodies = [m.body for m in a.received if m.type == w.UPDATE]
        assert bodies == [good, bad, w.eor()]
        decoder = WireDecoder()
        (ev,) = decoder.decode("192.0.2.2", CAP_ASN4, bodies[0])
        assert isinstance(ev, RouteUpdate) and ev.announced[0].prefix == Prefix.parse("10.0.0.0/24")
        assert decoder.decode("192.0.2.2", CAP_ASN4, bodies[1])[0].action is UpdateAction.TREAT_AS_WITHDRAW
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_notification_is_recorded_and_the_close_seen():
    a, b = await pair()
    try:
        b.send(w.notification(3, 2, b"\x40\x63\x00"))
        await b.drain()
        await b.close()
        note = await a.wait_for(lambda m: m.type == w.NOTIFICATION)
        assert (note.code, note.subcode, note.data) == (3, 2, b"\x40\x63\x00")
        assert a.notification == note
        await a.wait_closed()
        assert a.closed
    finally:
        await a.close()


async def test_a_bad_marker_is_recorded_and_reading_stops():
    a, b = await pair()
    try:
        b.send(w.message(w.KEEPALIVE, marker=b"\0" * 16))
        bad = await a.wait_for(lambda m: m.type == 0)
        assert bad.body[:16] == b"\0" * 16
        await a.wait_closed(5)
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_keepalives_keep_coming():
    a, b = await pair(hold_time=3)  # negotiated hold 3 s: a KEEPALIVE every second
    try:
        await a.wait_for(lambda m: sum(1 for x in a.received if x.type == w.KEEPALIVE) >= 3, timeout=10)
    finally:
        await asyncio.gather(a.close(), b.close())
