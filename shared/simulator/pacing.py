"""Back-pressure the provider asked for, and the requests that arrived too early anyway.

Provider-side truth: a client's own log says when it *meant* to call again;
only the provider sees when the call arrived. A Retry-After (429/503) binds
every later request about the same job, or the same create; arriving before
a status answer's poll_after_seconds is counted apart, informationally,
because that hint is advice rather than a demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from shared.simulator.requestlog import JOB_KINDS, LoggedRequest, RequestKind

RETRY_AFTER = "retry_after"
POLL_AFTER = "poll_after"


@dataclass(frozen=True)
class Deadline:
    """No call before `not_before` (epoch seconds), for requests after number `after_seq`."""

    after_seq: int
    not_before: float

    def broken_by(self, entry: LoggedRequest) -> bool:
        # Arrival order decides who was told, not timestamps: a request already
        # on its way when the answer went out could not have honoured it, and a
        # frozen test clock gives both the same time.
        return entry.seq > self.after_seq and entry.at < self.not_before


def retry_after_deadline(value: str, now: float) -> float | None:
    """When a Retry-After value (delay-seconds or HTTP-date) lets the client back in."""
    value = value.strip()
    if value.isdigit():
        return now + int(value)
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def _scope(kind: RequestKind) -> str | None:
    """Which requests share one Retry-After: those about a job, or one create's retries."""
    if kind in JOB_KINDS:
        return "job"
    if kind is RequestKind.CREATE:
        return "create"
    return None


class Pacing:
    """The latest deadline per job (or create key) and per polled job."""

    def __init__(self) -> None:
        self._retry: dict[tuple[str, str], Deadline] = {}
        self._poll: dict[str, Deadline] = {}

    def check(self, entry: LoggedRequest, subject: str) -> tuple[str, ...]:
        """The deadlines `entry` arrived before (call once, as it arrives)."""
        scope = _scope(entry.kind)
        if scope is None:
            return ()
        broken: list[str] = []
        retry = self._retry.get((scope, subject))
        if retry is not None and retry.broken_by(entry):
            broken.append(RETRY_AFTER)
        poll = self._poll.get(subject) if entry.kind is RequestKind.STATUS else None
        if poll is not None and poll.broken_by(entry):
            broken.append(POLL_AFTER)
        return tuple(broken)

    def answered(
        self,
        entry: LoggedRequest,
        subject: str,
        *,
        last_seq: int,
        now: float,
        retry_after: str | None,
        poll_after: float | None,
        accepted_job: str | None = None,
    ) -> None:
        """Remember what the answer to `entry` told the client to wait for.

        `last_seq` is the newest request that had arrived by now: only later
        ones can have seen this answer. `accepted_job`: the job a create's 2xx
        answer accepted.
        """
        scope = _scope(entry.kind)
        if scope is None:
            return
        if retry_after is not None:
            not_before = retry_after_deadline(retry_after, now)
            if not_before is not None and accepted_job is not None:
                # A 202's Retry-After says when to read the job it accepted
                # (Azure-style): the job's status reads wait for it, the way
                # they wait for a poll hint; it holds back no other call.
                self._poll[accepted_job] = Deadline(last_seq, not_before)
            elif not_before is not None:
                self._retry[(scope, subject)] = Deadline(last_seq, not_before)
        if entry.kind is RequestKind.STATUS:
            # Each status answer replaces the hint: a 429 or a terminal body has none.
            if poll_after is None:
                self._poll.pop(subject, None)
            else:
                self._poll[subject] = Deadline(last_seq, now + poll_after)
