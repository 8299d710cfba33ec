"""`agent.speaker.lines.LineReader`: the lines of the relay's stream, binary frames included,
whatever the read boundaries; too long lines dropped and counted, the others kept."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.speaker.lines import LineReader, newlines_of


def frame(peer: bytes, data: bytes) -> bytes:
    return b"wire-events " + peer + b" " + str(data.count(b"\n")).encode() + b" " + data


def read(stream: bytes, cuts: list[int], limit: int = 1 << 20) -> tuple[list[bytes], int]:
    r = LineReader(limit)
    out: list[bytes] = []
    last = 0
    for cut in sorted(cuts) + [len(stream)]:
        out += r.feed(stream[last:cut])
        last = cut
    return out + r.end(), r.dropped


LINES = st.lists(
    st.one_of(
        st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),  # a text line (no newline)
        st.binary(max_size=120).map(lambda d: frame(b"192.0.2.1", d)),  # a frame, any octets
        st.lists(st.sampled_from([b"\n", b"\n\n", b"wire-events 1 2 ", b"x", b" "]), max_size=12)
        .map(b"".join).map(lambda d: frame(b"10.0.0.1", d)),
    ), max_size=25)


@settings(max_examples=400, deadline=None)
@given(LINES, st.lists(st.integers(0, 4000), max_size=30))
def test_every_line_and_frame_comes_out_whole_and_in_order_whatever_the_chunks(lines, cuts):
    stream = b"".join(line + b"\n" for line in lines)
    got, dropped = read(stream, [c for c in cuts if c <= len(stream)])
    assert [g for g in got if g] == [line for line in lines if line]  # (the channel skips empty lines)
    assert dropped == 0


def test_one_octet_at_a_time_and_a_last_line_without_newline():
    data = bytes(range(256)) * 3
    lines = [b"done", frame(b"p", data), b"{\"type\": \"state\"}", frame(b"p", b"\n" * 7), b"last"]
    stream = b"\n".join(lines)  # no newline after the last one
    assert read(stream, list(range(len(stream))))[0] == lines
    assert read(stream, [])[0] == lines


def test_too_long_lines_and_frames_are_dropped_and_counted_and_the_others_kept():
    big = frame(b"p", b"\n".join([b"y" * 30] * 10))
    head_big = frame(b"p", b"h" * 400 + b"\n" + b"y\n" * 3)  # over the limit before its first newline
    lines = [b"a", b"x" * 500, b"b", big, b"c", head_big, frame(b"p", b"ok\nok"), b"z" * 300]
    stream = b"\n".join(lines)
    rng = random.Random(1)
    for size in (1, 7, 64, 199, "random"):  # (reads never longer than the limit, as READ_CHUNK < READ_LIMIT)
        if size == "random":
            cuts = list(itertools.accumulate(rng.randint(1, 199) for _ in range(len(stream))))
        else:
            cuts = list(range(size, len(stream), size))
        got, dropped = read(stream, [c for c in cuts if c < len(stream)], limit=200)
        assert got == [b"a", b"b", b"c", frame(b"p", b"ok\nok")] and dropped == 4, size


@pytest.mark.parametrize("piece, k", [
    (b"wire-events 192.0.2.1 3 \x00\x01", 3), (b"wire-events 192.0.2.1 0 ", 0), (b"wire-events 192.0.2.1 x \n", 0),
    (b"wire-events 192.0.2.1", 0), (b"wire-events p -2 d", 0), (b"wire-events p 99999999999 d", 0)])
def test_k_is_read_from_the_header_and_anything_else_is_an_ordinary_line(piece, k):
    assert newlines_of(piece) == k
