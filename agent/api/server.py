"""Local HTTP API: /metrics, /healthz, /readyz and the JSON views the CLI prints.

DOC: a deliberately small HTTP/1.1 server on the agent's own event loop (asyncio streams, GET only,
one request per connection), so every handler reads the routing state between two steps of the
core task and needs no locks. It listens on 127.0.0.1 by default; the JSON views are for the local
CLI (`route-agent show ...`, `route-agent explain ...`), not a public API. It sees the agent only
through a `ReadView`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..core.model import Prefix
from .metrics import Metrics
from .readview import ReadView

log = logging.getLogger("route_agent.api")


def _route(view: ReadView, metrics: Metrics, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    if path == "/metrics":
        return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)
    if path == "/healthz":
        return 200, "text/plain", b"ok\n"
    if path == "/readyz":
        return (200, "text/plain", b"ready\n") if view.ready() else (503, "text/plain", b"not ready\n")
    if path == "/api/rib":
        return _json(view.rib_rows(sorted(view.rib_prefixes())))
    if path == "/api/fib":
        return _json(view.fib())
    if path == "/api/peers":
        return _json(view.peers())
    if path == "/api/adverts":
        peer = (query.get("peer") or [None])[0]
        return _json(view.adverts(peer))
    if path == "/api/explain":
        text = (query.get("prefix") or [""])[0]
        try:
            prefix = Prefix.parse(text)
        except ValueError as exc:
            return 400, "application/json", json.dumps({"error": f"bad prefix {text!r}: {exc}"}).encode()
        return _json(view.explain(prefix))
    return 404, "text/plain", b"not found\n"


def _json(obj) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(obj).encode()


async def _handle(view: ReadView, metrics: Metrics, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = await asyncio.wait_for(reader.readline(), 10)
        while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
            pass
        parts = request.decode("latin-1").split()
        if len(parts) < 2 or parts[0] != "GET":
            status, ctype, body = 405, "text/plain", b"only GET\n"
        else:
            url = urlsplit(parts[1])
            status, ctype, body = _route(view, metrics, url.path, parse_qs(url.query))
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                  503: "Service Unavailable"}.get(status, "")
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
    except (asyncio.TimeoutError, ConnectionError) as exc:
        log.debug("api client: %s", exc)
    except Exception:  # a bug in a view must not take the agent down
        log.exception("api handler failed")
    finally:
        writer.close()


async def serve(view: ReadView, metrics: Metrics, address: str, port: int) -> asyncio.Server:
    server = await asyncio.start_server(lambda r, w: _handle(view, metrics, r, w), address, port)
    log.info("API listening on http://%s:%d", address, server.sockets[0].getsockname()[1])
    return server
