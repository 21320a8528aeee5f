"""Recording calls, observations and escalations for the steps.

Calls whose delivery matters (create, cancel, side-effecting result fetches)
are written *before* they are sent, so a crash mid-call leaves a row that says
"maybe sent"; the outcome is filled in afterwards. Status reads are safe to
repeat and are recorded after the fact, with their observation, in one round
trip (`record_poll`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from reconciler.transport import Sent
from shared import records
from shared.errors import LeaseLost
from shared.ledger import Operation
from shared.providers import HttpRequest, StatusFact
from shared.queries import q
from shared.states import LocalState


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


async def record_poll(
    conn: Any,
    op: Operation,
    fence: int,
    worker: str,
    req: HttpRequest,
    sent: Sent,
    fact: StatusFact,
    *,
    release_after: float | None = None,
) -> tuple[int, int]:
    """Call + observation + observed columns in one statement; returns (observation, call).

    With `release_after`, the same statement hands the lease back with the next
    appointment that many seconds away.
    """
    resp = sent.response
    assert resp is not None
    counts = fact.counts
    row = await conn.fetchrow(
        q("record_poll"),
        op.operation_id,
        fence,
        op.poll_attempts + 1,
        worker,
        sent.traceparent,
        req.method,
        req.sanitized_url(),
        req.sanitized_headers(),
        sent.duration_ms,
        resp.status_code,
        fact.provider_request_id,
        fact.remote_state.value if fact.remote_state else None,
        fact.raw_state,
        int(fact.progress_completed) if fact.progress_completed is not None else None,
        int(fact.progress_total) if fact.progress_total is not None else None,
        min(100.0, fact.progress_percent) if fact.progress_percent is not None else None,
        int(fact.poll_after_seconds) if fact.poll_after_seconds is not None else None,
        _error_doc(fact),
        sent.sanitized_response_headers(),
        sent.error_category,
        hashlib.sha256(resp.body).hexdigest(),
        len(resp.body),
        resp.body[: records.MAX_STORED_BODY_BYTES].decode("utf-8", errors="replace"),
        fact.provider_updated_at,
        fact.result_url,
        fact.errors_url,
        (
            {"total": counts.total, "succeeded": counts.succeeded, "failed": counts.failed}
            if counts
            else None
        ),
        release_after is not None,
        release_after or 0.0,
    )
    if row is None:
        raise LeaseLost(f"lease on {op.operation_id} lost before the status read was recorded")
    return int(row["observation_id"]), int(row["call_id"])


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
