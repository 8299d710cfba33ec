"""The local HTTP API: over-long requests are refused politely, `/api/rib` is paginated."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from agent.api import server as srv
from agent.api.metrics import Metrics
from agent.core.model import Prefix


class FakeView:
    def __init__(self, prefixes):
        self.prefixes = [Prefix.parse(p) for p in prefixes]
        self.calls = 0

    def ready(self):
        return True

    def rib_prefixes(self):
        return list(self.prefixes)

    def rib_rows(self, prefixes):
        self.calls += 1
        return [{"prefix": str(p), "reason": "only", "installed": True, "note": None, "candidates": []}
                for p in prefixes if p in self.prefixes]


PREFIXES = [f"10.0.{i}.0/24" for i in range(7)] + ["2001:db8::/32", "10.0.0.0/16", "192.0.2.0/24"]


async def start(view, metrics=None):
    metrics = metrics or Metrics()
    server = await srv.serve(view, metrics, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], metrics


async def raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


async def get(port: int, path: str) -> tuple[int, bytes]:
    answer = await raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_a_request_line_over_64k_gets_414_and_one_log_line(caplog):
    server, port, metrics = await start(FakeView(PREFIXES))
    caplog.set_level(logging.DEBUG, logger="route_agent.api")
    try:
        for _ in range(3):
            answer = await raw(port, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 414 URI Too Long\r\n")
        assert (await get(port, "/healthz"))[0] == 200  # and the server is fine
    finally:
        server.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    refused = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1  # rate-limited: once, not per request
    assert metrics.registry.get_sample_value("route_agent_api_refused_requests_total", {"code": "414"}) == 3


async def test_an_over_long_header_gets_431():
    server, port, _ = await start(FakeView(PREFIXES))
    try:
        answer = await raw(port, b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 70_000 + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 431 ")
        many = b"".join(b"X-%d: y\r\n" % i for i in range(500))
        answer = await raw(port, b"GET /healthz HTTP/1.1\r\n" + many + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 431 ")
    finally:
        server.close()


async def test_rib_is_paginated_in_prefix_order_with_a_cursor():
    server, port, _ = await start(FakeView(PREFIXES))
    try:
        seen, after, pages = [], "", 0
        while True:
            status, body = await get(port, f"/api/rib?limit=3{'&after=' + after if after else ''}")
            assert status == 200
            page = json.loads(body)
            assert len(page["routes"]) <= 3
            seen += [r["prefix"] for r in page["routes"]]
            pages += 1
            if page["next"] is None:
                break
            after = page["next"]
        assert seen == [str(p) for p in sorted(Prefix.parse(p) for p in PREFIXES)]
        assert pages == 4
        status, body = await get(port, "/api/rib")  # default page: everything here
        assert status == 200 and len(json.loads(body)["routes"]) == len(PREFIXES)
        assert json.loads(body)["next"] is None
        for bad in ("limit=0", f"limit={srv.RIB_PAGE_MAX + 1}", "limit=x", "after=10.0.0.1/24"):
            assert (await get(port, f"/api/rib?{bad}"))[0] == 400
    finally:
        server.close()


async def test_a_rib_page_is_bounded_work_between_yields_to_the_loop(monkeypatch):
    """Picking a page of a big RIB yields to the loop between chunks, and only the page's rows
    are decided."""
    monkeypatch.setattr(srv, "SCAN_CHUNK", 10)
    view = FakeView([f"10.{i // 256}.{i % 256}.0/24" for i in range(200)])
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    page = await srv.rib_page(view, Prefix.parse("10.0.99.0/24"), 5)
    t.cancel()
    assert [r["prefix"] for r in page["routes"]] == [f"10.0.{i}.0/24" for i in range(100, 105)]
    assert page["next"] == "10.0.104.0/24"
    assert ticks - before >= 19  # 20 chunks, a yield between each
    assert view.calls == 1


async def test_cli_show_rib_follows_the_cursor(monkeypatch, capsys):
    from agent import cli
    from testlab.tables import parse

    monkeypatch.setattr(cli, "RIB_PAGE", 4)
    server, port, _ = await start(FakeView(PREFIXES))
    try:
        rc = await asyncio.to_thread(cli.main, ["show", "rib", "--api", f"http://127.0.0.1:{port}"])
        assert rc == 0
        rows = parse(capsys.readouterr().out.splitlines())  # aligned, a header again if a page widens
        assert [(r[" "], r["Prefix"]) for r in rows] == [
            ("*", str(p)) for p in sorted(Prefix.parse(p) for p in PREFIXES)]
        rc = await asyncio.to_thread(cli.main, ["show", "rib", "--json", "--api", f"http://127.0.0.1:{port}"])
        assert len(json.loads(capsys.readouterr().out)) == len(PREFIXES)
    finally:
        server.close()


async def test_the_metrics_listener_serves_metrics_and_probes_only():
    """Issue 16 item 9: /metrics and the probes on an address that can be exposed; the JSON API
    (the CLI's views of the RIB, FIB, peers) never on it."""
    view, metrics = FakeView(PREFIXES), Metrics()
    api = await srv.serve(view, metrics, "127.0.0.1", 0)
    public = await srv.serve_metrics(view, metrics, "127.0.0.1", 0)
    api_port, port = (s.sockets[0].getsockname()[1] for s in (api, public))
    try:
        assert port != api_port
        status, body = await get(port, "/metrics")
        assert status == 200 and b"route_agent_" in body
        assert (await get(port, "/healthz")) == (200, b"ok\n")
        assert (await get(port, "/readyz")) == (200, b"ready\n")
        for path in ("/api/rib", "/api/fib", "/api/peers", "/api/adverts", "/api/explain?prefix=10.0.0.0/24",
                     "/api/rib?limit=1", "/", "/metrics/../api/rib"):
            assert (await get(port, path)) == (404, b"not found\n"), path
        assert view.calls == 0  # no view was asked for a row
        status, body = await get(api_port, "/api/rib?limit=1")  # still on the local API
        assert status == 200 and json.loads(body)["routes"]
    finally:
        api.close()
        public.close()


async def test_readyz_verbose_lists_the_checks_the_status_code_is_readiness():
    """Issue 16.3: API connectivity and the configuration's source are shown, never decide."""
    from agent.api import views
    from agent.api.readview import K8sCounts, ReflectorCounts

    k8s = K8sCounts((ReflectorCounts("nodes", True, 1, 0, 5, stalls=1, connected=False,
                                     last_error="no event or bookmark for 5s: the watch is stalled"),
                     ReflectorCounts("services", True, 0, 0, 3, silent_seconds=2.0)),
                    0, 0, 0, config_source="snapshot", snapshot_age=40.0)
    view = FakeView(PREFIXES)
    view.readiness = lambda: [("fib-sync", True, "initial re-sync done")] + views.k8s_checks(k8s)
    server, port, _ = await start(view)
    try:
        code, body = await get(port, "/readyz?verbose")
        plain = await get(port, "/readyz")
    finally:
        server.close()
    assert code == 200 and plain == (200, b"ready\n")
    assert body.decode().splitlines() == [
        "[+]fib-sync ok: initial re-sync done",
        "[-]kubernetes-api not ok: 1 of 2 watches not answering: nodes: no event or bookmark for 5s: "
        "the watch is stalled",
        "[-]kubernetes-config not ok: running from the last-known-good snapshot written 40s before the "
        "start; the live view takes over once every resource is listed",
        "readyz check passed"]
    assert not k8s.connected and k8s.last_error.startswith("nodes: no event")


def test_k8s_connectivity_metrics():
    from agent.api.metrics import _k8s_metrics
    from agent.api.readview import K8sCounts, ReflectorCounts

    k8s = K8sCounts((ReflectorCounts("nodes", True, 1, 0, 5, stalls=2, connected=False, silent_seconds=7.5),),
                    0, 0, 0, config_source="snapshot")
    samples = {(s.name, s.labels.get("resource")): s.value for m in _k8s_metrics(k8s) for s in m.samples}
    assert samples[("route_agent_k8s_api_connected", None)] == 0
    assert samples[("route_agent_k8s_watch_stalls_total", "nodes")] == 2
    assert samples[("route_agent_k8s_watch_answering", "nodes")] == 0
    assert samples[("route_agent_k8s_watch_silence_seconds", "nodes")] == 7.5
    assert samples[("route_agent_k8s_config_from_snapshot", None)] == 1
