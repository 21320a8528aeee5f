"""Result collection: a separate, recorded action with its own verdict.

A remote success only means the provider finished. We fetch the result,
validate it by the provider's rules (content type, required fields, digest,
size, item counts), store it durably (content-addressed file + integrity data,
small JSON inline) and record per-item failures of a batch. Only then is the
operation `succeeded`; an expired link is `result_unavailable`, bad content is
`result_validation_failed` — both escalated, never reported as success.

Every result — fetched after a final read, answered inline by a synchronous
create, or the partial output of a cancelled job — is stored by one function,
`store`, with one summary shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal, TypeGuard, TypeVar

from reconciler.calls import imposed_wait, observed_of, recorded_response
from reconciler.page_memory import PageProgress
from reconciler.readings import read_status
from reconciler.step import Delay, Step, lease_lost
from shared import ledger
from shared.db.queries import q
from shared.ledger import evidence
from shared.ledger.errors import JobShared
from shared.ledger.operations import unstorable_job_id
from shared.ledger.states import Evidence, LocalState, RemoteState
from shared.providers import (
    CreateFact,
    ErrorInfo,
    HttpRequest,
    HttpResponse,
    ItemFailure,
    RequestBuildError,
    ResultCheck,
    StatusFact,
)
from shared.providers.description import (
    Checksum,
    ProviderDescription,
    ResultFormat,
    ResultPages,
    ResultSource,
)
from shared.providers.paths import ValuePath, extract
from shared.providers.requests import build_followed, build_redirect, errors_list_url
from shared.providers.responses import announced_pages, throttle_code
from shared.providers.results import (
    MAX_FAILED_ITEMS,
    REDIRECT_NOT_FOLLOWED,
    decompressed,
    followed_link,
    inline_content,
    inline_json,
    is_empty_result,
    result_content,
    validate_empty_result,
)
from shared.redaction import REDACTED
from shared.result_store import INLINE_MAX_BYTES, StoreFailed

S = LocalState
log = logging.getLogger("jobwarden.reconciler")
# Transient fetch failures (5xx, timeouts) are retried at least this many
# times, and for limits.result_retry_seconds, before the result is declared
# unavailable and a human is asked (`_out_of_retries`).
MAX_RESULT_ATTEMPTS = 6
# Failed items are kept page by page; past this many pages the rest stays at the
# provider (the summary says how many failed, the reference says where).
MAX_ERROR_PAGES = 50
# Files one result may be made of (source = files): a status naming more (a
# list path can name any number) is refused, not fetched one by one.
MAX_RESULT_FILES = 100
# Redirects a result fetch follows (result.follow_redirects), as browsers bound
# theirs: enough for a signed-link hop or two, not a loop.
MAX_RESULT_REDIRECTS = 5
# Attempts in a row that go on from a paged result's kept pages and read none
# before the next reads from page 1 (a resumed token the provider answers with
# a 5xx or a 429 once it went stale): throttles come in bursts, so one or two
# are no sign of it.
MAX_STALLS = 3
# Stored deliveries read at a time while looking for a webhook-sourced result
# (`result.source = "webhook"`): each may be up to the receiver's body limit.
DELIVERIES_A_FETCH = 20

Purpose = Literal["result", "sync", "partial"]


@dataclass(frozen=True)
class Collected:
    """A result as fetched and judged, ready to store."""

    check: ResultCheck
    content: bytes
    purpose: Purpose
    counts: tuple[int | None, int | None, int | None]  # total, succeeded, failed
    failures: Sequence[ItemFailure] = ()
    call_id: int | None = None


def summary_of(collected: Collected, failed_items_recorded: int) -> dict[str, Any]:
    """The one shape of `operations.result_summary`, whatever produced the result."""
    total, succeeded, failed = collected.counts
    return {
        "kind": collected.purpose,
        "partial": collected.purpose == "partial",
        "items_total": total,
        "items_succeeded": succeeded,
        "items_failed": failed,
        "sha256": collected.check.sha256,
        "size_bytes": collected.check.size,
        "failed_items_recorded": failed_items_recorded,
    }


def _item_key(item: ItemFailure, n: int) -> str:
    if item.item_id is not None:
        return item.item_id
    return str(item.index if item.index is not None else n)


async def store(step: Step, conn: Any, collected: Collected) -> int:
    """Store one result: file (if valid), row, failed items, and (if valid) attach it.

    Returns the result id. The caller makes the transition the verdict calls
    for; call it inside that transition's transaction. StoreFailed (the file
    could not be written) comes before anything is written to the database.
    """
    check = collected.check
    ref: str | None = None
    inline = None
    if check.ok:  # the file first, off the event loop: StoreFailed before any SQL
        _, ref = await asyncio.to_thread(step.ctx.store.put, collected.content)
        if check.parsed is not None and len(collected.content) <= INLINE_MAX_BYTES:
            inline = check.parsed
    seen: dict[str, tuple[str, str | None, str | None]] = {}
    for n, item in enumerate(collected.failures):
        key = _item_key(item, n)
        seen.setdefault(key, (key, item.code, item.message))
    total, succeeded, failed = collected.counts
    reason = (
        "partial output of a job that did not succeed"
        if collected.purpose == "partial"
        else check.reason
    )
    result_id = await evidence.record_result(
        conn,
        evidence.ResultRecord(
            operation_id=step.op.operation_id,
            valid=check.ok,
            call_id=collected.call_id,
            reason=reason,
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
    if check.ok:
        await ledger.attach_result(
            conn,
            step.op.operation_id,
            result_id,
            result_ref=ref,
            summary=summary_of(collected, len(seen)),
            fence=step.fence,
        )
    return result_id


Counts = tuple[int | None, int | None, int | None]


def _counts(check: ResultCheck, status: StatusFact | None) -> Counts:
    """Item counts: the provider's final status is authoritative, the result fills gaps.

    A status that counts successes and failures but no total gives the total too,
    as their sum: the result's item count may count other things (Hume's result
    holds a source an item, its counts a file), and beside the status's successes
    it made a triple that cannot be (5 of 2 items succeeded). Not with the
    cancelled added: those are among the failed (`counts_cancelled` is a subset of
    the not-ok items, the anthropic preset's `canceled` in both).
    """
    counts = status.counts if status is not None else None
    total = counts.total if counts and counts.total is not None else check.items_total
    if counts and counts.total is None and None not in (counts.succeeded, counts.failed):
        # never fewer than the result holds: items the status counts in neither
        # (expired, never run) are still the batch's
        total = max((counts.succeeded or 0) + (counts.failed or 0), check.items_total or 0)
    ok = counts.succeeded if counts and counts.succeeded is not None else check.items_succeeded
    failed = counts.failed if counts and counts.failed is not None else check.items_failed
    if ok is None and counts and counts.total is not None and counts.failed is not None:
        # the status counts all and the failed (Mailchimp's total_operations and
        # errored_operations), the result none (an archive): the rest succeeded,
        # as outcome_from_counts reads it
        ok = max(counts.total - counts.failed, 0)
    return total, ok, failed


# ------------------------------------------------------------------ the step


async def step_collect(step: Step) -> Delay:
    held = step.held_back()
    if held is not None:
        return held
    async with step.ctx.pool.acquire() as conn:
        try:
            return await _collect(step, conn)
        except _Refused as exc:
            reason = f"cannot fetch the result: {exc}"
            return await _give_up(step, conn, S.RESULT_UNAVAILABLE, reason)


async def _collect(step: Step, conn: Any) -> Delay:
    """`step_collect` on its connection."""
    if step.op.remote_job_id is None:
        return await _give_up(
            step,
            conn,
            S.NEEDS_ATTENTION,
            "a synchronous result cannot be fetched again (the provider gave no job id)",
        )
    attempt = await ledger.bump_attempt(conn, "result", step.op.operation_id, fence=step.fence)
    if attempt is None:
        raise lease_lost(step.op.operation_id)
    try:
        status_resp = await _final_status(step, conn, attempt, fresh=attempt > 1)
    except RequestBuildError as exc:  # raised only by the build, before anything is sent
        return await step.cannot_build(
            conn, f"the final status read cannot be built from what is on record: {exc}"
        )
    if status_resp is None:
        if await _out_of_retries(step, conn, attempt):
            return await _give_up(
                step,
                conn,
                S.RESULT_UNAVAILABLE,
                f"no usable status read after {attempt} attempts",
            )
        return step.until_allowed(step.retry(attempt))
    status = read_status(step, status_resp)
    if status.remote_state is None and status.raw_state is None:
        # An answer that names no state (GraphQL's 200 carrying `errors`, a
        # throttle in the body) says nothing about the job: read again, as
        # after a 5xx, rather than send a finished job to a human.
        if await _out_of_retries(step, conn, attempt):
            return await _give_up(
                step,
                conn,
                S.RESULT_UNAVAILABLE,
                f"no usable status read after {attempt} attempts "
                f"(the last: {status.problem or 'no state in the answer'})",
            )
        return step.until_allowed(step.retry(attempt, status.retry_after_seconds))
    if status.remote_state not in (RemoteState.SUCCEEDED, RemoteState.PARTIALLY_SUCCEEDED):
        return await _give_up(
            step,
            conn,
            S.NEEDS_ATTENTION,
            "collecting a result, but the provider now reports "
            f"{status.raw_state or (status.remote_state and status.remote_state.value)!r}",
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
    if not isinstance(fetched, Collected):
        return fetched
    if fetched.check.unavailable:
        return await _give_up(
            step, conn, S.RESULT_UNAVAILABLE, f"result unavailable: {fetched.check.reason}"
        )
    # error pages only where the description says how to read them: a
    # provider that lists failures in the result itself (CSV rows) may
    # still link an errors URL we have no shape for. The status's URL wins;
    # else [result.errors] path names the list (HubSpot, Salesforce name none).
    errors_url = errors_list_url(desc, step.op.remote_job_id or "", status.errors_url)
    if fetched.check.ok and errors_url:
        pages = await _error_pages(step, conn, errors_url)
        fetched = Collected(
            fetched.check,
            fetched.content,
            "result",
            fetched.counts,
            [*fetched.failures, *pages],
            fetched.call_id,
        )
    return await _store_and_move(step, conn, fetched, attempt, status)


async def _out_of_retries(step: Step, conn: Any, attempt: int) -> bool:
    """Has this collection retried what may pass long enough to give up?

    MAX_RESULT_ATTEMPTS tries at least, and `limits.result_retry_seconds` since
    the operation entered result_collecting, or until its result deadline if
    that comes first: a provider's result outlives its outages, and six tries
    (about a minute) sent a five-minute one to a human.
    """
    if attempt < MAX_RESULT_ATTEMPTS:
        return False
    now = step.now()
    if now >= step.op.result_deadline:
        return True  # the agent's own bound on waiting for the result
    since = await ledger.state_entered_at(conn, step.op.operation_id, S.RESULT_COLLECTING)
    if since is None:
        return True
    budget = step.adapter.desc.limits.result_retry_seconds
    return (now - since).total_seconds() >= budget


async def _final_status(step: Step, conn: Any, attempt: int, *, fresh: bool) -> HttpResponse | None:
    """The response of our final read: re-read from the call log, or read again
    (always on a retry: result links expire, and an operator may have resumed)."""
    status = step.adapter.desc.status
    row = (
        None
        if fresh
        else await conn.fetchrow(
            q("latest_poll_call"),
            step.op.operation_id,
            [*status.state_from_http_status, *status.state_in_error_statuses],
        )
    )
    recorded = recorded_response(row, step.adapter.headers_read) if row is not None else None
    if recorded is not None:
        return recorded
    assert step.op.remote_job_id is not None
    req = step.adapter.build_status(step.op.remote_job_id, step.op.status_url)
    sent = await _recorded_call(step, conn, req, "status", step.op.poll_attempts + 1)
    if sent is None or not status.answers(sent.status_code):
        return None
    return sent


async def _recorded_call(
    step: Step, conn: Any, req: HttpRequest, kind: str, attempt: int
) -> HttpResponse | None:
    """One call recorded before it leaves and completed after; the response, if any."""
    return (await _recorded_exchange(step, conn, req, kind, attempt))[1]


async def _recorded_exchange(
    step: Step, conn: Any, req: HttpRequest, kind: str, attempt: int
) -> tuple[int | None, HttpResponse | None]:
    """`_recorded_call`, with the call's id (None: held back, nothing sent or recorded)."""
    if step.held_back() is not None:
        return None, None
    call_id = await step.begin_call(conn, req, kind, attempt)
    sent = await step.send(req, conn)
    wait = None
    if sent.response is not None and sent.response.status_code in (429, 503):
        wait = imposed_wait(read_status(step, sent.response).retry_after_seconds)
    elif (
        sent.response is not None
        and sent.error_category == "http_4xx"
        and throttle_code(step.adapter.desc, sent.response) is not None
    ):
        # a throttle told by its code (AWS's 400 ThrottlingException) served
        # nothing, as a 429: on record as such, a fetch that consumes the result
        # is not taken for one that may have (result_fetch_may_have_arrived)
        sent = replace(sent, error_category="back_pressure")
    await step.end_call(conn, call_id, sent, wait=wait)
    if sent.refused is not None:
        raise _Refused(sent.refused)
    return call_id, sent.response


class _Refused(Exception):
    """A call the connection guard refused: its host resolves to an internal address.

    Not transient (the next try meets the same answer from the same DNS), so
    the collection stops at once with the reason, as it does for such an
    address written out (`check_sendable`), instead of retrying to its limit
    under a generic "kept failing".
    """


async def _fetch(
    step: Step, conn: Any, status_resp: HttpResponse, status: StatusFact, attempt: int
) -> Collected | Delay:
    desc = step.adapter.desc
    assert step.op.remote_job_id is not None
    if is_empty_result(desc, status):
        check = validate_empty_result(desc, status)
        return Collected(check, b"", "result", _counts(check, status))
    if desc.result.source is ResultSource.WEBHOOK:
        return await _delivered(step, conn, status, attempt)
    try:
        reqs = step.adapter.build_result_requests(step.op.remote_job_id, status)
    except RequestBuildError as exc:
        if _names_no_result(desc, status) and not await _out_of_retries(step, conn, attempt):
            return step.until_allowed(step.retry(attempt, status.retry_after_seconds))
        return await _give_up(step, conn, S.RESULT_UNAVAILABLE, f"cannot locate the result: {exc}")
    if not reqs:
        if desc.result.source is ResultSource.NONE:
            value: Any = {"remote_state": status.raw_state}
        else:
            value = step.adapter.inline_result(status_resp)
        return _inline_collected(step, value, status)
    too_many = _too_many_files(reqs)
    if too_many is not None:
        return await _give_up(step, conn, S.RESULT_VALIDATION_FAILED, too_many)
    responses: list[HttpResponse] = []
    documents: list[tuple[list[HttpResponse], str]] = []  # each fetch's pages, and its URL
    if len(reqs) == 1 and _the_read_answered(step, reqs[0], status_resp):
        responses.append(status_resp)
        documents.append(([status_resp], reqs[0].url))
    size = 0
    for req in reqs if not responses else ():
        if size > desc.result.expect.max_bytes and desc.result.follow is None:
            # already too large: the rest is never fetched, validation refuses it (the
            # documents of `result.follow` are not the result: each is read, each
            # bounded, lest the files after a large one be dropped unsaid)
            break
        parts = await _fetched_pages(step, conn, req, attempt)
        if isinstance(parts, _Stop):
            return parts.delay
        refused = _refused_part(step, parts, status)
        if refused is not None:
            return refused
        responses.extend(parts)
        documents.append((parts, req.url))
        size += sum(len(part.body) for part in parts)
    if desc.result.follow is not None:
        followed = await _followed(step, conn, documents, status, attempt)
        if not isinstance(followed, list):
            return followed
        responses = followed
    check = step.adapter.validate_result(responses if len(responses) > 1 else responses[0], status)
    content = _stored_content(step, check, responses)
    return Collected(check, content, "result", _counts(check, status), check.failed_items)


async def _delivered(step: Step, conn: Any, status: StatusFact, attempt: int) -> Collected | Delay:
    """`result.source = webhook`: the result in a delivery attached to the operation.

    Baseten keeps no output: its status read says SUCCEEDED, and the output is
    POSTed to our webhook alone. The newest delivery holding a value at
    `result.inline` is the result (signed: the receiver stored only verified
    deliveries), judged as an inline result is; our read has decided the state.
    None yet (the read may come before the delivery): read again at the backoff,
    a delivery waking the operation sooner, until `result_retry_seconds`. Before,
    no description could take it: such an API succeeded without its result.
    """
    path = step.adapter.desc.result.inline
    assert path is not None
    found = await _newest_delivered(step, conn, path)
    if found is not None:
        event_id, value = found
        if _redacted(value):
            return await _give_up(
                step,
                conn,
                S.RESULT_UNAVAILABLE,
                f"the result comes in a delivery alone (result.source = webhook), and the "
                f"delivery {event_id} holding it at result.inline = {path.text} "
                f"was stored with credential-looking link values {REDACTED} (a pre-signed "
                "link is a bearer credential): the output as sent is kept nowhere",
            )
        return _inline_collected(step, value, status)
    if await _out_of_retries(step, conn, attempt):
        return await _give_up(
            step,
            conn,
            S.RESULT_UNAVAILABLE,
            f"the result comes in a delivery alone (result.source = webhook), and none "
            f"attached to this operation holds it at result.inline = {path.text}",
        )
    return step.until_allowed(step.retry(attempt))


async def _newest_delivered(step: Step, conn: Any, path: ValuePath) -> tuple[int, Any] | None:
    """The newest delivery attached to the operation holding a value at `path`, and
    that value; read a few at a time, newest first, however many came after it
    (progress events: a fixed window of the newest missed an output behind them).
    A delivery naming another job (attached by our reference before the job id
    was known) is not read: before, its output was this job's result."""
    op = step.op
    async with conn.transaction():
        cursor = conn.cursor(
            q("delivered_payloads"), op.operation_id, op.remote_job_id, prefetch=DELIVERIES_A_FETCH
        )
        async for row in cursor:
            payload = row["payload"]
            value = extract(path, json.loads(payload) if isinstance(payload, str) else payload)
            if value is not None:
                return row["webhook_event_id"], value
    return None


def _redacted(value: Any) -> bool:
    """Does a value read from a stored delivery hold a link the receiver redacted?

    The receiver stores every delivery with its links' credential-looking query
    values replaced (`sanitize_text_urls`): a result read from there would keep
    a pre-signed link broken, and pass as whole. Before, it was the result."""
    return f"={REDACTED}" in json.dumps(value, ensure_ascii=False)


async def _followed(
    step: Step,
    conn: Any,
    documents: Sequence[tuple[list[HttpResponse], str]],
    status: StatusFact,
    attempt: int,
) -> list[HttpResponse] | Collected | Delay:
    """The result one hop past its documents (`result.follow`): each document's
    link fetched (`documents`: each fetch's pages, with the URL it was asked at; the
    link is the first page's that names one), the answers the parts to judge.

    The link is fetched as a status-named result URL is (`build_followed`,
    `_fetched_part`): refused if it points at an internal host not allowed, no
    credential off the provider's origins, redirects as described, and a 4xx on
    the first attempt sends the next to read the status and the document afresh
    for a new link. A document naming no link is never a success: its verdict is
    the collection's (unavailable, or invalid if it is not JSON).
    """
    desc = step.adapter.desc
    got: list[HttpResponse] = []
    size = 0
    for pages, asked in documents:
        if size > desc.result.expect.max_bytes:
            break  # already too large: the rest is never fetched, validation refuses it
        document, link = _link_of(step, pages)
        if not isinstance(link, str):
            return Collected(link, document.body, "result", _counts(link, status))
        try:
            req = build_followed(desc, document.url or asked, link)
        except RequestBuildError as exc:
            reason = f"cannot fetch the result the document links to: {exc}"
            return await _give_up(step, conn, S.RESULT_UNAVAILABLE, reason)
        answer = await _fetched_part(step, conn, req, attempt, verdict=True, followed=True)
        if isinstance(answer, _Stop):
            return answer.delay
        refused = _refused_part(step, [answer], status)
        if refused is not None:
            return refused
        # as its document says: a gzip file (SP-API's compressionAlgorithm) undone
        opened = decompressed(desc, document, answer)
        if isinstance(opened, ResultCheck):
            return Collected(opened, answer.body, "result", _counts(opened, status))
        got.append(opened)
        size += len(opened.body)  # as validation counts it: decompressed
    return got


def _link_of(step: Step, pages: Sequence[HttpResponse]) -> tuple[HttpResponse, str | ResultCheck]:
    """The first page naming the result's link, and the link; else the verdict on the
    first page that is no JSON, or on the first page (none names a link)."""
    verdicts: list[tuple[HttpResponse, ResultCheck]] = []
    for page in pages:
        link = followed_link(step.adapter.desc, page)
        if isinstance(link, str):
            return page, link
        if not link.unavailable:
            return page, link
        verdicts.append((page, link))
    return verdicts[0]


def _names_no_result(desc: ProviderDescription, status: StatusFact) -> bool:
    """Does this final read name no result link or file where the description
    expects one? A job read done before its output is filled in (Luma's
    `completed` with `assets: null`, a `video_url` still null) says nothing of
    the result: read again, as a read naming no state is, rather than send a
    finished job to a human at the first such read."""
    source = desc.result.source
    if source is ResultSource.URL:
        return not status.result_url
    return source is ResultSource.FILES and not status.result_file_ids


def _refused_part(
    step: Step, parts: Sequence[HttpResponse], status: StatusFact
) -> Collected | None:
    """A file (or page) the provider would not give, judged alone: the result is
    unavailable for its reason (a file URL expired: 403, 404), as a result URL's
    is, and the files after it are not fetched. Judged with the others, a binary
    result of several files was refused as such, and the expired link never said."""
    refused = next((p for p in parts if not 200 <= p.status_code < 300), None)
    if refused is None:
        return None
    check = step.adapter.validate_result(refused, status)
    return Collected(check, refused.body, "result", _counts(check, status))


def _too_many_files(reqs: Sequence[HttpRequest]) -> str | None:
    """Why a result of this many files is not fetched (a list path can name any
    number), for a result and a partial output alike; None: not too many."""
    if len(reqs) <= MAX_RESULT_FILES:
        return None
    return f"the final status names {len(reqs)} result files, more than {MAX_RESULT_FILES}"


def _the_read_answered(step: Step, req: HttpRequest, status_resp: HttpResponse) -> bool:
    """Is the final read's answer the result itself? The result is at the status URL and
    asked for alike (same method, URL and headers: Stability's read of a finished job
    answers 200 with the video), in one page: fetching it again downloaded the same
    bytes a second time, and a result served once was lost to the read. Not with a
    checksum to check, nor for a compressed answer: those are fetched as ever."""
    result = step.adapter.desc.result
    if result.pages is not None or not 200 <= status_resp.status_code < 300:
        return False
    if result.expect.checksum is not Checksum.NONE or status_resp.header("content-encoding"):
        # a read keeps no digest of the bytes as sent (a download does), and one
        # rebuilt from the call log may lack a header a checksum names: fetched
        return False
    assert step.op.remote_job_id is not None
    try:
        read = step.adapter.build_status(step.op.remote_job_id, step.op.status_url)
    except RequestBuildError:
        return False
    return (read.method, read.url, read.headers, read.json) == (
        req.method,
        req.url,
        req.headers,
        req.json,
    )


@dataclass(frozen=True)
class _Stop:
    """The collection ends this step here, with this delay (a retry, or None)."""

    delay: Delay


async def _fetched_pages(
    step: Step,
    conn: Any,
    first: HttpRequest,
    attempt: int,
    page_1: HttpResponse | None = None,
    changes: int = 0,
) -> list[HttpResponse] | _Stop:
    """One result fetch, and, for a paged result (`result.pages`), every page after it.

    A result whose pages do not all arrive is not collected from the ones
    that did: a page missing would be a truncated result stored as whole.
    A page that answers other than 2xx ends the paging, and validation
    judges it with the rest (refused: a result part must be a success);
    so does a result already past `max_bytes` (refused as too large, the
    rest never fetched). An attempt cut short by a page it may try again
    (a throttle, a 5xx) leaves the pages it read to the next attempt
    (reconciler/page_memory.py), which fetches page 1 again and goes on
    from where the last stopped only if page 1 is the same bytes: a result
    the provider rewrote meanwhile is read again from that new page 1, never
    joined to the old pages. If the page it goes on with is refused (a token
    that expired meanwhile), it reads on from the page 1 it just fetched;
    after MAX_STALLS attempts in a row that went on and read no page, the
    next reads from page 1. `page_1` (with the `changes` counted so far): a
    first page this attempt already fetched, to read on from.
    """
    memory = step.ctx.pages
    key = (step.op.operation_id, _sent(first))
    kept = memory.take(*key, step.ctx.clock.monotonic()) if page_1 is None else None
    if page_1 is None:
        changes = kept.changes if kept is not None else 0
        got = await _fetched_part(step, conn, first, attempt, verdict=True, changes=changes)
        if isinstance(got, _Stop):
            if kept is not None and got.delay is not None:
                # page 1 not answered this time: the kept pages are no less good
                memory.keep(*key, kept, step.ctx.clock.monotonic())
            return got
        page_1 = got
    progress = _going_on(step, first, page_1, kept, changes)
    resumed = len(progress.parts) if progress is kept else 0

    async def part(req: HttpRequest) -> HttpResponse | _Stop:
        return await _fetched_part(step, conn, req, attempt, changes=progress.changes)

    parts = await _pages_after(step, progress, part)
    if isinstance(parts, _Stop):
        # Kept for an attempt to come, not after a give-up, nor once attempts that
        # went on from kept pages read none MAX_STALLS times in a row: a page that
        # fails each time it is resumed may be a token gone stale that the provider
        # answers with a 5xx or a 429, which page 1 would mend.
        progress.stalls = progress.stalls + 1 if len(progress.parts) == resumed else 0
        if parts.delay is not None and progress.stalls < MAX_STALLS:
            memory.keep(*key, progress, step.ctx.clock.monotonic())
        return parts
    if isinstance(parts, _PagesCut):
        return _Stop(await _give_up(step, conn, S.RESULT_UNAVAILABLE, parts.reason))
    if resumed and len(parts) > resumed and not 200 <= parts[resumed].status_code < 300:
        log.warning(
            "a result page refused where the last attempt stopped; reading from page 1",
            extra={"ctx": {"operation_id": step.op.operation_id, "page": resumed + 1}},
        )
        return await _fetched_pages(step, conn, first, attempt, page_1, progress.changes)
    return parts


def _going_on(
    step: Step,
    first: HttpRequest,
    page_1: HttpResponse,
    kept: PageProgress | None,
    changes: int,
) -> PageProgress:
    """Where this attempt reads on from, given the first page it fetched: the
    pages an earlier attempt kept if page 1 is still what they began with, else
    the reading of the result begun again from this page 1 (a rewritten result is
    counted in `changes`, logged, and said in the reason if the attempts run out)."""
    if kept is not None and kept.same_result(page_1, step.adapter.desc.result.items):
        return kept
    progress = _begun(step, first, page_1)
    progress.changes = changes
    if kept is not None and 200 <= page_1.status_code < 300:
        progress.changes += 1
        log.warning(
            "the result changed since the last attempt (its first page differs);"
            " the pages read are dropped and it is read again from page 1",
            extra={
                "ctx": {
                    "operation_id": step.op.operation_id,
                    "pages_dropped": len(kept.parts),
                    "changes": progress.changes,
                }
            },
        )
    return progress


@dataclass(frozen=True)
class _PagesCut:
    """The pages cannot all be read (too many, a loop, a page no request can name)."""

    reason: str


_T = TypeVar("_T")


def _begun(step: Step, first: HttpRequest, got: HttpResponse) -> PageProgress:
    """The reading of a result whose first page (`got`) answered `first`."""
    pages = step.adapter.desc.result.pages
    token = step.adapter.result_next_page(got) if pages is not None else None
    return PageProgress(first, [got], first, token, {_sent(first)})


async def _pages_after(
    step: Step,
    progress: PageProgress,
    part: Callable[[HttpRequest], Awaitable[HttpResponse | _T]],
) -> list[HttpResponse] | _PagesCut | _T:
    """Every page `progress` leads to (`result.pages`) after the ones it holds, each
    fetched by `part`, which may end the paging with a value of its own; `progress`
    grows with each page, so that it says where a stop left the reading.

    A page whose request is one already answered (the same URL and body: a token,
    an offset or a next URL naming a page read before) is a loop, never fetched again."""
    pages = step.adapter.desc.result.pages
    size = progress.size
    max_bytes = step.adapter.desc.result.expect.max_bytes
    while (
        progress.token is not None
        and 200 <= progress.parts[-1].status_code < 300
        and size <= max_bytes
    ):
        assert pages is not None
        got = progress.parts[-1]
        try:
            # a next page's URL resolves against the URL its page answered from
            page_url = got.url or progress.req.url
            req = _next_page(step, pages, progress.first, progress.token, page_url)
        except RequestBuildError as exc:
            return _PagesCut(f"cannot request page {len(progress.parts) + 1} of the result: {exc}")
        sent = _sent(req)
        if sent in progress.seen:
            return _PagesCut("the result has its pages loop (a page named one already read)")
        announced = announced_pages(pages, progress.token)
        if announced is not None and announced > pages.max_pages:
            return _PagesCut(
                f"the result names {announced} pages, more than {pages.max_pages} "
                "(result.pages.max_pages)"
            )
        if len(progress.parts) >= pages.max_pages:
            return _PagesCut(
                f"the result has more than {pages.max_pages} pages (result.pages.max_pages)"
            )
        answer = await part(req)
        if not isinstance(answer, HttpResponse):
            return answer
        progress.seen.add(sent)
        progress.parts.append(answer)
        progress.req = req
        size += len(answer.body)
        progress.token = _leads_on(step, pages, answer, progress.token)
    return progress.parts


def _sent(req: HttpRequest) -> tuple[str, str]:
    """What tells one page's request from another's: its URL, and its body (a token
    in the body of a POST to one URL: Textract's `NextToken`)."""
    return req.url, json.dumps(req.json, sort_keys=True)


# A plugin's paging hooks written before next_page_url and offset paging take
# one argument fewer: they are passed what those modes need only when in use.


def _next_page(
    step: Step, pages: ResultPages, first: HttpRequest, token: str, page_url: str
) -> HttpRequest:
    if pages.next_page_url is None:
        return step.adapter.build_result_page(first, token)
    return step.adapter.build_result_page(first, token, page_url)


def _leads_on(step: Step, pages: ResultPages, got: HttpResponse, token: str) -> str | None:
    if not pages.counted:
        return step.adapter.result_next_page(got)
    return step.adapter.result_next_page(got, token)


async def _fetched_part(
    step: Step,
    conn: Any,
    req: HttpRequest,
    attempt: int,
    *,
    verdict: bool = False,
    followed: bool = False,
    changes: int = 0,
) -> HttpResponse | _Stop:
    """One fetch's answer, or how the step ends when there is none to judge.

    With `verdict` (a result's first fetch), an answer `[result.failed]`
    names ends the job as failed: it is the provider's verdict, not a
    result to judge, nor, for a 5xx it names, a fetch to retry. `followed`:
    the fetch of a link a result document named (`result.follow`), a link
    that expires, on storage whose answers are no verdict of the provider's.
    `changes`: the attempts that found a paged result rewritten since the
    last, said in the reason when the attempts run out (each began again from
    page 1, and none read one version whole).
    """
    fetched = await _fetch_result(step, conn, req, attempt)
    resp = fetched.response
    if verdict and attempt == 1 and resp is not None and _link_refused(step, resp, followed):
        # The link came from the read that decided success, perhaps long ago
        # (a backstop read, a claim that waited): a pre-signed link expires
        # (HeyGen's video_url, S3's 403 "Request has expired"). The next
        # attempt reads the status afresh, which names a fresh link.
        log.warning(
            "result link refused; the status is read again for a fresh one",
            extra={"ctx": {"operation_id": step.op.operation_id, "status": resp.status_code}},
        )
        return _Stop(step.until_allowed(step.retry(attempt)))
    # a verdict is the provider's own answer, not a redirect target's
    if (
        verdict
        and not followed
        and resp is not None
        and fetched.call_id is not None
        and not fetched.hops
    ):
        failure = step.adapter.result_failure(resp)
        if failure is not None:
            return _Stop(await _failed_by_answer(step, conn, failure, fetched.call_id))
    if verdict and resp is not None and _not_there_yet(step, resp, attempt):
        # Storage behind a finished job is often eventually consistent (an object
        # written as the job ends, a replica not yet caught up): a 404 at once
        # after the read that said done is no proof the result is gone.
        log.warning(
            "result not found yet; fetched again after the backoff",
            extra={"ctx": {"operation_id": step.op.operation_id, "attempt": attempt}},
        )
        return _Stop(step.until_allowed(step.retry(attempt)))
    if not _judged(resp, step):
        if await _out_of_retries(step, conn, attempt):
            reason = f"result fetch kept failing after {attempt} attempts"
            if changes:
                reason += (
                    f"; the result kept changing: {changes} attempt(s) found its first page"
                    " changed since the last and read it again from page 1, and none read"
                    " one version of it whole"
                )
            return _Stop(await _give_up(step, conn, S.RESULT_UNAVAILABLE, reason))
        return _Stop(step.until_allowed(step.retry(attempt)))
    if fetched.unfollowed is not None:
        # the result is there, behind a link: not unavailable, and no content to judge
        reason = f"result fetch answered HTTP {resp.status_code}: {fetched.unfollowed}"
        return _Stop(await _give_up(step, conn, S.NEEDS_ATTENTION, reason))
    return resp


def _judged(resp: HttpResponse | None, step: Step) -> TypeGuard[HttpResponse]:
    """An answer to judge, not a fetch to try again: the latter is none at all, a
    5xx, a 429, or a throttle told by its code (`status.throttle_codes`: AWS's 400
    ProvisionedThroughputExceededException on a page of Textract's blocks)."""
    if resp is None or resp.status_code >= 500 or resp.status_code == 429:
        return False
    return resp.status_code < 400 or throttle_code(step.adapter.desc, resp) is None


def _not_there_yet(step: Step, resp: HttpResponse, attempt: int) -> bool:
    """A result's first fetch answered 404 with attempts left (MAX_RESULT_ATTEMPTS):
    fetched again on the backoff, after a fresh status read, as a 5xx is, but for
    the attempts alone (a result missing for longer is for a human, not an hour of
    retries). Not for a fetch with side effects: its retry would be refused as
    possibly consumed. Before, the first 404 was result_unavailable at once (with a
    link the status named, the second), though the result appeared seconds later."""
    return (
        resp.status_code == 404
        and attempt < MAX_RESULT_ATTEMPTS
        and not step.adapter.desc.result.side_effects
    )


def _link_refused(step: Step, resp: HttpResponse, followed: bool = False) -> bool:
    """A 4xx from a result URL the status named (`source = url`, or a file's URL with
    `source = files` and no path) or a result document did (`followed`): an expired
    or revoked link as likely as a missing result. Not for a fetch with side
    effects: its retry would be refused as possibly consumed."""
    result = step.adapter.desc.result
    return (
        (followed or result.source is ResultSource.URL or result.file_urls)
        and not result.side_effects
        and 400 <= resp.status_code < 500
        and resp.status_code != 429
    )


def _stored_content(step: Step, check: ResultCheck, responses: Sequence[HttpResponse]) -> bytes:
    """What a valid result is stored as: its parts as one document (the bytes its
    sha256 names); an invalid one is never stored, and may not join."""
    bodies = [r.body for r in responses]
    if not check.ok:
        return b"".join(bodies)
    if check.decoded is not None:  # a base64 field the check has decoded already
        return check.decoded
    return result_content(step.adapter.desc.result, bodies)


def _inline_collected(step: Step, value: Any, status: StatusFact) -> Collected:
    """A result found in an answer (the status, a delivery), judged as an inline
    result is, with its failed items too, as a fetched result's: Zendesk's job
    status lists each refused user in `results`; before, they were counted,
    never recorded."""
    check = step.adapter.validate_inline_result(value, status)
    content = _inline_content(step, check, value)
    return Collected(check, content, "result", _counts(check, status), check.failed_items)


def _inline_content(step: Step, check: ResultCheck, value: Any) -> bytes:
    """What a result found in a response is stored as: the bytes its sha256 names
    (canonical JSON, or a `result.base64` field decoded); an invalid one is never stored."""
    if not check.ok:
        return inline_json(value)
    if check.decoded is not None:  # a base64 field the check has decoded already
        return check.decoded
    return inline_content(step.adapter.desc.result, value)


@dataclass(frozen=True)
class _Fetched:
    """A result fetch's last answer (None: none came) and, when that answer is a
    redirect left unfollowed, why."""

    response: HttpResponse | None
    unfollowed: str | None = None
    call_id: int | None = None  # the call that got `response`
    hops: int = 0  # redirects followed to get it


async def _fetch_result(step: Step, conn: Any, req: HttpRequest, attempt: int) -> _Fetched:
    """One result fetch, through the redirects `result.follow_redirects` allows.

    Every hop is a call of its own in the log (its URL sanitized as any
    call's), so the URL the result finally came from is on record; the
    credential goes no further than the provider's origin (`build_redirect`).
    """
    desc = step.adapter.desc
    call_id, resp = await _recorded_exchange(step, conn, req, "result", attempt)
    hops = 0
    while resp is not None and 300 <= resp.status_code < 400:
        location = resp.header("location")
        if not desc.result.follow_redirects:
            return _Fetched(resp, REDIRECT_NOT_FOLLOWED, call_id)
        if not location:
            return _Fetched(resp, "a redirect without a Location", call_id)
        if hops >= MAX_RESULT_REDIRECTS:
            return _Fetched(
                resp, f"more than {MAX_RESULT_REDIRECTS} redirects; not followed", call_id
            )
        try:
            req = build_redirect(desc, req, location)
        except RequestBuildError as exc:
            return _Fetched(resp, f"redirect not followed: {exc}", call_id)
        hops += 1
        call_id, resp = await _recorded_exchange(step, conn, req, "result", attempt)
    return _Fetched(resp, call_id=call_id, hops=hops)


async def _failed_by_answer(step: Step, conn: Any, failure: StatusFact, call_id: int) -> Delay:
    """The job failed, as the result fetch's answer (`call_id`) says: that answer
    observed, and the move to failed citing it, in one transaction."""
    error = failure.error
    said = (error.message or error.code) if error is not None else None
    cause = f"the result fetch answered {failure.raw_state}: the job failed"
    async with conn.transaction():
        await step.reload(conn)
        observation_id = await evidence.record_result_verdict(
            conn, step.op.operation_id, call_id, observed_of(failure), fence=step.fence
        )
        await step.move(
            conn,
            S.FAILED,
            f"{cause} ({said})" if said else cause,
            (Evidence.OBSERVATION, observation_id),
        )
    return None


async def _error_pages(step: Step, conn: Any, errors_url: str) -> list[ItemFailure]:
    failures: list[ItemFailure] = []
    token: str | None = None
    for page in range(MAX_ERROR_PAGES):
        try:
            req = step.adapter.build_errors_page(errors_url, token)
        except RequestBuildError:
            # The rest stays at the provider; the counts still say how many failed.
            log.warning(
                "error page cannot be requested; failed items kept so far only",
                extra={"ctx": {"operation_id": step.op.operation_id, "page": page + 1}},
            )
            break
        resp = await _recorded_call(step, conn, req, "errors", page + 1)
        if resp is None or resp.status_code != 200:
            break
        try:
            parsed = step.adapter.parse_errors_page(resp)
        except ValueError as exc:
            # A page the description cannot read (a proxy's HTML answered 200, a
            # CSV without its columns): the result is no less good. Raised, it
            # failed the step at every attempt and the result was never stored.
            log.warning(
                "error page unreadable; failed items kept so far only",
                extra={
                    "ctx": {
                        "operation_id": step.op.operation_id,
                        "page": page + 1,
                        "why": str(exc)[:200],
                    }
                },
            )
            break
        failures.extend(parsed.items)
        if _enough_failures(step, failures):
            return failures[:MAX_FAILED_ITEMS]
        token = parsed.next_page_token
        if not token:
            break
    return failures


def _enough_failures(step: Step, failures: list[ItemFailure]) -> bool:
    """A CSV errors list is read no further once it gave MAX_FAILED_ITEMS, as a CSV
    result's failed rows are kept: one Salesforce failedResults page may hold
    thousands of rows, where a JSON page holds its page_size. The status's counts
    still say how many failed."""
    spec = step.adapter.desc.result.errors
    csv_list = spec is not None and spec.format is ResultFormat.CSV
    return csv_list and len(failures) >= MAX_FAILED_ITEMS


async def _store_and_move(
    step: Step, conn: Any, collected: Collected, attempt: int, status: StatusFact
) -> Delay:
    check = collected.check
    try:
        async with conn.transaction():
            result_id = await store(step, conn, collected)
            if not check.ok:
                await step.move(
                    conn,
                    S.RESULT_VALIDATION_FAILED,
                    f"result failed validation: {check.reason}",
                    sha256=check.sha256,
                    size=check.size,
                )
                return None
            none_ok = _every_item_failed(collected)
            call_id = collected.call_id
            if none_ok is not None and call_id is None:
                call_id = await conn.fetchval(
                    q("newest_result_answer"), step.op.operation_id, attempt
                )
            if none_ok is not None and call_id is not None:
                # The result is the verdict: what a status's counts would have
                # said (none ok: failed), its failures kept as the evidence.
                failure = replace(status, remote_state=RemoteState.FAILED, error=none_ok)
                observation_id = await evidence.record_result_verdict(
                    conn,
                    step.op.operation_id,
                    call_id,
                    observed_of(failure),
                    fence=step.fence,
                )
                await step.move(
                    conn,
                    S.FAILED,
                    f"result fetched: {none_ok.message}",
                    (Evidence.OBSERVATION, observation_id),
                )
                return None
            await step.move(
                conn, S.SUCCEEDED, "result fetched and validated", (Evidence.RESULT, result_id)
            )
    except StoreFailed as exc:
        return await _not_stored(step, conn, exc, attempt)
    return None


def _every_item_failed(collected: Collected) -> ErrorInfo | None:
    """A result whose items all failed (none succeeded, some failed): the job's
    error, naming the first failure; None for any other. A batch API that lists
    its failures beside its outputs (Together's error file, alone when every
    request failed) says so in the result only: stored as a success, the agent
    was told its batch worked."""
    total, succeeded, failed = collected.counts
    if succeeded != 0 or not failed or collected.check.items_succeeded:
        return None  # (a status's 0 against successes the result holds: no verdict)
    if total is None or total <= failed:
        message = f"every item failed ({failed} of {failed})"
    else:  # the rest neither failed nor succeeded (cancelled, expired, never run)
        message = f"no item succeeded ({failed} of {total} failed)"
    first = next(iter(collected.failures), None)
    if first is None:
        return ErrorInfo(None, message)
    said = first.message or first.code
    key = _item_key(first, 0)
    return ErrorInfo(first.code, f"{message}; the first, {key}: {said}" if said else message)


async def _not_stored(step: Step, conn: Any, exc: StoreFailed, attempt: int) -> Delay:
    """A valid result our disk would not take: fetched again later, a human's once the
    attempts run out; at once for a result whose fetch consumes it (no second fetch
    would get it, and the reason must say it was ours, not the provider's)."""
    side_effects = step.adapter.desc.result.side_effects
    if side_effects or await _out_of_retries(step, conn, attempt):
        reason = f"the result was fetched and validated, but {exc}"
        if side_effects:
            reason += "; fetching it has side effects, so it is not fetched again"
        return await _give_up(step, conn, S.NEEDS_ATTENTION, reason)
    log.warning(
        "result not stored; fetched again later",
        extra={"ctx": {"operation_id": step.op.operation_id, "problem": str(exc)}},
    )
    return step.until_allowed(step.retry(attempt))


async def _give_up(step: Step, conn: Any, dst: LocalState, reason: str) -> Delay:
    async with conn.transaction():
        await step.reload(conn)
        await step.move(conn, dst, reason)
    return None


# ------------------------------------------------------------------ the other two sources


async def store_sync_result(step: Step, conn: Any, fact: CreateFact, call_id: int) -> Delay:
    """A synchronous 200/201: the result came with the create answer (caller's transaction).

    A job id the answer names that another operation holds (the database
    refuses it: JobShared) is not recorded, and the result is kept all the
    same, the move saying why: nothing is read or cancelled after a
    synchronous result, so the id served nothing but the record, and the
    result, delivered once, would be lost with it. So is an id PostgreSQL
    cannot hold as given (NUL): before, the database refused the row and the
    step failed on every lease, the result never kept.
    """
    cause = "create answered with the final result"
    unrecorded = False
    unstorable = unstorable_job_id(fact.remote_job_id) if fact.remote_job_id else None
    if unstorable is not None:
        unrecorded = True
        cause += f"; its job id cannot be recorded as given ({unstorable}): not recorded"
    elif fact.remote_job_id:
        try:
            async with conn.transaction():  # a savepoint: JobShared rolls back only this
                await ledger.record_remote_job(
                    conn,
                    step.op.operation_id,
                    fact.remote_job_id,
                    create_mode="sync",
                    fence=step.fence,
                )
        except JobShared:
            unrecorded = True
            cause += (
                f"; its job id {fact.remote_job_id} is another operation's "
                "(ids reused?): not recorded"
            )
    if not fact.remote_job_id or unrecorded:
        await ledger.record_sync_mode(conn, step.op.operation_id, fence=step.fence)
    await step.reload(conn)
    await step.move(conn, S.RESULT_COLLECTING, cause, (Evidence.CALL, call_id))
    check = step.adapter.validate_inline_result(fact.sync_result, None)
    collected = Collected(
        check,
        _inline_content(step, check, fact.sync_result),
        "sync",
        (check.items_total, check.items_succeeded, check.items_failed),
        check.failed_items,
        call_id,
    )
    try:
        result_id = await store(step, conn, collected)
    except StoreFailed as exc:  # nothing written yet: the moves above stand
        reason = f"the synchronous result was validated, but {exc}"
        await step.move(conn, S.NEEDS_ATTENTION, reason)
        return None
    if not check.ok:
        await step.move(conn, S.RESULT_VALIDATION_FAILED, f"inline result invalid: {check.reason}")
        return None
    await step.move(conn, S.SUCCEEDED, "synchronous result validated", (Evidence.RESULT, result_id))
    return None


class Partial(Enum):
    """What became of a cancelled job's partial output (or a failed job's failures)."""

    STORED = "stored"  # kept and attached
    NONE = "none"  # nothing to keep (none offered, not ours to fetch, invalid, gone, given up)
    RETRY = "retry"  # not fetchable now (back-pressure, a transient failure): try again


async def collect_partial_output(step: Step, conn: Any, status: StatusFact) -> Partial:
    """Keep what a cancelled job already produced (OpenAI keeps partial output), or
    the list of a failed job's failures (`result.failures_only`).

    Never a verdict: the operation still ends `cancelled` (or `failed`), but only once this
    concluded, so a fetch that could not be made now is made later (up to
    MAX_RESULT_ATTEMPTS attempts) instead of being lost with the move.
    """
    assert step.op.remote_job_id is not None
    if step.op.result_id is not None and (step.op.result_summary or {}).get("partial") is True:
        # Kept by a step that died (or lost its connection) before the move to
        # cancelled: the stored output is the recovery point. Fetching it again
        # stored it a second time (an outside crash-point sweep: two valid rows).
        return Partial.STORED
    if step.adapter.desc.result.side_effects:
        return Partial.NONE  # a fetch that consumes the result is not ours to make on the side
    if step.adapter.desc.result.follow is not None:
        # what the status names is a document linking to the output, not the
        # output: kept, it would stand for the result; not followed on the side
        return Partial.NONE
    try:
        reqs = step.adapter.build_result_requests(step.op.remote_job_id, status)
    except RequestBuildError:  # a file id or URL no request can carry: never fetchable
        log.warning(
            "partial output cannot be requested; not kept",
            extra={"ctx": {"operation_id": step.op.operation_id}},
        )
        return Partial.NONE
    if not reqs:
        return Partial.NONE
    too_many = _too_many_files(reqs)
    if too_many is not None:
        log.warning(
            "partial output of a cancelled job not kept",
            extra={"ctx": {"operation_id": step.op.operation_id, "reason": too_many}},
        )
        return Partial.NONE
    attempt = await ledger.bump_attempt(conn, "result", step.op.operation_id, fence=step.fence)
    if attempt is None:
        raise lease_lost(step.op.operation_id)
    if attempt > MAX_RESULT_ATTEMPTS:
        return Partial.NONE
    responses: list[HttpResponse] = []

    async def part(req: HttpRequest) -> HttpResponse | Partial:
        if step.held_back() is not None:
            return Partial.RETRY
        try:
            resp = (await _fetch_result(step, conn, req, attempt)).response
        except _Refused:  # logged by the sender; never fetchable from here
            return Partial.NONE
        if not _judged(resp, step):
            return Partial.RETRY
        return resp if resp.status_code == 200 else Partial.NONE

    for req in reqs:
        first = await part(req)
        if isinstance(first, Partial):
            return first
        # every page, as for a result: part of a page is never kept as the output
        parts = await _pages_after(step, _begun(step, req, first), part)
        if isinstance(parts, _PagesCut):
            log.warning(
                "partial output of a cancelled job cannot be read whole; not kept",
                extra={"ctx": {"operation_id": step.op.operation_id, "reason": parts.reason}},
            )
            return Partial.NONE
        if isinstance(parts, Partial):
            return parts
        responses.extend(parts)
    check = step.adapter.validate_result(responses if len(responses) > 1 else responses[0], status)
    if not check.ok:
        log.warning(
            "partial output of a cancelled job refused by validation; the job ends cancelled",
            extra={"ctx": {"operation_id": step.op.operation_id, "reason": check.reason}},
        )
        return Partial.NONE
    content = _stored_content(step, check, responses)
    collected = Collected(check, content, "partial", _counts(check, status), check.failed_items)
    try:
        async with conn.transaction():
            await store(step, conn, collected)
    except StoreFailed as exc:
        log.warning(
            "partial output not stored; fetched again later",
            extra={"ctx": {"operation_id": step.op.operation_id, "problem": str(exc)}},
        )
        return Partial.RETRY
    return Partial.STORED
