"""Deployment manifests and image: schema validation, the DaemonSet's promises, least-privilege RBAC.

Built-in kinds in deploy/*.yaml and the CRDs in deploy/crds/ are validated offline against the
Kubernetes OpenAPI schemas bundled with kubernetes-validate (strict: unknown fields are errors).
routeagent.io objects (deploy/sample-config.yaml) have no bundled schema; they are checked against
the CRDs elsewhere. The Containerfile cannot be built here (no base image); it is parsed.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from testlab.rbac import Rule, allowed, load_rules

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
CR_GROUP = "routeagent.io"
# the minimum Kubernetes we support, and the newest schema the package bundles
VERSIONS = sorted({"1.33.0", kubernetes_validate.utils.latest_version()})


def _docs(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _manifests() -> list[tuple[str, int, dict]]:
    files = sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    files += sorted((DEPLOY / "crds").glob("*.yaml"))
    return [(str(p.relative_to(ROOT)), i, d) for p in files for i, d in enumerate(_docs(p))]


def _is_custom(doc: dict) -> bool:
    return doc["apiVersion"].split("/")[0] == CR_GROUP


def _one(path: str, kind: str) -> dict:
    (doc,) = [d for d in _docs(ROOT / path) if d["kind"] == kind]
    return doc


BUILTIN = [(f, i, d) for f, i, d in _manifests() if not _is_custom(d)]


def test_every_manifest_file_is_covered():
    names = {f for f, _, _ in _manifests()}
    for expected in ("deploy/daemonset.yaml", "deploy/rbac.yaml", "deploy/namespace.yaml",
                     "deploy/sample-config.yaml"):
        assert expected in names
    assert any(n.startswith("deploy/crds/") for n in names)
    # only the sample holds custom resources: nothing else escapes schema validation
    custom_files = {f for f, _, d in _manifests() if _is_custom(d)}
    assert custom_files == {"deploy/sample-config.yaml"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("doc", [d for _, _, d in BUILTIN],
                         ids=[f"{f}#{i}:{d['kind']}" for f, i, d in BUILTIN])
def test_builtin_manifests_validate(doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_validation_is_not_vacuous():
    ds = copy.deepcopy(_one("deploy/daemonset.yaml", "DaemonSet"))
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privilegd"] = False
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[0], strict=True)


def test_sample_config_kinds_have_crds():
    crd_kinds = {d["spec"]["names"]["kind"] for p in (DEPLOY / "crds").glob("*.yaml") for d in _docs(p)}
    docs = _docs(DEPLOY / "sample-config.yaml")
    assert all(d["apiVersion"] == f"{CR_GROUP}/v1alpha1" for d in docs)
    assert {d["kind"] for d in docs} <= crd_kinds
    by_kind: dict[str, list[dict]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    (peer,) = by_kind["BgpPeer"]
    assert peer["spec"]["nodeSelector"]
    types = {a["spec"]["type"]: a for a in by_kind["Advertisement"]}
    assert "prefixes" not in types["podCIDR"]["spec"]
    assert "prefixes" not in types["service"]["spec"]
    assert types["service"]["spec"]["services"]["selector"]
    policies = {p["metadata"]["name"] for p in by_kind["RoutePolicy"]}
    assert {peer["spec"]["importPolicy"], peer["spec"]["exportPolicy"]} <= policies


# --- the DaemonSet ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ds() -> dict:
    return _one("deploy/daemonset.yaml", "DaemonSet")


@pytest.fixture(scope="module")
def container(ds) -> dict:
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    return c


def test_daemonset_pod(ds):
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["terminationGracePeriodSeconds"] == 30
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert "hostPID" not in pod and "hostIPC" not in pod


def test_daemonset_container(container):
    assert container["image"] == "ghcr.io/route-agent/route-agent:0.1.0"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == ["run", "--kubernetes", "--state-dir", "/run/route-agent",
                                 "--metrics-address", "$(HOST_IP)", "--metrics-port", "9181"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["HOST_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert container["ports"] == [{"name": "metrics", "containerPort": 9181, "protocol": "TCP"}]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "limits": {"memory": "512Mi"}}


def test_daemonset_security_context(container):
    sc = container["securityContext"]
    assert sc.get("privileged", False) is False
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    # no NET_RAW: netlink and TCP (MD5, TTL, GTSM socket options) need none (daemonset.yaml)
    assert sorted(sc["capabilities"]["add"]) == ["NET_ADMIN", "NET_BIND_SERVICE"]


def test_daemonset_runs_on_linux_nodes_only(ds):
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_daemonset_state_dir_survives_restarts(ds, container):
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    state = volumes[mounts["/run/route-agent"]]
    assert state["hostPath"] == {"path": "/run/route-agent", "type": "DirectoryOrCreate"}
    # no other host path: in particular not /etc/iproute2 (the image carries rt_protos.d)
    assert [v for v in volumes.values() if "hostPath" in v] == [state]


def test_daemonset_probes(container):
    # probes go to the metrics listener on the node's address (the pod IP with hostNetwork): no
    # probe host (forbidden by Pod Security baseline from 1.34); /api/* stays on 127.0.0.1
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert "host" not in get
        assert (get["path"], get["port"]) == (path, "metrics")
    assert "--api-address" not in container["args"]


def test_metrics_service_is_headless_and_selects_the_agents(ds, container):
    svc = _one("deploy/metrics-service.yaml", "Service")
    assert svc["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert svc["spec"]["clusterIP"] == "None"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] == "metrics" == container["ports"][0]["name"]
    assert port["port"] == container["ports"][0]["containerPort"]
    # the optional ServiceMonitor selects this Service and its port by name
    (mon,) = _docs(DEPLOY / "monitoring" / "servicemonitor.yaml")
    assert mon["kind"] == "ServiceMonitor" and mon["apiVersion"] == "monitoring.coreos.com/v1"
    assert mon["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert mon["spec"]["namespaceSelector"] == {"matchNames": [svc["metadata"]["namespace"]]}
    assert [e["port"] for e in mon["spec"]["endpoints"]] == [port["name"]]


def test_daemonset_service_account_matches_rbac(ds):
    sa = _one("deploy/rbac.yaml", "ServiceAccount")
    binding = _one("deploy/rbac.yaml", "ClusterRoleBinding")
    role = _one("deploy/rbac.yaml", "ClusterRole")
    ns = _one("deploy/namespace.yaml", "Namespace")
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    assert ds["metadata"]["namespace"] == sa["metadata"]["namespace"] == ns["metadata"]["name"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


# --- RBAC: exactly the calls the agent makes ------------------------------------------------------

RO = ("list", "watch")
EXPECTED_GRANTS = {
    *{(v, "", "nodes") for v in ("get", "list", "watch")},
    *{(v, "", "services") for v in RO},
    *{(v, "discovery.k8s.io", "endpointslices") for v in RO},
    *{(v, "networking.k8s.io", "servicecidrs") for v in RO},
    *{(v, CR_GROUP, r) for v in RO for r in
      ("agentconfigs", "staticroutes", "bgppeers", "bgpspeakers", "routepolicies", "advertisements", "bfdprofiles")},
    *{(v, CR_GROUP, "routeagentnodestates") for v in ("get", "list", "watch", "create")},
    *{(v, CR_GROUP, "routeagentnodestates/status") for v in ("get", "update", "patch")},
    *{(v, g, "events") for v in ("create", "patch") for g in ("", "events.k8s.io")},
}


def _grants(rules: tuple[Rule, ...]) -> set[tuple[str, str, str]]:
    return {(v, g, r) for rule in rules for v in rule.verbs for g in rule.api_groups
            for r in rule.resources}


def test_cluster_role_grants_exactly_the_agents_calls():
    raw = _one("deploy/rbac.yaml", "ClusterRole")
    for rule in raw["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs"}, rule  # no resourceNames/URLs
        for field in ("apiGroups", "resources", "verbs"):
            assert not any("*" in x for x in rule[field]), rule
    grants = _grants(load_rules())
    assert grants == EXPECTED_GRANTS
    assert not any(r == "secrets" for _, _, r in grants)
    writes = {(g, r) for v, g, r in grants if v in ("update", "patch")}
    assert writes == {(CR_GROUP, "routeagentnodestates/status"), ("", "events"),
                      ("events.k8s.io", "events")}
    assert not any(v in ("delete", "deletecollection", "escalate", "bind", "impersonate")
                   for v, _, _ in grants)


def test_no_other_roles_in_the_manifests():
    kinds = [d["kind"] for _, _, d in _manifests()]
    assert kinds.count("ClusterRole") == 1 and kinds.count("ClusterRoleBinding") == 1
    assert "Role" not in kinds and "RoleBinding" not in kinds


@pytest.mark.parametrize("call", [
    ("get", "", "nodes", ""),
    ("watch", "", "nodes", ""),
    ("list", "", "services", ""),
    ("watch", "discovery.k8s.io", "endpointslices", ""),
    ("list", "networking.k8s.io", "servicecidrs", ""),
    ("watch", CR_GROUP, "bgppeers", ""),
    ("create", CR_GROUP, "routeagentnodestates", ""),
    ("watch", CR_GROUP, "routeagentnodestates", ""),  # its own, to write it again when deleted
    ("patch", CR_GROUP, "routeagentnodestates", "status"),
    ("update", CR_GROUP, "routeagentnodestates", "status"),
    ("create", "", "events", ""),
    ("patch", "events.k8s.io", "events", ""),
    ("get", None, "nodes", None),  # None: core group, no subresource
])
def test_allowed(call):
    assert allowed(*call)


@pytest.mark.parametrize("call", [
    ("list", "", "secrets", ""),
    ("get", "", "secrets", ""),
    ("update", "", "nodes", ""),
    ("patch", "", "nodes", "status"),
    ("get", "", "services", ""),             # list/watch only
    ("list", "", "endpoints", ""),            # EndpointSlices, not Endpoints
    ("watch", "", "endpointslices", ""),     # wrong group
    ("update", CR_GROUP, "bgppeers", ""),
    ("patch", CR_GROUP, "bgppeers", "status"),
    ("update", CR_GROUP, "routeagentnodestates", ""),
    ("patch", CR_GROUP, "routeagentnodestates", ""),
    ("delete", CR_GROUP, "routeagentnodestates", ""),
    ("get", "", "events", ""),
    ("create", "", "pods", ""),
])
def test_not_allowed(call):
    assert not allowed(*call)


def test_allowed_follows_rbac_matching_rules():
    rules = (Rule.from_dict({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]}),
             Rule.from_dict({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"],
                             "resourceNames": ["web"]}))
    assert allowed("get", "x.io", "things", "status", rules=rules)
    assert not allowed("get", "x.io", "things", "", rules=rules)
    assert allowed("delete", "apps", "deployments", "", name="web", rules=rules)
    assert not allowed("delete", "apps", "deployments", "", name="db", rules=rules)
    assert not allowed("list", "apps", "deployments", "", rules=rules)  # a list names nothing
    assert not allowed("get", "apps", "deployments", "scale", name="web", rules=rules)


# --- image ------------------------------------------------------------------------------------------

def _containerfile() -> list[str]:
    text = (ROOT / "Containerfile").read_text(encoding="utf-8")
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_containerfile_base_is_pinned():
    froms = [ln.split()[1] for ln in _containerfile() if ln.upper().startswith("FROM ")]
    assert froms
    for image in froms:
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and tag and "/" not in tag, image
        assert tag != "latest" and re.match(r"\d+\.\d+\.\d+-", tag), image
        assert "bookworm" in tag, image  # Debian base


def test_containerfile_installs_the_agent():
    lines = _containerfile()
    runs = " ".join(ln for ln in lines if ln.startswith("RUN "))
    assert "apt-get install" in runs and "--no-install-recommends" in runs and "iproute2" in runs
    assert "pip install --no-cache-dir" in runs
    # the same protocol name as scripts/install.sh writes on a host
    assert '"201 route-agent"' in (ROOT / "scripts" / "install.sh").read_text()
    assert 'echo "201 route-agent" > /etc/iproute2/rt_protos.d/route-agent.conf' in runs
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (script,) = pyproject["project"]["scripts"]
    assert f'ENTRYPOINT ["{script}"]' in lines
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users in ([], ["0"], ["root"])  # NET_ADMIN: see the comment in the Containerfile
    # what the image copies is what setuptools needs (readme, package)
    copies = " ".join(ln for ln in lines if ln.startswith("COPY "))
    assert "pyproject.toml" in copies and "README.md" in copies and "agent" in copies


def test_build_context_ignores_local_state():
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    assert {".git", ".venv"} <= ignored
    assert not ignored & {"agent", "pyproject.toml", "README.md"}


def test_manifest_validator_is_pinned_in_the_test_extra():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert f"kubernetes-validate=={kubernetes_validate.version.__version__}" in \
        pyproject["project"]["optional-dependencies"]["test"]


# --- the bundle: `kubectl apply -k deploy/` ----------------------------------------------------------

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def _kustomize(path: Path) -> list[dict]:
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "KUBECONFIG": os.devnull})
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def bundle() -> list[dict]:
    return _kustomize(DEPLOY)


@needs_kubectl
def test_kustomization_renders_every_manifest_but_the_sample(bundle):
    def key(d):
        return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])

    files = {key(d): d for _, _, d in BUILTIN}
    rendered = {key(d): d for d in bundle}
    assert len(rendered) == len(bundle)  # no duplicates
    assert rendered.keys() == files.keys()  # everything in deploy/*.yaml and crds/, no sample
    assert sum(d["kind"] == "CustomResourceDefinition" for d in bundle) == len(
        list((DEPLOY / "crds").glob("*.yaml")))
    # the image is the only thing kustomize changes, and it changes nothing by default
    assert rendered == files


@needs_kubectl
@pytest.mark.parametrize("version", VERSIONS)
def test_kustomization_output_validates(bundle, version):
    for doc in bundle:
        kubernetes_validate.validate(doc, version, strict=True)


@needs_kubectl
def test_image_can_be_pinned_by_digest(tmp_path):
    digest = "sha256:" + "0123456789abcdef" * 4
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(DEPLOY, tmp_path)],
        "images": [{"name": "ghcr.io/route-agent/route-agent", "digest": digest}]}))
    (ds,) = [d for d in _kustomize(tmp_path) if d["kind"] == "DaemonSet"]
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert c["image"] == f"ghcr.io/route-agent/route-agent@{digest}"


def test_kustomization_pins_the_image_tag():
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kust["images"] == [{"name": "ghcr.io/route-agent/route-agent", "newTag": "0.1.0"}]
    listed = set(kust["resources"])
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml", "sample-config.yaml"}
    on_disk |= {f"crds/{p.name}" for p in (DEPLOY / "crds").glob("*.yaml")}
    assert listed == on_disk


# --- the admission policy: one node's agent writes only its own state ----------------------------

def test_admission_policy_matches_the_agents_service_account():
    vap = _one("deploy/admission-policy.yaml", "ValidatingAdmissionPolicy")
    binding = _one("deploy/admission-policy.yaml", "ValidatingAdmissionPolicyBinding")
    sa = _one("deploy/rbac.yaml", "ServiceAccount")
    assert binding["spec"] == {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"]}
    assert vap["spec"]["failurePolicy"] == "Fail"
    (cond,) = vap["spec"]["matchConditions"]
    user = f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}"
    assert f"'{user}'" in cond["expression"]
    (rule,) = vap["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == [CR_GROUP]
    assert set(rule["resources"]) == {"routeagentnodestates", "routeagentnodestates/status"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
