"""`route-agent demo`: the agent on a bundled sample config, in a throw-away network namespace.

DOC: creates a namespace with an interface `ra-demo0` (a veth pair) (10.99.0.254/24, fd00:99::254/64),
runs the real agent there with `agent/samples/standalone.yaml`, waits until it is ready and its
FIB has converged, prints `ip route show proto route-agent` (v4 and v6) and one `explain`, then
stops the agent and deletes the namespace.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile

from testlab.netns import add_interface, api_get, ip, namespace, sh, start_agent, wait_for

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "agent", "samples", "standalone.yaml")


def _converged(ns: str):
    text = api_get(ns, "/api/fib")
    if not text:
        return None
    fib = json.loads(text)
    return fib if fib["gate_open"] and not fib["pending"] and fib["routes"] else None


def run_demo() -> int:
    if os.geteuid() != 0:
        print("route-agent demo needs root (it creates a network namespace)", file=sys.stderr)
        return 1
    with namespace("ra-demo-") as ns, tempfile.NamedTemporaryFile(suffix=".log") as log:
        add_interface(ns, "ra-demo0", "10.99.0.254/24", "fd00:99::254/64")
        agent = start_agent(ns, SAMPLE, log_path=log.name)
        try:
            wait_for(lambda: _converged(ns) or agent.poll() is not None, timeout=30,
                     what="the agent to converge")
            if agent.poll() is not None:
                print(open(log.name).read(), file=sys.stderr)
                return 1
            print(f"# namespace {ns}: ip route show proto route-agent")
            print(ip(ns, "route", "show", "proto", "route-agent", check=False)
                  or ip(ns, "route", "show", "proto", "201"), end="")
            print("# ip -6 route show proto route-agent")
            print(ip(ns, "-6", "route", "show", "proto", "route-agent", check=False)
                  or ip(ns, "-6", "route", "show", "proto", "201"), end="")
            print("# route-agent explain 10.98.2.0/24")
            print(sh(sys.executable, "-m", "agent", "explain", "10.98.2.0/24", ns=ns,
                     cwd=os.path.dirname(os.path.dirname(__file__))).stdout, end="")
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
