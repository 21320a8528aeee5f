"""Group commit for status reads that decide nothing.

Most status reads only say "still running": the read is recorded, the
observed columns updated and the lease handed back, all by one statement
(`record_polls`). Steps do not send that statement themselves: each hands
its row to the `PollWriter` and awaits it. The writer sends everything
queued as ONE statement; what arrives while it runs waits for the next one.
Under load a statement carries several reads (fewer round trips, commits and
statement executions per read); a lone read waits for nobody.

A step learns its read was written only after the statement returns, and
learns `LeaseLost` if its fence no longer held (then nothing of it was
written). Nothing queued here is state a crash could lose: a queued row
belongs to a step that has not finished, so the lease simply expires and the
operation is read again (status reads are safe to repeat).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import asyncpg

from shared.db import pgjson
from shared.db.errors import db_error_context, db_error_reason
from shared.ledger.errors import LeaseLost
from shared.ledger.evidence import ROW_ERRORS, call_only, record_polls

log = logging.getLogger("jobwarden.reconciler")

# Reads per statement. The batch only grows this big when the database falls
# behind; it bounds the statement's size and a failed batch's blast radius.
MAX_BATCH = 64
# A deadlock (our multi-row update against another multi-row writer, such as
# the receiver's webhook matching) aborts the statement; nothing of it was
# written, so running it again is safe.
DEADLOCK_RETRIES = 3

Row = Mapping[str, Any]


class _Queued:
    __slots__ = ("future", "operation_id", "row", "text")

    def __init__(self, row: Row, text: str, future: asyncio.Future[None]) -> None:
        self.operation_id: str = row["operation_id"]
        self.row = row
        self.text = text
        self.future = future


class PollWriter:
    """The group-commit writer of one reconciler process; see the module docstring."""

    def __init__(self, db: Any) -> None:
        self._db = db  # a pool (or anything with asyncpg's `fetch`)
        self._queue: list[_Queued] = []
        self._writer: asyncio.Future[None] | None = None

    async def record(self, row: Row) -> None:
        """Write one `status_row`; raises LeaseLost when the lease no longer held.

        The row is encoded here, in the caller's task: a row that cannot be
        encoded fails its own step, not the batch it would have joined.
        """
        text = pgjson.dumps(row)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(row, text, future))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._drain())
        await future

    async def _drain(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._queue:
                batch = self._take()
                await self._write(batch)
        except BaseException:
            # Cancelled (event loop shutting down): nobody is left to write
            # these; their steps must not wait forever.
            for item in (*batch, *self._queue):
                if not item.future.done():
                    item.future.cancel()
            self._queue.clear()
            raise
        finally:
            self._writer = None

    def _take(self) -> list[_Queued]:
        """Up to MAX_BATCH queued rows, at most one per operation (the SQL joins on it)."""
        batch: list[_Queued] = []
        rest: list[_Queued] = []
        seen: set[str] = set()
        for item in self._queue:
            if len(batch) < MAX_BATCH and item.operation_id not in seen:
                seen.add(item.operation_id)
                batch.append(item)
            else:
                rest.append(item)
        self._queue = rest
        return batch

    async def _write(self, batch: list[_Queued]) -> None:
        try:
            written = await self._statement([item.text for item in batch])
        except ROW_ERRORS as exc:
            if len(batch) > 1:  # confine the refusal to the row that caused it
                for item in batch:
                    await self._write([item])
                return
            await self._write_call_only(batch[0], exc)
            return
        except Exception as exc:
            _fail(batch, exc)
            return
        _settle(batch, written)

    async def _write_call_only(self, item: _Queued, exc: Exception) -> None:
        """The database refused this read's facts: keep its call (and the release) anyway.

        The read is never erased and the operation never stalls on it: the
        call row carries the anomaly, the raw values stay in its excerpt.
        """
        log.warning(
            "status read facts refused by the database; call kept without its observation",
            extra={"ctx": {"operation_id": item.operation_id, **db_error_context(exc)}},
        )
        fallback = _Queued(
            item.row,
            pgjson.dumps(call_only(item.row, db_error_reason(exc))),
            item.future,
        )
        try:
            written = await self._statement([fallback.text])
        except Exception as again:
            _fail([item], again)
            return
        _settle([fallback], written)

    async def _statement(self, rows: list[str]) -> set[str]:
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                return set(await record_polls(self._db, rows))
            except asyncpg.DeadlockDetectedError:
                if attempt == DEADLOCK_RETRIES:
                    raise
        raise AssertionError("unreachable")


def _settle(batch: list[_Queued], written: set[str]) -> None:
    for item in batch:
        if item.future.done():  # its step was cancelled meanwhile
            continue
        if item.operation_id in written:
            item.future.set_result(None)
        else:
            item.future.set_exception(
                LeaseLost(f"lease on {item.operation_id} lost before the status read was recorded")
            )


def _fail(batch: list[_Queued], exc: Exception) -> None:
    for item in batch:
        if not item.future.done():
            item.future.set_exception(exc)
