"""Sending the cancel: once, by the lease owner, and never mistaken for its outcome.

`cancelling` means the provider accepted our request; only an observation of
a remote terminal state ends it — cancelled, or succeeded/failed if the job
crossed its commit point first. For a provider with no cancel endpoint
nothing is sent: the job is read on in cancel_requested until it ends by
itself or the cancel deadline passes (then cancellation_unconfirmed, saying
why).

A provider whose cancel harms a job that already ended (`cancel.read_first`:
Runway's DELETE deletes a finished task and its output) has the job's status
read under the same lease right before each cancel; a job that ended gets no
cancel, and the read is acted on as any read would be.
"""

from __future__ import annotations

from typing import Any

from reconciler.calls import NEVER_LEFT, imposed_wait
from reconciler.readings import cancel_refusal, read_cancel
from reconciler.step import NOW, Delay, Step
from reconciler.steps.poll import (
    UNCONFIRMED_POLL_SECONDS,
    StillRunning,
    passed_deadline,
    read_before_cancel,
    step_poll,
)
from shared import ledger
from shared.db.queries import q
from shared.ledger.states import Evidence, LocalState, RemoteState
from shared.providers import RequestBuildError, may_have_been_delivered

S = LocalState
# Answers that mean "not now": their Retry-After holds back every call.
BACK_PRESSURE_CODES = frozenset({429, 503})


async def _act_on_recorded_cancel(step: Step, conn: Any) -> Delay | None:
    """A cancel answer on record that nobody acted on (we died between the two).

    An accepted cancel is acted on now (cancelling); if every cancel so far
    provably never left, none was sent and one may be sent. None: go on as usual.
    """
    calls = await conn.fetch(q("cancel_calls"), step.op.operation_id)
    if not calls:
        return None
    if all(c["error_category"] in NEVER_LEFT for c in calls):
        await ledger.record_cancel_not_sent(conn, step.op.operation_id, fence=step.fence)
        await step.reload(conn)
        return None
    last = calls[0]
    if step.op.state is not S.CANCEL_REQUESTED:
        return None
    if last["status_code"] not in step.adapter.desc.cancel.accepted_statuses or (
        await _refused_in_its_body(step, conn, last)
    ):
        return await _refused_while_running(step, conn, last)
    async with conn.transaction():
        await step.reload(conn)
        await step.move(
            conn,
            S.CANCELLING,
            "cancel request accepted by the provider (answer on record)",
            (Evidence.CALL, last["call_id"]),
        )
    return step.until_allowed(NOW)


async def _refused_while_running(step: Step, conn: Any, last: Any) -> Delay | None:
    """Our last cancel was refused, and the job still runs: say so, do not wait.

    A refusal (a 4xx other than not-found or "maybe not arrived") is followed
    by a status read in the same step; had that read shown an end, the
    operation would have moved on. If a read that answered after the refusal
    shows the job pending or running, the cancel will not happen by itself
    (Salesforce's 400 INVALIDJOB to a cancel sent without the body it needs):
    waiting for the cancel deadline would only hide the refusal until the job
    ends. The operation goes to cancellation_unconfirmed (an escalation, still
    read slowly, so the job's real end is recorded), its cause naming the
    provider's answer. A read held back or failed after the refusal proves
    nothing yet (the state on record may predate the cancel). None: not that
    case, go on as usual.
    """
    if last["status_code"] is None:
        return None
    call = await conn.fetchrow(
        q("cancel_call_and_read_after"), step.op.operation_id, last["call_id"]
    )
    running = (RemoteState.PENDING.value, RemoteState.RUNNING.value)
    if call is None or call["state_read_after"] not in running:
        return None
    refusal = cancel_refusal(step, call)
    if refusal is None:
        return None
    shown = step.op.remote_state_raw or call["state_read_after"]
    cause = f"{refusal}, and the status read after it still shows {shown!r}"
    async with conn.transaction():
        await step.reload(conn)
        await step.move(
            conn,
            S.CANCELLATION_UNCONFIRMED,
            cause,
            (Evidence.CALL, last["call_id"]),
            escalation=f"{cause}: the job goes on; decide whether to cancel it another way",
        )
    return step.until_allowed(UNCONFIRMED_POLL_SECONDS, read=True)


async def _refused_in_its_body(step: Step, conn: Any, last: Any) -> bool:
    """Whether an accepted status's cancel answer says the cancel was not taken
    (`cancel.refused_codes`: Baseten's 200 {"canceled": false}). Before, such an
    answer moved the operation to cancelling, to wait out the cancel deadline
    while the job ran on, the provider's refusal unsaid."""
    if not step.adapter.desc.cancel.refused_codes or last["status_code"] is None:
        return False
    call = await conn.fetchrow(
        q("cancel_call_and_read_after"), step.op.operation_id, last["call_id"]
    )
    return call is not None and cancel_refusal(step, call) is not None


class _ReadStatus:
    """Marker: what to do next is a status read."""


READ_STATUS = _ReadStatus()


async def step_cancel(step: Step) -> Delay:
    # The connection is given back before a status read, which takes its own:
    # holding one while waiting for another could exhaust the pool.
    if passed_deadline(step) is not None and await _cancel_tried(step):
        return await step_poll(step)  # it reads (or waits within the grace), then decides
    held = step.held_back()
    if held is not None:
        return held
    read_first = step.adapter.desc.cancel.read_first
    async with step.ctx.pool.acquire() as conn:
        outcome = await _cancel_due(step, conn)
        if outcome is None and not read_first:
            outcome = await _send_cancel(step, conn)
    if outcome is None:
        outcome = await _read_then_cancel(step)
    if isinstance(outcome, _ReadStatus):
        return await step_poll(step)
    return outcome


async def _cancel_tried(step: Step) -> bool:
    """Has a cancel been tried, so that its deadline now decides?

    One sent (`cancel_sent_at`), or one that never left: a cancel unsafe to
    repeat is then "not sent" (it may be made again), and its deadline used to
    apply only once one was sent, so a provider unreachable for good kept the
    operation in cancel_requested for ever, retried, no human told. A cancel
    never tried is tried once, however late (the reconciler was down, say).
    """
    if step.op.cancel_sent_at is not None:
        return True
    async with step.ctx.pool.acquire() as conn:
        return await conn.fetchrow(q("cancel_calls"), step.op.operation_id) is not None


async def _read_then_cancel(step: Step) -> Delay | _ReadStatus:
    """`cancel.read_first`: a status read, under this lease, decides whether the cancel goes.

    A cancel that deletes a finished job (and its billed result) must not
    reach one: the read comes first, and only a job it shows pending or
    running is cancelled. A job it shows ended is acted on as by any read (a
    success is collected), and none is sent; a read that got no answer, a
    miss, or an answer asking us to wait is tried again later, still before
    any cancel. The window between the read's answer and the cancel's
    arrival remains: narrowed, not closed.
    """
    read = await read_before_cancel(step)
    if not isinstance(read, StillRunning):
        return read
    held = step.held_back()  # the read's answer may have asked us to wait
    if held is not None:
        return held
    async with step.ctx.pool.acquire() as conn:
        return await _send_cancel(step, conn)


async def _cancel_due(step: Step, conn: Any) -> Delay | _ReadStatus | None:
    """What to do instead of sending a cancel, or None when one is due.

    A cancel on record is acted on first (its answer, or its deadline); a
    provider without a cancel endpoint, or one whose cancel is unsafe to
    repeat, is observed instead.
    """
    desc = step.adapter.desc
    if step.op.cancel_sent_at is not None:
        acted = await _act_on_recorded_cancel(step, conn)
        if acted is not None:
            return acted
    op = step.op
    # (a passed cancel deadline is step_cancel's to act on, before any of this)
    if not desc.cancel.supported:
        # Nothing can be sent. The job is read as before, in cancel_requested:
        # an end it reaches by itself is reported as it is (a success
        # collected, a failure), and the cancel deadline, once passed, stops
        # it for a human, saying why (poll.passed_deadline). It went to
        # cancellation_unconfirmed at once: "not confirmed before the
        # deadline" and `done` to the agent, then moved on its own when the
        # job ended, which `done` promises never happens.
        return READ_STATUS
    if op.cancel_sent_at is not None and not desc.cancel.idempotent:
        # Sent before a crash, outcome unknown, and repeating it is not safe:
        # observe instead; the status read settles it.
        return READ_STATUS
    return None


async def _send_cancel(step: Step, conn: Any) -> Delay | _ReadStatus:
    """Send the cancel that `_cancel_due` found due, and act on its answer."""
    desc = step.adapter.desc
    op = step.op
    assert op.remote_job_id is not None
    try:
        req = (
            step.adapter.build_cancel(op.remote_job_id, status_url=op.status_url)
            if desc.cancel.use_status_url  # a plugin's own build_cancel may not take it
            else step.adapter.build_cancel(op.remote_job_id)
        )
    except RequestBuildError as exc:  # a job id no URL can carry, say
        return await step.cannot_build(
            conn,
            f"the cancel request cannot be built from what is on record: {exc}; "
            "this cancel request was not sent",
        )
    async with conn.transaction():  # recovery point: from here on, it may have been sent
        attempt = await ledger.record_cancel_sent(conn, op.operation_id, fence=step.fence)
        call_id = await step.begin_call(conn, req, "cancel", attempt)
    sent = await step.send(req, conn)
    fact = read_cancel(step, sent.response) if sent.response else None
    failure = sent.transport_failure
    never_left = failure is not None and not may_have_been_delivered(failure)
    async with conn.transaction():  # the outcome and what it means for "sent", together
        await step.end_call(
            conn,
            call_id,
            sent,
            provider_request_id=fact.provider_request_id if fact else None,
            wait=imposed_wait(fact.retry_after_seconds) if fact else None,
        )
        not_taken = fact is not None and fact.status_code in desc.cancel.resend_statuses
        if (never_left or not_taken) and not desc.cancel.idempotent:
            # This was the first cancel (see above): it never left, or the
            # provider says it did not take it, so it is not "sent" and may be
            # made again.
            await ledger.record_cancel_not_sent(conn, op.operation_id, fence=step.fence)
    if never_left:
        return step.until_allowed(step.retry(attempt))
    if not_taken:
        assert fact is not None
        return step.until_allowed(step.retry(attempt, fact.retry_after_seconds))
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
        return step.until_allowed(step.retry(attempt, retry_after))
    # rejected (e.g. already finished) or not found: a status read tells what happened
    if step.held_back() is not None:
        return step.until_allowed(NOW)
    return READ_STATUS
