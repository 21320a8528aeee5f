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
from tests.support import drive

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


async def test_an_operator_session_sets_a_job_id_only_as_an_adoption_would(
    db: Any, db_url: str
) -> None:
    """Migration 031 let the attaching trigger write evidence for any session;
    032 then asked for a decision naming the job, which the operator role can
    write itself. 033: a bare UPDATE of remote_job_id by the operator role also
    needs what an adoption checks: the operation stopped in needs_attention,
    the session's latest decision adopting this job for it, no other holder."""
    taken = await _operation(db, "taken")
    await db.execute(
        "UPDATE operations SET remote_job_id = 'job-S' WHERE operation_id = $1", taken
    )  # as the owner, as the reconciler records one
    pending = await _operation(db, "pending")
    stopped = await _operation(db, "stopped")
    await drive(db, stopped, S.NEEDS_ATTENTION)
    update = "UPDATE operations SET remote_job_id = $2 WHERE operation_id = $1"
    sep = "&" if "?" in db_url else "?"
    operator = await connect(f"{db_url}{sep}options=-crole%3Djobwarden_operator")
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="stopped in needs_attention"):
            await operator.execute(update, pending, "job-X")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="adopts it"):
            await operator.execute(update, stopped, "job-X")  # no decision
        for named, refusal in (("job-Y", "adopts it"), ("job-S", f"already operation {taken}")):
            async with operator.transaction():
                await _decide(operator, stopped, named)
                with pytest.raises(asyncpg.InsufficientPrivilegeError, match=refusal):
                    await operator.execute(update, stopped, "job-X" if named == "job-Y" else named)
        async with operator.transaction(), operator.transaction():  # a savepoint: still allowed
            await _decide(operator, stopped, "job-Z")
            await operator.execute(update, stopped, "job-Z")
    finally:
        await operator.close()
    rows = await db.fetch(
        "SELECT operation_id, remote_job_id FROM operations WHERE operation_id = ANY($1)",
        [pending, stopped],
    )
    assert {r["operation_id"]: r["remote_job_id"] for r in rows} == {
        pending: None,
        stopped: "job-Z",
    }


async def _operation(db: Any, name: str) -> str:
    sub = await ledger.submit_operation(
        db,
        provider="runway",
        kind="video",
        request=ledger.RequestSpec("POST", "/v1/image_to_video", {"n": name}),
        requested_by="agent:t",
    )
    return sub.operation_id


async def _decide(conn: Any, operation_id: str, job_id: str) -> None:
    await ledger.record_decision(
        conn,
        operation_id,
        actor="operator:t",
        decision=f"needs_attention -> observing, adopting job {job_id}",
        reason="a test",
    )
