"""The ExaBGP JSON codec on lines captured from a real ExaBGP 5.0.15 talking to a real BIRD 2.

``tests/data/exabgp/session.jsonl`` is written by ``tests/data/exabgp/capture.py`` (see its
docstring for the sessions: e4 = eBGP IPv4 from 10.99.0.1, e6 = eBGP IPv6 from fd99::1, i4 =
iBGP from 10.99.0.3 carrying IPv4 and IPv6). The table below pins the decoded event of each
interesting line; every other line must decode too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.core.model import BgpOrigin, Prefix
from agent.speaker.codec import CodecError, Decoder
from agent.speaker.encoder import encode
from agent.core.bgp import (
    Keepalive,
    Ack,
    AnnounceEor,
    AnnounceRoute,
    RequestRouteRefresh,
    Teardown,
    WithdrawRoute,
    Announced,
    EndOfRib,
    Family,
    GracefulRestart,
    Notification,
    Open,
    PathAttrs,
    PeerState,
    PeerStatus,
    RouteRefresh,
    RouteUpdate,
    SpeakerShutdown,
)

DATA = Path(__file__).parent / "data" / "exabgp" / "session.jsonl"
LINES = DATA.read_text().splitlines()
V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
P = Prefix.parse
LL = "fe80::1039:8cff:fe29:3a71"  # BIRD's link-local address in the capture

E4_OTHERS = PathAttrs(as_path=(65000,), communities=("65000:300",))
E4_TAGGED = PathAttrs(as_path=(65000, 64513, 64512), med=50, communities=("65000:100", "65000:200"),
                      large_communities=("65000:1:2",))
I4_ATTRS = PathAttrs(med=7, local_pref=250, communities=("65001:1",))


def line(n: int) -> str:
    return LINES[n - 1]


# line number in session.jsonl -> the events it decodes to
TABLE = {
    1: (PeerState("10.99.0.1", PeerStatus.CONNECTED),),
    3: (Open("10.99.0.1", 65000, 9, "10.99.0.1", (V4,), GracefulRestart(120, False, (V4,), ()),
             True, True, (1, 2, 64, 65, 70, 71)),),
    5: (PeerState("10.99.0.1", PeerStatus.UP),),
    6: (RouteUpdate("10.99.0.1", V4, tuple(Announced(P(p), "10.99.0.1", E4_OTHERS) for p in
                                         ("198.51.100.0/24", "203.0.113.128/25", "203.0.113.0/25"))),),
    8: (RouteUpdate("10.99.0.1", V4, (Announced(P("192.0.2.0/24"), "10.99.0.1", E4_TAGGED),)),),
    9: (EndOfRib("10.99.0.1", V4),),
    10: (RouteUpdate("10.99.0.3", V4, tuple(Announced(P(p), "10.99.0.3", I4_ATTRS) for p in
                                          ("198.51.100.0/24", "192.0.2.0/24", "203.0.113.128/25",
                                           "203.0.113.0/25"))),),
    # IPv6 over an IPv4 iBGP session, global and link-local next hop: one route per prefix
    12: (RouteUpdate("10.99.0.3", V6, tuple(Announced(P(p), "fd99::1", PathAttrs(local_pref=150), LL)
                                          for p in ("2001:db8:1::/48", "2001:db8:3::/48",
                                                    "2001:db8:2::/48"))),),
    13: (EndOfRib("10.99.0.3", V6),),
    17: (RouteUpdate("fd99::1", V6, (Announced(
        P("2001:db8:1::/48"), "fd99::1",
        PathAttrs(origin=BgpOrigin.INCOMPLETE, as_path=(65000,),
                  large_communities=("65000:6:6", "4200000000:1:1")), LL),)),),
    19: (EndOfRib("fd99::1", V6),),
    20: (RouteUpdate("10.99.0.3", V4, (), (P("203.0.113.128/25"),)),),
    22: (RouteUpdate("fd99::1", V6, (), (P("2001:db8:2::/48"),)),),
    21: (RouteRefresh("10.99.0.1", V4, "begin"),),
    27: (RouteRefresh("10.99.0.1", V4, "end"),),
    28: (Ack(True),),
    33: (Ack(False),),
    34: (RouteUpdate("10.99.0.3", V4, (Announced(
        P("10.200.0.0/24"), "10.99.0.2",
        PathAttrs(as_path=(65001,), med=7, local_pref=250, communities=("65001:1", "65001:5"),
                  large_communities=("65001:5:5",))),)),),
    39: (RouteRefresh("10.99.0.1", V4, "refresh"),),
    41: (Notification("10.99.0.1", 6, 2, b""),),
    42: (PeerState("10.99.0.1", PeerStatus.DOWN, "notification received (6,2)"),),
    44: (PeerState("10.99.0.1", PeerStatus.DOWN, "closing connection"),),
    45: (Notification("fd99::1", 6, 2, b'Shutdown Communication: "maintenance window"'),),
    # BIRD restarted with -R: R bit (ExaBGP says "forwarding") and F bit (ExaBGP says "restart")
    65: (Open("10.99.0.1", 65000, 9, "10.99.0.1", (V4,), GracefulRestart(120, True, (V4,), (V4,)),
              True, True, (1, 2, 64, 65, 70, 71)),),
    66: (Open("10.99.0.3", 65001, 9, "10.99.0.1", (V4, V6), GracefulRestart(120, True, (V4, V6), (V4, V6)),
              True, True, (1, 2, 64, 65, 70, 71)),),
    87: (PeerState("10.99.0.1", PeerStatus.DOWN, "stop, message [shutting down]"),),
    90: (SpeakerShutdown(),),
}


@pytest.mark.parametrize("n", sorted(TABLE))
def test_captured_line(n):
    assert Decoder().decode(line(n)) == TABLE[n]


def test_every_captured_line_decodes():
    d = Decoder()
    kinds = set()
    for text in LINES:
        kinds.update(type(e).__name__ for e in d.decode(text))
    assert kinds == {"PeerState", "Open", "RouteUpdate", "EndOfRib", "RouteRefresh", "Ack",
                     "Notification", "SpeakerShutdown"}


def test_prefixes_of_one_update_share_one_attrs_object_and_equal_sets_are_reused():
    d = Decoder()
    (u,) = d.decode(line(6))
    assert len({id(a.attrs) for a in u.announced}) == 1
    (again,) = d.decode(line(25))  # the same attributes re-sent after a route refresh
    assert again.announced[0].attrs is u.announced[0].attrs


def test_bytes_and_surrounding_whitespace_are_accepted():
    assert Decoder().decode(b"done\n") == (Ack(True),)
    assert Decoder().decode(line(9).encode() + b"\r\n") == TABLE[9]
    assert Decoder().decode("") == ()


def _mutate(n: int, edit) -> str:
    obj = json.loads(line(n))
    edit(obj)
    return json.dumps(obj)


def test_prefix_under_link_local_next_hop_only():
    def edit(obj):
        ann = obj["neighbor"]["message"]["update"]["announce"]["ipv6 unicast"]
        del ann["fd99::1"]
    (u,) = Decoder().decode(_mutate(17, edit))
    assert u.announced == (Announced(P("2001:db8:1::/48"), LL, u.announced[0].attrs, None),)


def test_update_with_two_families_gives_one_event_per_family():
    def edit(obj):
        obj["neighbor"]["message"]["update"]["withdraw"] = {"ipv6 unicast": [{"nlri": "2001:db8:9::/48"}]}
    v4, v6 = Decoder().decode(_mutate(8, edit))
    assert (v4.family, len(v4.announced), v4.withdrawn) == (V4, 1, ())
    assert (v6.family, v6.announced, v6.withdrawn) == (V6, (), (P("2001:db8:9::/48"),))


def test_attribute_error_turns_announcements_into_withdraws():
    def edit(obj):
        obj["neighbor"]["message"]["update"]["attribute"]["error"] = "treat-as-withdraw"
    (u,) = Decoder().decode(_mutate(8, edit))
    assert u == RouteUpdate("10.99.0.1", V4, (), (P("192.0.2.0/24"),))


def test_other_attributes_and_as_set():
    d = Decoder()
    a = d.attrs({
        "origin": "egp",
        "as-path": {"1": {"element": "as-set", "value": [3, 4]}, "0": {"element": "as-sequence", "value": [1, 2]}},
        "atomic-aggregate": True,
        "originator-id": "10.0.0.9",
        "cluster-list": ["10.0.0.1"],
        "extended-community": [{"value": 1, "string": "target:65000:1"}, {"value": 255}],
    })
    assert a == PathAttrs(origin=BgpOrigin.EGP, as_path=(1, 2, 3, 4), as_set=True,
                          atomic_aggregate=True, originator_id="10.0.0.9", cluster_list=("10.0.0.1",),
                          extended_communities=("target:65000:1", "0xff"))


def test_families_we_do_not_handle_are_skipped():
    def edit(obj):
        obj["neighbor"]["message"]["update"]["announce"] = {"ipv4 flow": {"no-nexthop": [{"nlri": "x"}]}}
    assert Decoder().decode(_mutate(8, edit)) == ()
    eor = _mutate(9, lambda o: o["neighbor"]["message"]["eor"].update(safi="flow"))
    assert Decoder().decode(eor) == ()


@pytest.mark.parametrize("text", [
    "garbage",
    "[1, 2]",
    '{"type": "weird"}',
    '{"type": "state", "neighbor": {"address": {"peer": "10.0.0.1"}, "state": "sideways"}}',
    '{"type": "update", "neighbor": {"address": {"peer": "10.0.0.1"}, "message": {"update": '
    '{"announce": {"ipv4 unicast": {"10.0.0.1": [{"nlri": "10.0.0.1/24"}]}}}}}}',  # host bits
])
def test_lines_that_are_not_understood_raise(text):
    with pytest.raises(CodecError):
        Decoder().decode(text)


KEEPALIVE = ('{ "exabgp": "5.0.0", "time": 1764790000.5, "host" : "node", "pid" : 7, "ppid" : 1, '
             '"counter": 9, "type": "keepalive", "neighbor": { "address": { "local": "10.0.0.254", '
             '"peer": "10.0.0.1" }, "asn": { "local": 65000, "peer": 65001 } , "router-id": "10.0.0.254" '
             ', "direction": "%s" } }')


def test_received_keepalives_become_events_sent_ones_do_not():
    """What ExaBGP 5.0.15 writes with ``receive { keepalive; }`` (its JSON encoder's layout)."""
    assert Decoder().decode(KEEPALIVE % "receive") == (Keepalive("10.0.0.1"),)
    assert Decoder().decode(KEEPALIVE % "send") == ()


def test_notification_message_text():
    (n,) = Decoder().decode(line(45))
    assert n.message == 'Shutdown Communication: "maintenance window"'


def test_a_notification_exabgp_sent_is_an_event_before_the_down():
    """ExaBGP says it sent a NOTIFICATION only in the down reason (as in netns-tests/test_speaker.py:
    ``notification sent (6,1)`` after a teardown): the codec makes it an event."""
    text = ('{"type": "state", "neighbor": {"address": {"local": "10.99.0.2", "peer": "10.99.0.1"}, '
            '"state": "down", "reason": "notification sent (4,0)"}}')
    assert Decoder().decode(text) == (Notification("10.99.0.1", 4, 0, b"", "send"),
                                      PeerState("10.99.0.1", PeerStatus.DOWN, "notification sent (4,0)"))
    # other reasons, and other states, stay one PeerState
    other = text.replace("notification sent (4,0)", "closing connection")
    assert Decoder().decode(other) == (PeerState("10.99.0.1", PeerStatus.DOWN, "closing connection"),)


# ---- commands ---------------------------------------------------------------------------------

COMMANDS = [
    (AnnounceRoute("10.1.0.0/24"), "announce route 10.1.0.0/24 next-hop self"),
    (AnnounceRoute(P("10.1.0.0/24"), next_hop="10.0.0.1", peer="10.99.0.1", local_pref=200, med=5,
                   communities=("65000:1", "65000:02"), large_communities=("65000:1:2",),
                   as_path=(65001, 65002), origin=BgpOrigin.INCOMPLETE),
     "neighbor 10.99.0.1 announce route 10.1.0.0/24 next-hop 10.0.0.1 origin incomplete "
     "local-preference 200 med 5 as-path [ 65001 65002 ] community [ 65000:1 65000:2 ] "
     "large-community [ 65000:1:2 ]"),
    (AnnounceRoute("2001:db8::/32", next_hop="2001:DB8::1", peer="FD99::1"),
     "neighbor fd99::1 announce route 2001:db8::/32 next-hop 2001:db8::1"),
    (WithdrawRoute("10.1.0.0/24", peer="10.99.0.1"), "neighbor 10.99.0.1 withdraw route 10.1.0.0/24"),
    (AnnounceEor(V6, peer="fd99::1"), "neighbor fd99::1 announce eor ipv6 unicast"),
    (AnnounceEor(V4), "announce eor ipv4 unicast"),
    (Teardown("10.99.0.1", 1), "neighbor 10.99.0.1 teardown 1"),
    (RequestRouteRefresh(V4, peer="10.99.0.1"), "neighbor 10.99.0.1 announce route-refresh ipv4 unicast"),
    ("show neighbor summary", "show neighbor summary"),
]


@pytest.mark.parametrize("command,text", COMMANDS)
def test_command_encoding(command, text):
    assert encode(command) == text


@pytest.mark.parametrize("command", [
    AnnounceRoute("10.1.0.1/24"),
    AnnounceRoute("10.1.0.0/24", next_hop="not-an-address"),
    AnnounceRoute("10.1.0.0/24", communities=("65536:1",)),
    AnnounceRoute("10.1.0.0/24", large_communities=("1:2",)),
    AnnounceRoute("10.1.0.0/24", med=-1),
    AnnounceRoute("10.1.0.0/24", peer="bogus"),
    Teardown("10.0.0.1", 0),
    "two\nlines",
    "  ",
])
def test_bad_commands_are_refused(command):
    with pytest.raises(ValueError):
        encode(command)
