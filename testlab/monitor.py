"""`ip monitor route` in a namespace, for counting route events (no flap on restart).

DOC: ``ip monitor`` writes to an unlinked temporary file, never to a pipe: a pipe fills as soon as
the test's own threads keep the reading thread from the interpreter for a moment, ``ip`` then
stops reading its netlink socket and the kernel drops events (ENOBUFS: counted in `Monitor.lost`,
and `mark` fails on them). A thread follows the file and collects the lines. The recorder starts
only once the namespace has settled (IPv6 link-local addresses and their `local` routes in place:
`netns.settle`), so the kernel's own late routes are not counted; `mark()` adds and deletes a
marker route and waits until both are seen, so every event before it has been read. Used by the
netns tests and the chaos benchmark.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

from .netns import ip, settle, wait_for


class Monitor:
    """`ip monitor route` in a namespace, collecting lines in a thread."""

    def __init__(self, ns: str, objects: tuple[str, ...] = ("route",), rcvbuf: int | None = None,
                 strict: bool = True, realtime: bool = False) -> None:
        """`rcvbuf`: the monitor socket's receive buffer (``ip -rcvbuf``, 1 MiB by default; the
        kernel caps it at net.core.rmem_max): a burst of events larger than it is lost (``ip``
        says "No buffer space available", counted in `lost`); `strict`: `mark` then fails, so a
        test that counts events never passes on a partial record; `realtime`: ``ip monitor`` runs at
        real-time priority 1 (``chrt -f 1``), so that a burst written while both cores are busy is
        read as it comes instead of piling up in a socket buffer the kernel caps at
        net.core.rmem_max (``ip -rcvbuf`` is SO_RCVBUF: a larger request is cut to it)."""
        self.ns = ns
        self.lines: list[str] = []
        self.lost = 0
        self.strict = strict
        self._round = 0
        settle(ns)  # the kernel's own link-local routes are in place before we start counting
        fd, path = tempfile.mkstemp(prefix="ip-monitor-")
        self._file = open(path, "rb")  # (its own offset: the child appends through its own)
        os.unlink(path)
        with os.fdopen(fd, "wb") as out:
            argv = ["ip", "-n", ns, *(["-rcvbuf", str(rcvbuf)] if rcvbuf else []), "monitor", *objects]
            self.proc = subprocess.Popen([*(["chrt", "-f", "1"] if realtime else []), *argv], stdout=out,
                                         stderr=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        threading.Thread(target=self._errors, daemon=True).start()
        self.mark()  # the monitor is listening once it reports our first marker

    def _read(self) -> None:
        rest = b""
        while True:
            exited = self.proc.poll() is not None  # (before the read: what it wrote last is read)
            data = self._file.read()
            if data:
                *full, rest = (rest + data).split(b"\n")
                self.lines.extend(line.decode(errors="replace") for line in full)
            elif exited:
                return
            else:
                time.sleep(0.002)  # (following a file: nothing to wait on)

    def _errors(self) -> None:
        for line in self.proc.stderr:
            if "No buffer space available" in line:
                self.lost += 1
            sys.stderr.write(line)

    def mark(self) -> None:
        """Add and delete a marker route and wait until the monitor shows both, so every event
        before this call has been read. The first markers may go out before `ip monitor` has
        subscribed: each round uses a new marker, until one is seen (deadline 15 s)."""
        deadline = time.monotonic() + 15
        while True:
            self._round += 1
            tag = f"198.51.100.{self._round % 250 + 1}"
            start = len(self.lines)
            ip(self.ns, "route", "add", f"{tag}/32", "dev", "lo", "proto", "250")
            ip(self.ns, "route", "del", f"{tag}/32", "dev", "lo", "proto", "250")
            try:
                wait_for(lambda: sum(tag + " " in l for l in self.lines[start:]) >= 2, 2.0,
                         what="monitor marker")
                if self.lost and self.strict:
                    raise AssertionError(f"ip monitor lost events {self.lost} time(s): its receive buffer "
                                         "overflowed (Monitor(rcvbuf=...), or smaller bursts)")
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise

    def events(self) -> list[str]:
        return [l for l in self.lines if "198.51.100." not in l]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
        self.thread.join(5)
        self._file.close()
