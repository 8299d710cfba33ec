"""CustomResourceDefinitions for every configuration kind, generated from the pydantic models.

DOC: `route-agent crds --out deploy/crds` writes one ``apiextensions.k8s.io/v1``
CustomResourceDefinition per kind of `agent.config.kinds.KINDS` to ``deploy/crds/<plural>.routeagent.io.yaml``
(without ``--out`` it prints them as one multi-document YAML stream, for ``kubectl apply -f -``).
``tests/test_crds.py`` regenerates them and fails when a committed file differs, so a model change
without ``route-agent crds`` cannot be merged.

Public API:

* `crd_for(kind_name, model)`: the CRD of one kind, as a dict;
* `structural_schema(json_schema)`: a pydantic JSON schema turned into a structural CRD schema;
* `spec_schema(kind_name, model)`: the structural schema of the model's ``spec``;
* `all_crds()`: ``{filename: yaml text}`` for every kind (the exact bytes of ``deploy/crds``);
* `write_crds(out_dir)` and `check_crds(out_dir)`: write the files, or list what differs.

Decisions:

* **Group and version**: ``routeagent.io``, ``v1alpha1`` (served, storage), the ``apiVersion`` of
  every standalone manifest, so a manifest is a CR as it is and ``route-agent validate`` checks what
  ``kubectl apply`` would send.
* **Scope: Cluster, for every kind.** The objects configure nodes and the fabric, not a
  namespace's workloads: a static route, a BGP session, an import policy or an advertisement changes
  the node's kernel table and what the whole cluster's network attracts. Namespaced kinds would let
  anyone who may create objects in some namespace inject routes or hijack prefixes; cluster-scoped
  ones are, by default RBAC, cluster-admin only. The names are also global by design: the origin of
  a StaticRoutes' routes is ``static/<name>``, a BgpPeer refers to a RoutePolicy by bare name,
  AgentConfig and BgpSpeaker are singletons, and `agent.config.resolve.find_conflicts` requires kind/name to
  be unique, which namespaces would break. (``metadata.namespace`` stays in the model for
  standalone files; the API server never sets it on these objects.)
* **Schemas** come from ``model_json_schema(by_alias=True, mode="validation")`` of the ``spec``
  model, rewritten into a *structural* schema: every ``$ref`` inlined; ``title`` dropped;
  ``X | None`` becomes X with ``nullable: true``; ``Literal``/``const`` and enums become ``enum``;
  tuples (``prefixItems``) become ``items`` (with ``minItems``/``maxItems``); ``dict[str, str]``
  stays ``additionalProperties: {type: string}``; JSON-Schema-2020 numeric ``exclusiveMinimum``
  becomes OpenAPI's ``minimum`` + ``exclusiveMinimum: true``. ``extra="forbid"`` is not written
  (``additionalProperties: false`` is not allowed): the API server prunes unknown fields, and
  rejects them with strict field validation (kubectl's default). Unions that are more than
  "something or null" are collapsed structurally: branches of one scalar type become that type
  (``IPAddress | Literal["self"]`` is a string; enum-only branches merge their enums), ``int | str``
  becomes ``x-kubernetes-int-or-string``; anything else (objects or arrays in a union, other type
  mixes, recursive models) raises `UnsupportedSchema`, so a new model cannot silently produce a
  schema the API server refuses.
* **The CRD schema is a coarse first line, the models stay the authority**: checks done by
  ``AfterValidator``s and ``model_validator``s (address syntax, prefix host bits, cross-field rules)
  are not in the schema; the agent validates every object with the models as it reads it.
* **Defaults**: the API server applies ``default`` on write, so a default in the CRD must mean the
  same as the field being absent. Pydantic defaults do, except where a ``mode="before"`` validator
  looks at presence: ``BgpPeer.spec.families`` absent means "the family of peerAddress", while
  ``[]`` is an error, so its default is not published (`NO_SERVER_DEFAULT`). ``null`` defaults are
  dropped (absent and null mean the same). The test applies the CRD defaults to every sample and
  checks the model comes out equal.
* **Top level**: ``apiVersion``, ``kind``, ``metadata`` (``type: object``, the API server owns its
  schema), ``spec`` (required when the model has no default for it), and ``status`` (``type:
  object``, ``x-kubernetes-preserve-unknown-fields``) with a ``status`` subresource, for the
  per-node status the agent will report.
* **Names**: plural/singular are the lowercase kind (``staticroutes`` is both, like ``endpoints``);
  short names start with ``ra`` so they do not collide with other BGP projects' kinds (Calico and
  MetalLB also have ``bgppeers``); every kind is in the category ``route-agent``
  (``kubectl get route-agent`` lists them all).
* **Printer columns** are simple JSON paths (no wildcards, no counts): e.g. BgpPeer peer address and
  ASNs, Advertisement type, RoutePolicy default action; array elements (the first route, the first
  prefix) only with ``-o wide`` (priority 1); and ``Age``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

GROUP = "routeagent.io"
VERSION = "v1alpha1"
CATEGORY = "route-agent"
GENERATED_MARK = "# Generated by `route-agent crds`"
HEADER = (
    f"{GENERATED_MARK} from {{source}}: do not edit.\n"
    "# Regenerate with `route-agent crds --out deploy/crds`; tests/test_crds.py fails when this\n"
    "# file and the models differ.\n"
)


class UnsupportedSchema(ValueError):
    """A model uses a construct that has no structural CRD schema; the message names the field."""


# ---------------------------------------------------------------------------------------------
# Names and printer columns per kind
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    description: str | None = None
    priority: int = 0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


AGE = Column("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class KindInfo:
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()
    no_server_default: frozenset[tuple[str, ...]] = field(default_factory=frozenset)
    """Paths below ``spec`` (property names, ``[]`` for array items) whose default is not published."""


KIND_INFO: dict[str, KindInfo] = {
    "AgentConfig": KindInfo(
        "agentconfigs", "agentconfig", ("racfg",),
        (
            Column("Table", ".spec.fib.table", "integer", "Kernel routing table the agent programs."),
            Column("Protocol", ".spec.fib.protocol", "integer", "rtm_protocol of the agent's routes."),
            Column("Max Paths", ".spec.maxPaths", "integer", "ECMP width.", priority=1),
        ),
    ),
    "StaticRoutes": KindInfo(
        "staticroutes", "staticroutes", ("rasr",),
        (
            Column("First Prefix", ".spec.routes[0].prefix", description="Prefix of the first route.",
                   priority=1),
        ),
    ),
    "RoutePolicy": KindInfo(
        "routepolicies", "routepolicy", ("rapol",),
        (
            Column("Default Action", ".spec.defaultAction",
                   description="What happens to a route no statement accepted or rejected."),
        ),
    ),
    "BgpPeer": KindInfo(
        "bgppeers", "bgppeer", ("rapeer",),
        (
            Column("Peer Address", ".spec.peerAddress"),
            Column("Peer AS", ".spec.peerAS", "integer"),
            Column("Local AS", ".spec.localAS", "integer"),
            Column("Passive", ".spec.passive", "boolean", priority=1),
            Column("Import Policy", ".spec.importPolicy", priority=1),
            Column("Export Policy", ".spec.exportPolicy", priority=1),
        ),
        no_server_default=frozenset({("families",)}),
    ),
    "BgpSpeaker": KindInfo(
        "bgpspeakers", "bgpspeaker", ("raspk",),
        (
            Column("Listen Port", ".spec.listenPort", "integer"),
            Column("Interpreter", ".spec.interpreter", priority=1),
        ),
    ),
    "Advertisement": KindInfo(
        "advertisements", "advertisement", ("raadv",),
        (
            Column("Type", ".spec.type"),
            Column("Next Hop", ".spec.nextHop", priority=1),
            Column("First Prefix", ".spec.prefixes[0]", priority=1),
        ),
    ),
    "RouteAgentNodeState": KindInfo(
        "routeagentnodestates", "routeagentnodestate", ("rastate",),
        (
            Column("Ready", ".status.ready", "boolean", "Initial re-sync done."),
            Column("Peers Up", ".status.peersUp", "integer", "BGP sessions established."),
            Column("Peers", ".status.peersTotal", "integer", "BGP sessions configured."),
            Column("Installed", ".status.installed", "integer", "Routes in the kernel."),
            Column("Advertised", ".status.advertisedTotal", "integer", "Prefixes advertised.", priority=1),
            Column("Updated", ".status.updated", "date", priority=1),
        ),
    ),
}

NO_SERVER_DEFAULT = {kind: info.no_server_default for kind, info in KIND_INFO.items()}


def kind_info(kind_name: str) -> KindInfo:
    """The names and columns of a kind; a kind without an entry gets derived names and Age only."""
    if kind_name in KIND_INFO:
        return KIND_INFO[kind_name]
    lower = kind_name.lower()
    if lower.endswith("s"):
        plural = lower
    elif lower.endswith("y") and lower[-2:-1] not in "aeiou":
        plural = lower[:-1] + "ies"
    else:
        plural = lower + "s"
    return KindInfo(plural, lower)


# ---------------------------------------------------------------------------------------------
# pydantic JSON schema -> structural schema
# ---------------------------------------------------------------------------------------------

_KEEP = ("description", "default", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
         "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
         "minProperties", "maxProperties")
# OpenAPI formats the API server knows; others (pydantic's "ipvanyaddress" ...) are dropped.
_FORMATS = frozenset({"int32", "int64", "float", "double", "byte", "binary", "date", "date-time",
                      "password", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid",
                      "duration"})


def _one_line(text: str) -> str:
    """A docstring wrapped in the source as running text (blank lines still separate paragraphs)."""
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n") if p.strip())


def _json_type(values: list[Any], where: str) -> str:
    types = set()
    for v in values:
        if isinstance(v, bool):
            types.add("boolean")
        elif isinstance(v, int):
            types.add("integer")
        elif isinstance(v, float):
            types.add("number")
        elif isinstance(v, str):
            types.add("string")
        else:
            raise UnsupportedSchema(f"{where}: enum value {v!r} is not a scalar")
    if len(types) != 1:
        raise UnsupportedSchema(f"{where}: enum mixes types {sorted(types)}")
    return types.pop()


class _Converter:
    def __init__(self, defs: Mapping[str, Any]):
        self.defs = defs
        self.stack: list[str] = []

    def convert(self, node: Mapping[str, Any], where: str) -> dict[str, Any]:
        return _ordered(self._convert(dict(node), where))

    def _convert(self, node: dict[str, Any], where: str) -> dict[str, Any]:
        if "$ref" in node:
            name = node.pop("$ref").rsplit("/", 1)[-1]
            if name in self.stack:
                raise UnsupportedSchema(f"{where}: recursive model {name} cannot be inlined")
            self.stack.append(name)
            try:
                target = self.convert(self.defs[name], where)
            finally:
                self.stack.pop()
            return self._annotate(target, node, where)
        if "allOf" in node:
            parts = node.pop("allOf")
            if len(parts) != 1:
                raise UnsupportedSchema(f"{where}: allOf with {len(parts)} schemas")
            return self._annotate(self.convert(parts[0], where), node, where)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self._union(node.pop(key), node, where)
        return self._plain(node, where)

    def _annotate(self, target: dict[str, Any], outer: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The field's own description/default (and leftover constraints) over the inlined schema."""
        out = dict(target)
        extra = {k: v for k, v in outer.items() if k not in ("title", "discriminator")}
        if extra:
            out.update(self._plain({"type": out.get("type", "object"), **extra}, where, keep_type=False))
        return out

    def _union(self, branches: list[Any], outer: Mapping[str, Any], where: str) -> dict[str, Any]:
        nullable = any(b.get("type") == "null" for b in branches)
        rest = [self.convert(b, where) for b in branches if b.get("type") != "null"]
        if not rest:
            raise UnsupportedSchema(f"{where}: a field that can only be null")
        if len(rest) == 1:
            merged = rest[0]
        else:
            merged = self._merge(rest, where)
        out = self._annotate(merged, outer, where)
        if nullable:
            out["nullable"] = True
        return out

    def _merge(self, branches: list[dict[str, Any]], where: str) -> dict[str, Any]:
        """Several non-null branches as one structural schema (see the module DOC)."""
        strip = [{k: v for k, v in b.items() if k != "description"} for b in branches]
        if all(b == strip[0] for b in strip):
            return branches[0]
        types = {b.get("type") for b in branches}
        if types == {"integer", "string"}:
            return {"x-kubernetes-int-or-string": True}
        if len(types) != 1 or None in types:
            raise UnsupportedSchema(f"{where}: a union of {sorted(map(str, types))} has no structural schema")
        (typ,) = types
        if typ in ("object", "array"):
            raise UnsupportedSchema(f"{where}: a union of different {typ}s has no structural schema")
        if all(set(b) <= {"type", "enum", "description"} and "enum" in b for b in branches):
            enum: list[Any] = []
            for b in branches:
                enum.extend(v for v in b["enum"] if v not in enum)
            return {"type": typ, "enum": enum}
        # Branches of one scalar type with different constraints (IPAddress | Literal["self"]):
        # the type alone; the model checks the rest.
        return {"type": typ}

    def _plain(self, node: Mapping[str, Any], where: str, keep_type: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        typ = node.get("type")
        if "const" in node:
            out["enum"] = [node["const"]]
            typ = typ or _json_type(out["enum"], where)
        elif "enum" in node:
            typ = typ or _json_type(list(node["enum"]), where)
        if isinstance(typ, list):
            raise UnsupportedSchema(f"{where}: type list {typ} has no structural schema")
        if typ is None:
            raise UnsupportedSchema(f"{where}: no type (Any or an unconstrained value)")
        if keep_type:
            out["type"] = typ
        if node.get("format") in _FORMATS:
            out["format"] = node["format"]
        for key in _KEEP:
            if key in node:
                out[key] = copy.deepcopy(node[key])
        if "description" in out:
            out["description"] = _one_line(out["description"])
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            value = out.get(key)
            if value is not None and not isinstance(value, bool):  # JSON Schema 2020 -> OpenAPI 3.0
                out[key.replace("exclusiveM", "m")] = value
                out[key] = True
        if out.get("default", 0) is None:
            del out["default"]
        if typ == "object" and keep_type:
            props = node.get("properties")
            addl = node.get("additionalProperties")
            if isinstance(addl, Mapping):
                if props:
                    raise UnsupportedSchema(f"{where}: properties and a map of extra values together")
                out["additionalProperties"] = self.convert(addl, where + ".*")
            elif props is None and addl is not False:
                raise UnsupportedSchema(f"{where}: free-form object (no properties, no value schema)")
            else:
                out["properties"] = {
                    name: self.convert(sub, f"{where}.{name}") for name, sub in (props or {}).items()
                }
            if node.get("required"):
                out["required"] = list(node["required"])
        elif typ == "array" and keep_type:
            if "prefixItems" in node:
                items = [self.convert(p, f"{where}[{i}]") for i, p in enumerate(node["prefixItems"])]
                if "items" in node and node["items"] is not False:
                    items.append(self.convert(node["items"], where + "[]"))
                out["items"] = items[0] if len(items) == 1 else self._merge(items, where + "[]")
            elif isinstance(node.get("items"), Mapping):
                out["items"] = self.convert(node["items"], where + "[]")
            else:
                raise UnsupportedSchema(f"{where}: an array without an item schema")
        return out


_ORDER = ("description", "type", "format", "x-kubernetes-int-or-string", "nullable", "default", "enum",
          "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "minLength",
          "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
          "maxProperties", "required", "items", "properties", "additionalProperties")


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    """Keys in a fixed, readable order (description first, nested schemas last)."""
    rank = {k: i for i, k in enumerate(_ORDER)}
    return {k: node[k] for k in sorted(node, key=lambda k: rank.get(k, len(rank)))}


def structural_schema(json_schema: Mapping[str, Any], where: str = "spec") -> dict[str, Any]:
    """A pydantic JSON schema (with its ``$defs``) as a structural CRD schema (module DOC)."""
    defs = json_schema.get("$defs", {})
    root = {k: v for k, v in json_schema.items() if k != "$defs"}
    return _Converter(defs).convert(root, where)


def _drop_defaults(schema: dict[str, Any], paths: Iterable[tuple[str, ...]], kind_name: str) -> None:
    for path in paths:
        node = schema
        for part in path:
            node = node.get("items") if part == "[]" else node.get("properties", {}).get(part)
            if node is None:
                raise KeyError(f"{kind_name}: NO_SERVER_DEFAULT path spec.{'.'.join(path)} does not exist")
        node.pop("default", None)


def _spec_model(model: type[BaseModel]) -> type[BaseModel]:
    annotation = model.model_fields["spec"].annotation
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        raise UnsupportedSchema(f"{model.__name__}.spec is not a model")
    return annotation


def spec_schema(kind_name: str, model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of ``model``'s spec, with its field description and safe defaults."""
    spec_field = model.model_fields["spec"]
    schema = structural_schema(
        _spec_model(model).model_json_schema(by_alias=True, mode="validation"), f"{kind_name}.spec")
    _drop_defaults(schema, kind_info(kind_name).no_server_default, kind_name)
    if spec_field.description:
        schema["description"] = spec_field.description
    return _ordered(schema)


def _spec_required(model: type[BaseModel]) -> bool:
    spec_field = model.model_fields["spec"]
    return spec_field.default is PydanticUndefined and spec_field.default_factory is None


def crd_for(kind_name: str, model: type[BaseModel]) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of one kind."""
    info = kind_info(kind_name)
    root: dict[str, Any] = {
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string",
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string",
            },
            "metadata": {"type": "object"},
            "spec": spec_schema(kind_name, model),
            "status": {
                "description": "Observed state, written by the agents (status subresource).",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    }
    if model.__doc__:
        root["description"] = _one_line(model.__doc__)
    if _spec_required(model):
        root["required"] = ["spec"]
    root = _ordered(root)
    names: dict[str, Any] = {
        "kind": kind_name,
        "listKind": f"{kind_name}List",
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    names["categories"] = [CATEGORY]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{info.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "route-agent"},
        },
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Cluster",
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": root},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [c.as_dict() for c in (*info.columns, AGE)],
            }],
        },
    }


# ---------------------------------------------------------------------------------------------
# YAML files
# ---------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.split("\n")) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(crd: Mapping[str, Any], source: str) -> str:
    """One CRD as the text of its file (header comment, then the document)."""
    body = yaml.dump(crd, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100,
                     allow_unicode=True)
    return HEADER.format(source=source) + body


def filename_for(kind_name: str) -> str:
    return f"{kind_info(kind_name).plural}.{GROUP}.yaml"


def all_crds(kinds: Mapping[str, type[BaseModel]] | None = None) -> dict[str, str]:
    """``{filename: yaml text}`` of every kind (default: `agent.config.kinds.KINDS`), sorted by filename."""
    if kinds is None:
        from .nodestate import STATUS_KINDS
        from .kinds import KINDS

        kinds = {**KINDS, **STATUS_KINDS}
    out = {
        filename_for(name): to_yaml(crd_for(name, model), f"{model.__module__}.{model.__qualname__}")
        for name, model in kinds.items()
    }
    return dict(sorted(out.items()))


def _stale(out_dir: Path, wanted: Mapping[str, str]) -> list[Path]:
    """Generated files in ``out_dir`` that no kind produces any more."""
    stale = []
    for path in sorted(out_dir.glob(f"*.{GROUP}.yaml")):
        if path.name not in wanted:
            with path.open(encoding="utf-8") as fh:
                if fh.readline().startswith(GENERATED_MARK):
                    stale.append(path)
    return stale


def write_crds(out_dir: str | Path) -> list[Path]:
    """Write every CRD into ``out_dir`` (created if needed), remove stale generated ones; return the written paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = all_crds()
    for path in _stale(out, files):
        path.unlink()
    written = []
    for name, text in files.items():
        path = out / name
        if not path.exists() or path.read_bytes() != text.encode():
            path.write_bytes(text.encode())
        written.append(path)
    return written


def check_crds(out_dir: str | Path) -> list[str]:
    """Problems of ``out_dir`` against the models (missing, different, stale files); empty: up to date."""
    out = Path(out_dir)
    files = all_crds()
    problems = []
    for name, text in files.items():
        path = out / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif path.read_bytes() != text.encode():
            problems.append(f"{path}: differs from the models")
    problems.extend(f"{p}: no kind generates it any more" for p in (_stale(out, files) if out.is_dir() else []))
    return problems


def render_all() -> str:
    """Every CRD as one multi-document YAML stream (for ``route-agent crds | kubectl apply -f -``)."""
    return "---\n".join(all_crds().values())


def main(argv: list[str] | None = None) -> int:
    """``python -m agent.config.crds [--out DIR] [--check]`` (the same as ``route-agent crds``)."""
    p = argparse.ArgumentParser(prog="python -m agent.config.crds", description="generate the CRDs")
    p.add_argument("--out", help="write one file per kind into this directory (default: print)")
    p.add_argument("--check", action="store_true", help="with --out: only report files that differ")
    args = p.parse_args(argv)
    return run(args.out, args.check)


def run(out: str | None, check: bool = False) -> int:
    """What ``route-agent crds`` does: print, write (``out``) or ``check`` the files in ``out``."""
    if check:
        if not out:
            print("route-agent crds: --check needs --out DIR", file=sys.stderr)
            return 2
        problems = check_crds(out)
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    if out:
        for path in write_crds(out):
            print(path)
        return 0
    sys.stdout.write(render_all())
    return 0


if __name__ == "__main__":
    sys.exit(main())
