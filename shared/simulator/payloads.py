"""JSON bodies the simulated provider sends: status, result, errors pages, webhooks."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
from datetime import UTC, datetime
from typing import Any

from shared.simulator.oddities import apply_oddity
from shared.simulator.scripts import ResultShape, Script
from shared.simulator.shape import CSV_COLUMNS, ApiShape
from shared.simulator.state import Job, JobState

CANONICAL = ApiShape()


def rfc3339(epoch_seconds: float) -> str:
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def fingerprint(body: Any) -> str:
    """Canonical hash of a create body: same key + different body is a reused key."""
    return hashlib.sha256(dumps(body)).hexdigest()


def content_digest(body: bytes) -> str:
    """RFC 9530 `Content-Digest` value for `body`."""
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    return f"sha-256=:{digest}:"


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def status_url(job: Job, shape: ApiShape = CANONICAL) -> str:
    return shape.job_url(job.job_id)


def counts(job: Job) -> dict[str, int] | None:
    """Outcome counts once there is a result, None before.

    `total` stays the job's size even when a cancel stopped it early; then
    succeeded + failed is what got done, as in a cancelled OpenAI batch.
    """
    if not job.has_result:
        return None
    failed = len(job.done_failed_indices)
    return {"total": job.params.total, "succeeded": job.items_done - failed, "failed": failed}


def _job_error(job: Job) -> dict[str, str] | None:
    if job.final_state is JobState.FAILED:
        return {"code": "worker_crashed", "message": "the worker running this job crashed"}
    return None


def status_body(job: Job, now: float, shape: ApiShape = CANONICAL) -> dict[str, Any]:
    """The canonical status object (`shape` only places its URLs)."""
    terminal = job.final_state is not None
    job_counts = counts(job)
    body = {
        "job_id": job.job_id,
        "state": job.state(now).value,
        "client_reference": job.client_reference,
        "progress": {"completed": job.completed(now), "total": job.params.total},
        "updated_at": rfc3339(job.wall(job.updated_at(now))),
        "poll_after_seconds": None if terminal else job.params.poll_after_seconds,
        "error": _job_error(job),
        "result_url": f"{status_url(job, shape)}/result" if job.has_result else None,
        "errors_url": (
            f"{status_url(job, shape)}/errors"
            if job_counts is not None and job_counts["failed"]
            else None
        ),
        "counts": job_counts,
    }
    if job.params.result_format is not ResultShape.JSON and job.has_result:
        # a checksum published in the status body (hex sha256 of the bytes served)
        document = result_document(job, shape)[0]
        body["result_sha256"] = hashlib.sha256(document).hexdigest()
    return apply_oddity(body, job)


def accepted_body(job: Job, now: float, shape: ApiShape = CANONICAL) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "state": job.state(now).value,
        "status_url": status_url(job, shape),
        "client_reference": job.client_reference,
    }


def result_body(job: Job) -> dict[str, Any]:
    """The successful items among those done (all, unless a cancel cut the job short)."""
    failed = set(job.done_failed_indices)
    items = [{"index": i, "output": f"item-{i}"} for i in range(job.items_done) if i not in failed]
    body: dict[str, Any] = {"job_id": job.job_id, "items": items, "counts": counts(job)}
    if job.script is Script.INVALID_RESULT:
        del body["items"]
    return body


def result_document(job: Job, shape: ApiShape = CANONICAL) -> tuple[bytes, str]:
    """The result bytes as served, and their media type.

    CSV lists every item done, a failed one marked in `status` (as a provider
    whose export keeps failures inline does); JSON lists the successes only;
    binary is opaque bytes (a rendered file), 32 per item done.
    """
    if job.params.result_format is ResultShape.JSON:
        return dumps(result_body(job)), "application/json"
    if job.params.result_format is ResultShape.BINARY:
        chunks = (
            hashlib.sha256(f"{job.job_id}:{i}".encode()).digest() for i in range(job.items_done)
        )
        return b"".join(chunks), "application/octet-stream"
    return _csv_document(job, shape), "text/csv"


def _csv_document(job: Job, shape: ApiShape) -> bytes:
    failed = set(job.done_failed_indices)
    # invalid_result: the export lacks its output column (a required column)
    columns = [
        c for c in CSV_COLUMNS if not (job.script is Script.INVALID_RESULT and c == "output")
    ]
    out = io.StringIO()
    writer = csv.writer(out, delimiter=shape.csv_delimiter, lineterminator="\r\n")
    writer.writerow([shape.column(name) for name in columns])
    for i in range(job.items_done):
        values = (
            {"index": i, "output": "", "status": "failed", "message": f"item {i} was rejected"}
            if i in failed
            else {"index": i, "output": f"item-{i}", "status": "ok", "message": ""}
        )
        writer.writerow([values[name] for name in columns])
    return out.getvalue().encode()


def failed_items(job: Job) -> list[dict[str, Any]]:
    return [
        {"index": i, "code": "item_rejected", "message": f"item {i} was rejected"}
        for i in job.done_failed_indices
    ]


def webhook_event(job: Job, state: JobState, occurred_at: float, event_id: str) -> bytes:
    """Body of one webhook; `occurred_at` is monotonic time of the announced change.

    The event id is in the body too (as Stripe and GitHub-style senders put
    it), besides the `webhook-id` header Standard Webhooks reads.
    """
    return dumps(
        {
            "event_id": event_id,
            "type": f"job.{state.value}",
            "job_id": job.job_id,
            "state": state.value,
            "client_reference": job.client_reference,
            "occurred_at": rfc3339(job.wall(occurred_at)),
        }
    )
