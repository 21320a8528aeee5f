"""Creating the remote job: once, idempotently, and honestly when unsure.

The create is sent only from a stored operation with its stored token. An
ambiguous outcome (timeout, reset, 5xx after sending) is `create_unknown`,
resolved by a same-token retry or a lookup by our client reference — never by a
new token. A provider that cannot deduplicate creates gets one attempt: after
an uncertain one, only a lookup may continue, else a human decides. The same
token answered with another job id is never overwritten: both answers stay on
record and the operation stops for a human (needs_attention).
"""

from __future__ import annotations

from typing import Any

from reconciler.recording import finish_call, record_call, start_call
from reconciler.step import NOW, Delay, Step, utcnow
from shared import ledger
from shared.db.queries import q
from shared.ledger import evidence as records
from shared.ledger.errors import LeaseLost, StaleTransition
from shared.ledger.states import Evidence, LocalState
from shared.providers import CreateFact, LookupFact
from shared.providers.description import Idempotency
from shared.providers.transport import may_have_been_delivered

S = LocalState
# Without idempotency, an empty lookup proves the lost create never landed only
# once the provider has had time to index it: this many request timeouts after
# the create was sent (40 s at the default 10 s timeout).
LOOKUP_SETTLE_FACTOR = 4


async def step_create(step: Step) -> Delay:
    async with step.ctx.pool.acquire() as conn:
        op = step.op
        if (
            op.state is S.CREATE_PENDING
            and op.create_attempts > 0
            and not await _last_attempt_never_left(conn, op.operation_id)
        ):
            # An earlier attempt has no recorded answer (we died mid-call, or it
            # failed after the bytes may have left): we cannot know if a job exists.
            async with conn.transaction():
                await step.move(
                    conn,
                    S.CREATE_UNKNOWN,
                    f"create attempt {op.create_attempts} has no definitive answer",
                )
        if utcnow() >= step.op.create_deadline:
            return await _deadline_passed(step, conn)
        if step.op.state is not S.CREATE_PENDING:
            settled, delay = await _resolve_uncertain(step, conn)
            if settled:
                return delay
        return await _send_create(step, conn)


async def _last_attempt_never_left(conn: Any, operation_id: str) -> bool:
    """The latest create failed to connect: nothing was sent, nothing is uncertain."""
    last = await conn.fetchrow(q("latest_create_call"), operation_id)
    return last is not None and last["error_category"] == "connect"


async def _deadline_passed(step: Step, conn: Any) -> Delay:
    async with conn.transaction():
        never_sent = step.op.create_attempts == 0
        reason = (
            "create deadline passed before any create request was sent"
            if never_sent
            else "create deadline passed without proof that a remote job exists or not"
        )
        await step.move(conn, S.NEEDS_ATTENTION, reason, create_attempts=step.op.create_attempts)
    return None


async def _resolve_uncertain(step: Step, conn: Any) -> tuple[bool, Delay]:
    """For create_unknown (or a cancel waiting on an unresolved create).

    Returns (True, delay) when this step is settled, or (False, None) to go on
    and (re)send the create with the same token.
    """
    desc = step.adapter.desc
    no_idempotency = desc.create.idempotency is Idempotency.NONE
    if not no_idempotency:
        return False, None  # the same-token retry is safe; a lookup cross-checks its answer
    if not desc.lookup.supported:
        async with conn.transaction():
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                f"provider {desc.name} cannot deduplicate creates and offers no lookup: an "
                "uncertain create cannot be retried safely (it might run twice)",
                create_attempts=step.op.create_attempts,
            )
        return True, None
    found = await _lookup(step, conn)
    if found is None:
        return True, step.backoff(step.op.lookup_attempts)
    job_ids, call_id = found
    if len(job_ids) == 1:
        return True, await _accept(step, conn, job_ids[0], call_id, via="lookup")
    if len(job_ids) > 1:
        return True, await _conflict(
            step, conn, f"lookup found {len(job_ids)} remote jobs for our reference", job_ids
        )
    if not await _absence_settled(step, conn):
        # A list can lag behind a create it has not indexed yet: an empty answer
        # soon after the create proves nothing. Look again later.
        return True, step.backoff(step.op.lookup_attempts)
    if step.op.state is S.CANCEL_REQUESTED:
        # Nothing to cancel, as far as the provider can tell; creating the job
        # only to cancel it would be absurd. A human closes it.
        async with conn.transaction():
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                "cancel requested before the job id was known, and the provider's lookup "
                "shows no job for this operation: nothing to cancel",
            )
        return True, None
    return False, None  # proven absent: sending again cannot duplicate


async def _absence_settled(step: Step, conn: Any) -> bool:
    """Is it long enough since our last create that an empty lookup proves absence?"""
    last = await conn.fetchrow(q("latest_create_call"), step.op.operation_id)
    if last is None:
        return True
    settle = LOOKUP_SETTLE_FACTOR * step.adapter.desc.limits.request_timeout
    # From when the call ended: it was recorded before its wait for a provider
    # slot, so it may have left well after `started_at`.
    since = last["finished_at"] or last["started_at"]
    return bool((utcnow() - since).total_seconds() >= settle)


async def _lookup(step: Step, conn: Any) -> tuple[list[str], int] | None:
    """Page through the provider's lookup; (job ids, last call id), or None if inconclusive."""
    desc = step.adapter.desc
    ids: list[str] = []
    token: str | None = None
    last_call = 0
    for _ in range(desc.lookup.max_pages):
        attempt = await conn.fetchval(q("bump_lookup_attempt"), step.op.operation_id, step.fence)
        if attempt is None:
            raise LeaseLost(f"lease on {step.op.operation_id} lost")
        req = step.adapter.build_lookup(step.op.operation_id, step.op.idempotency_token, token)
        sent = await step.send(req, conn)
        fact: LookupFact | None = None
        if sent.response is not None:
            fact = step.adapter.parse_lookup(sent.response, step.op.operation_id)
        found = fact.found_job_ids if fact else ()
        last_call = await record_call(
            conn,
            step.op,
            req,
            "lookup",
            attempt,
            step.worker,
            step.fence,
            sent,
            remote_job_id=found[0] if len(found) == 1 else None,
        )
        if fact is None or fact.problem or fact.back_pressure:
            return None
        ids.extend(j for j in found if j not in ids)
        if fact.next_page_token is None:
            return ids, last_call
        token = fact.next_page_token
    return None if not ids else (ids, last_call)


async def _send_create(step: Step, conn: Any) -> Delay:
    op = step.op
    context = {
        "webhook_url": step.ctx.webhook_url_for(op.provider),
        "trace_id": op.trace_id,
        "result_deadline_seconds": str(
            max(1, int((op.result_deadline - utcnow()).total_seconds()))
        ),
    }
    req = step.adapter.build_create(
        body=op.request.get("body"),
        idempotency_token=op.idempotency_token,
        client_reference=op.operation_id,
        context=context,
    )
    async with conn.transaction():  # recovery point: from here on, it may have been sent
        attempt = await conn.fetchval(q("bump_create_attempt"), op.operation_id, step.fence)
        if attempt is None:
            if not await conn.fetchval(q("lease_held"), op.operation_id, step.fence):
                raise LeaseLost(f"lease on {op.operation_id} lost before sending create")
            raise StaleTransition(f"{op.operation_id} no longer wants a create (abandoned?)")
        call_id = await start_call(
            conn, op, req, "create", attempt, step.worker, step.fence, token=op.idempotency_token
        )
    sent = await step.send(req, conn)
    if sent.response is None:
        async with conn.transaction():
            await finish_call(conn, call_id, sent)
            await step.reload(conn)
            if sent.transport_failure is None or may_have_been_delivered(sent.transport_failure):
                if step.op.state is S.CREATE_PENDING:
                    await step.move(
                        conn,
                        S.CREATE_UNKNOWN,
                        f"create {sent.error_category}: delivery uncertain",
                    )
            else:
                # Never left this host: the same attempt can simply be made again.
                await conn.fetchval(
                    q("set_last_error"),
                    op.operation_id,
                    step.fence,
                    {"category": sent.error_category},
                )
        return step.backoff(attempt)
    fact = step.adapter.parse_create(sent.response, op.idempotency_token)
    # The answer is on record before we act on it: even if our lease was lost
    # meanwhile, whoever continues can see the job id the provider gave.
    await finish_call(
        conn,
        call_id,
        sent,
        provider_request_id=fact.provider_request_id,
        remote_job_id=fact.remote_job_id,
    )
    async with conn.transaction():
        await step.reload(conn)
        delay = await _interpret_create(step, conn, fact, call_id, attempt)
    if (
        fact.kind == "accepted"
        and step.op.state in (S.ACCEPTED, S.CANCEL_REQUESTED)
        and (attempt > 1 or step.op.create_attempts > 1)
    ):
        return await _cross_check(step, conn, fact.remote_job_id or "")
    return delay


async def _interpret_create(
    step: Step, conn: Any, fact: CreateFact, call_id: int, attempt: int
) -> Delay:
    if fact.kind == "accepted":
        assert fact.remote_job_id is not None
        known = [
            r["remote_job_id"]
            for r in await conn.fetch(q("known_remote_job_ids"), step.op.operation_id)
        ]
        others = [j for j in known if j != fact.remote_job_id]
        if others:
            return await _conflict(
                step,
                conn,
                "the same idempotency token was answered with "
                f"another job id ({fact.remote_job_id})",
                [*others, fact.remote_job_id],
            )
        return await _accept(
            step,
            conn,
            fact.remote_job_id,
            call_id,
            via="create",
            status_url=fact.status_url,
            poll_after=fact.retry_after_seconds,
        )
    if fact.kind == "sync_result":
        return await _sync_result(step, conn, fact, call_id)
    if fact.kind == "rejected":
        error = {
            "status": fact.status_code,
            "reason": fact.reason,
            "code": fact.error.code if fact.error else None,
            "message": fact.error.message if fact.error else None,
        }
        await conn.fetchval(q("set_last_error"), step.op.operation_id, step.fence, error)
        if fact.idempotency_conflict:
            await step.move(
                conn,
                S.NEEDS_ATTENTION,
                "provider says our idempotency token belongs to another request",
                error=error,
            )
            return None
        await step.move(conn, S.FAILED, f"create rejected: {fact.reason}", (Evidence.CALL, call_id))
        return None
    # ambiguous: the provider may or may not hold a job
    if step.op.state is S.CREATE_PENDING:
        await step.move(conn, S.CREATE_UNKNOWN, f"create answer ambiguous: {fact.reason}")
    return step.backoff(attempt, fact.retry_after_seconds)


async def _accept(
    step: Step,
    conn: Any,
    job_id: str,
    call_id: int,
    *,
    via: str,
    status_url: str | None = None,
    poll_after: float | None = None,
) -> Delay:
    # Inside a caller's transaction this is a savepoint; on its own, a transaction.
    async with conn.transaction():
        await ledger.record_remote_job(
            conn,
            step.op.operation_id,
            job_id,
            status_url=status_url,
            create_mode="async",
            fence=step.fence,
        )
        await step.reload(conn)
        if step.op.state in (S.CREATE_PENDING, S.CREATE_UNKNOWN):
            await step.move(
                conn, S.ACCEPTED, f"{via} answered with job {job_id}", (Evidence.CALL, call_id)
            )
        # in cancel_requested the job id is all we needed: the cancel goes out next
    return poll_after if poll_after is not None else NOW


async def _conflict(step: Step, conn: Any, reason: str, job_ids: list[str]) -> Delay:
    async with conn.transaction():
        await step.move(conn, S.NEEDS_ATTENTION, reason, escalation=reason, remote_job_ids=job_ids)
    return None


async def _cross_check(step: Step, conn: Any, job_id: str) -> Delay:
    """After an uncertain create resolved by a same-token retry, ask the lookup too."""
    if not step.adapter.desc.lookup.supported:
        return NOW
    found = await _lookup(step, conn)
    if found is None:
        return NOW  # inconclusive; the provider's own answer stands
    job_ids, _ = found
    strangers = [j for j in job_ids if j != job_id]
    if not strangers:
        return NOW
    await step.reload(conn)
    return await _conflict(
        step,
        conn,
        f"same token answered with job {job_id}, but the provider also holds "
        f"{', '.join(strangers)} for our reference",
        [job_id, *strangers],
    )


async def _sync_result(step: Step, conn: Any, fact: CreateFact, call_id: int) -> Delay:
    """A synchronous 200/201: the result came with the create answer."""
    if fact.remote_job_id:
        await ledger.record_remote_job(
            conn, step.op.operation_id, fact.remote_job_id, create_mode="sync", fence=step.fence
        )
    else:
        await ledger.record_sync_mode(conn, step.op.operation_id, fence=step.fence)
    await step.reload(conn)
    await step.move(
        conn, S.RESULT_COLLECTING, "create answered with the final result", (Evidence.CALL, call_id)
    )
    check = step.adapter.validate_inline_result(fact.sync_result, None)
    result_id = await records.record_result(
        conn,
        records.ResultRecord(
            operation_id=step.op.operation_id,
            valid=check.ok,
            call_id=call_id,
            reason=check.reason,
            content_type=check.content_type,
            size_bytes=check.size,
            sha256=check.sha256,
            inline=fact.sync_result if check.ok else None,
            items_total=check.items_total,
            items_succeeded=check.items_succeeded,
            items_failed=check.items_failed,
        ),
    )
    if not check.ok:
        await step.move(conn, S.RESULT_VALIDATION_FAILED, f"inline result invalid: {check.reason}")
        return None
    await ledger.attach_result(
        conn,
        step.op.operation_id,
        result_id,
        result_ref=None,
        summary={
            "items_total": check.items_total,
            "items_succeeded": check.items_succeeded,
            "items_failed": check.items_failed,
        },
        fence=step.fence,
    )
    await step.move(conn, S.SUCCEEDED, "synchronous result validated", (Evidence.RESULT, result_id))
    return None
