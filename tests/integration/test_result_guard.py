"""An operation's result is a valid result of its own (migration 025), and the audit
checks the one agents are shown against the one its success cites.

Agents read result_id, result_ref and result_summary (agent_operations,
agent_failed_items): a login with the reconciler's role could point a
finished operation at another operation's result and show its agent someone
else's failed items; an owner bypassing the triggers could do the same
unseen by `audit verify`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from shared.ledger import audit
from shared.ledger.states import LocalState
from tests.harness import rig

S = LocalState
DONE = {S.SUCCEEDED, S.FAILED, S.RESULT_VALIDATION_FAILED}


async def _two_results(pool: Any, tmp_path: Path) -> tuple[str, str]:
    """A succeeded operation, and one whose result lists failed items."""
    async with rig(pool, tmp_path) as r:
        ops = (
            await r.submit("success", duration=0.05),
            await r.submit("partial", duration=0.05, total=5, failed=2),
        )
        for op in ops:
            assert await r.settle(op, DONE) is S.SUCCEEDED
    return ops


@contextlib.asynccontextmanager
async def as_reconciler(pool: Any) -> AsyncIterator[Any]:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE jobwarden_reconciler")
        yield conn


REWRITES = {
    "result_ref": "UPDATE operations SET result_ref = 'elsewhere' WHERE operation_id = $1",
    "result_summary": "UPDATE operations SET result_summary = '{\"items\": 0}'"
    " WHERE operation_id = $1",
    "another_operations_result": "UPDATE operations o SET result_id = other.result_id,"
    " result_ref = other.result_ref, result_summary = other.result_summary"
    " FROM operations other WHERE o.operation_id = $1 AND other.operation_id = $2",
    "kind": "UPDATE operations SET kind = 'import' WHERE operation_id = $1",
    "approval_ref": "UPDATE operations SET approval_ref = 'approved-by-nobody'"
    " WHERE operation_id = $1",
    "idempotency_mode": "UPDATE operations SET idempotency_mode = 'none' WHERE operation_id = $1",
}


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
async def test_the_reconciler_role_cannot_repoint_or_rewrite_a_result(
    pool: Any, tmp_path: Path, rewrite: str
) -> None:
    mine, other = await _two_results(pool, tmp_path)
    sql = REWRITES[rewrite]
    args = (mine, other) if "$2" in sql else (mine,)
    with pytest.raises(asyncpg.PostgresError) as refused:
        async with as_reconciler(pool) as conn:
            await conn.execute(sql, *args)
    assert refused.value.sqlstate == "JW005", refused.value


async def test_a_result_is_attached_only_while_the_reconciler_acts_on_the_operation(
    pool: Any, tmp_path: Path
) -> None:
    """Even a valid result of its own: a finished operation's result is settled."""
    mine, _ = await _two_results(pool, tmp_path)
    with pytest.raises(asyncpg.PostgresError, match="is settled"):
        async with as_reconciler(pool) as conn:
            await conn.execute(
                "UPDATE operations SET result_id = NULL, result_ref = NULL,"
                " result_summary = NULL WHERE operation_id = $1",
                mine,
            )


async def test_an_owner_repointing_a_result_is_caught_by_the_audit(
    pool: Any, tmp_path: Path
) -> None:
    mine, other = await _two_results(pool, tmp_path)
    async with pool.acquire() as conn:
        assert (await audit.verify(conn))[1] == []  # untampered: no false alarm
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")  # no trigger sees it
        await conn.execute(REWRITES["another_operations_result"], mine, other)
    async with pool.acquire() as conn:
        _, breaks = await audit.verify(conn)
    assert [(b.operation_id, b.problem) for b in breaks] == [
        (mine, "its result is not a valid result of its own")
    ]


async def test_an_owner_naming_another_result_of_the_same_operation_is_caught(
    pool: Any, tmp_path: Path
) -> None:
    """A second valid result of its own, but not the one its success cites."""
    mine, _ = await _two_results(pool, tmp_path)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        second = await conn.fetchval(
            "INSERT INTO results (operation_id, fetched_at, valid, content_type, size_bytes,"
            " sha256, storage_ref, items_total, items_succeeded, items_failed)"
            " SELECT operation_id, fetched_at, valid, content_type, size_bytes, sha256,"
            " storage_ref, 99, 99, 0 FROM results WHERE result_id ="
            " (SELECT result_id FROM operations WHERE operation_id = $1)"
            " RETURNING result_id",
            mine,
        )
        await conn.execute(
            "UPDATE operations SET result_id = $2 WHERE operation_id = $1", mine, second
        )
    async with pool.acquire() as conn:
        _, breaks = await audit.verify(conn, mine)
    assert [b.problem for b in breaks] == ["its result is not the one its success cites"]
