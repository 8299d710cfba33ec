"""CRDs generated from the models (`agent.crds`): no drift, structural schemas, samples validate.

The ``jsonschema`` package is not installed in the venv, so this file has a small validator with
the API server's semantics for what the generated schemas use (type, nullable, enum, bounds,
lengths, pattern, required, properties, additionalProperties, items, int-or-string,
preserve-unknown-fields), strict about unknown fields like ``kubectl apply`` (field validation
Strict), and a defaulting pass that applies ``default`` the way the API server does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from testlab.k8sapi_schema import _type_of, apply_defaults  # the test API server's (one copy)
from agent.config import crds
from agent.config.base import Metadata
from agent.config.crds import (
    GROUP,
    VERSION,
    all_crds,
    check_crds,
    crd_for,
    write_crds,
)
from agent.config.crd_schema import UnsupportedSchema, structural_schema
from agent.config.kinds import KINDS

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "crds"


def _schema(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _committed() -> dict[str, dict]:
    """kind -> CRD, from the files in deploy/crds (what `kubectl apply` gets)."""
    out = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["kind"]] = crd
    return out


# ---------------------------------------------------------------------------------------------
# Drift: the committed files are exactly what the models generate
# ---------------------------------------------------------------------------------------------


def test_files_are_generated_from_the_models():
    generated = all_crds()
    assert sorted(p.name for p in DEPLOY.glob("*.yaml")) == sorted(generated), (
        "deploy/crds does not hold one file per kind: run `route-agent crds --out deploy/crds`")
    for name, text in generated.items():
        assert (DEPLOY / name).read_bytes() == text.encode(), (
            f"deploy/crds/{name} differs from the models: run `route-agent crds --out deploy/crds`")
    assert check_crds(DEPLOY) == []


def test_generation_is_deterministic():
    assert all_crds() == all_crds()
    assert set(_committed()) == set(KINDS) | {"RouteAgentNodeState"}


def test_write_and_check(tmp_path, capsys):
    assert crds.run(str(tmp_path)) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(all_crds())
    assert crds.run(str(tmp_path), check=True) == 0
    # a changed file, a missing file and a stale generated file are reported
    first, second = sorted(tmp_path.iterdir())[:2]
    first.write_text(first.read_text() + "# edited\n")
    second.unlink()
    stale = tmp_path / f"oldkinds.{GROUP}.yaml"
    stale.write_text(crds.HEADER.format(source="x") + "{}\n")
    foreign = tmp_path / f"handwritten.{GROUP}.yaml"
    foreign.write_text("# not generated\n")
    problems = check_crds(tmp_path)
    assert [p.rsplit(": ", 1)[1] for p in problems] == [
        "differs from the models", "missing", "no kind generates it any more"]
    assert crds.run(str(tmp_path), check=True) == 1
    # writing again repairs it, removes the stale generated file and keeps the foreign one
    write_crds(tmp_path)
    assert check_crds(tmp_path) == []
    assert not stale.exists() and foreign.exists()
    capsys.readouterr()
    # without --out: one multi-document stream on stdout
    assert crds.main([]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["spec"]["names"]["kind"] for d in docs] == [
        yaml.safe_load(t)["spec"]["names"]["kind"] for t in all_crds().values()]
    assert crds.main(["--check"]) == 2


# ---------------------------------------------------------------------------------------------
# The CRD objects
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_shape(kind):
    crd = _committed()[kind]
    names = crd["spec"]["names"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{names['plural']}.{GROUP}"
    assert crd["spec"]["group"] == GROUP
    assert crd["spec"]["scope"] == "Cluster"
    assert names["kind"] == kind and names["listKind"] == kind + "List"
    for value in (names["plural"], names["singular"], *names.get("shortNames", ())):
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", value), value
    assert names["singular"] == kind.lower()
    (version,) = crd["spec"]["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    for column in columns:
        assert column["type"] in ("string", "integer", "number", "boolean", "date")
        assert re.fullmatch(r"(\.[A-Za-z][A-Za-z0-9]*(\[\d+\])?)+", column["jsonPath"]), column
        if column["jsonPath"].startswith(".spec."):
            node = _schema_at(_schema(crd), column["jsonPath"])
            expected = {"string": "string", "integer": "integer", "boolean": "boolean"}[column["type"]]
            assert node["type"] == expected, column
    root = _schema(crd)
    assert root["properties"]["status"] == {
        "description": "Observed state, written by the agents (status subresource).",
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec_field = KINDS[kind].model_fields["spec"]
    assert ("spec" in root.get("required", ())) == spec_field.is_required()


def test_names_are_unique():
    seen: set[str] = set()
    for crd in _committed().values():
        names = crd["spec"]["names"]
        for value in {names["plural"], names["singular"], *names.get("shortNames", ())}:
            assert value not in seen, value
            seen.add(value)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_round_trips_through_the_kubernetes_client(kind):
    """The official client's CustomResourceDefinition model keeps every key: no misspelt field."""
    from kubernetes.client import ApiClient

    crd = _committed()[kind]
    client = ApiClient()
    obj = client.deserialize(json.dumps(crd), "V1CustomResourceDefinition", "application/json")
    assert client.sanitize_for_serialization(obj) == crd


def _schema_at(schema: dict, json_path: str) -> dict:
    node = schema
    for part in re.findall(r"\.([A-Za-z0-9]+)(\[\d+\])?", json_path):
        node = node["properties"][part[0]]
        if part[1]:
            node = node["items"]
    return node


# ---------------------------------------------------------------------------------------------
# Structural schema checker
# ---------------------------------------------------------------------------------------------

# JSONSchemaProps fields a generated schema may use (no $ref, definitions, title, const,
# prefixItems, patternProperties, additionalItems, dependencies, allOf/not ...).
_ALLOWED_KEYS = {
    "description", "type", "format", "default", "enum", "nullable", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "required", "items",
    "properties", "additionalProperties", "anyOf", "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-validations",
}
_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
_INT_OR_STRING_ANYOF = [{"type": "integer"}, {"type": "string"}]


def structural_problems(node: Any, path: str = "", root: bool = True) -> list[str]:
    """Why ``node`` is not a structural schema (and not one this project accepts); empty: it is."""
    if not isinstance(node, dict):
        return [f"{path or '<root>'}: a schema must be a mapping"]
    where = path or "<root>"
    problems = [f"{where}: {key!r} is not allowed" for key in node if key not in _ALLOWED_KEYS]
    typ = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if typ is None and not (int_or_string or preserve):
        problems.append(f"{where}: no type")
    if typ is not None and typ not in _TYPES:
        problems.append(f"{where}: type {typ!r}")
    if "anyOf" in node and not (int_or_string and node["anyOf"] == _INT_OR_STRING_ANYOF):
        problems.append(f"{where}: anyOf other than the int-or-string pattern")
    if root and node.get("nullable"):
        problems.append(f"{where}: nullable at the root")
    if "properties" in node and typ != "object":
        problems.append(f"{where}: properties without type object")
    if "additionalProperties" in node:
        addl = node["additionalProperties"]
        if addl is False or addl is True:
            problems.append(f"{where}: additionalProperties: {str(addl).lower()}")
        elif "properties" in node:
            problems.append(f"{where}: properties and additionalProperties together")
        else:
            problems.extend(structural_problems(addl, f"{path}.*", root=False))
    if typ == "object":
        kinds = [k for k in ("properties", "additionalProperties") if k in node] + (["preserve"] if preserve else [])
        if len(kinds) != 1 and not (path == ".metadata" and node == {"type": "object"}):
            problems.append(f"{where}: an object needs exactly one of properties, additionalProperties, "
                            f"x-kubernetes-preserve-unknown-fields (has {kinds})")
        for name in node.get("required", ()):
            if name not in node.get("properties", {}):
                problems.append(f"{where}: required {name!r} is not a property")
    if typ == "array" and not isinstance(node.get("items"), dict):
        problems.append(f"{where}: an array needs one items schema")
    for name, sub in node.get("properties", {}).items():
        problems.extend(structural_problems(sub, f"{path}.{name}", root=False))
    if isinstance(node.get("items"), dict):
        problems.extend(structural_problems(node["items"], f"{path}[]", root=False))
    if "enum" in node:
        for value in node["enum"]:
            problems.extend(f"{where}: enum value {e}" for e in validate(value, {k: v for k, v in node.items() if k != "enum"}))
    if "default" in node:
        if node["default"] is None:
            problems.append(f"{where}: default null")
        else:
            problems.extend(f"{where}: default {e}" for e in validate(node["default"], node))
    return problems


def test_structural_checker_catches_what_kubernetes_refuses():
    raw = KINDS["BgpPeer"].model_fields["spec"].annotation.model_json_schema(by_alias=True)
    found = "\n".join(structural_problems(raw))
    for expected in ("<root>: '$defs' is not allowed", ".maxPrefix[]: '$ref' is not allowed",
                     "<root>: additionalProperties: false", ".peerAddress: 'title' is not allowed",
                     ".localAddress: anyOf other than the int-or-string pattern", ".localAddress: no type"):
        assert expected in found
    assert structural_problems({"type": "object", "properties": {"a": {"type": "array"}}}) == [
        ".a: an array needs one items schema"]
    assert structural_problems({"type": "object", "properties": {}, "nullable": True}) == [
        "<root>: nullable at the root"]
    assert structural_problems({"properties": {"a": {"type": "string", "default": 3}}, "type": "object"}) == [
        ".a: default <value>: expected string, got int"]
    assert structural_problems({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}}) == [
        ".a: enum value <value>: expected string, got int"]
    assert structural_problems(
        {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}},
                                                "additionalProperties": {"type": "string"}}}}) == [
        ".a: properties and additionalProperties together",
        ".a: an object needs exactly one of properties, additionalProperties, "
        "x-kubernetes-preserve-unknown-fields (has ['properties', 'additionalProperties'])"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind):
    root = _schema(_committed()[kind])
    assert structural_problems(root) == []
    assert root["type"] == "object"
    assert set(root["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert root["properties"]["metadata"] == {"type": "object"}
    text = json.dumps(root)
    assert "$ref" not in text and "$defs" not in text and '"title"' not in text


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_model_field_is_in_the_schema(kind):
    """Walk model and schema together: each field by its alias, descriptions from the docstrings."""

    def walk(model: type[BaseModel], node: dict, path: str) -> None:
        assert node["type"] == "object", path
        assert set(node["properties"]) == {f.alias or n for n, f in model.model_fields.items()}, path
        assert set(node.get("required", ())) == {
            f.alias or n for n, f in model.model_fields.items() if f.is_required()}, path
        for name, f in model.model_fields.items():
            sub = node["properties"][f.alias or name]
            if f.description:
                assert sub["description"] == " ".join(f.description.split()), f"{path}.{name}"
            inner = _model_in(f.annotation)
            if inner is not None:
                walk(inner, sub["items"] if sub["type"] == "array" else sub, f"{path}.{f.alias or name}")

    walk(KINDS[kind].model_fields["spec"].annotation, _schema(_committed()[kind])["properties"]["spec"],
         "spec")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    origin = getattr(annotation, "__origin__", None)
    return _model_in(origin) if origin is not None and origin is not annotation else None


# ---------------------------------------------------------------------------------------------
# A small validator and defaulter with the API server's semantics
# ---------------------------------------------------------------------------------------------


def validate(value: Any, schema: dict, path: str = "<value>") -> list[str]:
    """Errors of ``value`` against a structural schema; unknown fields are errors (strict)."""
    actual = _type_of(value)
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null is not allowed"]
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            return [f"{path}: expected integer or string, got {actual}"]
    elif "type" in schema:
        expected = schema["type"]
        if not (actual == expected or (expected == "number" and actual == "integer")):
            return [f"{path}: expected {expected}, got {type(value).__name__}"]
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if actual in ("integer", "number"):
        if "minimum" in schema and (value < schema["minimum"] or (
                schema.get("exclusiveMinimum") and value == schema["minimum"])):
            errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and (value > schema["maximum"] or (
                schema.get("exclusiveMaximum") and value == schema["maximum"])):
            errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if actual == "string":
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']!r}")
    if actual == "array":
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        for i, item in enumerate(value):
            errors.extend(validate(item, schema.get("items", {}), f"{path}[{i}]"))
    if actual == "object":
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{path}.{name}: required")
        for name, sub in value.items():
            if name in props:
                if not (path == "<value>" and name == "metadata"):  # ObjectMeta: the API server's
                    errors.extend(validate(sub, props[name], f"{path}.{name}"))
            elif isinstance(schema.get("additionalProperties"), dict):
                errors.extend(validate(sub, schema["additionalProperties"], f"{path}.{name}"))
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{name}: unknown field")
    return errors


# ---------------------------------------------------------------------------------------------
# Samples from the README, docs/ and agent/samples validate against their CRD
# ---------------------------------------------------------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _samples() -> list[tuple[str, dict]]:
    texts = [(f"agent/samples/{p.name}", p.read_text()) for p in sorted((ROOT / "agent/samples").glob("*.yaml"))]
    for doc in DOCS:
        texts += [(f"{doc.relative_to(ROOT)} yaml block {i}", block)
                  for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S))]
    out = []
    for source, text in texts:
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith(GROUP + "/"):
                out.append((f"{source}: {doc['kind']}/{doc['metadata']['name']}", doc))
    return out


SAMPLES = _samples()


def test_every_kind_has_a_sample():
    assert {doc["kind"] for _, doc in SAMPLES} == set(KINDS)


@pytest.mark.parametrize("doc", [d for _, d in SAMPLES], ids=[i for i, _ in SAMPLES])
def test_sample_validates_against_its_crd(doc):
    crd = _committed()[doc["kind"]]
    assert doc["apiVersion"] == f"{crd['spec']['group']}/{VERSION}"
    assert validate(doc, _schema(crd)) == []
    # ... and with the models, as `route-agent validate` does
    model = KINDS[doc["kind"]]
    model.model_validate(doc, by_alias=True, by_name=False)


@pytest.mark.parametrize("doc", [d for _, d in SAMPLES], ids=[i for i, _ in SAMPLES])
def test_server_side_defaults_mean_what_absence_means(doc):
    """After the API server filled in the CRD defaults, the model sees the same object."""
    model = KINDS[doc["kind"]]
    schema = _schema(_committed()[doc["kind"]])
    defaulted = apply_defaults(doc, schema)
    assert validate(defaulted, schema) == []
    assert model.model_validate(defaulted, by_alias=True, by_name=False) == model.model_validate(
        doc, by_alias=True, by_name=False)


def test_families_default_is_not_published():
    """families absent = the family of peerAddress; the pydantic default [] would be an error."""
    families = _schema(_committed()["BgpPeer"])["properties"]["spec"]["properties"]["families"]
    assert "default" not in families
    doc = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BgpPeer", "metadata": {"name": "p"},
           "spec": {"peerAddress": "fd00::1", "peerAS": 65001, "localAS": 65000, "routerId": "10.0.0.1"}}
    peer = KINDS["BgpPeer"].model_validate(apply_defaults(doc, _schema(_committed()["BgpPeer"])))
    assert [f.value for f in peer.spec.families] == ["ipv6-unicast"]


def _peer(**spec) -> dict:
    base = {"peerAddress": "10.0.0.1", "peerAS": 65001, "localAS": 65000, "routerId": "10.0.0.254"}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BgpPeer", "metadata": {"name": "tor1"},
            "spec": {**base, **spec}}


@pytest.mark.parametrize(("doc", "error"), [
    (_peer(peerAs=65001), "<value>.spec.peerAs: unknown field"),
    (_peer(port="179"), "<value>.spec.port: expected integer, got str"),
    (_peer(port=0), "<value>.spec.port: 0 is below the minimum 1"),
    (_peer(peerAS=2**32), "<value>.spec.peerAS: 4294967296 is above the maximum 4294967295"),
    (_peer(families=["ipv4-multicast"]), "<value>.spec.families[0]: 'ipv4-multicast' is not one of"),
    (_peer(families=["ipv4-unicast"] * 3), "<value>.spec.families: more than 2 items"),
    (_peer(maxPrefix=[{"family": "ipv4-unicast"}]), "<value>.spec.maxPrefix[0].limit: required"),
    (_peer(passive=None), "<value>.spec.passive: null is not allowed"),
    ({**_peer(), "spec": {"peerAddress": "10.0.0.1"}}, "<value>.spec.peerAS: required"),
    ({k: v for k, v in _peer().items() if k != "spec"}, "<value>.spec: required"),
    (_peer(md5PasswordFile="/" + "x" * 4096), "<value>.spec.md5PasswordFile: longer than 4096"),
])
def test_invalid_objects_are_refused(doc, error):
    errors = validate(doc, _schema(_committed()["BgpPeer"]))
    assert any(e.startswith(error) for e in errors), errors


def test_nullable_fields_accept_null():
    assert validate(_peer(localAddress=None, importPolicy=None), _schema(_committed()["BgpPeer"])) == []


# ---------------------------------------------------------------------------------------------
# The converter on constructs the current models do not use (yet)
# ---------------------------------------------------------------------------------------------


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def test_converter_constructs():
    class Inner(_M):
        """Inner doc."""

        x: int = 1

    class Toy(_M):
        pair: tuple[int, int]
        mixed: tuple[int, str] = (1, "a")
        lit: Literal["a"] = "a"
        lits: Literal["a", "b"] | Literal["c"] | None = None
        bounded: int = Field(1, gt=0, lt=10)
        int_or_str: int | str = 1
        text: str = Field("x", pattern="^x", min_length=1, max_length=5)
        labels: dict[str, str] = Field(default_factory=dict)
        inner: Inner | None = None
        """Field doc wins."""
        inners: tuple[Inner, ...] = ()

    s = structural_schema(Toy.model_json_schema(by_alias=True, mode="validation"))
    p = s["properties"]
    assert structural_problems(s) == []
    assert p["pair"] == {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}
    assert p["mixed"]["items"] == {"x-kubernetes-int-or-string": True}
    assert p["lit"] == {"type": "string", "default": "a", "enum": ["a"]}
    assert p["lits"] == {"type": "string", "nullable": True, "enum": ["a", "b", "c"]}
    assert p["bounded"] == {"type": "integer", "default": 1, "minimum": 0, "exclusiveMinimum": True,
                            "maximum": 10, "exclusiveMaximum": True}
    assert p["int_or_str"] == {"x-kubernetes-int-or-string": True, "default": 1}
    assert p["text"] == {"type": "string", "default": "x", "minLength": 1, "maxLength": 5, "pattern": "^x"}
    assert p["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert p["inner"] == {"description": "Field doc wins.", "type": "object", "nullable": True,
                          "properties": {"x": {"type": "integer", "default": 1}}}
    assert p["inners"]["items"]["description"] == "Inner doc."
    assert s["required"] == ["pair"]


@pytest.mark.parametrize("annotation", [
    int | list[int],
    dict[str, Any],
    Annotated[Any, Field()],
    bytes | float | None,
])
def test_converter_refuses_what_has_no_structural_schema(annotation):
    model = type("Toy", (_M,), {"__annotations__": {"f": annotation}})
    with pytest.raises(UnsupportedSchema, match="Toy.f|spec.f"):
        structural_schema(model.model_json_schema(by_alias=True, mode="validation"), "Toy")


def test_converter_refuses_unions_of_objects_and_recursion():
    class A(_M):
        a: int = 0

    class B(_M):
        b: str = ""

    class U(_M):
        u: A | B

    class Node(_M):
        children: tuple["Node", ...] = ()

    with pytest.raises(UnsupportedSchema, match="union of different objects"):
        structural_schema(U.model_json_schema(mode="validation"))
    with pytest.raises(UnsupportedSchema, match="recursive model Node"):
        structural_schema(Node.model_json_schema(mode="validation"))


def test_crd_for_a_new_kind_gets_derived_names():
    class WidgetPolicySpec(_M):
        size: int = 1

    class WidgetPolicy(_M):
        """A toy kind."""

        api_version: str = Field(f"{GROUP}/{VERSION}", alias="apiVersion")
        kind: Literal["WidgetPolicy"] = "WidgetPolicy"
        metadata: Metadata
        spec: WidgetPolicySpec

    crd = crd_for("WidgetPolicy", WidgetPolicy)
    assert crd["metadata"]["name"] == f"widgetpolicies.{GROUP}"
    assert crd["spec"]["names"]["singular"] == "widgetpolicy"
    assert _schema(crd)["required"] == ["spec"]
    assert structural_problems(_schema(crd)) == []


def test_node_state_status_schema_says_what_each_count_is():
    """Issue 16.4: every status field is described, and every count says whether it is current
    (what holds now) or cumulative (since the agent started)."""
    status = _schema(_committed()["RouteAgentNodeState"])["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in status
    counts = []

    def walk(node, path):
        assert node.get("description") or (path.endswith("[]") and node["type"] == "string"), path
        if node.get("type") == "integer":
            counts.append(path)
            assert node["description"].startswith(("Current:", "Cumulative")), (path, node["description"])
            assert node.get("minimum") == 0, path
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.*")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    walk(status, "status")
    assert {"status.peers[].families.*.received", "status.peers[].families.*.accepted",
            "status.advertisedTotal", "status.apiServer.watchStalls"} <= set(counts)
