"""Configuration: models, rules with their exact field paths, loading files and directories."""

from __future__ import annotations

import io
import os
from importlib import resources
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from agent.config.agentconfig import AgentConfig
from agent.config.base import Metadata
from agent.config.resolve import Config, distances, fib_settings, static_candidates
from agent.config.static import NextHopSpec, StaticRoute, StaticRoutes, StaticRoutesSpec
from agent.config.loader import (
    ConfigError,
    Problem,
    config_fingerprint,
    format_problems,
    load_path,
    load_text,
    validate_main,
)
from agent.fib.types import FibSettings
from agent.core.model import (
    DEFAULT_DISTANCE,
    Candidate,
    NextHop,
    Origin,
    Prefix,
    RouteType,
    SourceKind,
)

API = "routeagent.io/v1alpha1"


def _doc(kind: str, name: str, spec: object) -> dict:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _yaml(*docs: dict) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def _problems(text: str, file: str = "cfg.yaml") -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_text(text, file)
    return info.value.problems


def _only(text: str) -> Problem:
    problems = _problems(text)
    assert len(problems) == 1, format_problems(problems)
    return problems[0]


# ---------------------------------------------------------------------------------------------
# A valid configuration and what it turns into
# ---------------------------------------------------------------------------------------------

VALID = """\
apiVersion: routeagent.io/v1alpha1
kind: AgentConfig
metadata:
  name: agent
spec:
  fib: {table: 100, protocol: 210, metric: 50}
  adminDistance: {static: 3, ebgp: 25}
  maxPaths: 8
---
apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata:
  name: uplinks
  labels: {app.kubernetes.io/name: route-agent}
spec:
  routes:
    - prefix: 10.1.0.0/16
      nextHops: [{gateway: 10.0.0.1, device: eth0}]
    - prefix: 2001:DB8:0:0::/64
      nextHops: [{gateway: "2001:db8:ffff:0::1"}]
    - prefix: fd00:1::/48
      nextHops: [{gateway: fe80::1, device: eth1}]
    - prefix: 0.0.0.0/0
      distance: 0
      nextHops:
        - {gateway: 10.0.0.2, weight: 3}
        - {gateway: 10.0.0.1}
    - prefix: 192.0.2.0/24
      distance: 250
      blackhole: true
    - prefix: 198.51.100.0/24
      nextHops: [{device: wg0}]
"""


def test_valid_file_yields_candidates():
    config = load_text(VALID)
    origin = Origin(SourceKind.STATIC, "uplinks")
    assert static_candidates(config) == {
        (Prefix.parse("10.1.0.0/16"), origin): Candidate(origin, 3, (NextHop("10.0.0.1", "eth0"),)),
        (Prefix.parse("2001:db8::/64"), origin): Candidate(origin, 3, (NextHop("2001:db8:ffff::1"),)),
        (Prefix.parse("fd00:1::/48"), origin): Candidate(origin, 3, (NextHop("fe80::1", "eth1"),)),
        # distance 0 overrides adminDistance.static (0 is not "unset"); next hops sorted
        (Prefix.parse("0.0.0.0/0"), origin): Candidate(
            origin, 0, (NextHop("10.0.0.1"), NextHop("10.0.0.2", weight=3))
        ),
        (Prefix.parse("192.0.2.0/24"), origin): Candidate(origin, 250, (), RouteType.BLACKHOLE),
        (Prefix.parse("198.51.100.0/24"), origin): Candidate(origin, 3, (NextHop(None, "wg0"),)),
    }
    assert fib_settings(config) == FibSettings(table=100, protocol=210, metric=50, nexthop_objects="auto")
    assert distances(config) == {**DEFAULT_DISTANCE, SourceKind.STATIC: 3, SourceKind.EBGP: 25}
    assert config.agent.max_paths == 8
    assert config.agent.fib.full_scan_seconds == 60 and config.agent.fib.stale_seconds == 120
    assert config.static[0].metadata.labels == {"app.kubernetes.io/name": "route-agent"}


def test_canonical_text_is_stored():
    route = load_text(VALID).static[0].spec.routes[1]
    assert route.prefix == "2001:db8::/64"
    assert route.next_hops[0].gateway == "2001:db8:ffff::1"


@pytest.mark.parametrize("text", ["", "# nothing\n", "---\n---\n", "---\n", "null\n", "~\n---\nnull\n"])
def test_an_empty_configuration_is_refused(text):
    """Issue 12: an editor or `>` truncating the file must not delete every route."""
    with pytest.raises(ConfigError) as info:
        load_text(text, "cfg.yaml")
    (problem,) = info.value.problems
    assert problem.file == "cfg.yaml" and problem.message.startswith("no configuration objects")
    assert "AgentConfig" in problem.message  # says how to run with nothing on purpose


def test_an_empty_file_or_directory_is_refused(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("")
    with pytest.raises(ConfigError, match="no configuration objects"):
        load_path(cfg)
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.yaml").write_text("---\n")
    with pytest.raises(ConfigError, match="no configuration objects"):
        load_path(d)
    err = io.StringIO()
    assert validate_main(cfg, out=io.StringIO(), err=err) == 1
    assert "no configuration objects" in err.getvalue()


def test_one_agentconfig_alone_means_defaults():
    config = load_text("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata: {name: defaults}\n")
    assert config == Config()
    assert fib_settings(config) == FibSettings(table=254, protocol=201, metric=20, nexthop_objects="auto")
    assert distances(config) == DEFAULT_DISTANCE
    assert config.agent.max_paths == 16
    assert (config.agent.api.address, config.agent.api.port) == ("127.0.0.1", 9180)
    assert (config.agent.fib.full_scan_seconds, config.agent.fib.stale_seconds) == (60, 120)
    assert static_candidates(config) == {}


def test_agent_config_without_spec_is_all_defaults():
    text = f"apiVersion: {API}\nkind: AgentConfig\nmetadata: {{name: a}}\n"
    assert load_text(text) == Config()


def test_sample_file_validates(capsys):
    sample = resources.files("agent") / "samples" / "standalone.yaml"
    with resources.as_file(sample) as path:
        assert validate_main(path) == 0
        config = load_path(path)
    assert capsys.readouterr().out == "ok: 3 objects\n"
    cands = static_candidates(config)
    by_prefix = {str(p): c for (p, _), c in cands.items()}
    assert any(p.family == 4 for p, _ in cands) and any(p.family == 6 for p, _ in cands)
    assert [c for c in by_prefix.values() if c.type == RouteType.BLACKHOLE]
    ecmp = [c for c in by_prefix.values() if len(c.nexthops) == 2]
    assert [[(h.gateway, h.dev) for h in c.nexthops] for c in ecmp] == [
        [("10.99.0.1", "ra-demo0"), ("10.99.0.2", "ra-demo0")]
    ]
    gateways = {h.gateway for c in cands.values() for h in c.nexthops}
    assert gateways <= {"10.99.0.1", "10.99.0.2", "fd00:99::1"} and "fd00:99::1" in gateways
    assert {h.dev for c in cands.values() for h in c.nexthops} == {"ra-demo0"}


# ---------------------------------------------------------------------------------------------
# StaticRoutes rules: field path and message
# ---------------------------------------------------------------------------------------------

GW = {"gateway": "10.0.0.1"}

ROUTE_RULES = [
    # (routes, field, message)
    ([{"prefix": "10.1.2.3/16", "nextHops": [GW]}],
     "spec.routes[0].prefix", "host bits set in 10.1.2.3/16: the network is 10.1.0.0/16"),
    ([{"prefix": "2001:db8::1/64", "nextHops": [{"gateway": "2001:db8::2"}]}],
     "spec.routes[0].prefix", "host bits set in 2001:db8::1/64: the network is 2001:db8::/64"),
    ([{"prefix": "10.0.0.0", "nextHops": [GW]}],
     "spec.routes[0].prefix",
     "invalid prefix '10.0.0.0': expected an IPv4 or IPv6 network in CIDR notation, "
     "like 10.0.0.0/24 or 2001:db8::/32"),
    ([{"prefix": "10.0.0.0/33", "nextHops": [GW]}],
     "spec.routes[0].prefix",
     "invalid prefix '10.0.0.0/33': '10.0.0.0/33' does not appear to be an IPv4 or IPv6 network"),
    ([{"nextHops": [GW]}], "spec.routes[0].prefix", "Field required"),
    ([{"prefix": "10.0.0.0/24", "blackhole": True, "nextHops": [GW]}],
     "spec.routes[0].blackhole",
     "blackhole and nextHops are exclusive: a blackhole route has no next hops"),
    ([{"prefix": "10.0.0.0/24"}],
     "spec.routes[0].nextHops", "a route needs nextHops, or blackhole: true"),
    ([{"prefix": "10.0.0.0/24", "blackhole": False, "nextHops": []}],
     "spec.routes[0].nextHops", "a route needs nextHops, or blackhole: true"),
    ([{"prefix": "10.0.0.0/24", "blackhole": "yes please"}],
     "spec.routes[0].blackhole", "Input should be a valid boolean"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [GW, {"gateway": "fd00::1"}]}],
     "spec.routes[0].nextHops[1].gateway",
     "IPv6 gateway fd00::1 for IPv4 prefix 10.0.0.0/24: the families must match"),
    ([{"prefix": "fd00::/64", "nextHops": [{"gateway": "10.0.0.1", "device": "eth0"}]}],
     "spec.routes[0].nextHops[0].gateway",
     "IPv4 gateway 10.0.0.1 for IPv6 prefix fd00::/64: the families must match"),
    ([{"prefix": "fd00::/64", "nextHops": [{"gateway": "FE80::1"}]}],
     "spec.routes[0].nextHops[0].gateway",
     "link-local gateway fe80::1 needs a device: link-local addresses are only unique per interface"),
    ([{"prefix": "fd00::/64", "nextHops": [{"gateway": "fe80::1%eth0"}]}],
     "spec.routes[0].nextHops[0].gateway",
     "invalid address 'fe80::1%eth0': no zone index ('%'), name the interface in 'device'"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"gateway": "10.0.0.300"}]}],
     "spec.routes[0].nextHops[0].gateway",
     "invalid address '10.0.0.300': expected an IPv4 or IPv6 address"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"gateway": "0.0.0.0"}]}],
     "spec.routes[0].nextHops[0].gateway",
     "0.0.0.0 cannot be a gateway (unspecified or multicast address)"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"weight": 2}]}],
     "spec.routes[0].nextHops[0]", "a next hop needs a gateway, a device or both"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [GW, {"gateway": "10.0.0.2"}, {"gateway": "10.0.0.1", "weight": 5}]}],
     "spec.routes[0].nextHops[2]", "duplicate next hop via 10.0.0.1 (already in nextHops[0])"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"device": "eth0"}, {"device": "eth0"}]}],
     "spec.routes[0].nextHops[1]", "duplicate next hop dev eth0 (already in nextHops[0])"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"device": "a-very-long-name"}]}],
     "spec.routes[0].nextHops[0].device",
     "invalid interface name 'a-very-long-name': 1 to 15 bytes, no '/', ':' or whitespace, not '.' or '..'"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"device": "eth/0"}]}],
     "spec.routes[0].nextHops[0].device",
     "invalid interface name 'eth/0': 1 to 15 bytes, no '/', ':' or whitespace, not '.' or '..'"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"device": "eth 0"}]}],
     "spec.routes[0].nextHops[0].device",
     "invalid interface name 'eth 0': 1 to 15 bytes, no '/', ':' or whitespace, not '.' or '..'"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"device": ""}]}],
     "spec.routes[0].nextHops[0].device",
     "invalid interface name '': 1 to 15 bytes, no '/', ':' or whitespace, not '.' or '..'"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"gateway": "10.0.0.1", "weight": 0}]}],
     "spec.routes[0].nextHops[0].weight", "Input should be greater than or equal to 1"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"gateway": "10.0.0.1", "weight": 257}]}],
     "spec.routes[0].nextHops[0].weight", "Input should be less than or equal to 256"),
    ([{"prefix": "10.0.0.0/24", "distance": 256, "nextHops": [GW]}],
     "spec.routes[0].distance", "Input should be less than or equal to 255"),
    ([{"prefix": "10.0.0.0/24", "distance": -1, "nextHops": [GW]}],
     "spec.routes[0].distance", "Input should be greater than or equal to 0"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [GW]},
      {"prefix": "10.0.1.0/24", "nextHops": [GW]},
      {"prefix": "10.0.0.0/24", "blackhole": True}],
     "spec.routes[2].prefix", "duplicate prefix 10.0.0.0/24 (already in routes[0])"),
    ([{"prefix": "2001:db8::/32", "blackhole": True},
      {"prefix": "2001:DB8:0::/32", "blackhole": True}],
     "spec.routes[1].prefix", "duplicate prefix 2001:db8::/32 (already in routes[0])"),
    ([{"prefix": "10.0.0.0/24", "next_hops": [GW]}],
     "spec.routes[0].next_hops", "unknown field; did you mean 'nextHops'?"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [{"gatway": "10.0.0.1"}]}],
     "spec.routes[0].nextHops[0].gatway", "unknown field; did you mean 'gateway'?"),
    ([{"prefix": "10.0.0.0/24", "nextHops": [GW], "via": "x"}],
     "spec.routes[0].via", "unknown field; known fields are prefix, nextHops, distance, blackhole"),
]


@pytest.mark.parametrize("routes,field,message", ROUTE_RULES, ids=[r[1] + ":" + r[2][:40] for r in ROUTE_RULES])
def test_static_route_rules(routes, field, message):
    problem = _only(_yaml(_doc("StaticRoutes", "uplinks", {"routes": routes})))
    assert (problem.file, problem.object, problem.field, problem.message) == (
        "cfg.yaml", "StaticRoutes/uplinks", field, message
    )


# ---------------------------------------------------------------------------------------------
# AgentConfig and metadata rules
# ---------------------------------------------------------------------------------------------

AGENT_RULES = [
    ({"fib": {"table": 0}}, "spec.fib.table", "Input should be greater than or equal to 1"),
    ({"fib": {"table": 2**32}}, "spec.fib.table", "Input should be less than or equal to 4294967295"),
    ({"fib": {"protocol": 256}}, "spec.fib.protocol", "Input should be less than or equal to 255"),
    ({"fib": {"protocol": 4}}, "spec.fib.protocol",
     "protocol 4 (static) is reserved: 0-4 are unspec, redirect, kernel, boot and static, which belong "
     "to the kernel and to other tools; the agent must own its routes under a protocol number of its "
     "own (default 201)"),
    ({"fib": {"protocol": 12}}, "spec.fib.protocol",
     "protocol 12 belongs to 'bird': the agent treats every route of its protocol as its own and "
     "deletes the ones it does not want; choose a number no other routing daemon uses (default 201)"),
    ({"fib": {"metric": -1}}, "spec.fib.metric", "Input should be greater than or equal to 0"),
    ({"fib": {"metric": 2**32}}, "spec.fib.metric", "Input should be less than or equal to 4294967295"),
    ({"fib": {"fullScanSeconds": 0}}, "spec.fib.fullScanSeconds", "Input should be greater than or equal to 1"),
    ({"fib": {"staleSeconds": -1}}, "spec.fib.staleSeconds", "Input should be greater than or equal to 0"),
    ({"fib": {"staleSeconds": "2m"}}, "spec.fib.staleSeconds", "Input should be a valid integer"),
    ({"adminDistance": {"ibgp": 256}}, "spec.adminDistance.ibgp", "Input should be less than or equal to 255"),
    ({"adminDistance": {"eBGP": 20}}, "spec.adminDistance.eBGP", "unknown field; did you mean 'ebgp'?"),
    ({"maxPaths": 0}, "spec.maxPaths", "Input should be greater than or equal to 1"),
    ({"maxPaths": 257}, "spec.maxPaths", "Input should be less than or equal to 256"),
    ({"max_paths": 4}, "spec.max_paths", "unknown field; did you mean 'maxPaths'?"),
    ({"api": {"port": 65536}}, "spec.api.port", "Input should be less than or equal to 65535"),
    ({"api": {"port": "9180"}}, "spec.api.port", "Input should be a valid integer"),
    ({"api": {"address": "localhost"}}, "spec.api.address",
     "invalid address 'localhost': expected an IPv4 or IPv6 address"),
    ({"fib": {"tabel": 100}}, "spec.fib.tabel", "unknown field; did you mean 'table'?"),
]


@pytest.mark.parametrize("spec,field,message", AGENT_RULES, ids=[r[1] for r in AGENT_RULES])
def test_agent_config_rules(spec, field, message):
    problem = _only(_yaml(_doc("AgentConfig", "agent", spec)))
    assert (problem.object, problem.field, problem.message) == ("AgentConfig/agent", field, message)


@pytest.mark.parametrize("protocol,name", [(0, "unspec"), (1, "redirect"), (2, "kernel"), (3, "boot"), (4, "static")])
def test_reserved_protocols_are_refused(protocol, name):
    problem = _only(_yaml(_doc("AgentConfig", "agent", {"fib": {"protocol": protocol}})))
    assert problem.field == "spec.fib.protocol"
    assert problem.message.startswith(f"protocol {protocol} ({name}) is reserved: 0-4 are")


def _with_metadata(metadata: dict) -> str:
    return _yaml({"apiVersion": API, "kind": "StaticRoutes", "metadata": metadata, "spec": {}})


METADATA_RULES = [
    ({}, "document 1", "metadata.name", "Field required"),
    ({"name": "Uplinks"}, "StaticRoutes/Uplinks", "metadata.name",
     "invalid name 'Uplinks': a DNS-1123 subdomain is at most 253 characters of lowercase letters, "
     "digits, '-' and '.', starting and ending with a letter or digit"),
    ({"name": "a" * 254}, f"StaticRoutes/{'a' * 254}", "metadata.name", "invalid name"),
    ({"name": "x", "namespace": "a.b"}, "StaticRoutes/x", "metadata.namespace", "invalid name 'a.b': a DNS-1123 label"),
    ({"name": "x", "labels": {"enabled": True}}, "StaticRoutes/x", "metadata.labels.enabled",
     "Input should be a valid string"),
    ({"name": "x", "labels": {"-bad": "v"}}, "StaticRoutes/x", "metadata.labels", "invalid label key '-bad'"),
    ({"name": "x", "labels": {"ok": "bad value"}}, "StaticRoutes/x", "metadata.labels",
     "invalid value 'bad value' of label 'ok'"),
    ({"name": "x", "annotaions": {"a": "b"}}, "StaticRoutes/x", "metadata.annotaions",
     "unknown field; did you mean 'annotations'?"),
]


@pytest.mark.parametrize("metadata,obj,field,message", METADATA_RULES, ids=[r[2] for r in METADATA_RULES])
def test_metadata_rules(metadata, obj, field, message):
    problem = _only(_with_metadata(metadata))
    assert (problem.object, problem.field) == (obj, field)
    assert problem.message.startswith(message)


def test_unknown_top_level_field():
    doc = _doc("StaticRoutes", "x", {"routes": []})
    problem = _only(_yaml({**doc, "state": {}}))  # (status is accepted: what the server writes)
    assert (problem.field, problem.message) == ("state", "unknown field; known fields are apiVersion, kind, metadata, spec")


@pytest.mark.parametrize(
    "head,field,message",
    [
        ({"apiVersion": "v1", "kind": "StaticRoutes"}, "apiVersion",
         "unknown apiVersion 'v1': known is routeagent.io/v1alpha1 (kinds AgentConfig, StaticRoutes, RoutePolicy, BgpPeer, BgpSpeaker, Advertisement, BfdProfile)"),
        ({"kind": "StaticRoutes"}, "apiVersion", "Field required: use routeagent.io/v1alpha1"),
        ({"apiVersion": API, "kind": "BgpNeighbor"}, "kind",
         "unknown kind 'BgpNeighbor': known kinds are AgentConfig, StaticRoutes, RoutePolicy, BgpPeer, BgpSpeaker, Advertisement, BfdProfile"),
        ({"apiVersion": API}, "kind", "Field required: known kinds are AgentConfig, StaticRoutes, RoutePolicy, BgpPeer, BgpSpeaker, Advertisement, BfdProfile"),
    ],
)
def test_unknown_api_version_or_kind(head, field, message):
    problem = _only(_yaml({**head, "metadata": {"name": "x"}, "spec": {"routes": []}}))
    assert (problem.field, problem.message) == (field, message)


def test_document_that_is_not_a_mapping():
    problem = _only("- a\n- b\n")
    assert (problem.object, problem.field, problem.message, problem.line) == (
        "document 1", "", "expected a mapping with apiVersion, kind, metadata and spec, not a list", 1
    )


# ---------------------------------------------------------------------------------------------
# All problems, everywhere, with lines
# ---------------------------------------------------------------------------------------------

MULTI = """\
apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: one}
spec:
  routes:
    - prefix: 10.0.0.1/24
      nextHops: [{gateway: 10.0.0.1}]
    - prefix: 10.0.1.0/24
      nextHops:
        - gateway: fd00::1
---
---
apiVersion: routeagent.io/v1alpha1
kind: AgentConfig
metadata: {name: agent}
spec:
  maxPaths: 0
  fib: {protocol: 2}
---
apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata: {name: fine}
spec:
  routes: [{prefix: 10.9.0.0/16, blackhole: true}]
---
kind: Mystery
spec: {}
"""


def test_all_problems_of_all_documents_are_reported():
    problems = _problems(MULTI)
    assert [(p.line, p.object, p.field) for p in problems] == [
        (6, "StaticRoutes/one", "spec.routes[0].prefix"),
        (10, "StaticRoutes/one", "spec.routes[1].nextHops[0].gateway"),
        (18, "AgentConfig/agent", "spec.fib.protocol"),  # model field order
        (17, "AgentConfig/agent", "spec.maxPaths"),
        (26, "document 5", "apiVersion"),  # the empty document 2 counts in the numbering
        (26, "document 5", "kind"),
    ]
    text = format_problems(problems)
    assert text.splitlines()[1] == (
        "cfg.yaml:10: StaticRoutes/one: spec.routes[1].nextHops[0].gateway: "
        "IPv6 gateway fd00::1 for IPv4 prefix 10.0.1.0/24: the families must match"
    )
    assert len(text.splitlines()) == len(problems)


def test_problems_in_several_files_of_a_directory(tmp_path):
    (tmp_path / "a.yaml").write_text(_yaml(_doc("StaticRoutes", "a", {"routes": [{"prefix": "10.0.0.0/8"}]})))
    (tmp_path / "b.yml").write_text(_yaml(_doc("AgentConfig", "agent", {"maxPaths": 300})))
    with pytest.raises(ConfigError) as info:
        load_path(tmp_path)
    assert [(Path(p.file).name, p.field) for p in info.value.problems] == [
        ("a.yaml", "spec.routes[0].nextHops"),
        ("b.yml", "spec.maxPaths"),
    ]


def test_directory_with_two_files(tmp_path):
    (tmp_path / "10-agent.yaml").write_text(_yaml(_doc("AgentConfig", "agent", {"adminDistance": {"static": 7}})))
    (tmp_path / "20-routes.yml").write_text(
        _yaml(
            _doc("StaticRoutes", "b", {"routes": [{"prefix": "10.2.0.0/16", "blackhole": True}]}),
            _doc("StaticRoutes", "a", {"routes": [{"prefix": "10.1.0.0/16", "nextHops": [{"device": "eth0"}]}]}),
        )
    )
    (tmp_path / "notes.txt").write_text("not yaml: [")
    (tmp_path / ".editor.yaml").write_text("not yaml: [")
    (tmp_path / "sub.yaml").mkdir()
    config = load_path(tmp_path)
    assert [s.metadata.name for s in config.static] == ["b", "a"]
    assert distances(config)[SourceKind.STATIC] == 7
    assert {(str(p), o.name, c.distance) for (p, o), c in static_candidates(config).items()} == {
        ("10.2.0.0/16", "b", 7),
        ("10.1.0.0/16", "a", 7),
    }


def test_same_kind_and_name_twice_is_an_error(tmp_path):
    routes = {"routes": [{"prefix": "10.2.0.0/16", "blackhole": True}]}
    (tmp_path / "a.yaml").write_text(_yaml(_doc("StaticRoutes", "uplinks", routes)))
    (tmp_path / "b.yaml").write_text(_yaml(_doc("AgentConfig", "uplinks", {}), _doc("StaticRoutes", "uplinks", routes)))
    with pytest.raises(ConfigError) as info:
        load_path(tmp_path)
    [problem] = info.value.problems
    assert (Path(problem.file).name, problem.line, problem.object, problem.field) == (
        "b.yaml", 10, "StaticRoutes/uplinks", "metadata.name"
    )
    assert problem.message == f"duplicate StaticRoutes/uplinks; the first is StaticRoutes/uplinks at {tmp_path / 'a.yaml'}:1"


def test_at_most_one_agent_config():
    problem = _only(_yaml(_doc("AgentConfig", "a", {}), _doc("AgentConfig", "b", {})))
    assert (problem.object, problem.field, problem.line) == ("AgentConfig/b", "kind", 8)
    assert problem.message == "at most one AgentConfig is allowed; the first is AgentConfig/a at cfg.yaml:1"


def test_yaml_syntax_error_reports_file_and_line(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "apiVersion: routeagent.io/v1alpha1\n"
        "kind: StaticRoutes\n"
        "metadata: {name: x}\n"
        "spec:\n"
        "  routes:\n"
        "    - prefix: 10.0.0.0/8\n"
        "     blackhole: true\n"
    )
    (tmp_path / "b.yaml").write_text(_yaml(_doc("AgentConfig", "agent", {"maxPaths": 0})))
    with pytest.raises(ConfigError) as info:
        load_path(tmp_path)
    syntax, other = info.value.problems
    assert (Path(syntax.file).name, syntax.line, syntax.object, syntax.field) == ("a.yaml", 7, "", "")
    assert syntax.message.startswith("YAML syntax error: ")
    assert str(syntax).startswith(f"{tmp_path / 'a.yaml'}:7: YAML syntax error: ")
    assert (Path(other.file).name, other.field) == ("b.yaml", "spec.maxPaths")


def test_documents_before_a_syntax_error_are_still_checked():
    text = _yaml(_doc("AgentConfig", "agent", {"maxPaths": 0})) + "---\nkey: [unclosed\n"
    first, second = _problems(text)
    assert first.field == "spec.maxPaths"
    assert second.message.startswith("YAML syntax error") and second.line == 9


def test_duplicate_yaml_keys_are_reported():
    text = (
        "apiVersion: routeagent.io/v1alpha1\n"
        "kind: AgentConfig\n"
        "metadata: {name: agent}\n"
        "spec:\n"
        "  maxPaths: 4\n"
        "  maxPaths: 8\n"
    )
    problem = _only(text)
    assert (problem.line, problem.field, problem.message) == (
        6, "spec.maxPaths", "duplicate key (first at line 5); only the last one would count"
    )


def test_not_utf8_and_missing_files(tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"kind: \xff\n")
    with pytest.raises(ConfigError) as info:
        load_path(tmp_path)
    assert info.value.problems[0].message.startswith("not UTF-8 text")
    with pytest.raises(ConfigError) as info:
        load_path(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: no such file or directory"


def test_problem_format():
    assert format_problems([
        Problem("a.yaml", "StaticRoutes/x", "spec.routes[0].prefix", "bad", 3),
        Problem("a.yaml", "document 2", "kind", "unknown"),
        Problem("b.yaml", "", "", "YAML syntax error: oops", 9),
    ]) == (
        "a.yaml:3: StaticRoutes/x: spec.routes[0].prefix: bad\n"
        "a.yaml: document 2: kind: unknown\n"
        "b.yaml:9: YAML syntax error: oops"
    )


# ---------------------------------------------------------------------------------------------
# validate_main, fingerprint
# ---------------------------------------------------------------------------------------------


def test_validate_main_ok_and_errors(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(VALID)
    assert validate_main(good) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("ok: 2 objects\n", "")

    bad = tmp_path / "bad.yaml"
    bad.write_text(_yaml(_doc("StaticRoutes", "x", {"routes": [{"prefix": "10.0.0.1/8", "nextHops": [{"weight": 1}]}]})))
    assert validate_main(bad) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{bad}:7: StaticRoutes/x: spec.routes[0].prefix: host bits set in 10.0.0.1/8: the network is 10.0.0.0/8",
        f"{bad}:9: StaticRoutes/x: spec.routes[0].nextHops[0]: a next hop needs a gateway, a device or both",
        "invalid: 2 problems",
    ]

    assert validate_main(tmp_path / "missing") == 1
    assert capsys.readouterr().err.startswith(f"{tmp_path / 'missing'}: no such file or directory\n")


def test_validate_main_streams_and_counts(tmp_path):
    (tmp_path / "a.yaml").write_text(_yaml(_doc("AgentConfig", "agent", {})))
    out, err = io.StringIO(), io.StringIO()
    assert validate_main(tmp_path, out=out, err=err) == 0
    assert (out.getvalue(), err.getvalue()) == ("ok: 1 object\n", "")


def test_config_fingerprint(tmp_path):
    missing = config_fingerprint(tmp_path / "nope")
    assert missing == ((str(tmp_path / "nope"), "missing"),)
    f = tmp_path / "a.yaml"
    f.write_text(VALID)
    before = config_fingerprint(tmp_path)
    assert before == config_fingerprint(tmp_path)
    assert config_fingerprint(f) != before  # a file vs the directory holding it

    (tmp_path / "ignored.txt").write_text("x")
    assert config_fingerprint(tmp_path) == before

    f.write_text(VALID + "# changed\n")
    changed = config_fingerprint(tmp_path)
    assert changed != before

    (tmp_path / "b.yml").write_text("")
    added = config_fingerprint(tmp_path)
    assert added != changed and len(added) == len(changed) + 1

    st = f.stat()
    f.write_text(f.read_text().replace("metric: 50", "metric: 51"))  # same size, same inode ...
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime
    assert config_fingerprint(tmp_path) == added  # a known limit: stat only, content not hashed

    new = tmp_path / ".a.yaml.tmp"  # an atomic replace (editors, ConfigMap updates) ...
    new.write_text(f.read_text().replace("metric: 51", "metric: 52"))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    new.replace(f)
    assert config_fingerprint(tmp_path) != added  # ... is seen through the inode


# ---------------------------------------------------------------------------------------------
# Models used from Python (cluster source, tests of other stages)
# ---------------------------------------------------------------------------------------------


def test_models_by_python_name_are_frozen_and_dump_camel_case():
    routes = StaticRoutes(
        metadata=Metadata(name="x"),
        spec=StaticRoutesSpec(routes=[StaticRoute(prefix="10.0.0.0/8", next_hops=[NextHopSpec(device="eth0")])]),
    )
    with pytest.raises(ValidationError):
        routes.metadata = Metadata(name="y")
    dumped = routes.model_dump(exclude_defaults=True)
    assert dumped == {
        "metadata": {"name": "x"},
        "spec": {"routes": ({"prefix": "10.0.0.0/8", "nextHops": ({"device": "eth0"},)},)},
    }
    assert routes.api_version == API and routes.kind == "StaticRoutes"


def test_python_construction_applies_the_same_rules():
    with pytest.raises(ValidationError) as info:
        StaticRoute(prefix="10.0.0.0/8", blackhole=True, next_hops=[NextHopSpec(device="eth0")])
    assert [e["loc"] for e in info.value.errors()] == [("blackhole",)]


def test_config_from_objects():
    agent = AgentConfig(metadata=Metadata(name="agent"), spec={"max_paths": 2})
    routes = StaticRoutes(metadata=Metadata(name="r"), spec=StaticRoutesSpec())
    config = Config.from_objects([routes, agent])
    assert config.agent.max_paths == 2 and config.static == (routes,)
    with pytest.raises(ValueError, match="StaticRoutes/r: duplicate StaticRoutes/r"):
        Config.from_objects([routes, routes])
    with pytest.raises(ValueError, match="at most one AgentConfig"):
        Config.from_objects([agent, agent])
    with pytest.raises(ValidationError, match="duplicate StaticRoutes/r"):
        Config(static=(routes, routes))


def _object_schemas(schema: dict):
    defs = schema.get("$defs", {})
    yield schema
    yield from defs.values()


@pytest.mark.parametrize("kind", [AgentConfig, StaticRoutes])
def test_schemas_are_closed_and_camel_case(kind):
    """What the CRD generator will see: no open objects except labels, camelCase properties."""
    for sub in _object_schemas(kind.model_json_schema()):
        if "properties" in sub:
            assert sub.get("additionalProperties") is False, sub.get("title")
            for name in sub["properties"]:
                assert "_" not in name, name


def test_an_object_read_back_from_the_api_server_validates():
    """`kubectl get -o yaml` output: annotations, server-set metadata and status are accepted."""
    text = """apiVersion: routeagent.io/v1alpha1
kind: StaticRoutes
metadata:
  name: uplinks
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
  uid: 0b5c6f0e-1d1a-4a6e-9d8e-000000000000
  resourceVersion: "4711"
  generation: 2
  creationTimestamp: "2026-12-03T08:00:00Z"
  managedFields: [{manager: kubectl, operation: Update}]
spec:
  routes: [{prefix: 192.0.2.0/24, blackhole: true}]
status: {observedGeneration: 2}
"""
    from agent.config.loader import load_text

    config = load_text(text)
    assert config.static[0].metadata.annotations == {"kubectl.kubernetes.io/last-applied-configuration": "{}"}


KUBECTL_LIST = """apiVersion: v1
items:
- apiVersion: routeagent.io/v1alpha1
  kind: StaticRoutes
  metadata:
    annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
    creationTimestamp: "2026-12-03T08:00:00Z"
    generation: 1
    managedFields: [{manager: kubectl, operation: Update, fieldsV1: {f:spec: {}}}]
    name: uplinks
    resourceVersion: "4711"
    uid: 0b5c6f0e-1d1a-4a6e-9d8e-000000000000
  spec:
    routes: [{prefix: 192.0.2.0/24, blackhole: true}]
- apiVersion: routeagent.io/v1alpha1
  kind: RouteAgentNodeState
  metadata: {name: node-a, resourceVersion: "4712", uid: x}
  spec: {nodeName: node-a}
  status: {ready: true, peersUp: 1}
- apiVersion: routeagent.io/v1alpha1
  kind: BgpPeer
  metadata: {name: tor, resourceVersion: "4713", uid: y}
  spec: {peerAddress: 10.0.0.1, peerAS: 65001, localAS: 65000, routerId: 10.0.0.2}
  status: {}
kind: List
metadata:
  resourceVersion: ""
"""


def test_kubectl_get_list_output_validates(tmp_path, capsys):
    """Issue 16.7: `kubectl get staticroutes,bgppeers,routeagentnodestates -o yaml` prints a
    `kind: List` with server-set fields: each item validates like the manifest that created it;
    the agents' status objects are skipped and said so."""
    from agent.config.loader import load_text, validate_main

    config = load_text(KUBECTL_LIST)
    assert [s.metadata.name for s in config.static] == ["uplinks"]
    assert [p.metadata.name for p in config.peers] == ["tor"]
    path = tmp_path / "all.yaml"
    path.write_text(KUBECTL_LIST)
    assert validate_main(path) == 0
    assert capsys.readouterr().out == "ok: 2 objects (1 RouteAgentNodeState skipped: status the agents write)\n"


def test_kubectl_list_items_report_their_own_lines(tmp_path, capsys):
    from agent.config.loader import validate_main

    text = KUBECTL_LIST.replace("peerAS: 65001", "peerAS: 23456").replace(
        "kind: StaticRoutes", "kind: StaticRoute")
    text += "---\napiVersion: routeagent.io/v1alpha1\nkind: BgpPeerList\nitems: [7]\n"
    path = tmp_path / "all.yaml"
    path.write_text(text)
    assert validate_main(path) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{path}:4: StaticRoute/uplinks: kind: unknown kind 'StaticRoute'")
    assert err[1].startswith(f"{path}:23: BgpPeer/tor: spec.peerAS: ")
    assert err[2] == f"{path}:31: document 2 items[0]: expected a mapping with apiVersion, kind, metadata and spec, not a number"
    assert err[-1] == "invalid: 3 problems"
