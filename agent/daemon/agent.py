"""The composition root: builds the agent's pieces, wires them, owns start-up and shutdown.

DOC: `Agent` creates the queue, the metrics, the configuration source (`reload.ConfigReloader`
standalone, `kube.KubeSync` in cluster mode), the routing state (`routing.Routing`), the FIB writer
(`writer.FibWriter`), the core task (`core.Core`) and the read view the API sees
(`view.AgentView`), and registers which handler takes which event. `run()` makes the state
directory private (`statedir`), then starts the pieces in the order a hitless restart needs (API
first, so /healthz answers; the Kubernetes configuration; the kernel: monitor, dump, adopt; the
config; timers and readers; the speaker), then runs the long-running tasks supervised under one
TaskGroup until SIGTERM/SIGINT, and unwinds: the speaker stops (no NOTIFICATION: peers keep our
routes), a batch in flight completes, routes stay in the kernel unless --flush-on-exit.

This is the only module that loads the keyword-named `agent/import/` package (with
`importlib.import_module("..import", __package__)`); the BGP runtime gets it handed in.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
import socket
import sys

from ..api.metrics import Metrics
from ..config import resolve as cfgmod
from ..core.gctune import tune_gc
from ..k8s.cluster import ClusterState
from .core import Core
from .events import Event, EventQueue
from .kube import KubeSync
from .reload import ConfigReloader
from .routing import Routing
from .statedir import prepare_state_dir
from .status import STATUS_SECONDS, StatusPublisher
from .supervise import Spawner, periodic, supervised
from .view import AgentView
from .writer import FibWriter

log = logging.getLogger("route_agent")

_import = importlib.import_module("..import", __package__)  # the keyword-named package, once
DEFAULT_STATE_DIR = os.environ.get("ROUTE_AGENT_STATE_DIR", "/run/route-agent")


# The GIL's switch interval (CPython's default is 5 ms). The FIB writer's threads hand every
# netlink batch to the kernel with the GIL released and then need it back (for the ACKs, for the
# next batch) while the core task is busy decoding UPDATEs: each such return waited up to one
# interval, several times per netlink batch, so during a table load the kernel sat idle
# most of the time and its work piled up at the end. Measured (bench/bgp_learn.py, 100k shared,
# nexthop objects on): 5 ms 1.67-1.74 s, 1 ms 1.42-1.43 s, 0.2 ms 1.32-1.47 s. BFD runs in its own
# process; the switches cost only while two threads want the GIL.
SWITCH_INTERVAL = 0.0005


def _tune_interpreter() -> None:
    tune_gc()
    sys.setswitchinterval(SWITCH_INTERVAL)


class Agent:
    def __init__(self, config_path: str | None, *, flush_on_exit: bool = False,
                 api_port: int | None = None, api_address: str | None = None,
                 metrics_port: int | None = None, metrics_address: str | None = None,
                 state_dir: str | None = None, kubernetes: bool = False, kubeconfig: str | None = None,
                 node_name: str | None = None) -> None:
        self.state_dir = state_dir or DEFAULT_STATE_DIR
        self.flush_on_exit = flush_on_exit
        self.api_port_override = api_port
        self.api_address_override = api_address
        self.metrics_port_override = metrics_port
        self.metrics_address_override = metrics_address
        self.node_name = node_name or os.environ.get("NODE_NAME") or socket.gethostname()
        self.metrics = Metrics()
        self.queue = EventQueue(counter=self.metrics.queue_overflows)
        self.spawn = Spawner()
        self.reloader: ConfigReloader | None = None
        self.kube: KubeSync | None = None
        if kubernetes:
            self.kube = KubeSync(ClusterState(self.node_name), self.node_name, kubeconfig, self.queue,
                                 self.metrics, state_dir=self.state_dir)
            config = cfgmod.Config()  # until the first list of the CRDs (see run())
            self.metrics.reload_ok.set(1)
        else:  # invalid at start: ConfigError, nothing touched
            self.reloader = ConfigReloader(config_path, self.node_name, self.queue, self.metrics)
            config = self.reloader.first()
        self.routing = Routing(config, imp=_import, queue=self.queue, metrics=self.metrics,
                               state_dir=self.state_dir, spawn=self.spawn,
                               cluster=self.kube.cluster if self.kube is not None else None)
        self.writer = FibWriter(self.routing, self.queue, self.metrics)
        self.view = AgentView(self.routing, self.writer, self._last_error, self.kube)
        self.metrics.bind(self.view)
        self.core = self._wire()
        self._stop = asyncio.Event()

    def _last_error(self) -> str:
        source = self.kube if self.kube is not None else self.reloader
        return source.last_error

    def _wire(self) -> Core:
        core, r = Core(self.queue, self.metrics), self.routing
        r.flush_now = self.writer.flush
        core.on("kernel", r.handle_kernel)
        core.on("main-table", r.handle_main_table)
        core.on("config", r.load_config)
        core.on("scan", r.full_scan)
        core.on("bgp", r.handle_bgp)
        core.on("bgp-stale", r.handle_bgp_stale)
        core.urgent_waiting = r.urgent_waiting
        core.on("bfd", r.handle_bfd)
        core.on("bfd-cleanup", r.handle_bfd_cleanup)
        core.on("gate-timeout", r.gate_timeout)
        core.on("flushed", self.writer.flushed)
        core.on("urgent-flushed", self.writer.urgent_flushed)
        # "retry": nothing to do but flush (see Core.run)
        if self.kube is not None:
            self.kube.routing = r
            r.notice = self.kube.notice
            core.on("k8s", self.kube.handle)
            core.at_end_of_pass("k8s-commit", self.kube.commit)
        core.at_end_of_pass("flush", lambda retry: self.writer.flush(retry_failed=retry), resync=False)
        core.after_load(r.release_memos)
        return core

    @property
    def config(self):
        return self.routing.config

    # ---------------------------------------------------------------- run
    async def run(self) -> None:
        from ..api.server import serve, serve_metrics  # the API is an outer layer

        loop = asyncio.get_running_loop()
        prepare_state_dir(self.state_dir)  # 0700, and umask 077 for everything written there
        # first, so /healthz answers while cluster mode waits for the API server (in cluster mode
        # the address and port are the command line's or the defaults: spec.api is read later)
        api = self.config.agent.api
        server = await serve(self.view, self.metrics, self.api_address_override or api.address,
                             self.api_port_override if self.api_port_override is not None else api.port)
        servers = [server]
        metrics_address = self.metrics_address_override or api.metrics_address
        if metrics_address:  # /metrics and the probes only, reachable from other hosts
            port = self.metrics_port_override if self.metrics_port_override is not None else api.metrics_port
            servers.append(await serve_metrics(self.view, self.metrics, metrics_address, port))
        r = self.routing
        if self.kube is not None:
            try:
                config = await self.kube.start()
            except BaseException:
                for s in servers:
                    s.close()
                raise
            r.reset(config)
            status = StatusPublisher(self.view, self.kube.kube.publish_status)
            kube = self.kube

            def on_status(reason=None) -> None:
                status.publish(reason)
                if reason == "periodic":
                    kube.tick()  # the snapshot, when it changed or is due a refresh
            self.core.on("status", on_status)
        _tune_interpreter()
        r.start_kernel()
        r.load_config(r.config)
        r.source_synced("config")
        if self.kube is not None and self.kube.cluster.synced:
            r.source_synced("kubernetes")
        if not r.gate.open:
            loop.call_later(r.config.agent.fib.stale_seconds, lambda: self.queue.put(Event("gate-timeout")))
        self.writer.flush()
        loop.add_reader(r.monitor.fileno(), r.on_monitor, r.monitor)
        if r.main_monitor is not None:
            loop.add_reader(r.main_monitor.fileno(), r.on_monitor, r.main_monitor, "main-table")
        loop.add_signal_handler(signal.SIGHUP, self._sighup)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        if r.bgp is not None:
            await r.start_bgp()
        try:
            await self._run_tasks()
        finally:
            if r.bgp is not None:
                await r.bgp.stop()  # SIGTERM to ExaBGP: no NOTIFICATION, peers keep our routes
            if r.bfd is not None and r.bfd.started:
                await r.bfd.client.stop()
            self.spawn.cancel()
            self.writer.close()  # a batch in flight completes
            loop.remove_reader(r.monitor.fileno())
            if r.main_monitor is not None:
                loop.remove_reader(r.main_monitor.fileno())
            for s in servers:
                s.close()
            if self.kube is not None:
                self.kube.stop()
            self.shutdown()

    async def _run_tasks(self) -> None:
        """The long-running tasks, each supervised (restarted after an unexpected end), under one
        TaskGroup that `stop()` unwinds."""
        restarts = self.metrics.task_restarts
        tasks = {"core": self.core.run,
                 "full-scan": lambda: periodic(lambda: self.config.agent.fib.full_scan_seconds,
                                               lambda: self.queue.put(Event("scan", "periodic")))}
        if self.reloader is not None:
            tasks["config-watch"] = self.reloader.watch
        else:
            tasks["status"] = lambda: periodic(lambda: STATUS_SECONDS,
                                               lambda: self.queue.put(Event("status", "periodic")))
        async with asyncio.TaskGroup() as tg:
            running = [tg.create_task(supervised(name, make, restarts), name=name)
                       for name, make in tasks.items()]
            await self._stop.wait()
            for t in running:
                t.cancel()

    def _sighup(self) -> None:
        if self.reloader is None:
            log.info("SIGHUP ignored: in cluster mode the configuration follows the CRDs")
        else:
            self.reloader.reload()

    def stop(self) -> None:
        self._stop.set()

    def shutdown(self) -> None:
        if self.flush_on_exit:
            self.writer.flush_all()
        else:
            log.info("exiting; %d routes left in the kernel (use --flush-on-exit to remove them)",
                     len(self.routing.fib.actual))
