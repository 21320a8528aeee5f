"""Which wake-ups to act on: those sent by jobwarden's own roles.

PostgreSQL has no privilege on the NOTIFY statement: any session, an
agent's SQL login too, can `NOTIFY jobwarden_wakeup` (migration 011 only
revokes pg_notify). A wake-up carries no authority — it brings a sweep
forward — but an agent should not be able to make the reconciler sweep at
will. A notification names its sender's backend pid; a sender is trusted
when its login may read the operations table (the receiver, reconciler and
operator groups, the owner, superusers: the rule of jw_sees_all_operations),
which an agent's may not. The answer is cached per pid (a pool's
connections live long), and forgotten after a while, since PostgreSQL reuses
pids.
"""

from __future__ import annotations

import time
from typing import Any

from shared.db.queries import q

# How long a sender's verdict is kept, and how many are kept at most.
TRUST_SECONDS = 300.0
MAX_SENDERS = 10_000


class SenderFilter:
    def __init__(self, pool: Any, clock: Any = time.monotonic) -> None:
        self.pool = pool
        self.clock = clock
        self.known: dict[int, tuple[bool, float]] = {}

    def cached(self, pid: int) -> bool | None:
        """The verdict on `pid` if still fresh (None: ask the database)."""
        entry = self.known.get(pid)
        if entry is None or self.clock() - entry[1] > TRUST_SECONDS:
            return None
        return entry[0]

    async def trusted(self, pid: int) -> bool:
        verdict = self.cached(pid)
        if verdict is None:
            verdict = bool(await self.pool.fetchval(q("wake_sender_trusted"), pid))
            if len(self.known) >= MAX_SENDERS:
                self.known.clear()
            self.known[pid] = (verdict, self.clock())
        return verdict
