"""The reconciler against the real simulated provider, one test per seed fault."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from reconciler.context import build_adapters
from reconciler.step import Step
from reconciler.steps.create import _absence_settled
from reconciler.steps.poll import DEADLINE_READ_GRACE_S
from reconciler.worker import ERROR_RETRY_SECONDS
from shared import ledger
from shared.ledger import evidence
from shared.ledger.states import LocalState
from shared.simulator import SimulatorSettings
from tests.harness import rig, sim_providers
from tests.integration.test_reconciler_crashes import wait_for
from tests.support import call, drive

S = LocalState


async def test_slow_job_succeeds_after_several_polls(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("success", duration=0.6)
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await ledger.load_operation(pool, op_id)
        assert op.result_id is not None and op.remote_job_id is not None
        stats = await r.stats()
        assert stats["creates_total"] == 1
        assert stats["status_calls_per_job"][op.remote_job_id] >= 2


async def _history(pool: Any, op_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
    )
    return [r["to_state"] for r in rows]


async def _escalation(pool: Any, op_id: str) -> Any:
    return await pool.fetchrow(
        "SELECT state::text, reason, details FROM escalations WHERE operation_id = $1", op_id
    )


async def test_late_failure_is_reported_as_failed(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("late_failure", duration=0.3)
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await ledger.load_operation(pool, op_id)
        assert op.last_error["code"] == "worker_crashed"
        assert op.result_id is None
        assert await _history(pool, op_id) == ["create_pending", "accepted", "observing", "failed"]


async def test_timeout_stops_observation_and_leaves_the_job_alone(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("never_finishes", result_deadline_s=0.6)
        assert await r.settle(op_id, {S.RESULT_TIMED_OUT}) is S.RESULT_TIMED_OUT
        op = await ledger.load_operation(pool, op_id)
        assert op.next_poll_at is None and op.finished_at is None
        assert (await r.stats())["cancels_per_job"] == {}
        escalation = await _escalation(pool, op_id)
        assert escalation["state"] == "result_timed_out"
        assert escalation["details"]["remote_job_id"] == op.remote_job_id
        # nothing is claimed any more: automatic observation has stopped
        assert (await r.reconciler.run_once())["claimed"] == 0


async def test_progress_at_100_percent_is_not_success(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("never_finishes", duration=0.1, result_deadline_s=1.0)
        await r.settle(op_id, {S.RESULT_TIMED_OUT})
        full = await pool.fetchval(
            "SELECT count(*) FROM observations WHERE operation_id = $1"
            " AND progress_completed = progress_total AND progress_total > 0",
            op_id,
        )
        assert full >= 1
        assert S.SUCCEEDED.value not in await _history(pool, op_id)


async def test_retry_after_is_honoured(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("rate_limited", duration=0.1, limited_reads=1, retry_after=1)
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        calls = await pool.fetch(
            "SELECT status_code, started_at, finished_at FROM provider_calls"
            " WHERE operation_id = $1 AND call_kind = 'status' ORDER BY call_id",
            op_id,
        )
        assert calls[0]["status_code"] == 429
        gap = (calls[1]["started_at"] - calls[0]["finished_at"]).total_seconds()
        assert gap >= 0.9, f"polled again {gap:.2f}s after a Retry-After of 1s"


async def test_lost_create_response_after_acceptance_does_not_run_twice(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("lost_create_response", duration=0.2, hang_seconds=5)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=20) is S.SUCCEEDED
        stats = await r.stats()
        op = await ledger.load_operation(pool, op_id)
        assert stats["jobs_total"] == 1
        assert stats["creates_per_token"] == {op.idempotency_token: 1}
        assert op.create_attempts == 2
        assert await _history(pool, op_id) == [
            "create_pending",
            "create_unknown",
            "accepted",
            "observing",
            "result_collecting",
            "succeeded",
        ]
        tokens = await pool.fetch(
            "SELECT DISTINCT idempotency_token FROM provider_calls WHERE call_kind = 'create'"
        )
        assert [t[0] for t in tokens] == [op.idempotency_token]


async def test_create_unknown_resolved_by_lookup_without_idempotency(
    pool: Any, tmp_path: Path
) -> None:
    overrides = {"create": {"idempotency": "none"}}
    async with rig(pool, tmp_path, overrides=overrides) as r:
        op_id = await r.submit("lost_create_response", duration=0.2, hang_seconds=5)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=20) is S.SUCCEEDED
        op = await ledger.load_operation(pool, op_id)
        assert op.create_attempts == 1, "a create without idempotency must not be re-sent"
        lookups = await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE call_kind = 'lookup' AND remote_job_id = $1",
            op.remote_job_id,
        )
        assert lookups == 1
        assert (await r.stats())["jobs_total"] == 1


async def test_uncertain_create_without_idempotency_or_lookup_escalates(
    pool: Any, tmp_path: Path
) -> None:
    overrides = {"create": {"idempotency": "none"}, "lookup": {"supported": False}}
    async with rig(pool, tmp_path, overrides=overrides) as r:
        op_id = await r.submit("lost_create_response", hang_seconds=5)
        assert await r.settle(op_id, {S.NEEDS_ATTENTION}, timeout=20) is S.NEEDS_ATTENTION
        op = await ledger.load_operation(pool, op_id)
        assert op.create_attempts == 1
        assert "cannot be retried safely" in (await _escalation(pool, op_id))["reason"]


async def test_token_conflict_goes_to_needs_attention_keeping_both_answers(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("token_conflict", hang_seconds=5)
        assert await r.settle(op_id, {S.NEEDS_ATTENTION}, timeout=20) is S.NEEDS_ATTENTION
        escalation = await _escalation(pool, op_id)
        job_ids = set(escalation["details"]["remote_job_ids"])
        assert len(job_ids) == 2
        bodies = " ".join(
            r[0]
            for r in await pool.fetch(
                "SELECT response_body FROM provider_calls WHERE operation_id = $1"
                " AND response_body IS NOT NULL",
                op_id,
            )
        )
        assert all(j in bodies for j in job_ids)  # both provider answers are on record
        op = await ledger.load_operation(pool, op_id)
        assert op.remote_job_id in job_ids  # the first answer recorded, never overwritten


async def test_definitive_rejection_fails_with_the_providers_error(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("reject")
        assert await r.settle(op_id, {S.FAILED}) is S.FAILED
        op = await ledger.load_operation(pool, op_id)
        assert op.last_error["status"] == 422 and op.remote_job_id is None


async def test_create_5xx_is_ambiguous_then_retried_with_the_same_token(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("create_5xx", duration=0.1)
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        assert "create_unknown" in await _history(pool, op_id)
        assert (await r.stats())["jobs_total"] == 1


async def test_synchronous_result_is_recorded_differently(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("sync")
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        op = await ledger.load_operation(pool, op_id)
        assert op.create_mode == "sync"
        assert await _history(pool, op_id) == ["create_pending", "result_collecting", "succeeded"]


async def test_partial_result_records_counts_and_failed_items(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("partial", duration=0.1, total=50, failed=2)
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        op = await ledger.load_operation(pool, op_id)
        assert op.result_summary["items_failed"] == 2
        assert op.result_summary["items_succeeded"] == 48
        failures = await pool.fetchval(
            "SELECT count(*) FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert failures == 2


async def test_invalid_result_is_never_success(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        bad = await r.submit("invalid_result", duration=0.1)
        mismatch = await r.submit("checksum_mismatch", duration=0.1)
        for op_id in (bad, mismatch):
            assert await r.settle(op_id, {S.RESULT_VALIDATION_FAILED, S.SUCCEEDED}) is (
                S.RESULT_VALIDATION_FAILED
            )
        reason = (await _escalation(pool, mismatch))["reason"].lower()
        assert "digest" in reason


async def test_expired_result_link_is_result_unavailable(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("expiring_result", duration=0.1, result_ttl=0.0)
        assert await r.settle(op_id, {S.RESULT_UNAVAILABLE, S.SUCCEEDED}) is S.RESULT_UNAVAILABLE
        assert (await _escalation(pool, op_id))["state"] == "result_unavailable"


async def test_confirmed_cancellation(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("never_finishes")
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            state = await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="x")
        assert state is S.CANCEL_REQUESTED
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        op = await ledger.load_operation(pool, op_id)
        assert (await r.stats())["cancels_per_job"] == {op.remote_job_id: 1}
        assert await _history(pool, op_id) == [
            "create_pending",
            "accepted",
            "observing",
            "cancel_requested",
            "cancelling",
            "cancelled",
        ]


async def test_result_arriving_during_a_cancel_race_is_collected(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("cancel_race", duration=30)
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="stop")
        assert await r.settle(op_id, {S.SUCCEEDED, S.CANCELLED}) is S.SUCCEEDED
        assert await _history(pool, op_id) == [
            "create_pending",
            "accepted",
            "observing",
            "cancel_requested",
            "cancelling",
            "result_collecting",
            "succeeded",
        ]


async def test_unconfirmed_cancellation_escalates(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("cancel_unconfirmed")
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="human:ann", reason="stop", cancel_deadline_s=0.5
            )
        assert await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED}) is S.CANCELLATION_UNCONFIRMED
        escalation = await _escalation(pool, op_id)
        assert escalation["details"]["trace_id"]
        assert any(c["kind"] == "cancel" for c in escalation["details"]["recent_calls"])


async def test_cancel_requested_before_the_job_id_is_known_is_honoured(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("lost_create_response", duration=30, hang_seconds=5)
        await r.settle(op_id, {S.CREATE_UNKNOWN}, timeout=20)
        async with pool.acquire() as conn:
            state = await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="x")
        assert state is S.CANCEL_REQUESTED
        assert await r.settle(op_id, {S.CANCELLED}, timeout=20) is S.CANCELLED
        assert (await r.stats())["jobs_total"] == 1


async def test_stale_lease_holder_cannot_write(pool: Any, tmp_path: Path, clock: TestClock) -> None:
    async with (
        rig(pool, tmp_path, lease_seconds=0.3, clock=clock) as old,
        rig(pool, tmp_path, worker_id="w2", lease_seconds=10, clock=clock) as new,
    ):
        op_id = await old.submit("success", duration=0.1)
        [claimed] = await old.reconciler.claim(10)  # old worker claims, then stalls
        await clock.advance(0.4)  # its lease lapses
        assert (await new.reconciler.run_once())["claimed"] == 1  # rescued by the new worker
        assert await old.reconciler.process(claimed.op) == "lease_lost"
        assert await new.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        actors = await pool.fetch(
            "SELECT DISTINCT actor FROM history WHERE operation_id = $1 AND seq > 1", op_id
        )
        assert [a[0] for a in actors] == ["reconciler:w2"]


async def test_run_once_tops_up_a_full_batch_while_it_drains(pool: Any, tmp_path: Path) -> None:
    slow_backoff = {"limits": {"backoff_base": 5.0, "backoff_cap": 10.0}}  # not due again soon
    async with rig(pool, tmp_path, overrides=slow_backoff) as r:
        ids = [await r.submit("never_finishes") for _ in range(10)]
        counts = await r.reconciler.run_once(4)
        assert counts["claimed"] == 10  # one batch of 4, topped up until nothing was due
        assert (await r.reconciler.run_once(4))["claimed"] == 0
        assert {await r.state(i) for i in ids} <= {S.ACCEPTED, S.OBSERVING}


async def test_a_stopping_reconciler_claims_nothing_more(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock) as r:
        ids = [await r.submit("never_finishes") for _ in range(6)]
        first = await r.reconciler.run_once(2)  # one batch of 2, topped up while it drains
        assert first["claimed"] >= 6
        await clock.advance(0.4)  # all due again (the rig's backoff is at most 0.3 s)
        r.reconciler.stop_claiming()  # SIGTERM: batches finish, none is started or topped up
        assert (await r.reconciler.run_once(2))["claimed"] == 0
        due = await pool.fetchval(
            "SELECT count(*) FROM operations WHERE operation_id = ANY($1)"
            " AND next_poll_at <= jw_now() AND lease_owner IS NULL",
            ids,
        )
        assert due == 6  # left for the next process, unleased


async def test_a_cancelled_run_once_leaves_no_step_running(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Shutdown past its grace cancels the sweep: its steps must end before leases are released."""
    async with rig(pool, tmp_path, clock=clock, sim=SimulatorSettings(status_latency=0.5)) as r:
        for _ in range(4):
            await r.submit("never_finishes")
        await r.reconciler.run_once()  # the creates; their first reads are due within 0.3 s
        await clock.advance(0.4)
        sweep = asyncio.ensure_future(r.reconciler.run_once())

        async def all_reads_arrived() -> bool:  # counted on arrival, answered 0.5 s later
            return sum((await r.stats())["status_calls_per_job"].values()) == 4

        await wait_for(all_reads_arrived, 5, "the four slow reads to be in flight")
        assert not sweep.done()
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sweep
        steps = [
            t
            for t in asyncio.all_tasks()
            if getattr(t.get_coro(), "__qualname__", "") == "Reconciler.process"
        ]
        assert steps == []


async def test_a_cancel_that_never_left_is_sent_again_even_if_not_idempotent(
    pool: Any, tmp_path: Path
) -> None:
    once_only = {"cancel": {"idempotent": False}}
    async with rig(pool, tmp_path, overrides=once_only) as r:
        op_id = await r.submit("never_finishes")
        await r.settle(op_id, {S.OBSERVING})
        reachable = r.ctx.adapters
        # The provider refuses connections (port 1) while the first cancel is tried.
        r.ctx.adapters = build_adapters(sim_providers("http://127.0.0.1:1", overrides=once_only))
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="x")
        await r.reconciler.run_once()
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.CANCEL_REQUESTED and op.cancel_attempts == 1
        assert op.cancel_sent_at is None  # it never left: not "sent, outcome unknown"
        r.ctx.adapters = reachable
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        assert (await r.stats())["cancels_per_job"] == {op.remote_job_id: 1}


async def test_a_cancel_that_never_leaves_stops_for_a_human_at_its_deadline(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A cancel unsafe to repeat is "not sent" while it never leaves (a connect
    failure), so it may be tried again; its deadline must still stop it. Before,
    the deadline applied only once a cancel was sent: a provider unreachable for
    good kept the operation in cancel_requested for ever, retried, no human told."""
    once_only = {"cancel": {"idempotent": False}}
    async with rig(pool, tmp_path, overrides=once_only, clock=clock) as r:
        op_id = await r.submit("never_finishes")
        await r.settle(op_id, {S.OBSERVING})
        # The provider refuses every connection from now on (port 1).
        r.ctx.adapters = build_adapters(sim_providers("http://127.0.0.1:1", overrides=once_only))
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="human:ann", reason="x", cancel_deadline_s=30.0
            )
        await r.reconciler.run_once()
        op = await ledger.load_operation(pool, op_id)
        assert (op.state, op.cancel_sent_at) == (S.CANCEL_REQUESTED, None)
        # past the deadline and the grace its look waits for a read
        await clock.advance(30.0 + DEADLINE_READ_GRACE_S + 1)
        for _ in range(4):
            await r.reconciler.run_once()
            await clock.advance(ERROR_RETRY_SECONDS)
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.CANCELLATION_UNCONFIRMED, op.state
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
        )
        assert "no cancel request reached the provider" in cause, cause
        assert (await r.stats())["cancels_per_job"] == {}


async def test_an_empty_lookup_proves_absence_only_long_after_the_create_ended(
    pool: Any, tmp_path: Path
) -> None:
    """A create is recorded before its wait for a provider slot: it may leave much later."""
    async with rig(pool, tmp_path) as r:
        op_id = await r.submit("success")
        call_id = await call(pool, op_id, "create", 503)
        await pool.execute(  # recorded 60 s ago, ended just now (settle: 4 x 1 s timeout)
            "UPDATE provider_calls SET started_at = now() - interval '60 seconds',"
            " finished_at = now() WHERE call_id = $1",
            call_id,
        )
        [claimed] = await r.reconciler.claim(1)
        adapter = r.ctx.adapter("sim")
        assert adapter is not None
        step = Step(r.ctx, claimed.op, adapter, claimed.op.lease_fence)
        async with pool.acquire() as conn:
            assert not await _absence_settled(step, conn)
            await conn.execute(
                "UPDATE provider_calls SET finished_at = now() - interval '5 seconds'"
                " WHERE call_id = $1",
                call_id,
            )
            assert await _absence_settled(step, conn)


@pytest.mark.parametrize(
    ("earlier", "outcome"),
    [("connect", S.SUCCEEDED), ("timeout", S.RESULT_UNAVAILABLE)],
)
async def test_a_side_effecting_result_is_fetched_again_only_if_no_fetch_could_have_arrived(
    pool: Any, tmp_path: Path, clock: TestClock, earlier: str, outcome: LocalState
) -> None:
    consuming = {"result": {"side_effects": True}}
    async with rig(pool, tmp_path, overrides=consuming, clock=clock) as r:
        op_id = await r.submit("success", duration=1.0)
        await r.settle(op_id, {S.OBSERVING})
        await drive(pool, op_id, S.RESULT_COLLECTING)
        # An earlier attempt: one that never connected consumed nothing; one that
        # timed out may have consumed the result.
        started = await evidence.start_call(
            pool, evidence.CallStart(op_id, "result", 1, "test", "GET", "http://sim/r", {})
        )
        await evidence.finish_call(
            pool, started, evidence.CallAnswer(duration_ms=1, error_category=earlier)
        )
        await pool.execute(
            "UPDATE operations SET result_attempts = 1,"
            " next_poll_at = jw_now() + interval '1 second' WHERE operation_id = $1",
            op_id,
        )
        await clock.advance(1.1)  # the job has finished at the provider
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_UNAVAILABLE}) is outcome


async def test_a_cancel_safe_to_repeat_that_never_left_is_not_called_maybe_delivered(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """A cancel safe to repeat (`cancel.idempotent = true`) stays "sent" after a
    connect failure, so at its deadline the newest cancel call has no answer; but
    it never left (no connection), nor did any before it. The reason said "our
    cancel request got no answer (connect): it may have reached the provider, so
    whether the provider took it is unknown", of a request that provably reached
    nothing: it must say no cancel request reached the provider."""
    async with rig(pool, tmp_path, clock=clock) as r:
        op_id = await r.submit("never_finishes")
        await r.settle(op_id, {S.OBSERVING})
        # The provider refuses every connection from now on (port 1).
        r.ctx.adapters = build_adapters(sim_providers("http://127.0.0.1:1"))
        async with pool.acquire() as conn:
            await ledger.request_cancel(
                conn, op_id, requested_by="human:ann", reason="x", cancel_deadline_s=30.0
            )
        await r.reconciler.run_once()
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.CANCEL_REQUESTED and op.cancel_sent_at is not None
        # past the deadline and the grace its look waits for a read
        await clock.advance(30.0 + DEADLINE_READ_GRACE_S + 1)
        for _ in range(4):
            await r.reconciler.run_once()
            await clock.advance(ERROR_RETRY_SECONDS)
        op = await ledger.load_operation(pool, op_id)
        assert op.state is S.CANCELLATION_UNCONFIRMED, op.state
        categories = await pool.fetch(
            "SELECT error_category FROM provider_calls"
            " WHERE operation_id = $1 AND call_kind = 'cancel'",
            op_id,
        )
        assert categories and {c[0] for c in categories} == {"connect"}
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
        )
        assert "may have reached the provider" not in cause, cause
        assert "no cancel request reached the provider" in cause, cause
        assert (await r.stats())["cancels_per_job"] == {}
