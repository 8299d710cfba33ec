"""`AgentView`: the daemon's implementation of the API's `ReadView` (read-only, plain data).

DOC: everything the HTTP API, the metrics collector and the node status read of a running agent
goes through here, so they never reach into the routing state. It reads the state owned by the
core task between two of its steps (the API runs on the same event loop). Installed prefixes per
peer need a walk over the RIB, so they are cached for INSTALLED_CACHE_SECONDS while the sizes of
the RIB and the FIB stay the same (a table still arriving is counted again at each read).
`readiness()` is the detail of /readyz?verbose.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping

from ..api import views
from ..api.readview import BfdCounts, BgpCounts, FibCounts, K8sCounts, ReflectorCounts
from ..core.model import V6_FLAG, Origin, Prefix, prefix_family
from . import explain as explain_mod

INSTALLED_CACHE_SECONDS = 10.0


class AgentView:
    """Reads `routing` (state), `writer` (readiness), `problems` (config errors) and `kube`."""

    def __init__(self, routing, writer, problems, kube=None) -> None:
        self.routing = routing
        self.writer = writer
        self._problems = problems  # () -> str: the last configuration error text
        self.kube = kube  # KubeSync in cluster mode
        self._installed: tuple[float, tuple, Mapping] = (-INSTALLED_CACHE_SECONDS, (), {})

    def ready(self) -> bool:
        return self.writer.ready

    def rib_prefixes(self) -> list[Prefix]:
        return list(self.routing.rib.prefixes())

    def rib_rows(self, prefixes: Iterable[Prefix]) -> list[dict]:
        rib, fib = self.routing.rib, self.routing.fib
        return [views.rib_row(p, rib.decide(p), p in fib.actual and p not in fib.pending)
                for p in prefixes if p in rib]

    def fib(self) -> dict:
        out = views.fib(self.routing.settings, self.routing.fib)
        nhg = getattr(self.routing, "nhg", None)
        if nhg is not None:  # with nexthop objects: the object each route points at, and ours
            for row in out["routes"]:
                nhid = nhg.route_nhid(Prefix.parse(row["prefix"]))
                if nhid:
                    row["route"] = f"nhid {nhid} {row['route']}"
                    row["nhid"] = nhid
            out["nexthops"] = [nhg.describe(i) for i in sorted(nhg.objects)]
        return out

    def peers(self) -> list[dict]:
        bgp = self.routing.bgp
        if bgp is None:
            return []
        installed = self.installed_by_peer()
        rows = bgp.peer_views(lambda addr: {4: installed.get((addr, 4), 0), 6: installed.get((addr, 6), 0)})
        bfd = self.routing.bfd
        for row in rows:
            row["bfd"] = bfd.view(row["address"]) if bfd is not None else None
        return rows

    def adverts(self, peer: str | None) -> list[dict]:
        bgp = self.routing.bgp
        return bgp.advert_views(peer) if bgp is not None else []

    def explain(self, prefix: Prefix, exact: bool = True) -> dict:
        return explain_mod.explain(self.routing, prefix, exact)

    def config_problems(self) -> list[str]:
        return self._problems().splitlines()

    def rib_counts(self) -> Mapping[Origin, int]:
        return dict(self.routing.rib.counts)

    def fib_counts(self) -> FibCounts:
        f = self.routing.fib
        v6 = sum(1 for p in f.actual if p & V6_FLAG)
        return FibCounts(len(f.actual) - v6, v6, len(f.pending), len(f.failed), len(f.stale))

    def installed_by_peer(self) -> Mapping[tuple[str, int], int]:
        """Installed prefixes per (peer address, family), from the RIB winners (cached)."""
        at, key, counts = self._installed
        rib, fib = self.routing.rib, self.routing.fib
        now_key = (len(rib), len(fib.actual), len(fib.pending))  # a table still filling: recount
        if time.monotonic() - at < INSTALLED_CACHE_SECONDS and key == now_key:
            return counts
        counts = Counter()
        for prefix in rib.prefixes():
            if prefix not in fib.actual or prefix in fib.pending:
                continue
            if not any(c.is_bgp for c in rib.candidates(prefix)):
                continue
            for w in rib.selection(prefix).winners:
                if w.is_bgp:
                    counts[(w.origin.name, prefix_family(prefix))] += 1
        self._installed = (time.monotonic(), now_key, counts)
        return counts

    def bgp_counts(self) -> BgpCounts | None:
        bgp = self.routing.bgp
        if bgp is None:
            return None
        stage, export = bgp.stage, bgp.export
        held, advertised = {}, {}
        for addr in bgp.peers:
            h = stage.held(addr)
            desired = export.desired.get(addr, {})
            v6 = sum(1 for p in desired if p & V6_FLAG)
            for v in (4, 6):
                held[(addr, v)] = h[v][0]
            advertised[(addr, 4)], advertised[(addr, 6)] = len(desired) - v6, v6
        return BgpCounts(
            peers=tuple(bgp.peers),
            sessions={addr: (s.state.value == "up", len(s.stale)) for addr, s in bgp.source.sessions.items()},
            received=dict(stage.received), accepted=dict(stage.accepted),
            rejected={(a, v, r.value): n for (a, v, r), n in stage.rejected.items()},
            held=held, installed=self.installed_by_peer(), advertised=advertised,
            announces={a: export.announces[a] for a in bgp.peers},
            withdraws={a: export.withdraws[a] for a in bgp.peers},
            updates=bgp.updates, speaker_restarts=bgp.speaker.restarts,
            update_errors=dict(bgp.update_errors.counts),
            decoded_by=dict(bgp.speaker.channel.decoded_by), decode_errors=bgp.speaker.decode_errors,
            bfd=self._bfd_counts())

    def _bfd_counts(self) -> BfdCounts | None:
        bfd = self.routing.bfd
        if bfd is None or not bfd.specs:
            return None
        return BfdCounts(states={p: (bfd.client.views.get(p) or {}).get("state", "down") for p in bfd.specs},
                         packets=dict(bfd.client.counts), failures=dict(bfd.failures),
                         late_max_ms=bfd.client.late_max_ms,
                         late_p99_ms=bfd.client.late_p99_ms, child_restarts=bfd.client.restarts)

    def k8s_counts(self) -> K8sCounts | None:
        kube = self.kube.kube if self.kube is not None else None
        if kube is None:
            return None
        now = time.monotonic()
        return K8sCounts(
            reflectors=tuple(ReflectorCounts(
                r.name, bool(r.synced), r.relists, r.restarts, r.events, r.stalls, r.connected,
                r.last_error or "", round(now - r.last_contact, 1), r.stall_bound)
                for r in kube.reflectors),
            status_writes=kube.status_writes, write_errors=kube.write_errors,
            events_dropped=kube.events_dropped,
            rejected_objects=len(self.kube.cluster.problems),
            **self.kube.config_state())

    def readiness(self) -> list[tuple[str, bool, str]]:
        """(check, ok, detail) for /readyz?verbose: the initial re-sync (what readiness means), and
        in cluster mode the API server and the configuration's source (reported, never failing)."""
        gate = self.routing.gate
        if self.writer.ready:
            sync = (True, f"initial re-sync done (gate opened by {gate.opened_by})")
        elif gate.open:
            sync = (False, "gate open, first kernel write in flight")
        else:
            sync = (False, "waiting for " + ", ".join(sorted(gate.waiting)))
        checks = [("fib-sync", *sync)]
        k8s = self.k8s_counts()
        if k8s is not None:
            checks += views.k8s_checks(k8s)
        return checks
