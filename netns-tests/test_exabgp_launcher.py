"""ExaBGP through the agent's launcher against a real BIRD 2 and a raw BGP speaker, in namespaces.

Namespace `b` (BIRD 10.98.0.1 / fd98::1, AS 65000, passive) and `e` (ExaBGP 10.98.0.2 / fd98::2,
AS 65001) joined by a veth pair. ExaBGP runs as the agent runs it (its configuration, the
launcher, the real API relay) but the API lines are kept as text (`testlab.exalab`), so these
tests see exactly what the agent would read:

* raw UPDATEs: the routes BIRD announces (v4 and v6, communities, large communities, MED, a
  prepended path) decoded from the ``raw-update`` lines by ExaBGP's own decoder are the routes
  the same ExaBGP writes as JSON without ``--raw-updates`` (both through the agent's codec);
  End-of-RIB comes as a raw UPDATE; the state ``up`` precedes the first raw line of a session;
* ``notify``: BIRD logs the NOTIFICATION's code; ``teardown`` sends its Cease although graceful
  restart is negotiated (BIRD logs it and no graceful restart);
* a raw test speaker: the <caps> bits of a session with 4-octet AS and extended messages, an
  UPDATE larger than 4096 octets passed through when extended messages are negotiated, and the
  header errors (bad marker, bad length, an UPDATE over 4096 octets without extended messages)
  answered with NOTIFICATION 1/1 and 1/2 (with the length) before the session is closed.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import time

import pytest

from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.core.model import as_prefix
from testlab.bird import Bird, base_config, bgp_protocol
from testlab.exalab import LauncherExabgp, is_state
from testlab.netns import in_netns, ip, namespace, wait_for

B4, E4, B6, E6 = "10.98.0.1", "10.98.0.2", "fd98::1", "fd98::2"
V4 = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/25"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
EXPORT4 = ("if net = 192.0.2.0/24 then { bgp_community.add((65000,100)); bgp_large_community.add((65000,1,2)); "
           "bgp_med = 50; } if net = 198.51.100.0/24 then { bgp_path.prepend(64999); "
           "bgp_community.add((65000,200)); }")
EXPORT6 = "if net = 2001:db8:1::/48 then { bgp_community.add((65000,300)); bgp_large_community.add((4200000000,1,2)); }"
EOR6 = "0000000680 0f0300 0201".replace(" ", "")  # MP_UNREACH_NLRI ipv6 unicast, no prefix


@pytest.fixture
def nets():
    with namespace("ra-lnb-") as nb, namespace("ra-lne-") as ne:
        ip(nb, "link", "add", "lb", "type", "veth", "peer", "name", "le", "netns", ne)
        ip(nb, "addr", "add", f"{B4}/24", "dev", "lb")
        ip(nb, "addr", "add", f"{B6}/64", "dev", "lb", "nodad")
        ip(ne, "addr", "add", f"{E4}/24", "dev", "le")
        ip(ne, "addr", "add", f"{E6}/64", "dev", "le", "nodad")
        ip(nb, "link", "set", "lb", "up")
        ip(ne, "link", "set", "le", "up")
        yield nb, ne


def peer(name: str, address: str, local: str, **spec) -> BgpPeer:
    return BgpPeer.model_validate({"metadata": {"name": name}, "spec": {
        "peerAddress": address, "peerAS": 65000, "localAS": 65001, "routerId": E4, "localAddress": local,
        "holdTime": 9, **spec}})


def bird_config() -> str:
    protocols = [
        bgp_protocol("e4", local=B4, local_as=65000, neighbor=E4, neighbor_as=65001, export={4: EXPORT4},
                     passive=True),
        bgp_protocol("e6", local=B6, local_as=65000, neighbor=E6, neighbor_as=65001, families=(6,),
                     export={6: EXPORT6}, passive=True),
    ]
    return base_config(B4, V4, V6) + "\n".join(protocols)


def start_exabgp(ne: str, tmp, name: str, raw: bool, peers=None) -> LauncherExabgp:
    peers = peers or [peer("e4", B4, E4), peer("e6", B6, E6, families=["ipv6-unicast"])]
    return LauncherExabgp(ne, tmp / name, peers, BgpSpeakerSpec(listenAddresses=[]), raw=raw)


def is_raw(peer_address: str, body: str | None = None):
    return lambda l: l.startswith(f"raw-update {peer_address} ") and (body is None or l.split()[3] == body)


def is_json_eor(peer_address: str, afi: str):
    def pred(line: str) -> bool:
        if not line.startswith("{") or '"eor"' not in line:
            return False
        msg = json.loads(line)
        return (msg["neighbor"]["address"]["peer"] == peer_address
                and msg["neighbor"]["message"]["eor"]["afi"] == afi)
    return pred


# ---- ExaBGP's own decoder on the raw lines ------------------------------------------------------

def exabgp_json(line: str) -> str:
    """A raw-update line decoded by ExaBGP's decoder and written by its JSON encoder, as ExaBGP
    without --raw-updates would have written it."""
    from exabgp.bgp.message import Message
    from exabgp.bgp.message.direction import Direction
    from exabgp.bgp.message.open.asn import ASN
    from exabgp.bgp.message.open.capability.negotiated import Negotiated
    from exabgp.configuration.configuration import Configuration
    from exabgp.environment import getenv
    from exabgp.logger import log
    from exabgp.protocol.family import AFI, SAFI
    from exabgp.reactor.api.response import Response
    from exabgp.version import json as json_version

    log.silence()
    log.init(getenv())
    _, peer_address, caps, body = line.split()
    caps = int(caps)
    local = E6 if ":" in peer_address else E4
    conf = Configuration([f"neighbor {peer_address} {{ router-id {E4}; local-address {local}; local-as 65001; "
                          "peer-as 65000; family { ipv4 unicast; ipv6 unicast; } }"], text=True)
    assert conf.reload(), conf.error
    neighbor = next(iter(conf.neighbors.values()))
    neg = Negotiated(neighbor)
    neg.asn4 = bool(caps & 1)
    neg.local_as, neg.peer_as = ASN(65001), ASN(65000)
    neg.families = [(AFI.ipv4, SAFI.unicast), (AFI.ipv6, SAFI.unicast)]
    neg.addpath._receive = {(AFI.ipv4, SAFI.unicast): bool(caps & 2), (AFI.ipv6, SAFI.unicast): bool(caps & 4)}
    neg.msg_size = 65535 if caps & 8 else 4096
    message = Message.unpack(Message.CODE.UPDATE, bytes.fromhex(body), Direction.IN, neg)
    return Response.JSON(json_version).update(neighbor, "receive", message, None, "", "")


def routes(json_lines) -> set:
    """(peer, family, prefix, next hop, attributes) of every announcement, through the agent's codec."""
    from agent.core.bgp import RouteUpdate
    from agent.speaker.codec import Decoder

    decoder, out = Decoder(), set()
    for line in json_lines:
        for ev in decoder.decode(line.encode()):
            if isinstance(ev, RouteUpdate):
                out |= {(ev.peer, ev.family.value, str(as_prefix(a.prefix)), a.next_hop, a.attrs) for a in ev.announced}
    return out


def test_raw_updates_carry_the_routes_exabgp_decodes(nets, tmp_path):
    nb, ne = nets
    bird = Bird(nb, tmp_path / "bird", bird_config())
    try:
        # ExaBGP decoding (the launcher without --raw-updates): the reference
        exa = start_exabgp(ne, tmp_path, "json", raw=False)
        try:
            exa.wait(is_json_eor(B4, "ipv4"), 30, "JSON End-of-RIB v4")
            exa.wait(is_json_eor(B6, "ipv6"), 30, "JSON End-of-RIB v6")
            reference = [l for l in exa.snapshot() if l.startswith("{") and '"type": "update"' in l]
            assert not any(l.startswith("raw-update") for l in exa.snapshot())
        finally:
            exa.close()
        # the same with --raw-updates: no JSON UPDATE, raw lines, End-of-RIB as raw UPDATEs
        exa = start_exabgp(ne, tmp_path, "raw", raw=True)
        try:
            exa.wait(is_raw(B4, "00000000"), 30, "raw End-of-RIB v4")
            exa.wait(is_raw(B6, EOR6), 30, "raw End-of-RIB v6")
            lines = exa.snapshot()
        finally:
            exa.close()
    finally:
        bird.close()
    assert not any('"type": "update"' in l for l in lines)
    for address in (B4, B6):  # the session's state up comes before its first raw line
        up = next(i for i, l in enumerate(lines) if is_state(address, "up")(l))
        first = next(i for i, l in enumerate(lines) if is_raw(address)(l))
        assert up < first
    raw = [l for l in lines if l.startswith("raw-update ")]
    assert {l.split()[2] for l in raw} == {"1"}  # 4-octet AS; no ADD-PATH, no extended messages
    decoded = [exabgp_json(l) for l in raw]
    assert sum('"eor"' in d for d in decoded) == 2
    got, want = routes(decoded), routes(reference)
    assert got == want
    prefixes = {(p, f) for _, f, p, _, _ in got}
    assert prefixes == {*((p, "ipv4-unicast") for p in V4), *((p, "ipv6-unicast") for p in V6)}
    attrs = {p: a for _, _, p, _, a in got}
    assert attrs["192.0.2.0/24"].communities == ("65000:100",) and attrs["192.0.2.0/24"].med == 50
    assert attrs["192.0.2.0/24"].large_communities == ("65000:1:2",)
    assert attrs["198.51.100.0/24"].as_path == (65000, 64999)
    assert attrs["2001:db8:1::/48"].large_communities == ("4200000000:1:2",)


def acks(exa: LauncherExabgp, start: int) -> list[str]:
    return [l for l in exa.snapshot(start) if l in ("done", "error")]


@contextlib.contextmanager
def synced(nets, tmp_path):
    """BIRD and ExaBGP in raw mode, once both sessions have delivered BIRD's End-of-RIB."""
    nb, ne = nets
    bird = Bird(nb, tmp_path / "bird", bird_config())
    exa = start_exabgp(ne, tmp_path, "exa", raw=True)
    try:
        exa.wait(is_raw(B4, "00000000"), 30, "raw End-of-RIB v4")
        exa.wait(is_raw(B6, EOR6), 30, "raw End-of-RIB v6")
        yield bird, exa
    finally:
        exa.close()
        bird.close()


def test_notify_and_teardown_send_their_notification_with_graceful_restart(nets, tmp_path):
    with synced(nets, tmp_path) as (bird, exa):
        assert "Graceful restart" in bird.cmd("show", "protocols", "all", "e4")
        # notify: any code; answered once written; BIRD logs it; the session goes down
        mark = begin = len(exa.snapshot())
        exa.send(f"neighbor {B6} notify 6 3")
        exa.wait(lambda l: l in ("done", "error"), 10, "notify answered", start=mark)
        assert acks(exa, mark) == ["done"]
        exa.wait(is_state(B6, "down"), 10, "e6 down", start=mark)
        down = [o for o in exa.objects(mark) if o.get("type") == "state" and o["neighbor"]["state"] == "down"]
        assert down[0]["neighbor"]["reason"] == "notification sent (6,3)"
        wait_for(lambda: "e6: Received: Peer de-configured" in bird.log.read_text(), 10, what="BIRD got 6/3")
        # an explicit teardown sends its Cease although graceful restart was negotiated
        mark = len(exa.snapshot())
        exa.send(f"neighbor {B4} teardown 2")
        wait_for(lambda: "e4: Received: Administrative shutdown" in bird.log.read_text(), 10, what="BIRD got 6/2")
        wait_for(lambda: acks(exa, mark), 10, what="the teardown answered")  # (before the next mark)
        assert "graceful restart" not in bird.log.read_text().lower().replace("graceful restart on", "")
        # nothing established to notify: error; a malformed notify: error
        mark = len(exa.snapshot())
        exa.send("neighbor 10.98.0.99 notify 6 3")
        exa.send(f"neighbor {B4} notify 6 999")
        wait_for(lambda: len(acks(exa, mark)) == 2, 10, what="two answers")
        assert acks(exa, mark) == ["error", "error"]
        # both sessions come back (ExaBGP reconnects after its back-off)
        exa.wait(is_state(B4, "up"), 30, "e4 up again", start=begin)
        exa.wait(is_state(B6, "up"), 30, "e6 up again", start=begin)


def nlri_v4(line: str) -> list[str]:
    """The IPv4 prefixes at the end of a raw UPDATE line (after the path attributes)."""
    body = bytes.fromhex(line.split()[3])
    withdrawn = int.from_bytes(body[:2], "big")
    at = 2 + withdrawn
    at += 2 + int.from_bytes(body[at:at + 2], "big")
    out = []
    while at < len(body):
        bits = body[at]
        octets = (bits + 7) // 8
        out.append(f"{socket.inet_ntoa(body[at + 1:at + 1 + octets].ljust(4, bytes(1)))}/{bits}")
        at += 1 + octets
    return out


def test_a_route_refresh_asked_just_before_a_reload_is_still_sent(nets, tmp_path):
    """The refresh and the reload in one write: ExaBGP takes the refresh in one reactor turn and
    reloads at the start of the next, before the session could send it (stock 5.0.15 dropped it
    with the peer's old Neighbor object). BIRD answers the refresh with its routes again."""
    with synced(nets, tmp_path) as (_bird, exa):
        mark = len(exa.snapshot())
        exa.send(f"neighbor {B4} announce route-refresh ipv4 unicast\nreload")
        wait_for(lambda: {p for l in exa.snapshot(mark) if is_raw(B4)(l) for p in nlri_v4(l)} == set(V4), 15,
                 what="BIRD's routes again after the refresh")
        assert not any(is_state(B4, "down")(l) for l in exa.snapshot(mark))  # a refresh, not a reset


# ---- a raw BGP speaker ---------------------------------------------------------------------------

MARKER = b"\xff" * 16


def bgp_message(msg_type: int, body: bytes, length: int | None = None, marker: bytes = MARKER) -> bytes:
    return marker + struct.pack("!HB", length if length is not None else 19 + len(body), msg_type) + body


def open_message(asn: int, router_id: str, caps: list[bytes], hold: int = 0) -> bytes:
    params = b"".join(b"\x02" + bytes([len(c)]) + c for c in caps)
    body = struct.pack("!BHH4sB", 4, asn if asn < 65536 else 23456, hold, socket.inet_aton(router_id), len(params))
    return bgp_message(1, body + params)


CAP_V4 = b"\x01\x04\x00\x01\x00\x01"
CAP_ASN4 = b"\x41\x04" + struct.pack("!I", 65000)
CAP_EXTENDED = b"\x06\x00"


class RawSpeaker:
    """A BGP speaker of a few lines in namespace `ns`: connects from 10.98.0.1 to ExaBGP,
    exchanges OPEN and KEEPALIVE, then sends whatever bytes a test gives."""

    def __init__(self, ns: str, caps: list[bytes]) -> None:
        def connect():
            with in_netns(ns):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            s.bind((B4, 0))
            try:
                s.connect((E4, 179))
            except OSError:
                s.close()
                return None
            return s
        self.sock = wait_for(connect, 20, interval=0.2, what="ExaBGP accepting the connection")
        self.sock.sendall(open_message(65000, B4, caps))
        assert self.read()[0] == 1  # OPEN
        self.sock.sendall(bgp_message(4, b""))

    def read(self) -> tuple[int, bytes]:
        head = self._exactly(19)
        length, msg_type = struct.unpack("!HB", head[16:19])
        return msg_type, self._exactly(length - 19)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except ConnectionResetError as exc:  # closed with our bytes unread (a 16k UPDATE): RST
                raise EOFError("ExaBGP reset the connection") from exc
            if not chunk:
                raise EOFError("ExaBGP closed the connection")
            data += chunk
        return data

    def notification(self) -> tuple[int, int, bytes]:
        """The NOTIFICATION ExaBGP sends (KEEPALIVEs skipped); EOFError if it closes without one."""
        while True:
            msg_type, body = self.read()
            if msg_type == 3:
                return body[0], body[1], body[2:]

    def close(self) -> None:
        self.sock.close()


def update_body(size: int) -> bytes:
    """A well-formed UPDATE body of `size` octets: ORIGIN, AS_PATH, NEXT_HOP, then /32s."""
    attrs = b"\x40\x01\x01\x00" + b"\x40\x02\x06\x02\x01" + struct.pack("!I", 65000) + b"\x40\x03\x04" + socket.inet_aton(B4)
    nlri = b""
    i = 0
    while 4 + len(attrs) + len(nlri) + 5 <= size:
        nlri += b"\x20" + struct.pack("!I", (100 << 24) + i)
        i += 1
    body = struct.pack("!H", 0) + struct.pack("!H", len(attrs)) + attrs + nlri
    assert len(body) <= size
    return body


@pytest.fixture
def passive_exabgp(nets, tmp_path):
    """ExaBGP listening on 10.98.0.2 for a passive peer 10.98.0.1 (the raw speaker), raw mode."""
    nb, ne = nets
    exa = LauncherExabgp(ne, tmp_path / "exa", [peer("raw", B4, E4, passive=True, gracefulRestartSeconds=0)],
                         BgpSpeakerSpec(), raw=True)
    yield nb, exa
    exa.close()


def session(nb: str, exa: LauncherExabgp, caps: list[bytes]) -> RawSpeaker:
    mark = len(exa.snapshot())
    sp = RawSpeaker(nb, caps)
    exa.wait(is_state(B4, "up"), 20, "raw speaker's session up", start=mark)
    return sp


def test_raw_speaker_caps_and_extended_messages(passive_exabgp):
    nb, exa = passive_exabgp
    sp = session(nb, exa, [CAP_V4, CAP_ASN4, CAP_EXTENDED])
    try:
        body = update_body(6000)  # > 4096: fine with extended messages negotiated
        mark = len(exa.snapshot())
        sp.sock.sendall(bgp_message(2, body))
        line = exa.wait(is_raw(B4), 10, "the big UPDATE", start=mark)
        assert line == f"raw-update {B4} 9 {body.hex()}"  # 1 (4-octet AS) + 8 (extended messages)
    finally:
        sp.close()


@pytest.mark.parametrize("case", ["bad marker", "length 5", "update 16k without extended messages",
                                  "unknown type"])
def test_header_errors_are_notified(passive_exabgp, case):
    nb, exa = passive_exabgp
    sp = session(nb, exa, [CAP_V4, CAP_ASN4])
    try:
        if case == "bad marker":
            sp.sock.sendall(bgp_message(4, b"", marker=b"\xff" * 15 + b"\x00"))
            want = (1, 1, None)
        elif case == "length 5":
            sp.sock.sendall(bgp_message(4, b"", length=5))
            want = (1, 2, b"\x00\x05")
        elif case == "unknown type":
            sp.sock.sendall(bgp_message(9, b"\x00\x00"))
            want = (1, 3, b"\x09")
        else:
            big = bgp_message(2, update_body(16384 - 19))
            sp.sock.sendall(big)
            want = (1, 2, big[16:18])  # the length field, ~16 KB
        code, subcode, data = sp.notification()
        assert (code, subcode) == want[:2]
        if want[2] is not None:
            assert data == want[2]
        with pytest.raises(EOFError):  # then the session is closed
            sp.read()
        exa.wait(lambda l: is_state(B4, "down")(l) and f"notification sent ({code},{subcode})" in l, 10,
                 "down with the NOTIFICATION as reason")
    finally:
        sp.close()
    assert not any(l.startswith("raw-update") for l in exa.snapshot())


# ---- unpaced export: a long burst never starves another session's KEEPALIVEs ---------------------
# (What bounds a reactor turn: ExaBGP reads at most 16 KiB of commands per turn, ~1,000 prefixes in
# the agent's shape, and the unpaced API loop works at most 10 ms per turn; the session of k1 gets
# its turn in between. This keeps it so.)

B4B, E4B = "10.98.0.3", "10.98.0.4"  # a second pair of addresses for the second session
CHUNK = 20000  # prefixes handed to ExaBGP at a time (a second or so of its work)
BURST_SECONDS = 4.5  # the burst goes on at least this long: longer than k1's hold time of 3 s


def burst_commands(peer_address: str, n: int, first: int = 0) -> list[str]:
    """The agent's shape: ``announce attributes`` of 500 prefixes each (prefixes `first` ..
    `first` + `n` - 1 of one numbering), then End-of-RIB."""
    out = []
    for start in range(first, first + n, 500):
        nlri = " ".join(f"{11 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}.0/24"
                        for i in range(start, min(first + n, start + 500)))
        out.append(f"neighbor {peer_address} announce attributes next-hop self nlri {nlri}")
    return out + [f"neighbor {peer_address} announce eor ipv4 unicast"]


def imported(bird: Bird, protocol: str) -> int:
    m = re.search(r"(\d+) imported", bird.cmd("show", "protocols", "all", protocol))
    return int(m.group(1)) if m else 0


def keepalive_gap(exa: LauncherExabgp, address: str) -> float:
    """The longest time between two KEEPALIVEs received from `address`, by ExaBGP's clock."""
    times = [o["time"] for o in exa.objects() if o.get("type") == "keepalive"
             and o["neighbor"]["address"]["peer"] == address and o["neighbor"].get("direction") == "receive"]
    return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def test_a_long_announcement_burst_never_delays_keepalives_past_the_hold_time(nets, tmp_path):
    nb, ne = nets
    ip(nb, "addr", "add", f"{B4B}/24", "dev", "lb")
    ip(ne, "addr", "add", f"{E4B}/24", "dev", "le")
    protocols = [  # k1: hold time 3 (KEEPALIVE every second), nothing to carry; k2: the burst
        bgp_protocol("k1", local=B4, local_as=65000, neighbor=E4, neighbor_as=65001, hold_time=3, passive=True),
        bgp_protocol("k2", local=B4B, local_as=65000, neighbor=E4B, neighbor_as=65001, hold_time=90, passive=True),
    ]
    bird = Bird(nb, tmp_path / "bird", base_config(B4) + "\n".join(protocols))
    peers = [peer("k1", B4, E4, holdTime=3), peer("k2", B4B, E4B, holdTime=90, routerId=E4B)]
    exa = LauncherExabgp(ne, tmp_path / "exa", peers, BgpSpeakerSpec(listenAddresses=[]))
    try:
        exa.wait(is_state(B4, "up"), 30, "k1 up")
        exa.wait(is_state(B4B, "up"), 30, "k2 up")
        time.sleep(0.5)  # (nothing to wait for: lets both sessions settle before the burst)
        # one uninterrupted burst however fast the machine: the next chunk goes to ExaBGP while
        # half of the one before is still on its way (its queue never runs dry), until the burst
        # has gone on longer than the hold time
        t0 = time.monotonic()
        sent = 0
        while True:
            for line in burst_commands(B4B, CHUNK, sent):
                exa.send(line)
            sent += CHUNK
            if time.monotonic() - t0 > BURST_SECONDS:
                break
            wait_for(lambda: imported(bird, "k2") >= sent - CHUNK // 2, 180, interval=0.05,
                     what=f"{sent - CHUNK // 2} routes at BIRD over k2")
        wait_for(lambda: imported(bird, "k2") >= sent, 180, interval=0.2, what=f"{sent} routes at BIRD over k2")
        took = time.monotonic() - t0
        log = bird.log.read_text()
        seen = f"; BIRD's KEEPALIVEs on k1 as ExaBGP handled them, the longest gap: {keepalive_gap(exa, B4):.2f}s"
        assert took > 3, f"the burst took {took:.1f}s: not longer than the hold time, proves nothing"
        assert "k1: Error: Hold timer expired" not in log and "k1: State changed to down" not in log, log[-2000:] + seen
        assert not any(is_state(B4, "down")(l) for l in exa.snapshot()), exa.output() + log[-2000:] + seen
        assert "Established" in bird.cmd("show", "protocols", "k1")
    finally:
        exa.close()
        bird.close()


def test_a_reload_during_an_announcement_burst_is_not_lost(nets, tmp_path):
    """ExaBGP 5.0.15 dropped a reload (SIGUSR1 or the API's) that came while an adj-RIB-out had
    routes still to send: the agent's new peer was never configured, a held peer never released."""
    nb, ne = nets
    ip(nb, "addr", "add", f"{B4B}/24", "dev", "lb")
    ip(ne, "addr", "add", f"{E4B}/24", "dev", "le")
    protocols = [
        bgp_protocol("k1", local=B4, local_as=65000, neighbor=E4, neighbor_as=65001, passive=True),
        bgp_protocol("k2", local=B4B, local_as=65000, neighbor=E4B, neighbor_as=65001, passive=True),
    ]
    bird = Bird(nb, tmp_path / "bird", base_config(B4) + "\n".join(protocols))
    first, second = peer("k1", B4, E4), peer("k2", B4B, E4B, routerId=E4B)
    exa = LauncherExabgp(ne, tmp_path / "exa", [first], BgpSpeakerSpec(listenAddresses=[]))
    try:
        exa.wait(is_state(B4, "up"), 30, "k1 up")
        total = 200000
        for line in burst_commands(B4, total):
            exa.send(line)
        wait_for(lambda: imported(bird, "k1") > 0, 60, what="the burst reaching BIRD")
        exa.reload([first, second])
        during = imported(bird, "k1")
        exa.wait(is_state(B4B, "up"), 60, "k2 up: the reload was applied")
        assert during < total, "the burst was over before the reload: proves nothing"
        wait_for(lambda: imported(bird, "k1") == total, 180, interval=0.2, what="the whole burst at BIRD")
        assert not any(is_state(B4, "down")(l) for l in exa.snapshot())
    finally:
        exa.close()
        bird.close()
