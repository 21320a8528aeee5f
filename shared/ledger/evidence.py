"""Recorded facts: provider calls, observations and results.

These rows are the evidence transitions cite. They hold plain values (a status
code, a canonical state, a digest): turning HTTP into those values is the
provider adapters' job, and deciding what they mean is the reconciler's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.db.connect import Executor
from shared.db.queries import q


@dataclass(frozen=True)
class CallStart:
    operation_id: str
    call_kind: str
    attempt: int
    worker: str
    trace_id: str
    method: str
    url: str
    request_headers: Mapping[str, str]  # already sanitized
    fence: int | None = None
    traceparent: str | None = None
    idempotency_token: str | None = None


@dataclass(frozen=True)
class CallEnd:
    duration_ms: int
    status_code: int | None = None
    provider_request_id: str | None = None
    response_headers: Mapping[str, str] | None = None  # already sanitized
    error_category: str | None = None
    body: bytes | None = None  # its digest and size are stored
    excerpt: str | None = None  # the stored start of the body, already sanitized
    remote_job_id: str | None = None


@dataclass(frozen=True)
class ObservationRecord:
    operation_id: str
    source: str  # poll | webhook | create | lookup
    remote_state: str | None
    remote_state_raw: str | None = None
    call_id: int | None = None
    webhook_event_id: int | None = None
    provider_updated_at: datetime | None = None
    progress_completed: int | None = None
    progress_total: int | None = None
    progress_percent: float | None = None
    poll_after_seconds: int | None = None
    error: Any = None
    result_url: str | None = None
    errors_url: str | None = None
    counts: Mapping[str, int] | None = None


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


async def call_started(db: Executor, call: CallStart) -> int:
    return int(
        await db.fetchval(
            q("call_started"),
            call.operation_id,
            call.call_kind,
            call.attempt,
            call.worker,
            call.fence,
            call.trace_id,
            call.traceparent,
            call.idempotency_token,
            call.method,
            call.url,
            dict(call.request_headers),
        )
    )


async def call_finished(db: Executor, call_id: int, end: CallEnd) -> None:
    body = end.body
    await db.fetchval(
        q("call_finished"),
        call_id,
        end.duration_ms,
        end.status_code,
        end.provider_request_id,
        dict(end.response_headers) if end.response_headers is not None else None,
        end.error_category,
        hashlib.sha256(body).hexdigest() if body is not None else None,
        len(body) if body is not None else None,
        end.excerpt,
        end.remote_job_id,
    )


async def record_observation(db: Executor, obs: ObservationRecord) -> int:
    return int(
        await db.fetchval(
            q("insert_observation"),
            obs.operation_id,
            obs.source,
            obs.call_id,
            obs.webhook_event_id,
            obs.remote_state,
            obs.remote_state_raw,
            obs.provider_updated_at,
            obs.progress_completed,
            obs.progress_total,
            obs.progress_percent,
            obs.poll_after_seconds,
            obs.error,
            obs.result_url,
            obs.errors_url,
            dict(obs.counts) if obs.counts is not None else None,
        )
    )


async def record_result(db: Executor, res: ResultRecord) -> int:
    result_id = int(
        await db.fetchval(
            q("insert_result"),
            res.operation_id,
            res.call_id,
            res.valid,
            res.reason,
            res.content_type,
            res.size_bytes,
            res.sha256,
            res.storage_ref,
            res.inline,
            res.items_total,
            res.items_succeeded,
            res.items_failed,
        )
    )
    if res.failed_items:
        await db.executemany(
            q("insert_item_failure"), [(result_id, *item) for item in res.failed_items]
        )
    return result_id
