"""`route-agent explain PREFIX`: why a prefix is (not) installed, from the routing state.

DOC: one pure read of the routing state: the RIB's decision (every candidate with its status, the
deciding step), the route wanted in the kernel, what the kernel has and why it differs (pending
behind the sync gate, adopted and stale, a failed netlink write, no usable candidate), and the BGP
import and export verdicts for the prefix. With nexthop objects, the kernel route names the
nexthop object it points at (`nhid N`) and `nexthop_group` describes it (`ip nexthop` style).
"""

from __future__ import annotations

from ..api import views
from ..core.model import Prefix


def fib_state(fib, prefix: Prefix, note: str | None) -> str:
    """The kernel side of `prefix` in words."""
    installed = fib.actual.get(prefix)
    err = fib.failed.get(prefix)
    if installed is not None and prefix not in fib.pending:
        return "installed"
    if err is not None:
        return f"not installed: netlink {err.op.kind.value} failed: {err.message}"
    if prefix in fib.stale:
        return "adopted at start, waiting for the sync gate"
    if prefix in fib.pending:
        return "pending (waiting for the sync gate)" if not fib.gate_open else "pending"
    return "not installed: " + (note or "no candidate")


def explain(routing, prefix: Prefix) -> dict:
    d = routing.rib.decide(prefix)
    installed = routing.fib.actual.get(prefix)
    bgp = routing.bgp
    nhg = getattr(routing, "nhg", None)
    nhid = nhg.route_nhid(prefix) if nhg is not None and installed else None
    return {
        "prefix": str(prefix),
        "candidates": views.decided_candidates(d),
        "reason": d.reason.value,
        "desired": str(d.desired.with_metric(routing.settings.metric)) if d.desired else None,
        "kernel": (f"nhid {nhid} " if nhid else "") + str(installed) if installed else None,
        "nexthop_group": nhg.describe(nhid) if nhid else None,
        "fib_state": fib_state(routing.fib, prefix, d.note),
        "note": d.note,
        "bgp": bgp.explain(prefix) if bgp is not None else [],
        "export": bgp.explain_export(prefix) if bgp is not None else [],
    }
