"""The status-read group commit against a real PostgreSQL.

Each test leases real operations (the reconciler's own claim query), hands
status-read rows to a `PollWriter` and checks what the database holds.
"""

from __future__ import annotations

import asyncio
import hashlib
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from reconciler.calls import Sent, status_read
from reconciler.poll_writer import PollWriter
from shared import ledger
from shared.ledger import Operation, evidence, leases
from shared.ledger.errors import LeaseLost
from shared.ledger.states import LocalState, RemoteState
from shared.providers import HttpRequest, HttpResponse, StatusFact
from tests.support import drive, submit

WORKER = "reconciler:w1"
BODY = b'{"id": "job_1", "status": "running", "progress": 40}'


class CountingPool:
    """The real pool, counting the statements sent through it.

    With `hold_first`, the first statement waits for `release` before it
    reaches the database, so a test can queue reads while it is in flight.
    """

    def __init__(self, pool: Any, *, hold_first: bool = False) -> None:
        self.pool = pool
        self.statements: list[int] = []  # rows per statement
        self.in_flight = asyncio.Event()
        self.release = asyncio.Event()
        if not hold_first:
            self.release.set()

    async def fetch(self, query: str, rows_json: str) -> Any:
        self.statements.append(rows_json.count('"operation_id"'))
        self.in_flight.set()
        await self.release.wait()
        return await self.pool.fetch(query, rows_json)


async def observing_due(db: Any, count: int, prefix: str = "pw") -> list[str]:
    """`count` observing operations, all due now."""
    ids = [await submit(db, ref=f"{prefix}-{i}") for i in range(count)]
    for op_id in ids:
        await drive(db, op_id, LocalState.OBSERVING)
    await db.execute(
        "UPDATE operations SET next_poll_at = jw_now() - interval '1 second'"
        " WHERE operation_id = ANY($1)",
        ids,
    )
    return ids


async def leased(pool: Any, count: int) -> list[Operation]:
    """`count` observing operations, claimed by us (fenced leases)."""
    await observing_due(pool, count)
    claimed = await leases.claim(pool, "w1", count, 30.0)
    assert len(claimed) == count
    return [c.op for c in claimed]


def read(
    op: Operation,
    *,
    body: bytes = BODY,
    raw_state: str = "running",
    progress_total: float | None = 100,
    release_after: float | None = 60.0,
    result_url: str | None = None,
) -> dict[str, Any]:
    """The row a status read that decides nothing produces."""
    req = HttpRequest("status", "GET", "http://sim/v1/jobs/job_1", {"Authorization": "Bearer s"})
    resp = HttpResponse(200, {"content-type": "application/json", "x-request-id": "req_1"}, body)
    fact = StatusFact(
        200,
        RemoteState.RUNNING,
        raw_state,
        progress_completed=40,
        progress_total=progress_total,
        provider_request_id="req_1",
        result_url=result_url,
    )
    sent = Sent(resp, None, 3, "00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    record = status_read(op, op.lease_fence, WORKER, req, sent, fact, call_id=None)
    return evidence.status_row(record, release_after=release_after)


async def calls_of(pool: Any, op_id: str) -> int:
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'",
            op_id,
        )
    )


async def test_concurrent_status_reads_share_one_statement(pool: Any) -> None:
    ops = await leased(pool, 10)
    counting = CountingPool(pool)
    writer = PollWriter(counting)
    await writer.record(read(ops[0]))  # a lone read waits for nobody
    await asyncio.gather(*(writer.record(read(op)) for op in ops[1:]))
    assert counting.statements == [1, 9]
    for op in ops:
        row = await pool.fetchrow(
            "SELECT lease_owner, poll_attempts, progress_completed, remote_state_raw,"
            " next_poll_at > now() + interval '50 seconds' AS later"
            " FROM operations WHERE operation_id = $1",
            op.operation_id,
        )
        assert row["lease_owner"] is None  # the lease was handed back
        assert row["later"]  # with the next appointment 60 s away
        assert row["poll_attempts"] == op.poll_attempts + 1
        assert (row["progress_completed"], row["remote_state_raw"]) == (40, "running")
        obs = await pool.fetchrow(
            "SELECT o.remote_state::text, c.status_code, c.response_size, c.request_headers,"
            " c.provider_request_id FROM observations o JOIN provider_calls c USING (call_id)"
            " WHERE o.operation_id = $1 AND o.source = 'poll'",
            op.operation_id,
        )
        assert obs["remote_state"] == "running"
        assert (obs["status_code"], obs["response_size"]) == (200, len(BODY))
        assert obs["provider_request_id"] == "req_1"
        assert obs["request_headers"]["Authorization"] == "[redacted]"
    assert writer._writer is None  # nothing left running once the queue is empty


async def test_reads_arriving_during_a_statement_go_together_in_the_next(pool: Any) -> None:
    ops = await leased(pool, 6)
    counting = CountingPool(pool, hold_first=True)
    writer = PollWriter(counting)
    first = asyncio.ensure_future(writer.record(read(ops[0])))
    await counting.in_flight.wait()
    rest = [asyncio.ensure_future(writer.record(read(op))) for op in ops[1:]]
    for _ in range(20):  # let every queued task run; the statement is still held
        await asyncio.sleep(0)
    assert not first.done()  # a step learns its read was written only after the statement
    counting.release.set()
    await asyncio.gather(first, *rest)
    assert counting.statements == [1, 5]
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1] * 6


async def test_a_lost_lease_fails_only_its_own_read(pool: Any) -> None:
    ops = await leased(pool, 3)
    lost = ops[1]
    await pool.execute(  # another worker took the row over: the fence moved on
        "UPDATE operations SET lease_fence = lease_fence + 1 WHERE operation_id = $1",
        lost.operation_id,
    )
    writer = PollWriter(pool)
    outcomes = await asyncio.gather(
        *(writer.record(read(op)) for op in ops), return_exceptions=True
    )
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], LeaseLost)
    # The late read is evidence all the same (the call happened), but it moves
    # nothing: no observation, no observed facts, the new owner's lease untouched.
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1, 1, 1]
    late = await ledger.load_operation(pool, lost.operation_id)
    assert late.lease_owner == "w1" and late.poll_attempts == lost.poll_attempts
    seen = await pool.fetchval(
        "SELECT count(*) FROM observations WHERE operation_id = $1", lost.operation_id
    )
    assert seen == 0


async def test_a_late_reads_retry_after_still_holds_the_operation_back(pool: Any) -> None:
    [op] = await leased(pool, 1)
    await pool.execute(
        "UPDATE operations SET lease_fence = lease_fence + 1 WHERE operation_id = $1",
        op.operation_id,
    )
    row = {**read(op), "not_before_seconds": 60.0}
    with pytest.raises(LeaseLost):
        await PollWriter(pool).record(row)
    held = await pool.fetchval(
        "SELECT not_before > jw_now() + interval '50 seconds' FROM operations"
        " WHERE operation_id = $1",
        op.operation_id,
    )
    assert held  # the provider said wait: the new owner waits too


async def test_an_impossible_count_is_kept_as_an_anomaly_not_refused(pool: Any) -> None:
    [op] = await leased(pool, 1)
    await PollWriter(pool).record(read(op, progress_total=2.0**70))  # beyond bigint
    row = await pool.fetchrow(
        "SELECT o.progress_total, o.progress_completed, o.anomalies, c.anomalies AS on_call"
        " FROM observations o JOIN provider_calls c USING (call_id) WHERE o.operation_id = $1",
        op.operation_id,
    )
    assert row["progress_total"] is None and row["progress_completed"] == 40
    assert row["anomalies"] == row["on_call"] == ["progress_total_too_large"]


async def test_a_row_the_database_refuses_keeps_its_call_and_spares_the_others(
    pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ops = await leased(pool, 4)
    bad = ops[2]
    writer = PollWriter(pool)
    rows = [read(op) for op in ops]
    rows[2] = {**rows[2], "remote_state": "no_such_state"}  # not a jw_remote_state value
    outcomes = await asyncio.gather(*(writer.record(r) for r in rows), return_exceptions=True)
    assert outcomes == [None] * 4  # nobody's step fails, the bad one's included
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1, 1, 1, 1]
    kept = await pool.fetchrow(
        "SELECT c.status_code, c.response_sha256, c.anomalies, o.lease_owner,"
        " (SELECT count(*) FROM observations b WHERE b.operation_id = c.operation_id) AS seen"
        " FROM provider_calls c JOIN operations o USING (operation_id)"
        " WHERE c.operation_id = $1 AND c.call_kind = 'status'",
        bad.operation_id,
    )
    assert kept["status_code"] == 200
    assert kept["response_sha256"] == hashlib.sha256(BODY).hexdigest()
    assert kept["anomalies"] == ["facts_refused:22P02"]  # SQLSTATE, never the values
    assert kept["seen"] == 0 and kept["lease_owner"] is None  # no observation; lease handed back
    logged = [r for r in caplog.records if "refused" in r.getMessage()]
    assert logged and logged[0].ctx["sqlstate"] == "22P02"  # type: ignore[attr-defined]


async def test_two_reads_of_one_operation_never_share_a_statement(pool: Any) -> None:
    [op] = await leased(pool, 1)
    counting = CountingPool(pool)
    writer = PollWriter(counting)
    first, second = await asyncio.gather(
        writer.record(read(op)), writer.record(read(op)), return_exceptions=True
    )
    assert first is None
    assert isinstance(second, LeaseLost)  # the first read already handed the lease back
    assert counting.statements == [1, 1]
    assert await calls_of(pool, op.operation_id) == 2  # both reads happened: both on record


async def test_a_late_read_completes_the_lost_row_the_next_claim_wrote(pool: Any) -> None:
    op_id = await submit(pool, ref="pw-late")
    await drive(pool, op_id, LocalState.OBSERVING)
    await pool.execute(
        "UPDATE operations SET next_poll_at = now() - interval '1 second', status_request ="
        ' \'{"method": "GET", "url": "http://sim/v1/jobs/job_1", "headers": {}}\''
        " WHERE operation_id = $1",
        op_id,
    )
    [first] = await leases.claim(pool, "w1", 1, 30.0)
    assert first.read_marked  # the claim marked this read; its worker stalls
    op = first.op
    await pool.execute(
        "UPDATE operations SET lease_expires_at = now() - interval '1 second',"
        " next_poll_at = now() - interval '1 second' WHERE operation_id = $1",
        op.operation_id,
    )
    # the next claim records the stalled read as lost and holds the row back
    # one lease: a Retry-After that read may have heard still holds
    assert await leases.claim(pool, "w2", 1, 30.0) == []
    held = await pool.fetchrow(
        "SELECT lease_owner, lease_fence, read_fence,"
        " not_before - now() > interval '29 seconds' AS held,"
        " next_poll_at >= not_before AS waits FROM operations WHERE operation_id = $1",
        op.operation_id,
    )
    assert held["lease_owner"] is None and held["read_fence"] is None
    assert held["held"] and held["waits"]
    assert held["lease_fence"] > op.lease_fence  # the stalled worker is fenced out
    writer = PollWriter(pool)
    with pytest.raises(LeaseLost):
        await writer.record(read(op))  # the stalled read's answer arrives after all
    rows = await pool.fetch(
        "SELECT fence, status_code, error_category, marked FROM provider_calls"
        " WHERE operation_id = $1 AND call_kind = 'status'",
        op.operation_id,
    )
    # one call, one row: the lost placeholder now holds the answer it was waiting for
    assert [(r["fence"], r["status_code"], r["marked"]) for r in rows] == [
        (op.lease_fence, 200, True)
    ]
    assert rows[0]["error_category"] != "lost"


async def test_provider_text_postgres_cannot_hold_is_stored_replaced(pool: Any) -> None:
    [op] = await leased(pool, 1)
    await PollWriter(pool).record(read(op, body=b'{"s": "a\x00b"}', raw_state="run\x00\ud800ing"))
    row = await pool.fetchrow(
        "SELECT o.remote_state_raw, c.response_body, c.response_size"
        " FROM observations o JOIN provider_calls c USING (call_id) WHERE o.operation_id = $1",
        op.operation_id,
    )
    assert row["remote_state_raw"] == "run\ufffd\ufffding"
    assert row["response_body"] == '{"s": "a\ufffdb"}'
    assert row["response_size"] == 12  # the size (and digest) of the bytes received


async def test_a_presigned_link_is_stored_without_its_signature(pool: Any) -> None:
    [op] = await leased(pool, 1)
    link = "https://bucket.s3.amazonaws.com/r.jsonl?X-Amz-Expires=600&X-Amz-Signature=s3cr3t"
    body = f'{{"status": "running", "result_url": "{link}"}}'.encode()
    await PollWriter(pool).record(read(op, body=body, result_url=link))
    row = await pool.fetchrow(
        "SELECT o.result_url, c.response_body, c.response_sha256"
        " FROM observations o JOIN provider_calls c USING (call_id) WHERE o.operation_id = $1",
        op.operation_id,
    )
    assert "s3cr3t" not in row["result_url"] and "s3cr3t" not in row["response_body"]
    assert row["result_url"].startswith("https://bucket.s3.amazonaws.com/r.jsonl?")
    assert row["response_sha256"] == hashlib.sha256(body).hexdigest()  # of what was received


async def test_a_step_cancelled_while_queued_leaves_the_others_and_its_read_written(
    pool: Any,
) -> None:
    ops = await leased(pool, 5)
    counting = CountingPool(pool, hold_first=True)
    writer = PollWriter(counting)
    first = asyncio.ensure_future(writer.record(read(ops[0])))
    await counting.in_flight.wait()  # the first statement is under way
    queued = [asyncio.ensure_future(writer.record(read(op))) for op in ops[1:]]
    await asyncio.sleep(0)
    queued[1].cancel()  # its step is cancelled while its row waits
    counting.release.set()
    outcomes = await asyncio.gather(first, *queued, return_exceptions=True)
    assert isinstance(outcomes[2], asyncio.CancelledError)
    assert [o for i, o in enumerate(outcomes) if i != 2] == [None] * 4
    # The row was already queued, so it is written like the others (the read
    # did happen), and its lease is handed back: nobody is left to do it.
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1] * 5
    assert (await ledger.load_operation(pool, ops[2].operation_id)).lease_owner is None
    assert writer._writer is None


class FailingPool(CountingPool):
    """The real pool, except that the statements numbered in `fail` raise `error`."""

    def __init__(self, pool: Any, error: Exception, fail: set[int]) -> None:
        super().__init__(pool)
        self.error = error
        self.fail = fail

    async def fetch(self, query: str, rows_json: str) -> Any:
        if len(self.statements) + 1 in self.fail:
            self.statements.append(rows_json.count('"operation_id"'))
            raise self.error
        return await super().fetch(query, rows_json)


async def test_a_lost_connection_fails_only_the_reads_of_its_statement(pool: Any) -> None:
    ops = await leased(pool, 4)
    failing = FailingPool(pool, ConnectionResetError("connection lost"), fail={1})
    writer = PollWriter(failing)
    first = await asyncio.gather(writer.record(read(ops[0])), return_exceptions=True)
    rest = await asyncio.gather(*(writer.record(read(op)) for op in ops[1:]))
    assert isinstance(first[0], ConnectionResetError)  # its step logs it and retries later
    assert rest == [None] * 3  # the next statement is not affected
    assert [await calls_of(pool, op.operation_id) for op in ops] == [0, 1, 1, 1]


async def test_a_deadlocked_statement_is_run_again(pool: Any) -> None:
    ops = await leased(pool, 3)
    deadlock = asyncpg.exceptions.DeadlockDetectedError("deadlock detected")
    failing = FailingPool(pool, deadlock, fail={1, 2})
    writer = PollWriter(failing)
    await asyncio.gather(*(writer.record(read(op)) for op in ops))
    assert failing.statements == [3, 3, 3]  # aborted twice, nothing of it written; then written
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1, 1, 1]


async def test_a_row_that_cannot_be_encoded_fails_only_its_own_step(pool: Any) -> None:
    ops = await leased(pool, 3)
    rows = [read(op) for op in ops]
    rows[1]["progress_percent"] = Decimal("12.5")  # e.g. from a plugin adapter
    outcomes = await asyncio.gather(
        *(PollWriter(pool).record(row) for row in rows), return_exceptions=True
    )
    assert isinstance(outcomes[1], TypeError)
    assert outcomes[0] is None and outcomes[2] is None
    assert [await calls_of(pool, op.operation_id) for op in ops] == [1, 0, 1]


async def test_a_cancelled_writer_cancels_the_steps_waiting_on_it(pool: Any) -> None:
    ops = await leased(pool, 3)
    counting = CountingPool(pool, hold_first=True)
    writer = PollWriter(counting)
    waiting = [asyncio.ensure_future(writer.record(read(op))) for op in ops]
    await counting.in_flight.wait()
    assert writer._writer is not None
    writer._writer.cancel()  # the event loop is shutting down
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)  # none hangs


async def test_reads_recorded_inside_a_decision_keep_the_lease(pool: Any) -> None:
    """Without release_after the row is an observation only: the step still holds the lease."""
    [op] = await leased(pool, 1)
    await PollWriter(pool).record(read(op, release_after=None))
    current = await ledger.load_operation(pool, op.operation_id)
    assert current.lease_owner == "w1" and current.lease_fence == op.lease_fence
    assert current.poll_attempts == op.poll_attempts + 1


@pytest.mark.parametrize("count", [1, 64, 65])
async def test_batches_are_bounded(pool: Any, count: int) -> None:
    ops = await leased(pool, count)
    counting = CountingPool(pool)
    writer = PollWriter(counting)
    await asyncio.gather(*(writer.record(read(op)) for op in ops))
    assert sum(counting.statements) == count
    assert max(counting.statements) <= 64
