"""A raw BGP speaker for tests: a real TCP session, OPEN/KEEPALIVE done, then any octets you like.

DOC: `RawSpeaker(asn, router_id, caps=...)` is a minimal asyncio BGP speaker that can send what
a correct one never would. It connects (`connect(host, port)`) or listens (`listen(host, port)`,
one peer), optionally from inside a network namespace (``netns=``: the socket is made there,
`testlab.netns.in_netns`), and `establish()` runs the OPEN exchange with the capabilities given
(`testlab.bgpwire.cap_*`), then sends KEEPALIVEs every hold/3 seconds by itself. `send(data)`
writes arbitrary octets (a whole message from `testlab.bgpwire`, a malformed one, half a one);
`send_update(body)` frames an UPDATE body.

Every message received is recorded in order in `received` as a `Received` (type, body; a
NOTIFICATION also gives `code`, `subcode`, `data`); `wait_for(predicate, timeout)` waits until a
message matches (no sleeps: a condition is notified per message), `wait_closed(timeout)` until
the peer closed the connection; `notification` is the NOTIFICATION received, if any, and
`peer_open` the peer's OPEN (its capabilities as ``{code: [value, ...]}`` in `peer_caps`).
A framing the speaker cannot read (bad marker, length out of range) is recorded as a `Received`
of type 0 with the raw header, and reading stops.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import bgpwire as w

MARKER = w.MARKER


@dataclass(frozen=True)
class Received:
    type: int  # 1 OPEN, 2 UPDATE, 3 NOTIFICATION, 4 KEEPALIVE, 5 ROUTE-REFRESH; 0: unreadable framing
    body: bytes

    @property
    def code(self) -> int | None:
        return self.body[0] if self.type == w.NOTIFICATION and self.body else None

    @property
    def subcode(self) -> int | None:
        return self.body[1] if self.type == w.NOTIFICATION and len(self.body) > 1 else None

    @property
    def data(self) -> bytes:
        return self.body[2:] if self.type == w.NOTIFICATION else b""


@dataclass
class RawSpeaker:
    asn: int
    router_id: str
    hold_time: int = 90
    caps: Sequence[bytes] = (w.cap_mp(1), w.cap_mp(2), w.cap_route_refresh())
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not any(c[0] == 65 for c in self.caps):
            self.caps = (*self.caps, w.cap_asn4(self.asn))
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._changed = asyncio.Condition()
        self._closed = False
        self._tasks: list[asyncio.Task] = []
        self.peer_open: Received | None = None

    # ---- the connection -------------------------------------------------------------------------

    async def connect(self, host: str, port: int = 179, *, local: str | None = None, netns: str | None = None,
                      timeout: float = 10.0) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = _socket(family, netns)
        if local:
            sock.bind((local, 0))
        sock.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), timeout)
        self._reader, self._writer = await asyncio.open_connection(sock=sock)
        self._start()

    async def listen(self, host: str = "127.0.0.1", port: int = 0, *, netns: str | None = None) -> int:
        """Listen for one peer; returns the bound port. `accepted(timeout)` waits for it."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = _socket(family, netns)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1)
        sock.setblocking(False)
        self._listener = sock
        return sock.getsockname()[1]

    async def accepted(self, timeout: float = 10.0) -> None:
        conn, _ = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(self._listener), timeout)
        self._listener.close()
        self._reader, self._writer = await asyncio.open_connection(sock=conn)
        self._start()

    def _start(self) -> None:
        self._tasks.append(asyncio.create_task(self._read(), name="rawspeaker-read"))

    async def establish(self, timeout: float = 10.0) -> Received:
        """Send our OPEN, wait for the peer's, confirm with a KEEPALIVE, wait for its KEEPALIVE;
        then keep the session alive. Returns the peer's OPEN."""
        self.send(w.open_msg(self.asn, self.router_id, self.hold_time, self.caps))
        self.peer_open = await self.wait_for(lambda m: m.type == w.OPEN, timeout)
        self.send(w.keepalive())
        await self.wait_for(lambda m: m.type == w.KEEPALIVE, timeout)
        hold = min(self.hold_time, struct.unpack_from(">H", self.peer_open.body, 3)[0])
        if hold:
            self._tasks.append(asyncio.create_task(self._keepalives(hold / 3), name="rawspeaker-keepalive"))
        return self.peer_open

    @property
    def peer_caps(self) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        if self.peer_open is None:
            return out
        body = self.peer_open.body
        params, i = body[10:10 + body[9]], 0
        while i + 2 <= len(params):
            kind, ln = params[i], params[i + 1]
            if kind == 2:
                caps, j = params[i + 2:i + 2 + ln], 0
                while j + 2 <= len(caps):
                    out.setdefault(caps[j], []).append(caps[j + 2:j + 2 + caps[j + 1]])
                    j += 2 + caps[j + 1]
            i += 2 + ln
        return out

    def send(self, data: bytes) -> None:
        assert self._writer is not None, "not connected"
        self._writer.write(data)

    def send_update(self, body: bytes) -> None:
        self.send(w.message(w.UPDATE, body))

    async def drain(self) -> None:
        if self._writer is not None:
            await self._writer.drain()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except Exception:
                pass

    async def __aenter__(self) -> "RawSpeaker":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ---- what came in ---------------------------------------------------------------------------

    @property
    def notification(self) -> Received | None:
        return next((m for m in self.received if m.type == w.NOTIFICATION), None)

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_for(self, predicate: Callable[[Received], bool], timeout: float = 10.0) -> Received:
        """The first message received (so far or from now on) that matches `predicate`."""
        async def match() -> Received:
            async with self._changed:
                while True:
                    found = next((m for m in self.received if predicate(m)), None)
                    if found is not None:
                        return found
                    if self._closed:
                        raise ConnectionError(f"connection closed; received {[m.type for m in self.received]}")
                    await self._changed.wait()
        return await asyncio.wait_for(match(), timeout)

    async def wait_closed(self, timeout: float = 10.0) -> None:
        async def closed() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self._closed)
        await asyncio.wait_for(closed(), timeout)

    async def _read(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                header = await reader.readexactly(19)
                length, kind = struct.unpack_from(">HB", header, 16)
                if header[:16] != MARKER or not 19 <= length <= 65535:
                    await self._record(Received(0, header))
                    return
                await self._record(Received(kind, await reader.readexactly(length - 19)))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            async with self._changed:
                self._closed = True
                self._changed.notify_all()

    async def _record(self, message: Received) -> None:
        async with self._changed:
            self.received.append(message)
            self._changed.notify_all()

    async def _keepalives(self, interval: float) -> None:
        while not self._closed:
            await asyncio.sleep(interval)  # the protocol's timer, not a synchronisation
            if self._writer is not None and not self._writer.is_closing():
                self.send(w.keepalive())


def _socket(family: int, netns: str | None) -> socket.socket:
    if netns is None:
        return socket.socket(family, socket.SOCK_STREAM)
    from .netns import in_netns

    with in_netns(netns):
        return socket.socket(family, socket.SOCK_STREAM)
