"""A pydantic JSON schema turned into a structural CustomResourceDefinition schema.

DOC: `structural_schema(json_schema)` rewrites what ``model_json_schema(by_alias=True,
mode="validation")`` gives for a kind's ``spec`` model (`agent.config.crds`) into a *structural*
schema, one the API server accepts: every ``$ref`` inlined; ``title`` dropped;
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
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


class UnsupportedSchema(ValueError):
    """A model uses a construct that has no structural CRD schema; the message names the field."""



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

