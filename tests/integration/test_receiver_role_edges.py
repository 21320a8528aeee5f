"""The receiver's role appends submissions and cancels to history, nothing else
(migration 026), and cannot mark a status read for jw_record_lost_read to record.

Before, its INSERT on history let it append any edge the state machine allows
without evidence, under any actor name (create_pending -> needs_attention as
"reconciler:w1"), and its UPDATE of read_fence let it set a mark and have a
provider call recorded that nobody made.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from shared import ledger
from shared.ledger.errors import OperatorOnly
from shared.ledger.states import LocalState
from tests.support import as_role

S = LocalState


async def _submitted(db: Any) -> str:
    sub = await ledger.submit_operation(
        db,
        provider="sim",
        kind="export",
        request=ledger.RequestSpec("POST", "/v1/jobs", {"script": "success"}),
        requested_by="agent:test",
    )
    return sub.operation_id


@pytest.mark.parametrize(
    ("to_state", "actor"),
    [(S.NEEDS_ATTENTION, "reconciler:w1"), (S.NEEDS_ATTENTION, "agent:test")],
)
async def test_the_receiver_may_not_append_other_transitions(
    pool: Any, to_state: LocalState, actor: str
) -> None:
    async with as_role(pool, "jobwarden_receiver") as conn:
        op = await _submitted(conn)  # a submission is its own to append
    with pytest.raises(OperatorOnly, match="submissions and cancels only"):
        async with as_role(pool, "jobwarden_receiver") as conn:
            await ledger.transition(conn, op, S.CREATE_PENDING, to_state, actor=actor, cause="x")
    assert await pool.fetchval("SELECT state FROM operations WHERE operation_id = $1", op) == (
        S.CREATE_PENDING.value
    )


async def test_the_receiver_still_submits_and_cancels(pool: Any) -> None:
    async with as_role(pool, "jobwarden_receiver") as conn:
        never_sent = await _submitted(conn)
        sent = await _submitted(conn)
    await pool.execute("UPDATE operations SET create_attempts = 1 WHERE operation_id = $1", sent)
    async with as_role(pool, "jobwarden_receiver") as conn:
        assert (
            await ledger.request_cancel(conn, never_sent, requested_by="agent:test", reason="r")
            is S.ABANDONED
        )
        assert (
            await ledger.request_cancel(conn, sent, requested_by="agent:test", reason="r")
            is S.CANCEL_REQUESTED
        )


async def test_the_receiver_may_not_mark_a_read(pool: Any) -> None:
    async with as_role(pool, "jobwarden_receiver") as conn:
        op = await _submitted(conn)
    with pytest.raises(asyncpg.PostgresError) as refused:
        async with as_role(pool, "jobwarden_receiver") as conn:
            await conn.execute("UPDATE operations SET read_fence = 7 WHERE operation_id = $1", op)
    assert refused.value.sqlstate == "JW005", refused.value
    # the reconciler's claim marks reads: its role is not bound
    async with as_role(pool, "jobwarden_reconciler") as conn:
        await conn.execute("UPDATE operations SET read_fence = 7 WHERE operation_id = $1", op)


@pytest.mark.parametrize(
    "change",
    [
        "next_poll_at = jw_now() + interval '30 days'",
        "follow_up = NULL",
        "cancel_deadline = jw_now() + interval '30 days'",
    ],
)
async def test_the_receiver_may_not_push_a_look_away_or_rewrite_a_schedule(
    pool: Any, change: str
) -> None:
    """A leaked receiver login stalled an operation for a month (operator review)."""
    async with as_role(pool, "jobwarden_receiver") as conn:
        op = await _submitted(conn)
    await pool.execute(
        "UPDATE operations SET create_attempts = 1, follow_up = 'cross_check'"
        " WHERE operation_id = $1",
        op,
    )
    async with as_role(pool, "jobwarden_receiver") as conn:
        await ledger.request_cancel(conn, op, requested_by="agent:test", reason="r")
    before = await pool.fetchrow("SELECT * FROM operations WHERE operation_id = $1", op)
    with pytest.raises(asyncpg.PostgresError) as refused:
        async with as_role(pool, "jobwarden_receiver") as conn:
            await conn.execute(f"UPDATE operations SET {change} WHERE operation_id = $1", op)
    assert refused.value.sqlstate == "JW004"
    after = await pool.fetchrow("SELECT * FROM operations WHERE operation_id = $1", op)
    assert dict(after) == dict(before)


async def test_the_receiver_still_brings_a_look_nearer(pool: Any) -> None:
    async with as_role(pool, "jobwarden_receiver") as conn:
        op = await _submitted(conn)
    await pool.execute(
        "UPDATE operations SET next_poll_at = jw_now() + interval '1 hour' WHERE operation_id = $1",
        op,
    )
    async with as_role(pool, "jobwarden_receiver") as conn:
        await conn.execute(
            "UPDATE operations SET next_poll_at = jw_now() WHERE operation_id = $1", op
        )
