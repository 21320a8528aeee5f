"""The agent views: done/outcome/message per state, and the agent role's reach."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from shared import ledger
from shared.db.queries import q
from shared.ledger import decisions
from shared.ledger.states import ESCALATED, TERMINAL, LocalState
from tests.integration.agent_support import fail_remotely, finish_with_result
from tests.support import drive, submit

S = LocalState

EXPECTED_OUTCOME: dict[LocalState, str | None] = {
    S.CREATE_PENDING: None,
    S.CREATE_UNKNOWN: None,
    S.ACCEPTED: None,
    S.OBSERVING: None,
    S.RESULT_COLLECTING: None,
    S.CANCEL_REQUESTED: None,
    S.CANCELLING: None,
    S.SUCCEEDED: "succeeded",
    S.FAILED: "failed",
    S.CANCELLED: "cancelled",
    S.ABANDONED: "cancelled",
    S.RESULT_TIMED_OUT: "timed_out",
    S.NEEDS_ATTENTION: "needs_attention",
    S.CANCELLATION_UNCONFIRMED: "needs_attention",
    S.RESULT_UNAVAILABLE: "needs_attention",
    S.RESULT_VALIDATION_FAILED: "needs_attention",
}

AGENT_COLUMNS = {
    "operation_id", "provider", "kind", "client_reference", "requested_by", "state",
    "remote_state", "remote_job_id", "done", "final", "outcome", "message",
    "poll_after_seconds", "progress_completed", "progress_total", "progress_percent",
    "result_ref", "result", "items_total", "items_succeeded", "items_failed", "errors_ref",
    "error", "cancel_requested_at", "result_deadline", "created_at", "updated_at",
    "finished_at",
}  # fmt: skip


async def view_row(db: Any, op_id: str) -> Any:
    return await db.fetchrow(q("api_operation"), op_id, None)


async def at_state(db: Any, state: LocalState) -> str:
    op_id = await submit(db)
    await drive(db, op_id, state)
    return op_id


def test_every_state_has_an_expected_outcome() -> None:
    assert set(EXPECTED_OUTCOME) == set(LocalState)


@pytest.mark.parametrize("state", list(LocalState), ids=lambda s: s.value)
async def test_outcome_done_and_final_follow_the_state(db: Any, state: LocalState) -> None:
    row = await view_row(db, await at_state(db, state))
    assert row["outcome"] == EXPECTED_OUTCOME[state]
    assert row["done"] is (EXPECTED_OUTCOME[state] is not None)
    assert row["final"] is (state in TERMINAL)
    assert row["message"]  # every state says something in words
    assert (row["poll_after_seconds"] is None) is row["done"]
    if state is not S.SUCCEEDED:
        assert "success" not in row["message"].lower().replace("do not report success", "")
        assert row["result"] is None and row["result_ref"] is None


@pytest.mark.parametrize(
    "state",
    [S.CREATE_PENDING, S.CREATE_UNKNOWN, S.ACCEPTED, S.OBSERVING],
    ids=lambda s: s.value,
)
async def test_running_says_started_and_not_complete(db: Any, state: LocalState) -> None:
    row = await view_row(db, await at_state(db, state))
    assert row["message"].startswith("STARTED and NOT complete")
    assert "Do not report success" in row["message"]
    n = row["poll_after_seconds"]
    assert f"Check again after {n} second{'' if n == 1 else 's'}." in row["message"]


async def test_observing_names_the_job_and_progress(db: Any) -> None:
    op_id = await at_state(db, S.OBSERVING)
    await db.execute(
        "UPDATE operations SET progress_completed = 45, progress_total = 100,"
        " next_poll_at = now() + interval '30 seconds' WHERE operation_id = $1",
        op_id,
    )
    row = await view_row(db, op_id)
    assert row["progress_percent"] == 45
    assert f"(job {row['remote_job_id']}), 45% done." in row["message"]
    assert 30 <= row["poll_after_seconds"] <= 32  # one second after the next read


async def test_poll_after_is_short_while_a_worker_holds_the_row(db: Any) -> None:
    op_id = await at_state(db, S.OBSERVING)
    await db.execute(
        "UPDATE operations SET lease_owner = 'w', lease_expires_at = now() + interval '60 s',"
        " next_poll_at = now() + interval '60 s', poll_after_seconds = NULL"
        " WHERE operation_id = $1",
        op_id,
    )
    assert (await view_row(db, op_id))["poll_after_seconds"] == 5


async def test_plain_success_carries_the_result(db: Any) -> None:
    op_id = await submit(db)
    await finish_with_result(db, op_id, total=20, inline={"url": "https://cdn/x.csv"})
    row = await view_row(db, op_id)
    assert (row["outcome"], row["done"], row["final"]) == ("succeeded", True, True)
    assert row["message"] == (
        "Finished successfully: all 20 items succeeded. The result is verified and ready."
    )
    assert row["result"] == {"url": "https://cdn/x.csv"}
    assert row["result_ref"] == "file:/results/x"
    assert row["errors_ref"] is None and row["error"] is None


async def test_partial_success_is_completed_with_errors(db: Any) -> None:
    op_id = await submit(db)
    failures = [(f"row-{i:05d}", "invalid_email", f"row {i}: bad email") for i in range(140)]
    await finish_with_result(db, op_id, total=20000, failed_items=failures)
    row = await view_row(db, op_id)
    assert (row["outcome"], row["done"]) == ("completed_with_errors", True)
    assert row["message"] == (
        "Finished: 140 of 20000 items failed and were not written. "
        "Review errors before reporting success."
    )
    assert (row["items_total"], row["items_succeeded"], row["items_failed"]) == (20000, 19860, 140)
    assert row["errors_ref"] == f"/v1/operations/{op_id}/failed-items"
    items = await db.fetch(
        "SELECT item_key, code FROM agent_failed_items WHERE operation_id = $1 ORDER BY item_key",
        op_id,
    )
    assert len(items) == 140 and tuple(items[0]) == ("row-00000", "invalid_email")


async def test_remote_partial_success_without_counts_is_still_with_errors(db: Any) -> None:
    op_id = await submit(db)
    await finish_with_result(db, op_id)
    await db.execute(
        "UPDATE operations SET remote_state = 'partially_succeeded' WHERE operation_id = $1",
        op_id,
    )
    row = await view_row(db, op_id)
    assert row["outcome"] == "completed_with_errors"
    assert "Review errors before reporting success." in row["message"]


async def test_failure_says_why_in_the_providers_words(db: Any) -> None:
    op_id = await submit(db)
    await fail_remotely(db, op_id, "quota_exceeded", "Monthly export quota exceeded")
    row = await view_row(db, op_id)
    assert row["outcome"] == "failed"
    assert row["message"] == "FAILED: Monthly export quota exceeded. Do not report success."
    assert row["error"] == {"code": "quota_exceeded", "message": "Monthly export quota exceeded"}


async def test_timed_out_keeps_the_job_id_and_says_it_may_run(db: Any) -> None:
    op_id = await at_state(db, S.RESULT_TIMED_OUT)
    row = await view_row(db, op_id)
    assert row["message"].startswith(
        "Stopped waiting after the deadline; the remote job may still be running "
        f"(job {row['remote_job_id']}). Do not report success"
    )
    assert row["error"]["code"] == "result_timed_out"


async def test_cancel_requested_is_not_cancelled(db: Any) -> None:
    op_id = await at_state(db, S.OBSERVING)
    await ledger.request_cancel(db, op_id, requested_by="agent:test", reason="wrong month")
    row = await view_row(db, op_id)
    assert row["state"] == "cancel_requested" and row["outcome"] is None
    assert row["message"].startswith("Cancellation requested, NOT yet confirmed by the provider")
    assert row["cancel_requested_at"] is not None


@pytest.mark.parametrize("state", sorted(ESCALATED - {S.RESULT_TIMED_OUT}), ids=str)
async def test_escalations_name_the_reason_and_forbid_success(db: Any, state: LocalState) -> None:
    op_id = await at_state(db, state)
    op = await ledger.load_operation(db, op_id)
    await decisions.escalate(db, op, state, "same token, different job id")
    row = await view_row(db, op_id)
    assert row["outcome"] == "needs_attention"
    assert "Do not report" in row["message"]
    if state is not S.CANCELLATION_UNCONFIRMED:  # its message says why on its own
        assert "same token, different job id" in row["message"]
    assert row["error"] == {"code": state.value, "message": "same token, different job id"}


async def test_the_views_hide_everything_sensitive(db: Any) -> None:
    columns = {
        r["column_name"]
        for r in await db.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = $1",
            "agent_operations",
        )
    }
    assert columns == AGENT_COLUMNS
    failed_columns = await db.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = $1"
        " ORDER BY ordinal_position",
        "agent_failed_items",
    )
    assert [r[0] for r in failed_columns] == ["operation_id", "item_key", "code", "message"]


async def test_the_agent_role_reads_the_views(db: Any) -> None:
    # An agent session sees its own operations: those of `agent:<its login>`.
    op_id = await submit(db, who="agent:" + await db.fetchval("SELECT session_user"))
    async with db.transaction():
        await db.execute("SET LOCAL ROLE jobwarden_agent")
        row = await db.fetchrow("SELECT * FROM agent_operations WHERE operation_id = $1", op_id)
        assert row["state"] == "create_pending"
        assert await db.fetch("SELECT * FROM agent_failed_items") == []


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM operations",
        "SELECT * FROM history",
        "SELECT * FROM provider_calls",
        "SELECT * FROM results",
        "SELECT * FROM api_tokens",
        "SELECT * FROM webhook_events",
        "UPDATE operations SET kind = 'x'",
        "INSERT INTO completion_claims VALUES ('op_x', 'me')",
        "SELECT jw_request_wake('op_x')",
    ],
)
async def test_the_agent_role_reaches_nothing_else(db: Any, statement: str) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with db.transaction():
            await db.execute("SET LOCAL ROLE jobwarden_agent")
            await db.execute(statement)
