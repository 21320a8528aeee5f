"""Backstop status reads, the final read, and the result deadline.

Each read appends an observation. Progress is recorded, never trusted: only a
terminal state read by us moves the operation (webhooks only make us read
sooner). Retry-After and poll_after_seconds are honoured; 429/503 are
back-pressure, not failure.
"""

from __future__ import annotations

from typing import Any

from reconciler.recording import poll_row, record_call, record_poll
from reconciler.step import NOW, Delay, Step, utcnow
from reconciler.steps.collect import collect_partial_output
from shared.ledger.states import Evidence, LocalState, RemoteState
from shared.providers import StatusFact

S = LocalState
# A job the provider says does not exist may be a read racing its creation;
# a few misses in a row is a contradiction a human must look at.
NOT_FOUND_TOLERANCE = 3
# Once cancellation is unconfirmed we keep reading, slowly, in case it settles.
UNCONFIRMED_POLL_SECONDS = 300.0

TERMINAL_TARGET = {
    RemoteState.SUCCEEDED: S.RESULT_COLLECTING,
    RemoteState.PARTIALLY_SUCCEEDED: S.RESULT_COLLECTING,
    RemoteState.FAILED: S.FAILED,
    RemoteState.CANCELLED: S.CANCELLED,
}


async def step_poll(step: Step) -> Delay:
    # The hot path: no database connection is held while the provider answers.
    if _deadline_due(step):
        async with step.ctx.pool.acquire() as conn:
            return await _deadlines(step, conn)
    assert step.op.remote_job_id is not None
    req = step.adapter.build_status(step.op.remote_job_id, step.op.status_url)
    sent = await step.send(req)
    if sent.response is None:
        async with step.ctx.pool.acquire() as conn:
            await record_call(
                conn,
                step.op,
                req,
                "status",
                step.op.poll_attempts + 1,
                step.worker,
                step.fence,
                sent,
            )
        return step.backoff(step.op.poll_attempts)
    fact = step.adapter.parse_status(sent.response, utcnow())
    if _nothing_to_decide(step, fact):
        # The common read: recorded, lease handed back, by the group-commit writer.
        delay = _next_read(step, fact)
        await step.ctx.polls.record(
            poll_row(step.op, step.fence, step.worker, req, sent, fact, release_after=delay)
        )
        step.released = True
        return delay
    async with step.ctx.pool.acquire() as conn:
        if fact.remote_state is RemoteState.CANCELLED and (fact.result_url or fact.result_file_ids):
            await collect_partial_output(step, conn, sent.response, fact)
        async with conn.transaction():
            observation_id, _ = await record_poll(
                conn, step.op, step.fence, step.worker, req, sent, fact
            )
            return await _decide(step, conn, fact, observation_id)


def _nothing_to_decide(step: Step, fact: StatusFact) -> bool:
    """A read that moves nothing: already observing, not terminal, job still known."""
    return (
        step.op.state is not S.ACCEPTED
        and (fact.remote_state is None or fact.remote_state not in TERMINAL_TARGET)
        and not fact.not_found
    )


def _next_read(step: Step, fact: StatusFact) -> float:
    if step.op.state is S.CANCELLATION_UNCONFIRMED:
        return UNCONFIRMED_POLL_SECONDS
    return step.backoff(step.op.poll_attempts, fact.retry_after_seconds, fact.poll_after_seconds)


def _deadline_due(step: Step) -> bool:
    op = step.op
    now = utcnow()
    if op.state in (S.ACCEPTED, S.OBSERVING):
        return now >= op.result_deadline
    if op.state in (S.CANCEL_REQUESTED, S.CANCELLING):
        return op.cancel_deadline is not None and now >= op.cancel_deadline
    return False


async def _deadlines(step: Step, conn: Any) -> Delay:
    now = utcnow()
    op = step.op
    if op.state in (S.ACCEPTED, S.OBSERVING) and now >= op.result_deadline:
        async with conn.transaction():
            await step.move(
                conn,
                S.RESULT_TIMED_OUT,
                "result deadline passed; automatic observation stopped (the remote job may "
                "still be running)",
            )
        return None
    if (
        op.state in (S.CANCEL_REQUESTED, S.CANCELLING)
        and op.cancel_deadline
        and (now >= op.cancel_deadline)
    ):
        async with conn.transaction():
            await step.move(
                conn,
                S.CANCELLATION_UNCONFIRMED,
                "cancel deadline passed without a remote confirmation",
            )
        return UNCONFIRMED_POLL_SECONDS
    return NOW


async def _decide(step: Step, conn: Any, fact: StatusFact, observation_id: int) -> Delay:
    if step.op.state is S.ACCEPTED:
        await step.move(conn, S.OBSERVING, "first observation")
    target = TERMINAL_TARGET.get(fact.remote_state) if fact.remote_state else None
    if target is not None:
        cause = f"status read: remote {fact.raw_state or fact.remote_state}"
        await step.move(conn, target, cause, (Evidence.OBSERVATION, observation_id))
        return NOW if target is S.RESULT_COLLECTING else None
    if fact.not_found:
        misses = step.op.poll_attempts  # record_poll already counted this read
        if misses >= NOT_FOUND_TOLERANCE:
            await step.move(
                conn, S.NEEDS_ATTENTION, f"provider says job {step.op.remote_job_id} does not exist"
            )
            return None
    return _next_read(step, fact)
