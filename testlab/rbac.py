"""What the DaemonSet's ClusterRole allows: `allowed(verb, group, resource, subresource)`.

DOC: reads the ClusterRole of ``deploy/rbac.yaml`` (the manifest users apply, not a copy) and
answers one request the way the Kubernetes RBAC authorizer does (``VerbMatches``,
``APIGroupMatches``, ``ResourceMatches`` in ``rbac/v1/evaluation_helpers.go``): a request is allowed
when one rule matches its verb, API group and resource, where a rule resource matches when it is
``*``, equal to ``resource`` or ``resource/subresource``, or ``*/subresource``; a rule with
``resourceNames`` matches only a request for one of those names (never a ``create``, a ``list``
or a ``watch``, which carry no name). The core API group is ``""``.

Tests use it to check that every call the agent made against a test API server (recorded as
``(verb, group, resource, subresource)``) is granted, and that the role grants nothing more.
Pure: no cluster, no client.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

RBAC_PATH = Path(__file__).resolve().parents[1] / "deploy" / "rbac.yaml"
ROLE_NAME = "route-agent"


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a ClusterRole (non-resource URLs are not modelled: the agent has none)."""

    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str] = frozenset()

    @classmethod
    def from_dict(cls, raw: dict) -> Rule:
        return cls(
            verbs=frozenset(raw.get("verbs") or ()),
            api_groups=frozenset(raw.get("apiGroups") or ()),
            resources=frozenset(raw.get("resources") or ()),
            resource_names=frozenset(raw.get("resourceNames") or ()),
        )

    def matches(self, verb: str, group: str, resource: str, subresource: str = "",
                name: str | None = None) -> bool:
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if "*" not in self.api_groups and group not in self.api_groups:
            return False
        combined = f"{resource}/{subresource}" if subresource else resource
        if not any(r == "*" or r == combined or (subresource and r == f"*/{subresource}")
                   for r in self.resources):
            return False
        return not self.resource_names or (name is not None and name in self.resource_names)


def load_rules(path: str | Path = RBAC_PATH, role: str = ROLE_NAME) -> tuple[Rule, ...]:
    """The rules of ClusterRole `role` in the multi-document YAML file `path`."""
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        if doc.get("kind") == "ClusterRole" and (doc.get("metadata") or {}).get("name") == role:
            return tuple(Rule.from_dict(r) for r in doc.get("rules") or ())
    raise LookupError(f"{path}: no ClusterRole named {role!r}")


@lru_cache(maxsize=1)
def _default_rules() -> tuple[Rule, ...]:
    return load_rules()


def allowed(verb: str, group: str | None, resource: str, subresource: str | None = "",
            name: str | None = None, rules: tuple[Rule, ...] | None = None) -> bool:
    """True when the ClusterRole (default: deploy/rbac.yaml's ``route-agent``) allows the request.

    `group` is the API group (``""`` or None for core, e.g. ``"discovery.k8s.io"``), `resource`
    the plural (``"endpointslices"``), `subresource` e.g. ``"status"``; `name` only matters for
    rules with resourceNames. A watch is verb ``"watch"`` (a list with ``?watch=true``)."""
    for rule in _default_rules() if rules is None else rules:
        if rule.matches(verb, group or "", resource, subresource or "", name):
            return True
    return False
