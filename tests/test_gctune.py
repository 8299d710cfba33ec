"""The collector's settings (`agent.core.gctune`): a load's objects are frozen, ordinary
operation keeps the collector's cycle."""

from __future__ import annotations

import gc

from agent.core.gctune import FREEZE_GROWTH, WINDOW, LoadFreezer


class Counts:
    """A stand-in young-generation count and freeze (freezing resets the count, as gc's does)."""

    def __init__(self) -> None:
        self.n = 0
        self.frozen = 0

    def freeze(self) -> None:
        self.frozen += 1
        self.n = 0


def freezer() -> tuple[Counts, LoadFreezer]:
    c = Counts()
    return c, LoadFreezer(lambda: c.n, c.freeze)


def test_a_load_is_frozen_as_it_grows():
    c, f = freezer()
    f.after_pass(100.0)
    for k in range(1, 40):  # ~150,000 objects a second, 50 ms passes
        c.n += 7_500
        f.after_pass(100.0 + 0.05 * k)
    assert c.frozen >= 10 and c.n < FREEZE_GROWTH


def test_slow_growth_is_left_to_the_collector():
    c, f = freezer()
    for k in range(200):  # 1,000 objects a second for 200 s
        c.n += 1_000
        if c.n >= 50_000:
            c.n = 0  # (the young collection)
        f.after_pass(100.0 + k)
    assert c.frozen == 0


def test_growth_counts_within_the_window_only():
    c, f = freezer()
    f.after_pass(0.0)
    c.n = FREEZE_GROWTH - 1
    assert not f.after_pass(WINDOW * 2)  # slow: the window moves on from here
    c.n += FREEZE_GROWTH - 1
    assert not f.after_pass(WINDOW * 4)
    c.n += FREEZE_GROWTH
    assert f.after_pass(WINDOW * 4 + 0.1) and c.frozen == 1


def test_a_collection_during_the_window_starts_it_again():
    c, f = freezer()
    f.after_pass(0.0)
    c.n = 15_000
    assert not f.after_pass(0.1)
    c.n = 3_000  # a young collection ran, then 3,000 more
    assert not f.after_pass(0.2)
    c.n = 3_000 + FREEZE_GROWTH
    assert f.after_pass(0.3)


def test_the_real_collector_is_frozen_and_counts_again():
    """With gc itself (the conftest fixture unfreezes after the test)."""
    was = gc.isenabled()
    gc.disable()  # (no young collection while the objects are made)
    try:
        f = LoadFreezer()
        f.after_pass(0.0)
        held = [[] for _ in range(FREEZE_GROWTH + 10)]
        frozen = gc.get_freeze_count()
        assert f.after_pass(0.1) and gc.get_freeze_count() >= frozen + FREEZE_GROWTH
        assert gc.get_count()[0] < 100 and held
    finally:
        if was:
            gc.enable()
