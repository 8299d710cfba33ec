"""The node's status for its `RouteAgentNodeState` object: pure, from the agent's views.

DOC: `node_status(agent)` summarises what an operator asks first: is the agent ready, which
sessions are up, and per peer and family how many prefixes were received, accepted, rejected and
installed and how many we advertise, plus the configuration problems that are not running. The
dict is compared with the last one written, so the agent writes only changes (at most every
``STATUS_SECONDS``); the timestamp ``updated`` is added by the caller after that comparison.
"""

from __future__ import annotations

import datetime
from collections import Counter

from ..api import views

MAX_ERRORS = 20


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(agent) -> dict:
    peers = []
    advertised = Counter()
    if agent.bgp is not None:
        desired = agent.bgp.export.desired
        for row in views.peers(agent):
            fams = {}
            for fam, c in row["families"].items():
                v = 6 if fam.startswith("ipv6") else 4
                out = sum(1 for p in desired.get(row["address"], {}) if p.family == v)
                advertised[f"ipv{v}"] += out
                fams[fam] = {k: c[k] for k in ("received", "accepted", "rejected", "installed")} | {
                    "advertised": out}
            peers.append({"name": row["name"], "address": row["address"], "state": row["state"],
                          "reason": row["reason"] or "", "families": fams})
    errors = [line for line in agent.last_error.splitlines() if line][:MAX_ERRORS]
    return {
        "ready": agent.ready,
        "peersUp": sum(1 for p in peers if p["state"] == "up"),
        "peersTotal": len(peers),
        "peers": peers,
        "installed": len(agent.fib.actual),
        "advertised": dict(advertised),
        "advertisedTotal": sum(advertised.values()),
        "configErrors": errors,
    }
