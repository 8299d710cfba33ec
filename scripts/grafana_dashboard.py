"""Generate deploy/grafana/route-agent-dashboard.json: `python scripts/grafana_dashboard.py` from the repository root."""
import json

panels = []
def panel(title, exprs, unit="short", kind="timeseries", legend="{{instance}}", w=12, h=8, desc=""):
    i = len(panels)
    panels.append({
        "id": i + 1, "type": kind, "title": title, "description": desc,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": (i % 2) * 12 if w == 12 else 0, "y": (i // 2) * h, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right"}},
        "targets": [{"refId": chr(65 + j), "expr": e, "legendFormat": l}
                    for j, (e, l) in enumerate(exprs)],
    })

sel = 'instance=~"$instance"'
panel("BGP sessions established", [(f"route_agent_bgp_session_up{{{sel}}}", "{{instance}} {{peer}}")],
      desc="1 while the session with the peer is established.")
panel("Prefixes accepted now, per peer and family", [(f"route_agent_bgp_prefixes_accepted_current{{{sel}}}", "{{instance}} {{peer}} {{family}}")])
panel("Prefixes installed (best, in the kernel), per peer", [(f"route_agent_bgp_prefixes_installed{{{sel}}}", "{{instance}} {{peer}} {{family}}")])
panel("Prefixes rejected by reason (per second)",
      [(f"sum by (reason) (rate(route_agent_bgp_prefixes_rejected_total{{{sel}}}[5m]))", "{{reason}}")],
      unit="ops", desc="guard (own prefix, martian, default route...), as_loop, policy, no_policy (RFC 8212), max_prefix, bad_next_hop.")
panel("Prefixes advertised, per peer and family", [(f"route_agent_bgp_prefixes_advertised{{{sel}}}", "{{instance}} {{peer}} {{family}}")])
panel("Routes kept stale over a peer's restart", [(f"route_agent_bgp_stale_routes{{{sel}}}", "{{instance}} {{peer}}")])
panel("Routes of ours in the kernel", [(f"route_agent_fib_routes{{{sel}}}", "{{instance}} {{family}}"),
                                       (f"route_agent_fib_pending_routes{{{sel}}}", "{{instance}} pending"),
                                       (f"route_agent_fib_failed_routes{{{sel}}}", "{{instance}} failed")])
panel("Kernel writes and errors (per second)",
      [(f"sum by (op) (rate(route_agent_netlink_operations_total{{{sel}}}[5m]))", "{{op}}"),
       (f"sum by (op, errno) (rate(route_agent_netlink_errors_total{{{sel}}}[5m]))", "error {{op}} {{errno}}")], unit="ops")
panel("Reconcile latency (kernel batch)",
      [(f"histogram_quantile(0.5, sum by (le) (rate(route_agent_reconcile_duration_seconds_bucket{{{sel}}}[5m])))", "p50"),
       (f"histogram_quantile(0.99, sum by (le) (rate(route_agent_reconcile_duration_seconds_bucket{{{sel}}}[5m])))", "p99")], unit="s")
panel("Resyncs and repairs (per hour)",
      [(f"increase(route_agent_kernel_resyncs_total{{{sel}}}[1h])", "{{instance}} resyncs"),
       (f"increase(route_agent_fib_repairs_total{{{sel}}}[1h])", "{{instance}} repairs of our routes changed by others"),
       (f"increase(route_agent_event_queue_overflows_total{{{sel}}}[1h])", "{{instance}} queue overflow {{kind}} {{action}}")])
panel("Configuration", [(f"route_agent_config_last_reload_successful{{{sel}}}", "{{instance}} last reload ok"),
                        (f"increase(route_agent_config_reload_failures_total{{{sel}}}[1h])", "{{instance}} rejected reloads / h"),
                        (f"route_agent_config_rejected_objects{{{sel}}}", "{{instance}} rejected objects (cluster)")])
panel("Health", [(f"route_agent_ready{{{sel}}}", "{{instance}} ready"),
                 (f"increase(route_agent_exabgp_restarts_total{{{sel}}}[1h])", "{{instance}} ExaBGP restarts / h"),
                 (f"increase(route_agent_task_restarts_total{{{sel}}}[1h])", "{{instance}} task restarts {{task}} / h"),
                 (f"increase(route_agent_event_handler_errors_total{{{sel}}}[1h])", "{{instance}} handler errors / h")])

dash = {
    "title": "route-agent", "uid": "route-agent", "schemaVersion": 39, "version": 1, "editable": True,
    "tags": ["bgp", "route-agent"], "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
    "description": "route-agent: BGP sessions, routes per peer and family, rejections, kernel writes, "
                   "reconcile latency, resyncs, configuration. Generated from the agent's metrics "
                   "(tests/test_dashboard.py checks every query names an exported metric).",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
        {"name": "instance", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": "label_values(route_agent_ready, instance)", "refresh": 2, "includeAll": True,
         "multi": True, "current": {"text": "All", "value": "$__all"}},
    ]},
    "panels": panels,
}
open("deploy/grafana/route-agent-dashboard.json", "w").write(json.dumps(dash, indent=2) + "\n")
