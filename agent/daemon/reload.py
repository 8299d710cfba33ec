"""Standalone configuration: the first load, the file-change poll and SIGHUP reloads.

DOC: `ConfigReloader` reads the configuration file or directory and resolves it for this host
(`standalone`: a host has no Node labels, and the router id defaults to its first global IPv4
address). A valid configuration goes to the core task as a ``config`` event; anything else is
logged, counted, and the last good configuration keeps running. That holds for every failure,
not only for an invalid file: a reload that raises anything at all (a loader bug, a RecursionError
from absurd nesting, an OS error) is logged once with its traceback, counted in
``route_agent_config_reload_errors_total`` (and ``..._reload_failures_total``) and sets
``route_agent_config_last_reload_successful`` to 0. The poll task takes a fingerprint (stat only)
of the files every CONFIG_POLL_SECONDS and reloads when it changed, so a broken file is read once,
not once a second. Only the first load, at start, may fail the agent (nothing is touched yet).
"""

from __future__ import annotations

import asyncio
import logging

from ..config import resolve as cfgmod
from ..config.loader import ConfigError, Problem, config_fingerprint, format_problems, load_path
from ..sources.addresses import node_addresses
from .events import Event, EventQueue

log = logging.getLogger("route_agent")

CONFIG_POLL_SECONDS = 1.0


class ConfigReloader:
    def __init__(self, path: str, node_name: str, queue: EventQueue, metrics) -> None:
        self.path = path
        self.node_name = node_name
        self.queue = queue
        self.metrics = metrics
        self.last_error = ""
        self.fingerprint = None
        self._watch_error = ""

    def first(self):
        """The configuration at start (raises ConfigError: nothing was touched yet)."""
        self.fingerprint = config_fingerprint(self.path)
        config = self.standalone(load_path(self.path))
        self.metrics.reload_ok.set(1)
        return config

    def standalone(self, config):
        """A file configuration as it applies on this host (nodeSelector sees no labels; the router
        id defaults to the host's first global IPv4 address)."""
        ipv4 = None
        if any(p.spec.router_id is None for p in config.peers):
            ipv4 = next((a.split("/")[0] for a in node_addresses() if ":" not in a), None)
        try:
            resolved = cfgmod.for_node(config, cfgmod.NodeIdentity(self.node_name, {}, ipv4))
        except ValueError as exc:
            raise ConfigError([Problem(str(self.path), "", "", str(exc))]) from None
        kept = {(o.kind, o.metadata.name) for g in ("peers", "static", "adverts") for o in getattr(resolved, g)}
        skipped = [f"{o.kind}/{o.metadata.name}" for g in ("peers", "static", "adverts")
                   for o in getattr(config, g) if (o.kind, o.metadata.name) not in kept]
        if skipped:
            log.warning("standalone: a host has no Node labels, so objects whose nodeSelector "
                        "selects labels are left out: %s", ", ".join(skipped))
        return resolved

    def reload(self) -> bool:
        """Re-read the config (SIGHUP, or the files changed). Never raises: an invalid config or
        any error while reading it is logged and counted, and the old config keeps running."""
        try:
            self.fingerprint = config_fingerprint(self.path)
            config = self.standalone(load_path(self.path))
        except ConfigError as exc:
            self._failed(format_problems(exc.problems))
            log.error("configuration rejected, keeping the last good one:\n%s", self.last_error)
            return False
        except Exception as exc:  # RecursionError, MemoryError from a loader, a bug: never fatal
            self._failed(f"{self.path}: cannot load the configuration: {type(exc).__name__}: {exc}")
            self.metrics.reload_errors.inc()
            log.error("configuration reload failed, keeping the last good one", exc_info=True)
            return False
        self.last_error = ""
        self.metrics.reload_ok.set(1)
        log.info("configuration reloaded")
        self.queue.put(Event("config", config))
        return True

    def _failed(self, text: str) -> None:
        self.last_error = text
        self.metrics.reload_failures.inc()
        self.metrics.reload_ok.set(0)

    async def watch(self) -> None:
        """Poll the files' fingerprint; reload when it changed. Runs until cancelled."""
        while True:
            await asyncio.sleep(CONFIG_POLL_SECONDS)
            self.poll()

    def poll(self) -> None:
        try:
            changed = config_fingerprint(self.path) != self.fingerprint
        except Exception as exc:  # documented never to raise; be sure, and say it once
            if repr(exc) != self._watch_error:
                self._watch_error = repr(exc)
                log.error("configuration watch: cannot read %s: %r", self.path, exc)
            return
        self._watch_error = ""
        if changed:
            self.reload()
