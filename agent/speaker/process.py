"""The supervised ExaBGP child: start, talk, watch, restart with backoff, stop cleanly.

DOC: `Speaker` owns one ExaBGP process and everything around it:

* a private runtime directory (mode 0700) holding the generated configuration (0600, it may
  contain MD5 secrets), an empty ExaBGP environment file (so no host file changes our settings),
  the Unix socket the API helper connects to, and a pid file used to kill an ExaBGP orphaned by
  a previous agent that was SIGKILLed;
* the child: ``INTERPRETER -m exabgp server CONF`` (ExaBGP 5's module entry point; the interpreter
  is `resolve_interpreter`'s choice), in its own session, with the parent-death signal set to
  SIGKILL so it never outlives the agent, its output (ExaBGP's log) read line by line and logged
  at debug level (the last lines are kept for the error message when it dies);
* the API helper `agent.speaker.relay`, which ExaBGP starts and which connects back to the Unix
  socket with a per-incarnation token;
* one reader task that always drains the socket, decodes every line (`agent.speaker.codec`) and
  puts the events on an unbounded `asyncio.Queue` (ExaBGP's reactor freezes when its API pipe is
  not read: the reader never waits for the consumer);
* one writer task that sends queued commands. `send()` only appends to a deque and never blocks;
  commands queued while ExaBGP is down or slow wait for the next connection, in order.

ExaBGP dying (exit, signal, or its helper connection closing) is detected at once. For every peer
whose session was connected or up the speaker emits ``PeerState(peer, down, "speaker ...")`` (a
dead ExaBGP says nothing itself), then starts ExaBGP again after an exponential backoff (1 s, 2 s,
4 s ... 30 s; back to 1 s once an incarnation has run for `stable_after` seconds). When the new
ExaBGP's helper has connected, the speaker emits `SpeakerRestarted(restarts, reason)`: the routes
learned before are stale until their peers re-send them, and the agent must announce its routes
again (the new ExaBGP starts with an empty adj-RIB-out) and then send End-of-RIB (``manual-eor``).
Commands that were written to the old connection but not yet executed are lost with it; that is
what the re-announcement after `SpeakerRestarted` repairs.

`stop()` sends SIGTERM and waits (then SIGKILL): ExaBGP closes its sessions without a
NOTIFICATION, so graceful-restart peers keep our routes as stale until we come back.

`set_peers()` rewrites the configuration and asks the running ExaBGP to reload it (SIGUSR1):
sessions of unchanged peers stay up.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from .codec import CodecError, Decoder, encode
from ..core.bgp import Ack, Command, Event, PeerState, PeerStatus, SpeakerRestarted
from .exabgp_conf import read_secrets, render
from ..config.bgp import BgpPeer, BgpSpeakerSpec

log = logging.getLogger("agent.speaker")
exabgp_log = logging.getLogger("agent.speaker.exabgp")

RELAY = str(Path(__file__).resolve().with_name("relay.py"))
_READ_LIMIT = 64 * 1024 * 1024  # longest JSON line accepted (an UPDATE of 65535 bytes is ~2 MiB of JSON)
_PR_SET_PDEATHSIG = 1

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


def _child_setup() -> None:
    """In the forked child, before exec: die with the agent."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def resolve_interpreter(setting: str = "auto") -> str:
    """The interpreter that runs ExaBGP: `setting` when it is a path; for ``auto``, ``pypy3`` from
    PATH when it can import exabgp (it runs ExaBGP 1.7-2.4x faster, at ~3x the memory), else the
    agent's own Python."""
    if setting != "auto":
        return setting
    pypy = shutil.which("pypy3")
    if pypy:
        try:
            ok = subprocess.run([pypy, "-c", "import exabgp.application.main"], capture_output=True,
                                timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return pypy
    return sys.executable


def default_runtime_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/route-agent/speaker")
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"route-agent-{os.getuid()}" / "speaker"


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
    ) -> None:
        self.peers: tuple[BgpPeer, ...] = tuple(peers)
        self.settings = settings or BgpSpeakerSpec()
        self.dir = Path(runtime_dir) if runtime_dir is not None else default_runtime_dir()
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.stable_after = stable_after
        self.connect_timeout, self.stop_timeout = connect_timeout, stop_timeout
        self.wrapper = tuple(wrapper)  # e.g. ("ip", "netns", "exec", NS)
        self.exabgp_log_level = exabgp_log_level
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.restarts = 0
        self.decode_errors = 0
        self.acks = collections.Counter()  # True/False -> count
        self.peer_states: dict[str, PeerStatus] = {}
        self.pid: int | None = None
        self.last_exit: str = ""
        self.interpreter: str | None = None
        self._commands: collections.deque[str] = collections.deque()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._expect: tuple[str, asyncio.Future] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._task: asyncio.Task | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._connected = asyncio.Event()
        self._log_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._sock_dir: Path | None = None
        self._sock = self.dir / "api.sock"
        self._token = ""

    # ---- public ---------------------------------------------------------------------------------

    @property
    def conf_path(self) -> Path:
        return self.dir / "exabgp.conf"

    @property
    def running(self) -> bool:
        """ExaBGP runs and its API helper is connected."""
        return self._connected.is_set()

    def send(self, command: Command | str) -> None:
        """Queue a command for ExaBGP; never blocks. Raises ValueError for a malformed command."""
        self._commands.append(encode(command))
        self._wake.set()

    @property
    def pending_commands(self) -> int:
        return len(self._commands)

    async def events(self) -> AsyncIterator[Event]:
        """Every event, in order, until the speaker is stopped."""
        while True:
            event = await self.queue.get()
            if event is None:
                return
            yield event

    async def wait_running(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._connected.wait(), timeout)

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("speaker already started")
        self.interpreter = resolve_interpreter(self.settings.interpreter)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        self._kill_orphan()
        sock = self.dir / "api.sock"
        if len(os.fsencode(sock)) > 100:  # sun_path is 108 bytes
            self._sock_dir = Path(tempfile.mkdtemp(prefix="ra-speaker-"))
            sock = self._sock_dir / "api.sock"
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        self._sock = sock
        self._server = await asyncio.start_unix_server(self._accept, path=str(sock), limit=_READ_LIMIT)
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
        for path in (self._sock, self.dir / "exabgp.pid", self.conf_path):
            with contextlib.suppress(FileNotFoundError, AttributeError):
                path.unlink()
        if self._sock_dir is not None:
            shutil.rmtree(self._sock_dir, ignore_errors=True)
        self.queue.put_nowait(None)

    async def __aenter__(self) -> "Speaker":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def set_peers(self, peers: Sequence[BgpPeer]) -> None:
        """Replace the peer list: rewrite the configuration and have ExaBGP reload it (SIGUSR1).
        Raises (ValueError, SecretError) before touching anything when the new set is invalid."""
        text, env = self._render(tuple(peers))
        self.peers = tuple(peers)
        if self._task is None:
            return  # not started: the first run uses the new peers
        self._write_conf(text)
        proc = self._proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGUSR1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the running ExaBGP (tests use it to simulate a crash)."""
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
            self._peers_down(reason)
            if self._stopping.is_set():
                break
            if loop.time() - started >= self.stable_after:
                failures = 0
            delay = min(self.backoff_max, self.backoff_min * (2 ** failures))
            failures += 1
            tail = "\n".join(self._log_tail)
            log.warning("speaker: ExaBGP %s; restarting in %.1fs%s", reason, delay,
                        f"\nlast ExaBGP output:\n{tail}" if tail else "")
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except asyncio.TimeoutError:
                pass
            self.restarts += 1

    def _render(self, peers: tuple[BgpPeer, ...]) -> tuple[str, dict[str, str]]:
        relay = [sys.executable, "-S", "-E", RELAY, str(self._sock), self._token or "unstarted"]
        conf = render(peers, self.settings, relay, read_secrets(peers), log_level=self.exabgp_log_level)
        return conf.text, conf.env

    def _write_conf(self, text: str) -> None:
        tmp = self.conf_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, self.conf_path)

    async def _run_once(self, generation: int, previous_reason: str) -> str:
        self._token = secrets.token_hex(16)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._expect = (self._token, fut)
        text, env = self._render(self.peers)
        self._write_conf(text)
        envfile = self.dir / "exabgp.env"
        envfile.write_text("")
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
        child_env.update(env, EXABGP_ENVFILE=str(envfile), PYTHONUNBUFFERED="1")
        argv = [*self.wrapper, self.interpreter, "-m", "exabgp", "server", str(self.conf_path)]
        self._log_tail.clear()
        proc = await asyncio.create_subprocess_exec(
            *argv, env=child_env, cwd=str(self.dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_child_setup, limit=_READ_LIMIT)
        self._proc, self.pid = proc, proc.pid
        (self.dir / "exabgp.pid").write_text(f"{proc.pid}\n")
        log.info("speaker: started ExaBGP pid %d (%s)", proc.pid, self.interpreter)
        log_task = asyncio.create_task(self._pump_log(proc.stdout), name="speaker-exabgp-log")
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
                    return f"exited with {_status(proc.returncode)} before its API helper connected"
                await self._kill(proc, exit_task)
                return f"API helper did not connect within {self.connect_timeout:.0f}s"
            reader, writer = fut.result()
            self._connected.set()
            if generation > 1:
                self.queue.put_nowait(SpeakerRestarted(self.restarts, previous_reason))
            read_task = asyncio.create_task(self._read(reader), name="speaker-reader")
            write_task = asyncio.create_task(self._write(writer), name="speaker-writer")
            tasks = {read_task, write_task}
            done, _ = await asyncio.wait({exit_task, stop_task, read_task, write_task},
                                         return_when=asyncio.FIRST_COMPLETED)
            if stop_task in done:
                await self._terminate(proc, exit_task)
                reason = "stopped"
            elif exit_task in done:
                reason = f"exited with {_status(proc.returncode)}"
            elif read_task in done:
                # usually ExaBGP died and its relay saw end of file first: wait for the status
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exit_task), 1.0)
                if exit_task.done():
                    reason = f"exited with {_status(proc.returncode)}"
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

    def _peers_down(self, reason: str) -> None:
        for peer, state in list(self.peer_states.items()):
            if state is not PeerStatus.DOWN:
                self.peer_states[peer] = PeerStatus.DOWN
                self.queue.put_nowait(PeerState(peer, PeerStatus.DOWN, f"speaker {reason}"))

    def _kill_orphan(self) -> None:
        """Kill an ExaBGP left running by a previous agent (found by the pid file)."""
        try:
            pid = int((self.dir / "exabgp.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        if str(self.conf_path).encode() in cmdline and b"exabgp" in cmdline:
            log.warning("speaker: killing orphaned ExaBGP pid %d", pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

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

    async def _read(self, reader: asyncio.StreamReader) -> None:
        decoder = Decoder()
        put = self.queue.put_nowait
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than the limit: skip it, keep reading
                self.decode_errors += 1
                log.error("speaker: line from ExaBGP longer than %d bytes dropped", _READ_LIMIT)
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

    async def _write(self, writer: asyncio.StreamWriter) -> None:
        commands = self._commands
        while True:
            if not commands:
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = []
            while commands and len(batch) < 512:
                batch.append(commands.popleft())
            writer.write(("\n".join(batch) + "\n").encode())
            await writer.drain()

    async def _pump_log(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            self._log_tail.append(text)
            exabgp_log.debug("%s", text)


def _status(returncode: int | None) -> str:
    if returncode is None:
        return "unknown status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"
