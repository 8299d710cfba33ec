"""`explain`: a prefix exactly, an address by its longest match (as `ip route get`), the CLI's
text for both, and the CLI stopping quietly when its reader goes away (`... | head`)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from typing import ClassVar

import pytest

from agent.core.model import NextHop, Prefix, RouteType, nexthops
from agent.daemon import explain as explain_mod
from agent.daemon.agent import Agent
from agent.fib.types import ForeignRoute

P = Prefix.parse
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: s}
spec:
  routes:
    - {prefix: 10.20.0.0/16, blackhole: true}
    - {prefix: 10.20.1.0/24, nextHops: [{gateway: 192.0.2.1}]}
    - {prefix: 2001:db8::/32, blackhole: true}
"""


@pytest.fixture
def routing(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    agent = Agent(str(path), state_dir=str(tmp_path / "state"), node_name="n")
    r = agent.routing
    r.load_config(agent.config)
    r.fib.open_gate()
    r.fib.done(r.fib.plan(), [])  # what the kernel would have after the first flush
    return r


def test_prefix_is_explained_exactly(routing):
    out = explain_mod.explain(routing, P("10.20.1.0/24"))
    assert out["prefix"] == "10.20.1.0/24" and "query" not in out
    assert out["candidates"][0]["status"] == "unresolved"
    # a /32 given with its length is a prefix too: nothing there
    out = explain_mod.explain(routing, P("10.20.1.5/32"))
    assert (out["prefix"], out["candidates"]) == ("10.20.1.5/32", [])


def test_address_gets_its_longest_match_in_the_kernel(routing):
    out = explain_mod.explain(routing, P("10.20.1.5/32"), exact=False)
    assert out["query"] == "10.20.1.5"
    assert out["prefix"] == "10.20.0.0/16" and out["fib_state"] == "installed"
    # the /24 covers it too but is not in the kernel: listed with its reason
    [longer] = out["more_specific"]
    assert longer["prefix"] == "10.20.1.0/24" and "192.0.2.1 is not reachable" in longer["why"]
    out = explain_mod.explain(routing, P("2001:db8::1/128"), exact=False)
    assert (out["query"], out["prefix"], out["more_specific"]) == ("2001:db8::1", "2001:db8::/32", [])


def test_foreign_routes_count_like_ip_route_get(routing):
    """A foreign route (here a DHCP default) is in the kernel: it is the longest match."""
    fr = ForeignRoute(P("0.0.0.0/0"), 16, 100, RouteType.UNICAST, nexthops(NextHop("192.0.2.254", "eth0")))
    routing._apply_rib(routing.rib.apply(routing.kernel.seen(fr, False)))
    out = explain_mod.explain(routing, P("198.51.100.7/32"), exact=False)
    assert out["prefix"] == "0.0.0.0/0" and out["candidates"][0]["origin"].startswith("kernel/proto=dhcp")


def test_address_nothing_covers(routing):
    out = explain_mod.explain(routing, P("198.51.100.7/32"), exact=False)
    assert out["prefix"] is None and out["candidates"] == [] and "198.51.100.7" in out["fib_state"]


# ---------------------------------------------------------------------------------------------
# the CLI, against a small fake of the API


class _Api(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[dict] = {}

    def do_GET(self):
        body = json.dumps(self.answers.get(self.path, {})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def api(routing):
    _Api.answers = {
        "/api/explain?prefix=10.20.1.5": explain_mod.explain(routing, P("10.20.1.5/32"), exact=False),
        "/api/explain?prefix=10.20.1.0%2F24": explain_mod.explain(routing, P("10.20.1.0/24")),
    }
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=60, check=False)


def test_cli_explains_an_address_by_its_longest_match(api):
    out = cli("explain", "10.20.1.5", "--api", api).stdout
    lines = out.splitlines()
    assert lines[0] == "10.20.1.5: longest match 10.20.0.0/16"
    assert lines[1].startswith("  more specific, not in the kernel: 10.20.1.0/24: not installed:")
    assert "10.20.0.0/16:" in lines and "static/s" in out and "[installed]" in out
    exact = cli("explain", "10.20.1.0/24", "--api", api).stdout
    assert exact.splitlines()[0] == "10.20.1.0/24:" and "longest match" not in exact


@pytest.mark.parametrize("args", [("explain", "10.20.1.5"), ("explain", "10.20.1.5", "--json"), ("crds",)])
def test_cli_stops_quietly_when_its_reader_is_gone(api, args):
    """stdout is a pipe whose reader has already gone: every write fails with EPIPE. The CLI must
    exit 141 (as after SIGPIPE) without a traceback, also from the interpreter's final flush."""
    r, w = os.pipe()
    os.close(r)
    try:
        args = (*args, "--api", api) if args[0] == "explain" else args
        p = cli(*args, stdout=w)
    finally:
        os.close(w)
    assert p.returncode == 141, p.stderr
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr and "Exception ignored" not in p.stderr
