"""Admission in the test API server: a custom resource checked against its CRD, as the real one does.

DOC: `admit_custom(crd, obj, old, strict)` is what kube-apiserver does to a custom resource on
create and update when its CustomResourceDefinition is stored (`testlab.k8sapi` calls it only
for requests that come over HTTP, and only when the CRD exists, so tests that put objects
directly are unaffected):

1. unknown fields: with ``fieldValidation=Strict`` (kubectl's default) a 400 listing them
   (``strict decoding error: unknown field "spec.peerAs"``); otherwise they are pruned;
2. ``default`` values are filled in (defaulting runs before validation);
3. the structural schema: type, nullable, enum, minimum/maximum (exclusive too), min/maxLength,
   pattern, min/maxItems, required, int-or-string, preserve-unknown-fields;
4. the CEL rules (``x-kubernetes-validations``, `testlab.k8s_cel`), with ``oldSelf`` on update for
   values present before; a rule runs only when its value passed the schema checks.

Every failure of 3 and 4 is collected and answered as one 422 ``Invalid`` Status whose message
reads like the real one: ``BgpPeer.routeagent.io "tor1" is invalid: spec.peerAddress: Invalid
value: "string": must be an IPv4 or IPv6 address (no zone index)``, with one ``details.causes``
entry per field. ``metadata`` is the API server's business (only ``name`` is required here).

`admit_builtin(obj, version)` validates a built-in kind strictly with kubernetes-validate's bundled
schemas when that package is installed (it is in the test extra), so ``kubectl apply`` of a
DaemonSet with a misspelt field fails here as in a cluster; kinds it has no schema for pass.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from testlab import k8s_cel

Problem = tuple[str, str, Any]  # (field path, message, value)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def unknown_fields(value: Any, schema: dict, path: str = "") -> list[str]:
    """Paths of fields the schema does not know (metadata excepted at the root)."""
    out: list[str] = []
    if isinstance(value, dict) and schema.get("type", "object") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return out
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        for name, sub in value.items():
            where = f"{path}.{name}" if path else name
            if props is not None and name in props:
                if not (path == "" and name == "metadata"):
                    out.extend(unknown_fields(sub, props[name], where))
            elif isinstance(addl, dict):
                out.extend(unknown_fields(sub, addl, where))
            elif props is not None or addl is None:
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out.extend(unknown_fields(item, schema["items"], f"{path}[{i}]"))
    return out


def prune(value: Any, schema: dict, root: bool = True) -> Any:
    """`value` without the fields the schema does not know."""
    if isinstance(value, dict) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        if props is not None:
            return {k: (v if root and k == "metadata" else prune(v, props[k], False))
                    for k, v in value.items() if k in props}
        if isinstance(addl, dict):
            return {k: prune(v, addl, False) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], False) for v in value]
    return value


def apply_defaults(value: Any, schema: dict) -> Any:
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for name, sub in schema["properties"].items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = apply_defaults(out[name], sub)
        return out
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: apply_defaults(v, schema["additionalProperties"]) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


def _scalar_problems(value: Any, schema: dict, path: str) -> list[Problem]:
    out: list[Problem] = []
    actual = _type_of(value)
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
        out.append((path, f"Unsupported value: {_show(value)}: supported values: {allowed}", value))
    if actual in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and (value < low or (schema.get("exclusiveMinimum") and value == low)):
            out.append((path, f"Invalid value: {value}: {path} in body should be greater than or equal to {low}",
                        value))
        if high is not None and (value > high or (schema.get("exclusiveMaximum") and value == high)):
            out.append((path, f"Invalid value: {value}: {path} in body should be less than or equal to {high}",
                        value))
    if actual == "string":
        if len(value) < schema.get("minLength", 0):
            out.append((path, f"Invalid value: {_show(value)}: {path} in body should be at least "
                        f"{schema['minLength']} chars long", value))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append((path, f"Too long: may not be more than {schema['maxLength']} bytes", value))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append((path, f"Invalid value: {_show(value)}: {path} in body should match "
                        f"'{schema['pattern']}'", value))
    return out


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def schema_problems(value: Any, schema: dict, path: str, old: Any = None) -> list[Problem]:
    """Problems of `value` under `schema` (steps 3 and 4 of the module DOC)."""
    if value is None:
        return [] if schema.get("nullable") else [(path, "Invalid value: \"null\": " + path +
                                                  " in body must be of type " + schema.get("type", "object"),
                                                  None)]
    actual = _type_of(value)
    expected = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            return [(path, f'Invalid value: "{actual}": {path} in body must be of type integer or string', value)]
    elif expected and not (actual == expected or (expected == "number" and actual == "integer")):
        return [(path, f'Invalid value: "{actual}": {path} in body must be of type {expected}: "{actual}"',
                 value)]
    problems = _scalar_problems(value, schema, path)
    if actual == "array":
        if len(value) < schema.get("minItems", 0):
            problems.append((path, f"Invalid value: {len(value)}: {path} in body should have at least "
                             f"{schema['minItems']} items", value))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append((path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items", value))
        for i, item in enumerate(value):
            problems.extend(schema_problems(item, schema.get("items", {}), f"{path}[{i}]"))
    if actual == "object":
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append((f"{path}.{name}", "Required value", None))
        olds = old if isinstance(old, dict) else {}
        for name, sub in value.items():
            if name in props and not (path == "" and name == "metadata"):
                problems.extend(schema_problems(sub, props[name], f"{path}.{name}".lstrip("."), olds.get(name)))
            elif name not in props and isinstance(schema.get("additionalProperties"), dict):
                problems.extend(schema_problems(sub, schema["additionalProperties"], f"{path}.{name}"))
    if not problems and schema.get("x-kubernetes-validations"):
        for field_path, message in k8s_cel.rule_errors(schema["x-kubernetes-validations"], value, old):
            where = f"{path}{field_path}" if field_path else path
            problems.append((where, f"Invalid value: {_show(_type_of(value))}: {message}", value))
    return problems


def _version_schema(crd: dict, version: str) -> dict:
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return (v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object",
                                                                      "x-kubernetes-preserve-unknown-fields": True}
    raise KeyError(version)


class Rejected(Exception):
    """The API server's answer: `code` (400 or 422), `reason`, `message`, `causes`."""

    def __init__(self, code: int, reason: str, message: str, causes: list[dict]):
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes


def admit_custom(crd: dict, obj: dict, old: dict | None, strict: bool) -> dict:
    """The object as the API server would store it (pruned, defaulted), or raise `Rejected`."""
    version = obj.get("apiVersion", "").rpartition("/")[2]
    schema = _version_schema(crd, version)
    kind = crd["spec"]["names"]["kind"]
    what = f'{kind}.{crd["spec"]["group"]} "{obj.get("metadata", {}).get("name", "")}"'
    unknown = unknown_fields(obj, schema)
    if unknown and strict:
        message = "strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown)
        raise Rejected(400, "BadRequest", message,
                       [{"reason": "FieldValueInvalid", "message": f'unknown field "{u}"', "field": u}
                        for u in unknown])
    new = apply_defaults(prune(obj, schema), schema)
    problems = schema_problems(new, schema, "", old)
    if problems:
        lines = [f"{path}: {msg}" for path, msg, _ in problems]
        message = f"{what} is invalid: " + (lines[0] if len(lines) == 1 else "[" + ", ".join(lines) + "]")
        raise Rejected(422, "Invalid", message, [{"reason": "FieldValueInvalid", "message": msg, "field": path}
                                                 for path, msg, _ in problems])
    return new


def admit_builtin(obj: dict, version: str = "1.33.0") -> None:
    """Strict validation of a built-in kind (module DOC); raises `Rejected` (400, as the real
    server's strict field validation and 422 for type errors are close enough here)."""
    try:
        import kubernetes_validate
    except ImportError:
        return
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise Rejected(400, "BadRequest", f"{obj.get('kind')} {path}: {exc.message}",
                       [{"reason": "FieldValueInvalid", "message": exc.message, "field": path}]) from None
