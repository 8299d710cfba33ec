"""What the test API server derives from the CustomResourceDefinitions it stores: types, OpenAPI, tables.

DOC: kubectl needs more of an API server than the agent does. Everything here is computed from
the objects stored in `testlab.k8sapi.KubeApiServer` (above all the CRDs applied with
``kubectl apply -k deploy/``), never from the product package:

* `crd_type(api, group, version, plural)`: a stored CRD makes its resource servable (any group;
  routeagent.io kinds are also served without one, for tests that put objects directly);
  `crd_of(api, rt)` finds the CRD of a type; `discovery_extra` adds its ``shortNames``,
  ``singularName`` and ``categories`` to discovery (``kubectl get rapeer``, ``kubectl get
  route-agent``).
* `openapi(api, path, query)`: ``/openapi/v3`` (the index of group-versions),
  ``/openapi/v3/apis/G/V`` and ``/openapi/v3/api/v1`` (paths with the
  ``x-kubernetes-group-version-kind`` and the ``dryRun``/``fieldValidation`` parameters kubectl
  looks for before it leaves validation to the server, schemas from the CRDs for ``kubectl
  explain``), and ``/openapi/v2`` in JSON (kubectl asks v2 for protobuf only, as a fallback when
  v3 is missing; it gets 406 here).
* `table(api, rt, objs, query)`: the ``meta.k8s.io/v1`` Table kubectl asks for (``get``, ``-o
  wide``): Name and the CRD's ``additionalPrinterColumns`` (simple JSON paths as the generated
  CRDs use: ``.spec.peerAddress``, ``.spec.routes[0].prefix``), ``date`` columns as ages ("5m"), as
  the real server renders them; rows carry the object's metadata (``includeObject=Object``: the
  whole object). Built-in kinds get no table (their printers are in kube-apiserver's Go code):
  kubectl prints the plain list then.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from typing import Any

CRD_KEY = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
_PATCH_PARAMS = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                 for n in ("dryRun", "fieldManager", "fieldValidation", "force")]


def _crds(api) -> list[dict]:
    store = api._stores.get(CRD_KEY)
    return [e.obj for e in list(store.objects.values())] if store else []


def crd_type(api, group: str, version: str, plural: str):
    """The ResourceType of a stored CRD serving group/version/plural, or None (takes the lock)."""
    from testlab.k8sapi import ResourceType

    with api._lock:
        crds = _crds(api)
    for crd in crds:
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        if spec.get("group") != group or names.get("plural") != plural:
            continue
        for v in spec.get("versions", []):
            if v.get("name") == version and v.get("served", True):
                return ResourceType(group, version, plural, names["kind"], spec.get("scope") == "Namespaced",
                                    "status" in (v.get("subresources") or {}), builtin=False)
    return None


def crd_of(api, rt, locked: bool = False) -> dict | None:
    """The stored CRD of a custom resource type (`locked`: the caller holds the lock)."""
    if rt.builtin:
        return None
    if not locked:
        with api._lock:
            return crd_of(api, rt, locked=True)
    for crd in _crds(api):
        spec = crd.get("spec", {})
        if spec.get("group") == rt.group and spec.get("names", {}).get("plural") == rt.plural:
            return crd
    return None


_BUILTIN_SHORT = {"customresourcedefinitions": ["crd", "crds"], "namespaces": ["ns"], "nodes": ["no"],
                  "serviceaccounts": ["sa"], "daemonsets": ["ds"], "services": ["svc"], "pods": ["po"],
                  "events": ["ev"]}


def discovery_extra(api, rt) -> dict:
    if rt.builtin:
        short = _BUILTIN_SHORT.get(rt.plural)
        return {"shortNames": short} if short else {}
    crd = crd_of(api, rt)
    if crd is None:
        return {}
    names = crd["spec"]["names"]
    out = {"singularName": names.get("singular", "")}
    for key in ("shortNames", "categories"):
        if names.get(key):
            out[key] = list(names[key])
    return out


# ---------------------------------------------------------------------------------------------
# OpenAPI
# ---------------------------------------------------------------------------------------------


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _types(api) -> list:
    return [s.rt for s in list(api._stores.values())]


def _schema_name(rt) -> str:
    return ".".join(reversed(rt.group.split("."))) + f".{rt.version}.{rt.kind}" if rt.group else \
        f"io.k8s.api.core.{rt.version}.{rt.kind}"


def _schema(api, rt) -> dict:
    crd = crd_of(api, rt)
    schema: dict = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if crd is not None:
        for v in crd["spec"]["versions"]:
            if v["name"] == rt.version and (v.get("schema") or {}).get("openAPIV3Schema"):
                schema = json.loads(json.dumps(v["schema"]["openAPIV3Schema"]))
                props = schema.setdefault("properties", {})
                props["metadata"] = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    return {**schema, "x-kubernetes-group-version-kind": [gvk]}


def _paths(rt) -> dict:
    base = "/" + _gv_path(rt.group, rt.version)
    prefix = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}

    def op(verb: str, params: list | None = None) -> dict:
        return {"operationId": f"{verb}{rt.kind}", "x-kubernetes-group-version-kind": gvk,
                "x-kubernetes-action": verb, "parameters": params or [], "responses": ok}

    item = {"get": op("get"), "put": op("put", _PATCH_PARAMS), "patch": op("patch", _PATCH_PARAMS),
            "delete": op("delete", _PATCH_PARAMS[:1])}
    out = {f"{prefix}/{rt.plural}/{{name}}": item,
           f"{prefix}/{rt.plural}": {"get": op("list"), "post": op("post", _PATCH_PARAMS)}}
    if rt.status_subresource:
        out[f"{prefix}/{rt.plural}/{{name}}/status"] = {"get": op("get"), "patch": op("patch", _PATCH_PARAMS),
                                                        "put": op("put", _PATCH_PARAMS)}
    return out


def _gv_doc(api, group: str, version: str) -> dict | None:
    types = [rt for rt in _types(api) if (rt.group, rt.version) == (group, version)]
    if not types:
        return None
    paths: dict = {}
    schemas = {"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "description": "Standard object's metadata."}}
    for rt in types:
        paths.update(_paths(rt))
        schemas[_schema_name(rt)] = _schema(api, rt)
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (test API server)", "version": "v1.33.0"},
            "paths": paths, "components": {"schemas": schemas}}


def _hash(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def openapi(api, segs: list[str], accept: str) -> tuple[int, dict] | None:
    """The answer to a GET of /openapi/...: (status, body), or None for other paths."""
    if segs[:1] != ["openapi"]:
        return None
    if segs == ["openapi", "v3"]:
        gvs = sorted({(rt.group, rt.version) for rt in _types(api)})
        index = {}
        for g, v in gvs:
            doc = _gv_doc(api, g, v)
            index[_gv_path(g, v)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={_hash(doc)}"}
        return 200, {"paths": index}
    if segs[:2] == ["openapi", "v3"]:
        rest = segs[2:]
        if rest[:1] == ["api"] and len(rest) == 2:
            doc = _gv_doc(api, "", rest[1])
        elif rest[:1] == ["apis"] and len(rest) == 3:
            doc = _gv_doc(api, rest[1], rest[2])
        else:
            doc = None
        return (200, doc) if doc is not None else None
    if segs == ["openapi", "v2"]:
        if "json" not in accept and "*/*" not in accept:
            return 406, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 406,
                         "reason": "NotAcceptable", "message": "only application/json is served here"}
        definitions, paths = {}, {}
        for rt in _types(api):
            definitions[_schema_name(rt)] = _v2(_schema(api, rt))
            for path, item in _paths(rt).items():
                paths[path] = {verb: {**op, "parameters": [{"name": p["name"], "in": "query", "type": "string"}
                                                           for p in op["parameters"]]}
                               for verb, op in item.items()}
        return 200, {"swagger": "2.0", "info": {"title": "Kubernetes (test API server)", "version": "v1.33.0"},
                     "paths": paths, "definitions": definitions}
    return None


def _v2(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: (v.replace("#/components/schemas/", "#/definitions/") if k == "$ref" else _v2(v))
                for k, v in schema.items() if k != "nullable"}
    if isinstance(schema, list):
        return [_v2(x) for x in schema]
    return schema


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]")


def _json_path(obj: Any, path: str) -> Any:
    """A simple JSON path (``.a.b[0].c``); None where the object has no such value."""
    pos, node = 0, obj
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            raise ValueError(f"unsupported JSON path {path!r}")
        pos = m.end()
        if m.group(1) is not None:
            node = node.get(m.group(1)) if isinstance(node, dict) else None
        else:
            i = int(m.group(2))
            node = node[i] if isinstance(node, list) and i < len(node) else None
        if node is None:
            return None
    return node


def human_age(stamp: str, now: datetime.datetime | None = None) -> str:
    """kubectl's duration text (apimachinery duration.HumanDuration, as far as tests need)."""
    try:
        then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return "<invalid>"
    seconds = int(((now or datetime.datetime.now(datetime.timezone.utc)) - then).total_seconds())
    if seconds < 0:
        return "<invalid>"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _cell(value: Any, typ: str) -> Any:
    if value is None:
        return None
    if typ == "date":
        return human_age(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def table(api, rt, objs: list[dict], resource_version: str, query: dict) -> dict | None:
    """A Table of `objs` for a custom resource type with a stored CRD; None otherwise."""
    crd = crd_of(api, rt)
    if crd is None:
        return None
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == rt.version] or [{}]
    columns = version.get("additionalPrinterColumns") or [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    defs = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": "Name must be unique within a namespace."}]
    defs += [{"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
              "description": c.get("description", ""), "priority": c.get("priority", 0)} for c in columns]
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objs:
        cells = [obj["metadata"]["name"]] + [_cell(_json_path(obj, c["jsonPath"]), c.get("type", "string"))
                                             for c in columns]
        row: dict = {"cells": cells}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": defs, "rows": rows}


def list_table(api, store, ns: str | None, match, query: dict) -> dict | None:
    """The Table of a list request (every matching object; no paging), or None (see `table`)."""
    if crd_of(api, store.rt) is None:
        return None
    with api._lock:
        objs = [e.obj for (ons, _), e in store.objects.items()
                if (ns is None or ons == ns) and (match is None or match(e.obj))]
        rv = str(api._rv)
    return table(api, store.rt, objs, rv, query)


# ---------------------------------------------------------------------------------------------
# Admission of writes that come over HTTP
# ---------------------------------------------------------------------------------------------


def admit(api, rt, old: dict | None, new: dict, strict: bool) -> dict:
    """What the API server stores for a write (caller holds the lock): a custom resource checked,
    pruned and defaulted against its CRD (`testlab.k8sapi_schema.admit_custom`), a built-in kind
    validated strictly when kubectl asked for it, a CRD marked Established. Raises ApiError."""
    from testlab import k8sapi_schema
    from testlab.k8sapi import ApiError, ResourceType

    name = new.get("metadata", {}).get("name", "")
    try:
        crd = crd_of(api, rt, locked=True)
        if crd is not None:
            obj = {**new, "apiVersion": rt.api_version, "kind": rt.kind}
            return k8sapi_schema.admit_custom(crd, obj, old, strict)
        if rt.builtin and strict:
            k8sapi_schema.admit_builtin({**new, "apiVersion": rt.api_version, "kind": rt.kind})
    except k8sapi_schema.Rejected as exc:
        raise ApiError(exc.code, exc.reason, exc.message, {"name": name, "group": rt.group,
                                                           "kind": rt.kind, "causes": exc.causes}) from None
    if (rt.group, rt.version, rt.plural) == CRD_KEY:
        spec = new.get("spec", {})
        names = spec.get("names", {})
        for v in spec.get("versions", []):  # served at once, and listed in discovery
            if v.get("served", True) and (spec.get("group"), v.get("name"), names.get("plural")) not in api._stores:
                api._register(ResourceType(spec["group"], v["name"], names["plural"], names["kind"],
                                           spec.get("scope") == "Namespaced",
                                           "status" in (v.get("subresources") or {}), builtin=False))
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        new = {**new, "status": {
            "acceptedNames": spec.get("names", {}),
            "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
            "conditions": [{"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
                           for t, r, m in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                                           ("Established", "InitialNamesAccepted",
                                            "the initial names have been accepted"))]}}
    return new
