"""A local Kubernetes API server for tests and benchmarks: plain HTTP, in-process, threads.

DOC: no kube-apiserver can run here, so this module speaks the part of its HTTP API the official
`kubernetes` client uses, against an in-memory store:

* Resources: core v1 ``nodes`` (cluster), ``services`` and ``events`` (namespaced),
  discovery.k8s.io/v1 ``endpointslices`` (namespaced), networking.k8s.io/v1 ``servicecidrs``
  (cluster), and any cluster-scoped plural of ``routeagent.io/v1alpha1`` (a CRD with the status
  subresource). Other paths get 404 with a ``Status`` body, as the real server answers.
* Verbs: list (``fieldSelector`` ``metadata.name``/``metadata.namespace``, ``labelSelector`` with
  ``k=v``, ``k!=v``, ``k``, ``!k``), watch, get, create, update (PUT, optimistic concurrency on
  ``metadata.resourceVersion``), patch (merge, strategic merge treated as merge, JSON patch), delete,
  and the ``/status`` subresource. Like the real server: list items of built-in types carry no
  ``apiVersion``/``kind``; writes to the main resource keep ``status`` for kinds that have a status
  subresource; a write that changes nothing is a no-op (no new resourceVersion, no event);
  ``generation`` moves when anything but metadata and status changes.
* Watch: a chunked HTTP/1.1 stream of ``{"type", "object"}`` lines. Every write bumps one global
  resourceVersion counter and appends an event to its resource's history (a bounded deque). A watch
  from version V replays the retained events newer than V and then follows; a V older than the
  retained window gets one ``ERROR`` event with a 410 ``Expired`` Status and the stream ends (what
  the real server does for "too old resource version"). No version (or "0") starts with synthetic
  ``ADDED`` events for the current objects. ``BOOKMARK`` events every `bookmark_interval` seconds
  when asked for; the stream ends cleanly at ``timeoutSeconds``. A watcher that falls further
  behind than the history is disconnected (its resume then gets 410), as the watch cache does.
  Label-selector watches see ``ADDED``/``DELETED`` when an object starts/stops matching.

Speed (10k+ objects, bursts of events): one lock; a `threading.Condition` per resource on which
watchers wait; each object is JSON-encoded once per write and that encoding is reused by every
watcher's event line and by lists (built-in list items are encoded once more, lazily, without
``apiVersion``/``kind``).

Test-side control (Python calls, thread-safe, work while the server is stopped): `KubeApiServer.put`,
`.delete`, `.get`, `.objects`, `.compact` (forget history: resuming from an older version gets 410),
`.close_watches` (drop open watch connections), `.hang` (a hung server: connections are accepted
and requests read, but nothing is answered and open watches fall silent, until ``hang(False)``,
when everything waiting proceeds), `.restart` (stop listening and drop every connection,
then listen again on the same port with the same objects and versions), `.calls` (a Counter of
``(verb, group, resource, subresource)`` with RBAC verb names, for an RBAC coverage test) and
`.kubeconfig(path)`. `node`, `service` and `endpoint_slice` build typical objects.

For kubectl (`kubectl apply -k deploy/` runs against it; tests/test_deploy_kubectl.py): the kinds of
the deploy bundle (Namespace, ServiceAccount, RBAC, DaemonSet, CRD, ValidatingAdmissionPolicy) and
Pods are stored like the others; a stored CRD makes its resource served, its OpenAPI schema
published (``/openapi/v3``) and enforced on writes over HTTP (unknown fields, schema, CEL rules:
`testlab.k8sapi_schema`), and its printer columns used for Table answers (`testlab.k8sapi_crd`).
``dryRun=All`` does everything but store (other values: 400); field selectors take any dotted path
(``involvedObject.uid``, ``spec.nodeName``). ``python -m testlab.k8sapi --port N`` starts one by
hand (`testlab.k8sapi_cli`).
"""

from __future__ import annotations

import collections
import copy
import itertools
import json
import logging
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from testlab import k8sapi_crd

RA_GROUP = "routeagent.io"
RA_VERSION = "v1alpha1"

log = logging.getLogger("route_agent.k8s.testapi")
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


BUILTIN_TYPES = (
    ResourceType("", "v1", "nodes", "Node", False, True),
    ResourceType("", "v1", "services", "Service", True, True),
    ResourceType("", "v1", "events", "Event", True, False),
    ResourceType("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, False),
    ResourceType("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, True),
    # what `kubectl apply -k deploy/` writes, and what `kubectl describe node` reads
    ResourceType("", "v1", "namespaces", "Namespace", False, True),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, False),
    ResourceType("", "v1", "pods", "Pod", True, True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, True),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, False),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, False),
    ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                 False, True),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                 "ValidatingAdmissionPolicy", False, True),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
                 "ValidatingAdmissionPolicyBinding", False, False),
)
# routeagent.io kinds whose plural is not derivable from the kind name alone
_RA_KINDS = {
    "advertisements": "Advertisement", "agentconfigs": "AgentConfig", "bgppeers": "BgpPeer",
    "bgpspeakers": "BgpSpeaker", "routepolicies": "RoutePolicy", "staticroutes": "StaticRoutes",
    "routeagentnodestates": "RouteAgentNodeState", "bfdprofiles": "BfdProfile",
}


def plural_of(kind: str) -> str:
    """The plural of a routeagent.io kind, derived as `agent.crds.kind_info` does."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def _custom_type(plural: str, kind: str | None = None) -> ResourceType:
    kind = kind or _RA_KINDS.get(plural) or plural[:1].upper() + plural[1:]
    return ResourceType(RA_GROUP, RA_VERSION, plural, kind, False, True, builtin=False)


class ApiError(Exception):
    """An HTTP error answered with a Status object."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict:
        out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


def _not_found(rt: ResourceType | None, name: str = "") -> ApiError:
    what = f'{rt.plural}{"." + rt.group if rt and rt.group else ""}' if rt else "resource"
    return ApiError(404, "NotFound", f'{what} "{name}" not found' if name else "the server could not "
                    "find the requested resource", {"name": name, "kind": rt.plural if rt else ""})


# ---------------------------------------------------------------------------------------------
# the store
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    obj: dict
    raw: bytes  # the object's JSON, encoded once per write
    item: bytes | None = None  # list-item JSON (built-ins: without apiVersion/kind), lazily


@dataclass(slots=True)
class _Event:
    rv: int
    type: str
    obj: dict
    prev: dict | None  # the object before a MODIFIED (label-selector watches need it)
    raw: bytes
    line: bytes  # b'{"type":...,"object":...}\n'


def _line(etype: str, raw: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (etype.encode(), raw)


@dataclass(eq=False)
class _Store:
    rt: ResourceType
    cond: threading.Condition
    history: collections.deque
    objects: dict = field(default_factory=dict)  # (namespace or "", name) -> _Entry
    floor: int = 0  # a watch from a version older than this gets 410
    trimmed: int = 0  # newest rv of an event dropped from history: watchers at older positions fell behind

    def append(self, event: _Event) -> None:
        if len(self.history) == self.history.maxlen:
            self.trimmed = self.floor = self.history[0].rv
        self.history.append(event)

    def events_after(self, pos: int) -> list[_Event] | None:
        """Retained events newer than `pos`, oldest first; None if some were dropped already."""
        out = []
        for ev in reversed(self.history):
            if ev.rv <= pos:
                break
            out.append(ev)
        else:
            if self.trimmed > pos:
                return None
        out.reverse()
        return out


# ---------------------------------------------------------------------------------------------
# selectors, patches
# ---------------------------------------------------------------------------------------------


def _selector(field_sel: str, label_sel: str) -> Callable[[dict], bool] | None:
    tests: list[Callable[[dict], bool]] = []
    for term in filter(None, (t.strip() for t in field_sel.split(","))):
        neg = "!=" in term
        path, _, want = term.partition("!=" if neg else "=")
        path, want = path.rstrip("="), want.lstrip("=")
        keys = path.strip().split(".")
        if not all(keys):
            raise ApiError(400, "BadRequest", f'field label not supported: {path}')
        tests.append(lambda o, k=keys, w=want, n=neg: (_field(o, k) == w) != n)
    for term in filter(None, (t.strip() for t in label_sel.split(","))):
        if "!=" in term:
            k, _, v = term.partition("!=")
            tests.append(lambda o, k=k.strip(), v=v.strip(): _labels(o).get(k) != v)
        elif "=" in term:
            k, _, v = term.partition("=")
            tests.append(lambda o, k=k.strip(), v=v.lstrip("=").strip(): _labels(o).get(k) == v)
        elif term.startswith("!"):
            tests.append(lambda o, k=term[1:].strip(): k not in _labels(o))
        elif " in " in term or " notin " in term:
            raise ApiError(400, "BadRequest", f"set-based selectors are not supported here: {term}")
        else:
            tests.append(lambda o, k=term: k in _labels(o))
    if not tests:
        return None
    return lambda o: all(t(o) for t in tests)


def _labels(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


def _field(obj: dict, keys: list[str]) -> str:
    """A field selector's value: the text of a scalar at a dotted path ("" when absent), as the
    real server's field sets give it (involvedObject.uid of Events, spec.nodeName of Pods ...)."""
    node: Any = obj
    for k in keys:
        node = node.get(k) if isinstance(node, dict) else None
    if isinstance(node, bool):
        return str(node).lower()
    return "" if node is None or isinstance(node, (dict, list)) else str(node)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are applied the same way here)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(doc: Any, ops: list) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, test (enough for tests)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1] if parts else None
        kind = op["op"]
        try:
            if kind == "test":
                cur = parent[int(last)] if isinstance(parent, list) else parent[last]
                if cur != op["value"]:
                    raise ApiError(422, "Invalid", f"test failed at {op['path']}")
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    idx = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(idx, op["value"])
                    else:
                        parent[idx] = op["value"]
                else:
                    if kind == "replace" and last not in parent:
                        raise KeyError(last)
                    parent[last] = op["value"]
            else:
                raise ApiError(400, "BadRequest", f"unsupported JSON patch op {kind}")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiError(422, "Invalid", f"JSON patch {kind} {op['path']}: {e!r}") from None
    return doc


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _content(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


# ---------------------------------------------------------------------------------------------
# the server
# ---------------------------------------------------------------------------------------------


class KubeApiServer:
    """An in-memory Kubernetes API server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, port: int = 0, history: int = 1000, bookmark_interval: float = 1.0,
                 host: str = "127.0.0.1", default_watch_timeout: float = 1800.0) -> None:
        self.host, self.port = host, port
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = default_watch_timeout
        self.calls: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self._rv = 100
        self._stores: dict[tuple[str, str, str], _Store] = {}
        self._kinds: dict[tuple[str, str], ResourceType] = {}  # (apiVersion, kind) -> type
        for rt in BUILTIN_TYPES:
            self._register(rt)
        for plural in _RA_KINDS:
            self._register(_custom_type(plural))
        self._watchers: set[_WatchConn] = set()
        self._request: _Request | None = None  # the HTTP write being served (set under the lock)
        self._snapshots: dict[str, tuple[str, list[bytes]]] = {}  # paged lists in progress
        self._snapshot_ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._hung = False
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "KubeApiServer":
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.api = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"kube-testapi:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection (open watches and idle keep-alive ones)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        self.close_watches()
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for sock in conns:
            _shutdown(sock)
        if self._thread:
            self._thread.join(5)

    def restart(self) -> None:
        """An API server restart: every connection drops; objects and versions survive."""
        self.stop()
        self.start()

    def __enter__(self) -> "KubeApiServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def kubeconfig(self, path) -> str:
        """Write a kubeconfig (no auth, plain http) pointing at this server; returns the path."""
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }
        with open(path, "w") as f:
            json.dump(cfg, f)  # JSON is YAML
        return str(path)

    def api_client(self):
        """A `kubernetes.client.ApiClient` for this server (imports the client lazily)."""
        from kubernetes import client
        return client.ApiClient(client.Configuration(host=self.url))

    # -- test-side API -----------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._rv)

    def put(self, obj: dict) -> dict:
        """Create or replace `obj` (status included, as given); returns the stored copy."""
        rt = self._type_of(obj["apiVersion"], obj["kind"])
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "default") if rt.namespaced else ""
        with self._lock:
            store = self._store(rt)
            old = store.objects.get((ns, meta["name"]))
            new = copy.deepcopy(obj)
            if rt.namespaced:
                new["metadata"]["namespace"] = ns
            new["metadata"].pop("resourceVersion", None)
            return copy.deepcopy(self._commit(store, old.obj if old else None, new))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        rt = self._type_of(api_version, kind)
        with self._lock:
            store = self._store(rt)
            key = ((namespace or "default") if rt.namespaced else "", name)
            if key not in store.objects:
                return False
            self._commit(store, store.objects[key].obj, None)
            return True

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        rt = self._type_of(api_version, kind)
        with self._lock:
            entry = self._store(rt).objects.get(((namespace or "default") if rt.namespaced else "", name))
            return copy.deepcopy(entry.obj) if entry else None

    def objects(self, api_version: str, kind: str) -> list[dict]:
        rt = self._type_of(api_version, kind)
        with self._lock:
            return [copy.deepcopy(e.obj) for e in self._store(rt).objects.values()]

    def compact(self) -> None:
        """Forget all history: every watch resuming from any version handed out so far gets 410.

        The global version moves on by one (as etcd's revision does with writes elsewhere), so a
        client that relists gets a version it can watch from. Open watches are not affected.
        """
        with self._lock:
            self._rv += 1
            for store in self._stores.values():
                if store.history:
                    store.trimmed = store.history[-1].rv
                store.history.clear()
                store.floor = self._rv

    def hang(self, on: bool = True) -> None:
        """Answer nothing (``on``) or carry on; see the module DOC."""
        with self._lock:
            self._hung = on
            for store in self._stores.values():
                store.cond.notify_all()

    def _wait_while_hung(self) -> bool:
        """Block a request while the server hangs; False if it stopped meanwhile."""
        with self._lock:
            while self._hung and self._httpd is not None:
                self._stores[("", "v1", "nodes")].cond.wait(0.2)
            return self._httpd is not None

    def close_watches(self) -> None:
        """Drop every open watch connection (the clients see the connection break)."""
        with self._lock:
            watchers = list(self._watchers)
            for w in watchers:
                w.killed = True
            for store in self._stores.values():
                store.cond.notify_all()
        for w in watchers:
            _shutdown(w.sock)

    # -- internals: store ----------------------------------------------------------------------

    def _register(self, rt: ResourceType) -> _Store:
        store = _Store(rt, threading.Condition(self._lock), collections.deque(maxlen=self.history))
        self._stores[(rt.group, rt.version, rt.plural)] = store
        self._kinds[(rt.api_version, rt.kind)] = rt
        return store

    def _store(self, rt: ResourceType) -> _Store:
        return self._stores.get((rt.group, rt.version, rt.plural)) or self._register(rt)

    def _type_of(self, api_version: str, kind: str) -> ResourceType:
        rt = self._kinds.get((api_version, kind))
        if rt is None:
            if api_version != f"{RA_GROUP}/{RA_VERSION}":
                raise KeyError(f"unknown resource {api_version} {kind}")
            rt = _custom_type(plural_of(kind), kind)
        return rt

    def _lookup(self, group: str, version: str, plural: str) -> _Store | None:
        store = self._stores.get((group, version, plural))
        if store is None and (rt := k8sapi_crd.crd_type(self, group, version, plural)) is not None:
            store = self._register(rt)  # a resource of a CRD applied to this server
        if store is None and group == RA_GROUP and version == RA_VERSION and plural.isalnum():
            store = self._register(_custom_type(plural))
        return store

    def _commit(self, store: _Store, old: dict | None, new: dict | None) -> dict:
        """Store `new` (None: delete `old`), emit the event; caller holds the lock. No-op writes are free."""
        rt = store.rt
        req = self._request
        if req is not None and new is not None:  # a write over HTTP: what kube-apiserver admits
            new = k8sapi_crd.admit(self, rt, old, copy.deepcopy(new) if req.dry else new, req.strict)
        if new is None:
            if req is not None and req.dry:
                return copy.deepcopy(old)
            self._rv += 1
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            raw = _dumps(gone).encode()
            meta = gone["metadata"]
            del store.objects[(meta.get("namespace", ""), meta["name"])]
            store.append(_Event(self._rv, "DELETED", gone, None, raw, _line("DELETED", raw)))
            store.cond.notify_all()
            return gone
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        meta = new.setdefault("metadata", {})
        if old is not None:
            ometa = old["metadata"]
            for k in ("uid", "creationTimestamp"):
                meta[k] = ometa[k]
            meta["generation"] = ometa.get("generation", 1) + (_content(old) != _content(new))
            meta["resourceVersion"] = ometa["resourceVersion"]
            if new == old:
                return old
        else:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
        if req is not None and req.dry:  # dryRun=All: everything but storing it
            return new
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        raw = _dumps(new).encode()
        store.objects[(meta.get("namespace", ""), meta["name"])] = _Entry(new, raw)
        etype = "MODIFIED" if old is not None else "ADDED"
        store.append(_Event(self._rv, etype, new, old, raw, _line(etype, raw)))
        store.cond.notify_all()
        return new

    # -- internals: verbs ----------------------------------------------------------------------

    def _list_page(self, store: _Store, ns: str | None, match, limit: str | None,
                   token: str | None) -> bytes:
        """A list, or one page of it (``limit``/``continue``, as the real API server pages: every
        page is of the snapshot taken by the first; an unknown or expired token is 410 Expired).
        Caller holds the lock."""
        if token:
            snap = self._snapshots.get(token.partition(":")[0])
            if snap is None:
                raise ApiError(410, "Expired", "the provided continue parameter is too old")
            rv, items = snap
            offset = int(token.partition(":")[2])
        else:
            rv, items, offset = str(self._rv), self._list_items(store, ns, match), 0
        n = int(limit) if limit and int(limit) > 0 else len(items)
        page, rest = items[offset:offset + n], len(items) - offset - n
        meta: dict = {"resourceVersion": rv}
        if rest > 0:
            sid = token.partition(":")[0] if token else str(next(self._snapshot_ids))
            if not token:
                self._snapshots[sid] = (rv, items)
                while len(self._snapshots) > 32:
                    self._snapshots.pop(next(iter(self._snapshots)))
            meta["continue"] = f"{sid}:{offset + n}"
            meta["remainingItemCount"] = rest
        elif token:
            self._snapshots.pop(token.partition(":")[0], None)
        rt = store.rt
        head = _dumps({"apiVersion": rt.api_version, "kind": rt.kind + "List", "metadata": meta})
        return head[:-1].encode() + b',"items":[' + b",".join(page) + b"]}"

    def _list_items(self, store: _Store, ns: str | None, match) -> list[bytes]:
        rt = store.rt
        items = []
        for (ons, _), e in store.objects.items():
            if (ns is not None and ons != ns) or (match is not None and not match(e.obj)):
                continue
            if e.item is None:
                e.item = _dumps({k: v for k, v in e.obj.items() if k not in ("apiVersion", "kind")}
                                ).encode() if rt.builtin else e.raw
            items.append(e.item)
        return items

    def _write(self, method: str, store: _Store, ns: str | None, name: str, sub: str,
               body: Any, ctype: str) -> tuple[int, dict]:
        """create / update / patch / delete; caller holds the lock."""
        rt = store.rt
        key = (ns or "", name)
        old = store.objects[key].obj if key in store.objects else None
        if method == "POST":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "body must be an object")
            new = copy.deepcopy(body)
            meta = new.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            name = meta.get("name")
            if not name:
                raise ApiError(422, "Invalid", "metadata.name: Required value")
            if rt.namespaced:
                if meta.get("namespace", ns) != ns:
                    raise ApiError(400, "BadRequest", "the namespace of the object does not match the "
                                   "namespace on the request")
                meta["namespace"] = ns
            if (ns or "", name) in store.objects:
                raise ApiError(409, "AlreadyExists", f'{rt.plural} "{name}" already exists',
                               {"name": name, "group": rt.group, "kind": rt.plural})
            for k in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                meta.pop(k, None)
            if not rt.builtin:
                new.pop("status", None)  # CRD with status subresource: create ignores status
            return 201, self._commit(store, None, new)
        if old is None:
            raise _not_found(rt, name)
        if method == "DELETE":
            self._commit(store, old, None)
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "group": rt.group, "kind": rt.plural,
                                     "uid": old["metadata"]["uid"]}}
        if method == "PATCH":
            if isinstance(body, list) or "json-patch" in ctype:
                if not isinstance(body, list):
                    raise ApiError(400, "BadRequest", "a JSON patch must be a list")
                new = json_patch(old, body)
            elif isinstance(body, dict):
                new = merge_patch(old, body)
            else:
                raise ApiError(400, "BadRequest", "patch body must be an object")
        else:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "body must be an object")
            new = copy.deepcopy(body)
        meta = new.setdefault("metadata", {})
        want_rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if want_rv and want_rv != old["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.plural} "{name}": the '
                           "object has been modified; please apply your changes to the latest version "
                           "and try again", {"name": name, "group": rt.group, "kind": rt.plural})
        if meta.get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = ns
        if sub == "status":
            merged = copy.deepcopy(old)
            merged.pop("status", None)
            if "status" in new:
                merged["status"] = new["status"]
            new = merged
        elif rt.status_subresource:
            new.pop("status", None)
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
        return 200, self._commit(store, old, new)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    api: KubeApiServer

    def process_request(self, request, client_address):
        with self.api._lock:
            self.api._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.api._lock:
            self.api._conns.discard(request)
        super().shutdown_request(request)


@dataclass(eq=False)
class _WatchConn:
    sock: socket.socket
    killed: bool = False


_RBAC = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class _Request:
    """Options of one write over HTTP: ``dryRun=All`` (store nothing), ``fieldValidation=Strict``."""

    dry: bool = False
    strict: bool = False

    @classmethod
    def of(cls, q: dict) -> "_Request":
        dry = q.get("dryRun", "")
        if dry not in ("", "All"):
            raise ApiError(400, "BadRequest", f'Invalid value: "{dry}": dryRun: Unsupported value: '
                           f'"{dry}": supported values: "All"')
        validation = q.get("fieldValidation", "")
        if validation not in ("", "Ignore", "Warn", "Strict"):
            raise ApiError(400, "BadRequest", f'Invalid value: "{validation}": fieldValidation: '
                           'supported values: "Ignore", "Warn", "Strict"')
        return cls(dry == "All", validation == "Strict")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-testapi/1"
    server: _HTTPServer

    def log_message(self, format, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _send(self, code: int, body: bytes | dict) -> None:
        data = body if isinstance(body, bytes) else _dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _serve(self, method: str) -> None:
        api = self.server.api
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length) if length else b""
        if not api._wait_while_hung():
            self.close_connection = True
            return
        try:
            url = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(url.query).items()}
            segs = [s for s in url.path.split("/") if s]
            if method == "GET" and (disc := _discovery(api, segs)) is not None:
                return self._send(200, disc)
            accept = self.headers.get("Accept", "")
            if method == "GET" and (doc := k8sapi_crd.openapi(api, segs, accept)) is not None:
                return self._send(*doc)
            store, ns, name, sub = self._route(api, segs)
            rt = store.rt
            if method == "GET" and not name:
                watch = q.get("watch", "") in ("true", "1")
                api.calls[("watch" if watch else "list", rt.group, rt.plural, "")] += 1
                match = _selector(q.get("fieldSelector", ""), q.get("labelSelector", ""))
                if watch:
                    return self._watch(api, store, ns, q, match)
                if k8sapi_crd.wants_table(accept) and \
                        (tab := k8sapi_crd.list_table(api, store, ns, match, q)) is not None:
                    return self._send(200, tab)
                with api._lock:
                    body = api._list_page(store, ns, match, q.get("limit"), q.get("continue"))
                return self._send(200, body)
            if (method == "POST") == bool(name) or (rt.namespaced and method == "POST" and ns is None):
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on {self.path}")
            api.calls[(_RBAC.get(method, "get"), rt.group, rt.plural, sub)] += 1
            if method == "GET":
                with api._lock:
                    entry = store.objects.get((ns or "", name))
                if entry is None:
                    raise _not_found(rt, name)
                if k8sapi_crd.wants_table(accept) and (tab := k8sapi_crd.table(
                        api, rt, [entry.obj], entry.obj["metadata"]["resourceVersion"], q)) is not None:
                    return self._send(200, tab)
                return self._send(200, entry.raw)
            try:
                body = json.loads(raw_body) if raw_body else None
            except ValueError as e:
                raise ApiError(400, "BadRequest", f"invalid JSON: {e}") from None
            if method == "DELETE":  # DeleteOptions (grace period, preconditions) are ignored
                body = None
            req = _Request.of(q)
            with api._lock:
                api._request = req
                try:
                    code, obj = api._write(method, store, ns, name, sub, body,
                                           self.headers.get("Content-Type", ""))
                finally:
                    api._request = None
                data = _dumps(obj).encode()
            self._send(code, data)
        except ApiError as e:
            self._send(e.code, e.status())
        except Exception as e:  # a bug here: answer 500 like the real server would, keep serving
            log.exception("kube-testapi: %s %s", method, self.path)
            self._send(500, ApiError(500, "InternalError", repr(e)).status())

    def _route(self, api: KubeApiServer, segs: list[str]) -> tuple[_Store, str | None, str, str]:
        if segs[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise _not_found(None)
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _not_found(None)
        store = api._lookup(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if store is None or (ns is not None and not store.rt.namespaced) \
                or (store.rt.namespaced and name and ns is None) \
                or (sub and (sub != "status" or not store.rt.status_subresource)):
            raise _not_found(store.rt if store else None, name)
        return store, ns, name, sub

    # -- watch ------------------------------------------------------------------------------

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _watch(self, api: KubeApiServer, store: _Store, ns: str | None, q: dict, match) -> None:
        rv = q.get("resourceVersion", "")
        try:
            timeout = float(q.get("timeoutSeconds") or api.default_watch_timeout)
            pos = int(rv) if rv not in ("", "0") else None
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid resourceVersion or timeoutSeconds") from None
        bookmarks = q.get("allowWatchBookmarks", "") in ("true", "1")
        deadline = time.monotonic() + timeout
        me = _WatchConn(self.connection)
        first: list[bytes] = []
        with api._lock:
            if pos is None:
                pos = api._rv
                first = [_line("ADDED", e.raw) for (ons, _), e in store.objects.items()
                         if (ns is None or ons == ns) and (match is None or match(e.obj))]
            elif pos < store.floor:
                first = [_line("ERROR", _dumps(ApiError(
                    410, "Expired", f"too old resource version: {pos} ({store.floor})").status()).encode())]
                pos = -1
            api._watchers.add(me)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if first:
                self._chunk(b"".join(first))
            if pos < 0:
                return self._chunk(b"")
            next_bookmark = time.monotonic() + api.bookmark_interval
            while True:
                data = b""
                with store.cond:
                    while True:
                        if me.killed:
                            self.close_connection = True
                            return
                        if api._hung:  # silent: no event, no bookmark, until it carries on
                            store.cond.wait(0.2)
                            next_bookmark = time.monotonic() + api.bookmark_interval
                            continue
                        events = store.events_after(pos)
                        if events is None:  # fell behind the history: drop, as the watch cache does
                            self.close_connection = True
                            return
                        if events:
                            pos = events[-1].rv
                            data = b"".join(_filter(events, ns, match))
                            if data:
                                break
                            continue
                        now = time.monotonic()
                        if now >= deadline:
                            break
                        if bookmarks and now >= next_bookmark:
                            pos = api._rv
                            data = _line("BOOKMARK", _dumps({
                                "apiVersion": store.rt.api_version, "kind": store.rt.kind,
                                "metadata": {"resourceVersion": str(pos)}}).encode())
                            next_bookmark = now + api.bookmark_interval
                            break
                        store.cond.wait(min(deadline, next_bookmark if bookmarks else deadline) - now)
                if not data:  # deadline: end the stream cleanly, keep the connection
                    return self._chunk(b"")
                self._chunk(data)
        except OSError:
            self.close_connection = True
        finally:
            with api._lock:
                api._watchers.discard(me)


def _filter(events: list[_Event], ns: str | None, match) -> list[bytes]:
    out = []
    for ev in events:
        if ns is not None and ev.obj["metadata"].get("namespace") != ns:
            continue
        if match is None:
            out.append(ev.line)
            continue
        now = match(ev.obj)
        before = ev.prev is not None and match(ev.prev)
        if ev.type == "MODIFIED" and now != before:
            out.append(_line("ADDED" if now else "DELETED", ev.raw))
        elif now:
            out.append(ev.line)
    return out


def _discovery(api: KubeApiServer, segs: list[str]) -> dict | None:
    if segs == ["version"]:
        return {"major": "1", "minor": "33", "gitVersion": "v1.33.0-testapi", "gitCommit": "0" * 40,
                "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24",
                "compiler": "gc", "platform": "linux/amd64"}
    if segs == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
    if segs == ["apis"]:
        groups = sorted({(s.rt.group, s.rt.version) for s in api._stores.values() if s.rt.group})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
             "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}} for g, v in groups]}
    if segs == ["api", "v1"] or (len(segs) == 3 and segs[0] == "apis"):
        group, version = ("", "v1") if segs[0] == "api" else (segs[1], segs[2])
        res = [s.rt for s in api._stores.values() if (s.rt.group, s.rt.version) == (group, version)]
        if not res:
            return None
        out = []
        for rt in res:
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            out.append({"name": rt.plural, "namespaced": rt.namespaced, "kind": rt.kind, "verbs": verbs,
                        **k8sapi_crd.discovery_extra(api, rt)})
            if rt.status_subresource:
                out.append({"name": rt.plural + "/status", "namespaced": rt.namespaced, "kind": rt.kind,
                            "verbs": ["get", "patch", "update"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": out}
    return None


# ---------------------------------------------------------------------------------------------
# typical objects
# ---------------------------------------------------------------------------------------------


def node(name: str, pod_cidrs=(), addresses=(), labels: dict | None = None) -> dict:
    """A Node; `addresses` are IPs (InternalIP) or (type, address) pairs."""
    addrs = [{"type": "InternalIP", "address": a} if isinstance(a, str) else {"type": a[0], "address": a[1]}
             for a in addresses]
    spec: dict = {}
    if pod_cidrs:
        spec = {"podCIDR": pod_cidrs[0], "podCIDRs": list(pod_cidrs)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": {"addresses": addrs}}


def service(name: str, namespace: str = "default", cluster_ips=(), *, type: str = "ClusterIP",
            external_ips=(), lb_ips=(), ports=((80, "TCP"),), labels: dict | None = None,
            annotations: dict | None = None, external_traffic_policy: str | None = None) -> dict:
    spec: dict = {"type": type, "ports": [{"port": p, "protocol": proto} for p, proto in ports]}
    if cluster_ips:
        spec["clusterIP"], spec["clusterIPs"] = cluster_ips[0], list(cluster_ips)
    if external_ips:
        spec["externalIPs"] = list(external_ips)
    if external_traffic_policy:
        spec["externalTrafficPolicy"] = external_traffic_policy
    meta: dict = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    status = {"loadBalancer": {"ingress": [{"ip": ip} for ip in lb_ips]} if lb_ips else {}}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec, "status": status}


def endpoint_slice(name: str, service_name: str, namespace: str = "default", addresses=(), *,
                   node_name: str | None = None, ready: bool = True, address_type: str = "IPv4",
                   ports=((80, "TCP"),)) -> dict:
    """An EndpointSlice of `service_name`; one endpoint per address (all on `node_name`)."""
    eps = []
    for a in addresses:
        ep: dict = {"addresses": [a], "conditions": {"ready": ready, "serving": ready, "terminating": False}}
        if node_name:
            ep["nodeName"] = node_name
        eps.append(ep)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": address_type,
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": service_name}},
            "endpoints": eps, "ports": [{"port": p, "protocol": proto} for p, proto in ports]}


if __name__ == "__main__":  # python -m testlab.k8sapi --port N (testlab/k8sapi_cli.py)
    import sys

    from testlab.k8sapi_cli import main

    sys.exit(main())
