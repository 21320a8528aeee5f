"""An operator adopts a job id found at the provider (`resolve --decision observing --job-id`).

Found by a user of Salesforce Bulk API 2.0, which has no idempotency key and
no lookup: a create whose answer was lost goes to needs_attention (the job may
exist, nobody can find it automatically). The operator found the job in the
provider's console and could not attach it: `--decision observing` was refused
by the database (no job on record), `accepted` is no operator move, and the
job's result was lost to the agent. Real PostgreSQL, the real reconciler and
CLI (as the operator role), the provider a real HTTP server on loopback.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from shared import ledger
from shared.ledger import log
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.shapes import BulkQueryFixture, bulk_query
from tests.integration.test_receiver_support import delivery, running_receiver, stored_events
from tests.support import drive, jobwarden, submit

S = LocalState
ENDS = {S.SUCCEEDED, S.FAILED, S.NEEDS_ATTENTION, S.RESULT_UNAVAILABLE, S.RESULT_VALIDATION_FAILED}
REASON = "found in the provider's console"


def _toml(value: Any) -> str:
    """A JSON-shaped value as TOML (inline tables; enough for a provider description)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def configure(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    db_url: str,
    providers: dict[str, dict[str, Any]],
) -> None:
    """The CLI's environment: the providers as a user configures them, the operator role."""
    config = tmp_path / "jobwarden.toml"
    config.write_text(
        "".join(
            f"[providers.{name}]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items())
            for name, table in providers.items()
        )
    )
    monkeypatch.chdir(tmp_path)
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    monkeypatch.setenv("JW_CONFIG", str(config))
    monkeypatch.setenv("USER", "dana")


def sfbulk(url: str) -> dict[str, dict[str, Any]]:
    return {"sfbulk": {"base_url": url, **bulk_query()}}


SIM = {"sim": {"preset": "simulator"}}


async def adopt(op_id: str, job_id: str, *extra: str) -> int:
    return await jobwarden(
        "resolve", op_id, "--decision", "observing", "--job-id", job_id, "--reason", REASON, *extra
    )


async def written(db: Any, op_id: str) -> tuple[Any, ...]:
    """What a refused adoption must leave as it was."""
    return (
        await db.fetchval("SELECT count(*) FROM history WHERE operation_id = $1", op_id),
        await db.fetchval("SELECT count(*) FROM decisions WHERE operation_id = $1", op_id),
        await db.fetchval("SELECT count(*) FROM observations WHERE operation_id = $1", op_id),
        await db.fetchrow(
            "SELECT state::text, remote_job_id, status_request, result_deadline"
            " FROM operations WHERE operation_id = $1",
            op_id,
        ),
    )


async def latest_escalation(db: Any, op_id: str) -> Any:
    return await db.fetchrow(
        "SELECT reason FROM escalations WHERE operation_id = $1 ORDER BY escalation_id DESC"
        " LIMIT 1",
        op_id,
    )


# ------------------------------------------------------------------ end to end


async def test_a_lost_create_at_a_provider_that_cannot_deduplicate_is_adopted_and_succeeds(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    clock: TestClock,
) -> None:
    fx = BulkQueryFixture(page_size=10, lose_first_create=True)
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="sfbulk",
        env={},
        overrides=bulk_query(),
        clock=clock,
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"}, result_deadline_s=3.0)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        (job,) = fx.registry.jobs.values()  # the lost create made it; nobody knows its id
        assert (await r.op(op_id)).remote_job_id is None
        configure(monkeypatch, tmp_path, db_url, sfbulk(r.url))
        # the defect: observing without the job id is refused, and now says what to do
        assert await jobwarden("resolve", op_id, "--decision", "observing", "--reason", REASON) == 1
        err = capsys.readouterr().err
        assert "no remote job id on record" in err and "--job-id" in err
        # the result deadline passes while the operator looks for the job
        await clock.advance(4.0)
        assert (await r.op(op_id)).result_deadline < await ledger.clock_now(pool)
        assert await adopt(op_id, job.job_id, "--json") == 0
        answer = json.loads(capsys.readouterr().out)
        assert (answer["from"], answer["to"], answer["remote_job_id"]) == (
            "needs_attention",
            "observing",
            job.job_id,
        )
        op = await r.op(op_id)
        assert op.remote_job_id == job.job_id and op.create_mode == "async"
        # as `reconcile` does: a passed result deadline is pushed an hour on
        assert op.result_deadline - await ledger.clock_now(pool) > timedelta(minutes=59)
        # the status read a worker will send, built by the adapter as the create step does
        assert op.status_request["method"] == "GET"
        assert op.status_request["url"] == f"{r.url}/jobs/query/{job.job_id}"
        decision = await pool.fetchrow(
            "SELECT * FROM decisions WHERE decision_id = $1", answer["decision_id"]
        )
        assert job.job_id in decision["decision"] and decision["reason"] == REASON
        assert decision["actor"] == "operator:dana"
        move = await pool.fetchrow(
            "SELECT * FROM history WHERE operation_id = $1 AND to_state = 'observing'", op_id
        )
        assert move["remote_job_id"] == job.job_id
        assert (move["evidence_kind"], move["evidence_id"]) == ("decision", decision["decision_id"])
        assert job.job_id in move["cause"]
        assert (await latest_escalation(pool, op_id)) is not None
        assert await pool.fetchval(
            "SELECT bool_and(resolved_at IS NOT NULL) FROM escalations WHERE operation_id = $1",
            op_id,
        )

        # the reconciler reads the job (running, then done) and collects its result
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (6, 6)
        assert fx.registry.calls["create"] == 1 and len(fx.registry.jobs) == 1  # one create
        assert await r.history(op_id) == [
            "create_pending",
            "create_unknown",
            "needs_attention",
            "observing",
            "result_collecting",
            "succeeded",
        ]
    # the hash chain and the evidence log hold across the adoption's rows
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
    assert await jobwarden("audit", "verify") == 0


async def test_an_adopted_job_the_provider_does_not_know_escalates_saying_so(
    pool: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One "not found" for an id an operator typed is not a read racing a new job: it is
    a human's again at once (not after three misses, hours apart with webhooks), told why."""
    fx = BulkQueryFixture(page_size=10, lose_first_create=True)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        configure(monkeypatch, tmp_path, db_url, sfbulk(r.url))
        assert await adopt(op_id, "7509999") == 0  # a typo: the provider has 7500001
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.registry.calls["status"] == 1
        decision_id = await pool.fetchval(
            "SELECT max(decision_id) FROM decisions WHERE operation_id = $1", op_id
        )
        reason = (await latest_escalation(pool, op_id))["reason"]
        assert "provider says job 7509999 does not exist" in reason
        assert f"adopted by an operator (decision #{decision_id})" in reason
        assert await r.history(op_id) == [
            "create_pending",
            "create_unknown",
            "needs_attention",
            "observing",
            "needs_attention",
        ]


async def test_a_job_recorded_from_a_create_answer_still_tolerates_a_first_not_found(
    pool: Any, tmp_path: Path
) -> None:
    """Unchanged for a job a provider's answer named: one miss may be a read racing it."""
    fx = BulkQueryFixture(page_size=10)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        await r.settle(op_id, {S.ACCEPTED, *ENDS})
        (job,) = fx.registry.jobs.values()
        fx.registry.jobs.clear()  # the job vanishes: every read is "not found"
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.registry.calls["status"] == 3  # NOT_FOUND_TOLERANCE reads, as before
        reason = (await latest_escalation(pool, op_id))["reason"]
        assert reason == f"provider says job {job.job_id} does not exist"


# ------------------------------------------------------------------ webhooks stored meanwhile


async def test_a_webhook_stored_for_the_job_before_its_adoption_is_attached(
    db: Any, pool: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.NEEDS_ATTENTION)
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery("job_found", "msg_found", "running"))
    assert resp.json() == {"status": "stored", "matched": False}
    configure(monkeypatch, tmp_path, db_url, SIM)
    assert await adopt(op_id, "job_found") == 0
    [event] = await stored_events(db)
    assert event["operation_id"] == op_id and event["attached_at"] is not None
    [obs] = await db.fetch(
        "SELECT * FROM observations WHERE operation_id = $1 AND source = 'webhook'", op_id
    )
    assert (obs["webhook_event_id"], obs["remote_state"]) == (event["webhook_event_id"], "running")
    op = await ledger.load_operation(db, op_id)
    assert (op.state, op.remote_job_id) == (S.OBSERVING, "job_found")


# ------------------------------------------------------------------ refusals


async def test_adoption_refusals_write_nothing(
    db: Any,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(monkeypatch, tmp_path, db_url, SIM)
    bare = await submit(db, ref="bare")
    await drive(db, bare, S.NEEDS_ATTENTION)
    with_job = await submit(db, ref="with-job")
    await drive(db, with_job, S.OBSERVING)
    await drive(db, with_job, S.NEEDS_ATTENTION)
    known = (await ledger.load_operation(db, with_job)).remote_job_id
    pending = await submit(db, ref="pending")
    before = {op: await written(db, op) for op in (bare, with_job, pending)}

    # a job id already on record is never replaced; the refusal names it
    assert await adopt(with_job, "job_other") == 1
    err = capsys.readouterr().err
    assert f"already has remote job id {known!r} on record" in err
    # --job-id with any other target
    for target in ("failed", "cancel_requested", "result_collecting"):
        argv = ["resolve", bare, "--decision", target, "--job-id", "job_1", "--reason", REASON]
        assert await jobwarden(*argv) == 2
        assert "only --decision observing takes one" in capsys.readouterr().err
    # ids that cannot be recorded exactly as the provider shows them
    for bad, why in (
        ("", "0 characters"),
        ("j" * 501, "501 characters; 1 to 500 are storable"),
        ("job\x00id", "NUL"),
        (" job_1", "whitespace"),
        ("job_1\n", "whitespace"),
    ):
        assert await adopt(bare, bad) == 1, bad
        err = capsys.readouterr().err
        assert why in err and "nothing was changed" in err, (bad, err)
    # an operation whose create has not even been settled as uncertain
    assert await adopt(pending, "job_1") == 1
    assert "is create_pending" in capsys.readouterr().err

    for op, state in before.items():
        assert await written(db, op) == state, op


async def test_an_uncertain_create_is_stopped_then_adopted_in_one_transaction(
    db: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(monkeypatch, tmp_path, db_url, SIM)
    op_id = await submit(db)
    await drive(db, op_id, S.CREATE_UNKNOWN)
    # a reconciler holding the lease may be retrying the create right now: refused
    await db.execute(
        "UPDATE operations SET lease_owner = 'w1', lease_expires_at = jw_now() + interval '1 min'"
        " WHERE operation_id = $1",
        op_id,
    )
    before = await written(db, op_id)
    assert await adopt(op_id, "job_seen") == 1
    assert await written(db, op_id) == before
    await db.execute(
        "UPDATE operations SET lease_expires_at = jw_now() WHERE operation_id = $1", op_id
    )

    assert await adopt(op_id, "job_seen") == 0
    rows = await db.fetch(
        "SELECT from_state::text, to_state::text, remote_job_id, evidence_kind FROM history"
        " WHERE operation_id = $1 ORDER BY seq DESC LIMIT 2",
        op_id,
    )
    assert [tuple(r) for r in reversed(rows)] == [
        ("create_unknown", "needs_attention", None, None),
        ("needs_attention", "observing", "job_seen", "decision"),
    ]
