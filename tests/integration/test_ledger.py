"""Submitting, resubmitting, cancelling and claiming completion through the ledger."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC
from typing import Any

import pytest

from bench.harness import TestClock
from shared import ledger
from shared.ledger import Operation, RequestSpec
from shared.ledger.errors import RequestMismatch
from shared.ledger.states import LocalState
from tests.support import drive, submit

S = LocalState


async def test_submit_records_intent_before_anything_else(db: Any) -> None:
    op_id = await submit(db, ref="report-feb")
    op = await ledger.load_operation(db, op_id)
    assert op.state is S.CREATE_PENDING
    assert op.remote_job_id is None and op.create_attempts == 0
    assert op.idempotency_token.startswith("idem_") and len(op.trace_id) == 32
    assert op.request_fingerprint.startswith("sha256:")
    assert op.next_poll_at is not None  # the reconciler picks it up at once
    history = await db.fetch("SELECT actor, from_state, to_state, cause FROM history")
    # the deadlines as the submission set them, logged with it (migration 040)
    said = "submitted; create deadline {}; result deadline {}".format(
        *(
            d.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            for d in (op.create_deadline, op.result_deadline)
        )
    )
    assert [tuple(h) for h in history] == [("agent:test", None, "create_pending", said)]


async def test_a_loaded_operation_is_the_frozen_dataclass_its_constructor_makes(db: Any) -> None:
    """`_from_record` fills the object directly (the claim's hot path): same result."""
    op = await ledger.load_operation(db, await submit(db, ref="loaded"))
    values = {f.name: getattr(op, f.name) for f in dataclasses.fields(Operation)}
    assert Operation(**values) == op  # the constructor's own object, field for field
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.state = S.OBSERVING  # type: ignore[misc]
    moved = dataclasses.replace(op, poll_attempts=3)
    assert moved.poll_attempts == 3 and moved.operation_id == op.operation_id
    with pytest.raises(TypeError):
        Operation(**{**values, "_origin": None})  # still only from the database


async def test_resubmitting_the_same_request_returns_the_same_operation(db: Any) -> None:
    first = await submit(db, ref="r1", body={"range": {"start": "2025-02-01"}, "n": 1})
    again = await ledger.submit_operation(
        db,
        provider="sim",
        kind="export",
        requested_by="agent:test",
        client_reference="r1",
        request=RequestSpec("post", "/v1/jobs", {"n": 1.0, "range": {"start": "2025-02-01"}}),
    )
    assert again == ledger.Submitted(first, False)
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


async def test_resubmitting_a_changed_request_is_refused_naming_the_difference(db: Any) -> None:
    await submit(db, ref="r1", body={"range": {"start": "2025-02-01", "end": "2025-02-28"}})
    with pytest.raises(RequestMismatch) as info:
        await submit(db, ref="r1", body={"range": {"start": "2025-02-01", "end": "2025-03-31"}})
    assert "body.range.end" in str(info.value)
    assert "new client_reference" in str(info.value)
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


async def test_same_reference_from_another_caller_is_another_operation(db: Any) -> None:
    a = await submit(db, ref="shared", who="agent:a")
    b = await submit(db, ref="shared", who="agent:b", body={"other": True})
    assert a != b


async def test_each_operation_gets_its_own_token(db: Any) -> None:
    ids = [await submit(db) for _ in range(3)]
    tokens = {(await ledger.load_operation(db, i)).idempotency_token for i in ids}
    assert len(tokens) == 3


def test_an_operation_cannot_be_built_from_a_bare_payload() -> None:
    with pytest.raises(TypeError, match="only obtained from the database"):
        Operation(**{f: None for f in Operation.__dataclass_fields__ if f != "_origin"})


async def test_cancel_before_any_create_attempt_abandons(db: Any) -> None:
    op_id = await submit(db)
    state = await ledger.request_cancel(
        db, op_id, requested_by="agent:test", reason="wrong account"
    )
    assert state is S.ABANDONED
    op = await ledger.load_operation(db, op_id)
    assert op.finished_at is not None and op.cancel_reason == "wrong account"


async def test_cancel_records_intent_and_never_claims_cancelled(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    state = await ledger.request_cancel(db, op_id, requested_by="human:ann", reason="stop")
    assert state is S.CANCEL_REQUESTED
    assert await ledger.request_cancel(db, op_id, requested_by="human:bob", reason="again") is (
        S.CANCEL_REQUESTED
    )
    op = await ledger.load_operation(db, op_id)
    assert op.cancel_requested_by == "human:ann" and op.cancel_deadline is not None
    last = await db.fetchrow("SELECT actor, cause FROM history ORDER BY history_id DESC LIMIT 1")
    assert tuple(last) == ("human:ann", "cancel: stop")


async def test_a_resent_cancel_gets_its_window_once_never_added_up(
    db: Any, clock: TestClock
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    start = clock.now()
    await ledger.request_cancel(
        db, op_id, requested_by="agent:t", reason="stop", cancel_deadline_s=60.0
    )
    await clock.advance(50.0)  # held back by an outage; the first send
    await ledger.record_cancel_sent(db, op_id, fence=None)
    first = (await ledger.load_operation(db, op_id)).cancel_deadline
    assert first is not None and (first - start).total_seconds() == pytest.approx(110.0, abs=1.0)
    await ledger.record_cancel_not_sent(db, op_id, fence=None)  # it never left this host
    await clock.advance(10.0)
    await ledger.record_cancel_sent(db, op_id, fence=None)
    again = (await ledger.load_operation(db, op_id)).cancel_deadline
    # 60 s from this send, not the 110 s the first send's deadline spans
    assert again is not None and (again - start).total_seconds() == pytest.approx(120.0, abs=1.0)


async def test_cancel_of_a_finished_operation_changes_nothing(db: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.SUCCEEDED)
    assert await ledger.request_cancel(db, op_id, requested_by="a", reason="late") is S.SUCCEEDED
    assert (await ledger.load_operation(db, op_id)).cancel_requested_at is None


async def test_completion_is_claimed_exactly_once_per_consumer(db_url: str, pool: Any) -> None:
    op_id = await submit(pool)
    assert not await ledger.claim_completion(pool, op_id, "mailer")  # not succeeded yet
    async with pool.acquire() as conn:
        await drive(conn, op_id, S.SUCCEEDED)
    results = await asyncio.gather(
        *[ledger.claim_completion(pool, op_id, "mailer") for _ in range(20)]
    )
    assert results.count(True) == 1
    assert await ledger.claim_completion(pool, op_id, "billing")
