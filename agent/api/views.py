"""JSON shapes of the RIB and the FIB, lined up with `ip route show proto route-agent`.

DOC: pure formatting of core and FIB values (a RIB `Decision`, a `FibState`, a candidate) into the
dicts the HTTP API returns and the CLI prints; no state is read here beyond the arguments. The
daemon's read view calls these, so the API, `explain` and the node status share one shape.
"""

from __future__ import annotations

from ..core.model import address_order, as_prefix


def rib_row(prefix, decision, installed: bool) -> dict:
    """One row of `show rib`: the decision for `prefix` and whether its winner is in the kernel."""
    return {
        "prefix": str(as_prefix(prefix)),
        "reason": decision.reason.value,
        "installed": installed,
        "note": decision.note,
        "candidates": decided_candidates(decision),
    }


def decided_candidates(decision) -> list[dict]:
    """The candidates of a RIB decision, each with its status (winner, loser, unusable ...)."""
    return [candidate(s.candidate) | {"status": s.status, "detail": s.detail} for s in decision.candidates]


def _by_address(item) -> int:
    return address_order(item[0])


def fib(settings, f) -> dict:
    """The FIB state `f` (a `FibState`) in table/protocol `settings`."""
    return {
        "table": settings.table,
        "protocol": settings.protocol,
        "gate_open": f.gate_open,
        "routes": [{"prefix": str(as_prefix(p)), "route": str(r), "stale": p in f.stale}
                   for p, r in sorted(f.actual.items(), key=_by_address)],
        "pending": [{"prefix": str(as_prefix(p)), "route": str(r) if r else "delete"}
                    for p, r in sorted(f.pending.items(), key=_by_address)],
        "failed": [{"prefix": str(as_prefix(p)), "op": e.op.kind.value, "error": e.message}
                   for p, e in sorted(f.failed.items(), key=_by_address)],
    }


def origin_text(c) -> str:
    """A candidate's origin in words: ``ibgp/127.0.0.1``, with ``path N`` for an ADD-PATH path."""
    return str(c.origin) if c.path_id is None else f"{c.origin} path {c.path_id}"


def candidate(c) -> dict:
    """One candidate for the JSON views: origin, distance, route, and its BGP attributes; an
    ADD-PATH path (RFC 7911) also its ``pathId``."""
    out = {"origin": str(c.origin), "kind": c.origin.kind.value, "distance": c.distance,
           "route": c.describe()}
    if c.path_id is not None:
        out["pathId"] = c.path_id
    if c.is_bgp:
        b = c.bgp
        out["bgp"] = {"peer": b.peer_address, "peerAS": b.peer_as, "localPref": b.local_pref,
                      "asPath": list(b.as_path), "origin": b.origin.name.lower(), "med": b.med,
                      "communities": list(b.communities), "largeCommunities": list(b.large_communities)}
    return out


def k8s_checks(k) -> list[tuple[str, bool, str]]:
    """The cluster-mode lines of /readyz?verbose from `K8sCounts`: the API server connection (any
    watch failing or stalled names itself) and where the running configuration comes from."""
    if k.connected:
        silent = max((r.silent_seconds for r in k.reflectors), default=0.0)
        bound = max((r.stall_seconds for r in k.reflectors), default=0.0)
        api = (True, f"{len(k.reflectors)} watches answering (longest silence {silent:.0f}s, "
               f"a watch counts as stalled after {bound:.0f}s)")
    else:
        bad = [r for r in k.reflectors if not r.connected]
        api = (False, f"{len(bad)} of {len(k.reflectors)} watches not answering: "
               + "; ".join(f"{r.name}: {r.last_error or 'no answer yet'}" for r in bad[:3]))
    checks = [("kubernetes-api", *api)]
    if k.node_missing:
        checks.append(("kubernetes-node", False, "this node's Node object does not exist (NODE_NAME?)"))
    if k.config_source == "snapshot":
        age = "" if k.snapshot_age is None else f" written {k.snapshot_age:.0f}s before the start"
        checks.append(("kubernetes-config", False, f"running from the last-known-good snapshot{age}; "
                       "the live view takes over once every resource is listed"))
    else:
        checks.append(("kubernetes-config", True, "live"))
    return checks


def readiness_text(ready: bool, checks) -> str:
    """/readyz?verbose in kube-apiserver's style: ``[+]check ok`` / ``[-]check ...`` lines, then
    the verdict (only the first check, the initial re-sync, decides readiness)."""
    lines = [f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'not ok'}: {detail}" for name, ok, detail in checks]
    return "\n".join(lines + [f"readyz check {'passed' if ready else 'failed'}"]) + "\n"
