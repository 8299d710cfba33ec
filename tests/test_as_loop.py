"""AS_PATH loop detection (RFC 4271 9.1.2) in the import stage: before any policy, per-peer allowOwnAs."""

from __future__ import annotations

import importlib

import pytest

from agent.core.bgp import PathAttrs
from agent.core.model import BgpAttrs, Prefix
from agent.policy.engine import ACCEPT_ALL, compile_policies
from agent.policy.verdict import Reason

imp = importlib.import_module("agent.import")
P = Prefix.parse
EBGP, IBGP = "192.0.2.1", "10.0.0.2"
ROUTE = P("203.0.113.0/24")


def stage(*peers):
    s = imp.ImportStage(imp.Guard(["10.244.3.0/24"], ["192.0.2.10/24"]), compile_policies([]))
    for p in peers:
        s.set_peer(p)
    return s


def ebgp(**kw):
    return imp.ImportPeer(EBGP, 65001, True, ACCEPT_ALL, local_as=65000, **kw)


def path(*asns):
    return BgpAttrs(EBGP, 65001, EBGP, True, as_path=asns)


@pytest.mark.parametrize("as_path, allow, accepted", [
    ((65001,), 0, True),
    ((65001, 65000), 0, False),  # our AS anywhere in the path
    ((65000, 65001), 0, False),
    ((65001, 65000), 1, True),  # allowas-in 1
    ((65001, 65000, 65000), 1, False),
    ((65001, 65000, 65000), 2, True),
    ((65001, 65000, 65002, 65000), 2, True),  # counted, not only consecutive
    ((), 0, True),
])
def test_own_as_in_the_path(as_path, allow, accepted):
    s = stage(ebgp(allow_own_as=allow))
    r = s.receive(EBGP, ROUTE, "192.0.2.1", path(*as_path))
    assert r.verdict.accepted is accepted
    if not accepted:
        assert r.verdict.reason is Reason.AS_LOOP and r.update is None


def test_loop_is_rejected_before_policy_counted_and_explained():
    s = stage(ebgp())
    r = s.receive(EBGP, ROUTE, "192.0.2.1", path(65001, 65000))
    assert not r.verdict.accepted and r.verdict.reason is Reason.AS_LOOP  # acceptAll cannot accept it
    assert s.rejected[(EBGP, 4, Reason.AS_LOOP)] == 1
    assert s.verdict(EBGP, ROUTE).reason is Reason.AS_LOOP
    assert s.explain(ROUTE)[EBGP].reason is Reason.AS_LOOP
    assert "as_loop" in str(s.verdict(EBGP, ROUTE)) and Reason.AS_LOOP.description
    assert s.evaluate(EBGP, ROUTE, "192.0.2.1", path(65000)).reason is Reason.AS_LOOP
    assert s.held(EBGP)[4] == (0, 1)
    assert s.maxprefix.count(EBGP, 4) == 0


def test_accepted_route_that_now_loops_is_withdrawn():
    s = stage(ebgp())
    assert s.receive(EBGP, ROUTE, "192.0.2.1", path(65001)).update.candidate is not None
    r = s.receive(EBGP, ROUTE, "192.0.2.1", path(65001, 65000))
    assert r.verdict.reason is Reason.AS_LOOP and r.update is not None and r.update.candidate is None


def test_the_guard_still_decides_first():
    s = stage(ebgp())
    r = s.receive(EBGP, P("10.244.3.0/24"), "192.0.2.1", path(65000))
    assert r.verdict.reason is Reason.OWN_PREFIX


def test_speaker_path_attrs_and_as_set_members_count():
    s = stage(ebgp())
    assert s.receive(EBGP, ROUTE, "192.0.2.1", PathAttrs(as_path=(65001, 65000), as_set=True)).verdict.reason \
        is Reason.AS_LOOP
    assert s.receive(EBGP, P("198.51.100.0/24"), "192.0.2.1", PathAttrs(as_path=(65001,))).verdict.accepted


def test_ibgp_peer_defaults_to_its_own_as():
    s = stage(imp.ImportPeer(IBGP, 65000, False, None))
    assert s.receive(IBGP, ROUTE, "10.0.0.2", BgpAttrs(IBGP, 65000, IBGP, False, as_path=(65001,))).verdict.accepted
    r = s.receive(IBGP, P("198.51.100.0/24"), "10.0.0.2", BgpAttrs(IBGP, 65000, IBGP, False, as_path=(65001, 65000)))
    assert r.verdict.reason is Reason.AS_LOOP


def test_changing_allow_own_as_applies_to_the_next_route():
    s = stage(ebgp())
    looped = path(65001, 65000)
    assert not s.receive(EBGP, ROUTE, "192.0.2.1", looped).verdict.accepted
    s.set_peer(ebgp(allow_own_as=1))
    assert s.receive(EBGP, ROUTE, "192.0.2.1", looped).verdict.accepted


def test_config_field_allow_own_as():
    from agent.config.bgp import BgpPeerSpec
    base = {"peerAddress": "10.0.0.1", "peerAS": 65001, "localAS": 65000}
    assert BgpPeerSpec.model_validate(base, by_alias=True).allow_own_as == 0
    assert BgpPeerSpec.model_validate({**base, "allowOwnAs": 3}, by_alias=True).allow_own_as == 3
    with pytest.raises(ValueError):
        BgpPeerSpec.model_validate({**base, "allowOwnAs": -1}, by_alias=True)
