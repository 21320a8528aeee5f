"""Turn provider responses into canonical facts.

Classification rules for a create response, and why:

- 2xx listed in `sync_result_statuses`, or an accepted 2xx whose `create.state`
  maps to succeeded, with the result present: the job ran synchronously; the
  result is final (`sync_result`).
- 2xx listed in `accepted_statuses` with a job id: `accepted`.
- 2xx without a job id, or a 2xx the description does not list: `ambiguous`
  — something may exist at the provider that we cannot name.
- a 4xx/5xx listed in `not_created_statuses` (opt-in, empty by default):
  `not_created`, flagged as back-pressure — the provider documents that
  such an answer creates nothing (Runway: 429 "May retry? Yes"), so the
  same create is sent again after its Retry-After, with no lookup and no
  human. Checked before every rule below: the description's word about
  its own API outranks our conservative reading of the code.
- 408, 425, 429, 5xx: `ambiguous` — the provider may have started the work
  before failing to answer (429/503 are also flagged as back-pressure).
- a 4xx (409 mostly; AWS JSON's 400 ConflictException) whose error code is one
  of `already_exists_codes` (client_job_id only): `ambiguous` with `exists`: the
  job with the id we chose exists, made by an earlier attempt of ours
  (BigQuery's "duplicate"); the reconciler reads it by that id (the lookup)
  rather than resending.
- 409: `rejected` only when its error code is one of `conflict_reject_codes`
  (e.g. "idempotency_key_reused"); otherwise `ambiguous`, because providers
  (Stripe among them) answer 409 while a request with the same token is still
  in progress.
- a 403 or 413 carrying Retry-After: `not_created`, back-pressure: refused for
  now (GitHub's secondary rate limit: 403 with Retry-After), sent again after it.
  Another 4xx is a refusal with or without it (a 401 with Retry-After: a key).
- other 4xx: `rejected`, a definitive contract error: no job was created.
- 1xx/3xx: `ambiguous`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.jsonread import NOT_JSON
from shared.ledger.states import RemoteState
from shared.providers.description import (
    CreateSpec,
    CsvOptions,
    ErrorsSpec,
    Idempotency,
    LastPage,
    LookupKind,
    LookupSpec,
    ProviderDescription,
    ResultFormat,
    ResultPages,
    ResultSource,
    ResultSpec,
    StatusSpec,
    WebhookScheme,
    WebhookSpec,
)
from shared.providers.errors import WebhookParseError
from shared.providers.facts import (
    CancelFact,
    CancelKind,
    Counts,
    CreateFact,
    ErrorInfo,
    ErrorsPage,
    ItemFailure,
    LookupFact,
    StatusFact,
    WebhookFact,
)
from shared.providers.messages import HttpResponse
from shared.providers.paths import PathSource, ValuePath, extract, parse_path
from shared.providers.result_formats import FormatError, column_index, parse_csv
from shared.providers.results import in_its_words
from shared.providers.timing import parse_retry_after, quota_reset_seconds
from shared.providers.tokens import create_token
from shared.providers.values import (
    as_code,
    as_datetime,
    as_float,
    as_id,
    as_int,
    as_seconds,
    as_str,
    clip,
    error_info,
    item_failure,
    listed_code,
    raw_text,
)
from shared.signatures import signs_body
from shared.text import scrub_text

# A provider's estimate past a month is no estimate (deadlines stop there).
MAX_ESTIMATE_SECONDS = 30 * 86400.0

AMBIGUOUS_CLIENT_STATUSES = frozenset({408, 425, 429})
BACK_PRESSURE_STATUSES = frozenset({429, 503})
# A create refused with one of these and a Retry-After is refused for now, not
# for good: GitHub's secondary rate limit (403), a body too large "if the
# condition is temporary" (413, RFC 9110 15.5.14). Not every 4xx: a 401, 404 or
# 422 carrying Retry-After is still a refusal of this request (a revoked key, a
# wrong path, a bad body), sent again until the create deadline it would have
# hidden from the human who can fix it.
REFUSED_FOR_NOW_STATUSES = frozenset({403, 413})

# Where each webhook scheme carries a per-delivery id that stays the same
# across retries (the dedupe key), when the description names none.
# Svix-branded Standard Webhooks senders name the id header svix-id.
_SVIX_EVENT_ID = parse_path("header:svix-id")
_SCHEME_EVENT_ID: dict[WebhookScheme, ValuePath] = {
    WebhookScheme.STANDARD_WEBHOOKS: parse_path("header:webhook-id"),
    WebhookScheme.GITHUB: parse_path("header:X-GitHub-Delivery"),
    WebhookScheme.STRIPE: parse_path("/id"),
    WebhookScheme.SLACK: parse_path("/event_id"),
    WebhookScheme.SHOPIFY: parse_path("header:X-Shopify-Webhook-Id"),
}


def body_event_id(spec: WebhookSpec) -> ValuePath | None:
    """Where an event's own id is in its body, when the scheme signs the body (an id
    it does not sign is no dedupe key): `event_id`, else the scheme's own (Stripe's
    `/id`, Slack's `/event_id`); None when neither is a body path, or nothing signs it."""
    path = spec.event_id or _SCHEME_EVENT_ID.get(spec.scheme)
    if path is None or path.source is not PathSource.BODY:
        return None
    return path if signs_body(spec.scheme.value, spec.options) else None


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(UTC)


def provider_request_id(desc: ProviderDescription, resp: HttpResponse) -> str | None:
    for name in desc.request_id_headers:
        value = resp.headers.get(name)
        if value:
            return clip(value)
    return None


def map_state(
    state_map: Mapping[str, RemoteState], raw: Any
) -> tuple[RemoteState | None, str | None]:
    """Canonical state for a raw value; unknown values map to None with the raw text kept."""
    text = raw_text(raw)
    if text is None:
        return None, None
    state = state_map.get(text)
    code = as_code(raw) if state is None and isinstance(raw, float) else None
    if code is not None:
        state = state_map.get(code)  # a code sent as 2.0 is the state map's "2"
    return state, clip(text)


# --------------------------------------------------------------------- create


def parse_create(
    desc: ProviderDescription,
    resp: HttpResponse,
    idempotency_token: str | None = None,
    now: datetime | None = None,
) -> CreateFact:
    """Classify a create response (see the module docstring for the rules).

    `idempotency_token` is needed only for `client_job_id` providers, whose
    job id is the token itself when the response does not repeat it.
    """
    spec = desc.create
    code = resp.status_code
    common: dict[str, Any] = {
        "status_code": code,
        "provider_request_id": provider_request_id(desc, resp),
        "retry_after_seconds": parse_retry_after(resp.header("retry-after"), _now(now)),
        "back_pressure": code in BACK_PRESSURE_STATUSES,
    }
    body = resp.json_body
    if 200 <= code < 300:
        return _parse_create_success(desc, resp, body, idempotency_token, common)
    error = error_info(body, None, spec.error_code, spec.error_message, resp.headers)
    if code in spec.not_created_statuses:
        return CreateFact(
            "not_created",
            reason=f"HTTP {code}: nothing created (create.not_created_statuses)",
            error=error or _body_snippet(resp),
            **{**common, "back_pressure": True},
        )
    said = _not_created_code(spec, body, resp)
    if said is not None:
        return _not_created_by_code(code, said, error or _body_snippet(resp), common)
    if 400 <= code < 500 and _ours_already(spec, error, idempotency_token):
        # a 409 most often, but any 4xx carrying a documented code: AWS JSON 1.1
        # answers every client error 400 (Transcribe's ConflictException to a job
        # name it holds); before, such a 400 was a refusal of a job that ran
        return CreateFact(
            "ambiguous",
            reason=f"HTTP {code} {error.code if error else ''}: the job with the id we chose "
            "already exists (create.already_exists_codes): read it by that id",
            error=error,
            exists=True,
            **common,
        )
    if code in AMBIGUOUS_CLIENT_STATUSES or code >= 500:
        return CreateFact(
            "ambiguous", reason=f"HTTP {code}: the job may exist", error=error, **common
        )
    if code == 409:
        if error is not None and error.code in spec.conflict_reject_codes:
            return CreateFact(
                "rejected",
                reason=f"HTTP 409 {error.code}",
                error=error,
                idempotency_conflict=True,
                **common,
            )
        return CreateFact(
            "ambiguous",
            reason="HTTP 409 without a recognised code: a request "
            "with this token may still be in progress",
            error=error,
            **common,
        )
    if code in REFUSED_FOR_NOW_STATUSES and common["retry_after_seconds"] is not None:
        # refused for now, not for good: GitHub's secondary rate limit answers 403
        # with Retry-After ("you should not retry your request until after that
        # many seconds"). A 4xx made nothing, as below; the create goes again
        # after the wait asked for. Before, the operation ended failed.
        return CreateFact(
            "not_created",
            reason=f"HTTP {code} with Retry-After: refused for now, nothing created",
            error=error or _body_snippet(resp),
            **{**common, "back_pressure": True},
        )
    if 400 <= code < 500:
        return CreateFact(
            "rejected",
            reason=f"HTTP {code}: the provider refused the request",
            error=error or _body_snippet(resp),
            **common,
        )
    return CreateFact("ambiguous", reason=f"HTTP {code} is not a create answer", **common)


def _ours_already(spec: CreateSpec, error: ErrorInfo | None, token: str | None) -> bool:
    """Does a 4xx say the job with the id we chose exists (`already_exists_codes`)?
    The id is our token, minted for this operation alone: the job is ours, made by
    an earlier attempt whose answer was lost (BigQuery's "Already Exists: Job ...")."""
    return (
        spec.idempotency is Idempotency.CLIENT_JOB_ID
        and token is not None
        and error is not None
        and error.code in spec.already_exists_codes
    )


def _parse_create_success(
    desc: ProviderDescription,
    resp: HttpResponse,
    body: Any,
    idempotency_token: str | None,
    common: dict[str, Any],
) -> CreateFact:
    spec = desc.create
    code = resp.status_code
    # as_id: a float (1e400 read as "inf") names no job; a retry or a lookup follows
    job_id = as_id(extract(spec.job_id, body, resp.headers)) if spec.job_id else None
    if job_id is None and spec.idempotency is Idempotency.CLIENT_JOB_ID and idempotency_token:
        job_id = create_token(spec, idempotency_token)
    state, raw = (None, None)
    if spec.state is not None:
        state, raw = map_state(desc.status.state_map, extract(spec.state, body, resp.headers))
    status_url = next(
        (
            found
            for found in (as_str(extract(p, body, resp.headers)) for p in spec.status_url)
            if found is not None
        ),
        None,
    )
    hint = (
        as_seconds(extract(spec.poll_after_seconds, body, resp.headers))
        if spec.poll_after_seconds is not None
        else None
    )
    known: dict[str, Any] = {
        "remote_job_id": job_id,
        "remote_state": state,
        "raw_state": raw,
        "status_url": status_url,
        "poll_after_seconds": hint if hint is not None and hint >= 0 else None,
    }
    if _answered_with_result(spec, code, state):
        assert spec.sync_result is not None
        result = extract(spec.sync_result, body, resp.headers)
        if result is not None:
            return CreateFact(
                "sync_result",
                reason=f"HTTP {code} with the result inline",
                sync_result=result,
                **known,
                **common,
            )
    unlisted = code not in spec.accepted_statuses and code not in spec.sync_result_statuses
    if code not in spec.accepted_statuses and not (
        unlisted and 200 <= code < 300 and job_id is not None
    ):
        return CreateFact(
            "ambiguous", reason=f"HTTP {code} is not a configured create answer", **known, **common
        )
    if unlisted:
        # a success naming its job: a retry would get the same answer until the
        # create deadline, so take the job (and say why) rather than resend
        reason = f"HTTP {code} (not in create.accepted_statuses) with job id"
        return CreateFact("accepted", reason=reason, **known, **common)
    if job_id is None:
        where = spec.job_id.text if spec.job_id else "the response"
        # A 2xx that carries an error instead of a job (GraphQL's `userErrors`,
        # a throttle in `errors`): still ambiguous, never "rejected" on a 2xx,
        # unless the description names its code as creating nothing; the error
        # goes on record where an operator reads why.
        error = error_info(body, None, spec.error_code, spec.error_message, resp.headers)
        said = _not_created_code(spec, body, resp)
        if said is not None:
            return _not_created_by_code(code, said, error, common)
        said = f": {error.code or error.message}" if error and (error.code or error.message) else ""
        return CreateFact(
            "ambiguous",
            reason=f"HTTP {code} without a job id at {where}{said}",
            error=error,
            **known,
            **common,
        )
    return CreateFact("accepted", reason=f"HTTP {code} with job id", **known, **common)


def _answered_with_result(spec: CreateSpec, code: int, state: RemoteState | None) -> bool:
    """Whether a create answer is the job done, its result at `create.sync_result`.

    Told by the answer's HTTP status (`sync_result_statuses`), or, for an API that
    answers every create alike and says in the body which it did, by `create.state`
    reading a state the map calls succeeded: Dropbox's save_url answers 200
    {".tag": "async_job_id", ...} or 200 {".tag": "complete", <the file>}. Before,
    such a completion carried no job id and was an ambiguous create, for a human.
    """
    if spec.sync_result is None:
        return False
    if code in spec.sync_result_statuses:
        return True
    return code in spec.accepted_statuses and state is RemoteState.SUCCEEDED


def _not_created_code(spec: CreateSpec, body: Any, resp: HttpResponse) -> str | None:
    """`path = code` when the answer carries a code `create.not_created_codes` lists."""
    return _listed_code_at(spec.not_created_codes, body, resp)


def _listed_code_at(
    listed: tuple[tuple[ValuePath, frozenset[str]], ...], body: Any, resp: HttpResponse
) -> str | None:
    """`path = code` for the first path whose code its list holds (`listed_code`)."""
    for path, codes in listed:
        value = extract(path, body, resp.headers)
        # a boolean as JSON writes it: Baseten's {"canceled": false}
        found = ("true" if value else "false") if isinstance(value, bool) else as_code(value)
        if listed_code(found, codes):
            return f"{path.text} = {found}"
    return None


def _not_created_by_code(
    code: int, said: str, error: ErrorInfo | None, common: dict[str, Any]
) -> CreateFact:
    return CreateFact(
        "not_created",
        reason=f"HTTP {code}, {said}: nothing created (create.not_created_codes)",
        error=error or ErrorInfo(code=clip(said.rpartition(" = ")[2]), message=None),
        **{**common, "back_pressure": True},
    )


def _body_snippet(resp: HttpResponse) -> ErrorInfo | None:
    text = resp.body[:200].decode("utf-8", errors="replace").strip()
    return ErrorInfo(code=None, message=clip(text) if text else None)


# --------------------------------------------------------------------- status


def parse_status(
    desc: ProviderDescription, resp: HttpResponse, now: datetime | None = None
) -> StatusFact:
    """Read a status response; a non-2xx or unreadable body yields a fact without state.

    A failed state read with no error of its own is given one, however the state
    was told (the body, a header, the HTTP status): `_unexplained_failure`."""
    fact = _read_status(desc, resp, now)
    if desc.status.error_only_when_failed and fact.remote_state not in _ENDED_BADLY:
        # a status message, not an error: the job's news on any other read
        fact = replace(fact, error=None)
    if _cancelled_by_code(desc.status, fact):
        return replace(fact, remote_state=RemoteState.CANCELLED)
    if fact.error is None and fact.remote_state is RemoteState.FAILED:
        return replace(fact, error=_unexplained_failure(fact.raw_state))
    return fact


# The states whose read carries the job's error under `status.error_only_when_failed`:
# a partial success's message says which items failed (before, it was dropped as a
# success's summary, and part of a result came with no word of why).
_ENDED_BADLY = frozenset(
    {RemoteState.FAILED, RemoteState.CANCELLED, RemoteState.PARTIALLY_SUCCEEDED}
)


def _cancelled_by_code(spec: StatusSpec, fact: StatusFact) -> bool:
    """A failed read whose error code `status.cancelled_error_codes` lists, however the
    failure was told (a state, the HTTP status, `error_means_failed`), is the job
    cancelled: BigQuery's DONE with errorResult.reason "stopped", Snowflake's 422
    with code "000604". (With `done`, `_state_of` reads it from the code itself.)"""
    if spec.done is not None or fact.remote_state is not RemoteState.FAILED:
        return False
    return fact.error is not None and fact.error.code in spec.cancelled_error_codes


def _read_status(desc: ProviderDescription, resp: HttpResponse, now: datetime | None) -> StatusFact:
    code = resp.status_code
    common: dict[str, Any] = {
        "status_code": code,
        "retry_after_seconds": parse_retry_after(resp.header("retry-after"), _now(now)),
        "provider_request_id": provider_request_id(desc, resp),
    }
    if code in desc.status.not_found_statuses:
        return StatusFact(not_found=True, problem=f"HTTP {code}: job not found", **common)
    by_code = desc.status.state_from_http_status.get(code)
    if not 200 <= code < 300 and by_code is None:
        if code in desc.status.state_in_error_statuses:
            in_body = _state_in_error(desc, resp, common, now)
            if in_body is not None:
                return in_body
        gone = _gone_by_code(desc, resp)
        if gone is not None:
            problem = f"HTTP {code}, {gone}: job not found"
            return StatusFact(not_found=True, gone_by_code=True, problem=problem, **common)
        throttled = throttle_code(desc, resp)
        spent = _out_of_quota(resp)
        if spent and common["retry_after_seconds"] is None:
            common["retry_after_seconds"] = quota_reset_seconds(resp, _now(now))
        return StatusFact(
            back_pressure=code in BACK_PRESSURE_STATUSES or throttled is not None,
            problem=f"HTTP {code}" + (f", {throttled}: a throttle" if throttled else ""),
            rate_limited=common["retry_after_seconds"] is not None
            or spent
            or throttled is not None,
            said=in_its_words(desc, resp),
            **common,
        )
    body = resp.json_body
    # Header paths apply whatever the body is: a 303 whose Location is the
    # result, a 200 with an empty body and the state in a header.
    fact = _status_from_body(desc, body if isinstance(body, dict) else {}, resp, common, now)
    fact = _failed_by_error(desc.status, fact)
    if (
        fact.raw_state is None
        and fact.remote_state is None
        and 200 <= code < 300
        and by_code is None
    ):
        # a by-id read that answers 200 with null for a job it does not hold
        # (Leonardo's {"generations_by_pk": null}, a deleted generation's too);
        # beside an error, the place is empty because nothing was answered; a
        # 2xx the description maps to a state (`by_code`, below) names that state
        told = fact.error is not None and bool(fact.error.code or fact.error.message)
        erred = told or (isinstance(body, dict) and bool(body.get("errors")))
        gone = _gone_by_code(desc, resp, null_is_gone=not erred) if isinstance(body, dict) else None
        if gone is not None:
            problem = f"HTTP {code}, {gone}: job not found"
            return StatusFact(not_found=True, gone_by_code=True, problem=problem, **common)
    if not isinstance(body, dict) and _done_in_body(desc.status):
        # `done` absent means running only in an operation's JSON object: a
        # proxy's HTML page, or an empty body, names no state at all
        fact = replace(fact, remote_state=None, raw_state=None)
    if by_code is not None and (fact.raw_state is None or not 200 <= code < 300):
        # The code decides a non-2xx answer it is mapped for; a 2xx one only when
        # the answer names no state at all: an unknown state in the body stays
        # undecided rather than being overruled by a 200.
        by_http = replace(fact, remote_state=by_code, raw_state=f"HTTP {code}", problem=None)
        return _failed_by_error(desc.status, by_http)
    if not isinstance(body, dict) and fact.raw_state is None:
        return replace(fact, problem="status body is not a JSON object")
    if fact.raw_state is None and isinstance(body, dict) and body.get("errors"):
        if desc.status.throttle_codes and throttle_code(desc, resp) is None:
            # The description names its throttles (Marketo's 606, answered 200 as
            # every error is): another error is an answer, a refusal of our reads
            # (Marketo's 602, the hourly token expired), counted toward a human
            # told what it said. Before, it was taken for a throttle, uncounted,
            # until the result deadline.
            said = in_its_words(desc, resp)
            return replace(fact, problem=f"the answer carries errors, none a throttle{said}")
        # GraphQL's failed request (THROTTLED, a timeout) answers 200 with `errors`
        return replace(fact, request_failed=True, problem="the answer carries errors, no state")
    return fact


def _state_in_error(
    desc: ProviderDescription, resp: HttpResponse, common: dict[str, Any], now: datetime | None
) -> StatusFact | None:
    """A listed error answer (`status.state_in_error_statuses`) read as the job, when
    its body names a state the map knows: Intercom's failed export, 504 with the job,
    status "failed". None when it names none (a gateway's own 504 page): the code is
    then the error it is."""
    body = resp.json_body
    if not isinstance(body, dict):
        return None
    fact = _failed_by_error(desc.status, _status_from_body(desc, body, resp, common, now))
    if fact.remote_state is None or fact.raw_state is None:
        return None
    throttled = throttle_code(desc, resp) is not None
    if resp.status_code in BACK_PRESSURE_STATUSES or throttled:
        # the job in the body, and still a 503's (a throttle's) wait: its Retry-After
        # holds every call, as it does where the body names nothing
        fact = replace(
            fact,
            back_pressure=True,
            rate_limited=throttled or fact.retry_after_seconds is not None,
        )
    return fact


def _failed_by_error(spec: StatusSpec, fact: StatusFact) -> StatusFact:
    """A success state read with an error is a failure (`status.error_means_failed`:
    fal.ai's `COMPLETED` beside `error`), its raw state and error kept as read. So is
    a read naming no state at all beside an error: Transloadit's failed assembly
    carries `error` (one code of dozens) and no `ok`, so no state map could list it.
    An empty error (`"error": ""`) names none. A partial success whose counts say
    items succeeded stays one: its error says which failed (a batch's "2 of 10
    requests failed"), and a failure would leave the succeeded items' results
    uncollected."""
    ended_well = fact.remote_state in (RemoteState.SUCCEEDED, RemoteState.PARTIALLY_SUCCEEDED)
    unnamed = fact.remote_state is None and fact.raw_state is None
    said = fact.error is not None and bool(fact.error.code or fact.error.message)
    if not (spec.error_means_failed and (ended_well or unnamed) and said):
        return fact
    if fact.remote_state is RemoteState.PARTIALLY_SUCCEEDED and _some_succeeded(fact.counts):
        return fact
    return replace(fact, remote_state=RemoteState.FAILED)


def _some_succeeded(counts: Counts | None) -> bool:
    """Whether the counts read say at least one item succeeded."""
    if counts is None:
        return False
    succeeded = counts.succeeded
    if succeeded is None and counts.total is not None and counts.failed is not None:
        succeeded = counts.total - counts.failed
    return succeeded is not None and succeeded > 0


def _done_in_body(spec: StatusSpec) -> bool:
    """Whether the state is read from the body's `done` member (AIP-151)."""
    return spec.state is None and spec.done is not None and spec.done.source is PathSource.BODY


def throttle_code(desc: ProviderDescription, resp: HttpResponse) -> str | None:
    """`path = code` when a refused read (a status read, a result page) carries a
    code `status.throttle_codes` lists."""
    return _listed_code_at(desc.status.throttle_codes, resp.json_body, resp)


def _gone_by_code(
    desc: ProviderDescription, resp: HttpResponse, *, null_is_gone: bool = True
) -> str | None:
    """`path = code` when a refused read carries a code `status.not_found_codes`
    lists (Dropbox's 409 invalid_async_job_id: the job id expired): the job is
    gone, as a 404 says. Before, such a read was a refused read, repeated at the
    backoff until enough of them sent the operation to a human as "unreadable".

    So is a 2xx read naming no state whose JSON object holds a listed value, null
    (or nothing) there read as "null": Leonardo answers a generation it does not
    hold, a deleted one too, 200 {"generations_by_pk": null}. Before, that was a
    read without a state, and the DELETE that cancels a generation (deletes_job)
    left the operation cancelling until its cancel deadline.

    Not when the read carries an error (`null_is_gone` false): GraphQL's
    `errors` with no `data` (a throttle, an expired token) leaves the path empty
    because nothing was answered. Before, such a read was the job gone: a
    throttle counted toward "does not exist", and after an accepted DELETE
    (deletes_job) the job was recorded cancelled. A code listed for the error
    itself still says the job is gone."""
    if not desc.status.not_found_codes:
        return None
    body = resp.json_body
    if null_is_gone and 200 <= resp.status_code < 300:
        for path, codes in desc.status.not_found_codes:
            if extract(path, body, resp.headers) is None and "null" in codes:
                return f"{path.text} = null"
    return _listed_code_at(desc.status.not_found_codes, body, resp)


def _out_of_quota(resp: HttpResponse) -> bool:
    """A refusal that says a rate limit's quota is spent (GitHub's 403 with
    `x-ratelimit-remaining: 0`; the IETF draft's `RateLimit-Remaining`), whatever
    its code: a throttle, not a refusal of our reads."""
    for name, value in resp.headers.items():
        lowered = name.lower()
        if lowered.endswith(_REMAINING) and "ratelimit" in lowered.replace("-", ""):
            return value.strip() == "0"
    return False


_REMAINING = "remaining"


def _first_held(
    paths: tuple[ValuePath, ...], body: Any, headers: Mapping[str, str]
) -> ValuePath | None:
    """The first of `paths` holding a value, not null or empty (an error code or
    message written as a list); else the last, which holds none either. One path,
    the common case, is returned unread."""
    for path in paths[:-1]:
        if extract(path, body, headers) not in (None, ""):
            return path
    return paths[-1] if paths else None


def _error_paths(
    spec: StatusSpec, body: Any, headers: Mapping[str, str]
) -> tuple[ValuePath | None, ValuePath | None]:
    """Where a status read's error code and message are read (`error_code`,
    `error_message` written as lists); a single path, the common case, builds
    nothing on the hot path.

    Two lists of one length are pairs, one error each (Elasticsearch's `error`,
    else a reindex's first failure): both are read at the first pair holding a
    code or a message, so a code is never shown with another error's message.
    Otherwise each at the first of its paths holding a value."""
    code, message = spec.error_code, spec.error_message
    if not (spec.error_code_also or spec.error_message_also):
        return code, message
    codes, messages = spec.error_code_paths, spec.error_message_paths
    if len(codes) == len(messages):
        for pair in zip(codes[:-1], messages[:-1], strict=True):
            if any(extract(p, body, headers) not in (None, "") for p in pair):
                return pair
        return codes[-1], messages[-1]
    return _first_held(codes, body, headers), _first_held(messages, body, headers)


def _status_error(spec: StatusSpec, body: Any, headers: Mapping[str, str]) -> ErrorInfo | None:
    """A status read's error, read where `_error_paths` says."""
    code, message = _error_paths(spec, body, headers)
    return error_info(body, spec.error, code, message, headers)


def _status_from_body(
    desc: ProviderDescription,
    body: dict[str, Any],
    resp: HttpResponse,
    common: dict[str, Any],
    now: datetime | None = None,
) -> StatusFact:
    spec = desc.status
    headers = resp.headers

    def get(path: ValuePath | None) -> Any:
        return extract(path, body, headers) if path is not None else None

    state, raw = _state_of(spec, body, headers)
    counts = _counts(spec, body, headers)
    said = state
    if spec.outcome_from_counts:
        state = _outcome_from_counts(spec, state, raw, counts)
    completed, total = as_float(get(spec.progress_completed)), as_float(get(spec.progress_total))
    percent = as_float(get(spec.progress_percent))
    if spec.progress_fraction is not None:
        percent = _percent_of_fraction(as_float(get(spec.progress_fraction)))
    if percent is None and completed is not None and total:
        percent = round(100.0 * completed / total, 2)
    # the same file named twice is one file: fetched, stored and counted once
    id_paths = desc.result.file_ids
    file_ids = (
        tuple(
            dict.fromkeys(
                value
                for path in id_paths
                for value in _ids_at(extract(path, body, headers))
                if value is not None
            )
        )
        if id_paths  # most descriptions name none: no generator on every read
        else ()
    )
    own = _status_error(spec, body, headers)
    if spec.error_only_when_failed and state is not said and said not in _ENDED_BADLY:
        # the message of the state the provider said (a success's summary), not of
        # the outcome its counts made: before, "Finished! ..." was a failure's reason
        own = None
    checksum_field = desc.result.expect.checksum_options.status_field
    return StatusFact(
        remote_state=state,
        raw_state=raw,
        progress_completed=completed,
        progress_total=total,
        progress_percent=percent,
        provider_updated_at=as_datetime(get(spec.updated_at)),
        poll_after_seconds=as_seconds(get(spec.poll_after_seconds)),
        estimated_end=_estimated_end(spec, body, headers, now),
        error=_no_state_code(spec, said, own) or _counted_failure(said, state, raw, counts),
        result_url=as_str(get(spec.result_url)),
        errors_url=as_str(get(spec.errors_url)),
        result_file_ids=file_ids,
        result_checksum=as_str(get(checksum_field)),
        counts=counts,
        problem=None if raw is not None else "no state in the status body",
        **common,
    )


# The states whose code, read at `error_code`, is no error (Snowflake's "090001",
# "Statement executed successfully.": its code and message are on every answer).
_NOT_ERRORS = frozenset({RemoteState.PENDING, RemoteState.RUNNING, RemoteState.SUCCEEDED})


def _no_state_code(
    spec: StatusSpec, said: RemoteState | None, error: ErrorInfo | None
) -> ErrorInfo | None:
    """The error a status read gave, unless its code is one `state_map` maps to a
    state that is no failure, the very state read (`said`): a provider whose every
    answer carries a code and a message (Snowflake's SQL API) otherwise had
    "Statement executed successfully." kept as the operation's last error, shown to
    whoever reads a result refused after it as what went wrong. A code keyed to
    another state than the one read is a real error that equals a state's key by
    chance (error 1 beside status 3): kept (dropping it lost a failure's error, or
    read the failure as a success)."""
    if error is None:
        return None
    mapped = spec.state_map.get(error.code or "")
    return None if mapped in _NOT_ERRORS and mapped is said else error


def _percent_of_fraction(fraction: float | None) -> float | None:
    """A share of 1 as the percent the record keeps (0.42: 42.0). Out of range (a
    provider that sends percents after all) or not finite, it is kept as read,
    times 100, for the record's own checks to name (a percent above 100 is an
    anomaly there), never clamped into a plausible value."""
    if fraction is None or not math.isfinite(fraction):
        return fraction
    return round(100.0 * fraction, 6)


def _estimated_end(
    spec: StatusSpec, body: Any, headers: Mapping[str, str], now: datetime | None
) -> datetime | None:
    """When the provider expects the job to end: its timestamp, or its seconds
    left counted from now (the answer's time); None when it says nothing usable."""
    if spec.estimated_end is not None:
        end = as_datetime(extract(spec.estimated_end, body, headers))
        horizon = _now(now) + timedelta(seconds=MAX_ESTIMATE_SECONDS)
        return end if end is not None and end <= horizon else None
    if spec.estimated_seconds_left is None:
        return None
    left = as_seconds(extract(spec.estimated_seconds_left, body, headers))
    if left is None or not 0 <= left <= MAX_ESTIMATE_SECONDS:
        return None
    return _now(now) + timedelta(seconds=left)


def _ids_at(found: Any) -> list[str | None]:
    """The ids a path names: one value, or each of a list (ElevenLabs' dub names its
    languages, one audio file each, as `target_languages: ["es", "fr"]`).

    A list with an item that names no id (an object, a list, null, a boolean, a
    float) names none at all: fetching the files it does name would store
    part of a result as the whole."""
    if not isinstance(found, list):
        return [as_id(found)]
    ids = [_listed_id(item) for item in found]
    return [] if None in ids else ids


def _listed_id(item: Any) -> str | None:
    usable = isinstance(item, str | int) and not isinstance(item, bool)
    return as_id(item) if usable else None


def _state_of(
    spec: StatusSpec, body: Any, headers: Mapping[str, str]
) -> tuple[RemoteState | None, str | None]:
    if spec.state is not None:
        found = extract(spec.state, body, headers)
        for path in spec.state_also:  # a state list's later paths, while none holds one
            if found is not None and found != "":
                break
            found = extract(path, body, headers)
        return map_state(spec.state_map, found)
    if spec.done is None:
        return None, None
    done = extract(spec.done, body, headers)
    if done is not True:
        return RemoteState.RUNNING, "done=false"
    # as_code: a code sent as 1.0 is 1, as map_state reads a state sent as 2.0; read
    # at the first of its paths holding one (a list), as the error shown is
    at = _error_paths(spec, body, headers)[0]
    code = as_code(extract(at, body, headers)) if at else None
    if code is None or code == "0":  # google.rpc.Code 0 is OK
        # ...but an error that is there at all is the result "in case of failure or
        # cancellation" (google.longrunning.Operation): proto3 JSON leaves a code of 0 out.
        if spec.error is None or extract(spec.error, body, headers) is None:
            return RemoteState.SUCCEEDED, "done=true"
        code = "0"
    if code in spec.cancelled_error_codes:
        return RemoteState.CANCELLED, f"done=true error={code}"
    return RemoteState.FAILED, f"done=true error={code}"


def _sum(paths: tuple[ValuePath, ...], body: Any, headers: Mapping[str, str]) -> int | None:
    """The sum of the counts these paths hold, or None when none holds one.

    A loop, not two lists per call: every status read of a provider with counts
    runs it three or four times, most often over a body that holds none."""
    total: int | None = None
    for path in paths:
        number = as_int(extract(path, body, headers))
        if number is not None:
            total = number if total is None else total + number
    return total


def _counts(spec: StatusSpec, body: Any, headers: Mapping[str, str]) -> Counts | None:
    total = _sum(spec.counts_total, body, headers)
    succeeded = _sum(spec.counts_succeeded, body, headers)
    failed = _sum(spec.counts_failed, body, headers)
    if total is None and succeeded is None and failed is None:
        return None  # cancelled items alone make no counts: not read
    cancelled = _sum(spec.counts_cancelled, body, headers)
    return Counts(total=total, succeeded=succeeded, failed=failed, cancelled=cancelled)


def _counted_failure(
    said: RemoteState | None, state: RemoteState | None, raw: str | None, counts: Counts | None
) -> ErrorInfo | None:
    """The reason of a job its counts made failed where its state said otherwise
    (`outcome_from_counts`: Hume's COMPLETED with no source read), when the read
    carries no error of its own: before, such an operation failed with no reason
    at all, the agent told nothing of why."""
    if state is not RemoteState.FAILED or said is RemoteState.FAILED or counts is None:
        return None
    told = [
        f"{value} {name}"
        for name, value in (
            ("succeeded", counts.succeeded if counts.succeeded is not None else 0),
            ("failed", counts.failed),
            ("in all", counts.total),
        )
        if value is not None
    ]
    return ErrorInfo(
        code="no_item_succeeded",
        message=f"the provider said {raw!r}, but its counts say no item succeeded: "
        + ", ".join(told),
    )


def _unexplained_failure(raw: str | None) -> ErrorInfo | None:
    """The reason of a failed job whose read carries no error of its own: the state
    the provider named. A state that is the whole story (DashScope's UNKNOWN, "the
    task does not exist or its status is unknown", a task past its 24 hours;
    Gemini's BATCH_STATE_EXPIRED, a batch unfinished after 48 hours) comes with no
    code or message: before, the operation failed with no reason at all, the agent
    told nothing of why, and only the observation's raw state said it."""
    if raw is None:
        return None
    return ErrorInfo(
        code=None,
        message=f"the provider's status says {raw!r} (a failed state) and gives no reason",
    )


def _outcome_from_counts(
    spec: StatusSpec, state: RemoteState | None, raw: str | None, counts: Counts | None
) -> RemoteState | None:
    """Batch outcome from its counts: all ok, some failed (partial), none ok (failed).

    Items neither succeeded nor failed when the batch ended (expired, never
    run) count as not ok: a batch that finished half its items is partial.
    """
    if state is None or counts is None or not state.is_terminal:
        return state
    if spec.outcome_from_counts_states is None:
        applies = state in (RemoteState.SUCCEEDED, RemoteState.PARTIALLY_SUCCEEDED)
    else:
        applies = raw in spec.outcome_from_counts_states
    if not applies:
        return state
    succeeded = counts.succeeded
    if succeeded is None and counts.total is not None and counts.failed is not None:
        succeeded = counts.total - counts.failed
    if succeeded is None:
        return state
    if counts.total is not None:
        not_ok = max(counts.total - succeeded, counts.failed or 0)
    elif counts.failed is not None:
        not_ok = counts.failed
    else:
        return state
    if succeeded == 0 and not_ok == 0:
        return state
    if not_ok == 0:
        return RemoteState.SUCCEEDED
    if succeeded == 0:
        if counts.cancelled is not None and counts.cancelled >= not_ok:
            return RemoteState.CANCELLED
        return RemoteState.FAILED
    return RemoteState.PARTIALLY_SUCCEEDED


def inline_result(desc: ProviderDescription, resp: HttpResponse) -> Any:
    """The result embedded in a final status body (source = "inline"), or None."""
    if desc.result.source is not ResultSource.INLINE or desc.result.inline is None:
        return None
    return extract(desc.result.inline, resp.json_body, resp.headers)


# --------------------------------------------------------------------- cancel


def parse_cancel(
    desc: ProviderDescription, resp: HttpResponse, now: datetime | None = None
) -> CancelFact:
    """Classify a cancel response. Acceptance is delivery, not a cancelled job."""
    code = resp.status_code
    body = resp.json_body
    common: dict[str, Any] = {
        "status_code": code,
        "retry_after_seconds": parse_retry_after(resp.header("retry-after"), _now(now)),
        "provider_request_id": provider_request_id(desc, resp),
    }
    if 200 <= code < 300:
        said = _listed_code_at(desc.cancel.refused_codes, body, resp)
        if said is not None:
            return CancelFact(
                "rejected",
                reason=f"HTTP {code}, {said}: the cancel was not taken (cancel.refused_codes)",
                error=ErrorInfo(code=clip(said), message=None),
                **common,
            )
        state, raw = (None, None)
        if desc.cancel.state is not None:
            state, raw = map_state(desc.status.state_map, extract(desc.cancel.state, body))
        kind: CancelKind = "accepted" if code in desc.cancel.accepted_statuses else "ambiguous"
        return CancelFact(kind, reason=f"HTTP {code}", remote_state=state, raw_state=raw, **common)
    error = error_info(body, None, desc.create.error_code, desc.create.error_message, resp.headers)
    if code in desc.status.not_found_statuses:
        return CancelFact("not_found", reason=f"HTTP {code}: job not found", error=error, **common)
    if code in AMBIGUOUS_CLIENT_STATUSES or code >= 500:
        return CancelFact(
            "ambiguous",
            reason=f"HTTP {code}: the cancel may not have arrived",
            error=error,
            **common,
        )
    return CancelFact(
        "rejected",
        reason=f"HTTP {code}: the provider refused the cancel (often: already finished)",
        error=error,
        **common,
    )


# --------------------------------------------------------------------- lookup


def parse_lookup(
    desc: ProviderDescription,
    resp: HttpResponse,
    client_reference: str,
    page_token: str | None = None,
) -> LookupFact:
    """Job ids whose client reference is ours on this page; see LookupFact for absence.

    `page_token` is what this page was requested with (None: the first page);
    numbered paging computes the next page from it.
    """
    spec = desc.lookup
    code = resp.status_code
    if code == 404 and spec.kind is LookupKind.GET and spec.not_found_means_absent:
        return LookupFact(status_code=code, proven_absent=True)
    if not 200 <= code < 300:
        return LookupFact(
            status_code=code, problem=f"HTTP {code}", back_pressure=code in BACK_PRESSURE_STATUSES
        )
    body = resp.json_body
    if spec.kind is LookupKind.GET:
        job_id = as_id(extract(spec.job_id, body, resp.headers)) if spec.job_id else None
        if job_id is None:
            return LookupFact(status_code=code, problem="lookup answer without a job id")
        url = _found_status_url(spec, body, resp.headers)
        at = ((job_id, url),) if url is not None else ()
        return LookupFact(status_code=code, found_job_ids=(job_id,), found_status_urls=at)
    jobs = extract(spec.list, body) if spec.list is not None else None
    if not isinstance(jobs, list):
        return LookupFact(status_code=code, problem="lookup answer has no job list")
    found: list[str] = []
    urls: dict[str, str] = {}
    unnamed = False
    referenced = 0
    for job in jobs:
        reference = _reference(extract(spec.match, job)) if spec.match is not None else None
        if reference is not None:
            referenced += 1
        if reference != client_reference:
            continue
        job_id = as_id(extract(spec.job_id, job)) if spec.job_id is not None else None
        if job_id is None:
            unnamed = True
        elif job_id not in found:
            found.append(job_id)
            url = _found_status_url(spec, job)
            if url is not None:
                urls[job_id] = url
    if unnamed:
        # Our job is listed, its id unreadable: dropped, the page read as absence
        # and the lost create went out again, a second job (or, beside one found,
        # a duplicate no one was told of).
        where = spec.job_id.text if spec.job_id is not None else "(no lookup.job_id)"
        return LookupFact(
            status_code=code,
            problem=f"the list holds our operation but no job id at {where} on its item",
        )
    if spec.numbered:
        token, unreadable = _next_numbered(spec, resp, page_token, len(jobs)), False
    else:
        token, unreadable = _next_cursor(spec, resp)
    # Items none of which carries a reference prove nothing by themselves: the
    # scan judges them over every page it reads (see `unreferenced_listing`).
    blind = referenced == 0 and len(jobs) > 0
    return LookupFact(
        status_code=code,
        found_job_ids=tuple(found),
        found_status_urls=tuple(urls.items()),
        proven_absent=not found and token is None and not unreadable and not blind,
        next_page_token=token,
        more_unreadable=unreadable,
        referenced=referenced,
        unreferenced=len(jobs) - referenced,
    )


def _found_status_url(
    spec: LookupSpec, found: Any, headers: Mapping[str, str] | None = None
) -> str | None:
    """A found job's status URL at `lookup.status_url` (its list item, or the GET
    answer), as a create answer's is read; None without the key or a URL there."""
    if spec.status_url is None:
        return None
    return as_str(extract(spec.status_url, found, headers))


def _reference(value: Any) -> str | None:
    """A listed job's value at `lookup.match` as a reference: text only. Ours is an
    operation id; a number there (`as_str` reads ids so) is a `match` on the
    wrong field (a job's `created_at`), and counted as "others' references" it
    made every item "not ours": absence, the lost create sent again."""
    return value if isinstance(value, str) and value else None


def unreferenced_listing(spec: LookupSpec, referenced: int, unreferenced: int) -> str | None:
    """Why a scan that found nothing proves no absence, when no item it read (over
    every page) carries a reference at `lookup.match`; None when it proves one.

    A typo in `match`, or a provider whose list omits the field, reads as an
    empty match on every item: "absent", the lost create sent again, the job
    run twice. An empty list still proves absence, and so does one where other
    items carry references (others' jobs) and ours is not among them.
    """
    if referenced > 0 or unreferenced == 0:
        return None
    where = spec.match.text if spec.match is not None else "(no lookup.match)"
    return (
        f"the list holds {unreferenced} job(s) and none carries a reference at "
        f"lookup.match = {where}: cannot tell whether the create arrived (a wrong "
        "path, or a list of jobs not created through jobwarden?)"
    )


def _next_cursor(spec: LookupSpec, resp: HttpResponse) -> tuple[str | None, bool]:
    """The cursor of the next page, and whether more pages exist that none names.

    `has_more: true` without a cursor is a list we cannot follow: its end was
    never read, so its absence proves nothing.
    """
    body = resp.json_body
    # a page cursor may be a header (GitLab's X-Next-Page): read without the
    # headers it was always absent, and page 1 passed for the whole list
    cursor = spec.next_page_token or spec.next_page_url
    token = as_str(extract(cursor, body, resp.headers)) if cursor is not None else None
    if spec.has_more is None:
        return token, False
    if extract(spec.has_more, body) is not True:
        return None, False
    return token, token is None


def _next_numbered(
    spec: LookupSpec, resp: HttpResponse, page_token: str | None, count: int
) -> str | None:
    """The token of the page after this page of `count` items, or None at the end.

    For an offset it is the number of items read, the next offset. For a page
    number it is "<next page>:<items read>": the items read are counted,
    page by page, so a `total` ends the scan only once that many were read
    (pages of uneven sizes, one capped below page_size, never end it early:
    that would take an unread job for an absent one). An unreadable `total`
    leaves the end to the empty page.
    """
    position, read = _numbered_position(spec, page_token)
    read += count
    if _is_last_page(spec, resp, count, read):
        return None
    return f"{position + 1}:{read}" if spec.page_param is not None else str(read)


def _is_last_page(
    spec: LookupSpec | ResultPages, resp: HttpResponse, count: int, read: int
) -> bool:
    """Whether a page of `count` items, `read` in all so far, ends a numbered list
    or an offset-paged result: an empty page, always; else as `last_page` says
    (an unreadable `total` leaves the end to the empty page)."""
    if count == 0:
        return True
    if spec.last_page is LastPage.SHORT and spec.page_size is not None and count < spec.page_size:
        return True
    if spec.last_page is LastPage.TOTAL and spec.total is not None:
        body = resp.json_body if spec.total.source is PathSource.BODY else None
        total = as_int(extract(spec.total, body, resp.headers))
        return total is not None and read >= total
    return False


def _numbered_position(spec: LookupSpec, page_token: str | None) -> tuple[int, int]:
    """(page number or offset, items read before it) of the page `page_token` asked for."""
    if page_token is None:
        return (spec.first_page if spec.page_param is not None else 0), 0
    page, _, read = page_token.partition(":")
    if spec.page_param is None:
        return int(page), int(page)
    return int(page), int(read or 0)


# --------------------------------------------------------------------- errors pages


def parse_errors_page(desc: ProviderDescription, resp: HttpResponse) -> ErrorsPage:
    """One page of per-item failures; raises ValueError when the page is unreadable."""
    spec = desc.result.errors
    if spec is None:
        raise ValueError(f"provider {desc.name}: no errors pagination configured")
    if not 200 <= resp.status_code < 300:
        raise ValueError(f"errors page answered HTTP {resp.status_code}")
    failures = _csv_error_items(spec, resp) if spec.items is None else _json_error_items(spec, resp)
    token = (
        as_str(extract(spec.next_page_token, _json_or_none(spec, resp), resp.headers))
        if spec.next_page_token
        else None
    )
    if token is not None and (not token.strip() or token in spec.end_values):
        token = None
    return ErrorsPage(items=failures, next_page_token=token)


def _json_or_none(spec: ErrorsSpec, resp: HttpResponse) -> Any:
    """The page's JSON body where a token may be read from it; a CSV page has none."""
    return resp.json_body if spec.items is not None else None


def _json_error_items(spec: ErrorsSpec, resp: HttpResponse) -> tuple[ItemFailure, ...]:
    assert spec.items is not None
    items = extract(spec.items, resp.json_body)
    if not isinstance(items, list):
        raise ValueError(f"errors page has no item list at {spec.items.text}")
    return tuple(
        item_failure(
            item, None, spec.item_index, spec.item_id, None, spec.item_code, spec.item_message
        )
        for item in items
    )


def _csv_error_items(spec: ErrorsSpec, resp: HttpResponse) -> tuple[ItemFailure, ...]:
    """Every row of a CSV errors page is one failed item (Salesforce's failedResults:
    `"sf__Id","sf__Error",<the record's columns>`); its message and id are the
    columns named. The row's index is unknown: the list is the provider's own."""
    assert spec.message_column is not None  # config: required with format = csv
    try:
        table = parse_csv(CsvOptions(), resp.body, "errors page")
        message = column_index(table, spec.message_column, "item_message")
        ident = (
            column_index(table, spec.id_column, "item_id") if spec.id_column is not None else None
        )
    except FormatError as exc:
        raise ValueError(exc.reason) from None
    if message is None:  # no rows to read the column from
        return ()
    return tuple(
        ItemFailure(
            index=None,
            item_id=clip(row[ident]) if ident is not None and row[ident] else None,
            code=None,
            message=clip(row[message]) or None,
        )
        for row in table.rows
    )


def result_next_page(
    desc: ProviderDescription, resp: HttpResponse, page_token: str | None = None
) -> str | None:
    """What leads to a paged result's next page, or None on the last page.

    The token the page names (`next_page_token`) or the next page's URL as it
    names it (`next_page_url`, resolved and checked when its request is built):
    none, an empty one, or one of `end_values` (Salesforce's "null") is the last.
    By offset (`offset_param`), the next offset: the items read, counted page
    by page from `page_token`, this page's own offset (None: the first, 0);
    see `_next_offset` for the end. By number (`page_param`): `_next_number`.
    """
    spec = desc.result.pages
    if spec is None:
        return None
    if spec.page_param is not None:
        return _next_number(spec, resp, page_token)
    path = spec.named
    if path is None:
        return _next_offset(desc.result, spec, resp, page_token)
    body = resp.json_body if path.source is PathSource.BODY else None
    token = as_str(extract(path, body, resp.headers))
    if token is None or not token.strip() or token in spec.end_values:
        return None
    return token


def _next_number(spec: ResultPages, resp: HttpResponse, page_token: str | None) -> str | None:
    """Paged by number (`page_param`): the next page's token, "<number>:<count>", or
    None after the last. The count is read on the first page (`page_count`: a
    number, or a list whose length it is), as Snowflake's later partitions carry
    their data alone, and rides in the token from page to page. A first page that
    names no count is the last: the result is that page, judged by the status's
    counts."""
    if page_token is None:
        found = extract(spec.page_count, resp.json_body, resp.headers) if spec.page_count else None
        count = len(found) if isinstance(found, list) else as_int(found)
        number = spec.first_page
    else:
        shown, _, counted = page_token.partition(":")
        number, count = int(shown), as_int(counted)
    if count is None or number + 1 >= spec.first_page + count:
        return None
    return f"{number + 1}:{count}"


def announced_pages(spec: ResultPages, page_token: str) -> int | None:
    """How many pages a result paged by number says it has (the count the first
    page named, carried in the token `_next_number` writes), or None: another
    paging mode, or a token of a plugin's own. The collector refuses a count past
    `max_pages` before fetching the next page, not after fetching up to the limit."""
    if spec.page_param is None:
        return None
    shown, sep, counted = page_token.partition(":")
    if not sep or not shown.isdigit():
        return None
    return as_int(counted)


def _next_offset(
    result: ResultSpec, spec: ResultPages, resp: HttpResponse, page_token: str | None
) -> str | None:
    """The offset of the page after this one, or None at the end: an empty page,
    always; a page shorter than page_size (`last_page = "short"`); the items
    read reaching the count at `total` (`"total"`; an unreadable total leaves
    the end to the empty page). A page whose items cannot be counted (no item
    list, not CSV) ends the paging too: validation refuses it with the rest."""
    count = _page_items(result, resp)
    if count is None:
        return None
    read = int(page_token or 0) + count
    return None if _is_last_page(spec, resp, count, read) else str(read)


def _page_items(result: ResultSpec, resp: HttpResponse) -> int | None:
    """How many items one page of a result holds, as validation counts them
    (JSONL lines, CSV data rows, the list at `result.items`); None: unreadable."""
    if result.format is ResultFormat.JSONL:
        return sum(1 for line in resp.body.splitlines() if line.strip())
    if result.format is ResultFormat.CSV and result.csv is not None:
        try:
            return len(parse_csv(result.csv, resp.body, "result page").rows)
        except FormatError:
            return None
    body = resp.json_body
    found = extract(result.items, body) if result.items is not None else None
    if found is None and result.empty_without_items and isinstance(body, dict):
        return 0
    return len(found) if isinstance(found, list) else None


def result_failure(desc: ProviderDescription, resp: HttpResponse) -> StatusFact | None:
    """The job's failure, when the result fetch's answer is one `[result.failed]`
    names; None for any other answer (the result, or a fetch to judge or retry).

    The error is read by the table's paths, else it is the body's first 200
    characters: the agent is told why, whatever the shape. With paths named,
    an answer carrying none of them is no verdict.
    """
    spec = desc.result.failed
    code = resp.status_code
    if spec is None or code not in spec.statuses:
        return None
    body = resp.json_body
    if spec.markers and all(extract(p, body, resp.headers) is None for p in spec.markers):
        return None  # not the provider's own answer: judged or retried as any other
    error = error_info(body, spec.error, spec.error_code, spec.error_message, resp.headers)
    return StatusFact(
        remote_state=RemoteState.FAILED,
        raw_state=f"HTTP {code} (result)",
        status_code=code,
        error=error or _body_snippet(resp),
        provider_request_id=provider_request_id(desc, resp),
    )


# --------------------------------------------------------------------- webhooks


def parse_webhook(
    desc: ProviderDescription,
    body: bytes,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> WebhookFact:
    """Fields of an already verified webhook; raises WebhookParseError when unmatchable.

    The event id comes from the configured path, else from the scheme (the
    Standard Webhooks `webhook-id` header...), else it is the body's sha256 so
    an exact redelivery still deduplicates. An id or reference written as a
    JSON float (a fraction or an exponent) was rounded as it was read, so it
    names nothing exactly and counts as absent (`as_id`); integers are exact.

    The references (operation id, client reference, job id) are read as
    given, or not at all: one holding NUL or a lone surrogate cannot name
    anything PostgreSQL holds, and a cleaned-up copy could name the wrong job,
    so it counts as absent. The raw state is only shown, so it is cleaned
    (U+FFFD) instead. An event left with no reference is unmatchable.
    """
    try:
        document = json.loads(body)
    except NOT_JSON:
        raise WebhookParseError("webhook body is not valid JSON") from None
    return webhook_fact(desc, document, body, headers, query)


def webhook_fact(
    desc: ProviderDescription,
    document: Any,
    body: bytes,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    event_id: str | None = None,
) -> WebhookFact:
    """`parse_webhook` for a body already parsed as JSON into `document`.

    The receiver parses every authentic body once, to refuse what is not a
    JSON object, and hands that document here rather than parsing it again.
    It hands its dedupe key over as `event_id` too, worked out from what the
    signature covers: the fact then carries that key rather than one read
    again here (a header lookup, or the body's hash) that it would not use.
    """
    spec = desc.webhooks
    if spec is None:
        raise WebhookParseError(f"provider {desc.name} has no webhooks configured")
    if not isinstance(document, dict):
        raise WebhookParseError("webhook body is not a JSON object")

    def get(path: ValuePath | None) -> Any:
        return extract(path, document, headers, query) if path is not None else None

    operation_ref = _webhook_reference(get(spec.operation_ref))
    client_reference = _webhook_reference(get(spec.client_reference))
    job_id = _webhook_reference(get(spec.job_id))
    if job_id is None and operation_ref is None and client_reference is None:
        paths = (spec.operation_ref, spec.client_reference, spec.job_id)
        wanted = " or ".join(p.text for p in paths if p is not None)
        raise WebhookParseError(
            f"webhook carries no job id, operation id or client reference ({wanted})"
        )
    state, raw = map_state(spec.state_map, get(spec.state)) if spec.state else (None, None)
    if event_id is None:  # (a key the receiver handed over is carried as it is)
        event_path = spec.event_id or _SCHEME_EVENT_ID.get(spec.scheme)
        found = (
            as_id(get(event_path))
            or (
                as_id(get(_SVIX_EVENT_ID))
                if spec.scheme is WebhookScheme.STANDARD_WEBHOOKS
                else None
            )
            or "sha256:" + hashlib.sha256(body).hexdigest()
        )
        event_id = clip(found) or found
    return WebhookFact(
        event_id=event_id,
        remote_job_id=job_id,
        remote_state=state,
        raw_state=None if raw is None else scrub_text(raw),
        operation_ref=operation_ref,
        thin=spec.thin,
        client_reference=client_reference,
    )


def _webhook_reference(value: Any) -> str | None:
    """A reference an event carries, as text PostgreSQL can hold exactly; else None.

    A JSON float names nothing exactly (`as_id`): it counts as absent too.
    """
    text = as_id(value)
    if text is None or "\x00" in text:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    return clip(text)
