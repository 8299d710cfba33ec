"""Unit-test session settings shared by every test module."""

from __future__ import annotations

import gc

import pytest


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
