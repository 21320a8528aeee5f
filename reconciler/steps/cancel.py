"""Sending the cancel: once, by the lease owner, and never mistaken for its outcome.

`cancelling` means the provider accepted our request; only an observation of
a remote terminal state ends it — cancelled, or succeeded/failed if the job
crossed its commit point first. A provider with no cancel endpoint sends the
operation straight to cancellation_unconfirmed, saying why.
"""

from __future__ import annotations

from typing import Any

from reconciler.calls import imposed_wait
from reconciler.step import NOW, Delay, Step
from reconciler.steps.poll import step_poll
from shared import ledger
from shared.ledger.states import Evidence, LocalState
from shared.providers import may_have_been_delivered

S = LocalState


class _ReadStatus:
    """Marker: what to do next is a status read."""


READ_STATUS = _ReadStatus()


async def step_cancel(step: Step) -> Delay:
    # The connection is given back before a status read, which takes its own:
    # holding one while waiting for another could exhaust the pool.
    held = step.held_back()
    if held is not None:
        return held
    async with step.ctx.pool.acquire() as conn:
        outcome = await _cancel(step, conn)
    if isinstance(outcome, _ReadStatus):
        return await step_poll(step)
    return outcome


async def _cancel(step: Step, conn: Any) -> Delay | _ReadStatus:
    desc = step.adapter.desc
    op = step.op
    assert op.remote_job_id is not None
    if op.cancel_deadline and step.now() >= op.cancel_deadline:
        return READ_STATUS  # the poll step reads, then applies the cancel deadline
    if not desc.cancel.supported:
        async with conn.transaction():
            await step.move(
                conn,
                S.CANCELLATION_UNCONFIRMED,
                f"provider {desc.name} has no cancel endpoint: {desc.cancel.reason or 'n/a'}",
            )
        return READ_STATUS
    if op.cancel_sent_at is not None and not desc.cancel.idempotent:
        # Sent before a crash, outcome unknown, and repeating it is not safe:
        # observe instead; the status read settles it.
        return READ_STATUS
    req = step.adapter.build_cancel(op.remote_job_id)
    async with conn.transaction():  # recovery point: from here on, it may have been sent
        attempt = await ledger.record_cancel_sent(conn, op.operation_id, fence=step.fence)
        call_id = await step.begin_call(conn, req, "cancel", attempt)
    sent = await step.send(req, conn)
    fact = step.adapter.parse_cancel(sent.response, step.now()) if sent.response else None
    await step.end_call(
        conn,
        call_id,
        sent,
        provider_request_id=fact.provider_request_id if fact else None,
        wait=imposed_wait(fact.retry_after_seconds) if fact else None,
    )
    failure = sent.transport_failure
    if failure is not None and not may_have_been_delivered(failure):
        if not desc.cancel.idempotent:
            # This was the first cancel (see above): it never left, so it is
            # not "sent" and may be made again.
            await ledger.record_cancel_not_sent(conn, op.operation_id, fence=step.fence)
        return step.until_allowed(step.backoff(attempt))
    if fact is not None and fact.kind == "accepted":
        async with conn.transaction():
            await step.reload(conn)
            await step.move(
                conn,
                S.CANCELLING,
                "cancel request accepted by the provider",
                (Evidence.CALL, call_id),
            )
        return step.until_allowed(NOW)
    uncertain = fact is None or fact.kind == "ambiguous"
    if uncertain and desc.cancel.idempotent:
        retry_after = fact.retry_after_seconds if fact else None
        return step.until_allowed(step.backoff(attempt, retry_after))
    # rejected (e.g. already finished) or not found: a status read tells what happened
    if step.held_back() is not None:
        return step.until_allowed(NOW)
    return READ_STATUS
