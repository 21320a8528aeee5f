"""One outbound call: send it, and turn the exchange into the ledger's plain records.

Every outbound call goes through `send`, which adds the trace context (W3C
`traceparent` plus the operation's trace id) and never raises for network
trouble: the caller gets a category it can record and reason about. The
functions below translate HTTP (requests, responses, the adapters' facts)
into the ledger's records (`shared.ledger.evidence`), which know no HTTP.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx

from reconciler.call_bounds import Bound
from reconciler.connect_guard import ConnectRefused
from reconciler.lanes import (
    ANSWER,
    MAX_ANSWER_BYTES,
    MIN_TRANSFER_RATE,
    SENT_DIGESTS,
    BodyTooLarge,
    Lane,
    Reading,
)
from shared.ids import traceparent
from shared.ledger import Operation
from shared.ledger.evidence import (
    CallAnswer,
    CallStart,
    Observed,
    StatusRead,
    bounded_wait,
)
from shared.providers import (
    HttpRequest,
    HttpResponse,
    ProviderDescription,
    StatusFact,
    classify_transport_error,
)
from shared.providers.delivery import TransportCategory
from shared.providers.description import ResultSource
from shared.providers.requests import status_is_the_result
from shared.redaction import CUT, MORE_HEADERS, REDACTED, stored_headers
from shared.signatures import static_header
from shared.telemetry import spans

log = logging.getLogger("jobwarden.reconciler")


@dataclass(frozen=True)
class Sent:
    response: HttpResponse | None
    error_category: str | None  # timeout | connect | reset | protocol | other
    duration_ms: int
    traceparent: str
    transport_failure: TransportCategory | None = None
    # Why the connection was refused before it was made (its host resolves to an
    # internal address: reconciler.connect_guard); the same again on every try.
    refused: str | None = None

    @property
    def status_code(self) -> int | None:
        return self.response.status_code if self.response is not None else None

    def sanitized_response_headers(self) -> dict[str, str] | None:
        if self.response is None:
            return None
        return stored_headers(self.response.headers)


def http_error_category(status: int | None) -> str | None:
    if status is None:
        return None
    if status in (429, 503):
        return "back_pressure"
    if status >= 500:
        return "http_5xx"
    if status >= 400:
        return "http_4xx"
    return None


# Result downloads may be large: for them the timeout stays httpx's, per phase
# (no read may stall that long), and the whole transfer is bounded by its pace
# (reconciler.lanes.download: request_timeout and a lease, plus a second per 64 KiB received).
TRANSFERS = frozenset({"result"})


def answer_reading(desc: ProviderDescription, action: str) -> Reading:
    """How much of an answer (not a download) is read: MAX_ANSWER_BYTES decoded.

    An answer that may carry the result itself (a status read when the
    result is inline or at the status URL, a create that can answer
    synchronously) may also be as large as the result may be (max_bytes),
    on top: past that, the result would be refused anyway.
    """
    carries = (action == "status" and status_carries_result(desc)) or (
        action == "create" and desc.create.sync_result is not None
    )
    if not carries:
        return ANSWER
    return Reading(keep=MAX_ANSWER_BYTES + desc.result.fetched_max_bytes)


def paced(reading: Reading, request_timeout: float, lease_seconds: float) -> Reading:
    """`reading` bounded by its pace, as a result download is (`lanes.download`):
    for a status read that may carry the result, which a whole-call timeout
    cut short when the result was large or the link slow."""
    grace = request_timeout + lease_seconds
    return replace(reading, min_rate=MIN_TRANSFER_RATE, allowance=grace)


def status_carries_result(desc: ProviderDescription) -> bool:
    """Can a status read's answer be the result itself? An inline result, or a
    result fetched from the status URL (`status_is_the_result`)."""
    return desc.result.source is ResultSource.INLINE or status_is_the_result(desc)


# Calls whose delivery matters (a create or cancel that may have arrived must
# not be treated as one that never left). For them, httpx reports when the
# request starts to leave, so an outer timeout that fires before that (waiting
# for a pooled connection, connecting) is known to be "connect".
DELIVERY_MATTERS = frozenset({"create", "cancel"})


class _Departure:
    """httpx `trace` callback: has the request started to leave this host?"""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        if name.endswith(".send_request_headers.started"):
            self.started = True


# A call this process decided not to make (no provider slot within the lease,
# or the provider's back-pressure window): it never left, like "connect".
NOT_SENT = "not_sent"
# Categories of a call that provably never left this host.
NEVER_LEFT = frozenset({"connect", NOT_SENT})


def not_sent(trace_id: str) -> Sent:
    """A call given up before it left this process (it may simply be made again)."""
    return Sent(None, NOT_SENT, 0, traceparent(trace_id), "connect")


async def send(lane: Lane, req: HttpRequest, trace_id: str, reading: Reading = ANSWER) -> Sent:
    """One exchange (`_send`); traced, it is a CLIENT span and the traceparent names it."""
    span = spans.client_span(req, trace_id)  # None unless tracing is on
    if span is None:
        return await _send(lane, req, trace_id, traceparent(trace_id), reading)
    with spans.ending(span):
        sent = await _send(lane, req, trace_id, spans.traceparent_of(span), reading)
        spans.end_client_span(span, sent.status_code, sent.error_category)
        return sent


async def _send(
    lane: Lane, req: HttpRequest, trace_id: str, parent: str, reading: Reading = ANSWER
) -> Sent:
    """One exchange, bounded as a whole by `req.timeout` (result downloads: by their pace).

    httpx's timeout applies to each phase (connect, write, each read); the
    outer bound makes it the whole call's, which is what the lease that
    fences the call is sized against. A download (`reading` with a
    min_rate) is bounded by its pace instead: its grace (request_timeout and
    a lease), plus a second per MIN_TRANSFER_RATE bytes received; the step
    renews its lease while it keeps that pace (Step._transfer), and one that
    falls behind fails as a "timeout". `reading` also bounds the body's size
    (an answer past it: "protocol").

    Never raises for what the call met: anything else (a URL httpx refuses,
    a port the socket layer cannot take) is category "other", or "connect"
    when it provably never left (an invalid URL; for a create or cancel, a
    failure before its request began to leave).
    """
    headers = {**req.headers, "traceparent": parent, "X-Trace-Id": trace_id}
    departure = _Departure() if req.action in DELIVERY_MATTERS else None
    started = time.perf_counter()
    try:
        # a download (or a paced answer) is bounded by its pace, not as a whole
        paced_read = req.action in TRANSFERS or reading.min_rate is not None
        async with Bound(None if paced_read else req.timeout):
            resp = await lane.call(
                req.method,
                req.url,
                headers=headers,
                json=req.json if req.content is None else None,
                content=req.content,
                phase_timeout=req.timeout,
                trace=departure.trace if departure else None,
                reading=reading,
            )
            body = resp.content
            if req.answer_secrets:  # a callback token echoed: gone before anything reads it
                body = static_header.scrub_held(body, req.answer_secrets)
    except (httpx.HTTPError, TimeoutError) as exc:
        elapsed = int((time.perf_counter() - started) * 1000)
        category = classify_transport_error(exc)
        if departure is not None and not departure.started and isinstance(exc, TimeoutError):
            category = "connect"  # our own bound fired before a byte left
        refused = None
        if isinstance(exc, BodyTooLarge):
            _warn(req, str(exc))
        elif isinstance(exc.__cause__, ConnectRefused):  # httpx's ConnectError, raised from it
            refused = str(exc.__cause__)
            _warn(req, refused, category)
        return Sent(None, category, elapsed, parent, category, refused)
    except Exception as exc:  # httpx.InvalidURL, an ExceptionGroup from the socket layer...
        elapsed = int((time.perf_counter() - started) * 1000)
        never_left = isinstance(exc, httpx.InvalidURL) or (
            departure is not None and not departure.started
        )
        category = "connect" if never_left else "other"
        # the type only: its text may quote the URL, a pre-signed link's signature included
        _warn(req, type(exc).__name__, category)
        return Sent(None, category, elapsed, parent, category)
    elapsed_s = time.perf_counter() - started
    response = HttpResponse(
        status_code=resp.status_code,
        headers=dict(resp.headers.items()),
        body=body,
        elapsed=elapsed_s,
        url=str(resp.url),
        sent_digests=resp.extensions.get(SENT_DIGESTS, {}),
    )
    return Sent(response, http_error_category(resp.status_code), int(elapsed_s * 1000), parent)


def _warn(req: HttpRequest, problem: str, category: str = "protocol") -> None:
    """A call that failed for a reason its category alone does not tell."""
    log.warning(
        "provider call failed",
        extra={
            "ctx": {
                "action": req.action,
                "url": req.sanitized_url(),
                "category": category,
                "problem": problem[:300],
            }
        },
    )


# ------------------------------------------------------------------ to the ledger


def call_start(
    op: Operation,
    req: HttpRequest,
    kind: str,
    attempt: int,
    worker: str,
    fence: int,
    *,
    token: str | None = None,
) -> CallStart:
    """The record of a call about to leave (sanitized: no credential reaches the ledger)."""
    return CallStart(
        operation_id=op.operation_id,
        call_kind=kind,
        attempt=attempt,
        worker=worker,
        method=req.method,
        url=req.sanitized_url(),
        request_headers=req.sanitized_headers(),
        fence=fence,
        traceparent=traceparent(op.trace_id),
        idempotency_token=token,
    )


def answer_of(sent: Sent, provider_request_id: str | None = None) -> CallAnswer:
    resp = sent.response
    return CallAnswer(
        duration_ms=sent.duration_ms,
        status_code=sent.status_code,
        headers=sent.sanitized_response_headers(),
        body=resp.body if resp is not None else None,
        error_category=sent.error_category,
        provider_request_id=provider_request_id,
        traceparent=sent.traceparent,
    )


def poll_hint(fact: StatusFact) -> float | None:
    """When to read again, as the answer advises: its poll_after_seconds, or a
    Retry-After on an answer that is not back-pressure (Azure-style 200/202s
    send one as a polling interval, not as "call nothing")."""
    retry_hint = None if fact.back_pressure else fact.retry_after_seconds
    hints = [h for h in (fact.poll_after_seconds, retry_hint) if h is not None]
    # uncapped: the ledger's encoder caps it and names the anomaly if it must
    return max(hints) if hints else None


def back_pressure_wait(fact: StatusFact) -> float | None:
    """A 429/503's Retry-After: no call at all for that long."""
    return imposed_wait(fact.retry_after_seconds) if fact.back_pressure else None


def observed_of(fact: StatusFact) -> Observed:
    counts = fact.counts
    return Observed(
        remote_state=fact.remote_state.value if fact.remote_state else None,
        remote_state_raw=fact.raw_state,
        progress_completed=fact.progress_completed,
        progress_total=fact.progress_total,
        progress_percent=fact.progress_percent,
        poll_after_seconds=poll_hint(fact),
        provider_updated_at=fact.provider_updated_at,
        error_code=fact.error.code if fact.error else None,
        error_message=fact.error.message if fact.error else fact.problem,
        result_url=fact.result_url,
        errors_url=fact.errors_url,
        counts_total=counts.total if counts else None,
        counts_succeeded=counts.succeeded if counts else None,
        counts_failed=counts.failed if counts else None,
        has_counts=counts is not None,
    )


def imposed_wait(retry_after: float | None, poll_after: float | None = None) -> float | None:
    """The back-pressure an answer imposes: no call for this job for that many seconds.

    Capped at MAX_WAIT_SECONDS: a provider's far-off hint must not overflow a
    timestamp, and the deadlines decide when we give up.
    """
    waits = [w for w in map(bounded_wait, (retry_after, poll_after)) if w is not None]
    return max(waits, default=None)


def status_read(
    op: Operation,
    fence: int,
    worker: str,
    req: HttpRequest,
    sent: Sent,
    fact: StatusFact | None,
    *,
    call_id: int | None,
) -> StatusRead:
    """One status read (answered or not) as the ledger records it."""
    return StatusRead(
        operation_id=op.operation_id,
        fence=fence,
        worker=worker,
        attempt=op.poll_attempts + 1,
        method=req.method,
        url=req.sanitized_url(),
        request_headers=req.sanitized_headers(),
        answer=_call_category(answer_of(sent, fact.provider_request_id if fact else None), fact),
        observed=observed_of(fact) if fact is not None else None,
        call_id=call_id,
        not_before_seconds=back_pressure_wait(fact) if fact else None,
    )


# A 200 whose body says the request failed (GraphQL's `errors` alone: THROTTLED,
# a timeout): recorded as a failed call, as a 429 is, so that counts of answers
# (evidence.stateless_reads_in_a_row) read past it.
REQUEST_FAILED = "request_failed"
# A read that says the job is gone by a code the description lists
# (`status.not_found_codes`), whatever its HTTP status: counted as a miss by
# evidence.status_misses_in_a_row, as a 404 is by its status. Before, only the
# status was counted: such reads never added up to a human, the job read again
# until its deadline.
GONE_BY_CODE = "not_found"


def _call_category(answer: CallAnswer, fact: StatusFact | None) -> CallAnswer:
    """The call's category as the answer's body or headers tell it: a failed request
    in a 200, a throttle in a 4xx other than 429 (GitHub's rate-limited 403), or the
    job gone, told by a code."""
    if fact is None:
        return answer
    if fact.gone_by_code:
        return replace(answer, error_category=GONE_BY_CODE)
    if fact.request_failed and answer.error_category is None:
        return replace(answer, error_category=REQUEST_FAILED)
    if fact.rate_limited and answer.error_category == "http_4xx":
        return replace(answer, error_category="back_pressure")
    return answer


def recorded_response(
    row: Mapping[str, Any], headers_read: frozenset[str] | None = frozenset()
) -> HttpResponse | None:
    """A call's answer rebuilt from its record, when the stored excerpt is the body exactly.

    Not when the body was cut, redacted or had characters replaced (its digest
    then differs from the bytes received), nor when a header the description
    reads (`headers_read`, lower-case names; None: any) was stored redacted (a
    result link in `Location` keeps its signature only on the wire), cut or not
    at all (`stored_headers`): acting on an altered answer could misread it or
    fetch a broken link, so the caller reads again.
    """
    excerpt, digest = row.get("response_body"), row.get("response_sha256")
    if row.get("status_code") is None or excerpt is None or digest is None:
        return None
    if hashlib.sha256(excerpt.encode()).hexdigest() != digest:
        return None
    headers = row.get("response_headers") or {}
    if MORE_HEADERS in headers and headers_read != frozenset():
        return None  # a header it reads may be among those not stored
    for name, value in headers.items():
        altered = REDACTED in value or CUT in value
        if altered and (headers_read is None or name.lower() in headers_read):
            return None
    return HttpResponse(
        status_code=row["status_code"],
        headers=headers,
        body=excerpt.encode(),
        url=row.get("url") or "",
    )
