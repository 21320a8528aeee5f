"""The faults just off the tested paths: lost connections between statements,
webhooks inside back-pressure windows, deadlines passing unseen, and provider
facts our tables cannot hold. Real PostgreSQL (through a fault-injecting wire
proxy where a connection must drop), the simulated provider as a real server,
and a clock the tests move instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.harness import TestClock
from bench.pgproxy import Fault, PgProxy
from shared import ledger
from shared.db.connect import connect, create_pool
from shared.ledger.states import LocalState
from tests.harness import Rig, rig, webhook_rig

S = LocalState
# How far a test moves the clock to let a backoff or an error retry pass.
PAST_ANY_RETRY = 31.0
# Past the first read after acceptance (the rig's first backoff step: 0.05 s at most).
FIRST_READ_SECONDS = 0.1


@contextlib.asynccontextmanager
async def through_proxy(db_url: str) -> AsyncIterator[tuple[PgProxy, Any]]:
    """A pool whose every statement goes through a proxy that can drop it."""
    async with PgProxy.from_url(db_url) as proxy:
        pool = await create_pool(proxy.url_for(db_url), min_size=1, max_size=8)
        try:
            yield proxy, pool
        finally:
            await pool.close()


@contextlib.asynccontextmanager
async def wakeups(db_url: str) -> AsyncIterator[asyncio.Queue[str]]:
    """Operation ids as the database announces their wake-ups (LISTEN jobwarden_wakeup)."""
    conn = await connect(db_url)
    queue: asyncio.Queue[str] = asyncio.Queue()
    await conn.add_listener("jobwarden_wakeup", lambda *a: queue.put_nowait(a[3]))
    try:
        yield queue
    finally:
        await conn.close()


def drain(queue: asyncio.Queue[str]) -> None:
    """Forget the wake-ups announced so far (a test then waits for the next one)."""
    while not queue.empty():
        queue.get_nowait()


async def woken(queue: asyncio.Queue[str], op_id: str) -> None:
    while await asyncio.wait_for(queue.get(), 15) != op_id:
        pass


async def submit_as(db: Any, script: str, **params: Any) -> str:
    """Submit the way the agent API does, on `db` (e.g. a pool in the receiver's role)."""
    body = {"script": script, "params": {"duration": 2.0, **params}}
    sub = await ledger.submit_operation(
        db,
        provider="sim",
        kind="export",
        request=ledger.RequestSpec("POST", "/v1/jobs", body),
        requested_by="agent:test",
    )
    return sub.operation_id


async def sim_get(r: Rig, path: str) -> Any:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"{r.sim_url}{path}")).json()


async def run_to(r: Rig, clock: TestClock, op_id: str, states: set[LocalState]) -> LocalState:
    """Run the reconciler, moving the clock over each wait, until `op_id` is in `states`."""
    for _ in range(40):
        await r.reconciler.run_once()
        state = await r.state(op_id)
        if state in states:
            return state
        due = await r.pool.fetchval(
            "SELECT greatest(0, extract(epoch FROM next_poll_at - jw_now()))"
            " FROM operations WHERE operation_id = $1",
            op_id,
        )
        if due is None:
            break
        await clock.advance(float(due) + 0.01)
    cause = await r.pool.fetchval(
        "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
    )
    raise AssertionError(f"{op_id} never reached {states}; it is {await r.state(op_id)}: {cause}")


# ------------------------------------------------------------------ 1. recovery points


async def test_a_connection_lost_after_a_retry_is_accepted_still_runs_the_cross_check(
    db_url: str, pool: Any, tmp_path: Path
) -> None:
    """The provider honours the token but also started a second job for our reference.

    The connection drops right after `accepted` (with its job id) is committed,
    at the first statement of the lookup that cross-checks the retry. The
    cross-check is a recovery point on the row: the next owner runs it, finds
    both jobs and stops for a human, with both on record.
    """
    clock = TestClock(pool)
    async with through_proxy(db_url) as (proxy, proxied), rig(proxied, tmp_path, clock=clock) as r:
        op_id = await r.submit("retry_spawns_duplicate", duration=60.0)
        await r.reconciler.run_once()  # the first create's answer is lost
        assert await r.state(op_id) is S.CREATE_UNKNOWN
        proxy.arm(Fault(action="drop_before", match=re.compile(r"lookup_attempts \+ 1")))
        await clock.advance(1.0)
        await r.reconciler.run_once()  # same-token retry: accepted, then the drop
        assert proxy.fired.is_set()
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.ACCEPTED and op.follow_up == "cross_check"
        await clock.advance(PAST_ANY_RETRY)
        assert await run_to(r, clock, op_id, {S.NEEDS_ATTENTION}) is S.NEEDS_ATTENTION
        stats = await sim_get(r, "/_sim/stats")
    escalation = await pool.fetchrow(
        "SELECT reason, details FROM escalations WHERE operation_id = $1", op_id
    )
    assert stats["jobs_total"] == 2  # the provider really holds two jobs for the token...
    assert len(set(escalation["details"]["remote_job_ids"])) == 2  # ...and both are on record
    assert "also holds" in escalation["reason"]
    history = [
        h[0]
        for h in await pool.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
        )
    ]
    assert "succeeded" not in history and history[-1] == "needs_attention"


async def test_a_cross_check_that_finds_no_stranger_lets_the_job_finish(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("lost_create_response", duration=1.0, hang_seconds=5)
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        lookups = await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'lookup'",
            op_id,
        )
        op = await ledger.load_operation(pool, op_id)
        stats = await sim_get(r, "/_sim/stats")
    assert lookups >= 1 and op.follow_up is None
    assert stats["jobs_total"] == 1


async def test_a_retried_creates_retry_after_does_not_hold_its_cross_check(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The 202 that answers a same-token retry says to read in ten minutes; the
    cross-check (a lookup) and what follows it do not wait for that."""
    async with rig(pool, tmp_path, clock=clock) as r:
        started = clock.now()
        op_id = await r.submit(
            "lost_create_response", duration=1.0, hang_seconds=5, accept_retry_after=600
        )
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        assert (clock.now() - started).total_seconds() < 600
        lookups = await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'lookup'",
            op_id,
        )
        op = await ledger.load_operation(pool, op_id)
    assert lookups >= 1 and op.follow_up is None


async def test_a_create_answer_on_record_is_acted_on_after_the_connection_drops(
    db_url: str, pool: Any, tmp_path: Path
) -> None:
    """The create's answer is committed; the connection drops before it is acted on.

    For a provider that cannot deduplicate creates and offers no lookup,
    treating that as "no answer" would stop the operation for a human. The
    recorded answer is the recovery point: the next owner acts on it.
    """
    clock = TestClock(pool)
    unsafe = {"create": {"idempotency": "none"}, "lookup": {"supported": False}}
    async with (
        through_proxy(db_url) as (proxy, proxied),
        rig(proxied, tmp_path, overrides=unsafe, clock=clock) as r,
    ):
        op_id = await r.submit("success", duration=2.0)
        # the statement after the answer's record: the transaction that acts on it
        proxy.arm(
            Fault(
                action="drop_before",
                match=re.compile(r"^BEGIN"),
                after_match=re.compile(r"The outcome of call"),
            )
        )
        await r.reconciler.run_once()
        assert proxy.fired.is_set()
        assert await r.state(op_id) is S.CREATE_PENDING  # the answer is on record, unread
        await clock.advance(PAST_ANY_RETRY)
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        stats = await sim_get(r, "/_sim/stats")
    assert stats["creates_total"] == 1 and stats["jobs_total"] == 1


async def test_a_read_whose_record_was_lost_is_put_on_record_by_the_next_claim(
    db_url: str, pool: Any, tmp_path: Path
) -> None:
    clock = TestClock(pool)
    async with through_proxy(db_url) as (proxy, proxied), rig(proxied, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=60.0)
        assert await run_to(r, clock, op_id, {S.OBSERVING}) is S.OBSERVING
        await clock.advance(1.0)
        # the read leaves and is answered; its record never reaches the database
        proxy.arm(Fault(action="drop_before", match=re.compile(r"Status reads, any number")))
        await r.reconciler.run_once()
        assert proxy.fired.is_set()
        answered = len(
            [q for q in (await sim_get(r, "/_sim/requests"))["requests"] if q["kind"] == "status"]
        )
        await clock.advance(PAST_ANY_RETRY)
        await r.reconciler.run_once()  # the next claim records the lost read
    lost = await pool.fetchval(
        "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'"
        " AND error_category = 'lost'",
        op_id,
    )
    assert lost == 1 and await _status_reads(pool, op_id, lost=True) >= answered


async def test_a_decision_on_a_row_whose_worker_vanished_mid_read_records_the_read(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=60.0)
        assert await run_to(r, clock, op_id, {S.OBSERVING}) is S.OBSERVING
        await clock.advance(1.0)
        [claimed] = await r.reconciler.claim(1)  # the read is marked; the worker vanishes
        assert claimed.read_marked
        await clock.advance(PAST_ANY_RETRY)  # its lease lapses
        async with pool.acquire() as conn:
            await ledger.decisions.decide(
                conn,
                await ledger.load_operation(conn, op_id),
                S.NEEDS_ATTENTION,
                actor="operator:ann",
                reason="looks wrong",
            )
    row = await pool.fetchrow(
        "SELECT count(*) FILTER (WHERE error_category = 'lost') AS lost,"
        " (SELECT read_fence FROM operations WHERE operation_id = $1) AS mark"
        " FROM provider_calls WHERE operation_id = $1",
        op_id,
    )
    assert row["lost"] == 1 and row["mark"] is None


# ------------------------------------------------------------------ 2. back-pressure


async def test_a_webhook_inside_a_retry_after_window_waits_for_it(
    db_url: str, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with wakeups(db_url) as queue, webhook_rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("rate_limited", duration=40, limited_reads=1, retry_after=30)
        await r.reconciler.run_once()  # the create; with webhooks, no read at acceptance
        assert await _status_reads(pool, op_id) == 0
        await clock.advance(30.5)  # the rig's backstop (30 s): the first read is due
        await r.reconciler.run_once()  # the first read: 429, Retry-After 30 s
        op = await ledger.load_operation(pool, op_id)
        assert op.not_before is not None
        window = (op.not_before - clock.now()).total_seconds()
        assert 29 <= window <= 30
        drain(queue)
        await clock.advance(10.0)  # the job finishes; its webhook arrives inside the window
        await woken(queue, op_id)
        assert (await r.reconciler.run_once())["claimed"] == 0  # the wake-up is not a call
        await clock.advance(window)
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        stats = await sim_get(r, "/_sim/stats")
    assert stats["retry_after_violations_total"] == 0


async def test_a_202s_retry_after_holds_the_first_read_when_a_webhook_wakes_it(
    db_url: str, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """An Azure-style 202 says when to read the job: a delivery that announces the
    end sooner wakes the operation, and still no read goes out before that time."""
    async with wakeups(db_url) as queue, webhook_rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("success", duration=5, accept_retry_after=60)
        await r.reconciler.run_once()  # the create: 202, Retry-After 60 s
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.ACCEPTED and op.poll_not_before is not None
        hint = (op.poll_not_before - clock.now()).total_seconds()
        assert 59 <= hint <= 60
        drain(queue)
        await clock.advance(10.0)  # the job ends at 5 s; its webhook arrives
        await woken(queue, op_id)
        assert (await r.reconciler.run_once())["claimed"] == 0  # woken, not yet readable
        await clock.advance(30.0)  # past the rig's backstop (30 s), still inside the hint
        assert (await r.reconciler.run_once())["claimed"] == 0
        assert await _status_reads(pool, op_id) == 0
        await clock.advance(hint - 40.0 + 0.5)
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        stats = await sim_get(r, "/_sim/stats")
    assert stats["poll_after_violations"] == {} and stats["retry_after_violations_total"] == 0


async def test_a_window_heard_by_a_worker_that_vanished_still_holds(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    lease = 10.0  # the rig's; the window below is longer than one lease, shorter than two
    async with rig(pool, tmp_path, clock=clock, lease_seconds=lease) as r:
        op_id = await r.submit("rate_limited", duration=0.5, limited_reads=2, retry_after=15)
        await created_and_read(r, clock)  # the first read: 429 on record
        await clock.advance(15.5)
        [claimed] = await r.reconciler.claim(1)  # the second read is marked...
        assert claimed.read_marked
        request = claimed.op.status_request
        assert request is not None
        async with httpx.AsyncClient() as client:  # ...leaves, hears 429 for 15 s...
            answer = await client.request(request["method"], request["url"])
        assert answer.status_code == 429
        # ...and its worker vanishes with the answer. Its lease lapses:
        await clock.advance(lease + 0.5)
        assert (await r.reconciler.run_once())["claimed"] == 0  # lost read recorded, row held
        await clock.advance(lease)
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        stats = await sim_get(r, "/_sim/stats")
    assert stats["retry_after_violations_total"] == 0
    # the first 429 and the read after the window answered; the vanished one lost
    assert await _status_reads(pool, op_id) == 2
    assert await _status_reads(pool, op_id, lost=True) == 3


async def test_an_operator_read_waits_too_unless_the_override_is_explicit(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("rate_limited", duration=60.0, limited_reads=1, retry_after=30)
        await created_and_read(r, clock)  # the first read: 429, Retry-After 30 s
        async with pool.acquire() as conn:
            op = await ledger.load_operation(conn, op_id)
            await ledger.decisions.request_read(conn, op, actor="operator:ann", reason="look")
        assert (await r.reconciler.run_once())["claimed"] == 0
        async with pool.acquire() as conn:
            decision = await ledger.decisions.request_read(
                conn,
                op,
                actor="operator:ann",
                reason="the provider said so",
                override_back_pressure=True,
            )
        assert decision is not None
        assert (await r.reconciler.run_once())["claimed"] == 1
        recorded = await pool.fetchval(
            "SELECT decision FROM decisions WHERE decision_id = $1", decision
        )
        stats = await sim_get(r, "/_sim/stats")
    assert "overriding back-pressure" in recorded
    assert stats["retry_after_violations_total"] == 1  # the one the operator asked for


# ------------------------------------------------------------------ 3. deadlines look first


async def test_a_cancel_deadline_passed_unseen_reads_and_finds_the_confirmation(
    db_url: str, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with wakeups(db_url) as queue, webhook_rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("cancellable", duration=600.0, cancel_delay=1.0)
        assert await run_to(r, clock, op_id, {S.OBSERVING}) is S.OBSERVING
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="agent:test", reason="stop", cancel_deadline_s=5
            )
        await r.reconciler.run_once()  # the cancel is sent and accepted
        assert await r.state(op_id) is S.CANCELLING
        # An outage: no reconciler runs while the job is cancelled, its webhook
        # stored, and the cancel deadline passes.
        drain(queue)
        await clock.advance(6.0)
        await woken(queue, op_id)
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.CANCELLED
    history = [
        h[0]
        for h in await pool.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
        )
    ]
    assert "cancellation_unconfirmed" not in history


async def test_a_deadline_read_that_still_shows_nothing_terminal_escalates_citing_it(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("never_finishes", result_deadline_s=20)
        assert await run_to(r, clock, op_id, {S.OBSERVING}) is S.OBSERVING
        reads_before = await _status_reads(pool, op_id)
        await clock.advance(21.0)
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.RESULT_TIMED_OUT
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
        )
    assert await _status_reads(pool, op_id) == reads_before + 1
    assert "still shows 'running'" in cause


async def test_a_deadline_waits_for_a_short_back_pressure_window_then_reads(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit(
            "rate_limited", duration=5.0, limited_reads=1, retry_after=60, result_deadline_s=30
        )
        await created_and_read(r, clock)  # the first read: 429, Retry-After 60 s
        reads = await _status_reads(pool, op_id)
        await clock.advance(31.0)  # the deadline passes inside the window
        # due at the deadline, to look; the window ends within its grace, so it waits
        assert (await r.reconciler.run_once())["claimed"] == 1
        # still `accepted`: the one read so far, a 429, saw nothing of the job
        assert await _status_reads(pool, op_id) == reads and await r.state(op_id) is S.ACCEPTED
        assert await run_to(r, clock, op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        stats = await sim_get(r, "/_sim/stats")
    assert stats["retry_after_violations_total"] == 0


async def created_and_read(r: Rig, clock: TestClock) -> None:
    """The create, then the first status read (due within the rig's first backoff step)."""
    await r.reconciler.run_once()
    await clock.advance(FIRST_READ_SECONDS)
    await r.reconciler.run_once()


async def _status_reads(pool: Any, op_id: str, *, lost: bool = False) -> int:
    """Status reads on record: answered ones, and with `lost` those whose outcome was lost."""
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND call_kind = 'status'"
            " AND (status_code IS NOT NULL OR ($2 AND error_category = 'lost'))",
            op_id,
            lost,
        )
    )


# ------------------------------------------------------------------ 4. impossible facts


@pytest.mark.parametrize(
    ("odd", "anomaly", "end"),
    [
        # final counts that contradict the result: an honest verdict, escalated
        ("completed_exceeds_total", "progress_completed_exceeds_total", S.RESULT_VALIDATION_FAILED),
        ("huge_counts", "progress_total_too_large", S.RESULT_VALIDATION_FAILED),
        ("negative_counts", "progress_completed_negative", S.SUCCEEDED),
        # a day's hint (capped from 10**12 s) outlasts the deadline: it escalates, unread
        ("huge_poll_after", "poll_after_seconds_capped", S.RESULT_TIMED_OUT),
        ("null_progress", None, S.SUCCEEDED),
        ("nul_state", None, S.SUCCEEDED),
    ],
)
async def test_impossible_provider_facts_are_kept_and_never_stall(
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
    caplog: pytest.LogCaptureFixture,
    odd: str,
    anomaly: str | None,
    end: LocalState,
) -> None:
    # A running state with a NUL maps to nothing: ten such reads in a row are a
    # human's (STATELESS_READS_TOLERANCE), the first one included since it no longer
    # moves `accepted` on. One second of the fast backoff is at most nine reads, so
    # the job ends first; three seconds ended first only by the backoff's draw.
    duration = 1.0 if odd == "nul_state" else 3.0
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("odd_facts", odd=odd, duration=duration)
        assert await run_to(r, clock, op_id, {end}) is end
        served = [
            q for q in (await sim_get(r, "/_sim/requests"))["requests"] if q["kind"] == "status"
        ]
    # every status answer the provider served is on record, none erased
    rows = await pool.fetch(
        "SELECT call_id, call_kind, status_code, error_category, anomalies, started_at, finished_at"
        " FROM provider_calls WHERE operation_id = $1 ORDER BY call_id",
        op_id,
    )
    assert await _status_reads(pool, op_id) == len(served), [dict(r) for r in rows]
    anomalies = {
        a
        for row in await pool.fetch(
            "SELECT anomalies FROM observations WHERE operation_id = $1", op_id
        )
        for a in row["anomalies"] or ()
    }
    if anomaly is not None:
        assert anomaly in anomalies
    assert not [rec for rec in caplog.records if rec.getMessage() == "step failed"]


# ------------------------------------------------------------------ 5. least privilege


async def test_the_reconciler_and_the_receiver_need_no_more_than_their_roles(
    db_url: str, pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Every new write path (marks, lost reads, back-pressure, follow-ups) under the real roles."""
    reconciler_pool = await create_pool(
        db_url, min_size=1, max_size=8, server_settings={"role": "jobwarden_reconciler"}
    )
    receiver = await create_pool(
        db_url, min_size=1, max_size=2, server_settings={"role": "jobwarden_receiver"}
    )
    try:
        async with rig(reconciler_pool, tmp_path, clock=clock) as r:
            done = await submit_as(receiver, "rate_limited", limited_reads=1, retry_after=5)
            assert await run_to(r, clock, done, {S.SUCCEEDED}) is S.SUCCEEDED
            cancelled = await submit_as(receiver, "cancellable", duration=600.0)
            assert await run_to(r, clock, cancelled, {S.OBSERVING}) is S.OBSERVING
            await clock.advance(1.0)
            [claimed] = await r.reconciler.claim(1)  # a read marked; its worker vanishes
            assert claimed.read_marked
            await clock.advance(PAST_ANY_RETRY)
            async with receiver.acquire() as conn:  # an agent's cancel, as the API makes it
                await ledger.request_cancel(
                    conn, cancelled, requested_by="agent:test", reason="stop"
                )
            assert await run_to(r, clock, cancelled, {S.CANCELLED}) is S.CANCELLED
    finally:
        await reconciler_pool.close()
        await receiver.close()
    lost = await pool.fetchval(
        "SELECT count(*) FROM provider_calls WHERE operation_id = $1 AND error_category = 'lost'",
        cancelled,
    )
    assert lost == 1
