#!/usr/bin/env python3
"""Benchmark: BFD transmit lateness while the agent learns a big table (a 500k-route burst).

A BIRD 2 ToR in namespace `peer` announces N IPv4 /24s (default 500,000) to the agent in `node`
over one eBGP session with BFD (``bfd on``; BIRD ``protocol bfd`` 100 ms x 3, the agent's peer
``bfd: {minRx: 100, minTx: 100, multiplier: 3}``). While the agent's event loop decodes and
installs the table, its BFD child process must keep transmitting every 75-100 ms: a packet late
by more than ~200 ms would make BIRD declare the session down (and drop the BGP session).

Measured, from the agent's metrics once all N routes are in the kernel: the worst lateness of a
periodic BFD transmission (`route_agent_bfd_transmit_late_max_seconds`, measured in the BFD
process against each packet's deadline), BFD failures (Up -> Down) on the agent's side, and
BIRD's view (its BFD session still Up, its BGP session never dropped). Last line: one JSON
object with ``late_max_ms``, ``bfd_failures``, ``bird_bfd``, ``learn_s``, ``routes``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.benchlab import (  # noqa: E402
    NODE_ADDR, NODE_AS, PEER_ADDR, PEER_AS, Lab, agent_yaml, finish, launch_agent, prefix_text, setup,
    static_s4, work_directory, write_agent_yaml,
)
from testlab.bird import bgp_protocol  # noqa: E402
from testlab.netns import api_get  # noqa: E402

BFD = "  bfd: {minRx: 100, minTx: 100, multiplier: 3}\n"


def bird_config(n: int) -> str:
    return (f"router id {PEER_ADDR};\nlog stderr all;\nprotocol device {{ scan time 10; }}\n"
            'protocol bfd { interface "tor0" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; }; }\n'
            + static_s4(f"{prefix_text(i)} blackhole" for i in range(n))
            + bgp_protocol("n4", local=PEER_ADDR, local_as=PEER_AS, neighbor=NODE_ADDR, neighbor_as=NODE_AS,
                           export={4: ""}, import_all=False, hold_time=90, passive=True,
                           graceful_restart=False, extra="    bfd on;"))


def metric(ns: str, name: str) -> float | None:
    text = api_get(ns, "/metrics") or ""
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routes", type=int, default=500_000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not setup("bfd_burst"):
        return 2
    with work_directory("ra-bfd-burst-", args.keep) as workdir, contextlib.ExitStack() as stack:
        lab = Lab(workdir, stack, bird_config(args.routes), tag="bfdb")
        lab.wait_loaded(args.routes, timeout=args.timeout)
        conf = os.path.join(workdir, "conf")
        write_agent_yaml(conf, agent_yaml(extra_docs=BFD))
        launch_agent(lab.node, ["--config", conf, "--state-dir", os.path.join(workdir, "state")],
                     os.path.join(workdir, "agent.log"), stack)
        t0 = time.monotonic()
        deadline = t0 + args.timeout
        routes = 0.0
        while time.monotonic() < deadline:
            routes = metric(lab.node, 'route_agent_fib_routes') or 0
            if routes >= args.routes:
                break
            time.sleep(1.0)
        learn = time.monotonic() - t0
        late = metric(lab.node, "route_agent_bfd_transmit_late_max_seconds")
        p99 = metric(lab.node, "route_agent_bfd_transmit_late_p99_seconds")
        failures = metric(lab.node, "route_agent_bfd_failures_total")
        bird_bfd = lab.bird.command("show bfd sessions")
        bird_up = bool(re.search(r"10\.0\.0\.254\s+tor0\s+Up", bird_bfd))
        established = "Established" in lab.bird.command("show protocols n4")
        print(bird_bfd.strip())
        print(f"{int(routes)} routes in {learn:.1f} s; worst BFD transmit lateness "
              f"{(late or 0) * 1000:.1f} ms (p99 {(p99 or 0) * 1000:.0f} ms); agent BFD failures {failures}; BIRD BFD up: {bird_up}, "
              f"BGP established: {established}")
        return finish({"routes": int(routes), "learn_s": round(learn, 1),
                       "late_max_ms": None if late is None else round(late * 1000, 2),
                       "late_p99_ms": None if p99 is None else round(p99 * 1000, 1),
                       "bfd_failures": failures, "bird_bfd_up": bird_up, "bgp_established": established},
                      ok=routes >= args.routes and bird_up and not failures)


if __name__ == "__main__":
    sys.exit(main())
