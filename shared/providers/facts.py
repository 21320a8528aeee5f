"""Canonical facts read from provider responses.

A fact says what a response *shows*, in one vocabulary for every provider; the
reconciler decides what it *means* for the operation (and records the response
as evidence). Facts never claim more than the response: an unknown remote
state stays None with its raw value kept, a progress of 100 % is not a success.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from shared.ledger.states import RemoteState

CreateKind = Literal["accepted", "sync_result", "rejected", "not_created", "ambiguous"]
CancelKind = Literal["accepted", "rejected", "not_found", "ambiguous"]


@dataclass(frozen=True)
class ErrorInfo:
    code: str | None
    message: str | None


@dataclass(frozen=True)
class Counts:
    """Item counts of a batch job; None where the provider does not say."""

    total: int | None
    succeeded: int | None
    failed: int | None
    cancelled: int | None = None


@dataclass(frozen=True)
class CreateFact:
    """What a create response shows.

    kind:
      - accepted: the provider holds a job (`remote_job_id` is set);
      - sync_result: the result came inline and is final (`sync_result`);
      - rejected: a definitive contract error, no job was created;
      - not_created: a refusal the description lists in
        `create.not_created_statuses` (a documented "nothing was created",
        e.g. Runway's 429): back-pressure, the same create is sent again;
      - ambiguous: we cannot tell whether a job exists (5xx, 408, 425, 429,
        a 409 that may mean "in progress", a 2xx without a job id).
    """

    kind: CreateKind
    status_code: int
    reason: str
    remote_job_id: str | None = None
    remote_state: RemoteState | None = None
    raw_state: str | None = None
    status_url: str | None = None
    provider_request_id: str | None = None
    error: ErrorInfo | None = None
    retry_after_seconds: float | None = None
    # An accepted answer's own word on when to read first (create.poll_after_seconds).
    poll_after_seconds: float | None = None
    sync_result: Any = None
    # A 409 rejection: the token is on record at the provider with another
    # request. Contradictory facts, so the reconciler should escalate.
    idempotency_conflict: bool = False
    back_pressure: bool = False
    # An ambiguous 409 the description says means "a job with the id we chose
    # exists" (`create.already_exists_codes`): the job is ours, to be read by
    # that id (the lookup), not the create resent.
    exists: bool = False


@dataclass(frozen=True)
class StatusFact:
    """What a status read shows. `remote_state` None means "not decidable from this read"."""

    status_code: int
    remote_state: RemoteState | None = None
    raw_state: str | None = None
    progress_completed: float | None = None
    progress_total: float | None = None
    progress_percent: float | None = None
    provider_updated_at: datetime | None = None
    poll_after_seconds: float | None = None
    retry_after_seconds: float | None = None
    # When the provider expects the job to end (status.estimated_end, or
    # estimated_seconds_left from the answer's time): a forecast, not a promise.
    estimated_end: datetime | None = None
    error: ErrorInfo | None = None
    result_url: str | None = None
    errors_url: str | None = None
    result_file_ids: tuple[str, ...] = ()
    # The result's checksum as the status published it (result.expect.checksum
    # source = status), exactly as read; checked against the fetched bytes.
    result_checksum: str | None = None
    counts: Counts | None = None
    back_pressure: bool = False
    not_found: bool = False
    # "Not found" told by a code the description lists (`status.not_found_codes`:
    # Dropbox's 409 invalid_async_job_id, Leonardo's 200 null), not by a 404:
    # recorded so, as misses are counted by the call's record
    # (`evidence.status_misses_in_a_row`).
    gone_by_code: bool = False
    # Why this read gave no usable state (HTTP 500, body not JSON...), in plain words.
    problem: str | None = None
    provider_request_id: str | None = None
    # A success (2xx) that carries only `errors` (GraphQL: a throttle, a
    # timeout): the request failed, whatever its status; no answer about the job.
    request_failed: bool = False
    # A 4xx that says a rate limit holds (a Retry-After, a spent quota): a throttle,
    # whatever its code (GitHub answers 403), not a refusal of our reads.
    rate_limited: bool = False
    # A refused read's body, its start quoted (`results.in_its_words`): what the
    # provider said (AWS's 400 InvalidJobIdException, a revoked key's message).
    said: str = ""

    @property
    def is_terminal(self) -> bool:
        return self.remote_state is not None and self.remote_state.is_terminal


@dataclass(frozen=True)
class CancelFact:
    """What a cancel response shows. `accepted` means delivered, never "cancelled"."""

    kind: CancelKind
    status_code: int
    reason: str
    remote_state: RemoteState | None = None
    raw_state: str | None = None
    error: ErrorInfo | None = None
    retry_after_seconds: float | None = None
    provider_request_id: str | None = None


@dataclass(frozen=True)
class LookupFact:
    """One page of a lookup by client reference.

    Several `found_job_ids` for one reference means duplicates exist at the
    provider: escalate. `proven_absent` is true only when this response
    settles the question by itself (last page, nothing matched; or a direct
    read answered 404 where configured); for a scan over several pages the
    caller must also have seen no match on the earlier pages.
    `more_unreadable`: the answer says more pages exist, yet names none we
    can request (`has_more: true` without a cursor): the list's end is
    unread, so nothing found is no absence.
    `referenced` / `unreferenced`: how many listed items carry a reference at
    `lookup.match`, and how many carry none. A scan whose items all carry
    none cannot tell "not ours" from "a path that reads nothing" (a typo, a
    list that omits the field): it proves no absence, whatever the pages
    say; so a page of such items alone is never `proven_absent`. Left at 0
    (a plugin's fact), nothing is known of them and nothing is concluded.
    """

    status_code: int
    found_job_ids: tuple[str, ...] = ()
    # (job id, status URL) for each found job whose URL `lookup.status_url` reads
    found_status_urls: tuple[tuple[str, str], ...] = ()
    proven_absent: bool = False
    next_page_token: str | None = None
    problem: str | None = None
    back_pressure: bool = False
    more_unreadable: bool = False
    referenced: int = 0
    unreferenced: int = 0


@dataclass(frozen=True)
class WebhookFact:
    """Fields of a verified webhook body. Never evidence of success by itself.

    The event names its operation by up to three references: our operation id
    (`operation_ref`), the agent's client reference, the provider's job id.
    """

    event_id: str
    remote_job_id: str | None
    remote_state: RemoteState | None
    raw_state: str | None
    operation_ref: str | None
    thin: bool
    client_reference: str | None = None

    @property
    def references(self) -> tuple[tuple[str, str], ...]:
        """(name, value) of each reference carried, in the order the receiver trusts them."""
        named = (
            ("operation_id", self.operation_ref),
            ("client_reference", self.client_reference),
            ("job_id", self.remote_job_id),
        )
        return tuple((name, value) for name, value in named if value is not None)


@dataclass(frozen=True)
class ItemFailure:
    """One failed item of a batch (from a JSONL result line or an errors page)."""

    index: int | None
    item_id: str | None
    code: str | None
    message: str | None


@dataclass(frozen=True)
class ErrorsPage:
    items: tuple[ItemFailure, ...]
    next_page_token: str | None


@dataclass(frozen=True)
class ResultCheck:
    """The verdict on a fetched result.

    `ok` False with `unavailable` True means the fetch itself failed (expired
    link, 404/410): result_unavailable. `ok` False otherwise means the bytes
    arrived but break a rule: result_validation_failed.
    """

    ok: bool
    reason: str
    sha256: str
    size: int
    content_type: str | None
    items_total: int | None = None
    items_succeeded: int | None = None
    items_failed: int | None = None
    failed_items: tuple[ItemFailure, ...] = ()
    failed_items_truncated: bool = False
    parsed: Any = None
    part_sha256: tuple[str, ...] = ()
    unavailable: bool = False
    notes: tuple[str, ...] = ()
    # A valid `result.base64` result's decoded bytes, as this check decoded them:
    # collection stores these rather than parsing the JSON and decoding again.
    decoded: bytes | None = field(default=None, repr=False, compare=False)
