"""Reflector: list and watch one Kubernetes resource, hand on batches of real changes.

DOC: one `Reflector` per resource runs in its own daemon thread (the official client is
synchronous) and calls `on_batch(Batch)` from that thread; getting the batch onto the agent's event
loop (``loop.call_soon_threadsafe(queue.put_nowait, batch)``) is the caller's business.

* Store: key -> (resourceVersion, transformed value). An object whose resourceVersion is unchanged
  produces nothing, so a relist after a disconnect costs the consumer nothing for unchanged objects
  (BIRD's mark-and-sweep refresh): every listed object is marked, stored keys left unmarked are the
  only deletes. `transform(raw_dict)` builds the consumer's value; None means "ignore this object"
  (treated as absent; an exception is logged and leaves the previous value in place).
* Flow: list (``_preload_content=False``, the body parsed with `json.loads`: typed and custom
  resources alike stay wire-format dicts, and no model deserialisation is paid) -> one Batch with
  ``synced=True`` -> watch from the list's resourceVersion with bookmarks and
  ``timeoutSeconds=watch_timeout``. BOOKMARKs only advance the version. The lines of one HTTP
  chunk are coalesced into one Batch, per key (add+modify -> one upsert; add+delete of an unknown
  key -> nothing). A stream that ends normally is re-watched from the last version (no relist).
* Errors: 410 Gone (HTTP status or an ``ERROR`` event with code 410) -> relist and emit only the
  difference, ``synced=True``. Connection errors, a server that is down, other HTTP errors ->
  exponential backoff with jitter, capped, then re-watch from the last version (relist only if that
  gets 410). An error never produces deletes. HTTP 404 on the list (the API is not served on this
  cluster, e.g. ServiceCIDR) -> one empty synced Batch (deleting anything held), retried every
  `not_found_retry` seconds.
* Why not `kubernetes.watch.Watch`: it deserialises every event into a model unless told not to
  (and then stops tracking the resourceVersion), and on an ERROR 410 it silently retries once from
  the same too-old version (unless a timeout is given, then it raises). Reading the urllib3
  response ourselves is shorter and makes 410, bookmarks and coalescing explicit.

Items of a list of a built-in type carry no apiVersion/kind on the wire (kubernetes#3030) while
watch objects do; the reflector fills them in from the list's own, so `transform` sees one shape.

Stalled watches: a hung API server (or a connection a middlebox dropped silently) accepts and
sends nothing, and a blocked read would wait for ever (for the request timeout at best). The watch
asks for bookmarks, so a healthy stream is never silent for long: kube-apiserver sends one about
every minute (its ``bookmarkFrequency``) and one shortly before ``timeoutSeconds``. The stall bound
is the socket read timeout of the watch: until this reflector has seen two bookmarks, ``watch_timeout
+ 30`` s (nothing better is known: a server may send none); then ``STALL_FACTOR`` x the longest
interval seen between bookmarks (or from the watch's start to its first) + 1 s, at least
`STALL_MIN` (kube-apiserver: ~91 s; the test API server's 0.5 s: 5 s). It is applied to the open
socket as soon as it is learned. A read that waits longer is a stall: counted (`stalls`), and the
resource is re-listed (a relist emits only the differences). `stall_timeout` fixes the bound.

`stop()` sets a flag and shuts down the socket of the open response, so a blocked read returns at
once. Counters for metrics: `lists`, `relists`, `restarts` (reconnects after an error), `rewatches`
(normal stream ends), `events`, `errors`, `stalls`, `batches`; `last_error` holds the latest error
text; `connected` is True while the last list or watch answered (False after an error or a stall,
until the next answer); `last_contact` is the monotonic time of the last bytes received.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from urllib3.exceptions import ReadTimeoutError

from .httpio import Gone as _Gone, NotFound as _NotFound, Stalled as _Stalled, WatchError, abort as _abort
from .httpio import raise_status as _raise_status, set_read_timeout as _set_read_timeout, short as _short
from .httpio import timed_out as _timed_out

log = logging.getLogger("route_agent.k8s")

STALL_FACTOR = 1.5
STALL_MIN = 5.0


@dataclass(frozen=True, slots=True)
class Batch:
    resource: str  # the reflector's name, e.g. "services"
    upserts: tuple  # transformed objects that are new or changed
    deletes: tuple[str, ...]  # keys of objects gone
    synced: bool  # True on the batch that completes a (re)list: the store now equals the server


def default_key(obj: dict) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


class Reflector:
    def __init__(self, name: str, list_fn: Callable[..., Any], on_batch: Callable[[Batch], None], *,
                 transform: Callable[[dict], Any] = lambda obj: obj, key: Callable[[dict], str] = default_key,
                 watch_timeout: int = 300, backoff: tuple[float, float] = (0.5, 30.0),
                 list_kwargs: dict | None = None, not_found_retry: float = 300.0,
                 list_timeout: float = 60.0, page_size: int = 500,
                 stall_timeout: float | None = None) -> None:
        self.name = name
        self.stall_timeout = stall_timeout  # None: learned from the bookmarks (module DOC)
        self._bookmark_gap: float | None = None  # longest interval seen before a bookmark
        self._bookmarks_seen = 0
        self._mark = 0.0  # the watch's start or its last bookmark
        self.last_contact = time.monotonic()
        self.connected = False
        self.page_size = page_size
        self._list_fn = list_fn
        self._on_batch = on_batch
        self._transform = transform
        self._key = key
        self.watch_timeout = max(1, int(watch_timeout))
        self.backoff = backoff
        self.not_found_retry = not_found_retry
        self.list_timeout = list_timeout
        self._list_kwargs = dict(list_kwargs or {})
        self._store: dict[str, tuple[str, Any]] = {}
        self._rv: str | None = None
        self._stop = threading.Event()
        self._resp = None
        self._thread: threading.Thread | None = None
        self._synced = False
        self._failures = 0
        self.lists = self.relists = self.restarts = self.rewatches = 0
        self.events = self.errors = self.batches = self.stalls = 0
        self.last_error: str | None = None

    # -- public ------------------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once the first list has been handed on (stays True across reconnects)."""
        return self._synced

    @property
    def resource_version(self) -> str | None:
        return self._rv

    @property
    def stall_bound(self) -> float:
        """Seconds a watch may stay silent before it counts as stalled (module DOC)."""
        cap = self.watch_timeout + 30.0
        if self.stall_timeout is not None:
            return self.stall_timeout
        if self._bookmark_gap is None or self._bookmarks_seen < 2:
            return cap
        return min(cap, max(STALL_MIN, STALL_FACTOR * self._bookmark_gap + 1.0))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"reflector:{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            _abort(resp)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        absent = False  # the last list got 404
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    self._list()
                    absent = False
                self._watch()
            except _Gone:
                log.info("%s: resourceVersion %s expired (410): relisting", self.name, self._rv)
                self._rv = None
            except _Stalled as e:
                if self._stop.is_set():
                    break
                self.connected = False
                self.last_error = str(e)
                self.stalls += 1  # (last: a reader that sees the count sees the state it goes with)
                log.warning("%s: %s; relisting", self.name, e)
                self._rv = None
            except _NotFound:
                if self._rv is not None:  # the watch got 404: find out with a list
                    self._rv = None
                    continue
                self.connected = True  # an answer
                if not absent:
                    log.warning("%s: not served by the API server (404); retrying every %ss",
                                self.name, self.not_found_retry)
                    absent = True
                    deletes = tuple(self._store)
                    self._store.clear()
                    self._emit((), deletes, True)
                    self._synced = True
                self._stop.wait(self.not_found_retry)
            except Exception as e:  # noqa: BLE001 - any failure of the API or the connection
                if self._stop.is_set():
                    break
                self._failures += 1
                self.connected = False
                self.last_error = f"{type(e).__name__}: {_short(e)}"
                self.errors += 1  # (after the state it counts, as `stalls`)
                base, cap = self.backoff
                delay = min(cap, base * 2 ** (self._failures - 1)) * random.uniform(0.5, 1.0)
                log.warning("%s: %s; retrying in %.2fs (%s)", self.name, self.last_error, delay,
                            "relist" if self._rv is None else f"re-watch from {self._rv}")
                self._stop.wait(delay)
                self.restarts += 1
        self._resp = None

    def _call(self, **kwargs) -> Any:
        resp = self._list_fn(**self._list_kwargs, **kwargs, _preload_content=False)
        self._resp = resp
        if self._stop.is_set():  # stop() ran before _resp was visible to it
            _abort(resp)
        return resp

    def _list(self) -> None:
        """List in pages of `page_size` (the API server's ``limit``/``continue``): every page is
        parsed, reduced by `transform` and dropped before the next is read, so 10,000 Services
        never exist as one 40 MB tree of dicts. Nothing is stored before the last page: a list
        that fails half-way (a 410 on an expired continue token) leaves the store as it was."""
        marked: set[str] = set()
        upserts = []
        staged: list[tuple[str, Any, Any]] = []  # (key, resourceVersion, value) to store
        token = None
        rv = None
        count = 0
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size}
            if token:
                kwargs["_continue"] = token
            try:
                resp = self._call(_request_timeout=self.list_timeout, **kwargs)
            except Exception as e:
                _raise_status(e)
                raise
            try:
                body = json.loads(resp.data)
            finally:
                resp.release_conn()
                self._resp = None
            meta = body.get("metadata") or {}
            if rv is None:
                rv = meta["resourceVersion"]  # every page is of the first page's snapshot
            api_version, kind = body.get("apiVersion"), (body.get("kind") or "")
            kind = kind[:-4] if kind.endswith("List") else None
            items = body.get("items") or ()
            count += len(items)
            for item in items:
                if kind and "kind" not in item:
                    item["apiVersion"], item["kind"] = api_version, kind
                k = self._key(item)
                irv = item["metadata"].get("resourceVersion")
                old = self._store.get(k)
                if old is not None and old[0] == irv:
                    marked.add(k)
                    continue
                value = self._transformed(k, item)
                if value is _SKIP:  # a failing transform keeps the previous value
                    if old is not None:
                        marked.add(k)
                elif value is not _IGNORED:  # an ignored object is swept like a missing one
                    marked.add(k)
                    upserts.append(value)
                    staged.append((k, irv, value))
            token = meta.get("continue")
            del body, items
            if not token:
                break
        if self.lists:
            self.relists += 1
            log.info("%s: relisted, %d objects", self.name, count)
        self.lists += 1
        for k, irv, value in staged:
            self._store[k] = (irv, value)
        deletes = tuple(k for k in self._store if k not in marked)
        for k in deletes:
            del self._store[k]
        self._rv = rv
        self.connected, self.last_contact = True, time.monotonic()
        self._emit(tuple(upserts), deletes, True)
        self._synced = True
        self._failures = 0

    def _transformed(self, k: str, obj: dict) -> Any:
        """`transform(obj)`, or _IGNORED (it said None), or _SKIP (it raised)."""
        try:
            value = self._transform(obj)
        except Exception:  # noqa: BLE001 - a bad object must not stop the reflector
            log.exception("%s: cannot transform %s; keeping the previous value", self.name, k)
            return _SKIP
        return _IGNORED if value is None else value

    def _apply(self, k: str, obj: dict) -> Any:
        """Transform `obj` and store the value; or _IGNORED (transform said None), _SKIP (it raised)."""
        value = self._transformed(k, obj)
        if value is not _SKIP and value is not _IGNORED:
            self._store[k] = (obj["metadata"].get("resourceVersion"), value)
        return value

    def _watch(self) -> None:
        bound = self.stall_bound
        try:
            resp = self._call(watch=True, resource_version=self._rv, allow_watch_bookmarks=True,
                              timeout_seconds=self.watch_timeout, _request_timeout=(10, bound))
        except Exception as e:
            _raise_status(e)
            if _timed_out(e):
                raise _Stalled(f"no answer to the watch within {bound:.0f}s") from None
            raise
        self._failures = 0
        started, lines_seen = time.monotonic(), self.events
        self.connected, self.last_contact, self._mark = True, started, started
        try:
            buf = b""
            try:
                for chunk in resp.stream(amt=None, decode_content=False):
                    if self._stop.is_set():
                        return
                    self.last_contact = time.monotonic()
                    buf += chunk
                    if b"\n" not in chunk:
                        continue
                    *lines, buf = buf.split(b"\n")
                    self._handle(lines)
                    if self.stall_bound != bound:  # learned from the bookmarks: applies at once
                        bound = self.stall_bound
                        _set_read_timeout(resp, bound)
            except ReadTimeoutError:
                raise _Stalled(f"no event or bookmark for {bound:.0f}s: the watch is stalled") from None
            if buf.strip():
                self._handle([buf])
            self.rewatches += 1
            log.debug("%s: watch ended at %s, re-watching", self.name, self._rv)
            if time.monotonic() - started < 1.0 and self.events == lines_seen:
                self._stop.wait(self.backoff[0])  # an empty stream that ends at once: do not spin
        finally:
            self._resp = None
            resp.release_conn()

    def _handle(self, lines: list[bytes]) -> None:
        """One chunk of watch lines -> at most one Batch, coalesced per key."""
        changed: dict[str, Any] = {}  # key -> value or _DELETED
        had: dict[str, bool] = {}  # key -> was in the store before this chunk
        for line in lines:
            if not line.strip():
                continue
            ev = json.loads(line)
            etype, obj = ev.get("type"), ev.get("object") or {}
            if etype == "ERROR":
                self._flush(changed, had)
                if obj.get("code") == 410:
                    raise _Gone()
                raise WatchError(obj.get("code"), obj.get("reason"), obj.get("message"))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if etype == "BOOKMARK":
                self._rv = rv or self._rv
                now = time.monotonic()
                self._bookmark_gap = max(self._bookmark_gap or 0.0, now - self._mark)
                self._bookmarks_seen += 1
                self._mark = now
                continue
            self.events += 1
            k = self._key(obj)
            old = self._store.get(k)
            had.setdefault(k, old is not None)
            if etype == "DELETED":
                if old is not None:
                    del self._store[k]
                    changed[k] = _DELETED
            elif old is None or old[0] != rv:
                value = self._apply(k, obj)
                if value is _IGNORED:  # gone for the consumer
                    if old is not None:
                        del self._store[k]
                        changed[k] = _DELETED
                elif value is not _SKIP:
                    changed[k] = value
            if rv:
                self._rv = rv
        self._flush(changed, had)

    def _flush(self, changed: dict[str, Any], had: dict[str, bool]) -> None:
        if not changed:
            return
        upserts = tuple(v for v in changed.values() if v is not _DELETED)
        deletes = tuple(k for k, v in changed.items() if v is _DELETED and had[k])
        changed.clear()
        if upserts or deletes:
            self._emit(upserts, deletes, False)

    def _emit(self, upserts: tuple, deletes: tuple[str, ...], synced: bool) -> None:
        self.batches += 1
        try:
            self._on_batch(Batch(self.name, upserts, deletes, synced))
        except Exception:  # noqa: BLE001 - the consumer's bug must not kill the watch
            log.exception("%s: on_batch failed", self.name)


_DELETED = object()
_SKIP = object()
_IGNORED = object()
