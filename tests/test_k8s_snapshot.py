"""The last-known-good snapshot (issue 16.2): what ClusterState keeps, how a seed stands in for the
live view and hands over to it, the envelope's checks, and the private atomic file."""

from __future__ import annotations

import json
import os
import stat

import pytest

from agent.daemon.statedir import read_private, write_private
from agent.k8s import snapshot
from agent.k8s.cluster import CONFIG_RESOURCES, ClusterState
from test_k8s_cluster import (ME, advert, batch, crd_batch, eps, node_obj, peer, scidr, static, svc,
                              synced_state)

P = lambda t: t  # noqa: E731  (prefix texts)


def cluster_with_everything() -> ClusterState:
    return synced_state(
        peer("tor", selector={"matchLabels": {"rack": "r1"}}), advert("pods", "podCIDR"),
        advert("lbs", "service", services={"clusterIP": False}), static("s"),
        node=node_obj(labels={"rack": "r1"}, pod_cidrs=["10.244.1.0/24"]),
        nodes=[node_obj("node-b", pod_cidrs=["10.244.2.0/24"])],
        services=[svc("web", type="LoadBalancer", lb=["198.51.100.10"]),
                  svc("local", cluster="10.96.0.20", type="LoadBalancer", lb=["198.51.100.20"], etp="Local")],
        slices=[eps("local-1", "local", ["node-b"])],
        cidrs=[scidr("kubernetes", "10.96.0.0/12")])


def adverts(config) -> dict:
    return {a.metadata.name: tuple(a.spec.prefixes) for a in config.adverts}


def test_a_restored_seed_gives_the_same_configuration_adverts_and_guard():
    live = cluster_with_everything()
    config = live.config()
    expanded, guard = live.expand(config), live.guard_inputs(config)
    state = json.loads(json.dumps(live.snapshot()))  # what the file holds
    assert adverts(expanded) == {"pods": ("10.244.1.0/24",), "lbs": ("198.51.100.10/32",)}

    fresh = ClusterState(ME)
    assert fresh.restore(state) == []
    assert fresh.seeded and not fresh.config_synced and not fresh.synced
    seeded = fresh.config()
    assert seeded == config  # nodeSelector resolved against the seeded Node's labels
    assert adverts(fresh.expand(seeded)) == adverts(expanded)
    assert [list(map(str, g)) for g in fresh.guard_inputs(seeded)] == [list(map(str, g)) for g in guard]
    assert fresh.snapshot() is None  # a seed is never written back as if it were live


def test_the_live_view_takes_over_kind_by_kind_then_completely():
    """Objects deleted while the agent was away go with the first live list of their kind; the
    VIPs and the guard stay the seed's until every resource is listed (Local needs the slices)."""
    fresh = ClusterState(ME)
    fresh.restore(cluster_with_everything().snapshot())
    # the BgpPeer was deleted meanwhile, a new StaticRoutes added: the live lists of those kinds
    change = fresh.apply(crd_batch(resource="bgppeers", synced=True))
    assert change.config and fresh.config().peers == ()
    fresh.apply(crd_batch(static("t", "192.0.2.128/25"), synced=True))
    assert [s.metadata.name for s in fresh.config().static] == ["t"]
    for res in CONFIG_RESOURCES:
        fresh.apply(batch(res, synced=True)) if res not in ("bgppeers", "staticroutes", "advertisements") else None
    fresh.apply(crd_batch(advert("pods", "podCIDR"), advert("lbs", "service", services={"clusterIP": False}),
                          synced=True))
    fresh.apply(batch("nodes", node_obj(labels={"rack": "r1"}, pod_cidrs=["10.244.1.0/24"]), synced=True))
    assert fresh.config_synced and fresh.seeded
    config = fresh.config()
    assert adverts(fresh.expand(config))["lbs"] == ("198.51.100.10/32",)  # still the seed's VIPs
    fresh.apply(batch("services", svc("web2", type="LoadBalancer", lb=["198.51.100.30"]), synced=True))
    fresh.apply(batch("endpointslices", synced=True))
    change = fresh.apply(batch("servicecidrs", synced=True))
    assert not fresh.seeded and change.adverts and change.guard and change.config
    assert adverts(fresh.expand(config))["lbs"] == ("198.51.100.30/32",)  # the change made meanwhile
    protected, _ = fresh.guard_inputs(config)
    assert "198.51.100.10/32" not in {str(p) for p in protected}
    assert fresh.snapshot() is not None


def test_a_seed_does_not_overwrite_what_was_listed_live_already():
    fresh = ClusterState(ME)
    fresh.apply(crd_batch(peer("other", "10.0.0.9"), synced=True))  # listed before the fallback
    fresh.restore(cluster_with_everything().snapshot())
    assert [p.metadata.name for p in fresh.config().peers] == ["other"]


def test_a_malformed_snapshot_is_refused_and_invalid_objects_left_out():
    with pytest.raises(ValueError, match="malformed snapshot"):
        ClusterState(ME).restore({"objects": []})
    state = cluster_with_everything().snapshot()
    state["objects"].append({"apiVersion": "routeagent.io/v1alpha1", "kind": "BgpPeer",
                             "metadata": {"name": "bad"}, "spec": {"peerAddress": "x"}})
    left_out = ClusterState(ME).restore(state)
    assert left_out and all(line.startswith("BgpPeer/bad: ") for line in left_out)


@pytest.mark.parametrize("change, why", [
    (lambda d: d.update(version=2), "version 2, this agent reads version 1"),
    (lambda d: d.update(node="node-b"), "written for node 'node-b'"),
    (lambda d: d.update(written=1000.0 - 3601), "3601s old, older than 3600s"),
    (lambda d: d.update(written=1000.0 + 600), "in the future"),
    (lambda d: d.update(format="x"), "not a route-agent snapshot"),
    (lambda d: d.pop("state"), "incomplete"),
])
def test_the_envelope_refuses_what_it_cannot_trust(change, why):
    doc = json.loads(snapshot.encode(ME, {"objects": []}, 1000.0))
    assert snapshot.decode(json.dumps(doc).encode(), ME, 1010.0)[::2] == ({"objects": []}, "")
    change(doc)
    state, _, reason = snapshot.decode(json.dumps(doc).encode(), ME, 1000.0)
    assert state is None and why in reason
    assert snapshot.decode(b"{not json", ME, 0)[2].startswith("not JSON")


def test_private_files_are_replaced_atomically_0600(tmp_path):
    os.umask(0o022)
    path = str(tmp_path / "snap.json")
    write_private(path, b"one")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and read_private(path, 10) == b"one"
    write_private(path, b"two")
    assert read_private(path, 10) == b"two"
    assert os.listdir(tmp_path) == ["snap.json"]  # no temporary file left
    assert read_private(str(tmp_path / "none"), 10) is None
    with pytest.raises(ValueError, match="larger than 2 bytes"):
        read_private(path, 2)
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="not private"):
        read_private(path, 10)
    os.mkfifo(tmp_path / "fifo", 0o600)
    with pytest.raises(ValueError, match="not a regular file"):
        read_private(str(tmp_path / "fifo"), 10)
