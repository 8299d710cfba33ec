"""Reading the small files the configuration names or consists of, safely.

DOC: `read_bounded(path, limit)` reads a whole file that must be a regular file of at most
`limit` bytes. It never blocks and never reads more than it may: the file is opened with
``O_NONBLOCK`` (a FIFO, a socket or a device would otherwise wait for a writer or never end),
checked with ``fstat`` on the open descriptor (no race between checking a path and opening it) and
read up to ``limit + 1`` bytes. Symbolic links are followed (Kubernetes mounts Secrets and
ConfigMaps through them). Every failure is a `FileProblem` whose message says what is wrong
with the file and never shows any of its content (the file may hold a secret).
"""

from __future__ import annotations

import os
import stat


class FileProblem(ValueError):
    """A file cannot be used; the message names the reason, never the content."""


class FileTooLarge(FileProblem):
    """The file holds more than the limit."""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file `path` (at most `limit` of them); `FileProblem` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise FileProblem(f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileProblem("is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise FileProblem("not a regular file (a FIFO, socket or device is never read)")
        if st.st_size > limit:
            raise FileTooLarge(f"larger than {limit} bytes ({st.st_size})")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooLarge(f"larger than {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise FileProblem(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
