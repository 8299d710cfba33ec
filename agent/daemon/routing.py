"""The routing state and the handlers that change it: sources, RIB, FIB state, sync gate, BGP.

DOC: `Routing` owns every piece of mutable routing state (the RIB, the FIB reconciler's state, the
kernel/connected/static sources, the restart sync gate, the BGP runtime) and is only ever called
from the core task (`core.Core` dispatches events to its handlers), so it needs no locks. What a
handler cannot do at once it puts back on the queue as an event (a full scan, a timer). Its
handlers of kernel events and of BFD events are mixins, kept apart for size
(`agent.daemon.kernel_events`, `agent.daemon.bfd_events`).

Start-up order matters for a hitless restart (`start_kernel`): open the monitor socket first (so
nothing is missed), dump the links and the table, adopt our routes as stale without touching
them, feed the foreign routes to the RIB; the gate opens when every source is in sync (or the
stale timer fires) and only then may adopted routes be replaced or deleted.

Nexthop objects (`spec.fib.nexthopObjects`, `agent.fib.nhg`): "auto" is decided once at start
(`nexthops_supported`), and `settings.nexthop_objects` is then "on" or "off" for the run. With
them on, `nhg` (the `NhLayer`) adopts the objects of the start-up dump together with the routes,
is resynced by every full scan, and a nexthop event of ours from someone else queues a scan.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable

from ..config import resolve as cfgmod
from ..core.bgp import PeerState, PeerStatus, RouteUpdate
from ..core.gate import SyncGate
from ..core.rib import Rib
from ..fib.netlink import LinkIndex, NetlinkFib, RouteMonitor
from ..fib.nhg import NhLayer
from ..fib.reconciler import FibState
from ..fib.scanner import nexthops_supported
from ..fib.types import RT_TABLE_MAIN, FibSettings
from ..k8s.cluster import ClusterState
from ..sources.addresses import node_addresses
from ..sources.kernel import ConnectedTable, KernelSource
from ..sources.static import StaticSource
from .bfd import BfdLink
from .bfd_events import BfdEvents
from .bgp import BgpRuntime
from .bgp_config import peer_key
from .events import Event, EventQueue
from .kernel_events import KernelEvents

log = logging.getLogger("route_agent")


def _never(_peer: str) -> bool:
    return False


def _no_notice(reason: str, message: str, warning: bool = False) -> None:
    pass


class Routing(BfdEvents, KernelEvents):
    """The routing state of one agent; `imp` is the keyword-named import package."""

    def __init__(self, config, *, imp, queue: EventQueue, metrics, state_dir: str,
                 cluster: ClusterState | None = None,
                 spawn: Callable[[object, str], None] | None = None) -> None:
        self.imp = imp
        self.queue = queue
        self.metrics = metrics
        self.state_dir = state_dir
        self.cluster = cluster
        self.spawn = spawn or (lambda coro, name: asyncio.get_running_loop().create_task(coro, name=name))
        self.notice: Callable[..., None] = _no_notice  # Kubernetes Events, in cluster mode
        self.flush_now: Callable[[], None] = lambda: None  # the FIB writer's flush (set by the agent)
        self.reset(config)

    def reset(self, config) -> None:
        """The routing state for `config` (again in cluster mode, once the CRDs are listed:
        the FIB table and protocol must be right before the kernel is read)."""
        self.config = self._bgp_config = config
        self.settings: FibSettings = cfgmod.fib_settings(config)
        self.rib = Rib(max_paths=config.agent.max_paths, default_metric=self.settings.metric)
        self.fib = FibState(self.settings)
        self.nhg: NhLayer | None = None  # decided in start_kernel
        self.kernel = KernelSource(cfgmod.distances(config))
        self.connected = ConnectedTable()
        self.static = StaticSource()
        self.gate = SyncGate({"kernel", "config"} | ({"kubernetes"} if self.cluster is not None else set()))
        self.bgp: BgpRuntime | None = None
        self.bfd: BfdLink | None = None
        self.bgp_started = False
        self._guard_inputs = self._guard_addrs = None
        if config.peers:
            self._make_bgp(config)

    # ---------------------------------------------------------------- start-up
    def _decide_nexthops(self) -> None:
        """Resolve "auto" once: nexthop objects where the kernel has them, plain routes otherwise."""
        mode = self.settings.nexthop_objects
        use = mode != "off" and nexthops_supported()
        if mode == "on" and not use:
            log.error("spec.fib.nexthopObjects is on but this kernel has no nexthop objects: plain routes")
        self.settings = self.fib.settings = dataclasses.replace(
            self.settings, nexthop_objects="on" if use else "off")
        self.nhg = NhLayer(self.settings.protocol, self.fib) if use else None
        log.info("kernel nexthop objects: %s (setting %s)", "on" if use else "off", mode)

    def start_kernel(self) -> None:
        self._decide_nexthops()
        self.links = LinkIndex()
        self.netlink = NetlinkFib(self.settings, self.links)
        # before the dump: miss nothing
        self.monitor = RouteMonitor(self.settings, self.links, nexthops=self.nhg)
        self.main_netlink = self.main_monitor = None
        if self.settings.table != RT_TABLE_MAIN:  # interface subnets live in main: resolve there
            main = FibSettings(RT_TABLE_MAIN, self.settings.protocol, self.settings.metric)
            self.main_netlink = NetlinkFib(main, self.links)
            self.main_monitor = RouteMonitor(main, self.links)
        self._sync_links()
        dump = self._dump()
        self.fib.adopt(dump.ours, dump.extra)  # extra: more of ours on a prefix (other metrics)
        if self.nhg is not None:  # our nexthop objects, as they are; the routes stamped with theirs
            self.nhg.resync(dump.nexthops or {}, dump.nhid, dump.ours, dump.extra)
        log.info("adopted %d routes of protocol %d from table %d as stale", len(dump.ours),
                 self.settings.protocol, self.settings.table)
        self._apply_rib(self.rib.apply(self.kernel.resync(dump.foreign)))
        self.source_synced("kernel")

    def _dump(self, interrupt=None):
        """Dump our table; with a table other than main, refresh main's connected routes too."""
        if self.main_netlink is not None:
            self._apply_rib(self.rib.set_connected(self.connected.resync(self.main_netlink.dump(interrupt).foreign)))
        return self.netlink.dump(interrupt)

    def urgent_waiting(self) -> bool:
        """Something must not wait for a full scan: a BFD state change (read by its thread, on
        its way to the loop). The dump gives way and the scan runs again after it."""
        return self.bfd is not None and self.bfd.client.change_waiting()

    def _make_bgp(self, config) -> None:
        self.bgp = BgpRuntime(self.imp, config, cfgmod.distances(config), self.node_addresses(),
                              runtime_dir=os.path.join(self.state_dir, "speaker"),
                              device_of=self.rib.resolver.connected_device)
        self._connected_seen = self.rib.resolver.connected_version
        self.bfd = BfdLink(lambda change: self.queue.put_urgent(Event("bfd", change)))
        self._bfd_configure(config)
        for name in self.bgp.gate_names():
            self.gate.add(name)
        if self.cluster is not None:
            self._guard_inputs = self.cluster.guard_inputs(config)
            self.rib.apply(self.bgp.set_cluster_guard(config, *self._guard_inputs))  # nothing learned yet

    async def start_bgp(self) -> None:
        await self.bgp.start(lambda ev: self.queue.put(Event("bgp", ev)))
        self.bgp_started = True
        if self.bfd.specs and not self.bfd.started:
            self.bfd.started = True
            await self.bfd.client.start()

    def _bfd_configure(self, config) -> None:
        released = self.bfd.configure(config.peers, config.bfd_profiles, self.bgp.stage.origin, peer_key,
                                      self.bgp.stage.has_accepted)
        if released:
            self.apply_released(released)
        if self.bfd.specs and not self.bfd.started and self.bgp_started:
            self.bfd.started = True
            self.spawn(self.bfd.client.start(), "bfd-start")

    def _sync_links(self) -> None:
        """Dump the links: the netlink codec needs their indexes, the resolver their state."""
        links = self.netlink.links_dump()
        gone = {l.name for l in self.links.links()} - {l.name for l in links}
        self.links.load(links)
        for name in gone:
            self._apply_rib(self.rib.set_link(name, None))
        for link in links:
            self._apply_rib(self.rib.set_link(link.name, link.up))

    def load_config(self, config) -> None:
        new_settings = cfgmod.fib_settings(config)
        if (new_settings.table, new_settings.protocol) != (self.settings.table, self.settings.protocol):
            log.warning("spec.fib.table/protocol changed: takes effect at the next restart")
        elif new_settings.metric != self.settings.metric:
            self.settings = self.fib.settings = dataclasses.replace(
                new_settings, nexthop_objects=self.settings.nexthop_objects)
            self._apply_rib(self.rib.set_default_metric(new_settings.metric))
        self.config = config
        if self.rib.max_paths != config.agent.max_paths:
            self.rib.max_paths = config.agent.max_paths
            self._want_all()
        self._apply_rib(self.rib.apply(self.kernel.set_distances(cfgmod.distances(config))))
        self._apply_rib(self.rib.apply(self.static.load(cfgmod.static_candidates(config))))
        if self.bgp is not None and config is not self._bgp_config:
            self._bgp_output(self.bgp.reconfigure(config, cfgmod.distances(config)))
            self._bfd_configure(config)
        elif self.bgp is None and config.peers:  # the first peer arrived with a reload
            self._make_bgp(config)
            self.spawn(self.start_bgp(), "bgp-start")
        self._bgp_config = config

    def _want_all(self) -> None:
        self.fib.want({p: self.rib.desired(p) for p in self.rib.prefixes()})
        self.fib.want({p: self.rib.desired(p) for p in list(self.fib.actual) if p not in self.rib})

    def _apply_rib(self, changes) -> None:
        if changes:
            self.fib.want(changes)
        if self.bgp is not None and self.rib.resolver.connected_version != self._connected_seen:
            self._connected_seen = self.rib.resolver.connected_version  # an interface subnet came
            self.bgp.refresh_devices()  # or went: the interface of a BGP session may have changed

    def source_synced(self, name: str) -> None:
        if self.gate.done(name):
            self._open_gate()

    def _open_gate(self) -> None:
        if self.nhg is not None:
            self.nhg.gate_open = True  # unused objects of ours may go now
        swept = self.fib.open_gate()
        self.metrics.stale_swept.inc(swept)
        log.info("sync gate open (%s): %d stale routes to delete", self.gate.opened_by, swept)

    def gate_timeout(self, _data=None) -> None:
        if self.gate.expire():
            self._open_gate()

    # ---------------------------------------------------------------- BGP
    def handle_bgp(self, events) -> None:
        """Speaker events, in order (a tuple: what the speaker had waiting). Consecutive UPDATEs
        share one output: their RIB updates are applied as one change (and their max-prefix logs
        come after it); anything else is handled on its own, after the updates before it."""
        if not isinstance(events, tuple):
            events = (events,)
        run = None  # the output of consecutive UPDATEs, one object (applied as one change)
        now = time.monotonic()
        waiting = self.urgent_waiting
        for i, ev in enumerate(events):
            if i and waiting():  # a BFD change waits: the rest of the burst goes after it
                self.queue.put_next(Event("bgp", events[i:]))
                break
            if ev.__class__ is RouteUpdate:
                run = self.bgp.handle(ev, now, run)
                continue
            if run is not None:
                self._bgp_output(run)
                run = None
            self._one_bgp(ev, self.bgp.handle(ev, now))
        if run is not None:
            self._bgp_output(run)

    def _apply_bgp(self, updates, withdrawn) -> None:
        """RIB updates from BGP; `withdrawn`: prefixes a peer explicitly withdrew, whose wanted
        state the sync gate does not hold (`FibState.release`). Updates of a peer whose BFD is
        not Up are held (`BfdLink.filter`)."""
        if self.bfd is not None:
            updates = self.bfd.filter(updates)
        self._apply_rib(self.rib.apply(updates))
        if withdrawn and not self.fib.gate_open:
            self.fib.release({p: self.rib.desired(p) for p in withdrawn})

    def _one_bgp(self, ev, out) -> None:
        self._bgp_output(out)
        if isinstance(ev, PeerState) and ev.state in (PeerStatus.UP, PeerStatus.DOWN):
            up = ev.state is PeerStatus.UP
            self.notice("BgpSessionUp" if up else "BgpSessionDown",
                        f"BGP session with {ev.peer} {ev.state.value}"
                        + (f": {ev.reason}" if ev.reason else ""), warning=not up)

    def handle_bgp_stale(self, peer) -> None:
        self._bgp_output(self.bgp.source.stale_timer(peer, time.monotonic()))

    def _bgp_output(self, out) -> None:
        if out.updates:
            self._apply_bgp(out.updates, out.withdrawn)
        # everything the import stage gave is in the RIB now (`BgpDaemon.settle`)
        self.bgp.settle(self.rib.table, self.bfd.gated if self.bfd is not None else _never)
        for line in out.logs:
            log.warning("%s", line)
            if "max-prefix" in line:
                self.notice("MaxPrefixExceeded", line, warning=True)
        for seconds, peer in out.timers:
            asyncio.get_running_loop().call_later(seconds, lambda p=peer: self.queue.put(Event("bgp-stale", p)))
        for peer in out.synced:
            log.info("peer %s: End-of-RIB (or, without graceful restart, its first KEEPALIVE): in sync", peer)
            if self.bfd is not None and self.bfd.gated(peer):
                log.info("peer %s: in sync, but its routes wait for BFD Up", peer)
                self.bfd.synced_waiting.add(peer)
            else:
                self.source_synced(f"bgp/{peer}")

    def release_memos(self) -> None:
        """A load is over (`Core.after_load`): the speaker's decoder lets its sharing memo go."""
        if self.bgp is not None:
            self.bgp.speaker.release_memos()

    # ---------------------------------------------------------------- cluster inputs
    def cluster_guard(self) -> None:
        """The cluster's share of the import guard (pod CIDRs, VIPs, node addresses) changed?"""
        if self.bgp is None:
            return
        inputs = self.cluster.guard_inputs(self.config)
        if inputs is not self._guard_inputs:
            self._guard_inputs = inputs
            self._apply_rib(self.rib.apply(self.bgp.set_cluster_guard(self.config, *inputs)))
        node_ips = self.cluster.node_addresses()
        if node_ips != self._guard_addrs:  # the interfaces' share is refreshed by the full scan
            self._guard_addrs = node_ips
            self.bgp.set_node_addresses(self.node_addresses())

    def node_addresses(self) -> list[str]:
        """Interface addresses, and in cluster mode the Node's addresses (host routes)."""
        addrs = node_addresses()
        if self.cluster is not None:
            addrs = sorted(set(addrs) | set(self.cluster.node_addresses()))
        return addrs
