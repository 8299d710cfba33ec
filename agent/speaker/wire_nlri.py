"""NLRI fields off the wire: prefixes (and ADD-PATH path identifiers) as `Prefix` values.

DOC: pure functions for `agent.speaker.wire`. `prefixes(data, pos, end, v6)` reads an NLRI field
(the withdrawn routes, the NLRI field, the NLRI of MP_REACH_NLRI / MP_UNREACH_NLRI) into `Prefix`
values (the same ints `Prefix.parse` gives: ``(v6 << 136) | (net << 8) | length``, the network's
bits right-aligned), or None
when it is malformed (a length over 32/128, a prefix overrunning the field): the caller resets
the session. Host bits are cleared, as BIRD and FRR do. `nlri_entries(..., addpath)` gives
``(path_id, Prefix)`` pairs for ADD-PATH (RFC 7911) fields (the 4-octet path id before each
prefix); `field_prefixes` gives either, by the session's ADD-PATH flag for the family.

Speed: a field of prefixes of one length (the usual shape of a big UPDATE) is read without a
Python step per prefix (`_one_length`); otherwise one loop step per prefix computes its value,
and the `Prefix` objects are made in one `map` at the end. A prefix's octets are its network's
bits left-aligned: their int shifted right by the unused bits of the last octet
(``8 * octets - length``, `UNUSED`) is the network, host bits gone.
"""

from __future__ import annotations

import re
import struct
from itertools import repeat
from operator import add, rshift

from ..core.model import Prefix

_new_int = int.__new__
_from_bytes = int.from_bytes
_V6_FLAG = 1 << 136
# a prefix of `length` bits: the unused (host) bits of its last octet; its value is
# ((int(octets) >> UNUSED[length]) << 8) | length
UNUSED = tuple(-p & 7 for p in range(129))
# IPv4, read as 4 octets (`_U32`, padded): (u32 >> SHIFT4[length]) << 8 | length
SHIFT4 = tuple(32 - p for p in range(33))
_HOST_BITS = [bytes(b & (0xFF << (8 - r)) & 0xFF for b in range(256)) for r in range(8)]  # by length % 8
_RECORD18 = re.compile(b".{18}", re.S)
_U32 = struct.Struct(">I").unpack_from


def prefixes(data: bytes, pos: int, end: int, v6: bool) -> list[Prefix] | None:
    """The prefixes of an NLRI field ``data[pos:end]`` (no path ids); None if malformed (a length
    over 32/128 or a prefix overrunning the field). Host bits are cleared."""
    if pos >= end:
        return []
    plen = data[pos]
    step = 1 + ((plen + 7) >> 3)
    size = end - pos
    if size >= 8 * step and not size % step and plen <= (128 if v6 else 32) \
            and data[pos:end:step] == bytes((plen,)) * (size // step):
        return _one_length(data, pos, end, plen, step, v6)
    out: list[int] = []  # the values; made Prefix objects at the end (no Python call per prefix)
    app = out.append
    if v6:
        while pos < end:
            plen = data[pos]
            nxt = pos + 1 + ((plen + 7) >> 3)
            if plen > 128 or nxt > end:
                return None
            app(((_from_bytes(data[pos + 1:nxt]) >> UNUSED[plen]) << 8) | plen | _V6_FLAG)
            pos = nxt
        return list(map(_new_int, repeat(Prefix), out))
    if end + 4 > len(data):  # _U32 reads 4 octets from each prefix on
        data = data[:end] + b"\0\0\0\0"
    u32, shift = _U32, SHIFT4
    while pos < end:
        plen = data[pos]
        if plen > 32:
            return None
        app(((u32(data, pos + 1)[0] >> shift[plen]) << 8) | plen)
        pos += 1 + ((plen + 7) >> 3)
    if pos != end:
        return None
    return list(map(_new_int, repeat(Prefix), out))


def _one_length(data: bytes, pos: int, end: int, plen: int, step: int, v6: bool) -> list[Prefix]:
    """A field of prefixes of one length (the usual shape of a big UPDATE), without a Python step
    per prefix: the octets are moved column by column into fixed-size records, right-aligned before
    the length octet, that `struct` (IPv4: 8 octets ``0 .. 0 A B C LEN``) or `int.from_bytes`
    (IPv6: 18 octets ``1 0 .. 0 A..F LEN``, the IPv6 flag bit of `Prefix` included) read as the
    `Prefix` values. A length that is not a multiple of 8 (the last octet has `UNUSED` host bits)
    takes two more passes in C: the values shifted right by the host bits, and the length (and the
    flag, left out of the record then) put back."""
    count, size = (end - pos) // step, 18 if v6 else 8
    first = size - step  # (step - 1 octets, right-aligned before the length)
    unused = UNUSED[plen]
    buf = bytearray(size * count)
    for j in range(step - 1):
        column = data[pos + 1 + j:end:step]
        if j == step - 2 and unused:  # the last octet: host bits cleared (the shift must not carry them)
            column = column.translate(_HOST_BITS[plen & 7])
        buf[first + j::size] = column
    buf[size - 1::size] = data[pos:end:step]
    if v6:
        if not unused:
            buf[0::18] = b"\1" * count
        values = map(_from_bytes, _RECORD18.findall(buf))
    else:
        values = struct.unpack(f">{count}Q", buf)
    if unused:  # value >> unused == (net << 8) | (plen >> unused): put the length (and flag) back
        values = map(add, map(rshift, values, repeat(unused)),
                     repeat(plen - (plen >> unused) + (_V6_FLAG if v6 else 0)))
    return list(map(_new_int, repeat(Prefix), values))


def nlri_entries(data: bytes, pos: int, end: int, v6: bool, addpath: bool) -> list | None:
    """``[(path_id, Prefix), ...]`` of an NLRI field (path_id None without ADD-PATH); None if malformed."""
    if not addpath:
        found = prefixes(data, pos, end, v6)
        return None if found is None else [(None, p) for p in found]
    return _path_entries(data, pos, end, v6)


def _path_entries(data: bytes, pos: int, end: int, v6: bool) -> list[tuple[int, Prefix]] | None:
    """An ADD-PATH field: the path ids are cut out, the prefixes left are read in one `prefixes`
    call. A field of prefixes of one length (a big UPDATE) is cut column by column, as
    `_one_length` reads it, without a Python step per prefix."""
    if end - pos >= 5:
        plen = data[pos + 4]
        step = 5 + ((plen + 7) >> 3)
        size = end - pos
        if size >= 8 * step and not size % step and plen <= (128 if v6 else 32) \
                and data[pos + 4:end:step] == bytes((plen,)) * (size // step):
            count, width = size // step, step - 4
            ids = bytearray(4 * count)
            for j in range(4):
                ids[j::4] = data[pos + j:end:step]
            rest = bytearray(width * count)
            for j in range(width):
                rest[j::width] = data[pos + 4 + j:end:step]
            return list(zip(struct.unpack(f">{count}I", ids), _one_length(bytes(rest), 0, len(rest), plen, width, v6)))
    ids: list[int] = []
    parts: list[bytes] = []
    while pos < end:
        if end - pos < 5:
            return None
        ids.append(_from_bytes(data[pos:pos + 4]))
        nxt = pos + 5 + ((data[pos + 4] + 7) >> 3)
        if nxt > end:
            return None
        parts.append(data[pos + 4:nxt])
        pos = nxt
    rest = b"".join(parts)
    found = prefixes(rest, 0, len(rest), v6)
    return None if found is None else list(zip(ids, found))


def field_prefixes(data: bytes, pos: int, end: int, v6: bool, addpath: int) -> list | None:
    """The entries of a field: its prefixes, or with ADD-PATH ``(path_id, Prefix)`` pairs (the
    caller splits them at the event boundary: `RouteUpdate.path_ids`, see `agent.speaker.wire`).
    None if malformed."""
    if not addpath:
        return prefixes(data, pos, end, v6)
    return _path_entries(data, pos, end, v6)
