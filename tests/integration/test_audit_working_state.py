"""The operation row's working state against a database superuser (README, *The evidence log*).

The log covers an operation as submitted, not the columns the ledger keeps on
its row as it goes; `audit verify` compares those the evidence determines
with it (shared/ledger/working_state_audit.py): the job id, the remote state,
a failed operation's error. Real jobs run through the simulator and the
reconciler, an operator adopts a job id (extending the result deadline by the
same decision), two operations are left mid-flight with their evidence still
queued; the untouched lifecycle passes, and each column rewritten by hand,
triggers off, fails the check naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bench.harness import FILL_SQL
from shared import ledger
from shared.db.connect import ResolvedDatabase, connect
from shared.db.migrate import apply_migrations, load_migrations
from shared.db.queries import q
from shared.ledger import decisions, log
from shared.ledger.decisions import adopt_job, deadline_note, decide
from shared.ledger.log_audit import LogReport, verify_log
from shared.ledger.states import Evidence, LocalState
from shared.ledger.working_state_audit import check_working_state
from shared.tlog import Signer
from tests.harness import rig
from tests.integration.test_evidence_log import (
    SIGNER_KEY,
    _kept_off_the_host,
    superuser,
)
from tests.integration.test_evidence_log_queue import _verify_while_sequencing
from tests.support import (
    call,
    drive,
    dropped_afterwards,
    jobwarden,
    observe,
    partly_migrated,
    submit,
)

S = LocalState
DONE = {S.SUCCEEDED, S.FAILED, S.RESULT_VALIDATION_FAILED}
ADOPTED = "job-adopted-from-the-console"
FOUND = "job-found-while-cancelling"


@dataclass
class Lifecycle:
    succeeded: str  # a job run to success
    partial: str  # partially_succeeded (agents: completed_with_errors)
    failed: str  # failed by a status read showing the provider's error
    adopted: str  # an operator adopted its job id, extending its result deadline
    asked: str  # an agent asked to cancel it
    decided: str  # an operator decided to cancel it
    cancelling: str  # mid-flight: a job id found while cancel_requested, queued
    observing: str  # mid-flight: a status read queued
    note: str  # a checkpoint signed before the mid-flight evidence


async def _live(pool: Any, tmp_path: Path) -> tuple[str, str, str]:
    async with rig(pool, tmp_path) as r:
        ops = [
            await r.submit("success", duration=0.05),
            await r.submit("partial", duration=0.05, total=5, failed=2),
            await r.submit("late_failure", duration=0.05),
        ]
        for op_id in ops:
            await r.settle(op_id, DONE)
    return ops[0], ops[1], ops[2]


async def _adopt(pool: Any) -> str:
    """An operation stopped for a human with no job, then given one by an operator's
    decision that also pushes its result deadline on (both logged as the decision)."""
    async with pool.acquire() as conn:
        op_id = await submit(conn, ref="adopted")
        await drive(conn, op_id, S.NEEDS_ATTENTION)
        op = await ledger.load_operation(conn, op_id)
        await adopt_job(
            conn,
            op,
            ADOPTED,
            status_request=None,
            actor="operator:alice",
            reason="found in the provider's console",
            extend_result_deadline_s=3600,
        )
    return op_id


async def _cancel(pool: Any) -> tuple[str, str]:
    """An agent's request to cancel, and an operator's decision to: each intent (who,
    why) recorded with the transition that logs it."""
    async with pool.acquire() as conn:
        asked = await submit(conn, ref="asked")
        await drive(conn, asked, S.OBSERVING)
        await ledger.request_cancel(
            conn, asked, requested_by="agent:bob", reason="the customer withdrew\x1fthe order"
        )
        decided = await submit(conn, ref="decided")
        await drive(conn, decided, S.NEEDS_ATTENTION)
        await decide(
            conn,
            await ledger.load_operation(conn, decided),
            S.CANCEL_REQUESTED,
            actor="operator:carol",
            reason="nobody needs it any more",
        )
    return asked, decided


async def _mid_flight(pool: Any) -> tuple[str, str]:
    """Two operations whose newest evidence the sequencer has not logged yet: a job id
    recorded while cancel_requested (no transition carries it, the create call's answer
    names it) and a status read showing the job running."""
    async with pool.acquire() as conn:
        cancelling = await submit(conn, ref="cancelling")
        await drive(conn, cancelling, S.CANCEL_REQUESTED)
        async with conn.transaction():
            await call(conn, cancelling, "create", 202, FOUND)
            await ledger.record_remote_job(conn, cancelling, FOUND, create_mode="async")
        observing = await submit(conn, ref="observing")
        await drive(conn, observing, S.OBSERVING)
        # progress counted, then a read giving only a percent: the count is kept beside it
        await observe(conn, observing, "running", progress=(3, 9, None))
        await observe(conn, observing, "running", progress=(None, None, 40.5))
    return cancelling, observing


@pytest.fixture
async def lifecycle(pool: Any, tmp_path: Path) -> Lifecycle:
    succeeded, partial, failed = await _live(pool, tmp_path)
    adopted = await _adopt(pool)
    asked, decided = await _cancel(pool)
    async with pool.acquire() as conn:
        await log.sequence_all(conn)
        note = await log.checkpoint(conn, Signer.from_key(SIGNER_KEY))
    cancelling, observing = await _mid_flight(pool)
    return Lifecycle(
        succeeded, partial, failed, adopted, asked, decided, cancelling, observing, note
    )


async def _verify(pool: Any, lc: Lifecycle, monkeypatch: pytest.MonkeyPatch) -> LogReport:
    """verify_log against the checkpoint, the sequencer running meanwhile (as the
    reconciler's does), so the queued mid-flight evidence is logged while it waits."""
    return await _verify_while_sequencing(pool, lc.note, monkeypatch)


async def test_the_untouched_lifecycle_passes(
    pool: Any, lifecycle: Lifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No false alarm: a job adopted by decision, a deadline extended by it, a job id no
    transition carries yet, evidence still queued when the check looks."""
    lc = lifecycle
    async with pool.acquire() as conn:
        states = dict(
            await conn.fetch(
                "SELECT operation_id, remote_state::text FROM operations"
                " WHERE operation_id = ANY ($1)",
                [lc.succeeded, lc.partial, lc.failed],
            )
        )
        failed = await conn.fetchrow(
            "SELECT o.state::text, o.last_error, h.evidence_kind FROM operations o"
            " JOIN history h ON h.operation_id = o.operation_id AND h.seq = o.history_seq"
            " WHERE o.operation_id = $1",
            lc.failed,
        )
        queued = await conn.fetchval("SELECT count(*) FROM log_queue")
        urls = dict(
            await conn.fetch(
                "SELECT operation_id, status_url FROM operations WHERE operation_id = ANY ($1)",
                [lc.succeeded, lc.adopted],
            )
        )
    # the lifecycle has what the checks judge
    assert urls[lc.succeeded] is not None and urls[lc.adopted] is None
    assert states[lc.partial] == "partially_succeeded"
    assert states[lc.succeeded] == "succeeded"
    assert failed["state"] == "failed" and failed["evidence_kind"] == "observation"
    assert failed["last_error"] is not None
    assert queued > 0
    report = await _verify(pool, lc, monkeypatch)
    assert report.ok, report.problems
    assert report.settled > 0


async def test_the_ledger_writing_while_the_check_waits_is_no_false_alarm(
    pool: Any, lifecycle: Lifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After its snapshot, while it waits for the queued rows, the ledger goes on: a job
    id recorded with its transition, a status read, a cancel asked; the sequencer logs
    them. The check judges the snapshot it took, and the rows it waited for."""
    lc = lifecycle

    async def the_ledger_goes_on(conn: Any) -> None:
        await observe(conn, lc.observing, "succeeded")
        await ledger.request_cancel(
            conn, lc.adopted, requested_by="agent:dave", reason="changed my mind"
        )
        fresh = await submit(conn, ref="fresh")
        await drive(conn, fresh, S.OBSERVING)
        await log.sequence_all(conn)

    report = await _verify_while_sequencing(pool, lc.note, monkeypatch, the_ledger_goes_on)
    assert report.ok, report.problems
    assert report.settled > 0


ENDED = DONE | {
    S.NEEDS_ATTENTION,
    S.RESULT_UNAVAILABLE,
    S.RESULT_TIMED_OUT,
    S.CANCELLED,
    S.CANCELLATION_UNCONFIRMED,
    S.ABANDONED,
}


async def test_more_lifecycles_pass(pool: Any, tmp_path: Path) -> None:
    """No false alarm through the reconciler and the simulator, nor from the intents
    agents and operators record: a synchronous result, a same-token retry, the same
    token answered with a second job (both on record, a human's), a lookup finding
    the job of a lost create while cancel_requested, a result link expired, a job
    timed out then cancelled, a cancel never confirmed, a cancel before any create
    (abandoned), an intent recorded while stopped for a human then a resume and a
    new cancel, another such intent followed by an operator's decision to cancel,
    a reason cut to the cause's length."""
    async with rig(pool, tmp_path) as r:
        ops = {
            "sync": await r.submit("sync"),
            "retried": await r.submit("create_5xx", duration=0.1),
            "two_jobs": await r.submit("token_conflict", hang_seconds=5),
            "two_jobs_too": await r.submit("token_conflict", hang_seconds=5),
            "lost": await r.submit("lost_create_response", duration=30, hang_seconds=30),
            "expired": await r.submit("expiring_result", duration=0.1, result_ttl=0.0),
            "timed_out": await r.submit("never_finishes", result_deadline_s=0.6),
            "unconfirmed": await r.submit("cancel_unconfirmed", duration=600),
            "abandoned": await r.submit("success"),
        }
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, ops["abandoned"], requested_by="agent:ann", reason="never mind"
            )
        assert await r.settle(ops["unconfirmed"], {S.OBSERVING}) is S.OBSERVING
        # create_unknown once the create times out; under load the lookup may find the
        # job within the same sweep, before settle looks: the cancel then meets it later
        lost_at = {S.CREATE_UNKNOWN, S.ACCEPTED, S.OBSERVING}
        assert await r.settle(ops["lost"], lost_at, timeout=60) in lost_at
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn,
                ops["unconfirmed"],
                requested_by="agent:ann",
                reason="too long\x1f" + "y" * 3000,
                cancel_deadline_s=0.5,
            )
            await ledger.request_cancel(conn, ops["lost"], requested_by="agent:bob", reason="x")
        for op_id in ops.values():
            await r.settle(op_id, ENDED, timeout=30)
        async with pool.acquire() as conn:
            stopped = ops["two_jobs"]
            await ledger.request_cancel(conn, stopped, requested_by="agent:cy", reason="meanwhile")
            op = await ledger.load_operation(conn, stopped)
            await decide(conn, op, S.OBSERVING, actor="operator:zed", reason="resume it")
            await ledger.request_cancel(conn, stopped, requested_by="agent:dee", reason="now stop")
            other = ops["two_jobs_too"]
            await ledger.request_cancel(conn, other, requested_by="agent:cy", reason="meanwhile")
            op = await ledger.load_operation(conn, other)
            await decide(conn, op, S.CANCEL_REQUESTED, actor="operator:zed", reason="cancel it")
            await ledger.request_cancel(
                conn, ops["timed_out"], requested_by="agent:eve", reason="too slow"
            )
        for op_id in ops.values():
            await r.settle(op_id, ENDED - {S.RESULT_TIMED_OUT}, timeout=30)
    async with pool.acquire() as conn:
        ended = dict(
            await conn.fetch(
                "SELECT operation_id, state::text FROM operations WHERE operation_id = ANY ($1)",
                list(ops.values()),
            )
        )
        lookups = await conn.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1"
            " AND call_kind = 'lookup' AND remote_job_id IS NOT NULL",
            ops["lost"],
        )
        await log.sequence_all(conn)
        report = await verify_log(conn, None)
    assert {k: ended[v] for k, v in ops.items()} == {
        "sync": "succeeded",
        "retried": "succeeded",
        "two_jobs": "cancelled",
        "two_jobs_too": "cancelled",
        "lost": "cancelled",
        "expired": "result_unavailable",
        "timed_out": "cancelled",
        "unconfirmed": "cancellation_unconfirmed",
        "abandoned": "abandoned",
    }
    assert lookups == 1  # the job id the lookup found, recorded while cancel_requested
    assert report.problems == []


# (operation, column, the superuser's SET, what the problem says)
Attack = tuple[Callable[[Lifecycle], str], str, str]
ATTACKS: dict[str, Attack] = {
    "job id of a finished job": (
        lambda lc: lc.succeeded,
        "remote_job_id = 'job-of-someone-else'",
        "remote_job_id 'job-of-someone-else' differs from the logged job id",
    ),
    "job id cleared": (
        lambda lc: lc.succeeded,
        # made synchronous, as a CHECK asks of a finished job without one
        "remote_job_id = NULL, create_mode = 'sync'",
        "remote_job_id is empty, but its logged history carries job",
    ),
    "job id adopted by decision": (
        lambda lc: lc.adopted,
        "remote_job_id = 'job-of-someone-else'",
        "remote_job_id 'job-of-someone-else' differs from the logged job id",
    ),
    "job id no transition carries yet": (
        lambda lc: lc.cancelling,
        "remote_job_id = 'job-of-someone-else'",
        "remote_job_id 'job-of-someone-else' is named by none of its logged transitions",
    ),
    "job id of a job still running": (
        lambda lc: lc.observing,
        "remote_job_id = 'job-of-someone-else'",
        "remote_job_id 'job-of-someone-else' differs from the logged job id",
    ),
    "partially_succeeded made succeeded": (
        lambda lc: lc.partial,
        "remote_state = 'succeeded'",
        "remote_state 'succeeded' differs from the logged state of its newest status read "
        "('partially_succeeded'",
    ),
    "partially_succeeded emptied": (
        # agents are shown plain success (no completed_with_errors) as by 'succeeded'
        lambda lc: lc.partial,
        "remote_state = NULL",
        "remote_state is empty, but its newest status read showed 'partially_succeeded'",
    ),
    "a running job shown finished": (
        lambda lc: lc.observing,
        "remote_state = 'succeeded'",
        "remote_state 'succeeded' differs from the logged state of its newest status read "
        "('running'",
    ),
    "a state no read showed": (
        lambda lc: lc.adopted,
        "remote_state = 'succeeded'",
        "remote_state 'succeeded' was shown by no logged status read of its own",
    ),
    "a failed operation's error": (
        lambda lc: lc.failed,
        """last_error = '{"code": "quota", "message": "try again tomorrow"}'""",
        "last_error differs from the error logged by the status read its failure cites",
    ),
    "who asked to cancel": (
        lambda lc: lc.asked,
        "cancel_requested_by = 'agent:someone-else'",
        "who asked to cancel and why (cancel_requested_by, cancel_reason) differ from the "
        "logged request (history seq",
    ),
    "why they asked": (
        lambda lc: lc.asked,
        "cancel_reason = 'a reason nobody gave'",
        "who asked to cancel and why (cancel_requested_by, cancel_reason) differ from the "
        "logged request (history seq",
    ),
    "why an operator decided to cancel": (
        lambda lc: lc.decided,
        "cancel_reason = 'a reason nobody gave'",
        "who asked to cancel and why (cancel_requested_by, cancel_reason) differ from the "
        "logged decision #",
    ),
    "progress of a running job": (
        lambda lc: lc.observing,
        "progress_completed = 8",
        "progress (completed 8, total 9, percent 40.50) differs from what its newest status "
        "reads logged (completed 3, total 9, percent 40.50, up to observation",
    ),
    "a percent no read showed": (
        lambda lc: lc.observing,
        "progress_percent = 99",
        "progress (completed 3, total 9, percent 99.00) differs from what its newest status",
    ),
    "progress emptied": (
        lambda lc: lc.observing,
        "progress_completed = NULL, progress_total = NULL, progress_percent = NULL",
        "progress (completed None, total None, percent None) differs from what its newest "
        "status reads logged (completed 3, total 9, percent 40.50",
    ),
    "progress on an operation never read": (
        lambda lc: lc.adopted,
        "progress_completed = 1, progress_total = 2",
        "progress (completed 1, total 2, percent None) was shown by no logged status read",
    ),
    "a result deadline pushed on": (
        # when the reconciler gives up on the job: as the submission logged it
        lambda lc: lc.observing,
        "result_deadline = result_deadline + interval '30 days'",
        "differs from the one its submission logged (history seq 1)",
    ),
    "a result deadline an operator's extension set": (
        lambda lc: lc.adopted,
        "result_deadline = result_deadline - interval '1 hour'",
        "differs from the one the logged decision #",
    ),
    "a create deadline": (
        lambda lc: lc.cancelling,
        "create_deadline = create_deadline + interval '1 day'",
        "create_deadline ",
    ),
    "a status URL pointed at another server": (
        # every later read, and the result it names, would come from there
        lambda lc: lc.succeeded,
        "status_url = 'http://127.0.0.1:9/forged'",
        "status_url differs from the one the first transition to carry its job (history seq",
    ),
    "a status URL emptied": (
        lambda lc: lc.succeeded,
        "status_url = NULL",
        "status_url is empty, but the first transition to carry its job (history seq",
    ),
    "a status URL given to a job read at its id's path": (
        lambda lc: lc.adopted,
        "status_url = 'http://127.0.0.1:9/forged'",
        "status_url is set, but the first transition to carry its job (history seq",
    ),
    "a failed operation's error cleared": (
        lambda lc: lc.failed,
        "last_error = NULL",
        "last_error differs from the error logged by the status read its failure cites",
    ),
}


async def _rewrite(pool: Any, op_id: str, assignment: str) -> None:
    """The owner's UPDATE, no trigger firing (the guard that keeps a job id, the queue)."""
    async with superuser(pool) as conn:
        done = await conn.execute(
            f"UPDATE operations SET {assignment} WHERE operation_id = $1", op_id
        )
        assert done == "UPDATE 1"


@pytest.mark.parametrize("attack", ATTACKS)
async def test_a_rewritten_working_state_fails_the_check(
    pool: Any, lifecycle: Lifecycle, monkeypatch: pytest.MonkeyPatch, attack: str
) -> None:
    pick, assignment, says = ATTACKS[attack]
    op_id = pick(lifecycle)
    await _rewrite(pool, op_id, assignment)
    report = await _verify(pool, lifecycle, monkeypatch)
    assert not report.ok
    mine = [p for p in report.problems if p.startswith(f"operations {op_id}: ")]
    assert len(mine) == 1 and says in mine[0], report.problems
    # nothing else is reported: the evidence itself is intact, the log extends the checkpoint
    assert report.problems == mine and report.extends is True


async def test_the_command_line_names_the_rewritten_job_id(
    pool: Any,
    db_url: str,
    lifecycle: Lifecycle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`jobwarden audit verify` exits 1 and prints the operation, as for any tampering."""
    lc = lifecycle
    async with pool.acquire() as conn:
        await log.sequence_all(conn)  # the mid-flight rows logged: no settling needed
    await _rewrite(pool, lc.succeeded, "remote_job_id = 'job-of-someone-else'")
    monkeypatch.setenv("DATABASE_URL", db_url)
    checkpoint, key = _kept_off_the_host(tmp_path, lc.note)
    code = await jobwarden(
        "audit", "verify", "--checkpoint", str(checkpoint), "--key", str(key), "--no-record",
        "--settle", "0",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1, out
    assert (
        f"TAMPERED operations {lc.succeeded}: remote_job_id 'job-of-someone-else' differs "
        "from the logged job id its history carries"
    ) in out
    assert "FAILED: 1 problem(s)" in out


# Filler reads: a status call and its observation each, `reads` per operation of FILL_SQL.
FILL_READS_SQL = """
WITH calls AS (
    INSERT INTO provider_calls (operation_id, call_kind, attempt, worker, trace_id, method, url)
    SELECT o.operation_id, 'status', n, 'w', o.trace_id, 'GET', 'http://sim/v1/jobs/x'
    FROM operations o CROSS JOIN generate_series(1, $1::int) AS n
    WHERE o.requested_by = 'agent:fill'
    RETURNING call_id, operation_id
)
INSERT INTO observations (operation_id, source, call_id, remote_state)
SELECT operation_id, 'poll', call_id, 'running' FROM calls ORDER BY call_id
"""


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


async def test_the_remote_state_check_reads_each_operations_newest_reads_not_a_sort_of_all(
    db: Any,
) -> None:
    """The newest read per operation comes from observations_by_operation read
    backwards, per operation: a DISTINCT ON over every observation was planned as a
    sort of all of them (at 20k operations of 20 reads, 400k rows spilled to disk)."""
    async with db.transaction():
        await db.execute("SET LOCAL session_replication_role = replica")  # bulk filler rows
        await db.execute(FILL_SQL, 1, 2_000, 0.0, 0.0)
        await db.execute("UPDATE operations SET remote_state = 'running'")
        await db.execute(FILL_READS_SQL, 20)
    await db.execute("ANALYZE operations, observations, provider_calls")
    explained = await db.fetchval("EXPLAIN (FORMAT JSON) " + q("audit_remote_states"))
    nodes = _nodes(explained[0]["Plan"])
    sorted_reads = [
        n for n in nodes if n["Node Type"] == "Sort" and "observation_id" in str(n["Sort Key"])
    ]
    assert sorted_reads == [], sorted_reads
    scans = {n["Node Type"] for n in nodes if n.get("Relation Name") == "observations"}
    assert scans <= {"Index Scan", "Index Only Scan"}, scans
    assert await db.fetch(q("audit_remote_states")) == []  # and each agrees with its reads


class _Problems(list[str]):
    def problem(self, text: str) -> None:
        self.append(text)


async def _working_state_problems(conn: Any) -> _Problems:
    problems = _Problems()
    async with conn.transaction(isolation="repeatable_read"):
        await check_working_state(conn, problems)
    return problems


async def test_an_operation_submitted_before_040_is_judged_from_its_first_logged_extension(
    pg_server: ResolvedDatabase,
) -> None:
    """Submitted before migration 040, an operation's first history row names no
    deadline: neither is judged (no false alarm on an upgraded database), until an
    operator's extension logs the result deadline it sets."""
    async with dropped_afterwards(pg_server.admin_url, "jw_audit_040") as name:
        migrations = load_migrations()
        assert migrations[39].name.startswith("040_")
        url = await partly_migrated(pg_server.admin_url, name, 39)
        conn = await connect(url)  # the server's superuser, as the attacker is
        try:
            op_id = await submit(conn, ref="before-040")
            await apply_migrations(conn)
            cause = await conn.fetchval("SELECT cause FROM history WHERE operation_id = $1", op_id)
            assert cause == "submitted"
            forged = (
                "UPDATE operations SET result_deadline = result_deadline + interval '30 days',"
                " create_deadline = create_deadline + interval '1 day' WHERE operation_id = $1"
            )
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                await conn.execute(forged, op_id)
            assert await _working_state_problems(conn) == []
            await drive(conn, op_id, S.NEEDS_ATTENTION)
            await adopt_job(
                conn,
                await ledger.load_operation(conn, op_id),
                "job-adopted-after-040",
                status_request=None,
                actor="operator:alice",
                reason="found in the provider's console",
                extend_result_deadline_s=3600,
            )
            assert await _working_state_problems(conn) == []  # the extension's own deadline
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                await conn.execute(forged, op_id)
            problems = await _working_state_problems(conn)
        finally:
            await conn.close()
    assert len(problems) == 1, problems  # the create deadline still is not judged
    assert problems[0].startswith(f"operations {op_id}: result_deadline ")
    assert "differs from the one the logged decision #" in problems[0]


async def test_a_decision_row_inserted_alone_extends_no_deadline(
    pool: Any, lifecycle: Lifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A superuser who inserts a decision naming a later result deadline (logged, as
    any insert with the triggers on is) and moves the deadline to it: every real
    extension is cited by the transition it decided, and this one by none."""
    op_id = lifecycle.observing
    async with pool.acquire() as conn:
        later = await conn.fetchval(
            "SELECT result_deadline + interval '30 days' FROM operations WHERE operation_id = $1",
            op_id,
        )
        await conn.execute(
            "INSERT INTO decisions (operation_id, actor, decision, reason) VALUES ($1, $2, $3, $4)",
            op_id,
            "operator:mallory",
            "observing -> observing" + deadline_note(later),
            "more time",
        )
    await _rewrite(pool, op_id, "result_deadline = result_deadline + interval '30 days'")
    report = await _verify(pool, lifecycle, monkeypatch)
    mine = [p for p in report.problems if p.startswith(f"operations {op_id}: ")]
    assert len(mine) == 1 and "differs from the one its submission logged" in mine[0], mine


async def test_an_extension_recorded_by_a_version_before_040_is_reported(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README's upgrade note: an extension made by an older CLI or console against the
    migrated database names no deadline, so the row's result deadline differs from
    the submission's and the operation is reported: upgrade them with the migration."""
    op_id = await submit(db, ref="old-cli")
    await drive(db, op_id, S.NEEDS_ATTENTION)
    monkeypatch.setattr(decisions, "deadline_note", lambda deadline: "")  # the old text
    await adopt_job(
        db,
        await ledger.load_operation(db, op_id),
        "job-adopted-by-an-old-cli",
        status_request=None,
        actor="operator:alice",
        reason="found in the provider's console",
        extend_result_deadline_s=3600,
    )
    problems = await _working_state_problems(db)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"operations {op_id}: result_deadline ")
    assert "differs from the one its submission logged (history seq 1)" in problems[0]


STATUS_URL = "https://api.example.test/v1/jobs/j-41?sig=not-for-agents"


async def _accept(conn: Any, ref: str, job: str, status_url: str | None, cause: str) -> str:
    """An operation whose create answer named `job` (and `status_url`), then read."""
    op_id = await submit(conn, ref=ref)
    call_id = await call(conn, op_id, "create", 202, job)
    async with conn.transaction():
        await _record_and_accept(conn, op_id, call_id, job, status_url, cause)
    await drive(conn, op_id, S.OBSERVING)
    return op_id


async def _record_and_accept(
    conn: Any, op_id: str, call_id: int, job: str, status_url: str | None, cause: str
) -> None:
    """The job id (and status URL) the create's answer named, and the move it decided."""
    await ledger.record_remote_job(conn, op_id, job, status_url=status_url, create_mode="async")
    await ledger.transition(
        conn,
        op_id,
        S.CREATE_PENDING,
        S.ACCEPTED,
        actor="reconciler:test",
        cause=cause,
        evidence=(Evidence.CALL, call_id),
    )


async def _causes(conn: Any, op_id: str) -> list[str]:
    rows = await conn.fetch("SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq", op_id)
    return [r["cause"] for r in rows]


async def test_the_first_transition_to_carry_a_job_logs_its_status_url(pool: Any) -> None:
    """By digest (the URL's query may be a signature agents must not read), or none;
    only the first move carrying the job; a cause at its length limit cut to fit."""
    digest = hashlib.sha256(STATUS_URL.encode()).hexdigest()
    async with pool.acquire() as conn:
        with_url = await _accept(conn, "url", "j-41", STATUS_URL, "create answered")
        at_path = await _accept(conn, "path", "j-42", None, "create answered")
        long = await _accept(conn, "long", "j-43", STATUS_URL, "x" * 2000)
        causes = {op: await _causes(conn, op) for op in (with_url, at_path, long)}
        assert await _working_state_problems(conn) == []
    assert causes[with_url][1] == f"create answered; status URL sha256:{digest}"
    assert causes[at_path][1] == "create answered; status URL none"
    assert "status URL" not in causes[with_url][2]  # accepted -> observing: not the first
    assert all("sig=" not in cause for cause in causes[with_url])
    assert len(causes[long][1]) == 2000
    assert causes[long][1].endswith(f"x; status URL sha256:{digest}")


async def test_the_status_url_is_never_changed_after_the_job_id(pool: Any) -> None:
    """What the history logged stays what is read: a second recording of the job may
    repeat its URL or name none, not another one (as no superuser's hand would)."""
    async with pool.acquire() as conn:
        op_id = await _accept(conn, "fixed", "j-44", STATUS_URL, "create answered")
        await ledger.record_remote_job(conn, op_id, "j-44", create_mode="async")
        await ledger.record_remote_job(
            conn, op_id, "j-44", status_url=STATUS_URL, create_mode="async"
        )
        with pytest.raises(ledger.ImmutableFact, match="never changed after"):
            await ledger.record_remote_job(
                conn, op_id, "j-44", status_url="http://127.0.0.1:9/forged", create_mode="async"
            )
        with pytest.raises(asyncpg.PostgresError, match="never changed after"):
            await conn.execute(
                "UPDATE operations SET status_url = NULL WHERE operation_id = $1", op_id
            )
        assert (
            await conn.fetchval("SELECT status_url FROM operations WHERE operation_id = $1", op_id)
            == STATUS_URL
        )


async def test_a_job_first_carried_before_041_has_its_status_url_unjudged(
    pg_server: ResolvedDatabase,
) -> None:
    """A job recorded before migration 041 logged no status URL: its row is not judged
    (no false alarm on an upgraded database); one accepted after it is."""
    async with dropped_afterwards(pg_server.admin_url, "jw_audit_041") as name:
        migrations = load_migrations()
        assert migrations[40].name.startswith("041_")
        url = await partly_migrated(pg_server.admin_url, name, 40)
        conn = await connect(url)  # the server's superuser, as the attacker is
        try:
            before = await _accept(conn, "before-041", "j-45", STATUS_URL, "create answered")
            await apply_migrations(conn)
            after = await _accept(conn, "after-041", "j-46", STATUS_URL, "create answered")
            assert (await _causes(conn, before))[1] == "create answered"
            async with conn.transaction():
                await conn.execute("SET LOCAL session_replication_role = replica")
                await conn.execute(
                    "UPDATE operations SET status_url = 'http://127.0.0.1:9/forged'"
                    " WHERE operation_id = ANY ($1)",
                    [before, after],
                )
            problems = await _working_state_problems(conn)
        finally:
            await conn.close()
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"operations {after}: status_url differs from the one ")


FORGED = "http://127.0.0.1:9/forged"


async def _plant(pool: Any, op_id: str) -> None:
    """A URL written while no job id is on record: by no writer of the ledger, and
    refused by no trigger (there is no recorded URL to protect yet)."""
    async with superuser(pool) as su:
        await su.execute(
            "UPDATE operations SET status_url = $2 WHERE operation_id = $1", op_id, FORGED
        )


async def _adopted_after_a_plant(pool: Any) -> str:
    async with pool.acquire() as conn:
        op_id = await submit(conn, ref="planted-adopted")
        await drive(conn, op_id, S.NEEDS_ATTENTION)
    await _plant(pool, op_id)
    async with pool.acquire() as conn:
        op = await ledger.load_operation(conn, op_id)
        await adopt_job(
            conn, op, "j-planted", status_request=None, actor="operator:alice", reason="found"
        )
    return op_id


async def _accepted_after_a_plant(pool: Any) -> str:
    """A create answer naming the job and no URL (a job read at its id's path)."""
    async with pool.acquire() as conn:
        op_id = await submit(conn, ref="planted-answer")
        call_id = await call(conn, op_id, "create", 202, "j-planted-2")
    await _plant(pool, op_id)
    async with pool.acquire() as conn, conn.transaction():
        await _record_and_accept(conn, op_id, call_id, "j-planted-2", None, "create answered")
    return op_id


@pytest.mark.parametrize("recorded", [_adopted_after_a_plant, _accepted_after_a_plant])
async def test_a_status_url_written_before_the_job_id_is_not_kept(
    pool: Any, recorded: Callable[[Any], Any]
) -> None:
    """A URL planted before the job id was kept by a recording naming none (an
    operator's adoption, an answer naming no URL: set_remote_job's coalesce), and the
    first transition to carry the job logged its digest as the URL the job is read at:
    every read went to the planted server, and verify passed. The first recording now
    writes the URL it was given, none included."""
    op_id = await recorded(pool)
    async with pool.acquire() as conn:
        url = await conn.fetchval(
            "SELECT status_url FROM operations WHERE operation_id = $1", op_id
        )
        logged = [c for c in await _causes(conn, op_id) if "; status URL " in c]
    assert url is None
    assert len(logged) == 1 and logged[0].endswith("; status URL none")


async def test_the_check_computes_the_digest_with_no_function_of_the_database(
    pool: Any,
) -> None:
    """jw_status_url_logged is the superuser's to replace (CREATE OR REPLACE, no trigger
    to disable): the check compared by it, and one answering NULL hid a rewritten URL."""
    async with pool.acquire() as conn:
        op_id = await _accept(conn, "replaced", "j-47", STATUS_URL, "create answered")
    async with superuser(pool) as su:
        await su.execute(
            "CREATE OR REPLACE FUNCTION jw_status_url_logged(p_url text) RETURNS text"
            " LANGUAGE sql IMMUTABLE AS $$ SELECT NULL::text $$"
        )
        await su.execute(
            "UPDATE operations SET status_url = $2 WHERE operation_id = $1", op_id, FORGED
        )
    async with pool.acquire() as conn:
        problems = await _working_state_problems(conn)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"operations {op_id}: status_url differs from the one ")
