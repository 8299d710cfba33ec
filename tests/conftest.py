"""Unit-test session settings shared by every test module."""

from __future__ import annotations

import gc

import pytest

from agent.speaker import wire_values


@pytest.fixture(autouse=True)
def _relay_settings_as_found():
    """The relay's decoder (`agent.speaker.relay._decoder`, which tests call in process) turns off
    the sharing of decoded values for the whole interpreter: give every test the setting it found."""
    shared = wire_values.SHARE_VALUES
    yield
    if wire_values.SHARE_VALUES != shared:
        wire_values.SHARE_VALUES = shared
        wire_values.clear_memos()  # (no unshared value stays in a memo for later tests)


@pytest.fixture(autouse=True)
def _collector_as_found():
    """`agent.core.gctune.tune_gc` (run by the agent's start-up and the relay's decoder, which some
    tests call in process) freezes the heap and sets the collector's thresholds for the whole
    interpreter: give every test the settings it found, so no test runs under another's (a young
    collection of 50,000 objects holds the interpreter lock for tens of ms: the BFD timing tests
    measure that lock)."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    yield
    if gc.get_threshold() != threshold:
        gc.set_threshold(*threshold)
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()
