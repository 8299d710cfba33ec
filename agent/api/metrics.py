"""Prometheus metrics (prefix ``route_agent_``), one registry per agent instance.

DOC: counters and histograms are updated where things happen; sizes (RIB routes by origin, FIB
routes, pending, failed) are read from the live state at scrape time by a collector, so they can
never drift from the truth. The HTTP server runs on the agent's event loop, so a scrape reads the
state between two event-handling steps, never in the middle of one.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .readview import BfdCounts, BgpCounts, K8sCounts, ReadView


class _StateCollector:
    def __init__(self, view: ReadView) -> None:
        self.view = view

    def collect(self):
        v = self.view
        rib = GaugeMetricFamily("route_agent_rib_routes", "Candidates in the RIB by origin.",
                                labels=["kind", "origin"])
        for origin, n in sorted(v.rib_counts().items(), key=lambda kv: str(kv[0])):
            rib.add_metric([origin.kind.value, origin.name], n)
        yield rib
        counts = v.fib_counts()
        fib = GaugeMetricFamily("route_agent_fib_routes", "Routes of ours in the kernel by family.",
                                labels=["family"])
        fib.add_metric(["ipv4"], counts.ipv4)
        fib.add_metric(["ipv6"], counts.ipv6)
        yield fib
        yield GaugeMetricFamily("route_agent_fib_pending_routes",
                                "Prefixes whose kernel state still differs from the wanted state.",
                                value=counts.pending)
        yield GaugeMetricFamily("route_agent_fib_failed_routes",
                                "Prefixes whose last netlink write failed (retried).",
                                value=counts.failed)
        yield GaugeMetricFamily("route_agent_fib_stale_routes",
                                "Routes adopted at start whose wanted state is not known yet.",
                                value=counts.stale)
        yield GaugeMetricFamily("route_agent_ready", "1 once the initial re-sync is done.",
                                value=1 if v.ready() else 0)
        bgp = v.bgp_counts()
        if bgp is not None:
            yield from _bgp_metrics(bgp)
            if bgp.bfd is not None:
                yield from _bfd_metrics(bgp.bfd)
        k8s = v.k8s_counts()
        if k8s is not None:
            yield from _k8s_metrics(k8s)


def _k8s_metrics(k: K8sCounts):
    synced = GaugeMetricFamily("route_agent_k8s_synced", "1 once the resource's first list is done.",
                               labels=["resource"])
    counters = {name: CounterMetricFamily(f"route_agent_k8s_{name}", text, labels=["resource"])
                for name, text in (("relists", "Relists after 410 Gone or a stalled watch."),
                                   ("restarts", "Watch reconnections after an error."),
                                   ("events", "Watch events received."),
                                   ("watch_stalls", "Watches silent (no event, no bookmark) beyond "
                                    "the stall bound, abandoned and re-listed."))}
    answering = GaugeMetricFamily("route_agent_k8s_watch_answering", "1 while the resource's last "
                                  "list or watch answered and its watch is not stalled.", labels=["resource"])
    silent = GaugeMetricFamily("route_agent_k8s_watch_silence_seconds", "Seconds since the API server "
                               "last sent anything on the resource's list or watch.", labels=["resource"])
    bound = GaugeMetricFamily("route_agent_k8s_watch_stall_bound_seconds", "Silence after which the "
                              "resource's watch counts as stalled (learned from the bookmarks).",
                              labels=["resource"])
    for r in k.reflectors:
        synced.add_metric([r.name], 1 if r.synced else 0)
        answering.add_metric([r.name], 1 if r.connected else 0)
        silent.add_metric([r.name], r.silent_seconds)
        bound.add_metric([r.name], r.stall_seconds)
        for name, fam in counters.items():
            fam.add_metric([r.name], r.stalls if name == "watch_stalls" else getattr(r, name))
    yield synced
    yield answering
    yield silent
    yield bound
    yield from counters.values()
    yield GaugeMetricFamily("route_agent_k8s_api_connected", "1 while every watch answers (the API "
                            "server is reachable and not hung).", value=1 if k.connected else 0)
    yield GaugeMetricFamily("route_agent_k8s_config_from_snapshot", "1 while the configuration runs "
                            "from the last-known-good snapshot (the API server not listed yet).",
                            value=1 if k.config_source == "snapshot" else 0)
    yield CounterMetricFamily("route_agent_k8s_status_writes", "Status updates of the node's "
                              "RouteAgentNodeState.", value=k.status_writes)
    yield CounterMetricFamily("route_agent_k8s_write_errors", "Failed status or Event writes.",
                              value=k.write_errors)
    yield CounterMetricFamily("route_agent_k8s_events_dropped", "Kubernetes Events not written "
                              "because 100 were already waiting for the API server.", value=k.events_dropped)
    yield GaugeMetricFamily("route_agent_config_rejected_objects",
                            "Configuration objects rejected (their last good version runs).",
                            value=k.rejected_objects)


BFD_STATES = ("admindown", "down", "init", "up")


def _bfd_metrics(b: BfdCounts):
    state = GaugeMetricFamily("route_agent_bfd_session_state", "1 for the BFD session's current state.",
                              labels=["peer", "state"])
    up = GaugeMetricFamily("route_agent_bfd_session_up", "1 while the BFD session is Up.", labels=["peer"])
    for peer, s in sorted(b.states.items()):
        up.add_metric([peer], 1 if s == "up" else 0)
        for name in BFD_STATES:
            state.add_metric([peer, name], 1 if s == name else 0)
    yield state
    yield up
    trans = CounterMetricFamily("route_agent_bfd_transitions", "BFD state changes, by new state.",
                                labels=["peer", "state"])
    rx = CounterMetricFamily("route_agent_bfd_packets_received", "Valid BFD control packets received.", labels=["peer"])
    tx = CounterMetricFamily("route_agent_bfd_packets_sent", "BFD control packets sent.", labels=["peer"])
    txe = CounterMetricFamily("route_agent_bfd_send_errors", "BFD control packets the kernel refused to send.",
                              labels=["peer"])
    drop = CounterMetricFamily("route_agent_bfd_packets_dropped", "Received BFD packets discarded (RFC 5880 "
                               "6.8.6, TTL not 255, unknown session); peer empty when none matched.",
                               labels=["peer", "reason"])
    by = {"rx": rx, "tx": tx, "tx_error": txe}
    for (peer, what), n in sorted(b.packets.items()):
        kind, _, arg = what.partition(":")
        if kind in by:
            by[kind].add_metric([peer], n)
        elif kind == "drop":
            drop.add_metric([peer, arg], n)
        elif kind == "transition":
            trans.add_metric([peer, arg], n)
    yield from (trans, rx, tx, txe, drop)
    fail = CounterMetricFamily("route_agent_bfd_failures", "BFD Up -> Down: the peer's routes withdrawn and "
                               "its BGP session torn down.", labels=["peer"])
    for peer in sorted(b.states):
        fail.add_metric([peer], b.failures.get(peer, 0))
    yield fail
    yield GaugeMetricFamily("route_agent_bfd_transmit_late_max_seconds", "Worst lateness of a periodic BFD "
                            "transmission since the BFD process started.", value=b.late_max_ms / 1000)
    if b.late_p99_ms is not None:
        yield GaugeMetricFamily("route_agent_bfd_transmit_late_p99_seconds", "99th percentile of the "
                                "lateness of periodic BFD transmissions (1 ms resolution).", value=b.late_p99_ms / 1000)
    yield CounterMetricFamily("route_agent_bfd_process_restarts", "Times the BFD child process was restarted.",
                              value=b.child_restarts)


def _family(v: int) -> str:
    return "ipv6" if v == 6 else "ipv4"


def _bgp_metrics(b: BgpCounts):
    up = GaugeMetricFamily("route_agent_bgp_session_up", "1 while the BGP session is established.",
                           labels=["peer"])
    stale = GaugeMetricFamily("route_agent_bgp_stale_routes",
                              "Routes kept from a peer over its (graceful) restart.", labels=["peer"])
    for addr, (established, n_stale) in b.sessions.items():
        up.add_metric([addr], 1 if established else 0)
        stale.add_metric([addr], n_stale)
    yield up
    yield stale
    recv = CounterMetricFamily("route_agent_bgp_prefixes_received", "Prefixes announced by the peer.",
                               labels=["peer", "family"])
    for (addr, v), n in sorted(b.received.items()):
        recv.add_metric([addr, _family(v)], n)
    yield recv
    acc = CounterMetricFamily("route_agent_bgp_prefixes_accepted", "Prefixes accepted by import policy.",
                              labels=["peer", "family"])
    for (addr, v), n in sorted(b.accepted.items()):
        acc.add_metric([addr, _family(v)], n)
    yield acc
    rej = CounterMetricFamily("route_agent_bgp_prefixes_rejected",
                              "Prefixes rejected (guard, policy, no policy, max-prefix).",
                              labels=["peer", "family", "reason"])
    for (addr, v, reason), n in sorted(b.rejected.items()):
        rej.add_metric([addr, _family(v), reason], n)
    yield rej
    held = GaugeMetricFamily("route_agent_bgp_prefixes_accepted_current",
                             "Prefixes of the peer currently accepted into the RIB.", labels=["peer", "family"])
    installed = GaugeMetricFamily("route_agent_bgp_prefixes_installed",
                                  "Prefixes of the peer that won and are in the kernel (refreshed every 10 s).",
                                  labels=["peer", "family"])
    for addr in b.peers:
        for v in (4, 6):
            held.add_metric([addr, _family(v)], b.held.get((addr, v), 0))
            installed.add_metric([addr, _family(v)], b.installed.get((addr, v), 0))
    yield held
    yield installed
    yield CounterMetricFamily("route_agent_bgp_updates", "UPDATE messages received.", value=b.updates)
    errors = CounterMetricFamily("route_agent_bgp_update_errors", "Malformed UPDATEs received (RFC 7606), by "
                                 "action: treat-as-withdraw, attribute-discard, session-reset.", labels=["peer", "action"])
    for (addr, action), n in sorted(b.update_errors.items()):
        errors.add_metric([addr, action], n)
    yield errors
    adv = GaugeMetricFamily("route_agent_bgp_prefixes_advertised",
                            "Prefixes we advertise to the peer (desired).", labels=["peer", "family"])
    ann = CounterMetricFamily("route_agent_bgp_announces", "Announce commands sent to ExaBGP.", labels=["peer"])
    wd = CounterMetricFamily("route_agent_bgp_withdraws", "Withdraw commands sent to ExaBGP.", labels=["peer"])
    for addr in b.peers:
        adv.add_metric([addr, "ipv4"], b.advertised.get((addr, 4), 0))
        adv.add_metric([addr, "ipv6"], b.advertised.get((addr, 6), 0))
        ann.add_metric([addr], b.announces.get(addr, 0))
        wd.add_metric([addr], b.withdraws.get(addr, 0))
    yield adv
    yield ann
    yield wd
    yield CounterMetricFamily("route_agent_exabgp_restarts", "Times the ExaBGP child was restarted.",
                              value=b.speaker_restarts)
    decoded = CounterMetricFamily("route_agent_bgp_update_events_decoded", "Events of received UPDATEs (raw "
                                  "mode), by where they were decoded: relay (the API helper's process, the normal "
                                  "case) or agent (lines the relay passed on undecoded).", labels=["decoded_by"])
    for where in ("relay", "agent"):
        decoded.add_metric([where], b.decoded_by.get(where, 0))
    yield decoded
    yield CounterMetricFamily("route_agent_exabgp_lines_not_understood", "Lines from ExaBGP the agent could "
                              "not decode (logged).", value=b.decode_errors)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.netlink_ops = Counter("route_agent_netlink_operations", "Netlink route operations sent.",
                                   ["op"], registry=r)
        self.netlink_errors = Counter("route_agent_netlink_errors", "Netlink route operations that failed.",
                                      ["op", "errno"], registry=r)
        self.reconcile_seconds = Histogram(
            "route_agent_reconcile_duration_seconds", "Time to plan and write one FIB batch.",
            registry=r, buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10))
        self.reload_failures = Counter("route_agent_config_reload_failures",
                                       "Configuration reloads rejected as invalid.", registry=r)
        self.reload_ok = Gauge("route_agent_config_last_reload_successful",
                               "1 if the last configuration (re)load was valid.", registry=r)
        self.stale_swept = Counter("route_agent_stale_routes_swept",
                                   "Adopted routes deleted after the restart re-sync.", registry=r)
        self.resyncs = Counter("route_agent_kernel_resyncs", "Full kernel table scans.", ["reason"],
                               registry=r)
        self.handler_errors = Counter("route_agent_event_handler_errors",
                                      "Events whose handling failed (logged; a full resync follows).",
                                      registry=r)
        self.repairs = Counter("route_agent_fib_repairs",
                               "Changes to our routes made by someone else, then repaired.", registry=r)
        self.reload_errors = Counter("route_agent_config_reload_errors",
                                     "Reloads that failed with an unexpected error (logged; the last "
                                     "good configuration keeps running).", registry=r)
        self.task_restarts = Counter("route_agent_task_restarts",
                                     "Long-running tasks that ended unexpectedly and were restarted.",
                                     ["task"], registry=r)
        self.queue_overflows = Counter("route_agent_event_queue_overflows",
                                       "Events met a full core queue: kernel deltas coalesced into a "
                                       "full resync (coalesced), others queued beyond the bound (kept).",
                                       ["kind", "action"], registry=r)
        self.api_refused = Counter("route_agent_api_refused_requests",
                                   "HTTP requests refused before routing (414, 431).", ["code"], registry=r)

    def bind(self, view: ReadView) -> None:
        """Read the state's sizes from `view` at every scrape."""
        self.registry.register(_StateCollector(view))
