"""The raw test speaker and the wire codec against a real BIRD 2, in namespaces.

BIRD (10.77.0.1, fd77::1, AS 65000, passive) exports static routes with communities, large and
extended communities, MED and a prepended path over an IPv4 session and an IPv6 session to two
`RawSpeaker`s (10.77.0.2, fd77::2, AS 65001) that announce graceful restart, so BIRD ends each
table with an End-of-RIB. Every UPDATE BIRD sent is decoded by the wire codec (the routes and
attributes BIRD was told to send) and cross-checked against ExaBGP's own decoder (the JSON path):
the same events for every captured message. Then a malformed UPDATE to BIRD: BIRD answers with a
NOTIFICATION the raw speaker records.

``WIRE_CAPTURE=FILE`` writes the captured UPDATEs (``CAPS HEX`` per line) for
``tests/data/wire/bird_updates.txt``.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from agent.core.bgp import EndOfRib, RouteUpdate
from agent.core.model import Prefix
from agent.speaker.wire import CAP_ASN4, WireDecoder
from testlab import bgpwire as w
from testlab.bird import Bird, base_config, bgp_protocol
from testlab.netns import ip, namespace
from testlab.rawspeaker import RawSpeaker
from tests.exabgp_oracle import PEER, exabgp_events

STATIC4 = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/25", "203.0.113.128/25", "10.20.0.0/16",
           "10.21.4.0/22", "10.22.0.0/15", "10.23.1.7/32"]
STATIC6 = ["2001:db8:1::/48", "2001:db8:2::/64", "2001:db8:3::/56"]
EXPORT4 = ("if net = 192.0.2.0/24 then { bgp_community.add((65000,100)); bgp_community.add((65000,200)); "
           "bgp_large_community.add((65000,1,2)); bgp_med = 50; bgp_ext_community.add((rt, 65000, 7)); "
           "bgp_ext_community.add((ro, 65000, 9)); } "
           "if net = 198.51.100.0/24 then { bgp_path.prepend(65000); bgp_path.prepend(65000); }")
EXPORT6 = "if net = 2001:db8:1::/48 then { bgp_community.add((65000,600)); }"
GR = {4: w.cap_graceful_restart(120, [(1, 1, 0x80)]), 6: w.cap_graceful_restart(120, [(2, 1, 0x80)])}


@pytest.fixture
def nets():
    with namespace("ra-wirb-") as nb, namespace("ra-wirr-") as nr:
        ip(nb, "link", "add", "wb", "type", "veth", "peer", "name", "wr", "netns", nr)
        ip(nb, "addr", "add", "10.77.0.1/24", "dev", "wb")
        ip(nb, "addr", "add", "fd77::1/64", "dev", "wb", "nodad")
        ip(nr, "addr", "add", "10.77.0.2/24", "dev", "wr")
        ip(nr, "addr", "add", "fd77::2/64", "dev", "wr", "nodad")
        ip(nb, "link", "set", "wb", "up")
        ip(nr, "link", "set", "wr", "up")
        yield nb, nr


def bird_config() -> str:
    return base_config("10.77.0.1", STATIC4, STATIC6) + "\n".join([
        bgp_protocol("r4", local="10.77.0.1", local_as=65000, neighbor="10.77.0.2", neighbor_as=65001,
                     export={4: EXPORT4}, passive=True, hold_time=30),
        bgp_protocol("r6", local="fd77::1", local_as=65000, neighbor="fd77::2", neighbor_as=65001,
                     families=(6,), export={6: EXPORT6}, passive=True, hold_time=30),
    ])


async def session(nr: str, family: int) -> RawSpeaker:
    caps = (w.cap_mp(1 if family == 4 else 2), w.cap_route_refresh(), GR[family])
    speaker = RawSpeaker(65001, "10.77.0.2", hold_time=30, caps=caps)
    host, local = ("10.77.0.1", "10.77.0.2") if family == 4 else ("fd77::1", "fd77::2")
    for attempt in range(50):  # BIRD may not listen yet: retry the connect, not the session
        try:
            await speaker.connect(host, 179, local=local, netns=nr, timeout=2)
            break
        except (ConnectionError, OSError, asyncio.TimeoutError):
            if attempt == 49:
                raise
            await asyncio.sleep(0.1)
    await speaker.establish(timeout=20)
    return speaker


async def test_bird_updates_decode_and_match_exabgp(nets, tmp_path):
    nb, nr = nets
    bird = Bird(nb, tmp_path / "bird", bird_config())
    speakers = []
    try:
        r4, r6 = await asyncio.gather(session(nr, 4), session(nr, 6))
        speakers = [r4, r6]
        assert 64 in r4.peer_caps and 65 in r4.peer_caps  # BIRD's graceful restart and 4-octet AS
        await r4.wait_for(lambda m: m.type == w.UPDATE and m.body == w.eor(), timeout=30)
        await r6.wait_for(lambda m: m.type == w.UPDATE and m.body == w.eor(2, 1), timeout=30)
        captured = [m.body for s in (r4, r6) for m in s.received if m.type == w.UPDATE]
        if os.environ.get("WIRE_CAPTURE"):
            with open(os.environ["WIRE_CAPTURE"], "w") as f:
                f.writelines(f"{CAP_ASN4} {body.hex()}\n" for body in captured)

        decoder = WireDecoder()
        table: dict[Prefix, object] = {}
        eors = []
        for body in captured:
            events = decoder.decode(PEER, CAP_ASN4, body)
            assert events == exabgp_events(body, CAP_ASN4), body.hex()  # the JSON path: the same events
            for ev in events:
                if isinstance(ev, RouteUpdate):
                    table.update({a.prefix: a for a in ev.announced})
                else:
                    assert isinstance(ev, EndOfRib), ev
                    eors.append(ev.family.value)
        assert eors == ["ipv4-unicast", "ipv6-unicast"]
        assert sorted(map(str, table)) == sorted(STATIC4 + STATIC6)
        tagged = table[Prefix.parse("192.0.2.0/24")].attrs
        assert tagged.communities == ("65000:100", "65000:200") and tagged.large_communities == ("65000:1:2",)
        assert tagged.med == 50 and tagged.as_path == (65000,)
        assert set(tagged.extended_communities) == {"target:65000:7", "origin:65000:0.0.0.9"}
        assert table[Prefix.parse("198.51.100.0/24")].attrs.as_path == (65000, 65000, 65000)
        plain = table[Prefix.parse("10.20.0.0/16")]
        assert plain.next_hop == "10.77.0.1" and plain.attrs is table[Prefix.parse("10.23.1.7/32")].attrs
        six = table[Prefix.parse("2001:db8:1::/48")]
        assert six.next_hop == "fd77::1" and six.link_local.startswith("fe80::")
        assert six.attrs.communities == ("65000:600",)

        # a malformed UPDATE to BIRD (withdrawn routes length past the message): BIRD resets the session
        r4.send_update(w.update(withdrawn=w.nlri(["10.0.0.0/8"]), withdrawn_length=60))
        note = await r4.wait_for(lambda m: m.type == w.NOTIFICATION, timeout=20)
        assert (note.code, note.subcode) == (3, 1)
        await r4.wait_closed(20)
        assert not r6.closed  # the other session stays
    finally:
        for s in speakers:
            await s.close()
        bird.close()
