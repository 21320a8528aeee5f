"""Recording calls, observations and escalations for the steps.

Calls whose delivery matters (create, cancel, side-effecting result fetches)
are written *before* they are sent, so a crash mid-call leaves a row that says
"maybe sent"; the outcome is filled in afterwards. Status reads are safe to
repeat and are recorded after the fact, with their observation, by one
statement that can carry many reads (`record_polls`; see poll_writer.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from reconciler.calls import Sent
from shared.db import pgjson
from shared.db.queries import q
from shared.ledger import Operation
from shared.ledger import evidence as records
from shared.ledger.errors import LeaseLost
from shared.ledger.states import LocalState
from shared.providers import HttpRequest, StatusFact
from shared.providers.sanitize import sanitize_url, stored_excerpt


def worker_name(worker_id: str) -> str:
    return f"reconciler:{worker_id}"


async def start_call(
    conn: Any,
    op: Operation,
    req: HttpRequest,
    kind: str,
    attempt: int,
    worker: str,
    fence: int,
    *,
    token: str | None = None,
) -> int:
    return await records.call_started(
        conn,
        records.CallStart(
            operation_id=op.operation_id,
            call_kind=kind,
            attempt=attempt,
            worker=worker,
            trace_id=op.trace_id,
            method=req.method,
            url=req.sanitized_url(),
            request_headers=req.sanitized_headers(),
            fence=fence,
            idempotency_token=token,
        ),
    )


async def finish_call(
    conn: Any,
    call_id: int,
    sent: Sent,
    *,
    provider_request_id: str | None = None,
    remote_job_id: str | None = None,
) -> None:
    resp = sent.response
    await records.call_finished(
        conn,
        call_id,
        records.CallEnd(
            duration_ms=sent.duration_ms,
            status_code=sent.status_code,
            provider_request_id=provider_request_id,
            response_headers=sent.sanitized_response_headers(),
            error_category=sent.error_category,
            body=resp.body if resp is not None else None,
            excerpt=stored_excerpt(resp.body) if resp is not None else None,
            remote_job_id=remote_job_id,
        ),
    )


async def record_call(
    conn: Any,
    op: Operation,
    req: HttpRequest,
    kind: str,
    attempt: int,
    worker: str,
    fence: int,
    sent: Sent,
    **extra: Any,
) -> int:
    """A call recorded after the fact (safe reads)."""
    call_id = await start_call(conn, op, req, kind, attempt, worker, fence)
    await finish_call(conn, call_id, sent, **extra)
    return call_id


def _error_doc(fact: StatusFact) -> dict[str, str | None] | None:
    if fact.error is None and fact.problem is None:
        return None
    return {
        "code": fact.error.code if fact.error else None,
        "message": fact.error.message if fact.error else fact.problem,
    }


def _stored_url(url: str | None) -> str | None:
    # Result links are often pre-signed; the collection step uses the live
    # read's URL, so the stored one only needs to say where, not to open it.
    return sanitize_url(url) if url is not None else None


def _whole(value: float | None) -> int | None:
    return int(value) if value is not None else None


def poll_row(
    op: Operation,
    fence: int,
    worker: str,
    req: HttpRequest,
    sent: Sent,
    fact: StatusFact,
    release_after: float | None = None,
) -> dict[str, Any]:
    """One status read as an element of `record_polls`' JSON array.

    JSON rather than 29 bind parameters: one C-speed encode for a whole batch.
    With `release_after`, the statement also hands the lease back with the
    next appointment that many seconds away.
    """
    resp = sent.response
    assert resp is not None
    counts = fact.counts
    percent = fact.progress_percent
    return {
        "operation_id": op.operation_id,
        "fence": fence,
        "attempt": op.poll_attempts + 1,
        "worker": worker,
        "traceparent": sent.traceparent,
        "method": req.method,
        "url": req.sanitized_url(),
        "request_headers": req.sanitized_headers(),
        "duration_ms": sent.duration_ms,
        "status_code": resp.status_code,
        "provider_request_id": fact.provider_request_id,
        "remote_state": fact.remote_state.value if fact.remote_state else None,
        "remote_state_raw": fact.raw_state,
        "progress_completed": _whole(fact.progress_completed),
        "progress_total": _whole(fact.progress_total),
        "progress_percent": max(0.0, min(100.0, percent)) if percent is not None else None,
        "poll_after_seconds": _whole(fact.poll_after_seconds),
        "error": _error_doc(fact),
        "response_headers": sent.sanitized_response_headers(),
        "error_category": sent.error_category,
        "response_sha256": hashlib.sha256(resp.body).hexdigest(),
        "response_size": len(resp.body),
        "response_body": stored_excerpt(resp.body),
        "provider_updated_at": (
            fact.provider_updated_at.isoformat() if fact.provider_updated_at else None
        ),
        "result_url": _stored_url(fact.result_url),
        "errors_url": _stored_url(fact.errors_url),
        "counts": (
            {"total": counts.total, "succeeded": counts.succeeded, "failed": counts.failed}
            if counts
            else None
        ),
        "release": release_after is not None,
        "release_after": release_after or 0.0,
    }


async def record_polls(conn: Any, encoded_rows: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Write status reads in one statement; returns {operation_id: (observation, call)}.

    `encoded_rows` are `poll_row`s, each already JSON (`pgjson.dumps`). An
    operation missing from the answer had lost its lease: nothing of its
    read was written.
    """
    answer = await conn.fetch(q("record_polls"), "[" + ",".join(encoded_rows) + "]")
    return {r["operation_id"]: (int(r["observation_id"]), int(r["call_id"])) for r in answer}


async def record_poll(
    conn: Any,
    op: Operation,
    fence: int,
    worker: str,
    req: HttpRequest,
    sent: Sent,
    fact: StatusFact,
) -> tuple[int, int]:
    """One status read written on `conn` (inside the caller's transaction); (observation, call)."""
    row = poll_row(op, fence, worker, req, sent, fact)
    written = await record_polls(conn, [pgjson.dumps(row)])
    if op.operation_id not in written:
        raise LeaseLost(f"lease on {op.operation_id} lost before the status read was recorded")
    return written[op.operation_id]


async def escalate(
    conn: Any, op: Operation, state: LocalState, reason: str, **details: Any
) -> None:
    """Open (or refresh) the operation's escalation with what a human needs to act."""
    calls = await conn.fetch(q("escalation_context"), op.operation_id)
    context = {
        "remote_job_id": op.remote_job_id,
        "trace_id": op.trace_id,
        "provider": op.provider,
        "recent_calls": [
            {
                "kind": c["call_kind"],
                "method": c["method"],
                "url": c["url"],
                "status": c["status_code"],
                "provider_request_id": c["provider_request_id"],
                "error": c["error_category"],
                "at": c["started_at"].isoformat(),
            }
            for c in calls
        ],
        **details,
    }
    await conn.fetchval(q("open_escalation"), op.operation_id, state.value, reason, context)
