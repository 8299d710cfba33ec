"""Read-only views of the BGP runtime, as plain JSON-ready dicts (the API serves them).

DOC: `BgpViews` is the part of `agent.daemon.bgp.BgpRuntime` that only reads: per peer (session,
stale routes, max-prefix state and the current counts per family: prefixes received now, accepted
now, rejected now, installed; a route refresh does not count twice; an ADD-PATH peer's counts are
paths), per advertised prefix (desired attributes
per peer and whether ExaBGP accepted them: `ExportReconciler.announced`), and the explanations of
one prefix's import and export verdicts. It owns no state of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..core.model import address_order


class BgpViews:
    """Mixed into `BgpRuntime`, whose attributes (peers, source, stage, export,
    export_rejected, held_down) it reads."""

    def peer_views(self, installed: Callable[[str], dict[int, int]]) -> list[dict]:
        out = []
        now = time.monotonic()
        for addr, peer in self.peers.items():
            s = self.source.sessions.get(addr)
            held = self.stage.held(addr)
            not_kept = self.stage.not_kept(addr)
            inst = installed(addr)
            fams = {}
            for fam in peer.spec.families:
                v = 6 if fam.value.startswith("ipv6") else 4
                st = self.stage.maxprefix.status(addr, v)
                accepted, rejected = held[v]
                fams[fam.value] = {  # current counts (the cumulative ones are metrics counters)
                    "received": accepted + rejected,
                    "accepted": accepted,
                    "rejected": rejected,
                    "rejectedNotKept": not_kept[v],  # > 0: received and rejected are lower bounds
                    "installed": inst.get(v, 0),
                    "maxPrefix": None if st.limit is None else {
                        "limit": st.limit.limit, "action": st.limit.action.value, "count": st.count,
                        "state": st.state.value, "discarded": st.discarded},
                }
            out.append({
                "name": peer.metadata.name, "address": addr, "peerAS": peer.spec.peer_as,
                "localAS": peer.spec.local_as, "type": "ebgp" if peer.spec.ebgp else "ibgp",
                "state": s.state.value if s else "down",
                "for_seconds": round(now - s.since, 1) if s and s.since else None,
                "reason": s.last_reason if s else "", "stale": len(s.stale) if s else 0,
                "held_down": addr in self.held_down,
                "families": fams,
            })
        return out

    def advert_views(self, peer: str | None = None) -> list[dict]:
        rows: dict = {}
        for addr, adverts in self.export.desired.items():
            if peer is not None and addr != peer and self.peers.get(addr, None) is not None \
                    and self.peers[addr].metadata.name != peer:
                continue
            for prefix, advert in adverts.items():
                row = rows.setdefault(prefix, {"prefix": str(prefix), "peers": {}})
                a = advert.attrs
                row["peers"][addr] = {
                    "nextHop": a.next_hop, "localPref": a.local_pref, "med": a.med,
                    "communities": list(a.communities), "largeCommunities": list(a.large_communities),
                    "prepend": a.prepend, "sources": list(advert.sources), "policy": advert.policy,
                    "announced": self.export.announced(addr, prefix) == a,
                }
        return [rows[p] for p in sorted(rows, key=address_order)]

    def explain_export(self, prefix) -> list[dict]:
        out = []
        for addr in self.peers:
            advert = self.export.desired.get(addr, {}).get(prefix)
            if advert is not None:
                out.append({"peer": addr, "advertised": True, "sources": list(advert.sources),
                            "policy": advert.policy,
                            "announced": self.export.announced(addr, prefix) == advert.attrs})
                continue
            verdict = self.export_rejected.get(addr, {}).get(prefix)
            if verdict is not None:
                out.append({"peer": addr, "advertised": False, "policy": verdict.policy,
                            "statement": verdict.statement, "reason": verdict.reason.value})
        return out

    def explain(self, prefix) -> list[dict]:
        """The import verdict of every peer's route for `prefix`; one per path (with its
        ``pathId``) for an ADD-PATH peer."""
        out = []
        for addr, path_id, verdict in self.stage.explain_paths(prefix):
            row = {"peer": addr, "accepted": verdict.accepted, "policy": verdict.policy,
                   "statement": verdict.statement, "reason": verdict.reason.value,
                   "description": verdict.reason.description}
            if path_id is not None:
                row["pathId"] = path_id
            out.append(row)
        return out
