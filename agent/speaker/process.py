"""The supervised ExaBGP child: start, watch, restart with backoff, stop cleanly.

DOC: `Speaker` is the speaker adapter's public face and its supervisor. It owns one ExaBGP at a
time (started with `agent.speaker.child`: runtime directory, interpreter, spawn, log) and the API
connection to it (`agent.speaker.channel.ApiChannel`: command queue, reader, writer); the API
helper `agent.speaker.relay`, which ExaBGP starts, connects back to the Unix socket with a
per-incarnation token. Events go to an unbounded `asyncio.Queue` read through `events()`;
commands go in through `send()`, which never blocks.

ExaBGP dying (exit, signal, or its helper connection closing) is detected at once. For every peer
whose session was connected or up the speaker emits ``PeerState(peer, down, "speaker ...")`` (a
dead ExaBGP says nothing itself), then starts ExaBGP again after an exponential backoff (1 s, 2 s,
4 s ... 30 s; back to 1 s once an incarnation has run for `stable_after` seconds). When the new
ExaBGP's helper has connected, the speaker emits `SpeakerRestarted(restarts, reason)`: the routes
learned before are stale until their peers re-send them, and the agent must announce its routes
again (the new ExaBGP starts with an empty adj-RIB-out) and then send End-of-RIB (``manual-eor``).
Commands that were written to the old connection but not yet executed are lost with it, and those
still queued for it are dropped when the new one connects (old commands replayed into the new
process, before its re-announcement, could leave there what the agent no longer wants): the new
ExaBGP gets only what the agent sends after `SpeakerRestarted`, the re-announcement.

The command queue is bounded (`max_queued`, see `agent.speaker.channel`): when ExaBGP is dead or
cannot keep up, a full queue is dropped and reported as `CommandsDropped` for the agent to plan
again from its desired state.

`stop()` sends SIGTERM and waits (then SIGKILL): ExaBGP closes its sessions without a
NOTIFICATION, so graceful-restart peers keep our routes as stale until we come back.

ExaBGP runs through the launcher (`agent.speaker.launcher`: unpaced API, the per-message and
header-error fixes, ``notify``, a teardown that always sends its Cease; with BgpSpeaker ``updates:
raw`` also UPDATEs handed over undecoded). In raw mode `start()` first checks that the
interpreter's ExaBGP is the pinned version and refuses (ConfigError at ``spec.updates``) otherwise.

`set_peers()` rewrites the configuration and asks the running ExaBGP to reload it (SIGUSR1):
sessions of unchanged peers stay up. A text ExaBGP already runs (only an import policy or a
selector changed) is not reloaded. A peer that is no longer configured and whose session is up
first gets Cease 6/3 "Peer De-configured" (`agent.speaker.deconfig`). Calls are applied one at
a time, in order.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import logging
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path

from .batching import BATCH_EVENTS, BATCH_ROUTES, SpeakerQueue, batches
from .channel import MAX_QUEUED, READ_LIMIT, ApiChannel
from .child import (
    LogPump, RuntimeDir, check_exabgp, default_runtime_dir, exit_status, resolve_interpreter, spawn,
)
from ..core.bgp import Command, Event, PeerStatus, SpeakerRestarted
from .deconfig import cease, deconfigured
from .exabgp_conf import read_secrets, render
from ..config.bgp import BgpPeer, BgpSpeakerSpec, UpdatesMode
from ..config.loader import ConfigError, Problem

log = logging.getLogger("agent.speaker")

RELAY = str(Path(__file__).resolve().with_name("relay.py"))


class Speaker:
    """One supervised ExaBGP for `peers`. Use ``async with Speaker(...) as sp`` or
    ``await sp.start()`` / ``await sp.stop()``; read `events()`; write with `send()`."""

    def __init__(
        self,
        peers: Sequence[BgpPeer],
        settings: BgpSpeakerSpec | None = None,
        *,
        runtime_dir: str | os.PathLike | None = None,
        backoff_min: float = 1.0,
        backoff_max: float = 30.0,
        stable_after: float = 60.0,
        connect_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        wrapper: Sequence[str] = (),
        exabgp_log_level: str = "INFO",
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self.peers: tuple[BgpPeer, ...] = tuple(peers)
        self.held: frozenset[str] = frozenset()  # peer names held down (max-prefix)
        self._hold_key = base64.b64encode(secrets.token_bytes(48)).decode("ascii")  # nobody knows it
        self.settings = settings or BgpSpeakerSpec()
        self.dir = Path(runtime_dir) if runtime_dir is not None else default_runtime_dir()
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.stable_after = stable_after
        self.connect_timeout, self.stop_timeout = connect_timeout, stop_timeout
        self.wrapper = tuple(wrapper)  # e.g. ("ip", "netns", "exec", NS)
        self.exabgp_log_level = exabgp_log_level
        self.queue = SpeakerQueue()  # Event | None (the stop marker)
        self.restarts = 0
        self.channel = ApiChannel(self.queue.put_nowait, max_queued, put_many=self.queue.put_many)
        self.pid: int | None = None
        self.last_exit: str = ""
        self.interpreter: str | None = None
        self._stopping = asyncio.Event()
        self._expect: tuple[str, asyncio.Future] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._task: asyncio.Task | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._connected = asyncio.Event()
        self._log = LogPump()
        self._rundir = RuntimeDir(self.dir)
        self._token = ""
        self._reconfiguring = asyncio.Lock()

    # ---- public ---------------------------------------------------------------------------------

    @property
    def conf_path(self) -> Path:
        return self._rundir.conf

    @property
    def _sock(self) -> Path:
        return self._rundir.sock

    @property
    def running(self) -> bool:
        """ExaBGP runs and its API helper is connected."""
        return self._connected.is_set()

    def send(self, command: Command | str) -> None:
        """Queue a command for ExaBGP; never blocks. Raises ValueError for a malformed command."""
        self.channel.send(command)

    @property
    def pending_commands(self) -> int:
        return self.channel.pending

    async def drained(self) -> None:
        """Return once no command is queued (all written to ExaBGP, or dropped at a restart)."""
        await self.channel.drained()

    def release_memos(self) -> None:
        """A load is over: let the decoder's memos go (`ApiChannel.release_memos`)."""
        self.channel.release_memos()

    @property
    def dropped_commands(self) -> int:
        """Commands dropped at the queue bound or at a restart."""
        return self.channel.dropped

    @property
    def acks(self) -> collections.Counter[bool]:
        """Acks received: True (``done``) / False (``error``) -> count."""
        return self.channel.acks

    @property
    def decode_errors(self) -> int:
        return self.channel.decode_errors

    @property
    def peer_states(self) -> dict[str, PeerStatus]:
        """The last state ExaBGP reported per peer (down for all when it died)."""
        return self.channel.peer_states

    async def events(self) -> AsyncIterator[Event]:
        """Every event, in order, until the speaker is stopped."""
        while True:
            event = await self.queue.get()
            if event is None:
                return
            yield event

    def batches(self, max_events: int = BATCH_EVENTS, max_routes: int = BATCH_ROUTES
                ) -> AsyncIterator[tuple[Event, ...]]:
        """Every event, in order, in tuples of what is already waiting: see `batching.batches`."""
        return batches(self.queue, max_events, max_routes)

    async def wait_running(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._connected.wait(), timeout)

    @property
    def raw_updates(self) -> bool:
        return self.settings.updates is UpdatesMode.RAW

    async def start(self) -> None:
        """Start supervising ExaBGP. Raises ConfigError when ``updates: raw`` is set and the
        interpreter's ExaBGP is not the version the launcher's patches are written for."""
        if self._task is not None:
            raise RuntimeError("speaker already started")
        self.interpreter = resolve_interpreter(self.settings.interpreter)
        if self.raw_updates:
            problem = check_exabgp(self.interpreter, raw_updates=True)
            if problem is not None:
                raise ConfigError([Problem("", "BgpSpeaker", "spec.updates", problem.removeprefix(
                    "route-agent launcher: "))])
        sock = self._rundir.prepare()
        self._server = await asyncio.start_unix_server(self._accept, path=str(sock), limit=READ_LIMIT)
        os.chmod(sock, 0o600)
        self._task = asyncio.create_task(self._supervise(), name="speaker-supervisor")

    async def stop(self) -> None:
        """Stop ExaBGP (SIGTERM: no NOTIFICATION to the peers), end `events()`."""
        self._stopping.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:  # already logged by the supervisor
                pass
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._rundir.cleanup()
        self.queue.put_nowait(None)

    async def __aenter__(self) -> "Speaker":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def set_peers(self, peers: Sequence[BgpPeer], held: Collection[str] = ()) -> None:
        """Replace the peer list: rewrite the configuration and have ExaBGP reload it (SIGUSR1).
        `held`: names of peers held down after a max-prefix teardown (configured, never connected
        to, their connections left unanswered: `exabgp_conf._held`).
        Raises (ValueError, SecretError) before touching anything when the new set is invalid."""
        held = frozenset(held)
        self._render(tuple(peers), held)  # raises for an invalid set
        async with self._reconfiguring:
            removed = deconfigured(self.peers, peers, self.channel.peer_states)
            self.peers = tuple(peers)
            self.held = held
            if self._task is None:
                return  # not started: the first run uses the new peers
            if removed:
                await cease(self.channel, removed, lambda: self.running)
            text, _ = self._render(self.peers, self.held)  # (the API helper's token may be new)
            if text == self._rundir.written:
                return  # nothing ExaBGP would see changed (an import policy, a peer's selector)
            self._rundir.write_conf(text)
            self.kill(signal.SIGUSR1)  # (reload)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the running ExaBGP (SIGUSR1: reload; tests simulate a crash with SIGKILL)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(sig)

    # ---- supervision ------------------------------------------------------------------------------

    async def _supervise(self) -> None:
        failures = 0
        loop = asyncio.get_running_loop()
        reason = ""
        generation = 0
        while not self._stopping.is_set():
            generation += 1
            started = loop.time()
            try:
                reason = await self._run_once(generation, reason)
            except (ValueError, OSError) as exc:  # unusable configuration or secret, exec failure
                reason = f"could not be started ({type(exc).__name__}: {exc})"
            except Exception as exc:  # a bug: log it with its traceback, retry later
                log.exception("speaker: ExaBGP run failed")
                reason = f"failed ({type(exc).__name__}: {exc})"
            self._connected.clear()
            self._proc = None
            self.last_exit = reason
            self.channel.peers_down(reason)
            if self._stopping.is_set():
                break
            if loop.time() - started >= self.stable_after:
                failures = 0
            delay = min(self.backoff_max, self.backoff_min * (2 ** failures))
            failures += 1
            tail = self._log.text()
            log.warning("speaker: ExaBGP %s; restarting in %.1fs%s", reason, delay,
                        f"\nlast ExaBGP output:\n{tail}" if tail else "")
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except asyncio.TimeoutError:
                pass
            self.restarts += 1

    def _render(self, peers: tuple[BgpPeer, ...], held: frozenset[str]) -> tuple[str, dict[str, str]]:
        relay = [sys.executable, "-S", "-E", RELAY, *(["--decode"] if self.raw_updates else []),
                 str(self._sock), self._token or "unstarted"]
        conf = render(peers, self.settings, relay, read_secrets(peers), log_level=self.exabgp_log_level,
                      held={name: self._hold_key for name in held})
        return conf.text, conf.env

    async def _run_once(self, generation: int, previous_reason: str) -> str:
        self._token = secrets.token_hex(16)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._expect = (self._token, fut)
        text, env = self._render(self.peers, self.held)
        self._rundir.write_conf(text)
        proc = await spawn(self._rundir, self.interpreter, env, self.wrapper, raw_updates=self.raw_updates)
        self._proc, self.pid = proc, proc.pid
        log.info("speaker: started ExaBGP pid %d (%s)", proc.pid, self.interpreter)
        log_task = asyncio.create_task(self._log.run(proc.stdout), name="speaker-exabgp-log")
        exit_task = asyncio.create_task(proc.wait(), name="speaker-exabgp-wait")
        stop_task = asyncio.create_task(self._stopping.wait())
        tasks: set[asyncio.Task] = set()
        try:
            await asyncio.wait({fut, exit_task, stop_task}, timeout=self.connect_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
            if stop_task.done():
                await self._terminate(proc, exit_task)
                return "stopped"
            if not fut.done():
                if exit_task.done():
                    return f"exited with {exit_status(proc.returncode)} before its API helper connected"
                await self._kill(proc, exit_task)
                return f"API helper did not connect within {self.connect_timeout:.0f}s"
            reader, writer = fut.result()
            self.channel.connected(first=generation == 1)
            self._connected.set()
            if generation > 1:
                self.queue.put_nowait(SpeakerRestarted(self.restarts, previous_reason))
            read_task = asyncio.create_task(self.channel.read(reader), name="speaker-reader")
            write_task = asyncio.create_task(self.channel.write(writer), name="speaker-writer")
            tasks = {read_task, write_task}
            done, _ = await asyncio.wait({exit_task, stop_task, read_task, write_task},
                                         return_when=asyncio.FIRST_COMPLETED)
            if stop_task in done:
                await self._terminate(proc, exit_task)
                reason = "stopped"
            elif exit_task in done:
                reason = f"exited with {exit_status(proc.returncode)}"
            elif read_task in done:
                # usually ExaBGP died and its relay saw end of file first: wait for the status
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exit_task), 1.0)
                if exit_task.done():
                    reason = f"exited with {exit_status(proc.returncode)}"
                else:
                    reason = "closed its API connection"
                    await self._terminate(proc, exit_task, grace=2.0)
            else:
                exc = write_task.exception()
                reason = f"API connection failed ({exc!r})"
                await self._terminate(proc, exit_task, grace=2.0)
            # the relay forwards what ExaBGP wrote before exiting: read it to the end
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(read_task), 2.0)
            writer.close()
            return reason
        finally:
            self._expect = None
            for t in (*tasks, stop_task):
                t.cancel()
            if proc.returncode is None:
                await self._kill(proc, exit_task)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(log_task, 2.0)

    async def _terminate(self, proc, exit_task, grace: float | None = None) -> None:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        try:
            await asyncio.wait_for(asyncio.shield(exit_task), grace or self.stop_timeout)
        except asyncio.TimeoutError:
            await self._kill(proc, exit_task)

    async def _kill(self, proc, exit_task) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(exit_task), 10)

    # ---- I/O ------------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            token = (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
        except (asyncio.TimeoutError, OSError, UnicodeDecodeError):
            token = ""
        expect = self._expect
        if expect is not None and token == expect[0] and not expect[1].done():
            expect[1].set_result((reader, writer))
        else:
            log.warning("speaker: refused an API connection with an unexpected token")
            writer.close()
