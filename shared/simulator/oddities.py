"""odd_facts: status bodies a provider's schema allows but a naive consumer chokes on.

Each oddity rewrites an otherwise normal status body; the job itself runs and
succeeds as usual, and its result stays valid. The point is the consumer's
parser and storage: does "completed > total" crash a progress bar, does 2**70
overflow a BIGINT column, does a NUL byte reach PostgreSQL text (which refuses
it), does a 10**12 s poll hint park the job for 30,000 years?
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.simulator.scripts import Odd
from shared.simulator.state import Job

# completed_exceeds_total: items past the total. Seven, not one, so an
# off-by-one clamp in the consumer does not happen to hide it.
OVERSHOOT = 7
# negative_counts: the progress a schema of plain "integer" still admits.
NEGATIVE_COMPLETED = -3
NEGATIVE_TOTAL = -1
NEGATIVE_FAILED = -2
# huge_counts: past 2**63, so it fits neither a BIGINT nor an int64 JSON parser.
HUGE_COUNT = 2**70
# huge_poll_after: ~31,700 years; anyone adding it to a timestamp overflows.
HUGE_POLL_AFTER_SECONDS = 10**12
# nul_state: a NUL (PostgreSQL text refuses it) and a lone surrogate (no UTF-8
# encoding exists); both only survive the wire as JSON \u escapes.
NUL_STATE_SUFFIX = "\u0000\ud800"


def _completed_exceeds_total(body: dict[str, Any], job: Job) -> None:
    total = job.params.total
    body["progress"] = {"completed": total + OVERSHOOT, "total": total}
    if body["counts"] is not None:
        body["counts"] = {"total": total, "succeeded": total + OVERSHOOT, "failed": 0}


def _negative_counts(body: dict[str, Any], job: Job) -> None:
    body["progress"] = {"completed": NEGATIVE_COMPLETED, "total": NEGATIVE_TOTAL}
    if body["counts"] is not None:
        total = job.params.total
        body["counts"] = {"total": total, "succeeded": total, "failed": NEGATIVE_FAILED}


def _huge_counts(body: dict[str, Any], job: Job) -> None:
    body["progress"] = {"completed": HUGE_COUNT, "total": HUGE_COUNT}
    if body["counts"] is not None:
        body["counts"] = {"total": HUGE_COUNT, "succeeded": HUGE_COUNT, "failed": 0}


def _huge_poll_after(body: dict[str, Any], job: Job) -> None:
    if job.final_state is None:
        body["poll_after_seconds"] = HUGE_POLL_AFTER_SECONDS


def _null_progress(body: dict[str, Any], job: Job) -> None:
    body.update(progress=None, counts=None, error=None)


def _nul_state(body: dict[str, Any], job: Job) -> None:
    # Only while running: the terminal state must stay one a consumer can map.
    if job.final_state is None:
        body["state"] = f"{body['state']}{NUL_STATE_SUFFIX}"


_REWRITES: dict[Odd, Callable[[dict[str, Any], Job], None]] = {
    Odd.COMPLETED_EXCEEDS_TOTAL: _completed_exceeds_total,
    Odd.NEGATIVE_COUNTS: _negative_counts,
    Odd.HUGE_COUNTS: _huge_counts,
    Odd.HUGE_POLL_AFTER: _huge_poll_after,
    Odd.NULL_PROGRESS: _null_progress,
    Odd.NUL_STATE: _nul_state,
}


def apply_oddity(body: dict[str, Any], job: Job) -> dict[str, Any]:
    """`body` rewritten with `job`'s oddity, if it has one (in place, and returned)."""
    if job.params.odd is not None:
        _REWRITES[job.params.odd](body, job)
    return body
