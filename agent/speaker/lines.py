"""Lines of the relay's stream, whatever the read boundaries: text lines, and binary frames.

DOC: what the agent reads from ExaBGP's API helper (`agent.speaker.relay`) is lines: ExaBGP's
JSON and raw-update lines, acks, and the relay's ``wire-events PEER K DATA`` lines, whose DATA is
a binary record dump (`agent.speaker.wire_records`) sent as it is, newline octets included: K says
how many it holds, so the line ends at the (K+1)-th newline after its start. No escaping: the dump
is not copied on either side to hide its newlines (the agent's unescaping, two passes of a
two-octet search, took 3-4 % of its main thread at a full table).

`LineReader.feed` takes what one read gave and returns the lines it completed, in order: it
splits the chunk at its newlines once (in C), hands out the pieces that are whole lines as they
are, and joins the pieces of a frame with one ``b"\\n".join``, so a frame costs a few Python steps
rather than one per newline in its data. A line (or the piece of one) that has not ended yet
waits for the next chunk; one longer than `limit` octets is dropped up to its end and counted
(`dropped`), and the lines around it are kept. A frame can be over the limit before its first
newline: its first `HEAD` octets are kept until that newline, so its K still says where it
ends. `end` returns what is left when the stream ends (a last line without its newline counts).

A ``wire-events`` line whose K is not a number is an ordinary line (the codec says what is wrong
with it). The header always lies before the first newline of the line (PEER and K are text), so
K is known as soon as the line's first piece is.
"""

from __future__ import annotations

FRAME = b"wire-events "
MAX_NEWLINES = 1 << 24  # a K beyond this is not believed: the line is an ordinary one
HEAD = 128  # octets of a dropped line's start that hold its header (PEER: an address)


def newlines_of(piece: bytes) -> int:
    """K of a ``wire-events PEER K DATA`` line's first piece (0: an ordinary line)."""
    head = piece.split(b" ", 3)
    if len(head) < 4:
        return 0
    try:
        k = int(head[2])
    except ValueError:
        return 0
    return k if 0 < k <= MAX_NEWLINES else 0


class LineReader:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped = 0  # lines longer than `limit`, dropped
        self._partial: list[bytes] = []  # the piece not ended yet, in fragments
        self._frame: list[bytes] = []  # the ended pieces of a frame not ended yet
        self._owed = 0  # pieces the line being read still needs, each ending at a newline (0: none begun)
        self._size = 0  # octets of the line being read so far
        self._drop = False  # the line being read is longer than `limit`: dropped up to its end
        self._head: bytes | None = None  # the start of a dropped line whose first piece goes on

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by `chunk`, in order."""
        pieces = chunk.split(b"\n")
        tail = pieces.pop()  # (the start of a piece not ended yet, or b"")
        out: list[bytes] = []
        if pieces:
            if self._partial:
                self._size -= sum(map(len, self._partial))  # (counted again with the piece)
                self._partial.append(pieces[0])
                pieces[0] = b"".join(self._partial)
                self._partial = []
            i = self._go_on(pieces, out) if self._owed else 0
            n = len(pieces)
            while i < n:
                p = pieces[i]
                if p[:12] == FRAME:
                    k = newlines_of(p)
                    if k:
                        if i + k < n:
                            out.append(b"\n".join(pieces[i:i + k + 1]))
                            i += k + 1
                            continue
                        self._frame, self._owed = pieces[i:], k + 1 - (n - i)
                        self._size = sum(map(len, self._frame)) + len(self._frame)
                        break
                out.append(p)
                i += 1
        if tail:
            if not self._owed:  # a new line begins (a frame or not: known when its first piece ends)
                self._owed, self._size = 1, 0
            if not self._drop:
                self._partial.append(tail)
                self._size += len(tail)
        if self._owed and not self._drop and self._size > self.limit:
            self.dropped += 1
            self._drop = True
            if not self._frame:  # still in its first piece: K is not known yet
                self._head = b"".join(self._partial)[:HEAD]
            self._partial, self._frame = [], []
        return out

    def end(self) -> list[bytes]:
        """What is left when the stream ends: the last line, if its newline never came."""
        line = b"\n".join(self._frame + [b"".join(self._partial)]) if not self._drop else b""
        self._partial, self._frame, self._owed, self._size, self._drop, self._head = [], [], 0, 0, False, None
        return [line] if line else []

    def _go_on(self, pieces: list[bytes], out: list[bytes]) -> int:
        """Take the pieces that end the line begun in an earlier chunk (what a frame still needs,
        or one piece); returns the index of the first piece after them."""
        if len(self._frame) == 0 and not self._drop and self._owed == 1:
            self._owed = 0  # an ordinary line, or the first piece of a frame: read as a new line
            return 0
        if self._head is not None:  # a dropped line's first piece ends: a frame's K pieces follow
            self._owed += newlines_of(self._head) if self._head[:12] == FRAME else 0
            self._head = None
        take = min(self._owed, len(pieces))
        self._owed -= take
        if not self._drop:
            self._frame += pieces[:take]
            self._size += sum(map(len, pieces[:take])) + take
        if not self._owed:
            if not self._drop:
                out.append(b"\n".join(self._frame))
            self._frame, self._size, self._drop = [], 0, False
        return take
