"""In-memory jobs, idempotency records and call counters of the simulated provider.

A job's state is *derived* from the (injectable) clock and from how often it
was read, so a test can predict it exactly; the only stored facts are the ones
a real provider would have to remember (when it was created, cancelled, finished).
Everything runs on one event loop: no locks, but no `await` inside a method
that reads-then-writes either.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared.simulator.clock import Clock, SystemClock
from shared.simulator.pacing import POLL_AFTER, Pacing
from shared.simulator.requestlog import RequestLog
from shared.simulator.scripts import JobParams, Script

# Share of a job's duration spent "queued" before it starts "running".
QUEUED_FRACTION = 0.1


class JobState(StrEnum):
    """The provider's own vocabulary; the adapter maps it onto RemoteState."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIALLY_SUCCEEDED = "partially_succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


RESULT_STATES = frozenset({JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED})


class NotCancellable(Exception):
    """Cancel arrived after the job reached a terminal state."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


@dataclass
class Job:
    job_id: str
    script: Script
    params: JobParams
    created_at: float  # monotonic seconds
    wall_offset: float  # add to a monotonic time to get epoch seconds
    client_reference: str | None = None
    webhook_url: str | None = None
    idempotency_key: str | None = None
    input: Any = None
    status_reads: int = 0
    limited_reads_served: int = 0
    polls_satisfied_at: float | None = None
    cancel_requested_at: float | None = None
    finished_at: float | None = None
    final_state: JobState | None = None
    # Terminal webhooks were dispatched (or deliberately not sent): set once,
    # so the ticker and a concurrent request never both announce the end.
    notified: bool = False

    def __post_init__(self) -> None:
        if self.params.min_polls == 0:
            self.polls_satisfied_at = self.created_at

    @property
    def outcome(self) -> JobState | None:
        """The terminal state this job reaches if left alone (None: never)."""
        if self.script is Script.NEVER_FINISHES:
            return None
        if self.script is Script.LATE_FAILURE:
            return JobState.FAILED
        if self.script is Script.PARTIAL and self.params.failed > 0:
            return JobState.PARTIALLY_SUCCEEDED
        return JobState.SUCCEEDED

    @property
    def failed_indices(self) -> list[int]:
        """Which items failed: spread evenly so pages of errors are not all at the end."""
        if self.script is not Script.PARTIAL:
            return []
        total, failed = self.params.total, self.params.failed
        return [(k + 1) * total // (failed + 1) for k in range(failed)]

    @property
    def has_result(self) -> bool:
        """A result can be fetched: the job succeeded (even partly), or partial_on_cancel.

        A cancelled partial_on_cancel job keeps what it finished before the cancel.
        """
        if self.final_state in RESULT_STATES:
            return True
        return self.final_state is JobState.CANCELLED and self.params.partial_on_cancel

    @property
    def items_done(self) -> int:
        """Items processed by the time the job ended: all, or those before a cancel."""
        if self.finished_at is None:
            return 0
        return self.completed(self.finished_at)

    @property
    def done_failed_indices(self) -> list[int]:
        """The failed items among those processed (a cancel can stop before some)."""
        done = self.items_done
        return [index for index in self.failed_indices if index < done]

    def wall(self, monotonic: float) -> float:
        return monotonic + self.wall_offset

    def record_status_read(self, now: float) -> None:
        self.status_reads += 1
        if self.polls_satisfied_at is None and self.status_reads >= self.params.min_polls:
            self.polls_satisfied_at = now

    def settle(self, now: float) -> bool:
        """Fix the terminal state once its conditions hold; True if it just became terminal."""
        if self.final_state is not None:
            return False
        if self.cancel_requested_at is not None:
            if self.script is Script.CANCEL_UNCONFIRMED:
                return False
            due = self.cancel_requested_at + self.params.cancel_delay
            if now < due:
                return False
            self._finish(JobState.CANCELLED, due)
            return True
        outcome = self.outcome
        if outcome is None or self.polls_satisfied_at is None:
            return False
        finish_at = max(self.created_at + self.params.duration, self.polls_satisfied_at)
        if now < finish_at:
            return False
        self._finish(outcome, finish_at)
        return True

    def request_cancel(self, now: float) -> bool:
        """Record a cancel; True if that made the job terminal (the cancel race)."""
        if self.final_state is not None:
            raise NotCancellable(self.final_state)
        if self.cancel_requested_at is not None:
            return False
        self.cancel_requested_at = now
        if self.script is Script.CANCEL_RACE:
            # The job crossed its commit point as the cancel arrived.
            self._finish(JobState.SUCCEEDED, now)
            return True
        return False

    def _finish(self, state: JobState, at: float) -> None:
        self.final_state = state
        self.finished_at = at

    def state(self, now: float) -> JobState:
        if self.final_state is not None:
            return self.final_state
        if self.cancel_requested_at is not None:
            return JobState.CANCELLING
        if now - self.created_at < QUEUED_FRACTION * self.params.duration:
            return JobState.QUEUED
        return JobState.RUNNING

    def completed(self, now: float) -> int:
        """Items done; rises linearly while running and freezes on cancel or end."""
        if self.final_state in RESULT_STATES:
            return self.params.total
        frozen = [t for t in (self.finished_at, self.cancel_requested_at) if t is not None]
        at = min([now, *frozen])
        duration = self.params.duration
        start = self.created_at + QUEUED_FRACTION * duration
        running_for = (1 - QUEUED_FRACTION) * duration
        if running_for <= 0:
            return self.params.total if at >= start else 0
        fraction = min(max((at - start) / running_for, 0.0), 1.0)
        return int(self.params.total * fraction)

    def updated_at(self, now: float) -> float:
        """Monotonic time of the last observable change."""
        if self.finished_at is not None:
            return self.finished_at
        if self.cancel_requested_at is not None:
            return self.cancel_requested_at
        if self.state(now) is JobState.QUEUED:
            return self.created_at
        return min(now, self.created_at + self.params.duration)

    def result_expired(self, now: float) -> bool:
        return (
            self.script is Script.EXPIRING_RESULT
            and self.finished_at is not None
            and now >= self.finished_at + self.params.result_ttl
        )


@dataclass
class StoredResponse:
    status_code: int
    body: dict[str, Any]


@dataclass
class IdempotencyRecord:
    fingerprint: str
    # None while the first request holding the key is still being processed.
    response: StoredResponse | None = None
    # token_conflict: the next replay hands out a brand-new job instead.
    conflict_pending: bool = False
    # retry_spawns_duplicate: the next replay answers the original job but also
    # starts a twin under the same key and client_reference.
    duplicate_pending: bool = False


@dataclass
class Stats:
    """What the provider saw; tests assert on it to prove "created once", "polled once"."""

    creates_total: int = 0
    jobs_total: int = 0
    creates_per_token: Counter[str] = field(default_factory=Counter)
    status_calls_per_job: Counter[str] = field(default_factory=Counter)
    max_overlapping_status_calls: Counter[str] = field(default_factory=Counter)
    cancels_per_job: Counter[str] = field(default_factory=Counter)
    result_fetches_per_job: Counter[str] = field(default_factory=Counter)
    webhooks_sent: int = 0
    webhooks_failed: int = 0
    webhook_attempts: int = 0
    # Requests that arrived before a Retry-After the provider had sent, per job
    # id (or, for creates, per idempotency key, else client_reference).
    retry_after_violations: Counter[str] = field(default_factory=Counter)
    # Status reads before the previous answer's poll_after_seconds: advice
    # ignored, not a demand, so counted apart from Retry-After.
    poll_after_violations: Counter[str] = field(default_factory=Counter)
    _inflight_status: Counter[str] = field(default_factory=Counter)

    @contextmanager
    def status_call(self, job_id: str) -> Iterator[None]:
        """Count one status call and how many ran at the same time for this job."""
        self.status_calls_per_job[job_id] += 1
        self._inflight_status[job_id] += 1
        current = self._inflight_status[job_id]
        if current > self.max_overlapping_status_calls[job_id]:
            self.max_overlapping_status_calls[job_id] = current
        try:
            yield
        finally:
            self._inflight_status[job_id] -= 1

    def violated(self, rule: str, subject: str) -> None:
        """Count one request that arrived before `rule`'s deadline ("retry_after"/"poll_after")."""
        counter = self.poll_after_violations if rule == POLL_AFTER else self.retry_after_violations
        counter[subject] += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "creates_per_token": dict(self.creates_per_token),
            "creates_total": self.creates_total,
            "jobs_total": self.jobs_total,
            "status_calls_per_job": dict(self.status_calls_per_job),
            "max_overlapping_status_calls": dict(self.max_overlapping_status_calls),
            "cancels_per_job": dict(self.cancels_per_job),
            "result_fetches_per_job": dict(self.result_fetches_per_job),
            "webhooks_sent": self.webhooks_sent,
            "webhooks_failed": self.webhooks_failed,
            "webhook_attempts": self.webhook_attempts,
            "retry_after_violations": dict(self.retry_after_violations),
            "retry_after_violations_total": self.retry_after_violations.total(),
            "poll_after_violations": dict(self.poll_after_violations),
        }


class JobStore:
    """All jobs, per-key memory, counters and the request log of the simulated provider."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = SystemClock() if clock is None else clock
        self.stats = Stats()
        self.requests = RequestLog()
        self.pacing = Pacing()
        self.jobs: dict[str, Job] = {}
        self.idempotency: dict[str, IdempotencyRecord] = {}
        self._seen: set[str] = set()

    def now(self) -> float:
        """Monotonic now: what job states are derived from."""
        return self.clock.monotonic()

    def wall(self) -> float:
        """Epoch now: what clients are shown (HTTP-dates, request log times)."""
        return self.clock.time()

    def reset(self) -> None:
        self.stats = Stats()
        self.requests = RequestLog()
        self.pacing = Pacing()
        self.jobs.clear()
        self.idempotency.clear()
        self._seen.clear()

    def first_time(self, tag: str) -> bool:
        """True only the first time `tag` is seen: drives "fail once, then work" scripts."""
        if tag in self._seen:
            return False
        self._seen.add(tag)
        return True

    def new_job(
        self,
        script: Script,
        params: JobParams,
        *,
        client_reference: str | None,
        webhook_url: str | None,
        idempotency_key: str | None,
        input: Any,
    ) -> Job:
        now = self.now()
        job = Job(
            job_id=new_id("job"),
            script=script,
            params=params,
            created_at=now,
            wall_offset=self.wall() - now,
            client_reference=client_reference,
            webhook_url=webhook_url,
            idempotency_key=idempotency_key,
            input=input,
        )
        self.jobs[job.job_id] = job
        self.stats.jobs_total += 1
        if idempotency_key is not None:
            self.stats.creates_per_token[idempotency_key] += 1
        return job

    def by_reference(self, client_reference: str | None) -> list[Job]:
        if client_reference is None:
            return list(self.jobs.values())
        return [job for job in self.jobs.values() if job.client_reference == client_reference]

    def unannounced(self) -> list[Job]:
        return [job for job in self.jobs.values() if not job.notified]
