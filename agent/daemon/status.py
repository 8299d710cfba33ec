"""The node's status for its `RouteAgentNodeState` object, and the publisher that writes it.

DOC: `node_status(view)` summarises, from the agent's `ReadView`, what an operator asks first: is
the agent ready, which sessions are up, and per peer and family how many prefixes are received,
accepted, rejected and installed now and how many we advertise, the configuration problems that
are not running, and in cluster mode the API server connection and where the configuration comes
from (live or the snapshot). Every count is current (the field descriptions of
`agent.config.nodestate.RouteAgentNodeStateStatus`), so they add up. `StatusPublisher` (cluster mode) compares the dict with the last one written and
writes only changes: every STATUS_SECONDS (a ``status`` event), and `soon` after a session or
configuration problem changed, but never twice within STATUS_MIN_SECONDS (the periodic write
catches up). The timestamp ``updated`` is added after that comparison. A ``recreate`` event (the
object was deleted) forgets what was written and writes at once.
"""

from __future__ import annotations

import datetime
import time

from ..api.readview import ReadView

MAX_ERRORS = 20
STATUS_SECONDS = 10.0
STATUS_MIN_SECONDS = 2.0


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(view: ReadView) -> dict:
    """The status (`agent.config.nodestate.RouteAgentNodeStateStatus`): every count current, so
    they add up (received = accepted + rejected; advertised per family = the peers' sum)."""
    peers = []
    advertised = {"ipv4": 0, "ipv6": 0}  # both keys always: the status is replaced as a whole
    bgp = view.bgp_counts()
    if bgp is not None:
        for row in view.peers():
            fams = {}
            for fam, c in row["families"].items():
                v = 6 if fam.startswith("ipv6") else 4
                out = bgp.advertised.get((row["address"], v), 0)
                advertised[f"ipv{v}"] += out
                fams[fam] = {k: c[k] for k in ("received", "accepted", "rejected", "rejectedNotKept",
                                               "installed")} | {"advertised": out}
            peer = {"name": row["name"], "address": row["address"], "state": row["state"],
                    "reason": row["reason"] or "", "families": fams}
            if row.get("bfd"):
                peer["bfd"] = row["bfd"]["state"]
            peers.append(peer)
    errors = [line for line in view.config_problems() if line][:MAX_ERRORS]
    fib = view.fib_counts()
    status = {
        "ready": view.ready(),
        "peersUp": sum(1 for p in peers if p["state"] == "up"),
        "peersTotal": len(peers),
        "peers": peers,
        "installed": fib.ipv4 + fib.ipv6,
        "advertised": advertised,
        "advertisedTotal": advertised["ipv4"] + advertised["ipv6"],
        "configErrors": errors,
    }
    k8s = view.k8s_counts()
    if k8s is not None:
        status["configSource"] = k8s.config_source
        status["apiServer"] = {"connected": k8s.connected,
                               "watchStalls": sum(r.stalls for r in k8s.reflectors),
                               "lastError": k8s.last_error}
        status["warnings"] = list(k8s.warnings)
    return status


class StatusPublisher:
    """Writes `node_status` through `write(status)` (the KubeSource's `publish_status`)."""

    def __init__(self, view: ReadView, write) -> None:
        self.view = view
        self.write = write
        self._sent: dict | None = None
        self._at = -STATUS_MIN_SECONDS

    def publish(self, reason: str | None = None) -> None:
        now = time.monotonic()
        if reason == "recreate":  # the object was deleted: write everything again, now
            self._sent = None
        elif reason == "soon" and now - self._at < STATUS_MIN_SECONDS:
            return
        status = node_status(self.view)
        if status != self._sent:
            self._sent, self._at = status, now
            self.write(status | {"updated": utc_now()})
