"""The API connection to ExaBGP: the command queue, the writer, the reader.

DOC: `ApiChannel` owns what travels over the Unix socket the API helper (`agent.speaker.relay`)
connects to, whichever ExaBGP incarnation is on the other end:

* the command queue: `send()` encodes a command (`agent.speaker.codec.encode`, so a malformed one
  raises at once) and appends it to a deque; it never blocks;
* the writer (`write(writer)`), which sends queued commands in order, in batches;
* the reader (`read(reader)`), which always drains the socket (ExaBGP's reactor freezes when its
  API pipe is not read, so the reader never waits for the consumer), decodes every line
  (`codec.Decoder`), keeps the last state of every peer (`peer_states`) and counts acks, and hands
  every event to `put` (an unbounded queue's ``put_nowait``).

It knows nothing of processes: `agent.speaker.process.Speaker` starts and restarts ExaBGP and
calls `read` / `write` for each connection.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from .codec import CodecError, Decoder
from .encoder import encode
from ..core.bgp import Ack, Command, Event, PeerState, PeerStatus

log = logging.getLogger("agent.speaker")

READ_LIMIT = 64 * 1024 * 1024  # longest JSON line accepted (an UPDATE of 65535 bytes is ~2 MiB of JSON)
BATCH = 512  # commands per write


class ApiChannel:
    """Commands out, events in, over the current ExaBGP's API connection."""

    def __init__(self, put: Callable[[Event], None]) -> None:
        self.put = put
        self.decode_errors = 0
        self.acks: collections.Counter[bool] = collections.Counter()  # True/False -> count
        self.peer_states: dict[str, PeerStatus] = {}
        self._commands: collections.deque[str] = collections.deque()
        self._wake = asyncio.Event()

    # ---- commands ---------------------------------------------------------------------------------

    def send(self, command: Command | str) -> None:
        """Queue a command for ExaBGP; never blocks. Raises ValueError for a malformed command."""
        self._commands.append(encode(command))
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._commands)

    async def write(self, writer: asyncio.StreamWriter) -> None:
        """Send queued commands to `writer` until cancelled (or the connection fails)."""
        commands = self._commands
        while True:
            if not commands:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = []
            while commands and len(batch) < BATCH:
                batch.append(commands.popleft())
            writer.write(("\n".join(batch) + "\n").encode())
            await writer.drain()

    # ---- events -----------------------------------------------------------------------------------

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Decode every line from `reader` until end of file."""
        decoder = Decoder()
        put = self.put
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than the limit: skip it, keep reading
                self.decode_errors += 1
                log.error("speaker: line from ExaBGP longer than %d bytes dropped", READ_LIMIT)
                continue
            if not line:
                return
            try:
                events = decoder.decode(line)
            except CodecError as exc:
                self.decode_errors += 1
                log.warning("speaker: %s", exc)
                continue
            for event in events:
                cls = type(event)
                if cls is PeerState:
                    self.peer_states[event.peer] = event.state
                elif cls is Ack:
                    self.acks[event.ok] += 1
                put(event)

    def peers_down(self, reason: str) -> None:
        """ExaBGP is gone: every peer whose session was connected or up is down (a dead ExaBGP says
        nothing itself)."""
        for peer, state in list(self.peer_states.items()):
            if state is not PeerStatus.DOWN:
                self.peer_states[peer] = PeerStatus.DOWN
                self.put(PeerState(peer, PeerStatus.DOWN, f"speaker {reason}"))
