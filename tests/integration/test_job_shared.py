"""Two operations must never share one remote job.

A new user's simulator restarted and handed out job ids it had given before:
two operations recorded the same job id without a word, both would have
collected its result, and one's cancel would have stopped the other's work.
Now the second is stopped for a human before it records the id, and an
operator cannot adopt an id another operation holds. Real reconciler, real
database, the provider a real HTTP server on loopback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from shared import ledger
from shared.db.connect import connect
from shared.ledger import decisions
from shared.ledger.errors import AdoptionRefused
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import runway_tasks

S = LocalState
SAME = "task_reused"


def reusing_ids() -> Starlette:
    """Every create is answered with the same task id; every task runs."""

    async def create(_request: Request) -> JSONResponse:
        return JSONResponse({"id": SAME}, status_code=202)

    async def task(request: Request) -> JSONResponse:
        return JSONResponse({"id": request.path_params["job_id"], "status": "RUNNING"})

    return Starlette(
        routes=[
            Route("/v1/image_to_video", create, methods=["POST"]),
            Route("/v1/tasks/{job_id}", task, methods=["GET"]),
        ]
    )


async def test_a_job_id_another_operation_holds_is_not_recorded_twice(
    pool: Any, tmp_path: Path
) -> None:
    described = runway_tasks(read_first=False)
    async with preset_rig(
        pool, tmp_path, reusing_ids(), preset=None, name="runway", env={}, overrides=described
    ) as r:
        first = await r.submit({"promptImage": "https://x.example/a.png"})
        assert await r.settle(first, {S.ACCEPTED, S.OBSERVING}) in {S.ACCEPTED, S.OBSERVING}
        second = await r.submit({"promptImage": "https://x.example/b.png"})
        assert await r.settle(second, {S.NEEDS_ATTENTION, S.OBSERVING}) is S.NEEDS_ATTENTION
        assert (await r.op(second)).remote_job_id is None
        reason = (await r.escalation(second))["reason"]
        assert f"names job {SAME}, which is already operation {first}'s" in reason
        assert (await r.op(first)).remote_job_id == SAME  # the first keeps its job
        # nor may an operator adopt it for the second
        op = await ledger.load_operation(pool, second)
        async with pool.acquire() as conn:
            with pytest.raises(AdoptionRefused, match=f"already operation {first}'s"):
                await decisions.adopt_job(
                    conn, op, SAME, status_request=None, actor="operator:t", reason="found it"
                )
        assert (await r.op(second)).remote_job_id is None


async def test_an_operator_session_sets_a_job_id_only_with_the_decision_adopting_it(
    db: Any, db_url: str
) -> None:
    """Migration 031 let the attaching trigger write evidence for any session;
    a bare UPDATE of remote_job_id by the operator role, with no decision,
    then recorded the id and attached stored events as observations."""
    sub = await ledger.submit_operation(
        db,
        provider="runway",
        kind="video",
        request=ledger.RequestSpec("POST", "/v1/image_to_video", {"a": 1}),
        requested_by="agent:t",
    )
    sep = "&" if "?" in db_url else "?"
    operator = await connect(f"{db_url}{sep}options=-crole%3Djobwarden_operator")
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="adopts it"):
            await operator.execute(
                "UPDATE operations SET remote_job_id = 'job-X' WHERE operation_id = $1",
                sub.operation_id,
            )
        async with operator.transaction():  # a decision naming another job is not enough
            await ledger.record_decision(
                operator,
                sub.operation_id,
                actor="operator:t",
                decision="needs_attention -> observing, adopting job job-Y",
                reason="a test",
            )
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await operator.execute(
                    "UPDATE operations SET remote_job_id = 'job-X' WHERE operation_id = $1",
                    sub.operation_id,
                )
    finally:
        await operator.close()
    assert (
        await db.fetchval(
            "SELECT remote_job_id FROM operations WHERE operation_id = $1", sub.operation_id
        )
        is None
    )
