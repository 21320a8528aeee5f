"""heap.settle: start-up's objects leave the collector's walks; later garbage is still freed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from shared import heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """No automatic collection meanwhile (only settle's own may free anything); the
    frozen objects are given back afterwards, so the rest of the run collects as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_what_exists_at_settle_is_frozen_and_later_cycles_are_collected(unfrozen: None) -> None:
    before = _Node()
    heap.settle()
    assert gc.get_freeze_count() > 0
    assert not any(obj is before for obj in gc.get_objects())  # out of every walk

    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle only the collector can free
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_garbage_made_before_settle_is_freed_not_frozen(unfrozen: None) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    heap.settle()
    assert gone() is None
