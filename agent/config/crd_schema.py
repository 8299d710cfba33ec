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

CEL rules (``x-kubernetes-validations``): a type or a model declares them next to its pydantic
validators with `Cel` (``Annotated[str, AfterValidator(check), Cel("isIP(self)", "...")]``, or
``model_config = ConfigDict(json_schema_extra=cel_rules(Cel(...)))`` for a rule between fields), so
the API server refuses a bad object before any agent reads it. The API server estimates each
rule's worst-case cost times how many values it may run on and refuses a CRD over its budget; so a
rule is written only where that number is bounded: the product of the ``maxItems`` of the lists
above it (`Cel.cost` per value, at most `RULE_BUDGET` in all). Under a list without ``maxItems``
the rule is left out (the models still check every value). The IP and CIDR functions
(``isIP``, ``isCIDR``, ``ip()``, ``cidr()``) need Kubernetes 1.31 in CRD rules.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class UnsupportedSchema(ValueError):
    """A model uses a construct that has no structural CRD schema; the message names the field."""


RULES = "x-kubernetes-validations"
RULE_BUDGET = 2_000_000  # cost x values per rule: a fifth of the API server's per-rule limit (10M)


@dataclass(frozen=True)
class Cel:
    """A CEL validation rule for the CRD schema of the type it annotates (module DOC).

    `rule` sees the value as ``self``; `message` is what ``kubectl apply`` prints; `field_path`
    (``.localAddress``) names the field a rule between fields is about; `max_length` bounds the
    string in the schema (the cost of a string rule grows with its length; set it no shorter than
    the longest valid value); `cost` is a rough bound of one evaluation, for the budget."""

    rule: str
    message: str
    field_path: str | None = None
    max_length: int | None = None
    cost: int = 20

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out

    def __get_pydantic_json_schema__(self, core_schema, handler) -> dict[str, Any]:
        schema = handler(core_schema)
        _add(schema, self)
        return schema


def _add(schema: dict[str, Any], rule: Cel) -> None:
    schema.setdefault(RULES, []).append({**rule.as_dict(), "x-cost": rule.cost})
    if rule.max_length is not None:
        schema["maxLength"] = min(schema.get("maxLength", rule.max_length), rule.max_length)


def cel_rules(*rules: Cel):
    """``json_schema_extra`` for a model whose rules relate its fields (module DOC)."""
    def extra(schema: dict[str, Any]) -> None:
        for rule in rules:
            _add(schema, rule)
    return extra



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
    def __init__(self, defs: Mapping[str, Any], budget: int | None = RULE_BUDGET):
        self.defs = defs
        self.budget = budget  # None: keep every rule (the configuration reference documents them all)
        self.stack: list[str] = []
        self.values: int | None = 1  # how many values a rule here may run on (None: unbounded)
        self.dropped: list[str] = []  # rules left out for want of a bound, "where: rule"

    def convert(self, node: Mapping[str, Any], where: str) -> dict[str, Any]:
        return _ordered(self._convert(dict(node), where))

    def _repeated(self, node: Mapping[str, Any], where: str, bound: int | None) -> dict[str, Any]:
        """Convert the schema of a list's items or a map's values (`bound`: maxItems/maxProperties)."""
        outer = self.values
        self.values = None if outer is None or bound is None else outer * bound
        try:
            return self.convert(node, where)
        finally:
            self.values = outer

    def _rules(self, rules: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
        kept = []
        for rule in rules:
            cost = rule.get("x-cost", 20)
            if self.budget is not None and (self.values is None or cost * self.values > self.budget):
                self.dropped.append(f"{where}: {rule['rule']}")
                continue
            kept.append({k: rule[k] for k in ("rule", "message", "fieldPath") if k in rule})
        return kept

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
            over = self._plain({"type": out.get("type", "object"), **extra}, where, keep_type=False)
            if RULES in over and RULES in out:
                over[RULES] = out[RULES] + over[RULES]
            out.update(over)
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
        if node.get(RULES):
            rules = self._rules(list(node[RULES]), where)
            if rules:
                out[RULES] = rules
        if typ == "object" and keep_type:
            props = node.get("properties")
            addl = node.get("additionalProperties")
            if isinstance(addl, Mapping):
                if props:
                    raise UnsupportedSchema(f"{where}: properties and a map of extra values together")
                out["additionalProperties"] = self._repeated(addl, where + ".*", node.get("maxProperties"))
            elif props is None and addl is not False:
                raise UnsupportedSchema(f"{where}: free-form object (no properties, no value schema)")
            else:
                out["properties"] = {
                    name: self.convert(sub, f"{where}.{name}") for name, sub in (props or {}).items()
                }
            if node.get("required"):
                out["required"] = list(node["required"])
        elif typ == "array" and keep_type:
            bound = node.get("maxItems")
            if "prefixItems" in node:
                items = [self._repeated(p, f"{where}[{i}]", bound) for i, p in enumerate(node["prefixItems"])]
                if "items" in node and node["items"] is not False:
                    items.append(self._repeated(node["items"], where + "[]", bound))
                out["items"] = items[0] if len(items) == 1 else self._merge(items, where + "[]")
            elif isinstance(node.get("items"), Mapping):
                out["items"] = self._repeated(node["items"], where + "[]", bound)
            else:
                raise UnsupportedSchema(f"{where}: an array without an item schema")
        return out


_ORDER = ("description", "type", "format", "x-kubernetes-int-or-string", "nullable", "default", "enum",
          "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "minLength",
          "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
          "maxProperties", "required", "items", "properties", "additionalProperties", RULES)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    """Keys in a fixed, readable order (description first, nested schemas last)."""
    rank = {k: i for i, k in enumerate(_ORDER)}
    return {k: node[k] for k in sorted(node, key=lambda k: rank.get(k, len(rank)))}


def structural_schema(json_schema: Mapping[str, Any], where: str = "spec",
                      dropped: list[str] | None = None, budget: int | None = RULE_BUDGET) -> dict[str, Any]:
    """A pydantic JSON schema (with its ``$defs``) as a structural CRD schema (module DOC); the CEL
    rules left out for want of a bound are appended to `dropped` as "where: rule". ``budget=None``
    keeps every rule, bounded or not (for `agent.config.reference`, not for a CRD)."""
    defs = json_schema.get("$defs", {})
    root = {k: v for k, v in json_schema.items() if k != "$defs"}
    converter = _Converter(defs, budget)
    out = converter.convert(root, where)
    if dropped is not None:
        dropped.extend(converter.dropped)
    return out

