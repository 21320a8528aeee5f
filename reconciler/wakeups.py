"""Which wake-ups to act on: those sent by jobwarden's own roles.

PostgreSQL has no privilege on the NOTIFY statement: any session, an
agent's SQL login too, can `NOTIFY jobwarden_wakeup` (migration 011 only
revokes pg_notify). A wake-up carries no authority — it brings a sweep
forward — but an agent should not be able to make the reconciler sweep at
will. A notification names its sender's backend pid; a sender is trusted
when its login may read the operations table (the receiver, reconciler and
operator groups, the owner, superusers: the rule of jw_sees_all_operations),
which an agent's may not.

A sender whose backend has already gone when we look (`jobwarden submit`, or
`psql -c "NOTIFY …"`, disconnects at once) is unknown, not untrusted: its
wake-up is acted on, since ignoring it made an operator's submission wait for
the sweep tick. So that an agent cannot sweep at will by disconnecting
quickly, such wake-ups are acted on at most once per UNKNOWN_SECONDS (later
ones are held to the end of that window, not dropped). Nothing is cached
about an unknown sender.

Verdicts are cached per pid (a pool's connections live long, and notify on
every change) and forgotten after a while since PostgreSQL reuses pids: a
trusted one after TRUST_SECONDS, an untrusted one much sooner (a reused pid
may be the receiver's next). An untrusted sender is warned about once: a
sender is its pid, its role and, when visible, its backend's start time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.db.queries import q

# How long a trusted sender's verdict is kept, and how many senders are
# remembered (verdicts, and those already warned about) at most.
TRUST_SECONDS = 300.0
MAX_SENDERS = 10_000
# Wake-ups from senders already gone are acted on at most this often: an
# operator's CLI is heard within it, an agent's rapid connect-notify-disconnect
# adds at most one sweep per window.
UNKNOWN_SECONDS = 1.0
# An untrusted verdict is kept this long: short, since the pid may be the
# receiver's next, but an agent notifying in a loop from an open session then
# costs one lookup per window rather than one per notification.
UNTRUSTED_SECONDS = 5.0


@dataclass(frozen=True)
class Sender:
    """A sending backend as seen while it was still connected.

    backend_start is None when the reconciler's role may not see it (it needs
    pg_read_all_stats for other roles' sessions); the role still tells a pid
    reused by another login apart.
    """

    pid: int
    trusted: bool
    role: int
    backend_start: datetime | None

    @property
    def identity(self) -> tuple[int, int, datetime | None]:
        return (self.pid, self.role, self.backend_start)


class SenderFilter:
    def __init__(self, pool: Any, clock: Any = time.monotonic) -> None:
        self.pool = pool
        self.clock = clock
        self.known: dict[int, tuple[bool, float]] = {}
        self.warned: set[tuple[int, int, datetime | None]] = set()
        self.unknown_until = float("-inf")

    def cached(self, pid: int) -> bool | None:
        """The recent verdict on `pid` (None: ask the database)."""
        entry = self.known.get(pid)
        if entry is None:
            return None
        trusted, at = entry
        if self.clock() - at > (TRUST_SECONDS if trusted else UNTRUSTED_SECONDS):
            return None
        return trusted

    async def look(self, pid: int) -> Sender | None:
        """The sender behind `pid`, or None if its backend has gone: unknown.

        A trusted verdict is cached for TRUST_SECONDS, an untrusted one for
        UNTRUSTED_SECONDS (the pid may be the receiver's next); nothing is
        cached about a sender already gone.
        """
        row = await self.pool.fetchrow(q("wake_sender"), pid)
        if row is None:
            return None
        sender = Sender(pid, bool(row["trusted"]), row["role"], row["backend_start"])
        if len(self.known) >= MAX_SENDERS:
            self.known.clear()
        self.known[pid] = (sender.trusted, self.clock())
        return sender

    def first_warning(self, sender: Sender) -> bool:
        """True once per untrusted sender: the README promises one warning each."""
        if sender.identity in self.warned:
            return False
        if len(self.warned) >= MAX_SENDERS:
            self.warned.clear()
        self.warned.add(sender.identity)
        return True

    def unknown_delay(self) -> float:
        """Seconds to hold a wake-up whose sender is gone (0: act now); the
        caller holds at most one, which covers any arriving meanwhile."""
        now: float = self.clock()
        delay = max(0.0, self.unknown_until - now)
        self.unknown_until = now + delay + UNKNOWN_SECONDS
        return delay
