"""JSON views of the RIB and the FIB, shaped to line up with `ip route show proto route-agent`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..main import Agent


def rib(agent: "Agent") -> list[dict]:
    out = []
    for prefix in sorted(agent.rib.prefixes()):
        d = agent.rib.decide(prefix)
        out.append({
            "prefix": str(prefix),
            "reason": d.reason.value,
            "installed": prefix in agent.fib.actual and prefix not in agent.fib.pending,
            "note": d.note,
            "candidates": [
                {"origin": str(s.candidate.origin), "distance": s.candidate.distance,
                 "route": s.candidate.describe(), "status": s.status, "detail": s.detail}
                for s in d.candidates
            ],
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
