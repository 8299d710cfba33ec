"""JSON views of the RIB and the FIB, shaped to line up with `ip route show proto route-agent`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..daemon.agent import Agent


def rib(agent: "Agent") -> list[dict]:
    out = []
    for prefix in sorted(agent.rib.prefixes()):
        d = agent.rib.decide(prefix)
        out.append({
            "prefix": str(prefix),
            "reason": d.reason.value,
            "installed": prefix in agent.fib.actual and prefix not in agent.fib.pending,
            "note": d.note,
            "candidates": [candidate(s.candidate) | {"status": s.status, "detail": s.detail}
                           for s in d.candidates],
        })
    return out


def fib(agent: "Agent") -> dict:
    f = agent.fib
    return {
        "table": agent.settings.table,
        "protocol": agent.settings.protocol,
        "gate_open": f.gate_open,
        "routes": [{"prefix": str(p), "route": str(r), "stale": p in f.stale}
                   for p, r in sorted(f.actual.items())],
        "pending": [{"prefix": str(p), "route": str(r) if r else "delete"}
                    for p, r in sorted(f.pending.items())],
        "failed": [{"prefix": str(p), "op": e.op.kind.value, "error": e.message}
                   for p, e in sorted(f.failed.items())],
    }


def peers(agent: "Agent") -> list[dict]:
    if agent.bgp is None:
        return []
    installed = agent.installed_by_peer()
    return agent.bgp.peer_views(lambda addr: {4: installed.get((addr, 4), 0), 6: installed.get((addr, 6), 0)})


def candidate(c) -> dict:
    """One candidate for the JSON views: origin, distance, route, and its BGP attributes."""
    out = {"origin": str(c.origin), "kind": c.origin.kind.value, "distance": c.distance,
           "route": c.describe()}
    if c.bgp is not None:
        b = c.bgp
        out["bgp"] = {"peer": b.peer_address, "peerAS": b.peer_as, "localPref": b.local_pref,
                      "asPath": list(b.as_path), "origin": b.origin.name.lower(), "med": b.med,
                      "communities": list(b.communities), "largeCommunities": list(b.large_communities)}
    return out
