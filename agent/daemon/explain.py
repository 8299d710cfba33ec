"""`route-agent explain PREFIX|ADDRESS`: why a prefix is (not) installed, from the routing state.

DOC: one pure read of the routing state: the RIB's decision (every candidate with its status, the
deciding step), the route wanted in the kernel, what the kernel has and why it differs (pending
behind the sync gate, adopted and stale, a failed netlink write, no usable candidate), and the BGP
import and export verdicts for the prefix. An ADD-PATH peer's paths (RFC 7911) are candidates and
verdicts of their own, each shown with its path id (``pathId``). With nexthop objects, the kernel route names the
nexthop object it points at (`nhid N`) and `nexthop_group` describes it (`ip nexthop` style).

A prefix (``10.20.1.0/24``, also ``10.20.1.5/32``) is explained exactly. An address without a
length is looked up as ``ip route get`` would (`longest_match`): the longest prefix covering it
whose route is in the kernel now (a route of ours in our table, or a foreign route the agent
knows of, e.g. a connected subnet or a DHCP default), and that prefix is explained. Longer prefixes
covering the address that are known but not forwarding (received and rejected, unresolved, waiting
for the sync gate) are listed under ``more_specific`` with the reason: they are usually the
question behind "why does this address go there".
"""

from __future__ import annotations

from ..api import views
from ..core.model import Prefix, as_prefix


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


def explain(routing, prefix: Prefix, exact: bool = True) -> dict:
    """The explanation of `prefix`; with ``exact=False`` `prefix` is a host address (/32, /128)
    and the longest prefix covering it that forwards is explained (see the module doc)."""
    if exact:
        return _explain(routing, prefix)
    address = prefix.network.network_address
    match, longer = longest_match(routing, prefix)
    out = _explain(routing, match) if match is not None else {
        "prefix": None, "candidates": [], "reason": "-", "desired": None, "kernel": None,
        "fib_state": f"no route known to route-agent covers {address}", "note": "",
        "bgp": [], "export": []}
    return out | {"query": str(address), "more_specific": longer}


def _explain(routing, prefix: Prefix) -> dict:
    prefix = as_prefix(prefix)
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


def longest_match(routing, host: Prefix) -> tuple[Prefix | None, list[dict]]:
    """The longest prefix covering the address `host` whose route is in the kernel (ours in
    `fib.actual`, or a foreign candidate: foreign routes are read from the kernel), and the longer
    known prefixes covering it that are not, longest first, each with why. One probe per prefix
    length (at most 33 or 129), so the cost does not depend on the size of the RIB."""
    rib, fib, bgp = routing.rib, routing.fib, routing.bgp
    longer: list[dict] = []
    for length in range(host.length, -1, -1):
        bits = host.bits - length
        p = Prefix.of(host.family, (host.address >> bits) << bits, length)
        cands = rib.candidates(p)
        if p in fib.actual or any(c.origin.kind.foreign for c in cands):
            return p, longer
        if cands:
            d = rib.decide(p)
            states = "; ".join(f"{views.origin_text(c.candidate)} {c.status}" + (f": {c.detail}" if c.detail else "")
                               for c in d.candidates)
            longer.append({"prefix": str(p), "why": f"{fib_state(fib, p, d.note)} ({states})"})
        elif bgp is not None:
            rows = bgp.explain(p)
            if rows:
                longer.append({"prefix": str(p), "why": "; ".join(map(_verdict_text, rows))})
    return None, longer


def _verdict_text(b: dict) -> str:
    by = " ".join(x for x in (b["policy"] or "-", b["statement"]) if x)
    path = f" path {b['pathId']}" if b.get("pathId") is not None else ""
    return f"from peer {b['peer']}{path}: {'accepted' if b['accepted'] else 'rejected'} by {by} ({b['reason']})"
