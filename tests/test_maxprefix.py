"""Max-prefix: counting accepted prefixes per peer and family, warn / discardExtra / teardown, reset."""

from __future__ import annotations

import importlib
import math

import pytest

mp = importlib.import_module("agent.import.maxprefix")
MaxPrefix, Limit, Action, D, State = (mp.MaxPrefix, mp.MaxPrefixLimit, mp.MaxPrefixAction,
                                      mp.MaxPrefixDecision, mp.MaxPrefixState)
PEER = "192.0.2.1"


def tracker(limit=None, family=4):
    t = MaxPrefix()
    t.configure(PEER, family, limit)
    return t


def admit(t, n, family=4):
    return [t.admit(PEER, family) for _ in range(n)]


ACTION_CASES = [
    ("no limit", None, 5, [D.OK] * 5, 5),
    ("warn once", Limit(2, Action.WARN), 5, [D.OK, D.OK, D.WARN, D.OK, D.OK], 5),
    ("discard extra", Limit(2, Action.DISCARD_EXTRA), 4, [D.OK, D.OK, D.DISCARD, D.DISCARD], 2),
    ("teardown", Limit(2, Action.TEARDOWN), 4, [D.OK, D.OK, D.TEARDOWN, D.DISCARD], 2),
    ("limit 0 teardown", Limit(0), 2, [D.TEARDOWN, D.DISCARD], 0),
    ("limit 0 discard", Limit(0, Action.DISCARD_EXTRA), 1, [D.DISCARD], 0),
]


@pytest.mark.parametrize("limit,n,decisions,count", [c[1:] for c in ACTION_CASES], ids=[c[0] for c in ACTION_CASES])
def test_actions(limit, n, decisions, count):
    t = tracker(limit)
    assert admit(t, n) == decisions
    assert t.count(PEER, 4) == count


def test_default_action_is_teardown_and_cease_code():
    assert Limit(5).action is Action.TEARDOWN
    assert (mp.CEASE, mp.CEASE_MAX_PREFIXES) == (6, 1)
    with pytest.raises(ValueError):
        Limit(-1)


def test_warn_rearms_when_back_under_the_limit():
    t = tracker(Limit(2, Action.WARN))
    assert admit(t, 3) == [D.OK, D.OK, D.WARN]
    assert t.status(PEER, 4).state is State.OVER_LIMIT
    t.release(PEER, 4)  # back to 2
    assert t.status(PEER, 4).state is State.OK
    assert admit(t, 2) == [D.WARN, D.OK]


def test_discard_extra_slot_freed_by_withdrawal():
    t = tracker(Limit(2, Action.DISCARD_EXTRA))
    assert admit(t, 3) == [D.OK, D.OK, D.DISCARD]
    s = t.status(PEER, 4)
    assert (s.count, s.state, s.discarded) == (2, State.DISCARDING, 1)
    t.release(PEER, 4)
    assert admit(t, 2) == [D.OK, D.DISCARD]


def test_teardown_discards_every_family_then_holds_down():
    t = tracker(Limit(1, Action.TEARDOWN, restart_seconds=30))
    t.configure(PEER, 6, None)
    assert admit(t, 2) == [D.OK, D.TEARDOWN]
    assert t.admit(PEER, 6) is D.DISCARD  # the session is going down: nothing more
    assert t.status(PEER, 4).state is State.TORN_DOWN
    assert t.may_connect(PEER, 0.0)  # no hold-down before the session is actually down
    assert t.hold_until(PEER) is None
    t.session_down(PEER, now=100.0)
    assert t.hold_until(PEER) == 130.0  # from the session down, the one deadline
    s = t.status(PEER, 4)
    assert (s.count, s.state, s.restart_at, s.discarded) == (0, State.HELD_DOWN, 130.0, 0)
    assert not t.may_connect(PEER, 129.9)
    assert t.may_connect(PEER, 130.0)
    assert t.status(PEER, 4).state is State.OK
    assert admit(t, 1) == [D.OK]  # new session, counts from zero


def test_teardown_without_restart_delay_waits_for_clear():
    t = tracker(Limit(0))
    assert admit(t, 1) == [D.TEARDOWN]
    t.session_down(PEER, now=5.0)
    assert t.status(PEER, 4).restart_at == math.inf == t.hold_until(PEER)
    assert not t.may_connect(PEER, 1e12)
    t.clear(PEER)
    assert t.may_connect(PEER, 6.0)


def test_session_down_resets_counts_and_warnings():
    t = tracker(Limit(1, Action.WARN))
    assert admit(t, 2) == [D.OK, D.WARN]
    t.session_down(PEER, now=1.0)
    assert t.count(PEER, 4) == 0 and t.may_connect(PEER, 1.0)
    assert admit(t, 2) == [D.OK, D.WARN]


def test_families_and_peers_are_independent():
    t = MaxPrefix()
    t.configure(PEER, 4, Limit(1, Action.DISCARD_EXTRA))
    t.configure(PEER, 6, Limit(2, Action.DISCARD_EXTRA))
    t.configure("192.0.2.2", 4, Limit(1, Action.DISCARD_EXTRA))
    assert admit(t, 2, 4) == [D.OK, D.DISCARD]
    assert admit(t, 3, 6) == [D.OK, D.OK, D.DISCARD]
    assert t.admit("192.0.2.2", 4) is D.OK
    assert t.admit("192.0.2.3", 4) is D.OK  # unconfigured peer: counted, no limit
    assert t.count("192.0.2.3", 4) == 1


def test_changing_the_limit_applies_to_the_next_prefix():
    t = tracker(Limit(1, Action.DISCARD_EXTRA))
    assert admit(t, 2) == [D.OK, D.DISCARD]
    t.configure(PEER, 4, Limit(3, Action.DISCARD_EXTRA))
    assert admit(t, 3) == [D.OK, D.OK, D.DISCARD]
    t.configure(PEER, 4, Limit(1, Action.DISCARD_EXTRA))  # lowered: nothing retroactive
    assert t.count(PEER, 4) == 3
    assert admit(t, 1) == [D.DISCARD]


def test_release_never_goes_negative_and_forget():
    t = tracker(Limit(1))
    t.release(PEER, 4)
    t.release("nobody", 4)
    assert t.count(PEER, 4) == 0
    assert admit(t, 2) == [D.OK, D.TEARDOWN]
    t.forget(PEER)
    assert t.status(PEER, 4).state is State.OK and t.may_connect(PEER, 0.0)


def test_room_is_what_admit_takes_without_a_decision():
    """`room` counts the admissions that would be OK one after the other; `add` of them equals
    that many `admit` calls (the import stage's batch shortcut)."""
    for action in (Action.WARN, Action.DISCARD_EXTRA, Action.TEARDOWN):
        a, b = MaxPrefix(), MaxPrefix()
        for m in (a, b):
            m.configure("p", 4, Limit(5, action))
            m.admit("p", 4)
        assert a.room("p", 4) == 4
        a.add("p", 4, 4)
        assert [b.admit("p", 4) for _ in range(4)] == [D.OK] * 4
        assert a.count("p", 4) == b.count("p", 4) == 5 and a.room("p", 4) == 0
        assert a.admit("p", 4) == b.admit("p", 4) != D.OK
    m = MaxPrefix()
    assert m.room("q", 6) > 10**9  # no limit
    m.configure("q", 6, Limit(1, Action.TEARDOWN))
    m.admit("q", 6)
    assert m.admit("q", 6) == D.TEARDOWN
    assert m.room("q", 4) == 0  # torn down: every family asks admit (DISCARD)
