"""The BFD thread: owns the sockets, the sessions and their timers; reports state changes.

DOC: a Python event loop busy with a big UPDATE burst runs callbacks late by as long as one
handler runs (tens of ms by design, `agent.daemon.core.PASS_BUDGET`, more during a GC pass or a
big FIB plan), while BFD at 100 ms x 3 must transmit within a few ms of its deadline. So BFD runs
in its own thread with its own selector: it sleeps in ``select`` until the next deadline of any
session (which releases the GIL) and needs the GIL only for the few microseconds of building and
sending a packet, which CPython hands over within the switch interval (5 ms by default; see
docs/bfd.md for the measured figures). Everything mutable here (sessions, sockets, counters) is
touched by that thread only; the other threads talk to it through a command queue plus a wake-up
socket (`configure`, `stop`), and it talks back through `notify(change)`, which the caller makes
thread-safe (the agent passes ``loop.call_soon_threadsafe``), and through `views()` / `counts()`,
immutable snapshots it replaces as a whole after each round (a reader never sees a half update).

Sessions are keyed by the peer address. A session whose sockets cannot be opened (the local
address is not configured yet, another BFD daemon holds the port) is retried every second and
shows the error in its view. A packet is dropped and counted by reason (`packet.DROP_REASONS`)
when it fails the checks of RFC 5880 6.8.6 or arrives with a TTL other than 255 (RFC 5881), names
no session of ours, or comes from another address than the session's peer.

`late_max` (and the `late` samples) record how late each periodic transmission left compared
with its deadline: the figure the design is judged by.
"""

from __future__ import annotations

import ipaddress
import logging
import queue
import random
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from . import sockets as bsock
from .packet import Malformed, State, decode, encode
from .session import Change, Session, SessionView, Timers

log = logging.getLogger("route_agent.bfd")
RETRY_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class SessionSpec:
    peer: str  # canonical address; the session's key
    local: str | None  # None: the source address the kernel picks for the peer
    timers: Timers


def canonical(address: str) -> str:
    return ipaddress.ip_address(address.split("%")[0]).compressed


def raise_priority() -> str:
    """Ask the kernel to run this thread before ordinary ones when it wakes up: SCHED_RR 1 (it
    sleeps in select almost always; the kernel's RT throttling still leaves 5 % of each CPU to
    the rest), else nice -10, else nothing (no CAP_SYS_NICE). Returns what it got."""
    import os
    tid = threading.get_native_id()
    try:
        os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(1))
        return "SCHED_RR 1"
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, tid, -10)
        return "nice -10"
    except OSError:
        return "normal"


class _Slot:
    """One configured session and its sockets (owned by the BFD thread)."""

    def __init__(self, spec: SessionSpec, session: Session) -> None:
        self.spec = spec
        self.session = session
        self.tx: socket.socket | None = None
        self.local: str | None = None
        self.error = ""
        self.retry_at = 0.0


class BfdThread:
    def __init__(self, notify: Callable[[Change], None], clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.notify = notify
        self.clock = clock
        self.rng = rng or random.SystemRandom()
        self._cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._slots: dict[str, _Slot] = {}
        self._rx: dict[str, socket.socket] = {}  # local address -> receive socket
        self._by_discr: dict[int, _Slot] = {}
        self._counts: Counter = Counter()  # (peer or "", "rx"/"tx"/"tx_error"/"drop:REASON")
        self._views: dict[str, SessionView] = {}
        self._published: tuple[dict, dict] = ({}, {})
        self.late_max = 0.0
        self.late_hist = [0] * 101  # periodic sends by lateness in whole ms (the last: >= 100 ms)
        self.late: list[float] = []  # lateness samples of periodic sends (seconds), bounded
        self._thread: threading.Thread | None = None
        self.priority = ""
        self._running = False

    # ---- other threads ----
    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name="bfd", daemon=True)
        self._thread.start()

    def configure(self, specs: list[SessionSpec]) -> None:
        """The sessions wanted from now on (added, changed, removed: AdminDown is sent first)."""
        self._post(("configure", list(specs)))

    def stop(self, timeout: float = 2.0) -> None:
        if self._thread is None:
            return
        self._post(("stop", None))
        self._thread.join(timeout)
        self._thread = None

    def views(self) -> dict[str, SessionView]:
        return self._published[0]

    def counts(self) -> dict:
        return self._published[1]

    def _post(self, cmd) -> None:
        self._cmds.put(cmd)
        try:
            self._wake_w.send(b"x")
        except BlockingIOError:
            pass  # already awake

    # ---- the thread ----
    def _run(self) -> None:
        self.priority = raise_priority()
        log.info("BFD thread running (scheduling: %s)", self.priority)
        try:
            while self._running:
                now = self.clock()
                deadline = min((s.session.deadline() for s in self._slots.values() if s.tx is not None),
                               default=now + 1.0)
                retry = min((s.retry_at for s in self._slots.values() if s.tx is None), default=deadline)
                timeout = max(0.0, min(deadline, retry) - now)
                for key, _ in self._sel.select(timeout):
                    if key.data is None:
                        self._commands()
                    else:
                        self._receive(key.fileobj, key.data)
                self._round(self.clock())
        except Exception:
            log.exception("BFD thread failed; sessions stopped")
        finally:
            self._close_all()

    def _commands(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                cmd, arg = self._cmds.get_nowait()
            except queue.Empty:
                return
            if cmd == "stop":
                self._running = False
            else:
                self._configure(arg)

    def _configure(self, specs: list[SessionSpec]) -> None:
        now = self.clock()
        wanted = {s.peer: s for s in specs}
        for peer in [p for p in self._slots if p not in wanted]:
            slot = self._slots.pop(peer)
            if slot.tx is not None and slot.session.admin_down(now) is not None:
                self._transmit(slot, slot.session.tick(now)[0], now)  # the peer sees AdminDown
            self._drop(slot)
        for peer, spec in wanted.items():
            slot = self._slots.get(peer)
            if slot is not None and slot.spec.local != spec.local:
                self._slots.pop(peer)
                self._drop(slot)
                slot = None
            if slot is None:
                discr = self.rng.randint(1, 2**32 - 1)
                while discr in self._by_discr:
                    discr = self.rng.randint(1, 2**32 - 1)
                slot = self._slots[peer] = _Slot(spec, Session(peer, discr, spec.timers, now, self.rng))
                self._by_discr[discr] = slot
            elif slot.spec.timers != spec.timers:
                slot.session.set_timers(spec.timers, now)
            slot.spec = spec
        self._publish()

    def _open(self, slot: _Slot, now: float) -> None:
        try:
            local = slot.spec.local or bsock.source_address(slot.spec.peer)
            if local not in self._rx:
                rx = bsock.receive_socket(local)
                self._rx[local] = rx
                self._sel.register(rx, selectors.EVENT_READ, local)
            slot.tx = bsock.send_socket(local, slot.spec.peer, self.rng)
            slot.local, slot.error = local, ""
            log.info("BFD session with %s: sending from %s", slot.spec.peer, local)
        except OSError as exc:
            if slot.error != str(exc):
                log.warning("BFD session with %s: cannot open its sockets: %s (retrying)", slot.spec.peer, exc)
            slot.error, slot.retry_at = str(exc), now + RETRY_SECONDS

    def _drop(self, slot: _Slot) -> None:
        self._by_discr.pop(slot.session.local_discr, None)
        if slot.tx is not None:
            slot.tx.close()
            slot.tx = None
        used = {s.local for s in self._slots.values()}
        for local in [a for a in self._rx if a not in used]:
            rx = self._rx.pop(local)
            self._sel.unregister(rx)
            rx.close()

    def _close_all(self) -> None:
        for slot in list(self._slots.values()):
            if slot.tx is not None:
                slot.tx.close()
        for rx in self._rx.values():
            rx.close()
        self._sel.close()

    def _receive(self, rx: socket.socket, local: str) -> None:
        now = self.clock()
        for _ in range(64):  # bounded: timers must not starve behind a flood
            got = bsock.read(rx)
            if got is None:
                return
            data, source, ttl = got
            source = canonical(source)
            try:
                if ttl != bsock.TTL:
                    raise Malformed("ttl", f"TTL {ttl}")
                p = decode(data)
                slot = self._by_discr.get(p.your_discriminator) if p.your_discriminator else \
                    self._slots.get(source)
                if slot is None or slot.local != local:
                    raise Malformed("unknown_session", f"your discriminator {p.your_discriminator}")
                if slot.spec.peer != source:
                    raise Malformed("source", f"from {source}, the session's peer is {slot.spec.peer}")
            except Malformed as exc:
                peer = source if source in self._slots else ""
                self._counts[(peer, f"drop:{exc.reason}")] += 1
                continue
            self._counts[(slot.spec.peer, "rx")] += 1
            change = slot.session.receive(p, now)
            if change is not None:
                self._changed(change)

    def _round(self, now: float) -> None:
        """Send what is due, expire detection times, (re)open sockets; publish the views."""
        for slot in self._slots.values():
            if slot.tx is None:
                if now >= slot.retry_at:
                    self._open(slot, now)
                if slot.tx is None:
                    continue
            s = slot.session
            if s.deadline() > now:
                continue
            due = s.next_tx
            packets, change = s.tick(now)
            if packets and now >= due and s.next_tx != due and s.state is State.UP:  # a periodic send
                self._late(now - due)
            self._transmit(slot, packets, now)
            if change is not None:
                self._changed(change)
        self._publish()

    def _late(self, late: float) -> None:
        late = max(0.0, late)
        self.late_max = max(self.late_max, late)
        self.late_hist[min(int(late * 1000), 100)] += 1
        if len(self.late) < 100_000:
            self.late.append(late)

    def _transmit(self, slot: _Slot, packets, now: float) -> None:
        for p in packets:
            try:
                slot.tx.send(encode(p))
                self._counts[(slot.spec.peer, "tx")] += 1
            except OSError:  # unreachable, filtered: the detection time will tell
                self._counts[(slot.spec.peer, "tx_error")] += 1

    def _changed(self, change: Change) -> None:
        log.info("BFD session with %s: %s -> %s (%s)", change.key, change.old.label, change.new.label,
                 change.diag.name.lower())
        self._counts[(change.key, f"transition:{change.new.label}")] += 1
        self.notify(change)

    def late_quantile(self, q: float) -> float | None:
        """The lateness (ms, to the 1 ms bucket's upper bound) below which a fraction `q` of the
        periodic sends left; None before any."""
        total = sum(self.late_hist)
        if not total:
            return None
        seen = 0
        for ms, n in enumerate(self.late_hist):
            seen += n
            if seen >= q * total:
                return float(ms + 1)
        return 101.0

    def _publish(self) -> None:
        views = {p: s.session.view(s.error) for p, s in self._slots.items()}
        self._published = (views, dict(self._counts))
