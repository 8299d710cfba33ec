"""UDP sockets of BFD single hop (RFC 5881): one receive socket per local address, one send socket
per session.

DOC: RFC 5881 section 4: control packets go to UDP port 3784 from a source port in 49152-65535
that stays the same for the session; section 5: they leave with TTL / hop limit 255 and a received
packet whose TTL / hop limit is not 255 is dropped (GTSM: only a directly connected neighbour can
send it). The receive socket asks the kernel for the TTL of each datagram (IP_RECVTTL /
IPV6_RECVHOPLIMIT ancillary data); `read` returns it and the caller drops a packet without 255.
Every socket is bound to the session's local address (an explicit one, or the source address the
kernel picks for the peer: `source_address`), never the wildcard, so BFD for one address cannot
capture another daemon's sessions. Without SO_REUSEADDR a second BFD speaker on the same local
address gets EADDRINUSE, which the caller reports.
"""

from __future__ import annotations

import errno
import random
import socket
import sys

PORT = 3784  # single hop control (RFC 5881)
SOURCE_PORTS = (49152, 65535)
TTL = 255
IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)  # Linux value; Python does not export it
_ANC = socket.CMSG_SPACE(4)


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def source_address(peer: str) -> str:
    """The address the kernel would send from towards `peer` (no packet is sent)."""
    with socket.socket(family_of(peer), socket.SOCK_DGRAM) as s:
        s.connect((peer, PORT))
        return s.getsockname()[0]


def receive_socket(local: str) -> socket.socket:
    fam = family_of(local)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.setblocking(False)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
        else:
            s.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
        s.bind((local, PORT))
    except BaseException:
        s.close()
        raise
    return s


def send_socket(local: str, peer: str, rng: random.Random | None = None) -> socket.socket:
    """Bound to `local` and a free port of 49152-65535, connected to `peer` port 3784, TTL 255."""
    fam = family_of(local)
    rng = rng or random.Random()
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.setblocking(False)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, TTL)
        else:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, TTL)
        for attempt in range(64):
            try:
                s.bind((local, rng.randint(*SOURCE_PORTS)))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or attempt == 63:
                    raise
        s.connect((peer, PORT))
    except BaseException:
        s.close()
        raise
    return s


def read(s: socket.socket) -> tuple[bytes, str, int | None] | None:
    """One datagram: (payload, source address, TTL or hop limit; None if the kernel gave none);
    None when nothing is waiting."""
    try:
        data, anc, _flags, addr = s.recvmsg(512, _ANC)
    except (BlockingIOError, InterruptedError):
        return None
    ttl = None
    for level, kind, value in anc:
        if (level, kind) in ((socket.IPPROTO_IP, socket.IP_TTL), (socket.IPPROTO_IPV6, socket.IPV6_HOPLIMIT)):
            ttl = int.from_bytes(value[:4], sys.byteorder)
    return data, addr[0], ttl
