"""BgpRuntime: the cluster's share of the guard. Growth withdraws at once, shrinking asks for a
route refresh (ExaBGP keeps no adj-RIB-in), at most every REFRESH_DELAY seconds."""

from __future__ import annotations

import asyncio

import pytest

from agent.daemon import bgp as bgpruntime
from agent.config.resolve import distances
from agent.core.model import BgpAttrs, Prefix, Update
from agent.policy.verdict import Reason
from agent.core.bgp import RequestRouteRefresh
from tests.bgpruntime_lab import recording_runtime, tor1_config

P = Prefix.parse
PEER = "10.0.0.1"
CONFIG = tor1_config()
ROUTES = ["10.96.0.10/32", "10.244.2.0/24", "10.244.2.64/26", "198.51.100.0/24"]


@pytest.fixture
def rt(tmp_path):
    runtime = recording_runtime(CONFIG, tmp_path)  # no ExaBGP: runtime.sent records the commands
    a = BgpAttrs(PEER, 65001, PEER, True, as_path=(65001,))
    for p in ROUTES:
        assert runtime.stage.receive(PEER, P(p), PEER, a).verdict.accepted
    return runtime


def refreshes(rt) -> list:
    return [c for c in rt.sent if isinstance(c, RequestRouteRefresh)]


def test_protected_growth_withdraws_at_once(rt):
    origin = rt.stage.origin(PEER)
    updates = rt.set_cluster_guard(rt.config, [P("10.96.0.10/32"), P("10.244.1.0/24")], [])
    assert updates == [Update(P("10.96.0.10/32"), origin, None)]
    assert refreshes(rt) == []  # nothing shrank
    assert rt.guard.protected == {P("10.244.1.0/24"), P("10.96.0.10/32")}
    assert tuple(rt.cluster_protected) == (P("10.96.0.10/32"), P("10.244.1.0/24"))
    [row] = rt.explain(P("10.96.0.10/32"))
    assert (row["accepted"], row["policy"], row["reason"]) == (False, "guard", Reason.OWN_PREFIX.value)
    assert rt.stage.verdict(PEER, P("198.51.100.0/24")).accepted  # unaffected
    # the same again: nothing to do
    assert rt.set_cluster_guard(rt.config, [P("10.96.0.10/32"), P("10.244.1.0/24")], []) == []
    assert refreshes(rt) == []


def test_other_nodes_growth_withdraws_more_specifics(rt):
    origin = rt.stage.origin(PEER)
    updates = rt.set_cluster_guard(rt.config, [], [P("10.244.2.0/24")])
    assert updates == [Update(P("10.244.2.64/26"), origin, None)]  # the CIDR itself stays
    assert rt.stage.verdict(PEER, P("10.244.2.0/24")).accepted
    assert rt.stage.verdict(PEER, P("10.244.2.64/26")).reason is Reason.INSIDE_CLUSTER_PREFIX
    assert refreshes(rt) == []
    # the configured protected prefixes (the pods advertisement) stay in the guard
    assert rt.guard.protected == {P("10.244.1.0/24")}


def test_protected_shrink_refreshes_at_once_without_loop(rt):
    rt.set_cluster_guard(rt.config, [P("10.96.0.10/32")], [])
    assert refreshes(rt) == []
    assert rt.set_cluster_guard(rt.config, [], []) == []  # the Service went
    assert sorted(c.family.value for c in refreshes(rt)) == ["ipv4-unicast", "ipv6-unicast"]
    assert all(c.peer == PEER for c in refreshes(rt))
    assert rt.guard.protected == {P("10.244.1.0/24")}


def test_configured_prefix_is_not_lost_when_cluster_shrinks(rt):
    """A prefix both configured and given by the cluster stays protected when the cluster drops it."""
    rt.set_cluster_guard(rt.config, [P("10.244.1.0/24")], [])
    rt.set_cluster_guard(rt.config, [], [])
    assert rt.guard.protected == {P("10.244.1.0/24")}
    assert refreshes(rt) == []


def test_other_nodes_shrink_asks_for_refresh(rt):
    """A node left: a more-specific of its pod CIDR refused before may be accepted now, and only a
    route refresh brings it back (ExaBGP keeps no adj-RIB-in)."""
    rt.set_cluster_guard(rt.config, [], [P("10.244.2.0/24")])
    assert refreshes(rt) == []
    rt.set_cluster_guard(rt.config, [], [])
    assert rt.guard.check(P("10.244.2.64/26")) is None
    assert sorted(c.family.value for c in refreshes(rt)) == ["ipv4-unicast", "ipv6-unicast"]


def test_both_shrink_one_refresh(rt):
    rt.set_cluster_guard(rt.config, [P("10.96.0.10/32")], [P("10.244.2.0/24")])
    rt.set_cluster_guard(rt.config, [], [])
    assert sorted(c.family.value for c in refreshes(rt)) == ["ipv4-unicast", "ipv6-unicast"]


class _ClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock the test moves forward (timers fire without sleeping)."""

    offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset


def test_shrink_refresh_is_delayed_and_coalesced(rt):
    loop = _ClockLoop()

    async def scenario():
        rt.set_cluster_guard(rt.config, [P("10.96.0.10/32"), P("10.96.0.11/32")], [])
        rt.set_cluster_guard(rt.config, [P("10.96.0.10/32")], [])  # shrink: scheduled
        handle = rt._refresh_handle
        assert handle is not None and refreshes(rt) == []
        assert handle.when() == pytest.approx(loop.time() + bgpruntime.REFRESH_DELAY, abs=1.0)
        rt.set_cluster_guard(rt.config, [], [])  # another shrink within the delay: the same refresh
        assert rt._refresh_handle is handle and refreshes(rt) == []
        # growth meanwhile still withdraws at once
        updates = rt.set_cluster_guard(rt.config, [P("198.51.100.0/24")], [])
        assert [u.prefix for u in updates] == [P("198.51.100.0/24")]
        loop.offset += bgpruntime.REFRESH_DELAY + 1
        for _ in range(3):
            await asyncio.sleep(0)
        assert rt._refresh_handle is None
        assert sorted(c.family.value for c in refreshes(rt)) == ["ipv4-unicast", "ipv6-unicast"]
        # the next shrink schedules a new one
        rt.set_cluster_guard(rt.config, [], [])
        assert rt._refresh_handle is not None and rt._refresh_handle is not handle
        rt._refresh_handle.cancel()

    try:
        loop.run_until_complete(scenario())
    finally:
        loop.close()


def test_reconfigure_keeps_cluster_protected(rt):
    rt.set_cluster_guard(rt.config, [P("10.96.0.10/32")], [])
    out = rt.reconfigure(rt.config, distances(rt.config))
    assert out.updates == []
    assert P("10.96.0.10/32") in rt.guard.protected and P("10.244.1.0/24") in rt.guard.protected
