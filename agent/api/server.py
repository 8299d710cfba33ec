"""Local HTTP API: /metrics, /healthz, /readyz and the JSON views the CLI prints.

DOC: a deliberately small HTTP/1.1 server on the agent's own event loop (asyncio streams, GET only,
one request per connection), so every handler reads the routing state between two steps of the
core task and needs no locks. It sees the agent only through a `ReadView`. It listens on 127.0.0.1
by default; the JSON views are for the local CLI (`route-agent show ...`, `route-agent explain
...`), not a public API. `serve_metrics` starts a second listener (``spec.api.metricsAddress``,
``--metrics-address``) that answers only `PUBLIC_PATHS` (/metrics, /healthz, /readyz) and 404 to
everything else, so metrics and probes can be reached from other hosts while /api/* stays local.

Bounded work per request: `/api/rib` is paginated (``?limit=N&after=PREFIX``, default 1000 rows,
at most 10,000; the answer is ``{"routes": [...], "next": PREFIX-or-null}``, ordered by prefix,
IPv4 first). A listing's first page takes a copy of the RIB's prefixes and sorts it in chunks,
with a yield to the loop between chunks (`riborder.RibOrder`, kept for the pages that follow:
each is then a few milliseconds, whatever the RIB's size), and each page decides only its own
rows; so a big RIB never stalls routing for long. A request line over 64 KiB is answered 414, over-long or too many header
lines 431, each logged at most once a minute (with the number of others since).

``/readyz?verbose`` lists the checks behind the answer (kube-apiserver's style): the initial
re-sync (which alone decides readiness) and in cluster mode the API server connection and the
configuration's source (live or the snapshot), which are reported but never make a node unready.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..core.model import Prefix, as_prefix
from . import views
from .metrics import Metrics
from .readview import ReadView
from .riborder import RibOrder

log = logging.getLogger("route_agent.api")

RIB_PAGE_DEFAULT = 1000
RIB_PAGE_MAX = 10_000
SCAN_CHUNK = 20_000  # prefixes looked at per step of the loop while picking a page
MAX_LINE = 64 * 1024  # the StreamReader's limit: a longer line is refused
MAX_HEADERS = 100
PUBLIC_PATHS = frozenset({"/metrics", "/healthz", "/readyz"})  # what the metrics listener serves
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 414: "URI Too Long",
           431: "Request Header Fields Too Large", 503: "Service Unavailable"}


class RateLimitedLog:
    """Log a message at most once per `seconds`, saying how many were held back meanwhile."""

    def __init__(self, logger: logging.Logger, seconds: float = 60.0) -> None:
        self.logger, self.seconds = logger, seconds
        self._at = -seconds
        self._held = 0

    def __call__(self, level: int, msg: str, *args, exc_info: bool = False) -> None:
        now = time.monotonic()
        if now - self._at < self.seconds:
            self._held += 1
            return
        if self._held:
            msg += f" (and {self._held} more since the last report)"
        self._at, self._held = now, 0
        self.logger.log(level, msg, *args, exc_info=exc_info)


class _Refused(Exception):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


async def rib_page(view: ReadView, after: Prefix | None, limit: int, order: RibOrder | None = None) -> dict:
    """The next `limit` RIB rows after `after` (address order), and the cursor of the page after
    this one. `order`: the server's snapshot of the listing under way (`riborder`)."""
    order = order or RibOrder(SCAN_CHUNK)
    page, more = await order.page(view.rib_prefixes, after, limit)
    return {"routes": view.rib_rows(page), "next": str(as_prefix(page[-1])) if more and page else None}


def _page_args(query: dict[str, list[str]]) -> tuple[Prefix | None, int]:
    limit_text = (query.get("limit") or [str(RIB_PAGE_DEFAULT)])[0]
    after_text = (query.get("after") or [""])[0]
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= RIB_PAGE_MAX:
        raise ValueError(f"limit must be 1..{RIB_PAGE_MAX}, not {limit_text!r}")
    return (Prefix.parse(after_text) if after_text else None), int(limit_text)


async def _route(view: ReadView, metrics: Metrics, path: str,
                 query: dict[str, list[str]], order: RibOrder | None = None) -> tuple[int, str, bytes]:
    if path == "/metrics":
        return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)
    if path == "/healthz":
        return 200, "text/plain", b"ok\n"
    if path == "/readyz":
        ready = view.ready()
        if "verbose" in query:  # the checks behind the answer (the status code is the same)
            return 200 if ready else 503, "text/plain", views.readiness_text(ready, view.readiness()).encode()
        return (200, "text/plain", b"ready\n") if ready else (503, "text/plain", b"not ready\n")
    if path == "/api/rib":
        try:
            after, limit = _page_args(query)
        except ValueError as exc:
            return _error(f"bad page: {exc}")
        return _json(await rib_page(view, after, limit, order))
    if path == "/api/fib":
        return _json(view.fib())
    if path == "/api/peers":
        return _json(view.peers())
    if path == "/api/adverts":
        return _json(view.adverts((query.get("peer") or [None])[0]))
    if path == "/api/explain":
        text = (query.get("prefix") or [""])[0]
        try:
            prefix = Prefix.parse(text)
        except ValueError as exc:
            return _error(f"bad prefix {text!r}: {exc}")
        return _json(view.explain(prefix, exact="/" in text))  # an address: longest match
    return 404, "text/plain", b"not found\n"


def _json(obj) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(obj).encode()


def _error(text: str) -> tuple[int, str, bytes]:
    return 400, "application/json", json.dumps({"error": text}).encode()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """The request line; the header lines are read and dropped. Raises `_Refused`."""
    try:
        request = await asyncio.wait_for(reader.readline(), 10)
    except ValueError:  # asyncio's LimitOverrunError, re-raised by readline()
        raise _Refused(414, f"request line over {MAX_LINE // 1024} KiB") from None
    for _ in range(MAX_HEADERS + 1):
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
        except ValueError:
            raise _Refused(431, f"header line over {MAX_LINE // 1024} KiB") from None
        if line in (b"\r\n", b"\n", b""):
            return request
    raise _Refused(431, f"more than {MAX_HEADERS} header lines")


class ApiServer:
    """Serves one `ReadView` and the metrics registry over HTTP."""

    def __init__(self, view: ReadView, metrics: Metrics, public: bool = False) -> None:
        self.view, self.metrics = view, metrics
        self.rib_order = RibOrder(SCAN_CHUNK)  # the `/api/rib` listing under way
        self.public = public  # the metrics listener: PUBLIC_PATHS only
        self._refused_log = RateLimitedLog(log)
        self._failed_log = RateLimitedLog(log)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                parts = (await _read_request(reader)).decode("latin-1").split()
            except _Refused as exc:
                self.metrics.api_refused.labels(str(exc.status)).inc()
                self._refused_log(logging.WARNING, "api: refused a request (%d): %s", exc.status, exc)
                await self._respond(writer, exc.status, "text/plain", f"{exc}\n".encode())
                await _discard_input(reader, writer)
                return
            if len(parts) < 2 or parts[0] != "GET":
                status, ctype, body = 405, "text/plain", b"only GET\n"
            else:
                url = urlsplit(parts[1])
                query = parse_qs(url.query, keep_blank_values=True)  # ?verbose has no value
                if self.public and url.path not in PUBLIC_PATHS:
                    status, ctype, body = 404, "text/plain", b"not found\n"
                else:
                    status, ctype, body = await _route(self.view, self.metrics, url.path, query, self.rib_order)
            await self._respond(writer, status, ctype, body)
        except (asyncio.TimeoutError, ConnectionError) as exc:
            log.debug("api client: %s", exc)
        except Exception:  # a bug in a view must not take the agent down
            self._failed_log(logging.ERROR, "api handler failed", exc_info=True)
        finally:
            writer.close()

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, ctype: str, body: bytes) -> None:
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()


async def _discard_input(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         limit: int = 1 << 20, seconds: float = 1.0) -> None:
    """After refusing a request, read what the client still sends (a little, briefly): closing
    with unread data would make the kernel reset the connection before the client reads the
    answer."""
    if writer.can_write_eof():
        writer.write_eof()
    got = 0
    deadline = asyncio.get_running_loop().time() + seconds
    while got < limit:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        try:
            data = await asyncio.wait_for(reader.read(65536), left)
        except (asyncio.TimeoutError, ConnectionError):
            return
        if not data:
            return
        got += len(data)


async def serve(view: ReadView, metrics: Metrics, address: str, port: int,
                public: bool = False) -> asyncio.Server:
    api = ApiServer(view, metrics, public)
    server = await asyncio.start_server(api.handle, address, port, limit=MAX_LINE)
    log.info("%s listening on http://%s:%d", "metrics listener" if public else "API", address,
             server.sockets[0].getsockname()[1])
    return server


async def serve_metrics(view: ReadView, metrics: Metrics, address: str, port: int) -> asyncio.Server:
    """The second listener: /metrics, /healthz and /readyz only (module DOC)."""
    return await serve(view, metrics, address, port, public=True)
