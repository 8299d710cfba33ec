"""Cluster mode: the Kubernetes source, the configuration from the CRDs, and the commit path.

DOC: `KubeSync` starts the reflectors (`agent.k8s.source.KubeSource`; their threads hand batches
to the core queue as ``k8s`` events) and waits for the first list of the configuration and this
Node before the kernel is read. Then, in the core task, `handle()` only applies each batch to the
`ClusterState` and accumulates what changed; `commit()` (an end-of-pass step) does the work once
per pass over the queue, so a burst of watch events costs one recomputation: re-derive the
configuration (a rejected object keeps its last good version), reload it into the routing state,
refresh the cluster's share of the import guard, and open the restart gate after the initial list.
Rejected configuration is reported in the log, as a Kubernetes Event and in the node status.

Last-known-good snapshot (`agent.k8s.snapshot`, in the state directory): while the live view is
complete, what the node needs to run on its own is written (atomically, 0600) when it changed, at
most once per status period (`tick`), at least every `snapshot.REFRESH_SECONDS`, right after the
first full list and at shutdown. At start, when a usable snapshot exists and the configuration
and Node are not listed within `LIVE_WAIT_SECONDS` (the API server is down or hung), the cluster
state is seeded from it: BGP and the advertisements run from it at once, instead of the peers
dropping the node's prefixes when their graceful-restart time runs out. The restart gate still
waits for the live lists (or the stale timer), so no kernel route is deleted on the snapshot's
word. Each resource's first live list replaces the seed's objects; once every resource is listed,
the live view takes over (changes made meanwhile are applied then, as any change is).

Operator-facing diagnostics: while waiting at start the log says which lists are missing and why
(the reflectors' last errors), and says plainly when every Node is listed but this node's is not
(a wrong ``NODE_NAME``); `warnings` (status, /readyz?verbose) names configuration that is accepted
but not applied as written (``AgentConfig spec.api``: in cluster mode the API listens where the
command line says) and a missing Node. A deleted RouteAgentNodeState is written again at once (the
source watches it; a ``status`` event with reason ``recreate``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time

from ..config import resolve as cfgmod
from ..config.agentconfig import ApiSpec
from ..config.loader import ConfigError, Problem
from ..k8s import snapshot
from ..k8s.cluster import RESOURCES, Change, ClusterState
from .events import Event, EventQueue
from .routing import Routing
from .statedir import read_private, write_private

log = logging.getLogger("route_agent")

LIVE_WAIT_SECONDS = 5.0  # at start, with a usable snapshot: how long the live lists may take
WAIT_LOG_SECONDS = 10.0
API_IGNORED = ("AgentConfig spec.api is ignored in cluster mode: the API listens where --api-address "
               "and --api-port say (default 127.0.0.1:9180), because it starts before the "
               "configuration is listed")


class KubeSync:
    def __init__(self, cluster: ClusterState, node_name: str, kubeconfig: str | None,
                 queue: EventQueue, metrics, state_dir: str | None = None) -> None:
        self.cluster = cluster
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.queue = queue
        self.metrics = metrics
        self.kube = None  # the KubeSource, once started
        self.routing: Routing | None = None  # set by the composition root before any event
        self.base_config = cfgmod.Config()  # before the cluster's prefixes are filled in
        self.last_error = ""
        self.warnings: tuple[str, ...] = ()
        self._pending = Change(guard=True)  # the first commit runs (see the end of `commit`)
        self._listed = False  # every resource listed once, live
        self.snapshot_path = os.path.join(state_dir, snapshot.FILENAME) if state_dir else None
        self.snapshot_age: float | None = None  # while running from the snapshot: its age at start
        self._restored: dict | None = None  # the snapshot's state while it is used
        self._snap_dirty = False
        self._snap_written = time.monotonic()
        self._snap_writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="k8s-snapshot")

    async def start(self):
        """Start the reflectors and wait for the first list of the configuration and this Node:
        the FIB settings must be known before the kernel table is read. With a usable snapshot,
        wait `LIVE_WAIT_SECONDS` at most, then run from the snapshot. Returns the config."""
        started = time.monotonic()  # (importing and setting up the client takes seconds on a busy node)
        from ..k8s.source import KubeSource  # the kubernetes client is only needed in cluster mode

        loop = asyncio.get_running_loop()
        put = lambda batch: loop.call_soon_threadsafe(self.queue.put, Event("k8s", batch))
        try:
            self.kube = KubeSource(self.node_name, put, kubeconfig=self.kubeconfig)
        except Exception as exc:  # no kubeconfig, no service account: nothing was touched yet
            raise ConfigError([Problem(self.kubeconfig or "kubernetes", "", "",
                                       f"cannot set up the Kubernetes client: {exc}")]) from None
        self.kube.start()
        saved = self._read_snapshot()
        fallback = started + LIVE_WAIT_SECONDS if saved is not None else None
        logged = started
        while not self.cluster.config_synced:
            now = time.monotonic()
            if fallback is not None and now >= fallback:
                fallback = None
                if self._restore(*saved):
                    break
            try:
                wait = WAIT_LOG_SECONDS if fallback is None else max(0.0, fallback - now)
                ev = await asyncio.wait_for(self.queue.get(), timeout=wait)
            except TimeoutError:
                if time.monotonic() - logged >= WAIT_LOG_SECONDS - 0.1:
                    logged = time.monotonic()
                    self._log_waiting(logged - started)
                continue
            if ev.kind == "k8s" and ev.data.resource in RESOURCES:
                self.cluster.apply(ev.data)
        try:
            self.base_config = self.cluster.config()
        except ConfigError as exc:
            self.base_config = cfgmod.Config()
            self._rejected(exc.problems)
        else:
            self._accepted()
        self._check_warnings()
        config = self.cluster.expand(self.base_config)
        log.info("kubernetes: configuration of node %s%s: %d peers, %d advertisements", self.node_name,
                 " (from the snapshot)" if self.cluster.seeded else "", len(config.peers), len(config.adverts))
        return config

    def _log_waiting(self, waited: float) -> None:
        c = self.cluster
        if c.node_missing:
            listed = sorted(c.nodes)
            log.error("kubernetes: Node %s does not exist (%d Nodes listed%s): check NODE_NAME or "
                      "--node-name; waiting for it (%.0f s)", self.node_name, len(listed),
                      (": " + ", ".join(listed[:5]) + (" ..." if len(listed) > 5 else "")) if listed else "",
                      waited)
            return
        missing = [r for r in RESOURCES if r not in c.synced_resources]
        errors = sorted({f"{r.name}: {r.last_error}" for r in self.kube.reflectors
                         if r.name in missing and r.last_error})
        log.warning("kubernetes: still waiting for the first list of %s (%.0f s)%s", ", ".join(missing),
                    waited, "; " + "; ".join(errors[:3]) if errors else "")

    def stop(self) -> None:
        if self.kube is not None:
            self.kube.stop()
        if self._snap_dirty:
            self._write_snapshot()
        self._snap_writer.shutdown(wait=True)

    def notice(self, reason: str, message: str, warning: bool = False) -> None:
        """A Kubernetes Event on this Node; a session going up or down updates the status soon."""
        if self.kube is None:
            return
        if reason.startswith("BgpSession"):
            self.queue.put(Event("status", "soon"))
        self.kube.event(reason, message, warning=warning)

    def handle(self, batch) -> None:
        """Apply a batch to the cluster state only; the work it implies is done once per pass
        over the queue (`commit`), so a burst of watch events costs one recomputation."""
        if batch.resource not in RESOURCES:  # this node's RouteAgentNodeState
            if batch.deletes and self.kube is not None:
                log.warning("kubernetes: RouteAgentNodeState %s was deleted: writing it again", self.node_name)
                self.kube.state_deleted()
                self.queue.put(Event("status", "recreate"))
            return
        change = self.cluster.apply(batch)
        p = self._pending
        p.config |= change.config
        p.adverts |= change.adverts
        p.guard |= change.guard or batch.synced  # (a synced batch may open the restart gate)
        p.problems |= change.problems

    def commit(self, _retry: bool = False) -> None:
        if not self._pending:
            return
        change, self._pending = self._pending, Change()
        if change.config and self.cluster.config_synced:
            try:
                self.base_config = self.cluster.config()
            except ConfigError as exc:
                self._rejected(exc.problems)
            else:
                self._accepted()
        elif change.config or change.problems:
            self._rejected([])  # problems of single objects are shown, nothing changes
        if (change.config or change.adverts) and (self.cluster.config_synced or self.cluster.seeded):
            self.routing.load_config(self.cluster.expand(self.base_config))
        if change.guard or change.config:
            self.routing.cluster_guard()
        self._check_warnings()
        if self._restored is not None and not self.cluster.seeded:
            log.info("kubernetes: every resource listed: the live view takes over from the snapshot")
            self._restored, self.snapshot_age = None, None
            self.queue.put(Event("status", "soon"))
        self._snap_dirty |= bool(change.config or change.adverts or change.guard)
        if self.cluster.synced and not self._listed:  # (the start may have seen every list already)
            self._listed = True
            if "kubernetes" in self.routing.gate.waiting:
                log.info("kubernetes: initial list of every resource done")
                self.routing.source_synced("kubernetes")
            self._write_snapshot()

    def _rejected(self, problems) -> None:
        lines = self.cluster.problem_lines() + [str(p) for p in problems]
        text = "\n".join(lines)
        if text and text != self.last_error:
            self.metrics.reload_failures.inc()
            log.error("configuration rejected, keeping the last good one:\n%s", text)
            if self.kube is not None:
                self.kube.event("ConfigRejected", text, warning=True)
        if text != self.last_error:
            self.queue.put(Event("status", "soon"))
        self.last_error = text
        self.metrics.reload_ok.set(0 if text else 1)

    def _accepted(self) -> None:
        self._rejected([])  # per-object problems still count: they are not running

    def _check_warnings(self) -> None:
        warnings = []
        if self.base_config.agent.api != ApiSpec():
            warnings.append(API_IGNORED)
        if self.cluster.node_missing:
            warnings.append(f"Node {self.node_name} does not exist: check NODE_NAME or --node-name")
        warnings = tuple(warnings)
        if warnings == self.warnings:
            return
        for text in set(warnings) - set(self.warnings):
            log.warning("kubernetes: %s", text)
            if self.kube is not None:
                self.kube.event("ConfigIgnored" if text == API_IGNORED else "NodeNotFound", text, warning=True)
        self.warnings = warnings
        self.queue.put(Event("status", "soon"))

    def config_state(self) -> dict:
        """For the read view (`K8sCounts`): where the configuration comes from, the warnings."""
        return {"config_source": "snapshot" if self.cluster.seeded else "live",
                "snapshot_age": self.snapshot_age, "warnings": self.warnings,
                "node_missing": self.cluster.node_missing}

    # ---- the last-known-good snapshot ----
    def tick(self) -> None:
        """Periodic (the status period): write the snapshot if it changed or is due a refresh."""
        if self._snap_dirty or time.monotonic() - self._snap_written >= snapshot.REFRESH_SECONDS:
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        """Hand the current state to the writer thread (the live one; while running from the
        snapshot, the snapshot itself with a new time: nothing newer is known)."""
        if self.snapshot_path is None:
            return
        state = self.cluster.snapshot() or self._restored
        if state is None:
            return
        self._snap_dirty, self._snap_written = False, time.monotonic()
        data = (self.node_name, state, time.time())
        self._snap_writer.submit(self._write_file, data)

    def _write_file(self, data) -> None:
        try:
            write_private(self.snapshot_path, snapshot.encode(*data))
        except Exception as exc:  # a full disk must not stop routing; the next period retries
            self._snap_dirty = True
            log.warning("kubernetes: cannot write the snapshot %s: %s", self.snapshot_path, exc)

    def _read_snapshot(self) -> tuple[dict, float] | None:
        if self.snapshot_path is None:
            return None
        try:
            data = read_private(self.snapshot_path, snapshot.MAX_BYTES)
        except (OSError, ValueError) as exc:
            log.warning("kubernetes: snapshot %s not used: %s", self.snapshot_path, exc)
            return None
        if data is None:
            return None
        state, age, why = snapshot.decode(data, self.node_name, time.time())
        if state is None:
            log.warning("kubernetes: snapshot %s not used: %s", self.snapshot_path, why)
            return None
        return state, age

    def _restore(self, state: dict, age: float) -> bool:
        try:
            left_out = self.cluster.restore(state)
        except ValueError as exc:
            log.warning("kubernetes: snapshot %s not used: %s", self.snapshot_path, exc)
            return False
        for line in left_out:
            log.warning("kubernetes: snapshot: left out (no longer valid): %s", line)
        self._restored, self.snapshot_age = state, age
        log.warning("kubernetes: the configuration was not listed within %.0f s: running from the "
                    "last-known-good snapshot written %.0f s ago until every resource is listed",
                    LIVE_WAIT_SECONDS, age)
        return True
