"""The configuration reference (``docs/configuration.md``), generated from the models.

DOC: `render()` walks every kind of `agent.config.kinds.KINDS` and writes, per kind, every field
path below ``spec`` with its type, default, allowed values and bounds and its description, then
an example. It reads the same structural schema the CRDs are generated from
(`agent.config.crds.spec_schema`, i.e. `agent.config.crd_schema`: ``$ref`` inlined, unions
collapsed, enums, bounds, server-side defaults), with one difference: every CEL rule is kept
(``budget=None``), so the rule messages ("must be an IPv4 or IPv6 address ...") document every
address and prefix field, also those under unbounded lists where the CRD leaves the rule out.
The descriptions are the models' attribute docstrings. So the reference cannot say anything
the models do not: ``tests/test_docs.py`` fails when ``docs/configuration.md`` differs from
`render()`, and the examples here are checked by the models and the CRDs like any sample
(``tests/test_crds.py`` reads every YAML block of the docs).

Pure: no file is read or written except by `main` (``python -m agent.config.reference
[--out FILE] [--check]``); without ``--out`` the text goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .base import API_VERSION, Metadata
from .crd_schema import RULES, _one_line, structural_schema
from .crds import GROUP, crd_for, kind_info, spec_schema
from .kinds import KINDS

OUT = "docs/configuration.md"
COMMAND = f"python -m agent.config.reference --out {OUT}"

# One example per kind: checked by the models and against the CRDs (tests/test_docs.py,
# tests/test_crds.py), so they stay valid; each shows the fields a user sets first.
EXAMPLES: dict[str, str] = {
    "AgentConfig": """\
apiVersion: routeagent.io/v1alpha1
kind: AgentConfig                # at most one; every field optional
metadata: {name: node}
spec:
  fib:
    table: 254                   # kernel table we program (main)
    protocol: 201                # our rtm_protocol; 0-4 and known daemons' numbers are refused
    metric: 20                   # metric of our routes
    fullScanSeconds: 60          # periodic full compare with the kernel
    staleSeconds: 120            # restart: longest wait for sources before stale routes are swept
    nexthopObjects: auto         # routes through kernel nexthop groups: auto | on | off
  adminDistance: {connected: 0, kernel: 0, static: 1, ebgp: 20, ibgp: 200}   # lower wins, 255 = never
  maxPaths: 16                   # ECMP width across candidates
  protectedPrefixes: [10.244.1.0/24, "fd00:244:1::/64"]   # this node's pod CIDRs, pools, VIPs
  serviceCIDRs: [10.96.0.0/12, "fd00:96::/108"]
  api: {address: 127.0.0.1, port: 9180}
""",
    "StaticRoutes": """\
apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes               # any number; each is an origin static/<name>
metadata: {name: uplinks}
spec:
  routes:
    - prefix: 198.18.0.0/16
      nextHops: [{gateway: 10.0.0.1}, {gateway: 10.0.1.1, weight: 2}]   # one multipath route
    - prefix: 2001:db8:10::/48
      nextHops: [{gateway: "fe80::1", device: eth0}]                      # link-local needs a device
    - prefix: 203.0.113.0/24
      blackhole: true
      distance: 250              # overrides adminDistance.static for this route
""",
    "RoutePolicy": """\
apiVersion: routeagent.io/v1alpha1
kind: RoutePolicy
metadata: {name: from-tor}
spec:
  defaultAction: reject
  statements:                      # in order; accept/reject end, modifications accumulate
    - name: fabric
      conditions:
        prefixSet: [{prefix: 10.0.0.0/8, le: 26}]
      actions: {result: accept, setLocalPref: 200}
    - name: services
      conditions:
        communities: {match: any, values: ["65001:100"]}
      actions: {result: accept, setAdminDistance: 15}
""",
    "BgpPeer": """\
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer                      # one per neighbour
metadata: {name: tor1, labels: {role: tor}}
spec:
  peerAddress: 10.0.0.1
  peerAS: 65001
  localAS: 65000                   # equal to peerAS: iBGP
  routerId: 10.0.0.254
  localAddress: 10.0.0.254
  families: [ipv4-unicast, ipv6-unicast]   # default: the family of peerAddress
  importPolicy: from-tor           # unset: eBGP routes are all refused (RFC 8212); acceptAll exists
  exportPolicy: to-tor             # unset: nothing is advertised to an eBGP peer
  gracefulRestartSeconds: 120      # 0: no graceful restart capability
  maxPrefix: [{family: ipv4-unicast, limit: 10000, action: teardown, restartSeconds: 300}]
  ttlSecurity: 1                   # GTSM (RFC 5082): hops to the peer
  bfd: {profile: fast}             # or {minRx: 300, minTx: 300, multiplier: 3} (docs/bfd.md)
  addPath: {receive: true}         # ADD-PATH (RFC 7911): every path the peer offers
""",
    "BfdProfile": """\
apiVersion: routeagent.io/v1alpha1
kind: BfdProfile                   # any number; a BgpPeer names one in spec.bfd.profile
metadata: {name: fast}
spec: {minRx: 100, minTx: 100, multiplier: 3}   # ms, ms, packets missed before down
""",
    "BgpSpeaker": """\
apiVersion: routeagent.io/v1alpha1
kind: BgpSpeaker                   # optional: where ExaBGP listens, which interpreter runs it
metadata: {name: speaker}
spec: {listenPort: 179, interpreter: auto, updates: raw}
""",
    "Advertisement": """\
apiVersion: routeagent.io/v1alpha1
kind: Advertisement
metadata: {name: pods, labels: {type: pod}}
spec:
  type: podCIDR                    # podCIDR | pool | vip | prefix | service
  prefixes: [10.244.1.0/24, "fd00:244:1::/64"]
  communities: ["65000:100"]
  largeCommunities: ["65000:1:2"]
  med: 10
  localPref: 300                   # iBGP peers only
  asPathPrepend: 1                 # eBGP peers only
  nextHop: self                    # or an address
  peerSelector: {matchLabels: {role: tor}}   # BgpPeer metadata.labels; empty: every peer
""",
}

INTRO = f"""\
Every configuration object is Kubernetes-shaped: `apiVersion: {API_VERSION}`, `kind`,
`metadata`, `spec`. Field names are camelCase; an unknown or misspelt field is an error, and so
is a value of the wrong type (`port: "9180"`). Standalone, the agent reads these objects from a
YAML file or a directory of YAML files (`route-agent run --config PATH`, checked offline by
`route-agent validate PATH`); in a cluster the very same documents are custom resources of the
group `{GROUP}` (`deploy/crds/`, generated from the same models by `route-agent crds`).

For each field: its path, its type, its default (when it has one), the values it allows, and
what it means. A field without a default and not marked *required* is optional: unset means
what its description says. The bounds and rules listed are those the API server checks too (the
CRDs' schemas and CEL rules); the agent checks more than fits a schema (cross-field rules,
duplicates, names of policies that must exist ...) and reports every problem with its file,
line, object and field path, as `route-agent validate` does. Reloading, what else is refused
and `validate`'s output: [operations.md](operations.md#configuration-files-validate-and-reload).
"""


def _flow(value: Any) -> str:
    """A default as one would write it in YAML (`off` quoted, lists in flow style)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000).strip()
    return text[:-4].strip() if text.endswith("\n...") else text


def _range(low: Any, high: Any, low_excl: bool, high_excl: bool) -> str | None:
    if low is not None and high is not None and not (low_excl or high_excl):
        return f"{low} to {high}"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_excl else '≥'} {low}")
    if high is not None:
        parts.append(f"{'<' if high_excl else '≤'} {high}")
    return ", ".join(parts) or None


def _bounds(node: Mapping[str, Any]) -> list[str]:
    """What the schema allows, in words: enum, ranges, lengths, item counts, pattern, rules."""
    out = []
    if "enum" in node:
        out.append("one of " + ", ".join(f"`{_flow(v)}`" for v in node["enum"]))
    value = _range(node.get("minimum"), node.get("maximum"),
                   bool(node.get("exclusiveMinimum")), bool(node.get("exclusiveMaximum")))
    if value:
        out.append(value)
    length = _range(node.get("minLength"), node.get("maxLength"), False, False)
    if length:
        out.append(f"length {length}")
    items = _range(node.get("minItems"), node.get("maxItems"), False, False)
    if items:
        out.append(f"items: {items}")
    props = _range(node.get("minProperties"), node.get("maxProperties"), False, False)
    if props:
        out.append(f"entries: {props}")
    if node.get("uniqueItems"):
        out.append("no duplicates")
    if "pattern" in node:
        out.append(f"matching `{node['pattern']}`")
    for rule in node.get(RULES, ()):
        if "fieldPath" not in rule:
            out.append(rule["message"])
    return out


def _type(node: Mapping[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "integer or string"
    typ = node.get("type", "object")
    if typ == "array":
        item = node.get("items", {})
        inner = _type(item)
        return f"list of {inner}s" if item.get("type") != "array" else f"list of ({inner})"
    if typ == "object" and isinstance(node.get("additionalProperties"), Mapping):
        return f"map of string to {_type(node['additionalProperties'])}"
    return str(typ)


def _scalar_items(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of a list's or a map's values when they are scalars (folded into one line)."""
    sub = node.get("items") if node.get("type") == "array" else node.get("additionalProperties")
    if isinstance(sub, Mapping) and sub.get("type") not in ("object", "array"):
        return sub
    return None


def _line(path: str, node: Mapping[str, Any], required: bool) -> str:
    facts = [_type(node)]
    if required:
        facts.append("**required**")
    if "default" in node:
        facts.append(f"default `{_flow(node['default'])}`")
    facts += _bounds(node)
    sub = _scalar_items(node)
    if sub is not None:
        each = _bounds(sub)
        if each:
            facts.append("each: " + "; ".join(each))
    text = f"* `{path}` ({', '.join(facts)})"
    description = node.get("description")
    if description:
        text += ": " + " ".join(_one_line(description).split("\n\n"))
    rules = [r for r in node.get(RULES, ()) if "fieldPath" in r]
    for rule in rules:
        text += f" Rule on `{path}{rule['fieldPath']}`: {rule['message']}."
    return text


def _children(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """(path, schema, required) of every field below `node`, depth first, in model order."""
    if node.get("type") == "array":
        item = node.get("items", {})
        if item.get("type") == "object" or item.get("type") == "array":
            yield from _children(item, f"{path}[]")
        return
    additional = node.get("additionalProperties")
    if isinstance(additional, Mapping):
        if additional.get("type") in ("object", "array"):
            yield from _children(additional, f"{path}.*")
        return
    required = set(node.get("required", ()))
    for name, sub in node.get("properties", {}).items():
        sub_path = f"{path}.{name}"
        yield sub_path, sub, name in required
        yield from _children(sub, sub_path)


def field_lines(schema: Mapping[str, Any], root: str) -> list[str]:
    """One Markdown list item per field below `schema` (a structural schema), paths from `root`."""
    return [_line(path, node, req) for path, node, req in _children(schema, root)]


def _anchor(kind_name: str) -> str:
    return kind_name.lower()


def _kind_section(kind_name: str, model: type[BaseModel]) -> list[str]:
    info = kind_info(kind_name)
    crd = crd_for(kind_name, model)
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = spec_schema(kind_name, model, budget=None)
    names = f"`{info.plural}.{GROUP}`"
    if info.short_names:
        names += " (short name " + ", ".join(f"`{n}`" for n in info.short_names) + ")"
    out = [f"## {kind_name}", ""]
    if model.__doc__:
        out += [_one_line(model.__doc__), ""]
    spec_note = "`spec` is required." if "spec" in root.get("required", ()) else \
        "`spec` may be left out (every field at its default)."
    out += [f"Custom resource {names}, cluster-scoped. {spec_note}", ""]
    out += field_lines(spec, "spec") + [""]
    example = EXAMPLES.get(kind_name)
    if example:
        out += [f"Example ({kind_name}):", "", "```yaml", example.rstrip("\n"), "```", ""]
    return out


def render(kinds: Mapping[str, type[BaseModel]] | None = None) -> str:
    """The whole reference as Markdown (the exact bytes of ``docs/configuration.md``)."""
    kinds = KINDS if kinds is None else kinds
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from the pydantic models (agent/config/) by `{COMMAND}`: do not edit."
        " tests/test_docs.py fails when this file and the models differ. -->",
        "",
        INTRO,
        "Kinds: " + ", ".join(f"[{k}](#{_anchor(k)})" for k in kinds) + ".",
        "",
        "## metadata (every kind)",
        "",
    ]
    meta = structural_schema(Metadata.model_json_schema(by_alias=True, mode="validation"), "metadata",
                             budget=None)
    out += field_lines(meta, "metadata") + [""]
    for kind_name, model in kinds.items():
        out += _kind_section(kind_name, model)
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.config.reference",
                                     description="print or write the configuration reference")
    parser.add_argument("--out", metavar="FILE", help=f"write FILE (the repository's is {OUT})")
    parser.add_argument("--check", action="store_true", help="exit 1 when FILE differs from the models")
    args = parser.parse_args(argv)
    text = render()
    if args.out is None:
        if args.check:
            parser.error("--check needs --out FILE")
        sys.stdout.write(text)
        return 0
    path = Path(args.out)
    if args.check:
        current = path.read_text() if path.is_file() else None
        if current != text:
            print(f"{path} is stale: regenerate with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
