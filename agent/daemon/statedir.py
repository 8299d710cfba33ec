"""The agent's state directory (--state-dir): private to the agent.

DOC: the state directory holds the generated ExaBGP configuration (it may carry MD5 secrets), its
environment and pid files and the API socket. `prepare_state_dir` creates it with mode 0700 (or
tightens an existing one to 0700), tightens what an older version left inside to 0700/0600, and
sets the process umask to 077, so every file the agent (and its ExaBGP child) creates there from
then on is 0600 and every directory 0700. Called first thing in `Agent.run()`.

`write_private(path, data)` replaces a file atomically (a temporary file in the same directory,
created 0600 whatever the umask, flushed and fsynced, then renamed over the old one and the
directory fsynced): a reader sees the old file or the new one, never a part. `read_private(path,
limit)` reads it back (None when absent), refusing anything but a regular file owned by us and
not readable by others, or larger than `limit` bytes. The cluster-mode snapshot
(`agent.k8s.snapshot`) is written and read with these.
"""

from __future__ import annotations

import os
import stat
import tempfile

UMASK = 0o077


def prepare_state_dir(path: str) -> None:
    os.umask(UMASK)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                continue
            private = stat.S_IMODE(st.st_mode) & 0o700
            if private != stat.S_IMODE(st.st_mode):
                os.chmod(full, private)


def write_private(path: str, data: bytes) -> None:
    """Replace `path` with `data` atomically, mode 0600 (module DOC)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)  # mkstemp: 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_private(path: str, limit: int) -> bytes | None:
    """The content of `path`, None if it does not exist; ValueError if it is not a private regular
    file of ours or is larger than `limit` bytes (module DOC)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot open: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
            raise ValueError(f"not private (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > limit:
            raise ValueError(f"larger than {limit} bytes")
        return f.read(limit + 1)
