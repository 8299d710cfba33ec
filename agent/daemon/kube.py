"""Cluster mode: the Kubernetes source, the configuration from the CRDs, and the commit path.

DOC: `KubeSync` starts the reflectors (`agent.k8s.source.KubeSource`; their threads hand batches
to the core queue as ``k8s`` events) and waits for the first list of the configuration and this
Node before the kernel is read. Then, in the core task, `handle()` only applies each batch to the
`ClusterState` and accumulates what changed; `commit()` (an end-of-pass step) does the work once
per pass over the queue, so a burst of watch events costs one recomputation: re-derive the
configuration (a rejected object keeps its last good version), reload it into the routing state,
refresh the cluster's share of the import guard, and open the restart gate after the initial list.
Rejected configuration is reported in the log, as a Kubernetes Event and in the node status.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..config import resolve as cfgmod
from ..config.loader import ConfigError, Problem
from ..k8s.cluster import Change, ClusterState
from .events import Event, EventQueue
from .routing import Routing

log = logging.getLogger("route_agent")


class KubeSync:
    def __init__(self, cluster: ClusterState, node_name: str, kubeconfig: str | None,
                 queue: EventQueue, metrics) -> None:
        self.cluster = cluster
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.queue = queue
        self.metrics = metrics
        self.kube = None  # the KubeSource, once started
        self.routing: Routing | None = None  # set by the composition root before any event
        self.base_config = cfgmod.Config()  # before the cluster's prefixes are filled in
        self.last_error = ""
        self._pending = Change()

    async def start(self):
        """Start the reflectors and wait for the first list of the configuration and this Node:
        the FIB settings must be known before the kernel table is read. Returns the config."""
        from ..k8s.source import KubeSource  # the kubernetes client is only needed in cluster mode

        loop = asyncio.get_running_loop()
        put = lambda batch: loop.call_soon_threadsafe(self.queue.put, Event("k8s", batch))
        try:
            self.kube = KubeSource(self.node_name, put, kubeconfig=self.kubeconfig)
        except Exception as exc:  # no kubeconfig, no service account: nothing was touched yet
            raise ConfigError([Problem(self.kubeconfig or "kubernetes", "", "",
                                       f"cannot set up the Kubernetes client: {exc}")]) from None
        self.kube.start()
        waited = time.monotonic()
        while not self.cluster.config_synced:
            try:
                ev = await asyncio.wait_for(self.queue.get(), timeout=10)
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
            self._rejected(exc.problems)
        else:
            self._accepted()
        config = self.cluster.expand(self.base_config)
        log.info("kubernetes: configuration of node %s: %d peers, %d advertisements", self.node_name,
                 len(config.peers), len(config.adverts))
        return config

    def stop(self) -> None:
        if self.kube is not None:
            self.kube.stop()

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
        if (change.config or change.adverts) and self.cluster.config_synced:
            self.routing.load_config(self.cluster.expand(self.base_config))
        if change.guard or change.config:
            self.routing.cluster_guard()
        if self.cluster.synced and "kubernetes" in self.routing.gate.waiting:
            log.info("kubernetes: initial list of every resource done")
            self.routing.source_synced("kubernetes")

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
