"""Interfaces and their addresses: the two rtnetlink messages of links and interface addresses.

DOC: links and interface addresses are few and change rarely, so speed does not matter here, but
memory does: they used to be decoded by pyroute2's message classes (`ifinfmsg`, `ifaddrmsg`), and
importing any part of pyroute2 imports all of it (IPDB, NDB, conntrack ...): 22 MiB of the agent's
~53 MiB before it learns a route, and 0.3 s of its start. The two messages need a handful of
fields, read here by hand: the fixed header (`ifinfomsg`: index and flags; `ifaddrmsg`: prefix
length and scope) and the attributes IFLA_IFNAME, IFA_LOCAL and IFA_ADDRESS. The tests build
messages with pyroute2 and check both decoders agree. The bytes come from the agent's own sockets
(`nlsock`: one owner per socket, a deadline on every read), and link notifications stay on the
route monitor's socket, so a route event is never decoded before the link event it depends on.
Routes, the hot path (100k+ per second), have the hand-packed codec of `codec`.

`decode_link(buf, off, end)` / `decode_address(buf, off, end)` take a message whose body starts
at `off` (after the 16-byte netlink header), as the codec's message iterator yields them.
"""

from __future__ import annotations

import socket
import struct
import sys
from collections.abc import Iterator

from .types import Link

NLMSG_HDRLEN = 16
IFF_UP = 0x1
IFLA_IFNAME = 3
IFA_ADDRESS, IFA_LOCAL = 1, 2
_IFINFOMSG = struct.Struct("=BxHiII")  # family, type, index, flags, change
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
_NLATTR = struct.Struct("=HH")
_NLA_TYPE_MASK = 0x3FFF  # strip NLA_F_NESTED / NLA_F_NET_BYTEORDER
_FAMILIES = {4: socket.AF_INET, 16: socket.AF_INET6}  # address length -> family


def _attrs(buf: bytes, o: int, end: int) -> Iterator[tuple[int, bytes]]:
    """(type, value) of each attribute in ``buf[o:end]``; stops at a malformed one."""
    while o + 4 <= end:
        alen, atype = _NLATTR.unpack_from(buf, o)
        if alen < 4 or o + alen > end:
            return
        yield atype & _NLA_TYPE_MASK, bytes(buf[o + 4:o + alen])
        o += (alen + 3) & ~3


def decode_link(buf: bytes, off: int, end: int) -> Link | None:
    """An RTM_NEWLINK / RTM_DELLINK message -> `Link` (None without a name)."""
    if end - off < _IFINFOMSG.size:
        return None
    _family, _type, index, flags, _change = _IFINFOMSG.unpack_from(buf, off)
    for atype, value in _attrs(buf, off + _IFINFOMSG.size, end):
        if atype == IFLA_IFNAME:
            name = value.split(b"\0", 1)[0].decode("utf-8", "replace")
            return Link(sys.intern(name), index, bool(flags & IFF_UP)) if name else None
    return None


def decode_address(buf: bytes, off: int, end: int) -> tuple[str, int, int] | None:
    """An RTM_NEWADDR message -> (address text, prefix length, scope); None when it has none."""
    if end - off < _IFADDRMSG.size:
        return None
    _family, prefixlen, _flags, scope, _index = _IFADDRMSG.unpack_from(buf, off)
    local = address = None
    for atype, value in _attrs(buf, off + _IFADDRMSG.size, end):
        if atype == IFA_LOCAL and local is None:
            local = value
        elif atype == IFA_ADDRESS and address is None:
            address = value
    raw = local or address
    family = _FAMILIES.get(len(raw)) if raw else None
    if family is None:
        return None
    return socket.inet_ntop(family, raw), prefixlen, scope
