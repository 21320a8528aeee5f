"""Spec review: escalations the reconciler settles, stale cancel intents, and a cancel
while the create is uncertain.

- An escalation stayed open when a later observation settled the operation
  (cancellation_unconfirmed -> succeeded); the next escalation then rewrote that
  row in place, and `audit verify` reported tampering nobody did.
- A cancel asked while the operation made no move (needs_attention) left an intent
  that dropped every later cancel once an operator resumed the operation.
- A cancel during create_unknown re-sent the create to a provider with
  idempotency, starting the job only to cancel it, though a lookup was offered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from shared import ledger
from shared.ledger import decisions, log
from shared.ledger.log_audit import verify_log
from shared.ledger.states import TERMINAL, LocalState
from tests.harness import rig
from tests.support import as_role

S = LocalState


async def _escalations(pool: Any, op_id: str) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "SELECT escalation_id, state::text AS state, reason, resolved_at, decision_id"
        " FROM escalations WHERE operation_id = $1 ORDER BY escalation_id",
        op_id,
    )
    return [dict(r) for r in rows]


async def _verified(pool: Any) -> list[str]:
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        report = await verify_log(conn, None)
    return list(report.problems)


async def test_an_escalation_closes_when_an_observation_settles_it(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    async with rig(pool, tmp_path, clock=clock, overrides={"cancel": {"supported": False}}) as r:
        op_id = await r.submit("success", duration=2.5)
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="human:ann", reason="stop", cancel_deadline_s=0.5
            )
        assert await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED}) is S.CANCELLATION_UNCONFIRMED
        await clock.advance(301)  # the job ends; the slow read of an unconfirmed cancel is due
        assert await r.settle(op_id, set(TERMINAL), timeout=20) is S.SUCCEEDED
        (escalation,) = await _escalations(pool, op_id)
        assert escalation["state"] == "cancellation_unconfirmed"
        assert escalation["resolved_at"] is not None  # closed by the observation, not a human
        assert escalation["decision_id"] is None
        assert await _verified(pool) == []


async def test_a_second_escalation_is_a_new_row_and_the_log_verifies(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """cancellation_unconfirmed settled by a read, then result_unavailable: two rows."""
    async with rig(pool, tmp_path, clock=clock, overrides={"cancel": {"supported": False}}) as r:
        op_id = await r.submit("expiring_result", duration=2.5, result_ttl=0.0)
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="human:ann", reason="stop", cancel_deadline_s=0.5
            )
        assert await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED}) is S.CANCELLATION_UNCONFIRMED
        async with pool.acquire() as conn:
            await log.sequence_all(conn)  # the first version of the escalation is logged
        await clock.advance(301)
        end = await r.settle(op_id, {S.RESULT_UNAVAILABLE, S.SUCCEEDED, S.FAILED}, timeout=20)
        assert end is S.RESULT_UNAVAILABLE
        first, second = await _escalations(pool, op_id)
        assert (first["state"], second["state"]) == ("cancellation_unconfirmed", end.value)
        assert first["resolved_at"] is not None and second["resolved_at"] is None
        assert await _verified(pool) == []


async def test_an_agents_cancel_of_a_timed_out_operation_closes_its_escalation(
    pool: Any, tmp_path: Path
) -> None:
    """The receiver's session has no right on escalations; the move closes it all the same."""
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("never_finishes", result_deadline_s=0.6)
        assert await r.settle(op_id, {S.RESULT_TIMED_OUT}) is S.RESULT_TIMED_OUT
        async with as_role(pool, "jobwarden_receiver") as conn:
            state = await ledger.request_cancel(conn, op_id, requested_by="agent:t", reason="stop")
        assert state is S.CANCEL_REQUESTED
        (escalation,) = await _escalations(pool, op_id)
        assert escalation["resolved_at"] is not None and escalation["decision_id"] is None
        assert await _verified(pool) == []


async def test_an_escalation_from_another_escalated_state_never_rewrites_the_open_one(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("success")
        op = await ledger.load_operation(pool, op_id)
        async with pool.acquire() as conn, conn.transaction():
            await decisions.escalate(conn, op, S.CANCELLATION_UNCONFIRMED, "first")
        async with pool.acquire() as conn:
            await log.sequence_all(conn)
        async with pool.acquire() as conn, conn.transaction():
            await decisions.escalate(conn, op, S.NEEDS_ATTENTION, "second")
        first, second = await _escalations(pool, op_id)
        assert (first["state"], first["reason"]) == ("cancellation_unconfirmed", "first")
        assert (second["state"], second["reason"]) == ("needs_attention", "second")
        assert first["resolved_at"] is not None and second["resolved_at"] is None
        assert await _verified(pool) == []


async def test_an_operators_decision_still_closes_the_escalation_it_names(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("token_conflict", hang_seconds=5, duration=30)
        assert await r.settle(op_id, {S.NEEDS_ATTENTION}, timeout=20) is S.NEEDS_ATTENTION
        async with pool.acquire() as conn:
            op = await ledger.load_operation(conn, op_id)
            decided = await decisions.decide(
                conn, op, S.OBSERVING, actor="operator:ann", reason="resume"
            )
        (escalation,) = await _escalations(pool, op_id)
        assert escalation["decision_id"] == decided.decision_id
        assert escalation["resolved_at"] is not None


async def test_a_cancel_after_an_operator_resumed_the_operation_is_sent(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        # the same token answered with two job ids -> needs_attention (job id on record)
        op_id = await r.submit("token_conflict", hang_seconds=5, duration=30)
        assert await r.settle(op_id, {S.NEEDS_ATTENTION}, timeout=20) is S.NEEDS_ATTENTION
        async with as_role(pool, "jobwarden_receiver") as conn:
            first = await ledger.request_cancel(
                conn, op_id, requested_by="agent:test", reason="no longer needed"
            )
            # a second request while the operator is still to decide keeps the first
            again = await ledger.request_cancel(
                conn, op_id, requested_by="agent:other", reason="me too"
            )
        assert first is again is S.NEEDS_ATTENTION
        op = await ledger.load_operation(pool, op_id)
        assert (op.cancel_requested_by, op.cancel_reason) == ("agent:test", "no longer needed")

        async with pool.acquire() as conn:  # `jobwarden reconcile`: resume observing
            await decisions.decide(
                conn,
                op,
                S.OBSERVING,
                actor="operator:ann",
                reason="resume",
                extend_result_deadline_s=60,
            )
        assert await r.state(op_id) is S.OBSERVING

        async with as_role(pool, "jobwarden_receiver") as conn:  # the agent API's session
            second = await ledger.request_cancel(
                conn, op_id, requested_by="agent:test", reason="stop it now"
            )
        assert second is S.CANCEL_REQUESTED
        op = await ledger.load_operation(pool, op_id)
        assert (op.cancel_requested_by, op.cancel_reason) == ("agent:test", "stop it now")
        assert op.cancel_sent_at is None
        end = await r.settle(op_id, set(TERMINAL) | {S.CANCELLATION_UNCONFIRMED}, timeout=20)
        assert end is S.CANCELLED
        assert sum((await r.stats())["cancels_per_job"].values()) == 1


async def test_the_receiver_may_not_mark_a_cancel_sent(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("success", duration=30)
        await r.settle(op_id, {S.OBSERVING})
        async with as_role(pool, "jobwarden_receiver") as conn:
            await ledger.request_cancel(conn, op_id, requested_by="agent:test", reason="stop")
        with pytest.raises(asyncpg.PostgresError) as refused:
            async with as_role(pool, "jobwarden_receiver") as conn:
                await conn.execute(
                    "UPDATE operations SET cancel_sent_at = jw_now() WHERE operation_id = $1",
                    op_id,
                )
        assert refused.value.sqlstate == "JW004"


async def _calls(pool: Any, op_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT call_kind FROM provider_calls WHERE operation_id = $1 ORDER BY call_id", op_id
    )
    return [c["call_kind"] for c in rows]


async def test_a_cancel_while_the_create_is_uncertain_looks_up_instead_of_creating(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        # 503 "temporarily unavailable": create_unknown, nothing exists at the provider
        op_id = await r.submit(
            "create_5xx", duration=30, create_retry_after=1, create_deadline_s=600
        )
        assert await r.settle(op_id, {S.CREATE_UNKNOWN}) is S.CREATE_UNKNOWN
        async with pool.acquire() as conn:
            assert (
                await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="stop")
                is S.CANCEL_REQUESTED
            )
        for _ in range(3):
            await r.reconciler.run_once()
        await clock.advance(60)  # an empty lookup proves absence once the list has settled
        end = await r.settle(op_id, set(TERMINAL) | {S.NEEDS_ATTENTION}, timeout=20)
        stats = await r.stats()
        assert stats["jobs_total"] == 0, await _calls(pool, op_id)
        assert (await _calls(pool, op_id)).count("create") == 1
        assert end is S.NEEDS_ATTENTION
        op = await ledger.load_operation(pool, op_id)
        (escalation,) = await _escalations(pool, op_id)
        assert "most likely nothing to cancel" in escalation["reason"], (op, escalation)
        assert "check there before closing this" in escalation["reason"], (op, escalation)


async def test_a_cancel_while_the_create_is_uncertain_without_a_lookup_escalates(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, overrides={"lookup": {"supported": False}}) as r:
        op_id = await r.submit("create_5xx", duration=30, create_retry_after=1)
        assert await r.settle(op_id, {S.CREATE_UNKNOWN}) is S.CREATE_UNKNOWN
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="stop")
        end = await r.settle(op_id, set(TERMINAL) | {S.NEEDS_ATTENTION}, timeout=20)
        assert end is S.NEEDS_ATTENTION
        assert (await r.stats())["jobs_total"] == 0
        assert await _calls(pool, op_id) == ["create"]
        (escalation,) = await _escalations(pool, op_id)
        assert "offers no lookup" in escalation["reason"]


async def _read_once(r: Any, clock: Any, op_id: str) -> int:
    """Let the next status read fall due, run it; returns the reads on record."""
    before = await r.pool.fetchval(
        "SELECT poll_attempts FROM operations WHERE operation_id = $1", op_id
    )

    async def read() -> bool:
        after = await r.pool.fetchval(
            "SELECT poll_attempts FROM operations WHERE operation_id = $1", op_id
        )
        return bool(after > before)

    await clock.advance(600)
    await r.run_until(read)
    return int(before) + 1


async def test_one_not_found_after_good_reads_is_not_yet_a_contradiction(
    pool: Any, tmp_path: Path, clock: Any
) -> None:
    """NOT_FOUND_TOLERANCE counts misses in a row, not every read since the create."""
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=100_000, result_deadline_s=1_000_000)
        await r.settle(op_id, {S.OBSERVING})
        while await _read_once(r, clock, op_id) < 3:
            pass
        assert await r.state(op_id) is S.OBSERVING
        async with httpx.AsyncClient() as client:  # the provider loses the job
            await client.post(f"{r.sim_url}/_sim/reset")
        await _read_once(r, clock, op_id)
        assert await r.state(op_id) is S.OBSERVING  # one miss: a read racing, a replica
        await _read_once(r, clock, op_id)
        assert await r.state(op_id) is S.OBSERVING
        await _read_once(r, clock, op_id)
        assert await r.state(op_id) is S.NEEDS_ATTENTION  # three in a row
