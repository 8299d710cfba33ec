"""The API helper that ExaBGP runs: joins ExaBGP's pipes to the agent's Unix socket.

DOC: ExaBGP starts ``PYTHON relay.py SOCKET TOKEN`` as its API process (``run`` in the generated
configuration). The relay connects to the agent's Unix socket, sends ``TOKEN`` and a newline (so
the agent knows which ExaBGP incarnation this is), then copies bytes both ways until either side
closes:

* ExaBGP -> agent: the relay's stdin (ExaBGP's JSON events and acks) to the socket;
* agent -> ExaBGP: the socket (commands) to the relay's stdout.

It never parses or buffers lines, and it does not import the agent (it runs with ``-S -E``, only
the standard library): it must start fast and can never stop reading ExaBGP for a reason of its
own. The agent reads the socket all the time, so ExaBGP never blocks on a full pipe because of the
agent. When ExaBGP dies the relay's stdin reaches end of file; when the agent goes away the socket
does; either way the relay exits at once (the supervisor restarts ExaBGP, which starts a new
relay).
"""

import os
import socket
import sys
import threading
import time

CHUNK = 1 << 16


def _pump(read, write) -> None:
    try:
        while True:
            data = read(CHUNK)
            if not data:
                return
            write(data)
    except OSError:
        return


def _write_all(fd: int):
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return write


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: relay.py SOCKET TOKEN\n")
        return 2
    path, token = argv[1], argv[2]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 10
    while True:
        try:
            sock.connect(path)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.stderr.write(f"relay: cannot connect to {path}\n")
                return 1
            time.sleep(0.05)
    sock.sendall(token.encode() + b"\n")
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    # ExaBGP -> agent in a thread, agent -> ExaBGP here; whichever ends first ends the process
    threading.Thread(target=lambda: (_pump(lambda n: os.read(stdin, n), sock.sendall), os._exit(0)),
                     daemon=True).start()
    _pump(sock.recv, _write_all(stdout))
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
