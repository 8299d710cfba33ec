"""Kernel-event handlers and the full scan: a mixin of `agent.daemon.routing.Routing`.

DOC: kept apart from `Routing` only for size, like `agent.daemon.bfd_events`; they run on the
core task and use Routing's state (`rib`, `fib`, `nhg`, `kernel`, `connected`, `bfd`, the queue).
The monitor socket's reader (`on_monitor`, called by the loop) only queues what it read. A link
down or gone, or a connected route deleted, can make the kernel drop routes silently: a full scan
follows unless nothing of ours can go through what changed (`_unused`). A route of ours changed
by someone else is repaired by the FIB reconciler; a nexthop object of ours changed queues a scan.
A full scan waits for a BFD failure's clean-up, and gives way to a BFD state change.
"""

from __future__ import annotations

import logging
import time

from ..fib.netlink import RouteMonitor, ScanInterrupted
from ..fib.types import LinkEvent, NhEvent, Overrun, RouteEvent
from .events import Event

log = logging.getLogger("route_agent")


class KernelEvents:
    def on_monitor(self, monitor: RouteMonitor, kind: str = "kernel") -> None:
        """The monitor socket is readable (called by the loop, outside the core task)."""
        try:
            events = monitor.read()
        except OSError as exc:  # never let the reader die: resync instead
            log.warning("route monitor read failed: %s; full resync", exc)
            events = [Overrun()]
        if events:
            self.queue.put(Event(kind, events))

    def handle_main_table(self, events) -> None:
        changes = []
        for ev in events:
            if isinstance(ev, Overrun):
                self.queue.put(Event("scan", "overrun"))
            elif isinstance(ev, RouteEvent) and ev.foreign is not None:
                changes += self.connected.seen(ev.foreign, ev.deleted)
        self._apply_rib(self.rib.set_connected(changes))

    def handle_kernel(self, events) -> None:
        """Kernel monitor events. A link down or gone and a connected route deleted make the
        kernel drop IPv4 routes through them silently: a full scan follows, unless nothing of ours
        can go through them (`_unused`: no decided route's next hop names the link or has its
        gateway in the subnet, no adopted route waits). A pod's veth costs no scan then."""
        updates = []
        resolver = self.rib.resolver
        generation, connected_gone = resolver.generation, False
        for ev in events:
            if isinstance(ev, Overrun):
                self.queue.put(Event("scan", "overrun"))
            elif isinstance(ev, LinkEvent):
                before = resolver.generation
                self._apply_rib(self.rib.set_link(ev.link.name, None if ev.deleted else ev.link.up))
                if (ev.deleted or not ev.link.up) and not self._unused(before):
                    # IPv4 routes through a downed link vanish without notification
                    self.queue.put(Event("scan", "link-down"))
            elif isinstance(ev, NhEvent):  # ours, changed by someone else: routes may be gone too
                self.metrics.repairs.inc()
                log.warning("nexthop object %d of ours %s outside route-agent: resync", ev.id,
                            "deleted" if ev.deleted else "changed")
                self.queue.put(Event("scan", "nexthop-changed"))
            elif isinstance(ev, RouteEvent):
                if ev.foreign is not None:
                    updates += self.kernel.seen(ev.foreign, ev.deleted)
                    connected_gone = connected_gone or (ev.deleted and ev.foreign.connected)
                else:
                    self._our_route_event(ev)
        if updates:
            self._apply_rib(self.rib.apply(updates))
        if connected_gone and not self._unused(generation):
            # an address went away: the kernel drops routes through it silently
            self.queue.put(Event("scan", "connected-route-deleted"))

    def _unused(self, generation: int) -> bool:
        """Nothing of ours can go through what changed since the resolver's `generation` (see
        `handle_kernel`)."""
        return self.rib.resolver.generation == generation and self.rib.resolver.complete and not self.fib.stale

    def _our_route_event(self, ev: RouteEvent) -> None:
        cur = self.fib.actual.get(ev.prefix)
        if ev.deleted:
            if cur != ev.route:
                return  # an older route of ours (e.g. the previous metric) went away
            self.fib.kernel_changed(ev.prefix, None)
        else:
            if cur == ev.route:
                return  # the echo of our own write
            self.fib.kernel_changed(ev.prefix, ev.route)
        if self.nhg is not None:
            self.nhg.kernel_moved(ev.prefix, cur)
        if ev.prefix in self.fib.pending:
            self.metrics.repairs.inc()
            log.warning("route %s of ours changed outside route-agent: repairing", ev.prefix)

    def full_scan(self, reason: str) -> None:
        if self.bfd is not None and self.bfd.cleanup:  # after a BFD failure's clean-up (bfd_events)
            if self.bfd.scan_waiting is None:
                log.info("full kernel scan (%s) waits for the clean-up after a BFD failure", reason)
            self.bfd.scan_waiting = self.bfd.scan_waiting or reason
            return
        self.metrics.resyncs.labels(reason).inc()
        if reason != "periodic":
            log.info("full kernel scan: %s", reason)
        if self.bgp is not None:
            self.bgp.set_node_addresses(self.node_addresses())
        t0 = time.monotonic()
        self._sync_links()
        try:
            dump = self._dump(self.urgent_waiting)
        except ScanInterrupted:
            log.info("full kernel scan (%s) gave way to a BFD state change after %.3f s; it runs again "
                     "after it", reason, time.monotonic() - t0)
            self.queue.put(Event("scan", reason))
            return
        t1 = time.monotonic()
        self.fib.resync(dump.ours, dump.extra)  # extra: more of ours on a prefix (other metrics)
        if self.nhg is not None:  # (after the routes: it stamps them)
            self.nhg.resync(dump.nexthops or {}, dump.nhid, dump.ours, dump.extra)
        t2 = time.monotonic()
        self._apply_rib(self.rib.apply(self.kernel.resync(dump.foreign)))
        took = time.monotonic() - t0
        if took > 0.25:
            log.info("full kernel scan (%s): %d routes of ours, %d foreign; dump %.3f s, our state %.3f s, "
                     "foreign routes %.3f s", reason, len(dump.ours), len(dump.foreign), t1 - t0, t2 - t1,
                     took - (t2 - t0))
