"""Evidence: provider calls, status reads and results — the rows transitions cite.

These rows hold plain values (a status code, a canonical state, a digest):
turning HTTP into those values is the provider adapters' job, joining them to
an operation the reconciler's, and deciding what they mean the state
machine's. What this module adds is the one encoder every recorded answer
goes through: the body's digest, size and (redacted) excerpt, and provider
values made storable. A provider may send facts that break our invariants —
negative counts, more done than the total, numbers too large for a column,
NUL in a state name. Such a fact is never refused (a refusal would erase the
read and stall the operation): the raw values stay in the stored excerpt,
the derived columns are clamped or left empty, and the anomaly is named on
the call and the observation.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from shared.db import pgjson
from shared.db.connect import Executor
from shared.db.queries import q
from shared.ledger.errors import LeaseLost
from shared.redaction import sanitize_url, stored_excerpt
from shared.text import holds_exactly, scrub_text

# The largest value a bigint column holds.
_BIGINT_MAX = 2**63 - 1
# A wait longer than a day is a provider's typo or a far-off date: the
# deadlines, not the hint, decide when we give up (the adapters cap the same).
MAX_WAIT_SECONDS = 86400


def bounded_wait(seconds: float | None) -> float | None:
    """A provider's wait as we keep it: positive and finite, at most MAX_WAIT_SECONDS;
    None when it asks for no wait (or is not a number of seconds)."""
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_WAIT_SECONDS)


# provider_calls.status_code CHECK: an HTTP status is three digits, 100-599.
_STATUS_CODES = range(100, 600)
# Errors caused by a row's content, not by the database's health: the row is
# then written without the facts the database refused (see `call_only`).
ROW_ERRORS = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError)


@dataclass(frozen=True)
class CallStart:
    """A call about to leave (already sanitized: no credential reaches the ledger)."""

    operation_id: str
    call_kind: str  # create | status | cancel | result | lookup | errors
    attempt: int
    worker: str
    method: str
    url: str
    request_headers: Mapping[str, str]
    fence: int | None = None
    traceparent: str | None = None
    idempotency_token: str | None = None


@dataclass(frozen=True)
class CallAnswer:
    """What came back from one call (or that nothing did: `status_code` None)."""

    duration_ms: int
    status_code: int | None = None
    headers: Mapping[str, str] | None = None  # already sanitized
    body: bytes | None = None  # digest, size and excerpt are derived here
    error_category: str | None = None
    provider_request_id: str | None = None
    traceparent: str | None = None


@dataclass(frozen=True)
class Observed:
    """What a status answer shows, in canonical terms (from the provider adapter)."""

    remote_state: str | None
    remote_state_raw: str | None = None
    progress_completed: float | None = None
    progress_total: float | None = None
    progress_percent: float | None = None
    poll_after_seconds: float | None = None
    provider_updated_at: datetime | None = None
    error_code: str | None = None
    error_message: str | None = None
    result_url: str | None = None
    errors_url: str | None = None
    counts_total: int | None = None
    counts_succeeded: int | None = None
    counts_failed: int | None = None
    has_counts: bool = False


@dataclass(frozen=True)
class StatusRead:
    """One status read as the ledger records it.

    `call_id` is the row recorded before the read left (by the claim, or by
    the step); None records it now. `observed` None: the read got no usable
    answer (transport failure, or an answer whose facts are not recorded).
    `not_before_seconds` is the Retry-After the answer imposed (every call
    waits for it); a poll_after_seconds hint in `observed` holds back the
    next status read only.
    """

    operation_id: str
    fence: int | None  # None: written without a lease (operator tools, tests)
    worker: str
    attempt: int
    method: str
    url: str
    request_headers: Mapping[str, str]
    answer: CallAnswer
    observed: Observed | None
    call_id: int | None = None
    not_before_seconds: float | None = None


@dataclass(frozen=True)
class Written:
    """Where a status read landed: its call row, and its observation if one was recorded."""

    call_id: int
    observation_id: int | None


@dataclass(frozen=True)
class ResultRecord:
    operation_id: str
    valid: bool
    call_id: int | None = None
    reason: str | None = None
    content_type: str | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    storage_ref: str | None = None
    inline: Any = None
    items_total: int | None = None
    items_succeeded: int | None = None
    items_failed: int | None = None
    failed_items: Sequence[tuple[str, str | None, str | None]] = field(default_factory=tuple)


# ------------------------------------------------------------------ the encoder


class _Anomalies:
    """Collects the named anomalies of one answer."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def add(self, name: str) -> None:
        if name not in self.names:
            self.names.append(name)


def body_fields(body: bytes | None) -> dict[str, Any]:
    """Digest, size and stored excerpt of a response body: the one place they are made."""
    if body is None:
        return {"response_sha256": None, "response_size": None, "response_body": None}
    return {
        "response_sha256": hashlib.sha256(body).hexdigest(),
        "response_size": len(body),
        "response_body": stored_excerpt(body),
    }


def _text(value: str | None) -> str | None:
    return scrub_text(value) if value is not None else None


def _exact(job_id: str | None) -> str | None:
    """A job id as the call names it: as given, or None when PostgreSQL cannot
    hold it so (NUL, a lone surrogate). Scrubbed, it was an id no provider gave,
    compared with later answers as the job's and read by whoever recovers the
    call; the answer's own bytes stay in its stored body."""
    return job_id if job_id is None or holds_exactly(job_id) else None


def _status_code(code: int | None, anomalies: _Anomalies) -> int | None:
    if code is None or code in _STATUS_CODES:
        return code
    anomalies.add(f"status_code_out_of_range:{code}")
    return None


def _count(name: str, value: float | None, anomalies: _Anomalies) -> int | None:
    """A count as a bigint column holds it, or None (with the anomaly named)."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        anomalies.add(f"{name}_not_finite")
        return None
    if value < 0:
        anomalies.add(f"{name}_negative")
        return None
    if value > _BIGINT_MAX:
        anomalies.add(f"{name}_too_large")
        return None
    return int(value)


def _percent(value: float | None, anomalies: _Anomalies) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value):
        anomalies.add("progress_percent_not_finite")
        return None
    if not 0.0 <= value <= 100.0:
        anomalies.add("progress_percent_out_of_range")
        return max(0.0, min(100.0, value))
    return value


def _wait(name: str, value: float | None, anomalies: _Anomalies) -> float | None:
    """A wait the provider asked for, within [0, MAX_WAIT_SECONDS]."""
    if value is None:
        return None
    if not math.isfinite(value) or value < 0:
        anomalies.add(f"{name}_invalid")
        return None
    if value > MAX_WAIT_SECONDS:
        anomalies.add(f"{name}_capped")
        return float(MAX_WAIT_SECONDS)
    return value


def _progress(observed: Observed, anomalies: _Anomalies) -> tuple[int | None, int | None]:
    completed = _count("progress_completed", observed.progress_completed, anomalies)
    total = _count("progress_total", observed.progress_total, anomalies)
    if completed is not None and total is not None and completed > total:
        anomalies.add("progress_completed_exceeds_total")
        completed = total
    return completed, total


def _counts(observed: Observed, anomalies: _Anomalies) -> dict[str, int | None] | None:
    if not observed.has_counts:
        return None
    return {
        "total": _count("counts_total", observed.counts_total, anomalies),
        "succeeded": _count("counts_succeeded", observed.counts_succeeded, anomalies),
        "failed": _count("counts_failed", observed.counts_failed, anomalies),
    }


def _error_doc(observed: Observed) -> dict[str, str | None] | None:
    if observed.error_code is None and observed.error_message is None:
        return None
    return {"code": _text(observed.error_code), "message": _text(observed.error_message)}


def _observed_fields(observed: Observed | None, anomalies: _Anomalies) -> dict[str, Any]:
    if observed is None:
        return {"observe": False}
    completed, total = _progress(observed, anomalies)
    poll_after = _wait("poll_after_seconds", observed.poll_after_seconds, anomalies)
    updated = observed.provider_updated_at
    return {
        "observe": True,
        "remote_state": observed.remote_state,
        "remote_state_raw": _text(observed.remote_state_raw),
        "progress_completed": completed,
        "progress_total": total,
        "progress_percent": _percent(observed.progress_percent, anomalies),
        "poll_after_seconds": math.ceil(poll_after) if poll_after is not None else None,
        "error": _error_doc(observed),
        "provider_updated_at": updated.isoformat() if updated else None,
        # Result links are often pre-signed; the collection step uses the live
        # read's URL, so the stored one only needs to say where, not to open it.
        "result_url": sanitize_url(observed.result_url) if observed.result_url else None,
        "errors_url": sanitize_url(observed.errors_url) if observed.errors_url else None,
        "counts": _counts(observed, anomalies),
    }


def _answer_fields(answer: CallAnswer, anomalies: _Anomalies) -> dict[str, Any]:
    return {
        "traceparent": answer.traceparent,
        "duration_ms": max(0, answer.duration_ms),
        "status_code": _status_code(answer.status_code, anomalies),
        "provider_request_id": _text(answer.provider_request_id),
        "response_headers": dict(answer.headers) if answer.headers is not None else None,
        "error_category": answer.error_category,
        **body_fields(answer.body),
    }


def status_row(read: StatusRead, *, release_after: float | None = None) -> dict[str, Any]:
    """One status read as an element of `record_polls`' JSON array.

    With `release_after`, the statement also hands the lease back with the
    next appointment that many seconds away.
    """
    anomalies = _Anomalies()
    row: dict[str, Any] = {
        "operation_id": read.operation_id,
        "fence": read.fence,
        "call_id": read.call_id,
        "attempt": read.attempt,
        "worker": read.worker,
        "method": read.method,
        "url": read.url,
        "request_headers": dict(read.request_headers),
        **_answer_fields(read.answer, anomalies),
        **_observed_fields(read.observed, anomalies),
        "not_before_seconds": _wait("retry_after", read.not_before_seconds, anomalies),
        "release": release_after is not None,
        "release_after": release_after or 0.0,
    }
    row["anomalies"] = anomalies.names or None
    return row


def call_only(row: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """`row` without its observation: what is kept when the database refuses the facts.

    The call (status, digest, excerpt with the raw values) is still written
    and the lease still handed back, so the operation moves on; `reason`
    (SQLSTATE and constraint, never the refused values) is named as an anomaly.
    """
    kept = {
        key: value
        for key, value in row.items()
        if key
        in {
            "operation_id",
            "fence",
            "call_id",
            "attempt",
            "worker",
            "method",
            "url",
            "request_headers",
            "traceparent",
            "duration_ms",
            "status_code",
            "provider_request_id",
            "response_headers",
            "error_category",
            "response_sha256",
            "response_size",
            "response_body",
            "not_before_seconds",
            "release",
            "release_after",
        }
    }
    previous = list(row.get("anomalies") or [])
    return {**kept, "observe": False, "anomalies": [*previous, f"facts_refused:{reason}"]}


# ------------------------------------------------------------------ writes


async def start_call(db: Executor, call: CallStart) -> int:
    """Record a call before it leaves; returns its call id."""
    document = {
        "operation_id": call.operation_id,
        "call_kind": call.call_kind,
        "attempt": call.attempt,
        "worker": call.worker,
        "fence": call.fence,
        "traceparent": call.traceparent,
        "idempotency_token": call.idempotency_token,
        "method": call.method,
        "url": call.url,
        "request_headers": dict(call.request_headers),
    }
    return int(await db.fetchval(q("call_started"), pgjson.dumps(document)))


async def finish_call(
    db: Executor,
    call_id: int,
    answer: CallAnswer,
    *,
    remote_job_id: str | None = None,
    not_before_seconds: float | None = None,
) -> datetime | None:
    """Record a call's outcome; returns the operation's not_before if the answer imposed one."""
    anomalies = _Anomalies()
    document = {
        **_answer_fields(answer, anomalies),
        "remote_job_id": _exact(remote_job_id),
        "not_before_seconds": _wait("retry_after", not_before_seconds, anomalies),
    }
    document["anomalies"] = anomalies.names or None
    row = await db.fetchrow(q("call_finished"), call_id, pgjson.dumps(document))
    return row["not_before"] if row is not None else None


async def record_polls(db: Executor, encoded_rows: Sequence[str]) -> dict[str, Written]:
    """Write status reads in one statement; returns {operation_id: where it landed}.

    `encoded_rows` are `status_row`s, each already JSON (`pgjson.dumps`). An
    operation missing from the answer had lost its lease: nothing of its
    read was written.
    """
    answer = await db.fetch(q("record_polls"), "[" + ",".join(encoded_rows) + "]")
    return {
        r["operation_id"]: Written(
            int(r["call_id"]),
            int(r["observation_id"]) if r["observation_id"] is not None else None,
        )
        for r in answer
    }


async def record_status_read(
    db: Executor, read: StatusRead, *, release_after: float | None = None
) -> Written:
    """One status read, on `db` (inside the caller's transaction when it decides something)."""
    row = status_row(read, release_after=release_after)
    written = await record_polls(db, [pgjson.dumps(row)])
    if read.operation_id not in written:
        raise LeaseLost(f"lease on {read.operation_id} lost before the status read was recorded")
    return written[read.operation_id]


async def record_result_verdict(
    db: Executor, operation_id: str, call_id: int, observed: Observed, *, fence: int | None
) -> int:
    """What a result fetch's answer (`call_id`, on record) showed of the job, as an
    observation citing that call: the provider's verdict that it failed, which
    the move out of result_collecting then cites. LeaseLost once the lease is gone."""
    row = {
        "operation_id": operation_id,
        "fence": fence,
        "call_id": call_id,
        "remote_state": observed.remote_state,
        "remote_state_raw": _text(observed.remote_state_raw),
        "error": _error_doc(observed),
    }
    observation_id = await db.fetchval(q("observe_result_answer"), pgjson.dumps(row))
    if observation_id is None:
        raise LeaseLost(f"lease on {operation_id} lost before the result's verdict was recorded")
    return int(observation_id)


async def adopted_job_unseen(db: Executor, operation_id: str) -> int | None:
    """The decision by which an operator adopted the job id on record, while no
    status read has ever seen that job; None for a job a provider's answer
    named, or one a read has seen."""
    decision_id = await db.fetchval(q("adopted_job_unseen"), operation_id)
    return int(decision_id) if decision_id is not None else None


async def stateless_reads_in_a_row(db: Executor, operation_id: str) -> int:
    """How many status reads in a row, up to the newest, answered a success naming
    no state the description maps (since the newest observation that named one)."""
    return int(await db.fetchval(q("stateless_reads_in_a_row"), operation_id))


async def refused_reads_in_a_row(
    db: Executor, operation_id: str, passing_codes: Collection[int]
) -> int:
    """How many status reads in a row, up to the newest, were refused with a 4xx
    other than `passing_codes` (since the newest read that saw the job)."""
    refused = await db.fetchval(q("refused_reads_in_a_row"), operation_id, sorted(passing_codes))
    return int(refused)


async def status_misses_in_a_row(
    db: Executor, operation_id: str, not_found_statuses: Collection[int]
) -> int:
    """How many status reads in a row, up to the newest, said the job does not exist.

    Counted since the newest read that saw the job: a single "not found" after
    good reads is a read racing a replica, not yet a contradiction.
    """
    misses = await db.fetchval(
        q("status_misses_in_a_row"), operation_id, sorted(not_found_statuses)
    )
    return int(misses)


async def record_result(db: Executor, res: ResultRecord) -> int:
    """A fetched result's verdict and integrity data, with its failed items."""
    ignored = _Anomalies()  # the counts' oddities are the provider's; the row just holds them
    document = {
        "operation_id": res.operation_id,
        "call_id": res.call_id,
        "valid": res.valid,
        "reason": _text(res.reason),
        "content_type": _text(res.content_type),
        "size_bytes": res.size_bytes,
        "sha256": res.sha256,
        "storage_ref": res.storage_ref,
        "inline": res.inline,
        "items_total": _count("items_total", res.items_total, ignored),
        "items_succeeded": _count("items_succeeded", res.items_succeeded, ignored),
        "items_failed": _count("items_failed", res.items_failed, ignored),
    }
    try:
        text = pgjson.dumps(document)
    except ValueError:  # NaN or infinity inside the parsed result: keep it in the file only
        text = pgjson.dumps({**document, "inline": None})
    result_id = int(await db.fetchval(q("insert_result"), text))
    if res.failed_items:
        keys, codes, messages = zip(
            *((_text(key), _text(code), _text(msg)) for key, code, msg in res.failed_items),
            strict=True,
        )
        await db.execute(
            q("insert_item_failures"), result_id, list(keys), list(codes), list(messages)
        )
    return result_id
