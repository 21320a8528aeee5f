"""Backstop status reads, the final read, and the deadlines.

Each read appends an observation. Progress is recorded, never trusted: only a
terminal state read by us moves the operation (webhooks only make us read
sooner). Retry-After and poll_after_seconds are honoured, durably: they become
the row's not-before time, which nothing but a recorded operator override
moves a call before; 429/503 are back-pressure, not failure.

A deadline looks before it escalates: when the result or cancel deadline has
passed, the owner reads the status first (waiting for the provider's
not-before time if it ends within DEADLINE_READ_GRACE_S of the deadline), and
only a read that still shows nothing terminal — or no read possible within
that grace — escalates. A terminal state the provider already reported (a
webhook on record) is therefore never lost to a deadline.

A status read that cannot be built (no status URL on record, a job id no URL
can carry) stops the operation for a human at once (needs_attention): it
would be refused the same way on every claim, deadline or not.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler import forecast
from reconciler.calls import NEVER_LEFT, Sent, poll_hint, status_read
from reconciler.readings import cancel_refusal, read_status
from reconciler.step import NOW, Delay, Step, lease_lost
from reconciler.steps.collect import Partial, collect_partial_output
from shared.db import pgjson
from shared.db.errors import db_error_context, db_error_reason
from shared.db.queries import q
from shared.ledger import evidence, webhooks
from shared.ledger.decisions import DEADLINE_READ_GRACE_S
from shared.ledger.errors import StaleTransition
from shared.ledger.evidence import ROW_ERRORS, StatusRead
from shared.ledger.states import SCHEDULED, Evidence, LocalState, RemoteState
from shared.providers import HttpRequest, RequestBuildError, StatusFact
from shared.providers.description import ResultSource

S = LocalState
log = logging.getLogger("jobwarden.reconciler")
# A job the provider says does not exist may be a read racing its creation;
# a few misses in a row is a contradiction a human must look at.
NOT_FOUND_TOLERANCE = 3
# Answers (2xx) naming no state the description maps, in a row: a throttle
# carried in the body passes, a description that reads the wrong place (a
# path, an Accept header) never does, and the agent was told "running" until
# the result deadline, a day by default.
STATELESS_READS_TOLERANCE = 10
# Status reads refused (a 4xx that is no "not found" and no throttle: a revoked
# key's 401, a 406 for an Accept the provider will not serve), in a row: the
# agent was told "running" until the result deadline. As many as above.
REFUSED_READS_TOLERANCE = STATELESS_READS_TOLERANCE
# 4xx codes that say nothing lasting about our reads: a timeout, too early, a throttle.
PASSING_CLIENT_STATUSES = frozenset({408, 425, 429})
# Once cancellation is unconfirmed we keep reading, slowly, in case it settles.
UNCONFIRMED_POLL_SECONDS = 300.0

TERMINAL_TARGET = {
    RemoteState.SUCCEEDED: S.RESULT_COLLECTING,
    RemoteState.PARTIALLY_SUCCEEDED: S.RESULT_COLLECTING,
    RemoteState.FAILED: S.FAILED,
    RemoteState.CANCELLED: S.CANCELLED,
}
# A delivery reporting one of these is an end our reads must confirm; this many
# reads on the plain backoff try (about 10 minutes at the default 2 s x2 up to
# 60 s), then the backstop again.
ANNOUNCED_ENDS = [state.value for state in TERMINAL_TARGET]
CONFIRMING_READS = 10


@dataclass(frozen=True)
class Deadline:
    """A deadline that has passed, and where it sends the operation if nothing settles it."""

    at: datetime
    escalate_to: LocalState
    reason: str


# What a cancel deadline says of an answered cancel unsafe to repeat.
NOT_SENT_AGAIN = (
    "; it is not sent again (cancel.idempotent is false, and its answer is not one "
    "cancel.resend_statuses names)"
)


def passed_deadline(step: Step) -> Deadline | None:
    op = step.op
    now = step.now()
    if op.state in (S.ACCEPTED, S.OBSERVING) and now >= op.result_deadline:
        return Deadline(
            op.result_deadline,
            S.RESULT_TIMED_OUT,
            "result deadline passed; automatic observation stopped (the remote job may "
            "still be running)",
        )
    cancel_by = op.cancel_deadline
    cancelling = op.state in (S.CANCEL_REQUESTED, S.CANCELLING)
    if cancelling and cancel_by is not None and now >= cancel_by:
        cancel = step.adapter.desc.cancel
        cause = "cancel deadline passed without a remote confirmation"
        if cancel.supported and cancel.read_first and op.cancel_sent_at is None:
            cause = (
                "cancel deadline passed and no status read showed the job pending or "
                "running, so no cancel was sent (cancel.read_first sends one only after "
                "such a read), or no cancel request reached the provider"
            )
        elif cancel.supported and op.cancel_sent_at is None and cancel.resend_statuses:
            codes = ", ".join(str(code) for code in sorted(cancel.resend_statuses))
            cause = (
                "cancel deadline passed and no cancel request was taken: each attempt "
                f"failed before it left or was answered {codes} (cancel.resend_statuses: "
                "not taken), so no cancel is in effect"
            )
        elif cancel.supported and op.cancel_sent_at is None:
            cause = (
                "cancel deadline passed and no cancel request reached the provider (each "
                "attempt failed before it left), so no cancel was sent"
            )
        elif cancel.supported and op.state is S.CANCEL_REQUESTED:
            # Sent, but its answer never moved us to cancelling: refused,
            # throttled or unanswered (a 429 from Together's POST /cancel).
            cause = (
                "cancel deadline passed and our cancel request was not accepted (its "
                "answer is on record: an error, back-pressure or none)"
            )
            if not cancel.idempotent:
                cause += NOT_SENT_AGAIN
        elif not cancel.supported:
            cause = (
                f"cancel deadline passed and the job has not ended: provider "
                f"{step.adapter.desc.name} has no cancel endpoint ({cancel.reason or 'n/a'}), "
                "so no cancel was sent"
            )
        return Deadline(cancel_by, S.CANCELLATION_UNCONFIRMED, cause)
    return None


class StillRunning:
    """Marker: the read before a cancel is on record and shows the job has not
    ended; the lease is still held, so the cancel may go now."""


STILL_RUNNING = StillRunning()


async def step_poll(step: Step) -> Delay:
    outcome = await _read(step)
    assert not isinstance(outcome, StillRunning)
    return outcome


async def read_before_cancel(step: Step) -> Delay | StillRunning:
    """The status read a `read_first` cancel waits for, under the step's lease.

    It is the ordinary read, recorded as evidence like any other, and acted
    on the same way: an end it shows moves the operation (a success goes on
    to collection, as when a cancel's answer said "already finished"), a
    miss or no answer is read again later. Only a read showing the job still
    pending or running lets the cancel go (STILL_RUNNING), even past the
    cancel deadline. Any other read past it escalates as the deadline's look
    does (`cancellation_unconfirmed`, saying no cancel was sent): reads that
    never showed the job (a 503, a revoked key's 401, answers naming no
    state) kept the operation in `cancel_requested` for ever, no cancel sent
    and no human told.
    """
    return await _read(step, before_cancel=True)


async def _read(step: Step, *, before_cancel: bool = False) -> Delay | StillRunning:
    assert step.op.remote_job_id is not None
    try:
        req = step.adapter.build_status(step.op.remote_job_id, step.op.status_url)
    except RequestBuildError as exc:
        return await _cannot_read(step, exc)
    deadline = passed_deadline(step)
    held = step.held_back(read=True)
    if held is not None:
        if deadline is not None and not _can_wait(step, deadline, held):
            allowed_at = step.now() + timedelta(seconds=held)
            return await _escalate(
                step,
                deadline,
                "the provider asks us not to read again until "
                f"{allowed_at:%Y-%m-%dT%H:%M:%SZ}, past the deadline's grace",
            )
        return held  # the release drops the claim's mark: this read never left
    call_id = await _recorded_before_sending(step, req)
    sent = await step.send(req)
    if sent.refused is not None:
        return await _refused(step, req, sent, call_id)
    if sent.response is None:
        return await _unanswered(step, req, sent, call_id, deadline)
    read_as = _gone_by_our_cancel(step, read_status(step, sent.response))
    fact = _failed_by_our_cancel(step, read_as, await _our_cancel_unanswered(step, read_as))
    # a failed read taken for our cancel: no read "before" one, and said so
    ours_failed = fact.remote_state is not read_as.remote_state
    before_cancel = before_cancel and not ours_failed
    read = status_read(step.op, step.fence, step.worker, req, sent, fact, call_id=call_id)
    step.note_wait(read.not_before_seconds)
    step.note_poll_hint(poll_hint(fact))
    if before_cancel and _still_running(step, fact):
        return await _keep_before_cancel(step, read)
    if deadline is None and _nothing_to_decide(step, fact) and not _suspect(step, fact):
        # The common read: recorded, lease handed back, by the group-commit writer.
        delay = step.until_allowed(await _when_next(step, fact, step.ctx.pool), read=True)
        await step.ctx.polls.record(evidence.status_row(read, release_after=delay))
        step.released = True
        return delay
    async with step.ctx.pool.acquire() as conn:
        # The cancel (or a failure) settles once its output is kept (or given up),
        # not before: a terminal `cancelled` or `failed` would never be read again.
        if _offers_partial_output(step, fact) and (
            await collect_partial_output(step, conn, fact) is Partial.RETRY
        ):
            delay = step.until_allowed(step.retry(step.op.result_attempts), read=True)
            await evidence.record_status_read(conn, read, release_after=delay)
            step.released = True
            return delay
        async with conn.transaction():
            try:
                async with conn.transaction():  # a savepoint: a refused row spares the rest
                    written = await evidence.record_status_read(conn, read)
            except ROW_ERRORS as exc:
                return await _facts_refused(step, conn, read, exc)
            try:
                async with conn.transaction():  # a savepoint: a lost race spares the read
                    return await _decide(
                        step,
                        conn,
                        fact,
                        written.observation_id,
                        deadline,
                        before_cancel,
                        ours_failed=ours_failed,
                    )
            except StaleTransition:
                # Someone moved it meanwhile (an agent's cancel, an operator): the
                # read stays on record; look again under the same lease.
                await step.reload(conn)
                return NOW


async def _keep_before_cancel(step: Step, read: StatusRead) -> StillRunning:
    """The read before a cancel showed nothing ended: recorded, the lease kept.

    Facts the database refuses (see `_facts_refused`) keep the call without
    its observation: the job was still shown running, and refusing the
    cancel over a stored detail would refuse it on every claim.
    """
    async with step.ctx.pool.acquire() as conn, conn.transaction():
        try:
            async with conn.transaction():  # a savepoint: a refused row spares the call
                await evidence.record_status_read(conn, read)
        except ROW_ERRORS as exc:
            if not await _call_only(step, conn, read, exc):
                raise lease_lost(step.op.operation_id) from exc
        await step.reload(conn)
    return STILL_RUNNING


async def _cannot_read(step: Step, exc: RequestBuildError) -> Delay:
    """No status read can be built, so none (and no deadline's look) will ever be sent.

    Checked before any deadline: waiting out a grace for a read that cannot
    exist would only delay the human it ends with.
    """
    async with step.ctx.pool.acquire() as conn:
        return await step.cannot_build(
            conn, f"the status read cannot be built from what is on record: {exc}"
        )


def _offers_partial_output(step: Step, fact: StatusFact) -> bool:
    """A cancelled job's output to keep: one its status names (a link, file ids),
    or, where the description says a cancelled job keeps it there
    (`result.partial_on_cancel`: an Apify run aborted keeps the dataset items it
    wrote), whatever the job's own result path holds (a 404: nothing kept).

    And a failed job's failures, where the result is the list of them
    (`result.failures_only`) and its counts say items failed: Klaviyo's import
    `complete` with every profile failed is failed by its counts, and its
    import-errors are the only account of why each failed; not read, the agent
    heard "0 succeeded, 2 failed" and nothing more."""
    result = step.adapter.desc.result
    named = bool(fact.result_url or fact.result_file_ids)
    if fact.remote_state is RemoteState.FAILED and result.failures_only:
        return (named or result.source is ResultSource.PATH) and _items_failed(fact)
    if fact.remote_state is not RemoteState.CANCELLED:
        return False
    on_path = result.source is ResultSource.PATH and result.partial_on_cancel
    return named or on_path


def _items_failed(fact: StatusFact) -> bool:
    """Do the read's counts say some item failed (told, or total less successes)?"""
    counts = fact.counts
    if counts is None:
        return False
    if counts.failed is not None:
        return counts.failed > 0
    if counts.total is not None and counts.succeeded is not None:
        return counts.total > counts.succeeded
    return False


def _can_wait(step: Step, deadline: Deadline, held: float) -> bool:
    """Does the provider's window end within the deadline's grace?"""
    allowed_at = step.now() + timedelta(seconds=held)
    return allowed_at <= deadline.at + timedelta(seconds=DEADLINE_READ_GRACE_S)


async def _recorded_before_sending(step: Step, req: HttpRequest) -> int | None:
    """How this read is on record before it leaves.

    The read the claim marked needs nothing more (None: its row is written
    with its answer, and the mark covers a crash before that); a read the
    claim did not mark (one chained after a create or a cancel) is recorded
    now, and completed with its answer.
    """
    if step.read_marked:
        step.read_marked = False
        return None
    async with step.ctx.pool.acquire() as conn:
        return await step.begin_call(conn, req, "status", step.op.poll_attempts + 1)


async def _unanswered(
    step: Step, req: HttpRequest, sent: Sent, call_id: int | None, deadline: Deadline | None
) -> Delay:
    """No answer: recorded as such; a passed deadline escalates once its grace is over."""
    read = status_read(step.op, step.fence, step.worker, req, sent, None, call_id=call_id)
    if deadline is not None and step.now() >= deadline.at + timedelta(
        seconds=DEADLINE_READ_GRACE_S
    ):
        async with step.ctx.pool.acquire() as conn, conn.transaction():
            await evidence.record_status_read(conn, read)
            return await _escalate_on(
                step, conn, deadline, f"the last status read got no answer ({sent.error_category})"
            )
    delay = step.until_allowed(step.backoff(step.op.poll_attempts), read=True)
    await step.ctx.polls.record(evidence.status_row(read, release_after=delay))
    step.released = True
    return delay


async def _refused(step: Step, req: HttpRequest, sent: Sent, call_id: int | None) -> Delay:
    """The connection guard refused the read's host: it resolves to an internal address.

    Recorded as the connect failure it is; then the operation stops for a
    human at once, as for such an address written out (`_cannot_read`): the
    same DNS answers the same on every claim, and retrying (until the
    deadline, or for ever while a cancel awaited confirmation) only delayed
    the human it ended with. The read and the move commit together. If
    someone moved the operation while the read was refused (an agent's
    cancel), that move is acted on first, under the same lease: the cancel
    goes to the provider's own host, which the guard never refuses.
    """
    was = step.op.state
    read = status_read(step.op, step.fence, step.worker, req, sent, None, call_id=call_id)
    async with step.ctx.pool.acquire() as conn, conn.transaction():
        await evidence.record_status_read(conn, read)
        await step.reload(conn)  # the read's record locked the row: no move can follow it now
        if step.op.state is not was:
            return NOW if step.op.state in SCHEDULED else None
        await step.move(conn, S.NEEDS_ATTENTION, f"the status read cannot be sent: {sent.refused}")
    log.warning(
        "status read refused by the connection guard; escalated",
        extra={"ctx": {"operation_id": step.op.operation_id, "provider": step.op.provider}},
    )
    return None


def _still_running(step: Step, fact: StatusFact) -> bool:
    """A read that lets a `read_first` cancel go: it names the job pending or
    running. Any other (no answer, an error, back-pressure, a body without a
    state, not found) proves nothing about whether the job ended: it is
    recorded and acted on as any read, and the cancel waits for the next."""
    return fact.remote_state in (RemoteState.PENDING, RemoteState.RUNNING) and _nothing_to_decide(
        step, fact
    )


def _nothing_to_decide(step: Step, fact: StatusFact) -> bool:
    """A read that moves nothing: no first sight of the job, not terminal, job still known."""
    return (
        not _first_sight(step, fact)
        and (fact.remote_state is None or fact.remote_state not in TERMINAL_TARGET)
        and not fact.not_found
    )


def _first_sight(step: Step, fact: StatusFact) -> bool:
    """The read that moves `accepted` to `observing`: the first to name the job's state.

    `accepted` says only that the provider gave us a job id; `observing`, that
    a read of ours has seen the job. A read that saw nothing of it (refused,
    back-pressure, a 5xx, a body naming no state, a failed request carried in
    a 200, "not found", no answer) leaves it `accepted`: it is recorded,
    scheduled and counted toward a human as any read, but it told the agent
    nothing about the job, and moving on it said the job was being watched
    when no read had ever seen it. Only an answer names a state (its body, or
    a code `status.state_from_http_status` maps): the adapter leaves
    `remote_state` None for every other read.
    """
    return step.op.state is S.ACCEPTED and fact.remote_state is not None


def _watched(step: Step) -> bool:
    """The job's own end is what reads look for: `accepted` (no read has seen the
    job yet) or `observing`."""
    return step.op.state in (S.ACCEPTED, S.OBSERVING)


async def _when_next(step: Step, fact: StatusFact, db: Any) -> float:
    """`_next_read`, unless a delivery announced an end this read did not show.

    A provider's reads may lag behind its webhooks (a replica, a cache): the
    job is over, our read says it runs. Then the backstop is the wrong wait:
    the next reads follow the plain backoff until one confirms the end (only
    our own read moves the operation), at most CONFIRMING_READS of them; then
    the backstop again. One query, only with webhooks and only after a read
    that moved nothing to an end.
    """
    scheduled = _next_read(step, fact)
    if not step.callbacks or not (_watched(step) or step.op.state is S.CANCELLING):
        return scheduled
    op_id = step.op.operation_id
    # A read that counts toward a human (naming no state, refused) is read again
    # on the backoff too: at the backstop's pace, ten of them took longer than
    # the result deadline, and the agent was told "running" all along.
    suspect = _suspect(step, fact) is not None
    if not suspect and not await webhooks.end_announced(
        db, op_id, ANNOUNCED_ENDS, CONFIRMING_READS
    ):
        return scheduled
    confirming = step.confirming(
        step.op.poll_attempts, fact.retry_after_seconds, fact.poll_after_seconds
    )
    return min(scheduled, confirming)


def _next_read(step: Step, fact: StatusFact) -> float:
    if step.op.state is S.CANCELLATION_UNCONFIRMED:
        return UNCONFIRMED_POLL_SECONDS
    scheduled = step.backoff(
        step.op.poll_attempts, fact.retry_after_seconds, fact.poll_after_seconds
    )
    if step.op.state not in (S.ACCEPTED, S.OBSERVING):
        return scheduled  # a cancel awaiting confirmation: the job's end is not the news
    now = step.now()
    said = (fact.progress_completed, fact.progress_total, fact.progress_percent)
    done, step_size = forecast.fraction(*said), forecast.resolution(*said)
    desc = step.adapter.desc
    age = (now - step.op.created_at).total_seconds()
    # with webhooks, reads are a backstop for a lost delivery, as long as the job's
    # age says: an estimate (a date years off, milliseconds read as seconds) plays
    # no part there
    callbacks = step.callbacks  # the create's say: did it name our callback URL?
    estimate = None if callbacks else _provider_estimate(fact, now)
    end = estimate or _forecast_end(step, fact, now, done, step_size)
    wait = forecast.next_read(
        scheduled,
        None if end is None or end.earliest is None else (end.earliest - now).total_seconds(),
        None if end is None else (end.latest - now).total_seconds(),
        age=age,
        limits=desc.limits,
        webhooks=callbacks,
        imposed=fact.retry_after_seconds is not None,
        poll_after=fact.poll_after_seconds,
        quiet=forecast.quiet(done, step_size),
    )
    if estimate is not None:
        # no longer than the job's age, nor than the backoff's wait for a young
        # job: a wrong estimate (a date years off) costs at most a doubling
        wait = min(wait, max(scheduled, age))
    # An estimate that never runs out ("1 s left" on every answer) must not read
    # faster than the backoff alone would have, read for read.
    reads = step.op.poll_attempts + 1
    shortened = estimate is not None and wait < scheduled
    if shortened and reads >= forecast.backoff_reads_by(age, desc.limits):
        return scheduled
    return wait


def _provider_estimate(fact: StatusFact, now: datetime) -> forecast.Forecast | None:
    """The end the provider expects (`status.estimated_end`), read as a measured
    forecast with no width: the next read just after it, as for a narrow window
    of our own, and bounded as `_next_read` says. One the job has outlived says
    nothing: our own forecast, or the backoff, decides."""
    end = fact.estimated_end
    if end is None or end <= now:
        return None
    return forecast.Forecast(end, end)


def _forecast_end(
    step: Step, fact: StatusFact, now: datetime, done: float | None, step_size: float
) -> forecast.Forecast | None:
    """The job's forecast end, from the progress anchor stored on the operation (the
    first sample above zero) and this read's progress (`done` of 1, in steps of
    `step_size`)."""
    if done is None:
        return None
    at = fact.provider_updated_at or now
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    current = forecast.Sample(done, min(at, now), step_size)
    op = step.op
    anchor = None
    if op.progress_anchor is not None and op.progress_anchor_at is not None:
        # stored as shown (rounded down), like `done` before its half step
        shown = op.progress_anchor + (step_size / 2 if op.progress_anchor < 1 else 0.0)
        anchor = forecast.Sample(min(shown, 1.0), op.progress_anchor_at, step_size)
    return forecast.predict_end(anchor, current, op.created_at)


async def _decide(
    step: Step,
    conn: Any,
    fact: StatusFact,
    observation_id: int | None,
    deadline: Deadline | None,
    before_cancel: bool = False,
    *,
    ours_failed: bool = False,
) -> Delay:
    assert observation_id is not None
    if _first_sight(step, fact):
        await step.move(conn, S.OBSERVING, "first observation")
    target = TERMINAL_TARGET.get(fact.remote_state) if fact.remote_state else None
    if target is not None:
        cause = f"status read: remote {fact.raw_state or fact.remote_state}"
        if before_cancel:
            cause += _ended_before_cancel(step)
        elif target is S.CANCELLED:
            cause += await _cancelled_by_whom(step, conn, ours_failed)
        await step.move(conn, target, cause, (Evidence.OBSERVATION, observation_id))
        return NOW if target is S.RESULT_COLLECTING else None
    if deadline is not None:
        shown = fact.raw_state or (fact.remote_state.value if fact.remote_state else None)
        # an answer naming no state says what it was (an HTTP 500, a body not JSON)
        said = (
            repr(shown) if shown else f"no state ({fact.problem})" if fact.problem else "no state"
        )
        return await _escalate_on(
            step, conn, deadline, f"the status read #{observation_id} still shows {said}"
        )
    if fact.not_found:
        adopted = await evidence.adopted_job_unseen(conn, step.op.operation_id)
        if adopted is not None:
            # No provider answer named this id: an operator typed it (decision
            # #adopted). A read racing the job's creation is not the likely
            # cause, a wrong id is; waiting for more misses (hours apart with
            # webhooks) would hide it. The operator can `reconcile` to read again.
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                f"provider says job {step.op.remote_job_id} does not exist: the job id was "
                f"adopted by an operator (decision #{adopted}) and no status read has ever "
                "seen it; check the id (and the account or region) in the provider's console",
            )
            return None
        # In a row, this read included: counting every read since the create
        # (poll_attempts) sent a job read fine many times to a human on its
        # first transient 404.
        misses = await evidence.status_misses_in_a_row(
            conn, step.op.operation_id, step.adapter.desc.status.not_found_statuses
        )
        if misses >= NOT_FOUND_TOLERANCE:
            gone = f"provider says job {step.op.remote_job_id} does not exist"
            await step.move(conn, S.NEEDS_ATTENTION, gone + _after_our_cancel(step))
            return None
    suspect = _suspect(step, fact)
    if suspect is _Suspect.STATELESS:
        reads = await evidence.stateless_reads_in_a_row(conn, step.op.operation_id)
        if reads >= STATELESS_READS_TOLERANCE:
            await step.move(conn, S.NEEDS_ATTENTION, _stateless_cause(step, fact, reads))
            return None
    elif suspect is _Suspect.REFUSED:
        reads = await evidence.refused_reads_in_a_row(
            conn, step.op.operation_id, _passing_codes(step)
        )
        if reads >= REFUSED_READS_TOLERANCE:
            await step.move(conn, S.NEEDS_ATTENTION, _refused_cause(fact, reads))
            return None
    return step.until_allowed(await _when_next(step, fact, conn), read=True)


def _gone_by_our_cancel(step: Step, fact: StatusFact) -> StatusFact:
    """A miss after our cancel was accepted, at a provider whose cancel deletes the
    job (`cancel.deletes_job`): the job was cancelled, by us; recorded so."""
    if not (
        fact.not_found and step.op.state is S.CANCELLING and step.adapter.desc.cancel.deletes_job
    ):
        return fact
    return replace(
        fact,
        not_found=False,
        remote_state=RemoteState.CANCELLED,
        raw_state=f"HTTP {fact.status_code}: gone after our accepted cancel (cancel.deletes_job)",
        problem=None,
    )


def _failed_by_our_cancel(step: Step, fact: StatusFact, unanswered: bool = False) -> StatusFact:
    """A failed read after our cancel was accepted, or left and got no answer
    (`unanswered`: see `_our_cancel_unanswered`), at a provider whose cancel ends
    the job failed (`cancel.ends_failed`: Airflow's PATCH {"state": "failed"}): the
    job was cancelled, by us; recorded so, the provider's word kept as read."""
    if not (
        fact.remote_state is RemoteState.FAILED
        and (step.op.state is S.CANCELLING or unanswered)
        and step.adapter.desc.cancel.ends_failed
    ):
        return fact
    return replace(fact, remote_state=RemoteState.CANCELLED, error=None)


async def _our_cancel_unanswered(step: Step, fact: StatusFact) -> bool:
    """Whether a failed read in `cancel_requested`, at a provider whose cancel ends the
    job failed (`cancel.ends_failed`), follows a cancel of ours that left and got no
    answer: it may have been taken, and its answer lost. Before, the read before
    the resend (`read_first`) found the job failed by that very cancel and took it
    for a job that had ended by itself: `failed`, "none of ours was taken"."""
    if not (
        fact.remote_state is RemoteState.FAILED
        and step.op.state is S.CANCEL_REQUESTED
        and step.adapter.desc.cancel.ends_failed
    ):
        return False
    async with step.ctx.pool.acquire() as conn:
        calls = await conn.fetch(q("cancel_calls"), step.op.operation_id)
    return (
        bool(calls)
        and calls[0]["status_code"] is None
        and (calls[0]["error_category"] not in NEVER_LEFT)
    )


class _Suspect(enum.Enum):
    """A read that counts toward a human: see `_suspect`."""

    STATELESS = "stateless"
    REFUSED = "refused"


def _suspect(step: Step, fact: StatusFact) -> _Suspect | None:
    """A read that counts toward a human while the job is watched (`accepted`,
    which such reads never leave, or `observing`): a success (2xx) naming no
    state the description maps (STATELESS_READS_TOLERANCE), or a refusal (a
    4xx that is no "not found", no throttle and no state of its own:
    REFUSED_READS_TOLERANCE). Only such a read leaves the group-commit writer,
    to be counted; in any other state it is read past as before."""
    if not _watched(step) or fact.remote_state is not None or fact.not_found:
        return None
    code = fact.status_code
    if 200 <= code < 300:
        # a throttle carried in a 200 (GraphQL's `errors`) is no answer
        return None if fact.request_failed else _Suspect.STATELESS
    if 400 <= code < 500 and not fact.rate_limited and code not in _passing_codes(step):
        return _Suspect.REFUSED
    return None


def _passing_codes(step: Step) -> frozenset[int]:
    """4xx codes that do not count as a refused read: a timeout, too early, a
    throttle, and the codes the description reads as "not found" or as a state
    (mapped, or read in the body: `status.state_in_error_statuses`)."""
    status = step.adapter.desc.status
    return (
        PASSING_CLIENT_STATUSES
        | status.not_found_statuses
        | set(status.state_from_http_status)
        | status.state_in_error_statuses
    )


def _refused_cause(fact: StatusFact, reads: int) -> str:
    return (
        f"the last {reads} status reads were refused (the latest with HTTP "
        f"{fact.status_code}{fact.said}): check the provider credential ([auth]: a revoked or "
        "expired key answers 401 or 403) and what the read sends (status.path, "
        "headers, an Accept the provider will not serve answers 406); the job may "
        "still be running"
    )


def _stateless_cause(step: Step, fact: StatusFact, reads: int) -> str:
    status = step.adapter.desc.status
    where = " or ".join(p.text for p in status.state_paths) or "status.done"
    if fact.raw_state is not None:
        shown = f"state {fact.raw_state!r}, which status.state_map does not map"
    else:
        shown = f"no state at {where} ({fact.problem or 'none found'})"
    return (
        f"the last {reads} status reads answered HTTP {fact.status_code} with {shown}: "
        "check the provider's description (the path, the state map, the Accept header), "
        "the provider credential ([auth]: an API that answers every error 200, as "
        "Marketo's expired token, says so only in its body), "
        "or whether the job is gone (a GraphQL node read as null)"
    )


def _after_our_cancel(step: Step) -> str:
    """Why a job may be gone: our own cancel, when one was sent (else nothing).

    Some providers' cancel deletes the job (Runway's DELETE /v1/tasks/{id}):
    "does not exist" alone hides that the deletion may have been ours.
    """
    sent = step.op.cancel_sent_at
    cancel = step.adapter.desc.cancel
    if sent is None or (cancel.path is None and not cancel.use_status_url):
        return ""
    target = "the status URL" if cancel.use_status_url else cancel.path.text if cancel.path else ""
    said = f", after our cancel request ({cancel.method} {target}) was sent at "
    said += f"{sent:%Y-%m-%dT%H:%M:%SZ}"
    if cancel.deletes_job:
        # Here only when no accepted answer came back (an accepted one makes the
        # miss the cancel done): the description says it deletes, so say so.
        return (
            f"{said}: that request deletes the job (cancel.deletes_job), so it most "
            "likely did, with any result it had, but no accepted answer to it was "
            "received, so no cancel is claimed; if the provider shows the job gone, "
            "resolve --decision cancelled"
        )
    return (
        f"{said}: if that request deletes the job, it may have deleted it, with any result it had"
    )


def _ended_before_cancel(step: Step) -> str:
    """The read before a cancel (`read_first`) found the job ended: none is sent now.
    An earlier attempt may have left and been answered "not taken" (a 429 in
    cancel.resend_statuses clears the send of a cancel unsafe to repeat): "no
    cancel request was sent" then denied a call on record."""
    if not step.op.cancel_attempts:
        return "; the job had already ended, so no cancel request was sent"
    return (
        "; the job had already ended, so no further cancel request was sent (none of "
        "ours was taken: each failed before it left or was answered that it was not "
        "taken, cancel.resend_statuses)"
    )


async def _cancelled_by_whom(step: Step, conn: Any, ours_failed: bool = False) -> str:
    """What a "cancelled" read says of who cancelled: after a cancel of ours that
    left (its calls are the evidence: the step's own row may predate a cancel it
    sent itself, the answer lost), what such a read cannot tell; else that no
    cancel of ours reached the provider."""
    left = await _cancels_that_left(conn, step.op.operation_id)
    return _after_a_destructive_cancel(step, ours_failed) if left else _cancelled_without_ours(step)


async def _cancels_that_left(conn: Any, operation_id: str) -> list[Any]:
    """The operation's cancel calls that may have reached the provider, newest
    first: a call that never left (no connection) reached nothing."""
    calls = await conn.fetch(q("cancel_calls"), operation_id)
    return [c for c in calls if c["error_category"] not in NEVER_LEFT]


def _cancelled_without_ours(step: Step) -> str:
    """Who cancelled a job no cancel of ours reached: "remote cancelled" alone read
    as the cancel an agent asked for, where the provider, its owner or an operator
    there did it (Amazon SP-API cancels a report that has no data on its own)."""
    if step.op.cancel_requested_at is None:
        return (
            "; no cancellation was asked of jobwarden and none was sent: the job was "
            "cancelled at the provider (by its owner, an operator there or the provider "
            "itself)"
        )
    return (
        "; our cancel request had not been sent yet: the job was cancelled at the "
        "provider, not by it"
    )


def _after_a_destructive_cancel(step: Step, ours_failed: bool = False) -> str:
    """What a "cancelled" read cannot tell for a provider whose cancel deletes a
    finished job (`read_first`): a job that ended between our last read and the
    cancel's arrival reads the same. Nothing for other providers. A cancel that
    ends the job failed (`ends_failed`) says that the failed read was taken for
    our cancel (`ours_failed`), which a job that failed on its own before it arrived
    reads too; a cancel whose answer was lost is said to be one. Before, that was
    said of any cancelled read there, one the provider named cancelled too."""
    cancel = step.adapter.desc.cancel
    if ours_failed:
        lost = ", whose answer was lost," if step.op.state is S.CANCEL_REQUESTED else ","
        return (
            f" after our cancel request{lost} which ends a job failed (cancel.ends_failed), "
            "so this failed read is taken for it; a job that failed or ended on its "
            "own before the cancel arrived would read the same"
        )
    if not cancel.read_first or cancel.ends_failed:
        # (under ends_failed, a job that ended before our cancel reads failed, not
        # this: a cancelled read is the provider's own word)
        return ""
    return (
        " after our cancel request; this provider's cancel also deletes a job that had "
        "finished, so a job that ended between the read before the cancel and its "
        "arrival would read the same"
    )


async def _escalate(step: Step, deadline: Deadline, why: str) -> Delay:
    async with step.ctx.pool.acquire() as conn, conn.transaction():
        await step.reload(conn)
        return await _escalate_on(step, conn, deadline, why)


async def _escalate_on(step: Step, conn: Any, deadline: Deadline, why: str) -> Delay:
    """The deadline's escalation, with what the owner saw when it looked."""
    reason = await _cancel_deadline_reason(step, conn, deadline) or deadline.reason
    await step.move(conn, deadline.escalate_to, f"{reason}: {why}")
    if deadline.escalate_to is S.CANCELLATION_UNCONFIRMED:
        return step.until_allowed(UNCONFIRMED_POLL_SECONDS, read=True)
    return None


async def _cancel_deadline_reason(step: Step, conn: Any, deadline: Deadline) -> str | None:
    """The cancel deadline's reason when a cancel that left got no answer (the last,
    or an earlier one the later answers say nothing of), none left at all, or the
    last was refused in words the answer gives (`_refused_at_the_deadline`), else
    None.

    A cancel sent whose answer never came (a timeout, a reset, a process
    stopped before recording it) may have reached the provider and stopped
    the job, or not: "our cancel request was not accepted" claimed what nobody
    knows, and an operator reading it would send a second cancel by hand,
    the very thing `cancel.idempotent = false` says is unsafe.
    """
    op = step.op
    cancel = step.adapter.desc.cancel
    if not (
        deadline.escalate_to is S.CANCELLATION_UNCONFIRMED
        and op.state is S.CANCEL_REQUESTED
        and op.cancel_sent_at is not None
        and cancel.supported
    ):
        return None
    # A call that never left (no connection) reached nothing: a cancel safe to
    # repeat stays "sent" after one, so the newest call may be such a one, and
    # "it may have reached the provider" was said of a request that reached nothing.
    left = await _cancels_that_left(conn, op.operation_id)
    if not left:
        return (
            "cancel deadline passed and no cancel request reached the provider (each "
            "attempt failed before it left), so no cancel was sent"
        )
    last = left[0]
    # the newest unanswered one: the last, or an earlier one whose fate the answers
    # to later requests say nothing of
    unanswered = next((c for c in left if c["status_code"] is None), None)
    if unanswered is None:
        return await _refused_at_the_deadline(step, conn, last)
    how = unanswered["error_category"] or "interrupted before its answer was recorded"
    if unanswered is last:
        reason = (
            f"cancel deadline passed and our cancel request got no answer ({how}): it may "
            "have reached the provider, so whether the provider took it is unknown"
        )
    else:
        reason = (
            f"cancel deadline passed; an earlier cancel request got no answer ({how}) and "
            "may have reached the provider, and the later ones' answers confirm nothing "
            f"(the last: HTTP {last['status_code']}), so whether the provider took it is "
            "unknown"
        )
    if not cancel.idempotent:
        reason += (
            "; it is not sent again (cancel.idempotent is false): check with the provider "
            "before sending another"
        )
    return reason


async def _refused_at_the_deadline(step: Step, conn: Any, last: Any) -> str | None:
    """The cancel deadline's reason when the last cancel's answer refused it in words
    (a 4xx, Baseten's 200 {"canceled": false}): a refusal is told on the round after
    it, and a deadline passed by then (a short one, a crash between the two) said
    only "its answer is on record: an error, back-pressure or none"."""
    call = await conn.fetchrow(
        q("cancel_call_and_read_after"), step.op.operation_id, last["call_id"]
    )
    refusal = cancel_refusal(step, call) if call is not None else None
    if refusal is None:
        return None
    reason = f"cancel deadline passed and our cancel request was not accepted: {refusal}"
    if not step.adapter.desc.cancel.idempotent:
        reason += NOT_SENT_AGAIN
    return reason


async def _facts_refused(step: Step, conn: Any, read: StatusRead, exc: Exception) -> Delay:
    """The database refused this read's facts: keep the call, move on, say why.

    The savepoint rolled back; the call (status, digest, excerpt with the
    raw values) is written again without its observation, named as an
    anomaly, and the operation is read again later instead of stalling.
    """
    delay = step.until_allowed(step.backoff(step.op.poll_attempts), read=True)
    if await _call_only(step, conn, read, exc, release_after=delay):
        step.released = True
    return delay


async def _call_only(
    step: Step, conn: Any, read: StatusRead, exc: Exception, release_after: float | None = None
) -> bool:
    """The read's call written again without the facts the database refused, named
    as an anomaly (and the lease handed back when `release_after`); False when the
    lease was no longer ours."""
    log.warning(
        "status read facts refused by the database; call kept without its observation",
        extra={"ctx": {"operation_id": step.op.operation_id, **db_error_context(exc)}},
    )
    row = evidence.status_row(read, release_after=release_after)
    written = await evidence.record_polls(
        conn, [pgjson.dumps(evidence.call_only(row, db_error_reason(exc)))]
    )
    return step.op.operation_id in written
