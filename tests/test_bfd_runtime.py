"""Two BFD threads talk over loopback (two 127/8 addresses, real UDP sockets, TTL 255): the
sessions come up, one side stopping takes the other down by detection time, a wrong TTL is
dropped and counted; and the transmit deadlines hold while an asyncio loop is busy."""

import asyncio
import gc
import random
import socket
import struct
import threading
import time

import pytest

from agent.bfd.packet import ControlPacket, State, encode
from agent.bfd.runtime import BfdThread, SessionSpec
from agent.bfd.session import Timers


def _addrs():
    r = random.Random()
    base = f"127.{r.randint(1, 250)}.{r.randint(1, 250)}"
    return f"{base}.1", f"{base}.2"


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


class Recorder:
    def __init__(self):
        self.changes = []
        self.lock = threading.Lock()

    def __call__(self, change):
        with self.lock:
            self.changes.append(change)

    def states(self):
        with self.lock:
            return [c.new for c in self.changes]


@pytest.fixture
def pair():
    """Two BFD threads of this process in session (50 ms, x3). The heap is frozen meanwhile: the
    agent freezes what its start-up made (`agent.core.gctune`), and a full collection of a whole
    pytest session's heap (~300k objects: ~150 ms measured) holds the interpreter lock, so both
    threads, for the detection time."""
    gc.collect()
    gc.freeze()
    a_addr, b_addr = _addrs()
    ra, rb = Recorder(), Recorder()
    a, b = BfdThread(ra), BfdThread(rb)
    fast = Timers(min_rx=50, min_tx=50, multiplier=3)
    a.start()
    b.start()
    a.configure([SessionSpec(b_addr, a_addr, fast)])
    b.configure([SessionSpec(a_addr, b_addr, fast)])
    yield a, b, ra, rb, a_addr, b_addr
    a.stop()
    b.stop()
    gc.unfreeze()


def test_sessions_come_up_and_detect_a_silent_peer(pair):
    a, b, ra, rb, a_addr, b_addr = pair
    assert wait_for(lambda: a.views().get(b_addr) and a.views()[b_addr].state == "up"
                    and b.views()[a_addr].state == "up")
    assert State.UP in ra.states() and State.UP in rb.states()
    assert wait_for(lambda: a.views()[b_addr].tx_interval_ms == 50)  # the Poll sequence ended
    assert a.counts()[(b_addr, "rx")] > 0 and a.counts()[(b_addr, "tx")] > 0
    b.stop()  # silent: no AdminDown, the detection time must tell
    t0 = time.monotonic()
    assert wait_for(lambda: a.views()[b_addr].state == "down")
    assert time.monotonic() - t0 < 1.0  # 150 ms detection time, generous for a loaded machine
    assert a.views()[b_addr].diag == "detection_time_expired"


def test_removed_session_sends_admin_down(pair):
    a, b, ra, rb, a_addr, b_addr = pair
    assert wait_for(lambda: b.views().get(a_addr) and b.views()[a_addr].state == "up")
    a.configure([])
    assert wait_for(lambda: b.views()[a_addr].state == "down")
    assert b.views()[a_addr].diag == "neighbor_down"
    assert wait_for(lambda: b_addr not in a.views())


def test_wrong_ttl_and_garbage_are_dropped_and_counted(pair):
    a, b, ra, rb, a_addr, b_addr = pair
    assert wait_for(lambda: a.counts().get((b_addr, "tx"), 0) > 0)  # its sockets are open
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((b_addr, 0))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 254)
        s.sendto(encode(ControlPacket(State.DOWN, 5, 0, 1_000_000, 300_000, 3)), (a_addr, 3784))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
        s.sendto(b"\x20" + b"\0" * 10, (a_addr, 3784))
        s.sendto(struct.pack("!BBBBIIIII", 0x20, 0xC0, 3, 24, 5, 12345, 0, 0, 0), (a_addr, 3784))
    assert wait_for(lambda: a.counts().get((b_addr, "drop:ttl"), 0) == 1
                    and a.counts().get((b_addr, "drop:length"), 0) == 1
                    and a.counts().get((b_addr, "drop:unknown_session"), 0) == 1)


def test_transmit_deadlines_hold_while_the_loop_is_busy(pair):
    """The agent's loop spends 3 s in pure-Python work (the shape of an UPDATE burst: dicts of
    tuples), yielding only every 50 ms like the core task; the BFD thread must still send on
    time (late well under the 150 ms detection time: tens of ms measured in one process, which is
    why the agent runs the thread in a child process, `agent.bfd.child`) and the session must stay up."""
    a, b, ra, rb, a_addr, b_addr = pair
    assert wait_for(lambda: a.views().get(b_addr) and a.views()[b_addr].state == "up"
                    and a.views()[b_addr].tx_interval_ms == 50)
    a.late.clear()
    a.late_max = 0.0

    async def busy():
        end = time.monotonic() + 3.0
        table = {}
        i = 0
        while time.monotonic() < end:
            slice_end = time.monotonic() + 0.05
            while time.monotonic() < slice_end:
                table[i % 200_000] = (i, str(i), (i, i + 1))
                i += 1
            await asyncio.sleep(0)
            slices[0] += 1
        return i

    slices = [0]
    pauses = [0.0, 0.0]  # (start of the running collection, the longest one)

    def timed(phase, info):
        if phase == "start":
            pauses[0] = time.monotonic()
        else:
            pauses[1] = max(pauses[1], time.monotonic() - pauses[0])

    gc.callbacks.append(timed)
    try:
        asyncio.run(busy())
    finally:
        gc.callbacks.remove(timed)
    n_slices = slices[0]
    downs = [c for c in ra.changes if c.new is State.DOWN]
    seen = (f"worst transmit lateness {a.late_max * 1000:.1f} ms, p99 {a.late_quantile(0.99)} ms, "
            f"{len(a.late)} sends, >= 100 ms: {a.late_hist[100]}, loop slices: {n_slices}, "
            f"longest collection {pauses[1] * 1000:.1f} ms")
    assert not downs, (downs, seen)
    assert len(a.late) > 30, seen
    assert a.late_max < 0.15, seen
