"""UPDATEs decoded by the relay: records (`agent.speaker.wire_records`) give the very events of the
in-process decoder, and the relay's line conversion (`agent.speaker.relay`) keeps every line, in
order, for the agent's `Decoder`.

The round trip is checked on every UPDATE the wire decoder's own tests use (BIRD's captured
UPDATEs, the codec tables, the RFC 7606 tables, generated valid and random UPDATEs); the relay as
a process in `test_relay_process_*` (its threads, end of input)."""

from __future__ import annotations

import dataclasses
import gc
import marshal
import os
import socket
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from agent.core.bgp import AnnouncedRuns, PathAttrs, RouteUpdate
from agent.core.model import Prefix
from agent.speaker import relay
from agent.speaker.codec import CodecError, Decoder
from agent.speaker.wire import CAP_ASN4, WireDecoder
from agent.speaker.wire_records import (
    ATTRS_SIZE, Rebuilder, RecordDecoder, RecordError, RecordWriter, columns,
)
from agent.speaker.lines import LineReader
from testlab import bgpwire as w
from tests import test_wire_exabgp as cases

PEER = "192.0.2.1"


def round_trip(body: bytes, caps: int):
    """The events rebuilt from the relay's records, and the in-process decoder's events; the
    relay's decoder (`RecordDecoder`, records made directly for the common UPDATE) must give the
    records `RecordWriter` makes of those events."""
    theirs = WireDecoder().decode(PEER, caps, body)
    records = RecordWriter().records(theirs)
    assert RecordDecoder().records_of(caps, body) == records
    return Rebuilder().events_of(PEER, marshal.dumps(records)), theirs


BODIES = ([(f"captured {i}", bytes.fromhex(b), int(c)) for i, (c, b) in enumerate(cases.CAPTURED)]
          + list(cases._codec_bodies()) + cases._RFC_CASES)


@pytest.mark.parametrize("case, body, caps", BODIES, ids=[c[0] for c in BODIES])
def test_records_give_the_events_of_the_decoder(case, body, caps):
    mine, theirs = round_trip(body, caps)
    assert theirs and mine == theirs
    # the same classes all the way down (a plain tuple equals a PathAttrs, an int a Prefix),
    # except that the prefixes of runs stay plain ints (`agent.core.model`: no object per route)
    for a, b in zip(mine, theirs):
        assert type(a) is type(b)
        if isinstance(a, RouteUpdate):
            assert [tuple(map(type, r[1:])) for r in a.announced] == [tuple(map(type, r[1:])) for r in b.announced]
            runs = isinstance(a.announced, AnnouncedRuns)
            assert [type(r.prefix) for r in a.announced] == [int if runs else Prefix] * len(a.announced)
            assert all(type(r.attrs.origin) is type(s.attrs.origin) for r, s in zip(a.announced, b.announced))
            assert list(map(type, a.withdrawn)) == list(map(type, b.withdrawn))


@settings(max_examples=200, **cases.SETTINGS)
@given(cases.valid_updates())
def test_records_of_generated_updates(case):
    body, caps = case
    mine, theirs = round_trip(body, caps)
    assert mine == theirs


@settings(max_examples=500, **cases.SETTINGS)
@given(st.binary(max_size=300), st.integers(0, 15))
def test_records_of_random_octets(body, caps):
    mine, theirs = round_trip(body, caps)
    assert mine == theirs


def _update(med: int, prefix: str, path=(65001, 4200000001)) -> bytes:
    return w.update(attrs=[w.origin(0), w.as_path(list(path)), w.next_hop("192.0.2.1"), w.med(med),
                           w.communities(["65001:7"])], nlri=w.nlri([prefix]))


def test_equal_sets_are_one_object_and_values_are_shared():
    dec, reb, writer = WireDecoder(), Rebuilder(), RecordWriter()

    def announced(body):
        (ev,) = reb.events_of(PEER, marshal.dumps(writer.records(dec.decode(PEER, CAP_ASN4, body))))
        return ev.announced[0]

    a, b, c = announced(_update(1, "10.0.0.0/24")), announced(_update(1, "10.0.1.0/24")), \
        announced(_update(2, "10.0.2.0/24"))
    assert a.attrs is b.attrs and isinstance(a.attrs, PathAttrs)
    assert c.attrs is not a.attrs and c.attrs.med == 2
    assert c.attrs.as_path == a.attrs.as_path  # (not shared: no candidate keeps the tuple, `pack_path`)
    assert c.attrs.communities is a.attrs.communities  # the community list and next hops: one each
    assert c.attrs.communities is a.attrs.communities and c.attrs.communities == ("65001:7",)
    assert c.next_hop is a.next_hop
    reb.release()  # a load is over: the sharing memo goes, the numbered sets stay
    assert not reb._values
    again = announced(_update(1, "10.0.3.0/24"))  # (the writer sends set 1 by number now)
    assert again.attrs is a.attrs
    d = announced(_update(3, "10.0.4.0/24"))
    assert d.attrs.communities == a.attrs.communities and d.attrs.communities is not a.attrs.communities


def _record_with(comms, large) -> bytes:
    """The record of one announced set whose communities fields are `comms` and `large`."""
    (rec,) = RecordWriter().records(WireDecoder().decode(PEER, CAP_ASN4, _update(1, "10.0.0.0/24")))
    kind, fields, nh, prefix = rec
    assert kind == 3  # (one IPv4 prefix alone)
    return marshal.dumps([(kind, (*fields[:6], comms, large, *fields[8:]), nh, prefix)])


def test_packed_communities_travel_as_octets():
    data = _record_with(bytes.fromhex("fde90007"), bytes.fromhex("000111700000000100000002"))
    (ev,) = Rebuilder().events_of(PEER, data)
    attrs = ev.announced[0].attrs
    assert attrs.communities == ("65001:7",) and attrs.large_communities == ("70000:1:2",)


@pytest.mark.parametrize("comms,large", [("65001:7", ()), (b"\x00\x01\x02", ()), ((), b"\x00" * 8),
                                         ((), ("70000:1:2",))])
def test_communities_not_packed_octets_are_refused(comms, large):
    with pytest.raises(RecordError, match="not packed octets"):
        Rebuilder().events_of(PEER, _record_with(comms, large))


@pytest.mark.parametrize("data", [b"", b"\x00", marshal.dumps([(9, 4)]), marshal.dumps([(2, 4, [((0, 0), None, None, (1,))], (), None, None)]),
                                  marshal.dumps([(2, 4, [(5, None, None, (1,))], (), None, None)]),
                                  marshal.dumps([(3, 5, None, 1)]), marshal.dumps([(3, (0, 0), None, 1)]),
                                  marshal.dumps([(3, 0, None)]),
                                  marshal.dumps([(0, 5)]), marshal.dumps("text")])
def test_malformed_records_are_refused(data):
    with pytest.raises(RecordError):
        Rebuilder().events_of(PEER, data)
    with pytest.raises(CodecError):
        Decoder().decode(wire_line(PEER, data))


# ---- the relay's conversion ---------------------------------------------------------------------

def raw_line(peer: str, body: bytes, caps: int = CAP_ASN4) -> bytes:
    return f"raw-update {peer} {caps} {body.hex()}".encode()


def test_relay_batches_a_peers_updates_and_keeps_every_other_line_in_order():
    other = "192.0.2.9"
    lines = [raw_line(PEER, _update(i, f"10.0.{i}.0/24")) for i in range(3)] + [b"done"] + \
        [raw_line(other, _update(7, "10.1.0.0/24")), raw_line(PEER, _update(8, "10.2.0.0/24")),
         b'{"type": "state", "neighbor": {"address": {"peer": "192.0.2.1"}, "state": "down"}}',
         b"raw-update not a line", raw_line(PEER, w.eor(1, 1))]
    out = relay._decoder()(lines)
    assert [line.split(b" ")[0] for line in out] == [
        b"wire-events", b"done", b"wire-events", b"wire-events", b"{\"type\":", b"raw-update", b"wire-events"]
    assert out[0].split(b" ")[1] == PEER.encode() and out[2].split(b" ")[1] == other.encode()
    assert out[5] == b"raw-update not a line"  # not convertible: on to the agent as it came

    def decoded(seq):
        d, evs = Decoder(), []
        for line in seq:
            try:
                evs += d.decode(line)
            except CodecError as exc:
                evs.append(type(exc))
        return evs
    mine = decoded(out)
    assert mine[0].messages == 3 and len(mine[0].announced) == 3  # one event of three UPDATEs
    assert flat(mine) == flat(decoded(lines)) and messages(mine) == messages(decoded(lines))


def flat(events) -> list:
    """The events with every `RouteUpdate` as its routes (one item per prefix announced or
    withdrawn, in order): an event of several UPDATEs (`AnnouncedRuns.messages`) gives the same."""
    out: list = []
    for ev in events:
        if isinstance(ev, RouteUpdate):
            ids = ev.path_ids or [None] * len(ev.announced)
            wd_ids = ev.withdrawn_path_ids or [None] * len(ev.withdrawn)
            out += [("withdraw", ev.peer, ev.family, p, i) for p, i in zip(ev.withdrawn, wd_ids)]
            out += [("announce", ev.peer, ev.family, tuple(a), i) for a, i in zip(ev.announced, ids)]
        else:
            out.append(ev)
    return out


def messages(events) -> int:
    return sum(ev.messages if isinstance(ev, RouteUpdate) else 1 for ev in events)


def test_successive_updates_that_only_announce_are_one_event_the_same_routes():
    """The records of UPDATEs of one family that only announce (one IPv4 prefix, or runs without
    withdrawals or path ids) are one event while they come in a row; anything else (another
    family, a withdrawal, End-of-RIB) ends it; a lone one is its UPDATE's own event. The events
    hold the same routes in the same order and stand for as many UPDATEs."""
    v6 = w.update(attrs=[w.origin(0), w.as_path([65001]),
                         w.mp_reach(w.AFI_IPV6, w.SAFI_UNICAST, ["2001:db8::1"], w.nlri(["2001:db8:5::/48", "2001:db8:6::/48"]))])
    two = w.update(attrs=[w.origin(0), w.as_path([65001]), w.next_hop("192.0.2.1")],
                   nlri=w.nlri(["10.0.3.0/24", "10.0.4.0/24"]))
    bodies = [_update(i, f"10.0.{i}.0/24") for i in range(3)] + [two, v6, v6, w.eor(1, 1), _update(9, "10.9.0.0/24"),
                                                                 w.update(withdrawn=w.nlri(["10.0.1.0/24"])),
                                                                 _update(10, "10.10.0.0/24"), _update(11, "10.11.0.0/24")]
    dec = RecordDecoder()
    theirs = [ev for body in bodies for ev in WireDecoder().decode(PEER, CAP_ASN4, body)]
    records = [r for body in bodies for r in dec.records_of(CAP_ASN4, body)]
    reb = Rebuilder()
    mine = list(reb.events_of(PEER, marshal.dumps(records)))
    assert reb.messages == len(records) == len(bodies)
    assert [ev.messages if isinstance(ev, RouteUpdate) else 0 for ev in mine] == [4, 2, 0, 1, 1, 2]
    assert mine[3] == theirs[7] and mine[4] == theirs[8]  # alone: as decoded
    assert flat(mine) == flat(theirs) and messages(mine) == messages(theirs)


def test_relay_batch_bound():
    lines = [raw_line(PEER, _update(i, f"10.{i >> 8}.{i & 255}.0/24")) for i in range(relay.BATCH * 2 + 1)]
    out = relay._decoder()(lines)
    assert len(out) == 3
    assert [messages(Decoder().decode(line)) for line in out] == [relay.BATCH, relay.BATCH, 1]


def test_relay_conversion_leaves_nothing_for_the_cyclic_collector():
    """The relay collects only when its tracked objects grew by `relay.RELAY_GC_THRESHOLD`, which
    its bounded memos never reach: its conversion must make no reference cycles, whatever comes
    (every captured, codec and RFC 7606 body, malformed lines, other lines), and must set that
    threshold."""
    convert = relay._decoder()
    assert gc.get_threshold()[0] == relay.RELAY_GC_THRESHOLD
    lines = [raw_line(PEER, body, caps) for _case, body, caps in BODIES] + \
        [b"raw-update not a line", raw_line(PEER, b"\xff" * 19), b"done", raw_line(PEER, w.eor(1, 1))]
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            assert convert(lines)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_relay_process_decodes_and_forwards_to_the_end(tmp_path):
    """The relay as ExaBGP runs it: everything written before its input ends reaches the agent,
    converted and in order; commands flow the other way."""
    path = str(tmp_path / "api.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(30)
    lines = [raw_line(PEER, _update(i, f"10.{i >> 8}.{i & 255}.0/24")) for i in range(2000)] + [b"done"]
    proc = subprocess.Popen([sys.executable, "-S", "-E", relay.__file__, "--decode", path, "tok"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        conn, _ = server.accept()
        conn.settimeout(30)
        conn.sendall(b"announce route 10.0.0.0/24 next-hop self\n")
        assert proc.stdout.readline() == b"announce route 10.0.0.0/24 next-hop self\n"
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.close()
        got = b""
        while chunk := conn.recv(1 << 16):
            got += chunk
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    head, _, rest = got.partition(b"\n")
    assert head == b"tok"
    reader = LineReader(1 << 20)  # (the lines as the agent reads them: frames hold newlines)
    out = reader.feed(rest) + reader.end()
    assert out[-1] == b"done" and len(out) > 2
    out.append(b"")
    assert all(line.startswith(b"wire-events ") for line in out[:-2])
    d = Decoder()
    events = [e for line in out[:-2] for e in d.decode(line)]
    ref = Decoder()
    assert flat(events) == flat([e for line in lines[:-1] for e in ref.decode(line)])
    assert os.path.exists(path)


def test_attribute_sets_by_number_bounded_and_renumbered():
    """A set's fields go once, then its number; a full table starts over from 0 with the fields
    again, so the rebuilder's table stays bounded and never holds a stale number."""
    dec, reb, writer = WireDecoder(), Rebuilder(), RecordWriter()
    bodies = [_update(i, f"10.{i >> 8 & 255}.{i & 255}.0/24") for i in range(ATTRS_SIZE + 10)]
    sent = [writer.records(dec.decode(PEER, CAP_ASN4, b)) for b in bodies]
    refs = [rec[0][1] for rec in sent]
    assert [r[0] for r in refs] == list(range(ATTRS_SIZE)) + list(range(10))  # fields with numbers
    again = writer.records(dec.decode(PEER, CAP_ASN4, bodies[-1]))
    assert again[0][1] == 9  # the number alone
    for rec, body in zip(sent + [again], bodies + bodies[-1:]):
        assert reb.events_of(PEER, marshal.dumps(rec)) == dec.decode(PEER, CAP_ASN4, body)
    assert len(reb._attrs) == ATTRS_SIZE


def test_the_relays_decoder_numbers_as_the_writer_over_a_stream():
    """`RecordDecoder` (records made directly) against `RecordWriter` over `WireDecoder`'s
    events, both kept across a stream of one-prefix, many-prefix and general UPDATEs, past a
    renumbering and a reset."""
    ours, dec, writer = RecordDecoder(), WireDecoder(), RecordWriter()
    many = [w.update(attrs=[w.origin(0), w.as_path([65001, i]), w.next_hop("192.0.2.1")],
                     nlri=w.nlri([f"10.{i}.{j}.0/24" for j in range(3)])) for i in range(40)]
    general = [w.update(withdrawn=w.nlri([f"10.9.{i}.0/24"]), attrs=[w.origin(0), w.as_path([65001]),
                        w.next_hop("192.0.2.1")], nlri=w.nlri([f"10.8.{i}.0/24"])) for i in range(40)]
    ones = [_update(i, f"10.{i >> 8 & 255}.{i & 255}.0/24") for i in range(ATTRS_SIZE + 10)]
    stream = [b for trio in zip(ones, many + many, general + general) for b in trio] + ones[-10:] + ones[:5]
    for i, body in enumerate(stream):
        if i == 100:
            ours.reset()
            writer.reset()
        assert ours.records_of(CAP_ASN4, body) == writer.records(dec.decode(PEER, CAP_ASN4, body)), i


def test_a_record_not_written_makes_the_writer_forget_its_numbers():
    dec, writer = WireDecoder(), RecordWriter()
    events = dec.decode(PEER, CAP_ASN4, _update(1, "10.0.0.0/24"))
    writer.records(events)
    writer.reset()
    (rec,) = writer.records(events)
    assert isinstance(rec[1], tuple)  # the fields again
    with pytest.raises(TypeError):
        writer.records((object(),))


def test_relay_pump_bounded_queues_lose_and_reorder_nothing(monkeypatch):
    """ExaBGP's output waits in at most QUEUED_CHUNKS chunks; with a bound of 2 and one line per
    read every line still arrives, converted, in order, and the end comes after the last write."""
    import threading

    monkeypatch.setattr(relay, "QUEUED_CHUNKS", 2)
    lines = [raw_line(PEER, _update(i, f"10.{i >> 8}.{i & 255}.0/24")) + b"\n" for i in range(300)] + [b"done\n"]
    feed = iter(lines)
    written: list[bytes] = []
    ended = threading.Event()
    relay._decode_pump(lambda n: next(feed, b""), written.append, ended.set)
    assert ended.wait(30)
    reader = LineReader(1 << 20)
    out = reader.feed(b"".join(written)) + [b""]
    assert out[-2:] == [b"done", b""]
    d, ref = Decoder(), Decoder()
    assert [e for line in out[:-2] for e in d.decode(line)] == [e for line in lines[:-1] for e in ref.decode(line)]


def test_relay_pump_ends_the_relay_when_the_conversion_fails(monkeypatch):
    """A bug in the conversion must not leave ExaBGP blocked on a relay that no longer reads: the
    relay ends (ExaBGP is then restarted, as when the relay dies: test_speaker_process)."""
    import threading

    def broken(lines):
        raise RuntimeError("bug")
    monkeypatch.setattr(relay, "_decoder", lambda: broken)
    feed = iter([b"done\n"] * 10)
    ended = threading.Event()
    relay._decode_pump(lambda n: next(feed, b""), lambda data: None, ended.set)
    assert ended.wait(30)


# ---- records by column (the relay's last step) --------------------------------------------------

def _simple_v4(draw_med: int, draw_path: int, third: int, count: int) -> bytes:
    """An IPv4 UPDATE of `count` prefixes (1: a kind-3 record) with a few distinct sets."""
    return w.update(attrs=[w.origin(0), w.as_path([65001, 64512 + draw_path]), w.next_hop("192.0.2.1"),
                           w.med(draw_med)], nlri=w.nlri([f"10.{third}.{i}.0/24" for i in range(count)]))


_bodies = st.lists(st.one_of(
    cases.valid_updates(),
    st.builds(lambda m, p, t, c: (_simple_v4(m, p, t, c), CAP_ASN4), st.integers(0, 3), st.integers(0, 2),
              st.integers(0, 255), st.integers(1, 3))), min_size=1, max_size=16)


@settings(max_examples=300, **cases.SETTINGS)
@given(_bodies, st.integers(1, 5))
def test_records_by_column_give_the_same_events(bodies, table_size):
    """`columns` of a line's records: the same routes in the same order, the same UPDATE count,
    the same attribute sets, also when the writer numbers its sets from 0 again inside the line
    (a table of `table_size` sets: a number comes back with other fields, even inside an
    UPDATE's runs)."""
    from unittest import mock

    from agent.speaker import wire_records
    with mock.patch.object(wire_records, "ATTRS_SIZE", table_size):
        dec = RecordDecoder()
        records = [r for body, caps in bodies for r in dec.records_of(caps, body)]
    by_column = columns(records)
    plain, mine = Rebuilder(), Rebuilder()
    theirs = plain.events_of(PEER, marshal.dumps(records))
    got = mine.events_of(PEER, marshal.dumps(by_column))
    assert flat(got) == flat(theirs) and messages(got) == messages(theirs) and mine.messages == plain.messages
    assert [tuple(a.attrs) for ev in got if isinstance(ev, RouteUpdate) for a in ev.announced] == \
           [tuple(a.attrs) for ev in theirs if isinstance(ev, RouteUpdate) for a in ev.announced]
    assert len(by_column) <= len(records)
    if sum(r[0] == 3 for r in records) == len(records) > 1 and table_size == 5:
        assert [r[0] for r in by_column] == [4]  # (no number came back: one record)


def test_a_table_line_is_a_few_column_records():
    """A line of a table's UPDATEs (one prefix each, a few of several; IPv4 and IPv6 mixed) comes
    to the agent as one record per stretch of a family, each as many UPDATEs as it held."""
    v6 = w.update(attrs=[w.origin(0), w.as_path([65001]),
                         w.mp_reach(w.AFI_IPV6, w.SAFI_UNICAST, ["2001:db8::1"], w.nlri(["2001:db8:5::/48"]))])
    bodies = [_simple_v4(i % 3, i % 2, i, 1 + i % 2) for i in range(6)] + [v6, v6] + [_simple_v4(7, 0, 9, 1)] * 2
    dec = RecordDecoder()
    records = [r for body in bodies for r in dec.records_of(CAP_ASN4, body)]
    out = columns(records)
    assert [(r[0], r[1], r[2]) for r in out] == [(4, 4, 6), (4, 6, 2), (4, 4, 2)]
    (a, b, c) = Rebuilder().events_of(PEER, marshal.dumps(out))
    assert (a.messages, b.messages, c.messages) == (6, 2, 2) and len(a.announced) == 9
    assert [type(x.prefix) for x in a.announced] == [int] * 9


# ---- the line's DATA: binary, newlines and all ---------------------------------------------------

def wire_line(peer: str, data: bytes) -> bytes:
    return b"wire-events %s %d %s" % (peer.encode(), data.count(b"\n"), data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.lists(st.sampled_from([b"\n", b" ", b"\xff", b"1"]), max_size=40).map(b"".join))
def test_a_wrong_newline_count_is_refused(data):
    good = wire_line(PEER, marshal.dumps([(0, 4)]) + data)
    head = good.split(b" ", 3)
    bad = b" ".join(head[:2] + [str(int(head[2]) + 1).encode(), head[3]])
    with pytest.raises(CodecError):
        Decoder().decode(bad)


def test_a_line_whose_data_holds_spaces_newlines_and_any_octet_is_decoded():
    """Records whose dump holds every troublesome octet (spaces, newlines, 0xff) come through a
    line as they were written, and through the agent's line reader read a few octets at a time."""
    d = RecordDecoder()
    bodies = [_simple_v4(i, i % 3, 10 + i, 1) for i in range(40)]
    records = [r for b in bodies for r in d.records_of(CAP_ASN4, b)]
    records.append((1, "treat-as-withdraw", "reason with spaces\n and a newline \xff\x02", 3, 1, 4,
                    b"\n\xff\x02 \xff\x01"))
    data = marshal.dumps(columns(records))
    assert all(o in data for o in (b" ", b"\n", b"\xff"))
    line = wire_line(PEER, data)
    events = Decoder().decode(line)
    assert flat(events) == flat(Rebuilder().events_of(PEER, data))
    assert events[-1].data == b"\n\xff\x02 \xff\x01" and "\n" in events[-1].reason
    reader = LineReader(1 << 20)
    stream = b"done\n" + line + b"\n" + line + b"\n"
    got = [x for i in range(0, len(stream), 5) for x in reader.feed(stream[i:i + 5])]
    assert got == [b"done", line, line]
