"""SenderFilter's bookkeeping: who counts as one sender, and how often a wake-up
from a sender already gone is acted on (reconciler/wakeups.py).

A reused pid cannot be produced on demand on a real server, so these use
Sender values and a clock of the test's own; the lookups themselves are in
tests/integration/test_ops_fixes_wakeups.py.
"""

from __future__ import annotations

from datetime import UTC, datetime

from reconciler.wakeups import (
    TRUST_SECONDS,
    UNKNOWN_SECONDS,
    UNTRUSTED_SECONDS,
    Sender,
    SenderFilter,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_reused_pid_is_a_new_sender_warned_about_again() -> None:
    senders = SenderFilter(pool=None)
    first = Sender(4242, False, 16384, datetime(2025, 1, 1, 12, 0, tzinfo=UTC))
    assert senders.first_warning(first)
    assert not senders.first_warning(first)
    later_session = Sender(4242, False, 16384, datetime(2025, 1, 1, 12, 3, tzinfo=UTC))
    assert senders.first_warning(later_session)
    # without pg_read_all_stats backend_start is hidden: another login is still another sender
    assert senders.first_warning(Sender(4242, False, 16384, None))
    assert not senders.first_warning(Sender(4242, False, 16384, None))
    assert senders.first_warning(Sender(4242, False, 16385, None))


def test_wake_ups_from_senders_already_gone_are_acted_on_once_per_window() -> None:
    clock = Clock()
    senders = SenderFilter(pool=None, clock=clock)
    assert senders.unknown_delay() == 0.0  # the first: at once
    clock.now += 0.25
    assert senders.unknown_delay() == UNKNOWN_SECONDS - 0.25  # held to the window's end
    clock.now += 10 * UNKNOWN_SECONDS
    assert senders.unknown_delay() == 0.0  # a quiet while later: at once again


class OneRow:
    """A pool whose lookup finds one sender, counting the lookups."""

    def __init__(self, trusted: bool) -> None:
        self.trusted = trusted
        self.lookups = 0

    async def fetchrow(self, query: str, pid: int) -> dict[str, object]:
        self.lookups += 1
        return {"trusted": self.trusted, "role": 16384, "backend_start": None}


async def test_an_untrusted_verdict_is_kept_briefly_a_trusted_one_longer() -> None:
    """An agent notifying in a loop costs one lookup per window, not one each."""
    clock = Clock()
    agent = OneRow(trusted=False)
    senders = SenderFilter(pool=agent, clock=clock)
    sender = await senders.look(7)
    assert sender is not None and not sender.trusted
    assert senders.cached(7) is False and agent.lookups == 1
    clock.now += UNTRUSTED_SECONDS + 0.1
    assert senders.cached(7) is None  # the pid may be the receiver's now: ask again
    receiver = SenderFilter(pool=OneRow(trusted=True), clock=clock)
    sender = await receiver.look(8)
    assert sender is not None and sender.trusted
    clock.now += UNTRUSTED_SECONDS + 0.1
    assert receiver.cached(8) is True
    clock.now += TRUST_SECONDS
    assert receiver.cached(8) is None
