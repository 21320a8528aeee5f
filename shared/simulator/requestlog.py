"""Every request the simulated provider received, in arrival order (`/_sim/requests`).

The provider's own record is the ground truth a test holds the client's
journal against: "every call that may have reached the provider is on our
record" can only be proven by something that saw each call arrive, including
the ones whose answers were deliberately lost.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Entries kept before the oldest are dropped. A bench run of ~10^4 jobs at ~10
# calls each fits whole; the cap only keeps a simulator left running for days
# from growing without bound (an entry is a few hundred bytes).
MAX_LOGGED_REQUESTS = 200_000


class RequestKind(StrEnum):
    """Which part of the provider's public contract a request called."""

    CREATE = "create"
    STATUS = "status"
    CANCEL = "cancel"
    RESULT = "result"
    ERRORS = "errors"
    LOOKUP = "lookup"


# Requests about one existing job: the ones Retry-After deadlines apply to.
JOB_KINDS = frozenset(
    {RequestKind.STATUS, RequestKind.CANCEL, RequestKind.RESULT, RequestKind.ERRORS}
)


@dataclass(slots=True)
class LoggedRequest:
    """One request as the provider saw it; filled in further as it is handled.

    `status_code` is None while the request is still being handled. `answered`
    is False when the provider deliberately withheld its answer (a lost create
    response): `status_code` is then the answer the client never saw.
    """

    seq: int
    at: float  # epoch seconds of arrival, from the simulator's clock
    method: str
    path: str
    kind: RequestKind
    job_id: str | None
    idempotency_key: str | None
    client_reference: str | None
    status_code: int | None = None
    answered: bool = True
    # Back-pressure the request ignored ("retry_after", "poll_after"); a tuple,
    # not a list, so the usual empty case costs no allocation per entry.
    violations: tuple[str, ...] = ()
    # The W3C trace context the call carried (the caller's span), if any.
    traceparent: str | None = None

    def withhold(self, status_code: int) -> None:
        """Record, before the hold starts, the answer this request will never deliver."""
        self.status_code = status_code
        self.answered = False

    def to_json(self) -> dict[str, Any]:
        # Spelled out rather than dataclasses.asdict: a full log is 10^5 entries.
        return {
            "seq": self.seq,
            "at": self.at,
            "method": self.method,
            "path": self.path,
            "kind": self.kind.value,
            "job_id": self.job_id,
            "idempotency_key": self.idempotency_key,
            "client_reference": self.client_reference,
            "status_code": self.status_code,
            "answered": self.answered,
            "violations": list(self.violations),
            "traceparent": self.traceparent,
        }


class RequestLog:
    """A bounded, append-only list of requests; `seq` keeps counting past the bound."""

    def __init__(self, limit: int = MAX_LOGGED_REQUESTS) -> None:
        self._entries: deque[LoggedRequest] = deque(maxlen=limit)
        self.last_seq = 0

    def arrive(
        self,
        at: float,
        method: str,
        path: str,
        kind: RequestKind,
        *,
        job_id: str | None,
        idempotency_key: str | None,
        client_reference: str | None,
        traceparent: str | None = None,
    ) -> LoggedRequest:
        self.last_seq += 1
        entry = LoggedRequest(
            seq=self.last_seq,
            at=at,
            method=method,
            path=path,
            kind=kind,
            job_id=job_id,
            idempotency_key=idempotency_key,
            client_reference=client_reference,
            traceparent=traceparent,
        )
        self._entries.append(entry)
        return entry

    @property
    def dropped(self) -> int:
        """How many of the earliest requests fell off the bound."""
        return self.last_seq - len(self._entries)

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": [entry.to_json() for entry in self._entries],
            "dropped": self.dropped,
        }
