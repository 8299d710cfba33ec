"""One ExaBGP child process: its interpreter, its private files, how it is started, its output.

DOC: the pieces `agent.speaker.process.Speaker` uses for each ExaBGP it starts, with no
supervision policy of their own:

* `resolve_interpreter`: the Python that runs ExaBGP (PyPy when it can import exabgp);
* `RuntimeDir`: a private directory (mode 0700) holding the generated configuration (0600, it may
  contain MD5 secrets, written atomically), an empty ExaBGP environment file (so no host file
  changes our settings), the Unix socket path for the API helper (in a short temporary directory
  when the runtime path is too long for ``sun_path``), and a pid file used to kill an ExaBGP
  orphaned by a previous agent that was SIGKILLed;
* `spawn`: ExaBGP through the launcher (`exabgp_argv`: ``INTERPRETER launcher.py --unpaced
  [--raw-updates] -- exabgp server CONF``, see `agent.speaker.launcher`: ExaBGP 5.0.15's own
  entry point after the agent's patches) in a process group of its own (a terminal's Ctrl-C
  reaches the agent only, which stops ExaBGP in order) but in the agent's session: outside a cgroup
  the scheduler shares the CPU between sessions (autogroups) first, and a session of its own would
  give ExaBGP and its API helper as much as the agent with all its threads, as a pod's cgroup does
  not; the parent-death signal is set to SIGKILL so it never outlives the agent; output and errors
  on one pipe;
* `check_exabgp`: whether the interpreter's ExaBGP is the one the launcher's patches are written
  for (``launcher.py --check``), before a start in raw-UPDATE mode;
* `LogPump`: reads that pipe line by line, logs it at debug level and keeps the last lines for
  the message when ExaBGP dies;
* `exit_status`: a return code as text (``signal SIGKILL``, ``status 1``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .channel import READ_LIMIT

log = logging.getLogger("agent.speaker")
LAUNCHER = str(Path(__file__).resolve().with_name("launcher.py"))
exabgp_log = logging.getLogger("agent.speaker.exabgp")

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


class RuntimeDir:
    """The speaker's private files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = path / "api.sock"
        self._sock_dir: Path | None = None
        self.written = ""  # the configuration text last written

    @property
    def conf(self) -> Path:
        return self.path / "exabgp.conf"

    @property
    def pid_file(self) -> Path:
        return self.path / "exabgp.pid"

    def prepare(self) -> Path:
        """Create the directory (0700), kill an orphaned ExaBGP, choose the socket path; returns it."""
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.path, 0o700)
        self.kill_orphan()
        sock = self.path / "api.sock"
        if len(os.fsencode(sock)) > 100:  # sun_path is 108 bytes
            self._sock_dir = Path(tempfile.mkdtemp(prefix="ra-speaker-"))
            sock = self._sock_dir / "api.sock"
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()
        self.sock = sock
        return sock

    def write_conf(self, text: str) -> None:
        """Replace the configuration file at once; `written` keeps its text."""
        tmp = self.conf.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, self.conf)
        self.written = text

    def write_env(self) -> Path:
        """An empty ExaBGP environment file: only the settings passed in the environment count."""
        envfile = self.path / "exabgp.env"
        envfile.write_text("")
        return envfile

    def cleanup(self) -> None:
        for path in (self.sock, self.pid_file, self.conf):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if self._sock_dir is not None:
            shutil.rmtree(self._sock_dir, ignore_errors=True)

    def kill_orphan(self) -> None:
        """Kill an ExaBGP left running by a previous agent (found by the pid file)."""
        try:
            pid = int(self.pid_file.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        if str(self.conf).encode() in cmdline and b"exabgp" in cmdline:
            log.warning("speaker: killing orphaned ExaBGP pid %d", pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def exabgp_argv(interpreter: str, conf: str | os.PathLike, *, raw_updates: bool = False,
                options: Sequence[str] = ()) -> list[str]:
    """The argv that runs ExaBGP on `conf` through the launcher (unpaced API; raw UPDATEs if asked;
    `options`: more launcher options, for benchmarks)."""
    return [interpreter, LAUNCHER, "--unpaced", *(["--raw-updates"] if raw_updates else []), *options,
            "--", "exabgp", "server", str(conf)]


def check_exabgp(interpreter: str, raw_updates: bool) -> str | None:
    """None when `interpreter` can run ExaBGP through the launcher in the requested mode; else the
    launcher's one-line reason (a wrong ExaBGP version in raw mode, no ExaBGP at all, ...)."""
    argv = [interpreter, LAUNCHER, "--check", *(["--raw-updates"] if raw_updates else [])]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run {interpreter}: {exc}"
    if r.returncode == 0:
        return None
    lines = (r.stderr or r.stdout).strip().splitlines()
    return lines[-1] if lines else f"{interpreter} {LAUNCHER} --check: {exit_status(r.returncode)}"


async def spawn(rundir: RuntimeDir, interpreter: str, env: Mapping[str, str],
                wrapper: Sequence[str] = (), *, raw_updates: bool = False) -> asyncio.subprocess.Process:
    """Start ExaBGP on `rundir`'s configuration with ExaBGP settings `env` (and nothing from the
    agent's own ``exabgp*`` environment); records its pid."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
    child_env.update(env, EXABGP_ENVFILE=str(rundir.write_env()), PYTHONUNBUFFERED="1")
    argv = [*wrapper, *exabgp_argv(interpreter, rundir.conf, raw_updates=raw_updates)]
    proc = await asyncio.create_subprocess_exec(
        *argv, env=child_env, cwd=str(rundir.path), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=0,
        preexec_fn=_child_setup, limit=READ_LIMIT)
    rundir.pid_file.write_text(f"{proc.pid}\n")
    return proc


class LogPump:
    """ExaBGP's output: logged at debug level, the last `keep` lines kept for error messages."""

    def __init__(self, keep: int = 40) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=keep)

    async def run(self, stream: asyncio.StreamReader) -> None:
        self.tail.clear()
        while True:
            try:
                line = await stream.readline()
            except ValueError:
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            self.tail.append(text)
            exabgp_log.debug("%s", text)

    def text(self) -> str:
        return "\n".join(self.tail)


def exit_status(returncode: int | None) -> str:
    if returncode is None:
        return "unknown status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"
