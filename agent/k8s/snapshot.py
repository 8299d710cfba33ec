"""The last-known-good snapshot: this node's view of the cluster, for a restart without the API server.

DOC: an agent restarted while the API server is down or hung could not list its configuration, so
it never started BGP; once the peers' graceful-restart time ran out they dropped the node's pod
CIDRs and VIPs, although the node and its pods were fine. So while the live view is complete, the
agent keeps a snapshot of what it needs to run on its own: the valid configuration objects (as
accepted: the last good version of each), this Node (labels, pod CIDRs, addresses), the prefixes
each ``type: service`` Advertisement expands to on this node, and the cluster's share of the import
guard (every VIP, the ServiceCIDRs, the other nodes' pod CIDRs). `agent.k8s.cluster.ClusterState`
produces it (`snapshot()`) and is seeded from it (`restore()`); the daemon (`agent.daemon.kube`)
decides when to write and read it, in the state directory (`agent.daemon.statedir`: atomic, 0600).

This module is the envelope: `encode(node, state, written)` and `decode(data, node, now)`, which
accepts a snapshot only when it is this format, `VERSION`, for this node, and younger than
`MAX_AGE_SECONDS`; otherwise it says why (the caller logs it and waits for the API server as
before). ``written`` is wall-clock time (it must survive a restart); a running agent rewrites the
snapshot when its view changed (at most every status period) and at least every
`REFRESH_SECONDS`, so the age is about how long no agent has run on the node.

Why one hour: the snapshot is for riding out an API outage across an agent restart (a crash, an
upgrade, a crash-loop back-off of up to five minutes). It is never confirmed by anyone while it is
used, and the longer no agent ran, the likelier it is that the cluster moved on (a pod CIDR given
to another node, a VIP moved) and the longer the peers have already withdrawn the node's prefixes
anyway (their graceful-restart time is minutes), so re-announcing old prefixes unconfirmed gains
little and risks attracting traffic that belongs elsewhere. The default state directory is on
``/run`` (tmpfs): a node reboot, after which the pods are gone too, starts without a snapshot.
"""

from __future__ import annotations

import json

FORMAT = "route-agent/cluster-snapshot"
VERSION = 1
MAX_AGE_SECONDS = 3600.0
REFRESH_SECONDS = 300.0
MAX_BYTES = 64 * 2**20
FILENAME = "cluster-snapshot.json"


def encode(node: str, state: dict, written: float) -> bytes:
    """The file's content: the envelope around `state` (from `ClusterState.snapshot()`)."""
    return json.dumps({"format": FORMAT, "version": VERSION, "node": node, "written": round(written, 3),
                       "state": state}, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes, node: str, now: float, max_age: float = MAX_AGE_SECONDS) -> tuple[dict | None, float, str]:
    """(state, age in seconds, "") when the snapshot may be used, else (None, age, why not)."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        return None, 0.0, f"not JSON ({exc})"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None, 0.0, "not a route-agent snapshot"
    if doc.get("version") != VERSION:
        return None, 0.0, f"version {doc.get('version')!r}, this agent reads version {VERSION}"
    if doc.get("node") != node:
        return None, 0.0, f"written for node {doc.get('node')!r}, this is {node!r}"
    written = doc.get("written")
    if not isinstance(written, (int, float)) or not isinstance(doc.get("state"), dict):
        return None, 0.0, "incomplete"
    age = now - written
    if age > max_age:
        return None, age, f"{age:.0f}s old, older than {max_age:.0f}s"
    if age < -300:
        return None, age, f"written {-age:.0f}s in the future (the clock went back?)"
    return doc["state"], max(age, 0.0), ""
