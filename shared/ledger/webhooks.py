"""Verified webhook events: stored once, matched to operations, kept as long as needed.

`store_events` writes one group-commit batch of verified events (the
receiver's ingest queue hands it set-shaped columns): dedupe by (provider,
event id), match to an operation (by our operation id, else the agent's client
reference when exactly one operation of the provider has it, else the job id),
turn matched ones into observations and wake their operations (never before
their not_before), in one statement.

Retention: a dedupe row must outlive every retry of its event (providers
retry for up to about three days), or a late retry would be stored as a new
event. After the retention, rows that never matched an operation are deleted; attached rows are
evidence cited by observations and stay.

Before purging, events whose job id has become known since they arrived are
attached (see `attach_stragglers`), so nothing matchable is ever deleted. The
reconciler schedules both: a `StragglerSweep` every minute (recent events
only, once it has looked at them all), `purge_webhook_events` (every
unattached event first) every hour.

Refused deliveries store no event; each receiver process adds its tally of
them (`record_refusals`, migration 017) every few seconds, so the console
counts every process's refusals, across restarts.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from shared.db.connect import Executor
from shared.db.queries import q

logger = logging.getLogger(__name__)

# The columns of one `store_events` batch, in the order of the query's
# parameters: one array each, one element per distinct event. `extra` counts
# the copies of the event the caller folded into this batch.
EVENT_COLUMNS = (
    "provider",
    "event_id",
    "scheme",
    "id_signed",
    "remote_job_id",
    "operation_ref",
    "client_reference",
    "remote_state",
    "remote_state_raw",
    "payload",
    "extra",
)

# A bounded straggler sweep looks at the events with an id above the newest one
# on record this many sweeps ago. An event left unattached by a race drew its
# id while its job id's write was in flight, so it is in that window unless
# one of the two transactions stayed open across several sweeps (nothing
# bounds an operator's transaction); such an event waits for the purge's full
# sweep, at most an hour. The window counts ids drawn, duplicate deliveries'
# included.
STRAGGLER_LOOKBACK_SWEEPS = 5

# Rows deleted per statement: each slice is its own short transaction, so a
# large backlog never holds locks or bloats one transaction for long.
PURGE_SLICE = 5000


async def store_events(
    conn: Any, columns: Mapping[str, Sequence[Any]], *, statement_timeout: float | None = None
) -> list[Any]:
    """Store one batch: `columns` maps each of EVENT_COLUMNS to its parallel array.

    One statement is one implicit transaction: the batch commits or none of
    it, and this returns only after COMMIT. Rows come back in input order,
    each with the event's `operation_id` (None: unattached) and `matched_by`
    (operation_id, client_reference or job_id) when it was new.
    """
    if set(columns) != set(EVENT_COLUMNS):
        wrong = sorted(set(columns).symmetric_difference(EVENT_COLUMNS))
        raise ValueError(f"webhook event columns: expected {EVENT_COLUMNS}, wrong: {wrong}")
    rows: list[Any] = await conn.fetch(
        q("receiver_store_events"),
        *(columns[name] for name in EVENT_COLUMNS),
        timeout=statement_timeout,
    )
    return rows


async def attach_stragglers(db: Executor, ids: tuple[int, int] | None = None) -> int:
    """Attach unattached events whose (provider, job id) is now on record; returns how many.

    The trigger that attaches early events when a job id is recorded cannot
    see an event committed by a receiver *while* that write was in flight
    (nor can the receiver see the uncommitted job id). This sweep closes that
    window; each event becomes exactly one observation, whoever attaches it.
    `ids` (after, newest): only the events with an id above `after`, up to
    `newest` (None: every unattached event).
    """
    if ids is None:
        attached: int = await db.fetchval(q("webhook_attach_stragglers"))
    else:
        attached = await db.fetchval(q("webhook_attach_recent_stragglers"), *ids)
    if attached:
        logger.info("attached late webhook events", extra={"ctx": {"count": attached}})
    return attached


class StragglerSweep:
    """The reconciler's frequent sweep: every unattached event until it has swept
    STRAGGLER_LOOKBACK_SWEEPS times, then only the events after the newest one
    on record that many sweeps ago.

    Reading every unattached event each minute grows with the events that
    never match (a provider reporting jobs started elsewhere), kept for the
    whole dedupe retention. A sweep that fails moves nothing on: the next
    one looks back as far.
    """

    def __init__(self, lookback: int = STRAGGLER_LOOKBACK_SWEEPS) -> None:
        if lookback < 1:
            raise ValueError("a straggler sweep must look back at least one sweep")
        # the newest event id before each of the last `lookback` sweeps, oldest first
        self._newest: deque[int] = deque(maxlen=lookback)

    @property
    def after(self) -> int | None:
        """What the next sweep passes to attach_stragglers (None: every event)."""
        full = len(self._newest) == self._newest.maxlen
        return self._newest[0] if full else None

    async def run(self, db: Executor) -> int:
        """One sweep; returns how many events it attached."""
        newest: int = await db.fetchval(q("webhook_newest_event"))
        after = self.after
        attached = await attach_stragglers(db, None if after is None else (after, newest))
        self._newest.append(newest)
        return attached


async def end_announced(
    db: Executor, operation_id: str, ends: Sequence[str], within_reads: int
) -> bool:
    """Whether a delivery reported one of the remote states `ends` for this
    operation, with fewer than `within_reads` of our status reads since.

    Asked while the operation is still observed, that is an end our own reads
    have not seen yet (a provider whose reads lag behind its webhooks).
    """
    found = await db.fetchval(q("webhook_end_announced"), operation_id, list(ends), within_reads)
    return bool(found)


async def delivered_for(db: Executor, operation_id: str) -> bool:
    """Whether any delivery was matched to this operation (a webhook observation)."""
    return bool(await db.fetchval(q("webhook_delivered_for"), operation_id))


async def purge_webhook_events(db: Executor, retention_days: int) -> int:
    """Delete unattached events older than `retention_days`; returns how many.

    The database refuses to purge anything younger than one day whatever the
    setting (a shorter window would let provider retries through dedupe).
    """
    if retention_days < 1:
        raise ValueError("webhook retention must be at least one day")
    await attach_stragglers(db)
    total = 0
    while True:
        deleted: int = await db.fetchval(q("webhook_purge_unattached"), retention_days, PURGE_SLICE)
        total += deleted
        if deleted < PURGE_SLICE:
            break
    if total:
        logger.info("purged webhook events", extra={"ctx": {"count": total}})
    return total


@dataclass(frozen=True)
class RefusalCount:
    """Refused deliveries of one provider for one reason on one UTC day."""

    provider: str
    reason: str
    day: date
    refusals: int
    last_at: datetime


@dataclass(frozen=True)
class Refusal:
    """One refused delivery: nothing the sender chose, only our label, reason and answer."""

    provider: str
    reason: str
    status: int
    at: datetime


async def record_refusals(
    conn: Any, counts: Sequence[RefusalCount], latest: Sequence[Refusal], *, keep: int
) -> None:
    """Add a receiver process's tally of refusals, and keep the newest `keep` refusals.

    One transaction: a flush that fails leaves nothing half-added, so the
    caller can keep its tally and add it again later without counting twice.
    """
    async with conn.transaction():
        if counts:
            await conn.execute(
                q("webhook_refusals_count"),
                [c.provider for c in counts],
                [c.reason for c in counts],
                [c.day for c in counts],
                [c.refusals for c in counts],
                [c.last_at for c in counts],
            )
        if latest:
            await conn.execute(
                q("webhook_refusals_note_latest"),
                [r.provider for r in latest],
                [r.reason for r in latest],
                [r.status for r in latest],
                [r.at for r in latest],
                keep,
            )
