"""CEL in the deploy bundle: the CRDs' ``x-kubernetes-validations`` and the admission policy.

The rules are generated from the pydantic types and models (`agent.config.crd_schema.Cel`); here
they are evaluated with `testlab.k8s_cel` (cel-python plus Kubernetes' IP/CIDR library) to check
that they say what the models say, that every sample still passes them, that each one's estimated
cost stays bounded (the API server refuses a CRD whose rules may run on unbounded lists), and that
the ValidatingAdmissionPolicy lets an agent write its own node's state and nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent.config.base import Gateway, IPAddress, IPPrefix
from agent.config.crd_schema import RULE_BUDGET, Cel, cel_rules, structural_schema
from agent.config.crds import _spec_model
from agent.config.kinds import KINDS
from testlab import k8s_cel, k8sapi_schema

ROOT = Path(__file__).resolve().parents[1]
CRDS = {(d := yaml.safe_load(p.read_text()))["spec"]["names"]["kind"]: d
        for p in sorted((ROOT / "deploy" / "crds").glob("*.yaml"))}


def _root(kind: str) -> dict:
    return CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _rules(node: dict, path: str = "", values: int = 1):
    """(path, rule, how many values it may run on) of every rule under a schema."""
    for rule in node.get("x-kubernetes-validations", ()):
        yield path, rule, values, node
    for name, sub in node.get("properties", {}).items():
        yield from _rules(sub, f"{path}.{name}", values)
    for key, bound_key, suffix in (("items", "maxItems", "[]"), ("additionalProperties", "maxProperties", ".*")):
        if isinstance(node.get(key), dict):
            bound = node.get(bound_key)
            yield from _rules(node[key], path + suffix, None if values is None or bound is None else values * bound)


ALL_RULES = [(kind, path, rule, n, node) for kind in CRDS for path, rule, n, node in _rules(_root(kind))]

EXPECTED_RULES = {
    ("AgentConfig", ".spec.protectedPrefixes[]"), ("AgentConfig", ".spec.serviceCIDRs[]"),
    ("AgentConfig", ".spec.api.address"), ("AgentConfig", ".spec.api.metricsAddress"),
    ("BgpPeer", ".spec"), ("BgpPeer", ".spec.peerAddress"), ("BgpPeer", ".spec.localAddress"),
    ("BgpPeer", ".spec.nodeOverrides[].localAddress"),
    ("BgpSpeaker", ".spec.listenAddresses[]"),
    ("Advertisement", ".spec.prefixes[]"),
}


def test_which_fields_have_rules():
    assert {(kind, path) for kind, path, *_ in ALL_RULES} == EXPECTED_RULES


def test_rules_under_unbounded_lists_are_left_out_and_named():
    dropped: list[str] = []
    for kind, model in KINDS.items():
        structural_schema(_spec_model(model).model_json_schema(by_alias=True, mode="validation"), kind, dropped)
    assert sorted(d.split(":")[0] for d in dropped) == [
        "RoutePolicy.statements[].actions.setNextHop", "RoutePolicy.statements[].conditions.nextHopIn[]",
        "RoutePolicy.statements[].conditions.prefixSet[].prefix",
        "StaticRoutes.routes[].nextHops[].gateway", "StaticRoutes.routes[].prefix"]


@pytest.mark.parametrize(("kind", "path", "rule", "values", "node"), ALL_RULES,
                         ids=[f"{k}{p}:{r['rule'][:30]}" for k, p, r, _, _ in ALL_RULES])
def test_every_rule_compiles_is_bounded_and_has_a_message(kind, path, rule, values, node):
    k8s_cel.evaluate("true", {})  # the environment works at all
    k8s_cel._program(rule["rule"])  # compiles (raises CelError otherwise)
    assert rule["message"] and set(rule) <= {"rule", "message", "fieldPath"}
    assert values is not None and values * 20 <= RULE_BUDGET  # Cel.cost 20, the default
    if node.get("type") == "string":
        assert node["maxLength"] in (45, 49)  # the cost of a string rule grows with its length


# ---------------------------------------------------------------------------------------------
# The rules say what the models say
# ---------------------------------------------------------------------------------------------

ADDRESSES = ["10.0.0.1", "0.0.0.0", "255.255.255.255", "2001:db8::1", "2001:DB8::1", "::", "::1",
             "fe80::1", "10.0.0.300", "10.0.0", "010.0.0.1", "1.2.3.4.5", "", " 10.0.0.1", "fe80::1%eth0",
             "2001:db8::1/128", "10.0.0.1/32", "gggg::1", "1:2:3:4:5:6:7:8:9", "::ffff:1.2.3.4.5", "x"]
PREFIXES = ["10.0.0.0/8", "10.0.0.0/24", "10.0.0.1/24", "0.0.0.0/0", "::/0", "2001:db8::/32",
            "2001:DB8::/32", "2001:db8::1/32", "2001:db8::1/128", "10.0.0.0/33", "10.0.0.0", "10.0.0.0/",
            "10.0.0.0/-1", "10.0.0.0/ 8", "10.0.0.0/8 ", "fe80::%eth0/64", "x/8", "10.0.0.0/8/8",
            "192.168.1.0/24", "10.0.0.0/024"]


def _model_ok(annotation, value) -> bool:
    try:
        TypeAdapter(annotation).validate_python(value)
        return True
    except ValidationError:
        return False


@pytest.mark.parametrize(("annotation", "corpus"), [(IPAddress, ADDRESSES), (Gateway, ADDRESSES),
                                                     (IPPrefix, PREFIXES)], ids=["address", "gateway", "prefix"])
def test_string_rules_agree_with_the_validators(annotation, corpus):
    (rule,) = TypeAdapter(annotation).json_schema()["x-kubernetes-validations"]
    disagree = {v: (_model_ok(annotation, v), k8s_cel.holds(rule["rule"], {"self": v})) for v in corpus}
    disagree = {v: verdicts for v, verdicts in disagree.items() if verdicts[0] != verdicts[1]}
    # Python reads a leading-zero prefix length; Kubernetes' cidr() does not (the model's
    # canonical text never has one, so only hand-written input can differ)
    assert disagree == ({"10.0.0.0/024": (True, False)} if annotation is IPPrefix else {})
    # IPv4-mapped IPv6: Kubernetes refuses it, the model takes it (documented in agent.config.base)
    assert not k8s_cel.holds(rule["rule"], {"self": "::ffff:10.0.0.1"})


def _peer(**spec) -> dict:
    return {"apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer", "metadata": {"name": "p"},
            "spec": {"peerAddress": "10.0.0.1", "peerAS": 65001, "localAS": 65000, **spec}}


@pytest.mark.parametrize(("spec", "field"), [
    ({}, None),
    ({"localAddress": "10.0.0.2"}, None),
    ({"localAddress": "fd00::2"}, "spec.localAddress"),
    ({"peerAddress": "fd00::1", "localAddress": "10.0.0.2"}, "spec.localAddress"),
    ({"peerAddress": "0.0.0.0"}, "spec.peerAddress"),
    ({"peerAddress": "::"}, "spec.peerAddress"),
    ({"holdTime": 0}, None),
    ({"holdTime": 2}, "spec.holdTime"),
    ({"holdTime": 3}, None),
    ({"ebgpMultihop": 2}, None),
    ({"ebgpMultihop": 2, "peerAS": 65000}, "spec.ebgpMultihop"),
    ({"peerAS": 23456}, "spec"),
    ({"localAS": 23456}, "spec"),
    ({"ttlSecurity": 1}, None),
    ({"ttlSecurity": 1, "ebgpMultihop": 2}, "spec.ttlSecurity"),
    ({"nodeOverrides": [{"nodeName": "n1", "localAddress": "10.0.0.999"}]}, "spec.nodeOverrides[0].localAddress"),
])
def test_bgppeer_rules_agree_with_the_model(spec, field):
    doc = _peer(**spec)
    try:
        k8sapi_schema.admit_custom(CRDS["BgpPeer"], doc, None, strict=True)
        fields = []
    except k8sapi_schema.Rejected as exc:
        fields = [c["field"] for c in exc.causes]
    assert fields == ([field] if field else [])
    assert _model_ok(KINDS["BgpPeer"], doc) == (field is None)


def _samples() -> list[dict]:
    texts = [(ROOT / "agent/samples/standalone.yaml").read_text(), (ROOT / "deploy/sample-config.yaml").read_text()]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:  # every YAML example of the docs
        texts += re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S)
    return [d for t in texts for d in yaml.safe_load_all(t)
            if isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("routeagent.io/")]


@pytest.mark.parametrize("doc", _samples(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_every_sample_passes_the_api_server(doc):
    stored = k8sapi_schema.admit_custom(CRDS[doc["kind"]], doc, None, strict=True)
    model = KINDS[doc["kind"]]
    assert model.model_validate(stored) == model.model_validate(doc)


def test_rules_of_a_model_and_the_budget():
    """A model-level rule is written; a rule under a list without maxItems is not; under a
    bounded list it is, until cost x maxItems passes the budget."""
    class Item(BaseModel):
        a: Annotated[str, Cel("isIP(self)", "an address", max_length=45)]

    class Spec(BaseModel):
        model_config = ConfigDict(json_schema_extra=cel_rules(Cel("self.n >= 0", "n", field_path=".n")))
        n: int
        free: list[Item]
        small: list[Item] = Field(max_length=10)
        big: list[Item] = Field(max_length=RULE_BUDGET // 20 + 1)

    dropped: list[str] = []
    schema = structural_schema(Spec.model_json_schema(mode="validation"), "Spec", dropped)
    assert schema["x-kubernetes-validations"] == [{"rule": "self.n >= 0", "message": "n", "fieldPath": ".n"}]
    props = schema["properties"]
    assert props["small"]["items"]["properties"]["a"]["x-kubernetes-validations"] == [
        {"rule": "isIP(self)", "message": "an address"}]
    assert props["small"]["items"]["properties"]["a"]["maxLength"] == 45
    assert "x-kubernetes-validations" not in props["free"]["items"]["properties"]["a"]
    assert "x-kubernetes-validations" not in props["big"]["items"]["properties"]["a"]
    assert dropped == ["Spec.free[].a: isIP(self)", "Spec.big[].a: isIP(self)"]


# ---------------------------------------------------------------------------------------------
# The ValidatingAdmissionPolicy: each agent writes only its own node's state
# ---------------------------------------------------------------------------------------------

VAP = [d for d in yaml.safe_load_all((ROOT / "deploy/admission-policy.yaml").read_text())
       if d["kind"] == "ValidatingAdmissionPolicy"][0]
AGENT = "system:serviceaccount:route-agent:route-agent"


def _admit(user: str, extra: dict, obj: dict | None, operation: str = "CREATE", old: dict | None = None):
    """The messages of the failed validations (None: the policy does not match the request)."""
    request = {"operation": operation, "userInfo": {"username": user, "extra": extra}}
    base = {"request": request, "object": obj, "oldObject": old}
    for cond in VAP["spec"]["matchConditions"]:
        if not k8s_cel.holds(cond["expression"], base):
            return None
    variables: dict = {}
    for var in VAP["spec"]["variables"]:
        variables[var["name"]] = k8s_cel.evaluate(var["expression"], {**base, "variables": variables})
    failed = []
    for v in VAP["spec"]["validations"]:
        if not k8s_cel.holds(v["expression"], {**base, "variables": variables}):
            failed.append(str(k8s_cel.evaluate(v["messageExpression"], {**base, "variables": variables}))
                          if "messageExpression" in v else " ".join(v["message"].split()))
    return failed


def _state(name: str, node_name: str | None = None, owner_uid: str | None = "uid-a") -> dict:
    obj = {"apiVersion": "routeagent.io/v1alpha1", "kind": "RouteAgentNodeState",
           "metadata": {"name": name}, "spec": {"nodeName": node_name or name}}
    if owner_uid:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": owner_uid}]
    return obj


CLAIM = {"authentication.kubernetes.io/node-name": ["node-a"], "authentication.kubernetes.io/node-uid": ["uid-a"]}


def test_an_agent_writes_its_own_nodes_state():
    assert _admit(AGENT, CLAIM, _state("node-a")) == []
    assert _admit(AGENT, CLAIM, _state("node-a"), "UPDATE", _state("node-a")) == []
    assert _admit(AGENT, CLAIM, _state("node-a", owner_uid=None)) == []  # older objects: no owner


@pytest.mark.parametrize(("obj", "operation", "expected"), [
    (_state("node-b"), "CREATE", "may only write the RouteAgentNodeState node-a, not node-b"),
    (_state("node-b"), "UPDATE", "may only write the RouteAgentNodeState node-a, not node-b"),
    (None, "DELETE", "may only write the RouteAgentNodeState node-a, not node-b"),
    (_state("node-a", node_name="node-b"), "CREATE", "spec.nodeName must be node-a"),
    (_state("node-a", owner_uid="uid-b"), "CREATE", "the only owner may be the Node node-a"),
])
def test_an_agent_cannot_write_another_nodes_state(obj, operation, expected):
    old = _state("node-b") if operation in ("UPDATE", "DELETE") else None
    failed = _admit(AGENT, CLAIM, obj, operation, old)
    assert any(expected in f for f in failed), failed


def test_a_token_without_a_node_is_refused_and_other_users_are_not_matched():
    failed = _admit(AGENT, {}, _state("node-a"))
    assert failed and "node-name claim" in failed[0]
    assert _admit("kubernetes-admin", {}, _state("node-b")) is None
    assert _admit("system:serviceaccount:other:route-agent", CLAIM, _state("node-b")) is None
