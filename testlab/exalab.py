"""ExaBGP through the agent's launcher, with the agent's configuration and its real API relay, but
the API lines kept as text: for tests of the launcher itself (raw UPDATEs, notify, header errors).

DOC: `LauncherExabgp(ns, workdir, peers, speaker, raw=...)` renders the configuration and
environment the agent would (`agent.speaker.exabgp_conf.render`), starts ExaBGP inside namespace
`ns` as the agent does (`agent.speaker.child.exabgp_argv`: the launcher), and runs the Unix socket
the API relay (`agent/speaker/relay.py`) connects to. A reader thread keeps every line ExaBGP
writes (`lines`: raw-update lines, JSON objects, ``done``/``error`` acks); `send(command)` writes
a command; `wait(pred)` polls the lines with a deadline; `close()` stops it all. `output()` is
ExaBGP's own log (stdout and stderr).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


class LauncherExabgp:
    def __init__(self, ns: str, workdir: str | Path, peers, speaker, *, raw: bool = False,
                 options: tuple[str, ...] = ()) -> None:
        from agent.speaker.child import exabgp_argv
        from agent.speaker.exabgp_conf import read_secrets, render
        from agent.speaker.process import RELAY

        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._conn: socket.socket | None = None
        sock_path = str(self.dir / "api.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(sock_path)
        self._server.listen(1)
        token = secrets.token_hex(8)
        self._render = lambda peers: render(list(peers), speaker, [sys.executable, "-S", "-E", RELAY, sock_path, token],
                                            read_secrets(peers), log_level="INFO")
        conf = self._render(peers)
        conf_path = self.conf_path = self.dir / "exabgp.conf"
        conf_path.write_text(conf.text)
        envfile = self.dir / "exabgp.env"
        envfile.write_text("")
        env = {k: v for k, v in os.environ.items() if not k.startswith("exabgp")}
        env.update(conf.env, EXABGP_ENVFILE=str(envfile), PYTHONUNBUFFERED="1")
        self.log = self.dir / "exabgp.log"
        self._logf = open(self.log, "ab")  # noqa: SIM115
        argv = ["ip", "netns", "exec", ns, *exabgp_argv(sys.executable, conf_path, raw_updates=raw, options=options)]
        self.proc = subprocess.Popen(argv, env=env, cwd=str(self.dir), stdin=subprocess.DEVNULL,
                                     stdout=self._logf, stderr=subprocess.STDOUT, start_new_session=True)
        self._server.settimeout(30)
        conn, _ = self._server.accept()
        conn.settimeout(None)
        f = conn.makefile("rb")
        if f.readline().decode().strip() != token:
            raise RuntimeError("the API relay sent another token")
        self._conn = conn
        self._reader = threading.Thread(target=self._read, args=(f,), daemon=True)
        self._reader.start()

    def _read(self, f) -> None:
        for raw in f:
            with self._lock:
                self.lines.append(raw.decode("ascii", "replace").rstrip("\n"))

    def snapshot(self, start: int = 0) -> list[str]:
        with self._lock:
            return self.lines[start:]

    def send(self, command: str) -> None:
        self._conn.sendall(command.encode() + b"\n")

    def reload(self, peers) -> None:
        """Rewrite the configuration for `peers` and ask ExaBGP to reload it (the API's ``reload``,
        the path SIGUSR1 takes)."""
        self.conf_path.write_text(self._render(peers).text)
        self.send("reload")

    def wait(self, pred, timeout: float = 20.0, what: str = "", start: int = 0):
        """The first line (from `start`) for which `pred(line)` is true; polls until the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.snapshot(start):
                if pred(line):
                    return line
            if time.monotonic() > deadline:
                raise TimeoutError(f"no line {what or pred} within {timeout}s; last lines:\n"
                                   + "\n".join(l[:300] for l in self.snapshot()[-15:]) + "\nExaBGP:\n" + self.output())
            if self.proc.poll() is not None:
                raise RuntimeError(f"ExaBGP exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.02)

    def objects(self, start: int = 0) -> list[dict]:
        out = []
        for line in self.snapshot(start):
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for s in (self._conn, self._server):
            if s is not None:
                s.close()
        self._logf.close()


def is_state(peer: str, state: str):
    def pred(line: str) -> bool:
        if not line.startswith("{") or '"state"' not in line:
            return False
        msg = json.loads(line)
        return (msg.get("type") == "state" and msg["neighbor"]["address"]["peer"] == peer
                and msg["neighbor"].get("state") == state)
    return pred
