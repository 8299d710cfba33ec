"""The API connection to ExaBGP: the command queue, the writer, the reader, acks.

DOC: `ApiChannel` owns what travels over the Unix socket the API helper (`agent.speaker.relay`)
connects to, whichever ExaBGP incarnation is on the other end:

* the command queue: `send()` encodes a command (`agent.speaker.encoder.encode`, so a malformed
  one raises at once) and appends it to a deque; it never blocks.
* the bound: the queue holds at most `max_queued` commands. `send()` on a full queue drops every
  queued command and reports them in one `CommandsDropped` event (then queues the new one). This
  happens only when ExaBGP is dead or far slower than the changes: the desired state lives with
  the sender (the export reconciler), which plans again from it once the queue has drained
  (`drained()`), so a slow ExaBGP gets the latest state once instead of every intermediate step,
  and memory stays bounded. Nothing is dropped silently: Teardowns and End-of-RIBs are in the
  event like the rest, for the sender to send again.
* a new ExaBGP (`connected(first=False)`): what was queued for the previous one is dropped (and
  logged): the new process must get only what is planned after `SpeakerRestarted`, the full
  re-announcement, never old commands replayed before it.
* the writer (`write(writer)`) sends queued commands in order, in batches, with at most
  `max_in_flight` commands not answered yet (ExaBGP then holds them in memory, unbounded).
* acks: with ``exabgp.api.ack`` ExaBGP answers every command with one ``done`` or ``error`` line.
  Commands it runs from its asynchronous queue (announce, withdraw, and End-of-RIB or route
  refresh to an established peer) are answered in order; the others (teardown, anything refused
  while parsing, a route refresh or End-of-RIB for a peer that is not established) are answered
  at once, possibly before earlier commands. So the writer sends such a command only when nothing
  is in flight, and each ack is matched to the oldest command in flight: the reader turns it into
  `CommandAck(command, ok)`.
* waiting for one answer: `send_waiting(command)` queues like `send` and returns a future that
  gets the command's ack (True/False), or False when the command is dropped (queue bound, a new
  ExaBGP, ExaBGP gone) before it was answered (the speaker uses it to have a NOTIFICATION out
  before a reload removes a peer).
* the reader (`read(reader)`) always drains the socket (ExaBGP's reactor freezes when its API pipe
  is not read, so the reader never waits for the consumer), decodes every line
  (`codec.Decoder`), keeps the last state of every peer (`peer_states`) and hands every event to
  `put` (an unbounded queue's ``put_nowait``), the events of one chunk read at once to
  `put_many` (in order: the event of an ack comes after the events decoded before it).

It knows nothing of processes: `agent.speaker.process.Speaker` starts and restarts ExaBGP and
calls `connected`, `read` and `write` for each connection, and `peers_down` when ExaBGP is gone.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from .codec import CodecError, Decoder
from .encoder import encode
from .lines import LineReader
from ..core.bgp import (
    Ack,
    AnnounceEor,
    Command,
    Event,
    PeerState,
    PeerStatus,
    RequestRouteRefresh,
    RouteUpdate,
    Teardown,
)
from ..core.bgp_speaker import CommandAck, CommandsDropped, SpeakerDown

log = logging.getLogger("agent.speaker")

READ_LIMIT = 64 * 1024 * 1024  # longest JSON line accepted (an UPDATE of 65535 bytes is ~2 MiB of JSON)
READ_CHUNK = 1 << 16  # bytes per read from the socket
BATCH = 512  # commands per write
MAX_QUEUED = 2048  # commands waiting for ExaBGP (up to 500 prefixes each)
MAX_IN_FLIGHT = 1024  # commands written, not answered yet

# answered at once by ExaBGP (or when refused), not from its asynchronous queue: see DOC
_ANSWERED_AT_ONCE = (Teardown, AnnounceEor, RequestRouteRefresh, str)


class ApiChannel:
    """Commands out, events in, over the current ExaBGP's API connection."""

    def __init__(self, put: Callable[[Event], None], max_queued: int = MAX_QUEUED,
                 max_in_flight: int = MAX_IN_FLIGHT, put_many: Callable[[list], None] | None = None) -> None:
        self.put = put
        # a chunk's decoded events at once (else one `put` each)
        self.put_many = put_many or (lambda events: [put(e) for e in events])
        self.max_queued, self.max_in_flight = max_queued, max_in_flight
        self.decode_errors = 0
        self.decoder: Decoder | None = None  # the current connection's (`read`)
        self.decoded_by: collections.Counter[str] = collections.Counter()  # raw UPDATEs' events: relay/agent
        self.acks: collections.Counter[bool] = collections.Counter()  # True/False -> count
        self.unmatched_acks = 0
        self.dropped = 0  # commands dropped at the bound or at a restart
        self.peer_states: dict[str, PeerStatus] = {}
        self._queue: collections.deque[tuple[Command | str, str]] = collections.deque()
        self._in_flight: collections.deque[Command | str] = collections.deque()
        self._waiters: dict[int, tuple[Command | str, asyncio.Future]] = {}  # id(command) ->
        self._wake = asyncio.Event()
        self._empty = asyncio.Event()  # nothing queued (written or dropped)
        self._empty.set()

    # ---- commands ---------------------------------------------------------------------------------

    def send(self, command: Command | str) -> None:
        """Queue a command for ExaBGP; never blocks. Raises ValueError for a malformed command.
        On a full queue, the queued commands are dropped and reported (`CommandsDropped`)."""
        text = encode(command)
        if len(self._queue) >= self.max_queued:
            dropped = tuple(c for c, _ in self._queue)
            self._queue.clear()
            self.dropped += len(dropped)
            log.warning("speaker: %d commands queued for ExaBGP (the bound): dropped, to be planned "
                        "again", len(dropped))
            self._answer_waiters(dropped, False)
            self.put(CommandsDropped(dropped, "queue full"))
        self._queue.append((command, text))
        self._empty.clear()
        self._wake.set()

    def send_waiting(self, command: Command | str) -> asyncio.Future:
        """`send` `command` and return a future of its ack (False also when it is dropped unanswered)."""
        fut = asyncio.get_running_loop().create_future()
        self.send(command)
        self._waiters[id(command)] = (command, fut)
        return fut

    def _answer_waiters(self, commands, ok: bool) -> None:
        if not self._waiters:
            return
        for command in commands:
            entry = self._waiters.get(id(command))
            if entry is not None and entry[0] is command:
                del self._waiters[id(command)]
                if not entry[1].done():
                    entry[1].set_result(ok)

    @property
    def pending(self) -> int:
        """Commands queued, not written yet."""
        return len(self._queue)

    async def drained(self) -> None:
        """Return once nothing is queued: written to ExaBGP, or dropped at a restart."""
        await self._empty.wait()

    @property
    def in_flight(self) -> int:
        """Commands written, not answered yet."""
        return len(self._in_flight)

    def connected(self, first: bool) -> None:
        """A new ExaBGP's helper connected. Unless it is the first: drop the commands queued
        for the previous one (the consumer plans again after `SpeakerRestarted`)."""
        self._answer_waiters(self._in_flight, False)
        self._in_flight.clear()  # their answers died with the old connection
        if first or not self._queue:
            return
        self._answer_waiters([c for c, _ in self._queue], False)
        kinds = collections.Counter(type(c).__name__ for c, _ in self._queue)
        self.dropped += len(self._queue)
        log.warning("speaker: dropped %d commands queued for the previous ExaBGP (%s)", len(self._queue),
                    ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
        self._queue.clear()
        self._empty.set()

    async def write(self, writer: asyncio.StreamWriter) -> None:
        """Send queued commands to `writer` until cancelled (or the connection fails)."""
        queue, in_flight = self._queue, self._in_flight
        while True:
            batch = []
            while queue and len(batch) < BATCH and len(in_flight) < self.max_in_flight:
                command, text = queue[0]
                if in_flight and isinstance(command, _ANSWERED_AT_ONCE):
                    break  # its answer could overtake those of the commands in flight
                queue.popleft()
                in_flight.append(command)
                batch.append(text)
            if batch:
                if not queue:
                    self._empty.set()
                writer.write(("\n".join(batch) + "\n").encode())
                await writer.drain()
                continue
            self._wake.clear()
            await self._wake.wait()

    # ---- events -----------------------------------------------------------------------------------

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Decode every line from `reader` until end of file. (Read in chunks and split here,
        `agent.speaker.lines`: a `readline` per line cost ~15 % of handling an UPDATE of one
        prefix, and the relay's binary frames hold newlines.)"""
        decoder = self.decoder = Decoder(self.decoded_by)
        lines = LineReader(READ_LIMIT)
        while True:
            chunk = await reader.read(READ_CHUNK)
            done = lines.feed(chunk) if chunk else lines.end()
            if lines.dropped:
                self.decode_errors += lines.dropped
                log.error("speaker: line from ExaBGP longer than %d bytes dropped", READ_LIMIT)
                lines.dropped = 0
            if done:
                self._lines(done, decoder)
            if not chunk:
                return

    def release_memos(self) -> None:
        """A load is over: the decoder's sharing memo goes (`Rebuilder.release`)."""
        if self.decoder is not None:
            self.decoder.records.release()

    def _lines(self, lines, decoder: Decoder) -> None:
        out: list[Event] = []  # handed over together (`put_many`), in order with the acks' events
        add = out.append
        for line in lines:
            if not line:
                continue
            try:
                events = decoder.decode(line)
            except CodecError as exc:
                self.decode_errors += 1
                log.warning("speaker: %s", exc)
                continue
            for event in events:
                cls = event.__class__
                if cls is RouteUpdate:
                    add(event)
                    continue
                if cls is PeerState:
                    self.peer_states[event.peer] = event.state
                elif cls is Ack:
                    if out:
                        self.put_many(out)
                        out = []
                        add = out.append
                    self._ack(event.ok)
                    continue
                add(event)
        if out:
            self.put_many(out)

    def _ack(self, ok: bool) -> None:
        self.acks[ok] += 1
        if not self._in_flight:
            self.unmatched_acks += 1
            log.warning("speaker: an ack from ExaBGP with no command in flight")
            return
        command = self._in_flight.popleft()
        self._answer_waiters((command,), ok)
        self.put(CommandAck(command, ok))
        self._wake.set()  # room in the window, or the barrier lifted

    def peers_down(self, reason: str) -> None:
        """ExaBGP is gone: every peer whose session was connected or up is down (a dead ExaBGP says
        nothing itself). `SpeakerDown` comes first."""
        self.put(SpeakerDown(reason))
        self._answer_waiters([*self._in_flight, *(c for c, _ in self._queue)], False)
        for peer, state in list(self.peer_states.items()):
            if state is not PeerStatus.DOWN:
                self.peer_states[peer] = PeerStatus.DOWN
                self.put(PeerState(peer, PeerStatus.DOWN, f"speaker {reason}"))
