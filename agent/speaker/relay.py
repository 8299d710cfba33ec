"""The API helper that ExaBGP runs: joins ExaBGP's pipes to the agent's Unix socket.

DOC: ExaBGP starts ``PYTHON relay.py SOCKET TOKEN`` as its API process (``run`` in the generated
configuration). The relay connects to the agent's Unix socket, sends ``TOKEN`` and a newline (so
the agent knows which ExaBGP incarnation this is), then copies bytes both ways until either side
closes:

* ExaBGP -> agent: the relay's stdin (ExaBGP's JSON events and acks) to the socket;
* agent -> ExaBGP: the socket (commands) to the relay's stdout.

It runs with ``-S -E`` (only the standard library and the agent's own pure modules): it must start
fast and can never stop reading ExaBGP for a reason of its own.

``--decode`` (raw-UPDATE mode): the relay also decodes UPDATEs, so the agent's busy core does not
have to (`agent.speaker.wire_records`): every ``raw-update PEER CAPS HEX`` line becomes
``wire-events PEER K DATA`` (the decoded events as a record dump, binary, holding K newline octets:
`agent.speaker.lines`); every other line passes unchanged, in order. Three threads: one reads ExaBGP, one converts, one writes to the agent, with two bounded
queues between them (`_decode_pump`: while a table comes faster than it is converted, ExaBGP's
write waits a few ms). The decoder is imported by the converting thread once it runs (~0.1 s,
while the reader already reads); a line it cannot turn into a record (it cannot happen with the
pinned ExaBGP, but the agent still understands the raw line) goes on raw. Should the conversion
itself fail, the relay exits (as when ExaBGP or the agent goes away) rather than stop reading.

The agent reads the socket all the time, so ExaBGP blocks on a full pipe only for as long as the
relay's queues and the socket buffer are full. When ExaBGP dies the relay's stdin reaches end of
file; when the agent goes away the socket does; either way the relay exits at once (the
supervisor restarts ExaBGP, which starts a new relay).
"""

import gc
import os
import queue
import socket
import sys
import threading
import time

CHUNK = 1 << 16
BATCH = 256  # UPDATEs per wire-events line at most
# The relay keeps nothing but bounded memos (decoded values, attribute sets by number): what it
# allocates dies by reference counting when a memo is cleared, and it makes no reference cycles
# per message. The cyclic collector would only walk those memos' entries again and again (8 % of
# the relay's time at a full table); it runs when the tracked objects grew by this many since the
# last collection, which the memos alone never reach.
RELAY_GC_THRESHOLD = 1_000_000
QUEUED_CHUNKS = 64  # chunks waiting for the conversion, and converted ones, at most (4 MiB each)


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


def _decoder():
    """Turns a list of lines into the lines for the agent (see the module DOC): the successive
    raw-update lines of one peer become one wire-events line (at most BATCH UPDATEs)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from binascii import unhexlify
    from marshal import dumps

    from agent.core.gctune import tune_gc
    from agent.speaker.wire_records import RecordDecoder, columns

    tune_gc()
    gc.set_threshold(RELAY_GC_THRESHOLD, 20, 20)  # (see RELAY_GC_THRESHOLD)
    decoder = RecordDecoder()
    records_of = decoder.records_of

    def flush(out: list, peer: bytes, recs: list, raw: list) -> None:
        if raw:
            try:
                data = dumps(columns(recs))  # (sent as it is: K says how many newlines it holds)
                out.append(b"wire-events %s %d %s" % (peer, data.count(b"\n"), data))
            except Exception:  # the agent decodes them (or says why it cannot)
                decoder.reset()
                out.extend(raw)

    def convert(lines: list) -> list:
        out: list[bytes] = []
        peer, recs, raw = b"", [], []
        for line in lines:
            if line[:11] == b"raw-update ":
                try:
                    _, who, caps, body = line.split(b" ")
                    found = records_of(int(caps), unhexlify(body))
                except Exception:
                    decoder.reset()
                    found = None
                if found is not None and (who == peer or not raw) and len(raw) < BATCH:
                    peer = who
                    recs += found
                    raw.append(line)
                    continue
                flush(out, peer, recs, raw)
                if found is not None:
                    peer, recs, raw = who, found, [line]
                    continue
                peer, recs, raw = b"", [], []
            else:
                flush(out, peer, recs, raw)
                peer, recs, raw = b"", [], []
            out.append(line)
        flush(out, peer, recs, raw)
        return out
    return convert


def _decode_pump(read, write, end=lambda: os._exit(0)) -> None:
    """ExaBGP -> agent with UPDATEs decoded: a reader thread queues what ExaBGP writes, this
    thread converts it, a sender thread writes to the agent (and calls `end` when all is written
    or the agent is gone). Both queues hold at most `QUEUED_CHUNKS` chunks (read, or converted
    from one read): beyond that the reader stops reading until the conversion takes the next
    chunk (a few ms; the conversion likewise waits for the sender), so ExaBGP's write waits that
    long and the backlog of a table load stays in BGP's own flow control instead of the relay's
    memory (145 MiB of queued hex at the 1.2M-route full table without the bound). ExaBGP waited
    for the agent before too, once a socket buffer (~200 KiB) was full; now that takes several MiB."""
    chunks: queue.Queue = queue.Queue(QUEUED_CHUNKS)
    converted: queue.Queue = queue.Queue(QUEUED_CHUNKS)

    def reader() -> None:
        _pump(read, chunks.put)
        chunks.put(b"")

    def sender() -> None:
        _pump(lambda _: converted.get(), write)
        end()

    threading.Thread(target=reader, daemon=True).start()
    threading.Thread(target=sender, daemon=True).start()
    try:
        convert = _decoder()
    except Exception as exc:  # (ImportError, ...): the agent decodes the raw lines itself
        sys.stderr.write(f"relay: cannot decode UPDATEs ({exc!r}): they go to the agent raw\n")
        convert = list
    try:
        _convert_lines(chunks, convert, converted.put)
    except BaseException as exc:  # a bug: end the relay (ExaBGP restarts), never leave ExaBGP blocked
        sys.stderr.write(f"relay: conversion failed ({exc!r})\n")
        end()
        return
    converted.put(b"")


def _convert_lines(chunks: queue.Queue, convert, write) -> None:
    """Lines from `chunks` (b"" at the end), converted, to `write`, a chunk at a time."""
    rest = b""
    while True:
        data = chunks.get()
        ended = not data
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        if lines:
            write(b"\n".join(convert(lines)) + b"\n")
        if ended:
            if rest:
                write(b"\n".join(convert([rest])))
            return


def main(argv: list[str]) -> int:
    decode = "--decode" in argv
    argv = [a for a in argv if a != "--decode"]
    if len(argv) != 3:
        sys.stderr.write("usage: relay.py [--decode] SOCKET TOKEN\n")
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
    def read(n: int) -> bytes:
        return os.read(stdin, n)
    if decode:  # (its sender thread ends the process once everything is written)
        sys.setswitchinterval(0.0005)  # the reader gets the interpreter back soon after each read
        threading.Thread(target=_decode_pump, args=(read, sock.sendall), daemon=True).start()
    else:
        threading.Thread(target=lambda: (_pump(read, sock.sendall), os._exit(0)), daemon=True).start()
    _pump(sock.recv, _write_all(stdout))
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
