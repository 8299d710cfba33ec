"""The composition root: wires sources, RIB, FIB and the kernel, and runs the event loop.

DOC: one asyncio task (`_core`) owns all routing state: it takes events from one queue (kernel
monitor batches, config reloads, timers), applies them to the sources and the RIB, hands the RIB's
changes to the FIB reconciler, and after draining the queue flushes the FIB in one netlink batch.
Everything else (the monitor reader, the config watcher, timers, the HTTP API) only puts events on
that queue or reads state between two steps of the loop.

Start-up order matters for a hitless restart: open the monitor socket first (so nothing is missed),
dump the links and the table, adopt our routes as stale without touching them, feed the foreign
routes to the RIB, load the config; the sync gate opens when every source is in sync (or the stale
timer fires) and only then may adopted routes be replaced or deleted.

This module is also the only one that will load the keyword-named `agent/import/` package (with
`importlib.import_module("..import", __package__)`) once BGP learning plugs in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import gc
import importlib
import logging
import os
import signal
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..config import resolve as cfgmod
from ..config.loader import ConfigError, Problem, config_fingerprint, format_problems, load_path
from ..fib.netlink import LinkIndex, NetlinkFib, RouteMonitor
from ..fib.reconciler import FibState
from ..fib.types import RT_TABLE_MAIN, FibSettings, LinkEvent, Op, OpError, OpKind, Overrun, RouteEvent
from ..core.gate import SyncGate
from ..api.metrics import Metrics
from ..core.model import Prefix
from ..core.rib import Rib
from ..api import views
from .bgp import BgpRuntime
from ..core.bgp import PeerState, PeerStatus
from ..sources.kernel import ConnectedTable, KernelSource
from ..sources.addresses import node_addresses
from ..sources.static import StaticSource
from ..k8s.cluster import Change, ClusterState
from .status import node_status, utc_now

log = logging.getLogger("route_agent")


def _tune_gc() -> None:
    """The routing state is a few big dicts of ints and shared objects, with hardly any reference
    cycles, while a burst of routes allocates hundreds of thousands of short-lived tuples: with the
    default threshold (700) the cyclic collector runs every few hundred routes and costs about a
    quarter of the time per route. Collect young objects every 50,000 allocations instead, and
    keep what start-up created (modules, configuration) out of every collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
_import = importlib.import_module("..import", __package__)  # the keyword-named package, once
DEFAULT_STATE_DIR = os.environ.get("ROUTE_AGENT_STATE_DIR", "/run/route-agent")

RETRY_MIN, RETRY_MAX = 0.5, 30.0
STATUS_SECONDS = 10.0
STATUS_MIN_SECONDS = 2.0
CONFIG_POLL_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # kernel | config | reload-failed | scan | gate-timeout | retry
    data: Any = None


class Agent:
    def __init__(self, config_path: str | None, *, flush_on_exit: bool = False,
                 api_port: int | None = None, api_address: str | None = None,
                 state_dir: str | None = None, kubernetes: bool = False, kubeconfig: str | None = None,
                 node_name: str | None = None) -> None:
        self.state_dir = state_dir or DEFAULT_STATE_DIR
        self.config_path = config_path
        self.flush_on_exit = flush_on_exit
        self.api_port_override = api_port
        self.api_address_override = api_address
        self.node_name = node_name or os.environ.get("NODE_NAME") or socket.gethostname()
        self.kubernetes = kubernetes
        self.kubeconfig = kubeconfig
        self.cluster: ClusterState | None = ClusterState(self.node_name) if kubernetes else None
        self.kube = None  # the KubeSource, started by run()
        if self.cluster is None:
            # invalid at start: ConfigError, nothing touched
            self.config = self._standalone(load_path(config_path))
            self.fingerprint = config_fingerprint(config_path)
        else:
            self.config = cfgmod.Config()  # until the first list of the CRDs (see run())
            self.fingerprint = None
        self.base_config = self.config  # before the cluster's prefixes are filled in
        self.metrics = Metrics()
        self._init_state(self.config)
        self.metrics.bind(self)
        self.metrics.reload_ok.set(1)
        self.ready = False
        self.started = time.monotonic()
        self.last_error: str = ""
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._stop = asyncio.Event()
        self._retry_delay = RETRY_MIN
        self._retry_handle: asyncio.TimerHandle | None = None
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fib-writer")
        self._flushing = False
        self._flush_after_gate = False
        self._synced_once = False
        self._status_sent: dict | None = None
        self._k8s_pending = Change()
        self._status_at = -STATUS_MIN_SECONDS
        self._guard_inputs = self._guard_addrs = None

    def _init_state(self, config) -> None:
        """The routing state for `config` (again in cluster mode, once the CRDs are listed:
        the FIB table and protocol must be right before the kernel is read)."""
        self.settings: FibSettings = cfgmod.fib_settings(config)
        self.rib = Rib(max_paths=config.agent.max_paths, default_metric=self.settings.metric)
        self.fib = FibState(self.settings)
        self.kernel = KernelSource(cfgmod.distances(config))
        self.connected = ConnectedTable()
        self.static = StaticSource()
        self.gate = SyncGate({"kernel", "config"} | ({"kubernetes"} if self.cluster is not None else set()))
        self.bgp: BgpRuntime | None = None
        if config.peers:
            self._make_bgp(config)
        self._installed_cache: tuple[float, dict] = (0.0, {})

    def _standalone(self, config):
        """A file configuration as it applies on this host (nodeSelector sees no labels; the router
        id defaults to the host's first global IPv4 address)."""
        ipv4 = None
        if any(p.spec.router_id is None for p in config.peers):
            ipv4 = next((a.split("/")[0] for a in node_addresses() if ":" not in a), None)
        try:
            resolved = cfgmod.for_node(config, cfgmod.NodeIdentity(self.node_name, {}, ipv4))
        except ValueError as exc:
            raise ConfigError([Problem(str(self.config_path), "", "", str(exc))]) from None
        kept = {(o.kind, o.metadata.name) for g in ("peers", "static", "adverts") for o in getattr(resolved, g)}
        skipped = [f"{o.kind}/{o.metadata.name}" for g in ("peers", "static", "adverts")
                   for o in getattr(config, g) if (o.kind, o.metadata.name) not in kept]
        if skipped:
            log.warning("standalone: a host has no Node labels, so objects whose nodeSelector "
                        "selects labels are left out: %s", ", ".join(skipped))
        return resolved

    # ---------------------------------------------------------------- start-up
    def _start_kernel(self) -> None:
        self.links = LinkIndex()
        self.netlink = NetlinkFib(self.settings, self.links)
        self.monitor = RouteMonitor(self.settings, self.links)  # before the dump: miss nothing
        self.main_netlink = self.main_monitor = None
        if self.settings.table != RT_TABLE_MAIN:  # interface subnets live in main: resolve there
            main = FibSettings(RT_TABLE_MAIN, self.settings.protocol, self.settings.metric)
            self.main_netlink = NetlinkFib(main, self.links)
            self.main_monitor = RouteMonitor(main, self.links)
        self._sync_links()
        dump = self._dump()
        self.fib.adopt(dump.ours)
        log.info("adopted %d routes of protocol %d from table %d as stale", len(dump.ours),
                 self.settings.protocol, self.settings.table)
        self._apply_rib(self.rib.apply(self.kernel.resync(dump.foreign)))
        self._source_synced("kernel")

    def _dump(self):
        """Dump our table; with a table other than main, refresh main's connected routes too."""
        if self.main_netlink is not None:
            self._apply_rib(self.rib.set_connected(self.connected.resync(self.main_netlink.dump().foreign)))
        return self.netlink.dump()

    def _make_bgp(self, config) -> None:
        self.bgp = BgpRuntime(_import, config, cfgmod.distances(config), self._node_addresses(),
                              runtime_dir=os.path.join(self.state_dir, "speaker"))
        for name in self.bgp.gate_names():
            self.gate.add(name)
        if self.cluster is not None:
            self._guard_inputs = self.cluster.guard_inputs(config)
            self.rib.apply(self.bgp.set_cluster_guard(config, *self._guard_inputs))  # nothing learned yet

    def _sync_links(self) -> None:
        """Dump the links: the netlink codec needs their indexes, the resolver their state."""
        links = self.netlink.links_dump()
        gone = {l.name for l in self.links.links()} - {l.name for l in links}
        self.links.load(links)
        for name in gone:
            self._apply_rib(self.rib.set_link(name, None))
        for link in links:
            self._apply_rib(self.rib.set_link(link.name, link.up))

    def _load_config(self, config) -> None:
        new_settings = cfgmod.fib_settings(config)
        if (new_settings.table, new_settings.protocol) != (self.settings.table, self.settings.protocol):
            log.warning("spec.fib.table/protocol changed: takes effect at the next restart")
        elif new_settings.metric != self.settings.metric:
            self.settings = self.fib.settings = new_settings
            self._apply_rib(self.rib.set_default_metric(new_settings.metric))
        self.config = config
        if self.rib.max_paths != config.agent.max_paths:
            self.rib.max_paths = config.agent.max_paths
            self._want_all()
        self._apply_rib(self.rib.apply(self.kernel.set_distances(cfgmod.distances(config))))
        self._apply_rib(self.rib.apply(self.static.load(cfgmod.static_candidates(config))))
        if self.bgp is not None and config is not self._bgp_config:
            self._bgp_output(self.bgp.reconfigure(config, cfgmod.distances(config)))
        elif self.bgp is None and config.peers:  # the first peer arrived with a reload
            self._make_bgp(config)
            asyncio.get_running_loop().create_task(self._start_bgp())
        self._bgp_config = config

    def _want_all(self) -> None:
        self.fib.want({p: self.rib.desired(p) for p in self.rib.prefixes()})
        self.fib.want({p: self.rib.desired(p) for p in list(self.fib.actual) if p not in self.rib})

    def _apply_rib(self, changes) -> None:
        if changes:
            self.fib.want(changes)

    def _source_synced(self, name: str) -> None:
        if self.gate.done(name):
            self._open_gate()

    def _open_gate(self) -> None:
        swept = self.fib.open_gate()
        self.metrics.stale_swept.inc(swept)
        log.info("sync gate open (%s): %d stale routes to delete", self.gate.opened_by, swept)

    # ---------------------------------------------------------------- events
    def _on_monitor(self, monitor: RouteMonitor, kind: str = "kernel") -> None:
        try:
            events = monitor.read()
        except OSError as exc:  # never let the reader die: resync instead
            log.warning("route monitor read failed: %s; full resync", exc)
            events = [Overrun()]
        if events:
            self._queue.put_nowait(Event(kind, events))

    def _handle_main_table(self, events) -> None:
        changes = []
        for ev in events:
            if isinstance(ev, Overrun):
                self._queue.put_nowait(Event("scan", "overrun"))
            elif isinstance(ev, RouteEvent) and ev.foreign is not None:
                changes += self.connected.seen(ev.foreign, ev.deleted)
        self._apply_rib(self.rib.set_connected(changes))

    def _handle_kernel(self, events) -> None:
        updates = []
        for ev in events:
            if isinstance(ev, Overrun):
                self._queue.put_nowait(Event("scan", "overrun"))
            elif isinstance(ev, LinkEvent):
                self._apply_rib(self.rib.set_link(ev.link.name, None if ev.deleted else ev.link.up))
                if ev.deleted or not ev.link.up:
                    # IPv4 routes through a downed link vanish without notification
                    self._queue.put_nowait(Event("scan", "link-down"))
            elif isinstance(ev, RouteEvent):
                if ev.foreign is not None:
                    updates += self.kernel.seen(ev.foreign, ev.deleted)
                    if ev.deleted and ev.foreign.connected:
                        # an address went away: the kernel drops routes through it silently
                        self._queue.put_nowait(Event("scan", "connected-route-deleted"))
                else:
                    self._our_route_event(ev)
        if updates:
            self._apply_rib(self.rib.apply(updates))

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
        if ev.prefix in self.fib.pending:
            self.metrics.repairs.inc()
            log.warning("route %s of ours changed outside route-agent: repairing", ev.prefix)

    def _full_scan(self, reason: str) -> None:
        self.metrics.resyncs.labels(reason).inc()
        if self.bgp is not None:
            self.bgp.set_node_addresses(self._node_addresses())
        self._sync_links()
        dump = self._dump()
        self.fib.resync(dump.ours)
        self._apply_rib(self.rib.apply(self.kernel.resync(dump.foreign)))

    def _handle(self, ev: Event) -> None:
        if ev.kind == "kernel":
            self._handle_kernel(ev.data)
        elif ev.kind == "main-table":
            self._handle_main_table(ev.data)
        elif ev.kind == "config":
            self._load_config(ev.data)
        elif ev.kind == "scan":
            self._full_scan(ev.data)
        elif ev.kind == "bgp":
            self._bgp_output(self.bgp.handle(ev.data, time.monotonic()))
            if self.kube is not None and isinstance(ev.data, PeerState) and ev.data.state in (
                    PeerStatus.UP, PeerStatus.DOWN):
                self._queue.put_nowait(Event("status", "soon"))
                up = ev.data.state is PeerStatus.UP
                self.kube.event("BgpSessionUp" if up else "BgpSessionDown",
                                f"BGP session with {ev.data.peer} {ev.data.state.value}"
                                + (f": {ev.data.reason}" if ev.data.reason else ""), warning=not up)
        elif ev.kind == "bgp-stale":
            self._bgp_output(self.bgp.source.stale_timer(ev.data, time.monotonic()))
        elif ev.kind == "flushed":
            self._flushed(*ev.data)
        elif ev.kind == "k8s":
            self._handle_k8s(ev.data)
        elif ev.kind == "k8s-commit":
            self._commit_k8s()
        elif ev.kind == "status":
            self._publish_status(soon=ev.data == "soon")
        elif ev.kind == "gate-timeout":
            if self.gate.expire():
                self._open_gate()
        # "retry": nothing to do but flush

    # ---------------------------------------------------------------- cluster mode
    def _handle_k8s(self, batch) -> None:
        """Apply a batch to the cluster state only; the work it implies is done once per pass
        over the queue (`_commit_k8s`), so a burst of watch events costs one recomputation."""
        change = self.cluster.apply(batch)
        p = self._k8s_pending
        p.config |= change.config
        p.adverts |= change.adverts
        p.guard |= change.guard or batch.synced  # (a synced batch may open the restart gate)
        p.problems |= change.problems

    def _commit_k8s(self) -> None:
        change, self._k8s_pending = self._k8s_pending, Change()
        if change.config and self.cluster.config_synced:
            try:
                self.base_config = self.cluster.config()
            except ConfigError as exc:
                self._config_rejected(exc.problems)
            else:
                self._config_accepted()
        elif change.config or change.problems:
            self._config_rejected([])  # problems of single objects are shown, nothing changes
        if (change.config or change.adverts) and self.cluster.config_synced:
            self._load_config(self.cluster.expand(self.base_config))
        if change.guard or change.config:
            self._cluster_guard()
        if self.cluster.synced and "kubernetes" in self.gate.waiting:
            log.info("kubernetes: initial list of every resource done")
            self._source_synced("kubernetes")

    def _config_rejected(self, problems) -> None:
        lines = self.cluster.problem_lines() + [str(p) for p in problems]
        text = "\n".join(lines)
        if text and text != self.last_error:
            self.metrics.reload_failures.inc()
            log.error("configuration rejected, keeping the last good one:\n%s", text)
            if self.kube is not None:
                self.kube.event("ConfigRejected", text, warning=True)
        if text != self.last_error:
            self._queue.put_nowait(Event("status", "soon"))
        self.last_error = text
        self.metrics.reload_ok.set(0 if text else 1)

    def _config_accepted(self) -> None:
        self._config_rejected([])  # per-object problems still count: they are not running

    def _cluster_guard(self) -> None:
        if self.bgp is None:
            return
        inputs = self.cluster.guard_inputs(self.config)
        if inputs is not self._guard_inputs:
            self._guard_inputs = inputs
            self._apply_rib(self.rib.apply(self.bgp.set_cluster_guard(self.config, *inputs)))
        node_ips = self.cluster.node_addresses()
        if node_ips != self._guard_addrs:  # the interfaces' share is refreshed by the full scan
            self._guard_addrs = node_ips
            self.bgp.set_node_addresses(self._node_addresses())

    def _node_addresses(self) -> list[str]:
        """Interface addresses, and in cluster mode the Node's addresses (host routes)."""
        addrs = node_addresses()
        if self.cluster is not None:
            addrs = sorted(set(addrs) | set(self.cluster.node_addresses()))
        return addrs

    async def _start_kubernetes(self) -> None:
        """Start the reflectors and wait for the first list of the configuration and this Node:
        the FIB settings must be known before the kernel table is read."""
        from ..k8s.source import KubeSource  # the kubernetes client is only needed in cluster mode

        loop = asyncio.get_running_loop()
        put = lambda batch: loop.call_soon_threadsafe(self._queue.put_nowait, Event("k8s", batch))
        try:
            self.kube = KubeSource(self.node_name, put, kubeconfig=self.kubeconfig)
        except Exception as exc:  # no kubeconfig, no service account: nothing was touched yet
            raise ConfigError([Problem(self.kubeconfig or "kubernetes", "", "",
                                       f"cannot set up the Kubernetes client: {exc}")]) from None
        self.kube.start()
        waited = time.monotonic()
        while not self.cluster.config_synced:
            try:
                ev = await asyncio.wait_for(self._queue.get(), timeout=10)
            except TimeoutError:
                log.warning("kubernetes: still waiting for the configuration and Node %s (%.0f s)",
                            self.node_name, time.monotonic() - waited)
                continue
            if ev.kind == "k8s":
                self.cluster.apply(ev.data)
        try:
            self.base_config = self.cluster.config()
        except ConfigError as exc:
            self.base_config = cfgmod.Config()
            self._config_rejected(exc.problems)
        else:
            self._config_accepted()
        self.config = self.cluster.expand(self.base_config)
        self._init_state(self.config)
        log.info("kubernetes: configuration of node %s: %d peers, %d advertisements", self.node_name,
                 len(self.config.peers), len(self.config.adverts))

    def _publish_status(self, soon: bool = False) -> None:
        """Write the node's status when it changed: every STATUS_SECONDS, and `soon` after a
        session or configuration problem changed, but never twice within STATUS_MIN_SECONDS
        (the periodic write catches up)."""
        if self.kube is None:
            return
        now = time.monotonic()
        if soon and now - self._status_at < STATUS_MIN_SECONDS:
            return
        status = node_status(self)
        if status != self._status_sent:
            self._status_sent, self._status_at = status, now
            self.kube.publish_status(status | {"updated": utc_now()})

    def _bgp_output(self, out) -> None:
        if out.updates:
            self._apply_rib(self.rib.apply(out.updates))
        for line in out.logs:
            log.warning("%s", line)
            if self.kube is not None and "max-prefix" in line:
                self.kube.event("MaxPrefixExceeded", line, warning=True)
        loop = asyncio.get_running_loop()
        for seconds, peer in out.timers:
            loop.call_later(seconds, lambda p=peer: self._queue.put_nowait(Event("bgp-stale", p)))
        for peer in out.synced:
            log.info("peer %s: End-of-RIB for every family: in sync", peer)
            self._source_synced(f"bgp/{peer}")

    async def _start_bgp(self) -> None:
        await self.bgp.start(lambda ev: self._queue.put_nowait(Event("bgp", ev)))

    def installed_by_peer(self) -> dict[tuple[str, int], int]:
        """Installed prefixes per (peer address, family), from the RIB winners (cached 10 s)."""
        at, counts = self._installed_cache
        if time.monotonic() - at < 10:
            return counts
        counts = Counter()
        actual, pending = self.fib.actual, self.fib.pending
        for prefix in self.rib.prefixes():
            if prefix not in actual or prefix in pending:
                continue
            cands = self.rib.candidates(prefix)
            if not any(c.bgp is not None for c in cands):
                continue
            for w in self.rib.selection(prefix).winners:
                if w.bgp is not None:
                    counts[(w.origin.name, prefix.family)] += 1
        self._installed_cache = (time.monotonic(), counts)
        return counts

    # ---------------------------------------------------------------- FIB flush
    def flush(self, retry_failed: bool = False) -> None:
        """Hand the planned ops to the writer thread; at most one batch is in flight. The core
        task keeps taking events meanwhile; the result comes back as a "flushed" event."""
        if self._flushing:
            return
        ops = self.fib.plan(retry_failed)
        if not ops:
            self._check_ready()
            return
        log.debug("writing %d route ops (gate %s)", len(ops), "open" if self.gate.open else "closed")
        self._flushing = True
        self._flush_after_gate = self.gate.open
        t0 = time.perf_counter()
        future = asyncio.get_running_loop().run_in_executor(self._writer, self.netlink.apply, ops)
        future.add_done_callback(lambda f: self._queue.put_nowait(Event("flushed", (ops, f, t0))))

    def _flushed(self, ops, future, t0: float) -> None:
        self._flushing = False
        try:
            errors = future.result()
        except Exception as exc:  # the batch's fate is unknown: mark it failed, rescan, retry
            log.error("netlink write failed: %s; full resync", exc)
            errors = [OpError(op, errno.EIO, str(exc)) for op in ops]
            self._queue.put_nowait(Event("scan", "write-failed"))
        self.fib.done(ops, errors)
        self.metrics.reconcile_seconds.observe(time.perf_counter() - t0)
        for kind, n in Counter(op.kind for op in ops).items():
            self.metrics.netlink_ops.labels(kind.value).inc(n)
        for e in errors[:20]:
            log.warning("netlink %s %s %s failed: %s", e.op.kind.value, e.op.prefix, e.op.route, e.message)
        for e in errors:
            self.metrics.netlink_errors.labels(e.op.kind.value, errno.errorcode.get(e.errno, str(e.errno))).inc()
        if any(e.errno == errno.EEXIST and e.op.kind == OpKind.ADD for e in errors):
            self._queue.put_nowait(Event("scan", "conflict"))  # a route we did not know about
        if errors:
            self._schedule_retry()
        else:
            self._retry_delay = RETRY_MIN
        if self._flush_after_gate:
            self._synced_once = True

    def _schedule_retry(self) -> None:
        if self._retry_handle is not None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._retry_handle = None
            self._queue.put_nowait(Event("retry"))

        self._retry_handle = loop.call_later(self._retry_delay, fire)
        self._retry_delay = min(self._retry_delay * 2, RETRY_MAX)

    def _check_ready(self) -> None:
        """Ready once the gate is open and the first write after it has completed (or there was
        nothing to write): the initial re-sync is done, whatever single routes failed."""
        if not self.ready and self.gate.open and (self._synced_once or not self._flushing):
            self.ready = True
            log.info("ready: initial re-sync done in %.3fs", time.monotonic() - self.started)

    # ---------------------------------------------------------------- tasks
    async def _core(self) -> None:
        while True:
            ev = await self._queue.get()
            retry = ev.kind == "retry"
            self._handle_safely(ev)
            while not self._queue.empty():
                ev = self._queue.get_nowait()
                retry = retry or ev.kind == "retry"
                self._handle_safely(ev)
            if self._k8s_pending:
                self._handle_safely(Event("k8s-commit"))
            self.flush(retry_failed=retry)

    def _handle_safely(self, ev: Event) -> None:
        """A bug or an OS error while handling one event must not take the agent (and the
        routing of the node) down: log it, count it, and re-read the kernel."""
        try:
            self._handle(ev)
        except Exception:
            log.exception("handling %s event failed; full resync", ev.kind)
            self.metrics.handler_errors.inc()
            if ev.kind != "scan":
                self._queue.put_nowait(Event("scan", "handler-error"))

    async def _watch_config(self) -> None:
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            fp = config_fingerprint(self.config_path)
            if fp != self.fingerprint:
                self.reload()

    def reload(self) -> bool:
        """Re-read the config; an invalid one is logged and counted, the old one keeps running."""
        if self.cluster is not None:
            log.info("SIGHUP ignored: in cluster mode the configuration follows the CRDs")
            return False
        self.fingerprint = config_fingerprint(self.config_path)
        try:
            config = self._standalone(load_path(self.config_path))
        except ConfigError as exc:
            self.last_error = format_problems(exc.problems)
            self.metrics.reload_failures.inc()
            self.metrics.reload_ok.set(0)
            log.error("configuration rejected, keeping the last good one:\n%s", self.last_error)
            return False
        self.last_error = ""
        self.metrics.reload_ok.set(1)
        log.info("configuration reloaded")
        self._queue.put_nowait(Event("config", config))
        return True

    async def _periodic(self, kind: str, seconds_of) -> None:
        while True:
            await asyncio.sleep(seconds_of())
            self._queue.put_nowait(Event(kind, "periodic"))

    async def run(self) -> None:
        from ..api.server import serve  # the API is an outer layer

        loop = asyncio.get_running_loop()
        # first, so /healthz answers while cluster mode waits for the API server (in cluster mode
        # the address and port are the command line's or the defaults: spec.api is read later)
        api = self.config.agent.api
        server = await serve(self, self.api_address_override or api.address,
                             self.api_port_override if self.api_port_override is not None else api.port)
        if self.cluster is not None:
            try:
                await self._start_kubernetes()
            except BaseException:
                server.close()
                raise
        _tune_gc()
        self._start_kernel()
        self._bgp_config = self.config
        self._load_config(self.config)
        self._source_synced("config")
        if self.cluster is not None and self.cluster.synced:
            self._source_synced("kubernetes")
        stale = self.config.agent.fib.stale_seconds
        if not self.gate.open:
            loop.call_later(stale, lambda: self._queue.put_nowait(Event("gate-timeout")))
        self.flush()
        loop.add_reader(self.monitor.fileno(), self._on_monitor, self.monitor)
        if self.main_monitor is not None:
            loop.add_reader(self.main_monitor.fileno(), self._on_monitor, self.main_monitor, "main-table")
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        if self.bgp is not None:
            await self._start_bgp()
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self._core(), name="core"),
                    tg.create_task(self._periodic("scan", lambda: self.config.agent.fib.full_scan_seconds),
                                   name="full-scan"),
                ]
                if self.cluster is None:
                    tasks.append(tg.create_task(self._watch_config(), name="config-watch"))
                else:
                    tasks.append(tg.create_task(self._periodic("status", lambda: STATUS_SECONDS),
                                                name="status"))
                stopper = tg.create_task(self._stop.wait(), name="stop")
                await stopper
                for t in tasks:
                    t.cancel()
        finally:
            if self.bgp is not None:
                await self.bgp.stop()  # SIGTERM to ExaBGP: no NOTIFICATION, peers keep our routes
            self._writer.shutdown(wait=True)  # a batch in flight completes
            loop.remove_reader(self.monitor.fileno())
            if self.main_monitor is not None:
                loop.remove_reader(self.main_monitor.fileno())
            server.close()
            if self.kube is not None:
                self.kube.stop()
            self.shutdown()

    def shutdown(self) -> None:
        if self.flush_on_exit:  # from a fresh dump: a batch may have completed unrecorded
            ops = [Op(OpKind.DELETE, p, r) for p, r in self.netlink.dump().ours.items()]
            errors = self.netlink.apply(ops)
            log.info("flush-on-exit: deleted %d routes (%d errors)", len(ops) - len(errors), len(errors))
        else:
            log.info("exiting; %d routes left in the kernel (use --flush-on-exit to remove them)",
                     len(self.fib.actual))

    # ---------------------------------------------------------------- views for the API
    def explain(self, prefix: Prefix) -> dict:
        d = self.rib.decide(prefix)
        installed = self.fib.actual.get(prefix)
        err = self.fib.failed.get(prefix)
        if installed is not None and prefix not in self.fib.pending:
            state = "installed"
        elif err is not None:
            state = f"not installed: netlink {err.op.kind.value} failed: {err.message}"
        elif prefix in self.fib.stale:
            state = "adopted at start, waiting for the sync gate"
        elif prefix in self.fib.pending:
            state = "pending (waiting for the sync gate)" if not self.fib.gate_open else "pending"
        else:
            state = "not installed: " + (d.note or "no candidate")
        return {
            "prefix": str(prefix),
            "candidates": [views.candidate(s.candidate) | {"status": s.status, "detail": s.detail}
                           for s in d.candidates],
            "reason": d.reason.value,
            "desired": str(d.desired.with_metric(self.settings.metric)) if d.desired else None,
            "kernel": str(installed) if installed else None,
            "fib_state": state,
            "note": d.note,
            "bgp": self.bgp.explain(prefix) if self.bgp is not None else [],
            "export": self.bgp.explain_export(prefix) if self.bgp is not None else [],
        }

