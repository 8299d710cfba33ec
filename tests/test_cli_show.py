"""`route-agent show` and `explain` as a user types them, against a fake API on loopback: --json in
either position prints the API's JSON unchanged, text is the aligned tables, the RIB is read and
printed page by page, and every failure (no view, an unknown one, no agent, an error answer, not
JSON) is one clear line with the documented exit status."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.parse
from typing import ClassVar

import pytest

from agent import cli
from testlab.netns import wait_for
from testlab.tables import parse
from tests.test_clitable import PEERS, RIB, V6, adv, advert, fib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ADVERTS = [advert("10.244.1.0/24", **{"10.0.0.1": adv(med=10)})]
FIB = fib([{"prefix": "192.0.2.0/24", "route": "via 10.0.0.1 dev up0 metric 20", "stale": False}])
EXPLAIN = {"prefix": "10.0.0.0/8", "candidates": RIB[0]["candidates"], "reason": "administrative distance",
           "note": "", "desired": "via 10.0.0.1 dev up0 metric 20", "kernel": "via 10.0.0.1 dev up0 metric 20",
           "fib_state": "installed", "bgp": [], "export": []}


class _Api(http.server.BaseHTTPRequestHandler):
    rib: ClassVar[list] = RIB
    seen: ClassVar[list] = []
    release: ClassVar[threading.Event] = threading.Event()  # /api/hang answers once it is set

    def do_GET(self):  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        self.seen.append(self.path)
        if url.path == "/api/hang":
            self.release.wait(60)
            return self._send(200, [])
        if url.path == "/api/rib":  # pages as the agent serves them: ordered, `next` the cursor
            keys = [r["prefix"] for r in self.rib]
            start = keys.index(q["after"]) + 1 if "after" in q else 0
            n = int(q["limit"])
            page = self.rib[start:start + n]
            body = {"routes": page, "next": page[-1]["prefix"] if start + n < len(self.rib) else None}
        elif url.path == "/api/explain" and q.get("prefix") == "bad":
            return self._send(400, {"error": "bad prefix 'bad': not an address"})
        elif url.path == "/api/notjson":
            return self._send(200, b"<html>hello</html>")
        else:
            body = {"/api/peers": PEERS, "/api/adverts": ADVERTS, "/api/fib": FIB, "/api/explain": EXPLAIN}[url.path]
        self._send(200, body)

    def _send(self, code, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def api():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Api.seen = []
    _Api.release.clear()
    yield f"http://127.0.0.1:{server.server_port}"
    _Api.release.set()
    server.shutdown()
    server.server_close()


def run(capsys, *args) -> tuple[int, str, str]:
    try:
        rc = cli.main(list(args))
    except SystemExit as exc:  # argparse's usage errors, and _get's failures
        rc = exc.code if isinstance(exc.code, int) else (print(exc.code, file=sys.stderr) or 1)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("view,data", [("peers", PEERS), ("adverts", ADVERTS), ("fib", FIB), ("rib", RIB)])
def test_json_in_either_position_is_the_api_json_unchanged(api, capsys, view, data):
    after = run(capsys, "show", view, "--json", "--api", api)
    before = run(capsys, "show", "--json", view, "--api", api)
    assert after == before and after[0] == 0
    assert json.loads(after[1]) == data
    assert after[1] == json.dumps(data, indent=2) + "\n"  # the same text, also for the paged RIB


def test_explain_json_after_the_prefix(api, capsys):
    rc, out, _ = run(capsys, "explain", "10.0.0.0/8", "--json", "--api", api)
    assert (rc, json.loads(out)) == (0, EXPLAIN)
    rc, out, _ = run(capsys, "explain", "10.0.0.0/8", "--api", api)
    assert out.splitlines()[:3:2] == ["10.0.0.0/8:", "  best          static/uplinks distance 1: via 10.0.0.1 dev up0"]


@pytest.mark.parametrize("view,first", [("peers", "tor4"), ("adverts", "10.244.1.0/24"), ("rib", "*")])
def test_text_is_an_aligned_table(api, capsys, view, first):
    rc, out, _ = run(capsys, "show", view, "--api", api)
    rows = parse(out.splitlines())
    assert rc == 0 and next(iter(rows[0].values())) == first


def test_fib_text_has_its_title_then_the_table(api, capsys):
    rc, out, _ = run(capsys, "show", "fib", "--api", api)
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "table 254, protocol 201"
    assert parse(lines[1:]) == [{"Prefix": "192.0.2.0/24", "State": "installed",
                                 "Route": "via 10.0.0.1 dev up0 metric 20"}]


def test_rib_is_read_and_printed_page_by_page(api, capsys, monkeypatch):
    many = [RIB[0] | {"prefix": f"10.{i}.0.0/16"} for i in range(7)] + RIB[2:]
    monkeypatch.setattr(_Api, "rib", many)
    monkeypatch.setattr(cli, "RIB_PAGE", 3)
    rc, out, _ = run(capsys, "show", "rib", "--api", api)
    assert rc == 0 and len([p for p in _Api.seen if p.startswith("/api/rib")]) == 3
    rows = parse(out.splitlines())
    assert [r["Prefix"] for r in rows if r["Prefix"]] == [r["prefix"] for r in many]
    # the IPv6 prefix on the last page widens Prefix: the header once more, before that page only
    assert sum(1 for x in out.splitlines() if x.split()[:2] == ["Prefix", "Decided-by"]) == 2
    rc, out, _ = run(capsys, "show", "rib", "--json", "--api", api)
    assert out == json.dumps(many, indent=2) + "\n"


def test_empty_views(api, capsys, monkeypatch):
    monkeypatch.setattr(_Api, "rib", [])
    rc, out, _ = run(capsys, "show", "rib", "--api", api)
    assert rc == 0 and out.splitlines()[1:] == ["(no routes)"] and "Prefix" in out.splitlines()[0]
    assert run(capsys, "show", "rib", "--json", "--api", api)[1] == "[]\n"


@pytest.mark.parametrize("args,message", [
    (("show",), "say what to show: rib, fib, peers or adverts"),
    (("show", "routes"), "argument VIEW: invalid choice: 'routes' (choose from 'rib', 'fib', 'peers', 'adverts')"),
    (("show", "rib", "--peer", "tor1"), "--peer is for `show adverts` only"),
    (("show", "peers", "extra"), "unrecognized arguments: extra"),
    (("explain",), "the following arguments are required: PREFIX"),
    ((), "the following arguments are required: COMMAND"),
])
def test_usage_errors_exit_2_with_the_reason(capsys, args, message):
    rc, out, err = run(capsys, *args)
    assert (rc, out) == (2, "") and message in err and err.startswith("usage: route-agent")


def test_an_unreachable_agent_is_one_line_and_exit_1():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run([sys.executable, "-m", "agent", "show", "peers", "--api", f"http://127.0.0.1:{port}"],
                       capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), timeout=60)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == (f"route-agent: cannot reach the agent at http://127.0.0.1:{port}: [Errno 111] Connection "
                        "refused (is it running? the address is --api or $ROUTE_AGENT_API)\n")


def test_an_error_answer_and_a_non_json_answer_exit_1(api, capsys):
    rc, _, err = run(capsys, "explain", "bad", "--api", api)
    assert (rc, err) == (1, f"route-agent: the agent at {api} answered /api/explain with HTTP 400: "
                            "bad prefix 'bad': not an address\n")
    with pytest.raises(SystemExit) as exc:
        cli._get(api, "/api/notjson")
    assert "is not JSON" in str(exc.value.code) and "<html>" in str(exc.value.code)


def test_long_and_ipv6_cells_do_not_break_the_columns(api, capsys):
    _, out, _ = run(capsys, "show", "peers", "--api", api)
    rows = parse(out.splitlines())
    assert rows[1]["Address"] == V6 and rows[2]["Family"] == "ipv6-unicast"


def _sigint_default() -> None:
    """In the child: SIGINT as a terminal gives it, whatever the tests inherited (a shell's
    background job starts with SIGINT ignored, and Python keeps an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_waiting_for_the_agent_exits_130_without_a_traceback(api):
    """A long `show rib` interrupted: the shell's status for SIGINT, no traceback. (`run` is not
    concerned: the agent handles SIGINT itself.) The API address ends in /api/hang?, so the CLI's
    request for the RIB waits there."""
    p = subprocess.Popen([sys.executable, "-m", "agent", "show", "rib", "--api", api + "/api/hang?"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT), preexec_fn=_sigint_default)
    try:
        wait_for(lambda: any(x.startswith("/api/hang") for x in _Api.seen), 30, what="the CLI's request")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert (p.returncode, out) == (130, "") and "Traceback" not in err and "KeyboardInterrupt" not in err
