"""The Grafana dashboard (deploy/grafana/route-agent-dashboard.json) asks only for metrics the agent
exports: every metric name in every query is in the agent's real exposition (a `Metrics` registry
bound to a view with one BGP peer and Kubernetes counts, as a running agent in cluster mode has)."""

from __future__ import annotations

import json
import os
import re

from prometheus_client import generate_latest

from agent.api.metrics import Metrics
from agent.api.readview import BgpCounts, FibCounts, K8sCounts, ReflectorCounts

DASHBOARD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "deploy", "grafana", "route-agent-dashboard.json")


class View:
    def ready(self):
        return True

    def rib_counts(self):
        return {}

    def fib_counts(self):
        return FibCounts(1, 1, 0, 0, 0)

    def bgp_counts(self):
        p = "10.0.0.1"
        return BgpCounts((p,), {p: (True, 0)}, {(p, 4): 1}, {(p, 4): 1}, {(p, 4, "policy_reject"): 1},
                         {(p, 4): 1}, {(p, 4): 1}, {(p, 4): 1}, {p: 1}, {p: 0}, 1, 0)

    def k8s_counts(self):
        return K8sCounts((ReflectorCounts("nodes", True, 0, 0, 1),), 0, 0, 0)


def exported() -> set[str]:
    m = Metrics()
    m.bind(View())
    m.netlink_ops.labels("add").inc()  # labelled families show samples once a label is used
    m.netlink_errors.labels("add", "EEXIST").inc()
    m.reconcile_seconds.observe(0.01)
    m.resyncs.labels("periodic").inc()
    m.task_restarts.labels("core").inc()
    m.queue_overflows.labels("kernel", "coalesced").inc()
    text = generate_latest(m.registry).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def queries() -> list[str]:
    dash = json.load(open(DASHBOARD))
    out = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    out += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    return out


def test_every_query_names_a_metric_the_agent_exports():
    names = exported()
    used = {n for q in queries() for n in re.findall(r"\broute_agent_[a-z0-9_]+", q)}
    assert used, "the dashboard queries nothing"
    assert sorted(used - names) == []


def test_the_dashboard_covers_what_an_operator_watches():
    text = " ".join(queries())
    for metric in ("bgp_session_up", "bgp_prefixes_accepted_current", "bgp_prefixes_installed",
                   "bgp_prefixes_rejected_total", "fib_routes", "netlink_operations_total",
                   "netlink_errors_total", "reconcile_duration_seconds_bucket", "kernel_resyncs_total",
                   "config_last_reload_successful"):
        assert f"route_agent_{metric}" in text, metric
