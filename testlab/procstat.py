"""What benchmarks read about processes from /proc, and how they stop them.

DOC: `proc_cpu(pid)` (user + system seconds), `proc_cpu_split(pid, tid=None)` ((user, system) of
a process or one of its threads), `proc_rss_mib(pid)`, `self_rss()` (bytes, this
process, from statm: cheap enough to take around a measurement), `cpu_s`/`rss_mib` of a list of
pids (summed), `usage({name: pids})` (``NAME_cpu_s`` and ``NAME_rss_mib``, rounded as reported),
`children(pid)`, `read_pid(file)`, `stop(proc)` (SIGTERM, then SIGKILL), and `WriteWatch`: the
moment one thread's write counter first moves (e.g. a relay passing a command on). A pid that is
None or gone reads as 0. Stdlib only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time



def proc_cpu(pid: int | None) -> float:
    """utime + stime of `pid` in seconds (0 if gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


def proc_cpu_split(pid: int | None, tid: int | None = None) -> tuple[float, float]:
    """(user, system) seconds of `pid`, or of its thread `tid` ((0, 0) if gone)."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0, 0.0


def proc_rss_mib(pid: int | None) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        pass
    return 0.0


def self_rss() -> int:
    """This process's resident set size in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def proc_runq_wait(pid: int | None) -> float:
    """Seconds `pid` has waited on a run queue, runnable but not running (/proc/PID/schedstat;
    0 if gone): CPU time + this is the wall time of a busy process on a shared machine."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


def cpu_s(pids: list[int]) -> float:
    return sum(proc_cpu(p) for p in pids)


def rss_mib(pids: list[int]) -> float:
    return sum(proc_rss_mib(p) for p in pids)


def usage(groups: dict[str, list[int]]) -> dict:
    """`NAME_cpu_s` and `NAME_rss_mib` of each group of processes (summed)."""
    out = {}
    for name, pids in groups.items():
        out[f"{name}_cpu_s"] = round(cpu_s(pids), 2)
        out[f"{name}_rss_mib"] = round(rss_mib(pids), 1)
    return out


def children(pid: int | None) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (OSError, TypeError):
        pass
    return out


def read_pid(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def stop(proc: subprocess.Popen | None, sig=signal.SIGTERM, wait: float = 15) -> None:
    """`sig`, then SIGKILL after `wait` seconds (SIGTERM lets cProfile write its file)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class WriteWatch(threading.Thread):
    """Polls one thread's write counter (/proc/PID/task/TID/io, `wchar`) every `interval` seconds;
    `t_changed` is the wall-clock time it first differed from the value at start."""

    def __init__(self, pid: int, tid: int | None = None, interval: float = 0.001) -> None:
        super().__init__(daemon=True, name="write-watch")
        self.path = f"/proc/{pid}/task/{tid or pid}/io"
        self.interval = interval
        self.base = self._wchar()
        self.t_changed = 0.0
        self.stop = threading.Event()

    def _wchar(self) -> int:
        with open(self.path) as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
        return -1

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                if self._wchar() != self.base:
                    self.t_changed = time.time()
                    return
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.join(5)
