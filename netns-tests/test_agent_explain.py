"""`route-agent explain` against a running agent: an address gets its longest match as `ip route
get` picks it, and a CLI whose reader goes away (`| head`, `| true`) stops without a traceback."""

from __future__ import annotations

import subprocess
import sys

from conftest import static_routes

from testlab.netns import ip_json, wait_for

ROUTES = """\
    - prefix: 10.20.0.0/16
      nextHops: [{gateway: 10.0.0.1}]
    - prefix: 10.20.1.0/24
      nextHops: [{gateway: 10.99.0.1}]
    - prefix: 10.20.2.0/24
      nextHops: [{gateway: 10.0.1.1}]
"""


def sh(ns: str, pipeline: str) -> subprocess.CompletedProcess:
    """`pipeline` in bash inside `ns` with pipefail; `ra` is the route-agent CLI."""
    ra = f"{sys.executable} -m agent"
    return subprocess.run(["ip", "netns", "exec", ns, "bash", "-o", "pipefail", "-c",
                           pipeline.replace("ra ", ra + " ")], capture_output=True, text=True, timeout=60,
                          check=False)


def test_explain_address_is_the_longest_match_ip_route_get_finds(node):
    node.write("static.yaml", static_routes("s", ROUTES))
    node.start()
    node.wait_routes(lambda r: {"10.20.0.0/16", "10.20.2.0/24"} <= set(r))
    wait_for(node.converged, 5)
    for address, match in (("10.20.1.5", "10.20.0.0/16"), ("10.20.2.9", "10.20.2.0/24")):
        [kernel] = ip_json(node.ns, "route", "get", address)
        p = sh(node.ns, f"ra explain {address}")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0] == f"{address}: longest match {match}"
        assert "[installed]" in p.stdout and f"via {kernel['gateway']} dev {kernel['dev']}" in p.stdout
        if address == "10.20.1.5":  # the /24 covering it is unresolved: shown with the reason
            assert lines[1].startswith("  more specific, not in the kernel: 10.20.1.0/24: not installed")
            assert "10.99.0.1 is not reachable" in lines[1]
    # the exact prefix when one is given, also a /32
    p = sh(node.ns, "ra explain 10.20.1.0/24")
    assert p.stdout.splitlines()[0] == "10.20.1.0/24:" and "unresolved" in p.stdout
    assert "no candidate" in sh(node.ns, "ra explain 10.20.1.5/32").stdout
    # the reader gone at once (`true`) or after one line (`head -1`): no traceback, 141 as SIGPIPE
    for pipeline in ("ra explain 10.20.1.5 | true", "ra explain 10.20.1.5 --json | head -c 10",
                     "ra show rib | true", "ra show fib | true", "ra show peers | true"):
        p = sh(node.ns, pipeline)
        assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, (pipeline, p.stderr)
        # `true` is gone long before the CLI writes: EPIPE for sure; `head -c` may still be reading
        assert p.returncode in ((141,) if pipeline.endswith("true") else (0, 141)), (pipeline, p.returncode)
    p = sh(node.ns, "ra explain 10.20.1.5 | head -1")
    assert (p.returncode in (0, 141), p.stdout, p.stderr) == (True, "10.20.1.5: longest match 10.20.0.0/16\n", "")
