"""Kernel writes when one of two ECMP next hops of N routes fails: plain routes vs nexthop groups.

Usage: python bench/nexthop_groups.py [--routes 10000]

In one namespace with two uplinks, the real agent installs N static routes through
{10.0.0.1 (up0), 10.0.1.1 (up1)}, once with `spec.fib.nexthopObjects: off` and once with `on`.
Then the address of up1 is removed (10.0.1.1 is no longer reachable, the RIB drops it from every
route in one change) and we measure, for each mode: the netlink writes the agent sent
(`route_agent_netlink_operations_total` before/after), the time until every sampled route
forwards through up0 only and the agent reports no pending op, and the route notifications of
our protocol `ip monitor` saw (with net.ipv4.nexthop_compat_mode=0, so the kernel does not
re-announce routes whose group changed). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.netns import add_interface, api_get, ip, ip_json, namespace, start_agent, sysctl, wait_for  # noqa: E402

HEADER = "apiVersion: routeagent.io/v1alpha1\n"


def config(n: int, mode: str) -> str:
    routes = "".join(f"    - prefix: 10.{100 + i // 256}.{i % 256}.0/24\n"
                     "      nextHops: [{gateway: 10.0.0.1}, {gateway: 10.0.1.1}]\n" for i in range(n))
    return (f"{HEADER}kind: AgentConfig\nmetadata:\n  name: node\nspec:\n  fib:\n"
            f"    nexthopObjects: \"{mode}\"\n---\n"
            f"{HEADER}kind: StaticRoutes\nmetadata:\n  name: ecmp\nspec:\n  routes:\n{routes}")


def writes(ns: str) -> int:
    text = api_get(ns, "/metrics") or ""
    return int(sum(float(v) for v in re.findall(r'route_agent_netlink_operations_total\{op="\w+"\} (\S+)', text)))


def converged(ns: str) -> bool:
    text = api_get(ns, "/api/fib")
    fib = json.loads(text) if text else None
    return bool(fib and fib["gate_open"] and not fib["pending"])


def run(n: int, mode: str) -> dict:
    with namespace("ra-nhgb-") as ns, tempfile.TemporaryDirectory() as tmp:
        for i, dev in enumerate(("up0", "up1")):
            add_interface(ns, dev, f"10.0.{i}.254/24")
        sysctl(ns, "net.ipv4.nexthop_compat_mode=0")
        cfg = os.path.join(tmp, "cfg")
        os.mkdir(cfg)
        with open(os.path.join(cfg, "all.yaml"), "w") as f:
            f.write(config(n, mode))
        proc = start_agent(ns, cfg, "--state-dir", os.path.join(tmp, "state"), log_path=os.path.join(tmp, "log"))
        try:
            wait_for(lambda: len(ip_json(ns, "route", "show", "proto", "201")) == n and converged(ns),
                     120, 0.2, what="routes installed")
            samples = [f"10.{100 + i // 256}.{i % 256}.0/24" for i in range(0, n, max(1, n // 20))]
            mon = subprocess.Popen(["ip", "-n", ns, "monitor", "route"], stdout=subprocess.PIPE, text=True)
            lines: list[str] = []
            threading.Thread(target=lambda: lines.extend(mon.stdout), daemon=True).start()
            ip(ns, "route", "add", "198.51.100.2/32", "dev", "lo", "proto", "250")  # start marker
            wait_for(lambda: any("198.51.100.2" in l for l in lines), 10, 0.02, what="monitor listening")
            before = writes(ns)
            t0 = time.monotonic()
            ip(ns, "addr", "del", "10.0.1.254/24", "dev", "up1")

            def repaired():
                for p in samples:
                    r = ip_json(ns, "route", "show", p, "proto", "201")
                    if not r or "10.0.1.1" in json.dumps(r):
                        return False
                return True

            wait_for(repaired, 120, 0.01, what="forwarding through up0 only")
            repair_s = time.monotonic() - t0
            wait_for(lambda: converged(ns), 60, 0.1, what="agent converged")
            total = writes(ns) - before
            ip(ns, "route", "add", "198.51.100.1/32", "dev", "lo", "proto", "250")  # end marker
            wait_for(lambda: any("198.51.100.1" in l for l in lines), 10, what="monitor marker")
            mon.terminate()
            events = sum("route-agent" in l or "proto 201" in l for l in lines)
            return {"writes": total, "repair_s": round(repair_s, 3), "route_events": events}
        finally:
            proc.kill()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", type=int, default=10000)
    args = ap.parse_args()
    plain = run(args.routes, "off")
    print(f"plain routes:   {plain}", flush=True)
    groups = run(args.routes, "on")
    print(f"nexthop groups: {groups}", flush=True)
    print(json.dumps({"routes": args.routes, "plain_writes": plain["writes"], "plain_repair_s": plain["repair_s"],
                      "plain_route_events": plain["route_events"], "nhg_writes": groups["writes"],
                      "nhg_repair_s": groups["repair_s"], "nhg_route_events": groups["route_events"]}))


if __name__ == "__main__":
    main()
