"""Two operations must never share one remote job.

A new user's simulator restarted and handed out job ids it had given before:
two operations recorded the same job id without a word, both would have
collected its result, and one's cancel would have stopped the other's work.
Now the second is stopped for a human before it records the id, and an
operator cannot adopt an id another operation holds. Real reconciler, real
database, the provider a real HTTP server on loopback.
"""

from __future__ import annotations

import asyncio
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
from shared.ledger.errors import AdoptionRefused, JobShared
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import runway_tasks
from tests.support import drive

S = LocalState
SAME = "task_reused"


def reusing_ids(*, sync_for: str | None = None) -> Starlette:
    """Every create is answered with the same task id; every task runs. A create
    whose promptImage is `sync_for` is answered at once, with the task's output."""

    async def create(request: Request) -> JSONResponse:
        if sync_for is not None and (await request.json())["promptImage"] == sync_for:
            return JSONResponse({"id": SAME, "output": {"video": "v.mp4"}}, status_code=200)
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


async def test_a_synchronous_answer_naming_a_held_job_keeps_its_result_not_the_id(
    pool: Any, tmp_path: Path
) -> None:
    """A create answered with its result at once names a job id too, and before
    035 it was recorded unchecked: now the index refuses the id (in a savepoint
    of the recording transaction), and the result, delivered once, is kept all
    the same: nothing is read or cancelled after a synchronous result, and
    dropping it (as a first version did, for a human) would lose it."""
    described = runway_tasks(read_first=False)
    described["create"] |= {"sync_result_statuses": [200], "sync_result": "/output"}
    sync = "https://x.example/sync.png"
    async with preset_rig(
        pool,
        tmp_path,
        reusing_ids(sync_for=sync),
        preset=None,
        name="runway",
        env={},
        overrides=described,
    ) as r:
        first = await r.submit({"promptImage": "https://x.example/a.png"})
        assert await r.settle(first, {S.ACCEPTED, S.OBSERVING}) in {S.ACCEPTED, S.OBSERVING}
        second = await r.submit({"promptImage": sync})
        assert await r.settle(second, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.SUCCEEDED
        op = await r.op(second)
        assert (op.remote_job_id, op.create_mode) == (None, "sync")
        assert op.result_id is not None
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'result_collecting'",
            second,
        )
        assert f"its job id {SAME} is another operation's (ids reused?): not recorded" in cause
        assert (await r.op(first)).remote_job_id == SAME


@pytest.mark.parametrize("first_ends", ["commit", "rollback"])
async def test_two_connections_recording_one_job_at_once_leave_it_one_holder(
    pool: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_ends: str
) -> None:
    """One job recorded for two operations at once, on two connections: the
    first through the ledger as any writer records one (a synchronous create's
    answer took no lock before 035), its transaction still open when the
    reconciler's recording for the second leaves. The database decides: the
    first committed, it keeps the job and the second stops for a human naming
    it; the first rolled back, the second holds the job. Before 035 the
    second's check could not see the first's uncommitted row: both recorded it.
    No sleep orders them: the second's recording is announced (an event) just
    before its UPDATE is sent, and only then does the first end."""
    described = runway_tasks(read_first=False)
    async with preset_rig(
        pool, tmp_path, reusing_ids(), preset=None, name="runway", env={}, overrides=described
    ) as r:
        first = await r.submit({"promptImage": "https://x.example/a.png"})
        await drive(pool, first, S.NEEDS_ATTENTION)  # stopped: not the reconciler's to claim
        second = await r.submit({"promptImage": "https://x.example/b.png"})
        record = ledger.record_remote_job
        recording = asyncio.Event()

        async def announced(db: Any, operation_id: str, *args: Any, **kwargs: Any) -> None:
            if operation_id == second:
                recording.set()
            await record(db, operation_id, *args, **kwargs)

        monkeypatch.setattr(ledger, "record_remote_job", announced)
        writer = await connect(db_url)
        try:
            open_tx = writer.transaction()
            await open_tx.start()
            await record(writer, first, SAME, create_mode="async")
            run = asyncio.ensure_future(r.reconciler.run_once())
            announcing = asyncio.ensure_future(recording.wait())
            await asyncio.wait({run, announcing}, return_when=asyncio.FIRST_COMPLETED)
            announcing.cancel()
            assert recording.is_set(), "the reconciler never recorded the second's job"
            await (open_tx.commit() if first_ends == "commit" else open_tx.rollback())
            await run
        finally:
            await writer.close()
        holders = await pool.fetch(
            "SELECT operation_id FROM operations WHERE provider = 'runway' AND remote_job_id = $1",
            SAME,
        )
        if first_ends == "commit":
            assert [h["operation_id"] for h in holders] == [first]
            assert await r.state(second) is S.NEEDS_ATTENTION
            reason = (await r.escalation(second))["reason"]
            assert f"names job {SAME}, which is already operation {first}'s" in reason
        else:
            assert [h["operation_id"] for h in holders] == [second]
            assert await r.state(second) in {S.ACCEPTED, S.OBSERVING}


async def test_the_database_refuses_a_second_holder_whoever_writes_it(db: Any, db_url: str) -> None:
    """035's unique index: not the owner (a superuser here), not the reconciler's
    role, may give a job to a second operation of its provider by a bare UPDATE;
    the ledger names the refusal (JobShared). Another provider's job of the same
    id is another job."""
    taken, other = [await _operation(db, name) for name in ("taken", "other")]
    elsewhere = await _operation(db, "elsewhere", provider="sim")
    update = "UPDATE operations SET remote_job_id = $2 WHERE operation_id = $1"
    await db.execute(update, taken, "job-S")
    with pytest.raises(asyncpg.UniqueViolationError) as refused:
        await db.execute(update, other, "job-S")
    assert refused.value.constraint_name == "operations_one_per_job"
    sep = "&" if "?" in db_url else "?"
    reconciler = await connect(f"{db_url}{sep}options=-crole%3Djobwarden_reconciler")
    try:
        with pytest.raises(asyncpg.UniqueViolationError, match="operations_one_per_job"):
            await reconciler.execute(update, other, "job-S")
        with pytest.raises(JobShared, match="job job-S is already another operation's"):
            await ledger.record_remote_job(reconciler, other, "job-S", create_mode="async")
        await ledger.record_remote_job(reconciler, other, "job-T", create_mode="async")
    finally:
        await reconciler.close()
    await db.execute(update, elsewhere, "job-S")
    rows = await db.fetch(
        "SELECT operation_id, provider, remote_job_id FROM operations ORDER BY operation_id"
    )
    assert {r["operation_id"]: (r["provider"], r["remote_job_id"]) for r in rows} == {
        taken: ("runway", "job-S"),
        other: ("runway", "job-T"),
        elsewhere: ("sim", "job-S"),
    }


async def test_an_adoption_of_a_held_job_is_refused_with_nothing_written(
    db: Any, db_url: str
) -> None:
    """The index refuses the adoption at its recording, after its decision and,
    from create_unknown, the stop in needs_attention: all of it is rolled back,
    and the operator (their own role) is told who holds the job."""
    taken = await _operation(db, "taken")
    await ledger.record_remote_job(db, taken, "job-S", create_mode="async")
    uncertain = await _operation(db, "uncertain")
    await drive(db, uncertain, S.CREATE_UNKNOWN)
    before = await db.fetch("SELECT * FROM history WHERE operation_id = $1", uncertain)
    sep = "&" if "?" in db_url else "?"
    operator = await connect(f"{db_url}{sep}options=-crole%3Djobwarden_operator")
    try:
        op = await ledger.load_operation(operator, uncertain)
        with pytest.raises(AdoptionRefused, match=f"'job-S' is already operation {taken}'s"):
            await decisions.adopt_job(
                operator, op, "job-S", status_request=None, actor="operator:t", reason="mine"
            )
    finally:
        await operator.close()
    op = await ledger.load_operation(db, uncertain)
    assert (op.state, op.remote_job_id) == (S.CREATE_UNKNOWN, None)
    assert await db.fetch("SELECT * FROM history WHERE operation_id = $1", uncertain) == before
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    # a decision was written (its number taken), then undone with the rest
    sequence = await db.fetchval("SELECT pg_get_serial_sequence('decisions', 'decision_id')")
    assert await db.fetchval(f"SELECT is_called FROM {sequence}")


async def test_an_operator_session_sets_a_job_id_only_as_an_adoption_would(
    db: Any, db_url: str
) -> None:
    """Migration 031 let the attaching trigger write evidence for any session;
    032 then asked for a decision naming the job, which the operator role can
    write itself. 033: a bare UPDATE of remote_job_id by the operator role also
    needs what an adoption checks: the operation stopped in needs_attention,
    the session's latest decision adopting this job for it, no other holder
    (035: that one is the unique index's, refusing every session)."""
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
        refused: list[tuple[str, type[Exception], str]] = [
            ("job-Y", asyncpg.InsufficientPrivilegeError, "adopts it"),
            ("job-S", asyncpg.UniqueViolationError, "operations_one_per_job"),  # taken's job
        ]
        for named, error, refusal in refused:
            async with operator.transaction():
                await _decide(operator, stopped, named)
                with pytest.raises(error, match=refusal):
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


async def _operation(db: Any, name: str, provider: str = "runway") -> str:
    sub = await ledger.submit_operation(
        db,
        provider=provider,
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
