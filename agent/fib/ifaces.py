"""Interfaces and their addresses, decoded with pyroute2's message classes.

DOC: links and interface addresses are few and change rarely, so speed does not matter here:
they are decoded by pyroute2 (`ifinfmsg`, `ifaddrmsg`), the design card's netlink library,
instead of by hand. The bytes still come from the agent's own sockets (`nlsock`: one owner per
socket, a deadline on every read; pyroute2 0.9's `IPRoute` runs an asyncio loop of its own and
cannot be called from the agent's loop), and link notifications stay on the route monitor's
socket, so a route event is never decoded before the link event it depends on. Routes, the hot
path (100k+ per second), keep the hand-packed codec of `codec` (pyroute2 measured 40x slower
there), which the tests cross-check against pyroute2's `rtmsg`.

`decode_link(buf, off, end)` / `decode_address(buf, off, end)` take a message whose body starts
at `off` (after the 16-byte netlink header), as the codec's message iterator yields them.
"""

from __future__ import annotations

import sys

from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from .types import Link

NLMSG_HDRLEN = 16
IFF_UP = 0x1


def decode_link(buf: bytes, off: int, end: int) -> Link | None:
    """An RTM_NEWLINK / RTM_DELLINK message -> `Link` (None without a name)."""
    msg = ifinfmsg(bytes(buf[off - NLMSG_HDRLEN:end]))
    msg.decode()
    name = msg.get("IFLA_IFNAME")
    if not name:
        return None
    return Link(sys.intern(name), msg["index"], bool(msg["flags"] & IFF_UP))


def decode_address(buf: bytes, off: int, end: int) -> tuple[str, int, int] | None:
    """An RTM_NEWADDR message -> (address text, prefix length, scope); None when it has none."""
    msg = ifaddrmsg(bytes(buf[off - NLMSG_HDRLEN:end]))
    msg.decode()
    address = msg.get("IFA_LOCAL") or msg.get("IFA_ADDRESS")
    if not address:
        return None
    return address, msg["prefixlen"], msg["scope"]
