"""A watcher process that tells when N routes of one protocol are in a namespace's kernel FIB.

DOC: `Watcher(ns, n, proto, timeout)` starts ``python -S fibwatch.py N PROTO TIMEOUT`` inside `ns`
(stdlib only, so it starts fast and imports nothing the measured process needs); it prints "ready"
once its baseline is taken, then one JSON line at the end point: `t_end` (wall clock), `count`,
`dump_count` (a final netlink dump), `method` and the watcher's own `cpu` seconds.

The end point is polled on /proc/net/fib_triestat's prefix count of the main trie (a walk in C, ~2
ms at 100k routes, under RCU only, so it never holds up route writes; nothing but the receiver adds
routes in a fresh namespace), every 20 ms and every 2 ms for the last 5%, then confirmed by a
netlink dump counting only `proto` routes in table main. (Reading the route multicast group instead
costs a recv per route in Python, ~0.3 s of CPU per 100k routes on the cores the receiver needs.)
The watcher runs at nice 19: on a small machine the receiver saturates the CPUs and must not lose
them to the measurement; when it goes idle at the end, the watcher gets a CPU at once.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time

RT_TABLE_MAIN = 254
THIS = os.path.abspath(__file__)


def iter_messages(buf):
    """(type, flags, offset, length) of each netlink message in `buf`."""
    off, size = 0, len(buf)
    while off + 16 <= size:
        mlen, mtype, mflags = struct.unpack_from("=IHH", buf, off)
        if mlen < 16:
            return
        yield mtype, mflags, off, mlen
        off += (mlen + 3) & ~3


def route_dst(buf, off: int, mlen: int, default: bytes = b"") -> bytes:
    """The RTA_DST bytes of the route message at `off` (`default` when it has none: 0/0)."""
    a, end = off + 28, off + mlen
    while a + 4 <= end:
        alen, atype = struct.unpack_from("=HH", buf, a)
        if alen < 4:
            break
        if atype == 1:  # RTA_DST
            return bytes(buf[a + 4:a + alen])
        a += (alen + 3) & ~3
    return default


def _nl_parse(buf, proto: int, present: set, stop_on_done: bool = False) -> bool:
    """Add the RTM_NEWROUTE messages in `buf` for `proto` in table main to `present` (remove for
    RTM_DELROUTE). Returns True at NLMSG_DONE (end of a dump)."""
    for mtype, _flags, off, mlen in iter_messages(buf):
        if mtype == 24 or mtype == 25:  # RTM_NEWROUTE / RTM_DELROUTE
            dst_len, table, prot = buf[off + 17], buf[off + 20], buf[off + 21]
            if prot == proto and table == RT_TABLE_MAIN:
                key = (dst_len, route_dst(buf, off, mlen))
                if mtype == 24:
                    present.add(key)
                else:
                    present.discard(key)
        elif mtype == 3:  # NLMSG_DONE
            return True
        elif mtype == 2 and stop_on_done:  # NLMSG_ERROR on a dump
            raise OSError("netlink dump failed")
    return False


def _nl_dump(proto: int) -> set:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 1 << 26)  # SO_RCVBUFFORCE
        s.bind((0, 0))
        req = struct.pack("=IHHII", 28, 26, 0x301, 1, 0) + struct.pack("=BBBBBBBBI", socket.AF_INET, *[0] * 8)
        s.send(req)  # RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP
        present: set = set()
        while not _nl_parse(s.recv(1 << 20), proto, present, stop_on_done=True):
            pass
        return present
    finally:
        s.close()


def _trie_prefixes() -> int:
    """Prefixes in the main FIB trie of this namespace (local routes included)."""
    with open("/proc/net/fib_triestat") as f:
        main = f.read().split("Main:", 1)[1]
    return int(main.split("Prefixes:", 1)[1].split(None, 1)[0])


def watch_routes(n: int, proto: int, timeout: float) -> int:
    """Runs inside the receiving namespace: print "ready" once the baseline is taken, then one
    JSON line when `n` routes of `proto` are in table main (or the deadline passed)."""
    os.nice(19)  # on a saturated machine the watcher must not take CPU from the receiver
    base = _trie_prefixes() - len(_nl_dump(proto))
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    close = max(50, n // 20)
    method, count, t_end = "fib_triestat", 0, 0.0
    while time.monotonic() < deadline:
        if method == "fib_triestat":
            count = _trie_prefixes() - base
            if count >= n:
                t_end, usage = time.time(), os.times()
                count = len(_nl_dump(proto))  # confirm: only `proto` routes count
                if count >= n:
                    break
                method, t_end = "netlink dump", 0.0  # something else added routes: count ours
        else:
            count = len(_nl_dump(proto))
            if count >= n:
                t_end, usage = time.time(), os.times()
                break
        time.sleep(0.002 if n - count <= close else 0.02)  # poll interval, under a deadline
    if not t_end:
        t_end, usage = time.time(), os.times()
    final = len(_nl_dump(proto))
    print(json.dumps({"t_end": t_end, "count": count, "dump_count": final, "method": method,
                      "cpu": usage.user + usage.system}), flush=True)  # CPU up to the end point
    return 0


class Watcher:
    """The watcher process inside `ns` (started and baselined when the constructor returns)."""

    def __init__(self, ns: str, n: int, proto: int, timeout: float) -> None:
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-S", THIS, str(n), str(proto),
                                      str(timeout)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"route watcher did not start: {line!r}")

    def result(self) -> dict:
        line = self.proc.stdout.readline()
        self.proc.wait(30)
        if not line:
            raise RuntimeError(f"route watcher exited with {self.proc.returncode} without a result")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


if __name__ == "__main__":
    sys.exit(watch_routes(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
