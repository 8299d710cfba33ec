"""The deploy bundle as an operator meets it: real `kubectl` against the project's test API server.

`kubectl apply -k deploy/` (validation on, as kubectl defaults: the server must publish OpenAPI v3
and do strict field validation), then the sample configuration, `get -o wide` printer columns,
the CRDs' CEL rules refusing bad objects, server-side dry run and `kubectl diff` leaving objects
alone, `kubectl describe node` showing the agent's Events, the node state owned by its Node, and
the test API server started by hand with ``python -m testlab.k8sapi``.
Skipped where kubectl is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from agent.k8s import source
from testlab.k8sapi import KubeApiServer, node
from testlab.netns import wait_for

ROOT = Path(__file__).resolve().parents[1]
KUBECTL = shutil.which("kubectl")
RA = "routeagent.io/v1alpha1"

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


class Kubectl:
    def __init__(self, kubeconfig: str, cache: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}
        self.cache = cache  # discovery cache: per test, so CRDs applied meanwhile are seen

    def __call__(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        out = subprocess.run([KUBECTL, "--cache-dir", str(self.cache), *args], capture_output=True, text=True,
                             env=self.env, input=stdin, timeout=120, cwd=ROOT)
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out


@pytest.fixture
def api():
    with KubeApiServer() as server:
        server.put(node("node-a", ["10.244.1.0/24"], ["10.0.0.11"]))
        yield server


@pytest.fixture
def kubectl(api, tmp_path) -> Kubectl:
    return Kubectl(api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


@pytest.fixture
def installed(api, kubectl) -> Kubectl:
    kubectl("apply", "-k", "deploy/")
    return kubectl


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_apply_k_installs_the_bundle_and_is_idempotent(api, kubectl):
    first = kubectl("apply", "-k", "deploy/")
    rendered = [d for d in yaml.safe_load_all(kubectl("kustomize", "deploy/").stdout) if d]
    created = _lines(first.stdout)
    assert len(created) == len(rendered) and all(ln.endswith(" created") for ln in created), first.stdout
    assert len(api.objects("apiextensions.k8s.io/v1", "CustomResourceDefinition")) == 8
    (ds,) = api.objects("apps/v1", "DaemonSet")
    assert ds["metadata"]["namespace"] == "route-agent"
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert api.get("v1", "Service", "route-agent-metrics", "route-agent")["spec"]["clusterIP"] == "None"
    assert api.objects("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
    second = kubectl("apply", "-k", "deploy/")
    assert all(ln.endswith(" unchanged") for ln in _lines(second.stdout)), second.stdout
    crd = api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "bgppeers.routeagent.io")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"


SERVICEMONITOR_CRD = {  # a stand-in for the Prometheus Operator's CRD (no schema)
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                       "singular": "servicemonitor"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_the_optional_servicemonitor_applies_once_its_crd_exists(api, installed):
    installed("apply", "-f", "-", stdin=json.dumps(SERVICEMONITOR_CRD))
    out = installed("apply", "-f", "deploy/monitoring/")
    assert "servicemonitor.monitoring.coreos.com/route-agent created" in out.stdout
    (mon,) = api.objects("monitoring.coreos.com/v1", "ServiceMonitor")
    svc = api.get("v1", "Service", "route-agent-metrics", "route-agent")
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()


def test_a_changed_daemonset_is_patched(api, installed, tmp_path):
    ds = yaml.safe_load((ROOT / "deploy/daemonset.yaml").read_text())
    ds["spec"]["minReadySeconds"] = 20
    out = installed("apply", "-f", "-", stdin=yaml.safe_dump(ds))
    assert "daemonset.apps/route-agent configured" in out.stdout
    assert api.get("apps/v1", "DaemonSet", "route-agent", "route-agent")["spec"]["minReadySeconds"] == 20


def test_sample_config_applies_with_validation_and_prints_wide(api, installed):
    out = installed("apply", "-f", "deploy/sample-config.yaml")  # no --validate=false
    assert "bgppeer.routeagent.io/tor-rack1 created" in out.stdout
    wide = _lines(installed("get", "bgppeers", "-o", "wide").stdout)
    assert wide[0].split() == ["NAME", "PEER", "ADDRESS", "PEER", "AS", "LOCAL", "AS", "PASSIVE",
                               "IMPORT", "POLICY", "EXPORT", "POLICY", "AGE"]
    assert wide[1].split()[:7] == ["tor-rack1", "10.0.1.1", "65001", "65101", "false", "from-tor", "to-tor"]
    narrow = _lines(installed("get", "rapeer").stdout)  # short name; priority-1 columns hidden
    assert narrow[0].split() == ["NAME", "PEER", "ADDRESS", "PEER", "AS", "LOCAL", "AS", "AGE"]
    every = installed("get", "route-agent").stdout  # the category lists every kind
    assert "bgppeer.routeagent.io/tor-rack1" in every and "routepolicy.routeagent.io/from-tor" in every
    # server-side defaults were applied (spec.port is not in the sample)
    assert api.get(RA, "BgpPeer", "tor-rack1")["spec"]["port"] == 179


BAD = """
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: bad-address}
spec: {peerAddress: 10.0.0.300, peerAS: 65001, localAS: 65000}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: bad-family}
spec: {peerAddress: 10.0.0.1, localAddress: "fd00::1", peerAS: 65001, localAS: 65000, holdTime: 2}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: misspelt}
spec: {peerAddress: 10.0.0.1, peerAs: 65001, localAS: 65000}
---
apiVersion: routeagent.io/v1alpha1
kind: Advertisement
metadata: {name: host-bits}
spec: {prefixes: [10.1.0.1/24]}
---
apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {name: good}
spec: {peerAddress: "2001:db8::1", localAddress: "2001:db8::2", peerAS: 65001, localAS: 65000}
"""


def test_the_api_server_refuses_bad_objects_before_any_node_sees_them(api, installed):
    out = installed("apply", "-f", "-", stdin=BAD, check=False)
    assert out.returncode != 0
    err = out.stderr
    assert ('BgpPeer.routeagent.io "bad-address" is invalid: spec.peerAddress: Invalid value: "string": '
            "must be an IPv4 or IPv6 address") in err
    assert "spec.localAddress: Invalid value: \"object\": localAddress must be of the family of peerAddress" in err
    assert "spec.holdTime: Invalid value: \"object\": hold time must be 0 or at least 3 seconds" in err
    assert 'strict decoding error: unknown field "spec.peerAs"' in err
    assert 'Advertisement.routeagent.io "host-bits" is invalid: spec.prefixes[0]' in err
    assert "without host bits" in err
    assert [p["metadata"]["name"] for p in api.objects(RA, "BgpPeer")] == ["good"]
    assert api.objects(RA, "Advertisement") == []


def test_dry_run_and_diff_change_nothing(api, installed, tmp_path):
    installed("apply", "-f", "deploy/sample-config.yaml")
    before = api.get(RA, "BgpPeer", "tor-rack1")
    version = api.resource_version
    changed = tmp_path / "changed.yaml"
    changed.write_text((ROOT / "deploy/sample-config.yaml").read_text().replace("peerAS: 65001", "peerAS: 65002"))
    diff = installed("diff", "-f", str(changed), check=False)
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "-  peerAS: 65001" in diff.stdout and "+  peerAS: 65002" in diff.stdout
    dry = installed("apply", "--dry-run=server", "-f", str(changed))
    assert "bgppeer.routeagent.io/tor-rack1 configured (server dry run)" in dry.stdout
    dry_new = installed("apply", "--dry-run=server", "-f", "-", stdin=BAD.split("---")[-1])
    assert "created (server dry run)" in dry_new.stdout
    assert api.get(RA, "BgpPeer", "tor-rack1") == before
    assert api.get(RA, "BgpPeer", "good") is None
    assert api.resource_version == version  # nothing was written at all
    out = installed("patch", "bgppeer", "tor-rack1", "--type=merge", "-p", '{"spec":{"peerAS":65003}}',
                    "--dry-run=server", "-o", "jsonpath={.spec.peerAS}")
    assert out.stdout == "65003" and api.get(RA, "BgpPeer", "tor-rack1") == before
    # a dryRun value the server does not know is refused, not ignored (it used to write)
    request = urllib.request.Request(f"{api.url}/apis/{RA}/bgppeers/tor-rack1?dryRun=Yes", method="PATCH",
                                     data=b'{"spec":{"peerAS":65004}}',
                                     headers={"Content-Type": "application/merge-patch+json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400 and b'supported values: \\"All\\"' in refused.value.read()
    assert api.get(RA, "BgpPeer", "tor-rack1") == before and api.resource_version == version


def test_describe_node_shows_the_agents_events_and_the_state_is_owned_by_the_node(api, installed):
    kubectl = installed  # with the CRDs stored, the agent's writes go through their schemas too
    ks = source.KubeSource("node-a", lambda batch: None, kubeconfig=kubectl.env["KUBECONFIG"])
    try:
        ks.event("BgpSessionUp", "BGP session with 10.0.0.1 up")
        ks.publish_status({"ready": True, "peersUp": 1})
        wait_for(lambda: api.objects("v1", "Event") and api.get(RA, "RouteAgentNodeState", "node-a"), 5,
                 what="event and state")
    finally:
        ks.stop()
    described = kubectl("describe", "node", "node-a").stdout
    events = described[described.index("Events:"):]
    assert "BgpSessionUp" in events and "BGP session with 10.0.0.1 up" in events and "route-agent" in events
    uid = api.get("v1", "Node", "node-a")["metadata"]["uid"]
    state = json.loads(kubectl("get", "routeagentnodestate", "node-a", "-o", "json").stdout)
    assert state["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "node-a",
                                                     "uid": uid}]
    assert state["spec"] == {"nodeName": "node-a"}


def test_the_test_api_server_starts_by_hand(tmp_path):
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen([sys.executable, "-m", "testlab.k8sapi", "--port", "0", "--kubeconfig", str(kubeconfig),
                             "--node", "node-x=10.244.9.0/24,10.0.0.99", "--crds", "deploy/crds"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        first = proc.stdout.readline()
        assert first.startswith("test API server on http://127.0.0.1:"), first + proc.stderr.read()
        assert proc.stdout.readline().strip() == f"export KUBECONFIG={kubeconfig}"
        kubectl = Kubectl(str(kubeconfig), tmp_path / "cache")
        assert kubectl("get", "node", "node-x", "-o", "jsonpath={.spec.podCIDR}").stdout == "10.244.9.0/24"
        crds = kubectl("get", "crds", "-o", "name").stdout.split()
        assert "customresourcedefinition.apiextensions.k8s.io/bgppeers.routeagent.io" in crds
        kubectl("apply", "-f", "deploy/sample-config.yaml")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
