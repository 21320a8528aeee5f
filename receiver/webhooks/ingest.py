"""Durable storage of verified webhook events, by group commit.

One INSERT and COMMIT per request spends most of its time waiting for the
commit's WAL flush, and that wait is the same for one row or for hundreds. So
requests do not write: each hands its verified `Event` to the `Ingestor` and
awaits a future; a writer task takes everything queued (up to `MAX_BATCH`),
writes it in ONE statement (its own transaction) with set-based SQL, and only
after COMMIT returns resolves each future (stored / duplicate). If the
transaction fails, every future in it fails and the request answers 503: no
caller is told "saved" before the commit, and no event is saved without a
caller or a later redelivery learning it. Copies of one event in one batch
are folded into a single row (the first is "stored", the others "duplicate").

A batch the database refuses for a row's content (not its own health) is
written again one event at a time, so one poison event cannot fail its
neighbours. An event refused on its own is tried once more with its payload
replaced by `unstorable_payload`, plain ASCII that any jsonb takes and that
keeps the payload's text exactly: the payload is the likeliest cause (a
number beyond PostgreSQL's numeric range, which the endpoint does not scan
every body for), and an authentic event must be stored, matched and
deduplicated like any other rather than refused on every redelivery. Only
if that is refused too (the cause is elsewhere) does its request get 500.

Nothing here holds state a restart would lose: a queued event belongs to a
request that has not been answered, so a crash makes the provider retry it.
Dedupe is the database's UNIQUE (provider, event_id), so any number of
receiver processes may run side by side.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import asyncpg

from shared.db import pooled
from shared.db.connect import create_pool
from shared.db.errors import db_error_context
from shared.failure_streak import FailureStreak
from shared.ledger.webhooks import store_events

logger = logging.getLogger(__name__)

# Concurrent group-commit transactions. One gives the largest batches, hence
# the least work per event when the process is CPU-bound (the benchmark's
# case); a second lets a batch go out while the previous one commits, which
# helps only when database latency dominates. Each writer holds a connection
# of the writers' own pool (`create_writer_pool`) while it has work.
WRITERS = 1
# Events per transaction. Past a few hundred rows the statement's own cost
# dominates the commit it amortizes, and a failed batch (503 for all of it)
# should stay a bounded blast radius.
MAX_BATCH = 256
# Back-pressure: beyond this many waiting events (or bytes of payload) new
# deliveries get 503 at once instead of queueing behind a database that is not
# keeping up. 4096 events is about a second of peak load on one core.
MAX_QUEUED_EVENTS = 4096
MAX_QUEUED_BYTES = 64 * 1024 * 1024
# Bound on one batch's statements, and on the whole batch (retries and the
# one-by-one fallback included) past the pool acquire: a lock wait or a
# stalled server must turn into 503s (the provider retries) rather than
# requests hanging until the provider's own timeout.
STATEMENT_TIMEOUT_SECONDS = 5.0
BATCH_DEADLINE_SECONDS = 10.0
# The writers' connections plan the batch statement once. PostgreSQL otherwise
# re-plans it for every batch whose arrays it can see are short: its custom plan
# counts the elements, its generic plan guesses ten, so small batches (a quiet
# receiver's usual one event) look cheaper planned afresh, every time, and the
# planning costs about as much as the batch (measured: 1.3 ms against 0.65 ms
# for a one-event batch, one-off). The plan has the same shape at every size:
# index probes per event, then the inserts.
WRITER_SERVER_SETTINGS = {"plan_cache_mode": "force_generic_plan"}
# A deadlock between receivers (or with the reconciler) aborts one transaction;
# re-running it is safe because nothing of it was committed.
DEADLOCK_RETRIES = 3
# On shutdown, queued events get this long to commit before their requests are
# answered 503.
DRAIN_TIMEOUT_SECONDS = 10.0

_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
# Errors caused by a row's content, not by the database's health: re-writing
# the batch one event at a time confines the failure to the offending event.
_ROW_ERRORS = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError)

Status = Literal["stored", "duplicate"]
_Key = tuple[str, str]

# The `jobwarden` key of a payload stored as `unstorable_payload`.
UNSTORABLE_MARKER = "payload not representable as jsonb"


def unstorable_payload(raw: bytes) -> str:
    """JSON text any jsonb takes that keeps `raw` (a payload's bytes) exactly, in base64.

    For an authentic payload PostgreSQL will not hold as JSON: the event is
    stored all the same, and an operator can still read what was sent.
    """
    encoded = base64.b64encode(raw).decode("ascii")
    return json.dumps({"jobwarden": UNSTORABLE_MARKER, "body_base64": encoded})


class Event(NamedTuple):
    """A verified event ready to store; every field is safe to persist.

    A named tuple, not a frozen dataclass: immutable all the same, and made in
    a third of the time (0.8 against 2.9 µs, timeit, one-off), once per delivery.
    """

    provider: str
    event_id: str
    scheme: str
    id_signed: bool
    remote_job_id: str | None
    operation_ref: str | None  # our operation id, as the event carries it
    remote_state: str | None
    remote_state_raw: str | None
    payload: str  # JSON text, as jsonb should accept it (else see unstorable_payload)
    client_reference: str | None = None  # the agent's client reference, as carried

    @property
    def key(self) -> tuple[str, str]:
        return (self.provider, self.event_id)


class Outcome(NamedTuple):
    """What the committed transaction did with one delivery (a named tuple, as `Event`)."""

    status: Status
    webhook_event_id: int
    operation_id: str | None  # set for a new event matched to an operation
    trace_id: str | None  # the matched operation's trace id
    matched_by: str | None = None  # operation_id | client_reference | job_id, when matched


UnavailableReason = Literal["queue_full", "not_accepting", "database_unavailable"]


class IngestUnavailable(Exception):
    """The event was not stored because it cannot be committed now (→ 503).

    `reason` is a word from a fixed list, so the endpoint can count and log
    why the provider was told to retry (overload, shutdown, database) without
    parsing messages.
    """

    def __init__(self, reason: UnavailableReason, message: str) -> None:
        super().__init__(message)
        self.reason: UnavailableReason = reason


class IngestRejected(Exception):
    """The database refused this event's content; retrying will not help (→ 500)."""


class _Pending:
    __slots__ = ("event", "future")

    def __init__(self, event: Event, future: asyncio.Future[Outcome]) -> None:
        self.event = event
        self.future = future


@dataclass(frozen=True, slots=True)
class BatchReport:
    """Passed to the `on_batch` hook after each batch, for metrics."""

    size: int
    seconds: float
    failed: bool


async def create_writer_pool(database_url: str, writers: int | None = None) -> Any:
    """The writers' own connections, one per writer (`WRITER_SERVER_SETTINGS`).

    Their own, too, so that agent-API and console queries never wait behind a
    writer for a connection, nor a writer behind them. min_size=0: the
    receiver starts while PostgreSQL is down (its events answered 503). An
    idle connection is kept (max_inactive_connection_lifetime=0): a quiet
    receiver's next event would otherwise pay a new connection and a new
    prepare, tens of milliseconds, to save one idle connection.
    """
    return await create_pool(
        database_url,
        min_size=0,
        max_size=max(1, writers or WRITERS),
        server_settings=WRITER_SERVER_SETTINGS,
        max_inactive_connection_lifetime=0,
    )


class Ingestor:
    """The group-commit writers of one receiver process; see the module docstring.

    `start()` launches the writers, `submit()` stores one event (returning only
    after COMMIT), `close()` stops taking events and drains what is queued.
    """

    def __init__(
        self,
        pool: Any,
        *,
        acquire_timeout: float,
        max_batch: int | None = None,
        writers: int | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
        on_db_error: Callable[[str], None] | None = None,
    ) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout  # waiting for a pool connection, then 503
        # Defaults read at construction, so a benchmark can compare settings.
        self._max_batch = max(1, max_batch or MAX_BATCH)
        self._writer_count = max(1, writers or WRITERS)
        self._on_batch = on_batch
        self._on_db_error = on_db_error
        self._queue: list[_Pending] = []
        self._queued_bytes = 0
        self._work = asyncio.Event()
        self._closing = False
        self._writers: list[asyncio.Task[None]] = []
        self._holding = 0  # writers holding a connection now
        # the database down fails every batch: one line as it starts, not one per batch
        self._unavailable_streak = FailureStreak(
            logger, "webhook batches not stored: database unavailable", logging.WARNING
        )

    @property
    def accepting(self) -> bool:
        return bool(self._writers) and not self._closing

    @property
    def writers(self) -> int:
        return self._writer_count

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def writing(self) -> bool:
        """A writer holds a connection now: its batches are the database's probe."""
        return self._holding > 0

    def start(self) -> None:
        if self._writers:
            return
        for index in range(self._writer_count):
            writer = asyncio.create_task(self._run(), name=f"webhook-ingest-writer-{index}")
            writer.add_done_callback(self._writer_stopped)
            self._writers.append(writer)

    async def submit(self, event: Event) -> Outcome:
        """Store `event`; returns after COMMIT, or raises IngestUnavailable / IngestRejected."""
        if not self.accepting:
            raise IngestUnavailable("not_accepting", "receiver is not accepting events")
        if (
            len(self._queue) >= MAX_QUEUED_EVENTS
            or self._queued_bytes + len(event.payload) > MAX_QUEUED_BYTES
        ):
            raise IngestUnavailable("queue_full", "ingest queue is full")
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(event, future))
        self._queued_bytes += len(event.payload)
        self._work.set()
        # No per-request timer: the writer settles every future within its
        # batch deadline (one timer per batch, not per request). If the caller
        # is cancelled, only this future is; the commit in flight goes on.
        return await future

    async def close(self, drain_seconds: float = DRAIN_TIMEOUT_SECONDS) -> None:
        """Stop accepting, commit what is queued (for at most `drain_seconds`), stop the writers."""
        self._closing = True
        self._work.set()
        if not self._writers:
            return
        done = asyncio.gather(*self._writers, return_exceptions=True)
        try:
            await asyncio.wait_for(asyncio.shield(done), drain_seconds)
        except TimeoutError:
            for writer in self._writers:
                writer.cancel()
            await done
        self._fail(
            self._take(len(self._queue)), IngestUnavailable("not_accepting", "receiver shut down")
        )

    # ----------------------------------------------------------------- writer

    async def _run(self) -> None:
        while await self._work_waiting():
            try:
                conn = await self._pool.acquire(timeout=self._acquire_timeout)
            except Exception as exc:  # pool exhausted, or the server refuses connections
                if isinstance(exc, TimeoutError):
                    self._db_error("pool_timeout")
                self._fail(self._take(self._max_batch), self._unavailable(exc))
                continue
            self._holding += 1
            try:
                # Held while work is queued: under load that saves the pool's
                # per-release reset round trip on every batch.
                while self._queue:
                    if not await self._write_batch(conn, self._take(self._max_batch)):
                        break  # the connection may be broken: return it, take a fresh one
            finally:
                self._holding -= 1
                await self._release(conn)

    async def _work_waiting(self) -> bool:
        """Wait until events are queued; False once closing with nothing left to write."""
        while not self._queue:
            if self._closing:
                return False
            self._work.clear()
            await self._work.wait()
        return True

    async def _write_batch(self, conn: Any, batch: list[_Pending]) -> bool:
        """Commit one batch and settle its futures; False when the connection failed."""
        started = time.perf_counter()
        healthy = True
        try:
            async with asyncio.timeout(BATCH_DEADLINE_SECONDS):
                await self._write(conn, batch)
        except Exception as exc:  # every failure must reach the waiting requests
            healthy = False
            self._fail(batch, self._unavailable(exc))
        else:
            self._unavailable_streak.succeeded()
        if self._on_batch is not None:
            self._on_batch(BatchReport(len(batch), time.perf_counter() - started, not healthy))
        return healthy

    async def _release(self, conn: Any) -> None:
        await pooled.release(self._pool, conn, reset_seconds=STATEMENT_TIMEOUT_SECONDS)

    def _writer_stopped(self, task: asyncio.Task[None]) -> None:
        """Fail whatever is queued if a writer ever ends (normally only at close)."""
        self._closing = True
        self._fail(
            self._take(len(self._queue)), IngestUnavailable("not_accepting", "event writer stopped")
        )

    def _take(self, limit: int) -> list[_Pending]:
        batch = self._queue[:limit]
        del self._queue[:limit]
        self._queued_bytes -= sum(len(p.event.payload) for p in batch)
        return batch

    async def _write(self, conn: Any, batch: list[_Pending]) -> None:
        groups = _group_by_key(batch)
        try:
            outcomes = await self._write_with_retries(conn, groups)
        except _ROW_ERRORS as exc:
            self._db_error("row_rejected")
            if len(groups) == 1:  # one event, no neighbours: straight to its last resort
                [(key, pendings)] = groups.items()
                await self._write_unstorable(conn, key, pendings, exc)
                return
            logger.warning(
                "a batch was refused for its content; storing its events one by one",
                extra={"ctx": {"batch_size": len(batch)}},
            )
            await self._write_one_by_one(conn, groups)
            return
        for key, pendings in groups.items():
            _settle(pendings, outcomes[key])

    async def _write_one_by_one(self, conn: Any, groups: dict[_Key, list[_Pending]]) -> None:
        for key, pendings in groups.items():
            try:
                outcomes = await self._write_with_retries(conn, {key: pendings})
            except _ROW_ERRORS as exc:
                await self._write_unstorable(conn, key, pendings, exc)
                continue
            _settle(pendings, outcomes[key])

    async def _write_unstorable(
        self, conn: Any, key: _Key, pendings: list[_Pending], refused: Exception
    ) -> None:
        """Write a refused event again with its payload as `unstorable_payload`, and settle
        its requests; they fail (500) if the database refuses that too (module docstring)."""
        first = pendings[0]
        raw = first.event.payload.encode("utf-8", "surrogatepass")
        event = first.event._replace(payload=unstorable_payload(raw))
        try:
            outcomes = await self._write_with_retries(
                conn, {key: [_Pending(event, first.future), *pendings[1:]]}
            )
        except _ROW_ERRORS as exc:
            logger.error(
                "webhook event refused by the database",
                extra={"ctx": {"provider": key[0], "event_id": key[1], **db_error_context(exc)}},
            )
            self._fail(pendings, IngestRejected("the database refused this event"))
            return
        logger.warning(
            "webhook payload refused by the database as JSON; stored in base64",
            extra={"ctx": {"provider": key[0], "event_id": key[1], **db_error_context(refused)}},
        )
        _settle(pendings, outcomes[key])

    async def _write_with_retries(
        self, conn: Any, groups: dict[_Key, list[_Pending]]
    ) -> dict[_Key, Any]:
        attempt = 0
        while True:
            try:
                return await _store(conn, groups)
            except _RETRYABLE:
                self._db_error("deadlock")
                attempt += 1
                if attempt > DEADLOCK_RETRIES:
                    raise

    def _unavailable(self, exc: Exception) -> Exception:
        if isinstance(exc, IngestUnavailable | IngestRejected):
            return exc
        self._db_error("unavailable")
        self._unavailable_streak.failed(ctx=db_error_context(exc))
        return IngestUnavailable("database_unavailable", "database unavailable")

    def _fail(self, batch: Sequence[_Pending], error: Exception) -> None:
        for pending in batch:
            if not pending.future.done():
                pending.future.set_exception(error)
                # The caller may have timed out already; never warn about an
                # exception nobody retrieved.
                pending.future.exception()

    def _db_error(self, kind: str) -> None:
        if self._on_db_error is not None:
            self._on_db_error(kind)


async def _store(conn: Any, groups: dict[_Key, list[_Pending]]) -> dict[_Key, Any]:
    """Run one batch statement; returns after COMMIT (asyncpg answers after ReadyForQuery).

    A single statement is its own transaction: no BEGIN/COMMIT round trips,
    and a failure at commit raises here instead of returning rows. Each
    group's row holds `inserted`, `webhook_event_id`, `operation_id`,
    `trace_id` and `matched_by`.
    """
    stored = await store_events(conn, _columns(groups), statement_timeout=STATEMENT_TIMEOUT_SECONDS)
    by_ord = {r["ord"]: r for r in stored}
    return {key: by_ord[i + 1] for i, key in enumerate(groups)}


def _group_by_key(batch: list[_Pending]) -> dict[_Key, list[_Pending]]:
    """Deliveries of one event grouped, keys sorted (a stable lock order across receivers)."""
    groups: dict[_Key, list[_Pending]] = {}
    for pending in batch:
        groups.setdefault(pending.event.key, []).append(pending)
    return dict(sorted(groups.items()))


def _columns(groups: dict[_Key, list[_Pending]]) -> dict[str, list[Any]]:
    """The parallel arrays of `store_events`, one element per distinct event."""
    events = [pendings[0].event for pendings in groups.values()]
    return {
        "provider": [e.provider for e in events],
        "event_id": [e.event_id for e in events],
        "scheme": [e.scheme for e in events],
        "id_signed": [e.id_signed for e in events],
        "remote_job_id": [e.remote_job_id for e in events],
        "operation_ref": [e.operation_ref for e in events],
        "client_reference": [e.client_reference for e in events],
        "remote_state": [e.remote_state for e in events],
        "remote_state_raw": [e.remote_state_raw for e in events],
        "payload": [e.payload for e in events],
        "extra": [len(pendings) - 1 for pendings in groups.values()],
    }


def _settle(pendings: list[_Pending], row: Any) -> None:
    """First delivery of a new event is `stored`; every other copy is a duplicate."""
    event_id = row["webhook_event_id"]
    duplicate: Outcome | None = None
    for index, pending in enumerate(pendings):
        if pending.future.done():
            continue
        if index == 0 and row["inserted"]:
            outcome = Outcome(
                "stored", event_id, row["operation_id"], row["trace_id"], row["matched_by"]
            )
        else:  # one immutable answer serves every copy
            duplicate = duplicate or Outcome("duplicate", event_id, None, None, None)
            outcome = duplicate
        pending.future.set_result(outcome)
