"""Result collection: a separate, recorded action with its own verdict.

A remote success only means the provider finished. We fetch the result,
validate it by the provider's rules (content type, required fields, digest,
size, item counts), store it durably (content-addressed file + integrity data,
small JSON inline) and record per-item failures of a batch. Only then is the
operation `succeeded`; an expired link is `result_unavailable`, bad content is
`result_validation_failed` — both escalated, never reported as success.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from reconciler.recording import finish_call, record_call, start_call
from reconciler.step import Delay, Step, utcnow
from shared import ledger
from shared.db.queries import q
from shared.ledger import evidence as records
from shared.ledger.errors import LeaseLost
from shared.ledger.states import Evidence, LocalState, RemoteState
from shared.providers import (
    HttpResponse,
    ItemFailure,
    RequestBuildError,
    ResultCheck,
    StatusFact,
)
from shared.providers.description import ResultSource
from shared.result_store import INLINE_MAX_BYTES

S = LocalState
# Transient fetch failures (5xx, timeouts) are retried this many times before
# the result is declared unavailable and a human is asked.
MAX_RESULT_ATTEMPTS = 6
# Failed items are kept page by page; past this many pages the rest stays at the
# provider (the summary says how many failed, the reference says where).
MAX_ERROR_PAGES = 50


async def step_collect(step: Step) -> Delay:
    async with step.ctx.pool.acquire() as conn:
        if step.op.remote_job_id is None:
            return await _give_up(
                step,
                conn,
                S.NEEDS_ATTENTION,
                "a synchronous result cannot be fetched again (the provider gave no job id)",
            )
        attempt = await conn.fetchval(q("bump_result_attempt"), step.op.operation_id, step.fence)
        if attempt is None:
            raise LeaseLost(f"lease on {step.op.operation_id} lost")
        status_resp = await _final_status(step, conn, fresh=attempt > 1)
        if status_resp is None:
            if attempt >= MAX_RESULT_ATTEMPTS:
                return await _give_up(
                    step,
                    conn,
                    S.RESULT_UNAVAILABLE,
                    f"no usable status read after {attempt} attempts",
                )
            return step.backoff(attempt)
        status = step.adapter.parse_status(status_resp, utcnow())
        if status.remote_state not in (RemoteState.SUCCEEDED, RemoteState.PARTIALLY_SUCCEEDED):
            return await _give_up(
                step,
                conn,
                S.NEEDS_ATTENTION,
                f"collecting a result, but the provider now reports {status.raw_state!r}",
            )
        desc = step.adapter.desc
        if desc.result.side_effects and await conn.fetchval(
            q("result_fetch_may_have_arrived"), step.op.operation_id
        ):
            return await _give_up(
                step,
                conn,
                S.RESULT_UNAVAILABLE,
                "fetching this result has side effects and an earlier fetch "
                "may already have consumed it; not fetching again",
            )
        fetched = await _fetch(step, conn, status_resp, status, attempt)
        if isinstance(fetched, float):
            return fetched
        if fetched is None:
            return None
        check, content = fetched
        if check.unavailable:
            return await _give_up(
                step, conn, S.RESULT_UNAVAILABLE, f"result unavailable: {check.reason}"
            )
        failures = list(check.failed_items)
        if check.ok and status.errors_url:
            failures.extend(await _error_pages(step, conn, status.errors_url))
        return await _store(step, conn, check, content, failures, status)


def _stored_whole(excerpt: str | None, sha256: str | None) -> bool:
    """The stored excerpt is the body exactly (not cut, nothing redacted or replaced)."""
    return (
        excerpt is not None
        and sha256 is not None
        and hashlib.sha256(excerpt.encode()).hexdigest() == sha256
    )


async def _final_status(step: Step, conn: Any, *, fresh: bool) -> HttpResponse | None:
    """The response of our final read: re-read from the call log, or read again
    (always on a retry: result links expire, and an operator may have resumed)."""
    row = None if fresh else await conn.fetchrow(q("latest_poll_call"), step.op.operation_id)
    if row is not None and _stored_whole(row["response_body"], row["response_sha256"]):
        return HttpResponse(
            status_code=row["status_code"],
            headers=row["response_headers"] or {},
            body=row["response_body"].encode(),
            url=row["url"],
        )
    assert step.op.remote_job_id is not None
    req = step.adapter.build_status(step.op.remote_job_id, step.op.status_url)
    sent = await step.send(req, conn)
    async with conn.transaction():
        await record_call(
            conn, step.op, req, "status", step.op.poll_attempts + 1, step.worker, step.fence, sent
        )
    if sent.response is None or sent.response.status_code >= 300:
        return None
    return sent.response


async def _fetch(
    step: Step, conn: Any, status_resp: HttpResponse, status: StatusFact, attempt: int
) -> tuple[ResultCheck, bytes] | float | None:
    desc = step.adapter.desc
    assert step.op.remote_job_id is not None
    try:
        reqs = step.adapter.build_result_requests(step.op.remote_job_id, status)
    except RequestBuildError as exc:
        await _give_up(step, conn, S.RESULT_UNAVAILABLE, f"cannot locate the result: {exc}")
        return None
    if not reqs:
        if desc.result.source is ResultSource.NONE:
            value: Any = {"remote_state": status.raw_state}
        else:
            value = step.adapter.inline_result(status_resp)
        check = step.adapter.validate_inline_result(value, status)
        return check, json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    responses: list[HttpResponse] = []
    for req in reqs:
        call_id = await start_call(conn, step.op, req, "result", attempt, step.worker, step.fence)
        sent = await step.send(req, conn)
        await finish_call(conn, call_id, sent)
        resp = sent.response
        transient = resp is None or resp.status_code >= 500 or resp.status_code == 429
        if transient:
            if attempt >= MAX_RESULT_ATTEMPTS:
                await _give_up(
                    step,
                    conn,
                    S.RESULT_UNAVAILABLE,
                    f"result fetch kept failing ({sent.error_category}) after {attempt} attempts",
                )
                return None
            retry_after = None
            if resp is not None:
                retry_after = step.adapter.parse_status(resp, utcnow()).retry_after_seconds
            return step.backoff(attempt, retry_after)
        assert resp is not None
        responses.append(resp)
    check = step.adapter.validate_result(responses if len(responses) > 1 else responses[0], status)
    return check, b"".join(r.body for r in responses)


async def _error_pages(step: Step, conn: Any, errors_url: str) -> list[ItemFailure]:
    failures: list[ItemFailure] = []
    token: str | None = None
    for page in range(MAX_ERROR_PAGES):
        req = step.adapter.build_errors_page(errors_url, token)
        sent = await step.send(req, conn)
        await record_call(conn, step.op, req, "errors", page + 1, step.worker, step.fence, sent)
        if sent.response is None or sent.response.status_code != 200:
            break
        parsed = step.adapter.parse_errors_page(sent.response)
        failures.extend(parsed.items)
        token = parsed.next_page_token
        if not token:
            break
    return failures


def _item_key(item: ItemFailure, n: int) -> str:
    if item.item_id is not None:
        return item.item_id
    return str(item.index if item.index is not None else n)


def _counts(check: ResultCheck, status: StatusFact) -> tuple[int | None, int | None, int | None]:
    """Item counts: the provider's final status is authoritative, the result fills gaps."""
    counts = status.counts
    total = counts.total if counts and counts.total is not None else check.items_total
    ok = counts.succeeded if counts and counts.succeeded is not None else check.items_succeeded
    failed = counts.failed if counts and counts.failed is not None else check.items_failed
    return total, ok, failed


async def _store(
    step: Step,
    conn: Any,
    check: ResultCheck,
    content: bytes,
    failures: list[ItemFailure],
    status: StatusFact,
) -> Delay:
    ref: str | None = None
    inline = None
    if check.ok:
        _, ref = step.ctx.store.put(content)
        if check.parsed is not None and len(content) <= INLINE_MAX_BYTES:
            inline = check.parsed
    total, succeeded, failed = _counts(check, status)
    seen: dict[str, tuple[str, str | None, str | None]] = {}
    for n, item in enumerate(failures):
        key = _item_key(item, n)
        seen.setdefault(key, (key, item.code, item.message))
    async with conn.transaction():
        result_id = await records.record_result(
            conn,
            records.ResultRecord(
                operation_id=step.op.operation_id,
                valid=check.ok,
                reason=check.reason,
                content_type=check.content_type,
                size_bytes=check.size,
                sha256=check.sha256,
                storage_ref=ref,
                inline=inline,
                items_total=total,
                items_succeeded=succeeded,
                items_failed=failed,
                failed_items=list(seen.values()),
            ),
        )
        if not check.ok:
            await step.move(
                conn,
                S.RESULT_VALIDATION_FAILED,
                f"result failed validation: {check.reason}",
                sha256=check.sha256,
                size=check.size,
            )
            return None
        summary = {
            "items_total": total,
            "items_succeeded": succeeded,
            "items_failed": failed,
            "sha256": check.sha256,
            "size_bytes": check.size,
            "failed_items_recorded": len(seen),
        }
        await ledger.attach_result(
            conn, step.op.operation_id, result_id, result_ref=ref, summary=summary, fence=step.fence
        )
        await step.move(
            conn, S.SUCCEEDED, "result fetched and validated", (Evidence.RESULT, result_id)
        )
    return None


async def _give_up(step: Step, conn: Any, dst: LocalState, reason: str) -> Delay:
    async with conn.transaction():
        await step.reload(conn)
        await step.move(conn, dst, reason)
    return None


async def collect_partial_output(
    step: Step, conn: Any, status_resp: HttpResponse, status: StatusFact
) -> bool:
    """Keep what a cancelled job already produced (OpenAI keeps partial output).

    Best effort and never a verdict: the operation still ends `cancelled`; a
    valid partial result is stored and attached so nothing finished is lost.
    Returns True when a result was attached.
    """
    assert step.op.remote_job_id is not None
    if step.adapter.desc.result.side_effects:
        return False  # a fetch that consumes the result is not ours to make on the side
    try:
        reqs = step.adapter.build_result_requests(step.op.remote_job_id, status)
    except RequestBuildError:
        return False
    responses: list[HttpResponse] = []
    for req in reqs:
        sent = await step.send(req, conn)
        await record_call(
            conn, step.op, req, "result", step.op.result_attempts + 1, step.worker, step.fence, sent
        )
        if sent.response is None or sent.response.status_code != 200:
            return False
        responses.append(sent.response)
    if not responses:
        return False
    check = step.adapter.validate_result(responses if len(responses) > 1 else responses[0], status)
    if not check.ok:
        return False
    content = b"".join(r.body for r in responses)
    _, ref = step.ctx.store.put(content)
    total, succeeded, failed = _counts(check, status)
    async with conn.transaction():
        result_id = await records.record_result(
            conn,
            records.ResultRecord(
                operation_id=step.op.operation_id,
                valid=True,
                reason="partial output of a cancelled job",
                content_type=check.content_type,
                size_bytes=check.size,
                sha256=check.sha256,
                storage_ref=ref,
                inline=check.parsed if len(content) <= INLINE_MAX_BYTES else None,
                items_total=total,
                items_succeeded=succeeded,
                items_failed=failed,
                failed_items=[
                    (_item_key(i, n), i.code, i.message) for n, i in enumerate(check.failed_items)
                ],
            ),
        )
        await ledger.attach_result(
            conn,
            step.op.operation_id,
            result_id,
            result_ref=ref,
            summary={
                "partial": True,
                "items_total": total,
                "items_succeeded": succeeded,
                "items_failed": failed,
                "sha256": check.sha256,
            },
            fence=step.fence,
        )
    return True
