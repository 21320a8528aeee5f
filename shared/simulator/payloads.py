"""JSON bodies the simulated provider sends: status, result, errors pages, webhooks."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from shared.simulator.scripts import Script
from shared.simulator.state import RESULT_STATES, Job, JobState


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


def status_url(job: Job) -> str:
    return f"/v1/jobs/{job.job_id}"


def counts(job: Job) -> dict[str, int] | None:
    if job.final_state not in RESULT_STATES:
        return None
    failed = len(job.failed_indices)
    return {"total": job.params.total, "succeeded": job.params.total - failed, "failed": failed}


def _job_error(job: Job) -> dict[str, str] | None:
    if job.final_state is JobState.FAILED:
        return {"code": "worker_crashed", "message": "the worker running this job crashed"}
    return None


def status_body(job: Job, now: float) -> dict[str, Any]:
    state = job.state(now)
    finished_with_result = state in RESULT_STATES
    terminal = job.final_state is not None
    return {
        "job_id": job.job_id,
        "state": state.value,
        "client_reference": job.client_reference,
        "progress": {"completed": job.completed(now), "total": job.params.total},
        "updated_at": rfc3339(job.wall(job.updated_at(now))),
        "poll_after_seconds": None if terminal else job.params.poll_after_seconds,
        "error": _job_error(job),
        "result_url": f"{status_url(job)}/result" if finished_with_result else None,
        "errors_url": (
            f"{status_url(job)}/errors" if state is JobState.PARTIALLY_SUCCEEDED else None
        ),
        "counts": counts(job),
    }


def accepted_body(job: Job, now: float) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "state": job.state(now).value,
        "status_url": status_url(job),
        "client_reference": job.client_reference,
    }


def result_body(job: Job) -> dict[str, Any]:
    failed = set(job.failed_indices)
    items = [
        {"index": i, "output": f"item-{i}"} for i in range(job.params.total) if i not in failed
    ]
    body: dict[str, Any] = {"job_id": job.job_id, "items": items, "counts": counts(job)}
    if job.script is Script.INVALID_RESULT:
        del body["items"]
    return body


def failed_items(job: Job) -> list[dict[str, Any]]:
    return [
        {"index": i, "code": "item_rejected", "message": f"item {i} was rejected"}
        for i in job.failed_indices
    ]


def webhook_event(job: Job, state: JobState, occurred_at: float) -> bytes:
    """Body of one webhook; `occurred_at` is monotonic time of the announced change."""
    return dumps(
        {
            "type": f"job.{state.value}",
            "job_id": job.job_id,
            "state": state.value,
            "client_reference": job.client_reference,
            "occurred_at": rfc3339(job.wall(occurred_at)),
        }
    )
