"""Node-selecting configuration: label selectors, per-node overrides, `for_node`, Advertisement rules."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from agent.config.base import LabelSelector, LabelSelectorRequirement
from agent.config.resolve import Config, NodeIdentity, for_node
from agent.config.loader import ConfigError, Problem, format_problems, load_path, load_text, validate_main

API = "routeagent.io/v1alpha1"
SAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "sample-config.yaml"


def sel(data: dict) -> LabelSelector:
    return LabelSelector.model_validate(data, by_alias=True, by_name=False)


def doc(kind: str, name: str, spec: dict, labels: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec}


def text(*docs: dict) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def problems(*docs: dict) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_text(text(*docs), "cfg.yaml")
    return info.value.problems


def only(*docs: dict) -> Problem:
    ps = problems(*docs)
    assert len(ps) == 1, format_problems(ps)
    return ps[0]


def peer_spec(address="10.0.0.1", **extra) -> dict:
    return {"peerAddress": address, "peerAS": 65001, "localAS": 65000, "importPolicy": "acceptAll", **extra}


# ---------------------------------------------------------------------------------------------
# LabelSelector
# ---------------------------------------------------------------------------------------------

LABELS = {"rack": "r1", "zone": "a", "node-role.kubernetes.io/edge": ""}

MATCH_CASES = [
    ("empty selects everything", {}, {}, True),
    ("empty selects unlabelled", {}, LABELS, True),
    ("matchLabels hit", {"matchLabels": {"rack": "r1"}}, LABELS, True),
    ("matchLabels all must hold", {"matchLabels": {"rack": "r1", "zone": "b"}}, LABELS, False),
    ("matchLabels missing key", {"matchLabels": {"pool": "x"}}, LABELS, False),
    ("matchLabels empty value", {"matchLabels": {"node-role.kubernetes.io/edge": ""}}, LABELS, True),
    ("In hit", {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]}]}, LABELS, True),
    ("In miss", {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r3"]}]}, LABELS, False),
    ("In without key", {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}]}, LABELS, False),
    ("NotIn hit", {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r1"]}]}, LABELS, False),
    ("NotIn miss", {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r2"]}]}, LABELS, True),
    ("NotIn without key holds", {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["x"]}]},
     LABELS, True),
    ("Exists", {"matchExpressions": [{"key": "node-role.kubernetes.io/edge", "operator": "Exists"}]}, LABELS, True),
    ("Exists miss", {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}, LABELS, False),
    ("DoesNotExist", {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}, LABELS, True),
    ("DoesNotExist miss", {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, LABELS, False),
    ("labels and expressions both", {"matchLabels": {"zone": "a"},
                                     "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]},
     LABELS, False),
    ("every expression must hold", {"matchExpressions": [
        {"key": "rack", "operator": "Exists"}, {"key": "zone", "operator": "NotIn", "values": ["a"]}]},
     LABELS, False),
]


@pytest.mark.parametrize("data,labels,expected", [c[1:] for c in MATCH_CASES], ids=[c[0] for c in MATCH_CASES])
def test_label_selector_matches(data, labels, expected):
    assert sel(data).matches(labels) is expected


def test_selector_is_value_equal_and_frozen():
    a = sel({"matchLabels": {"rack": "r1"}})
    assert a == sel({"matchLabels": {"rack": "r1"}})
    with pytest.raises(ValidationError):
        a.match_labels = {}  # type: ignore[misc]


REQUIREMENT_ERRORS = [
    ("Exists with values", {"key": "a", "operator": "Exists", "values": ["x"]}, "values",
     "operator Exists takes no values"),
    ("DoesNotExist with values", {"key": "a", "operator": "DoesNotExist", "values": ["x"]}, "values",
     "operator DoesNotExist takes no values"),
    ("In without values", {"key": "a", "operator": "In"}, "values", "operator In needs at least one value"),
    ("NotIn with empty values", {"key": "a", "operator": "NotIn", "values": []}, "values",
     "operator NotIn needs at least one value"),
    ("unknown operator", {"key": "a", "operator": "Gt", "values": ["1"]}, "operator", "'In', 'NotIn'"),
    ("empty key", {"key": "", "operator": "Exists"}, "key", "at least 1 character"),
]


@pytest.mark.parametrize("data,field,message", [c[1:] for c in REQUIREMENT_ERRORS],
                         ids=[c[0] for c in REQUIREMENT_ERRORS])
def test_requirement_errors_direct(data, field, message):
    with pytest.raises(ValidationError) as info:
        LabelSelectorRequirement.model_validate(data, by_alias=True, by_name=False)
    errs = info.value.errors()
    assert [e["loc"] for e in errs] == [(field,)]
    assert message in errs[0]["msg"]


@pytest.mark.parametrize("data,field,message", [c[1:] for c in REQUIREMENT_ERRORS],
                         ids=[c[0] for c in REQUIREMENT_ERRORS])
def test_requirement_errors_carry_the_field_path(data, field, message):
    p = only(doc("BgpPeer", "tor", peer_spec(nodeSelector={"matchExpressions": [{"key": "ok", "operator": "Exists"},
                                                                                 data]})))
    assert p.object == "BgpPeer/tor"
    assert p.field == f"spec.nodeSelector.matchExpressions[1].{field}"
    assert message in p.message
    assert p.line is not None


def test_invalid_match_labels_key_in_selector():
    p = only(doc("StaticRoutes", "s", {"routes": [{"prefix": "192.0.2.0/24", "blackhole": True}],
                                       "nodeSelector": {"matchLabels": {"bad key!": "x"}}}))
    assert p.field == "spec.nodeSelector.matchLabels"
    assert "invalid label key 'bad key!'" in p.message


def test_selector_unknown_field_suggests_spelling():
    p = only(doc("Advertisement", "a", {"type": "pool", "prefixes": ["198.51.100.0/24"],
                                        "nodeSelector": {"match_labels": {"rack": "r1"}}}))
    assert p.field == "spec.nodeSelector.match_labels"
    assert "did you mean 'matchLabels'" in p.message


# ---------------------------------------------------------------------------------------------
# NodeOverride validation, through the loader
# ---------------------------------------------------------------------------------------------

def test_duplicate_override_node_name():
    p = only(doc("BgpPeer", "tor", peer_spec(nodeOverrides=[
        {"nodeName": "n1", "routerId": "10.1.1.1"}, {"nodeName": "n2", "routerId": "10.1.1.2"},
        {"nodeName": "n1", "localAS": 65111}])))
    assert p.field == "spec.nodeOverrides[2].nodeName"
    assert "duplicate node n1 (already in nodeOverrides[0])" in p.message


def test_override_local_address_family():
    p = only(doc("BgpPeer", "tor", peer_spec(nodeOverrides=[
        {"nodeName": "n1", "localAddress": "10.0.0.11"}, {"nodeName": "n2", "localAddress": "2001:db8::2"}])))
    assert p.field == "spec.nodeOverrides[1].localAddress"
    assert "2001:db8::2 is not of the family of peerAddress" in p.message


def test_override_v6_peer():
    config = load_text(text(doc("BgpPeer", "tor6", peer_spec("2001:db8::1", routerId="10.9.9.9", nodeOverrides=[
        {"nodeName": "n1", "localAddress": "2001:DB8::0B"}]))))
    assert config.peers[0].spec.node_overrides[0].local_address == "2001:db8::b"  # canonical


OVERRIDE_FIELD_ERRORS = [
    ("bad router id", {"nodeName": "n1", "routerId": "2001:db8::1"}, "spec.nodeOverrides[0].routerId",
     "a router id is an IPv4 address"),
    ("zero router id", {"nodeName": "n1", "routerId": "0.0.0.0"}, "spec.nodeOverrides[0].routerId",
     "0.0.0.0 is not allowed"),
    ("bad node name", {"nodeName": "Node_1"}, "spec.nodeOverrides[0].nodeName", "DNS-1123 subdomain"),
    ("local AS zero", {"nodeName": "n1", "localAS": 0}, "spec.nodeOverrides[0].localAS", "greater than or equal to 1"),
    ("snake-case field", {"nodeName": "n1", "local_as": 65001}, "spec.nodeOverrides[0].local_as",
     "did you mean 'localAS'"),
    ("no node name", {"routerId": "10.1.1.1"}, "spec.nodeOverrides[0].nodeName", "Field required"),
]


@pytest.mark.parametrize("override,field,message", [c[1:] for c in OVERRIDE_FIELD_ERRORS],
                         ids=[c[0] for c in OVERRIDE_FIELD_ERRORS])
def test_override_field_errors(override, field, message):
    p = only(doc("BgpPeer", "tor", peer_spec(nodeOverrides=[override])))
    assert p.field == field
    assert message in p.message


# ---------------------------------------------------------------------------------------------
# for_node
# ---------------------------------------------------------------------------------------------

def config_of(*docs: dict) -> Config:
    return load_text(text(*docs))


def test_for_node_selects_by_labels():
    config = config_of(
        doc("BgpPeer", "r1", peer_spec("10.0.1.1", nodeSelector={"matchLabels": {"rack": "r1"}})),
        doc("BgpPeer", "r2", peer_spec("10.0.2.1", nodeSelector={"matchLabels": {"rack": "r2"}})),
        doc("BgpPeer", "all", peer_spec("10.0.0.1")),
        doc("StaticRoutes", "edge", {"routes": [{"prefix": "192.0.2.0/24", "blackhole": True}],
                                     "nodeSelector": {"matchExpressions": [
                                         {"key": "edge", "operator": "Exists"}]}}),
        doc("StaticRoutes", "every", {"routes": [{"prefix": "192.0.3.0/24", "blackhole": True}]}),
        doc("Advertisement", "pool", {"type": "pool", "prefixes": ["198.51.100.0/24"],
                                      "nodeSelector": {"matchExpressions": [
                                          {"key": "rack", "operator": "NotIn", "values": ["r2"]}]}}),
    )
    n1 = for_node(config, NodeIdentity("n1", {"rack": "r1"}, "192.168.0.1"))
    assert [p.metadata.name for p in n1.peers] == ["r1", "all"]
    assert [s.metadata.name for s in n1.static] == ["every"]
    assert [a.metadata.name for a in n1.adverts] == ["pool"]
    n2 = for_node(config, NodeIdentity("n2", {"rack": "r2", "edge": "true"}, "192.168.0.2"))
    assert [p.metadata.name for p in n2.peers] == ["r2", "all"]
    assert [s.metadata.name for s in n2.static] == ["edge", "every"]
    assert n2.adverts == ()
    # no labels: only the unselective objects (NotIn holds without the key)
    bare = for_node(config, NodeIdentity("n3", {}, "192.168.0.3"))
    assert [p.metadata.name for p in bare.peers] == ["all"]
    assert [a.metadata.name for a in bare.adverts] == ["pool"]
    # the input is left alone
    assert len(config.peers) == 3 and config.peers[0].spec.node_selector is not None


def test_for_node_overrides_and_router_id():
    config = config_of(doc("BgpPeer", "tor", peer_spec(localAddress="10.0.0.20", nodeOverrides=[
        {"nodeName": "n1", "routerId": "10.1.1.1", "localAddress": "10.0.0.11", "localAS": 65111},
        {"nodeName": "n2", "localAS": 65222}])))
    s1 = for_node(config, NodeIdentity("n1", {}, "192.168.0.1")).peers[0].spec
    assert (s1.router_id, s1.local_address, s1.local_as) == ("10.1.1.1", "10.0.0.11", 65111)
    assert s1.node_overrides == () and s1.node_selector is None
    s2 = for_node(config, NodeIdentity("n2", {}, "192.168.0.2")).peers[0].spec
    assert (s2.router_id, s2.local_address, s2.local_as) == ("192.168.0.2", "10.0.0.20", 65222)
    s3 = for_node(config, NodeIdentity("n3", {}, "192.168.0.3")).peers[0].spec
    assert (s3.router_id, s3.local_address, s3.local_as) == ("192.168.0.3", "10.0.0.20", 65000)


def test_for_node_explicit_router_id_wins_over_node_address():
    config = config_of(doc("BgpPeer", "tor", peer_spec(routerId="10.9.9.9")))
    assert for_node(config, NodeIdentity("n1", {}, "192.168.0.1")).peers[0].spec.router_id == "10.9.9.9"


def test_for_node_without_router_id():
    config = config_of(doc("BgpPeer", "tor", peer_spec()), doc("BgpPeer", "ok", peer_spec("10.0.0.2",
                                                                                         routerId="10.9.9.9")))
    with pytest.raises(ValueError) as info:
        for_node(config, NodeIdentity("n1", {}, None))
    msg = str(info.value)
    assert "BgpPeer/tor: spec.routerId: unset" in msg and "node n1" in msg and "BgpPeer/ok" not in msg


def test_for_node_shared_peer_address():
    config = config_of(
        doc("BgpPeer", "tor-r1", peer_spec("10.0.0.1", nodeSelector={"matchLabels": {"rack": "r1"}})),
        doc("BgpPeer", "tor-r2", peer_spec("10.0.0.1", nodeSelector={"matchLabels": {"rack": "r2"}})),
        doc("BgpPeer", "tor-any", peer_spec("10.0.0.1", nodeSelector={"matchLabels": {"any": "yes"}})),
    )  # selectors on all: the loader lets them share the address
    assert [p.metadata.name for p in for_node(config, NodeIdentity("n1", {"rack": "r1"}, "1.1.1.1")).peers] \
        == ["tor-r1"]
    with pytest.raises(ValueError) as info:
        for_node(config, NodeIdentity("n2", {"rack": "r2", "any": "yes"}, "1.1.1.2"))
    assert str(info.value) == ("BgpPeer/tor-any: spec.peerAddress: BgpPeer/tor-r2 already has peerAddress "
                               "10.0.0.1 on node n2")


def test_shared_peer_address_without_selector_is_a_loader_error():
    ps = problems(doc("BgpPeer", "a", peer_spec("10.0.0.1")), doc("BgpPeer", "b", peer_spec("10.0.0.1")))
    assert len(ps) == 1
    assert ps[0].object == "BgpPeer/b" and ps[0].field == "spec.peerAddress"
    assert "another BgpPeer already has peerAddress 10.0.0.1" in ps[0].message


# ---------------------------------------------------------------------------------------------
# Advertisement rules
# ---------------------------------------------------------------------------------------------

ADVERT_ERRORS = [
    ("pool without prefixes", {"type": "pool"}, "spec.prefixes", "type pool needs at least one prefix"),
    ("vip without prefixes", {"type": "vip", "prefixes": []}, "spec.prefixes", "type vip needs at least one prefix"),
    ("prefix by default needs prefixes", {}, "spec.prefixes", "type prefix needs at least one prefix"),
    ("service with prefixes", {"type": "service", "prefixes": ["198.51.100.1/32"]}, "spec.prefixes",
     "type service takes its prefixes from the Services"),
    ("services with type pool", {"type": "pool", "prefixes": ["198.51.100.0/24"], "services": {}},
     "spec.services", "services only applies to type service (type is pool)"),
    ("services with type podCIDR", {"type": "podCIDR", "services": {"clusterIP": False}}, "spec.services",
     "type is podCIDR"),
    ("unknown type", {"type": "nodeIP", "prefixes": ["198.51.100.0/24"]}, "spec.type", "'podCIDR'"),
    ("services selector expression", {"type": "service", "services": {"selector": {"matchExpressions": [
        {"key": "a", "operator": "Exists", "values": ["b"]}]}}},
     "spec.services.selector.matchExpressions[0].values", "operator Exists takes no values"),
    ("services clusterIP strict bool", {"type": "service", "services": {"clusterIP": "yes"}},
     "spec.services.clusterIP", "valid boolean"),
]


@pytest.mark.parametrize("spec,field,message", [c[1:] for c in ADVERT_ERRORS], ids=[c[0] for c in ADVERT_ERRORS])
def test_advertisement_rules(spec, field, message):
    p = only(doc("Advertisement", "adv", spec))
    assert p.object == "Advertisement/adv"
    assert p.field == field
    assert message in p.message


def test_advertisement_rules_reported_together():
    ps = problems(doc("Advertisement", "adv", {"type": "pool", "services": {}}))
    assert sorted(p.field for p in ps) == ["spec.prefixes", "spec.services"]


ADVERT_OK = [
    ("podCIDR without prefixes", {"type": "podCIDR"}),
    ("podCIDR with prefixes", {"type": "podCIDR", "prefixes": ["10.244.1.0/24"]}),
    ("service without selection", {"type": "service"}),
    ("service with selection", {"type": "service", "services": {
        "selector": {"matchLabels": {"announce": "yes"}}, "clusterIP": False, "externalIPs": True,
        "loadBalancerIngress": True, "loadBalancerClasses": ["routeagent.io/bgp"]}}),
    ("service on some nodes", {"type": "service", "nodeSelector": {"matchLabels": {"edge": "true"}}}),
]


@pytest.mark.parametrize("spec", [c[1] for c in ADVERT_OK], ids=[c[0] for c in ADVERT_OK])
def test_advertisement_valid(spec):
    config = config_of(doc("Advertisement", "adv", spec))
    assert config.adverts[0].spec.type == spec["type"]


def test_service_selection_defaults():
    s = config_of(doc("Advertisement", "adv", {"type": "service", "services": {}})).adverts[0].spec.services
    assert (s.cluster_ip, s.external_ips, s.load_balancer_ingress, s.load_balancer_classes) == (True, True, True, ())
    assert s.selector.matches({"anything": "x"})


# ---------------------------------------------------------------------------------------------
# The deploy sample
# ---------------------------------------------------------------------------------------------

def test_deploy_sample_validates():
    out, err = io.StringIO(), io.StringIO()
    assert validate_main(SAMPLE, out=out, err=err) == 0, err.getvalue()
    assert out.getvalue().startswith("ok: ") and err.getvalue() == ""


def test_deploy_sample_on_nodes():
    config = load_path(SAMPLE)
    rack1 = {"topology.kubernetes.io/zone": "rack1"}
    plain = for_node(config, NodeIdentity("rack1-node1", rack1, "10.0.1.101"))
    tor = [p for p in plain.peers if p.metadata.name == "tor-rack1"]
    assert tor and tor[0].spec.router_id == "10.0.1.101"
    n7 = for_node(config, NodeIdentity("rack1-node7", rack1, "10.0.1.200"))
    spec = next(p.spec for p in n7.peers if p.metadata.name == "tor-rack1")
    assert (spec.router_id, spec.local_address, spec.local_as) == ("10.0.1.107", "10.0.1.107", 65107)
    edge = for_node(config, NodeIdentity("rack1-node2", {**rack1, "node-role.kubernetes.io/edge": ""}, "10.0.1.102"))
    assert not any(p.metadata.name == "tor-rack1" for p in edge.peers)
