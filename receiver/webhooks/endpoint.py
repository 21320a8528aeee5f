"""`POST /webhooks/{provider}`: verify the raw body, pick a signed dedupe id, store.

`/webhooks/{provider}/` (trailing slash) is the same endpoint: providers do
not follow redirects, so a 307 to the slash-less path would silently lose
every delivery of a URL entered with a slash (and its Location would come
from the sender's Host header).

Checks run cheapest-and-least-trusting first, and nothing from a request is
used before its signature verified:

1. the provider is configured with webhooks (else 404, generic body) and the
   method is POST (405; but a GET carrying the provider's `get_challenge`
   parameter is answered with its value, the unsigned endpoint check of
   Dropbox, Meta and Strava, after its verify token if one is configured,
   `_echoed_get_challenge`; with `method = "POST"`, a POST carrying it,
   Microsoft's `?validationToken=`, is answered so instead);
2. every header the provider's signature scheme or event extraction reads is
   ASCII (400 ``non_ascii_header``, naming the header): servers hand header
   bytes over as Latin-1 while senders sign UTF-8, so a non-ASCII signed
   header (a `webhook-id`, say) could only ever fail as a "bad signature",
   which tells a provider nothing. Other headers are not ours to judge: a
   `User-Agent: ProviderBot (café)` must not lose an authentic event. A
   plugin's verifier or parser may read any header, so for a plugin every
   header is checked;
3. the body is in no content coding (415 ``unsupported_encoding``, with
   `Accept-Encoding: identity`): nothing is decompressed (a small compressed
   body can inflate without bound), and the signature covers the bytes sent,
   so a gzipped body could only be stored unread (step 7), its events never
   matched;
4. the content type is JSON (415 ``unsupported_media_type``);
5. the body is read with a hard cap (413), whatever Content-Length claims.
   Steps 1-4 come first so that a sender waiting on `Expect: 100-continue`
   is refused without uploading the body. Every refusal up to here is
   answered with `Connection: close`: the body is unread or half read, and
   the server would otherwise go on reading and discarding whatever the
   client sends (a chunked stream need never end) to keep the connection;
6. the signature is verified on the raw bytes (missing or malformed headers
   400, bad signature / stale / future timestamp 401; the body is only
   ``{"error": "rejected"}`` so a forger learns nothing);
7. the body is parsed (an integer too long for Python's `int` is JSON all
   the same, see `_parse_json`). An authentic body that is no JSON object
   read here (an array, a scalar, not JSON, not UTF-8, an object nested
   deeper than Python's reader recurses) is never refused, a 400 no provider
   resends: it is stored matched to nothing, its dedupe key the scheme's
   signed id or the body's hash and its payload the body in base64
   (`_unread_event`, `unstorable_payload`), and counted as unread. A list
   of events where the provider's `events` names one is a batch: each
   element is stored as an event of its own (`_batch`,
   receiver/webhooks/batches.py);
8. the event is handed to the group-commit writer (`ingest`) and the answer
   (200 stored / duplicate) is sent only after COMMIT; a database that cannot
   take it within the timeouts gives 503 with Retry-After, so the provider
   retries. An authentic event that names no job (another event type) is
   stored too, matched to nothing, so its redeliveries deduplicate.

Every error answer is a refusal with a reason from `RefusalReason`: counted
in `jobwarden_webhook_events_rejected{provider, reason}` and logged as one
"webhook rejected" line (provider label, reason, status, and at most a
header name or an exception type, escaped; never a header value, a body or a
secret). Log lines are rate-limited per reason, so a flood of forgeries
cannot hide a rare reason such as a misconfigured secret. The refusal is also
tallied for the database (receiver/webhooks/refusals.py: batched, never a
write per request).

What the adapter extracts from an authentic event is made storable before it
reaches the database, whatever adapter or plugin extracted it (a value
PostgreSQL refuses would fail the event on every redelivery, and the event
would never be stored): a reference (job id, operation id, client reference)
that PostgreSQL cannot hold exactly (NUL, a lone surrogate) counts as absent,
as the declarative adapter already does, because a cleaned copy would name
another job, and so does one written as a JSON float (`as_id`, below); text
that is only shown (the raw state, the scheme name) has NUL and lone
surrogates replaced by U+FFFD, like the payload. The payload
itself is always stored (`storable_payload`; a number beyond PostgreSQL's
numeric range is left for the database to find, off the hot path, see
`ingest`).

Dedupe ids are always ones the signature covers:

- the scheme's signed id when there is one (Standard Webhooks `webhook-id`,
  generic HMAC with ``{id}`` in the signed content);
- else an id inside the signed body (Stripe's ``/id``, or the provider's
  ``event_id`` path when it points into the body);
- else ``sha256:<hash of the raw body>``.

An id in the body, like a reference, is text or a JSON integer (exact
however long). A JSON float (a literal with a fraction or an exponent) is
rounded to a double as it is read, so it names nothing exactly: 1e400 and
2e400 would be one key ("inf"), and a job id of 1e400 would match the job
"inf". Such an id counts as absent (`shared.providers.values.as_id`, used
wherever an id or a reference is read from a webhook's body, and for the job
id of a create's or a lookup's answer): the dedupe key is then
the body's hash, which the signature covers, and the reference is not used.

GitHub signs only the body: its `X-GitHub-Delivery` id is not covered, so it is
never used as the dedupe key (an attacker replaying a captured body under a
fresh delivery id would otherwise pass dedupe). GitHub events are deduplicated
by the body hash instead, which has two consequences: a redelivery (same body)
and a replay are both caught as duplicates, but there is no replay *window* —
an identical body is refused as a duplicate only while its dedupe row is kept
(`webhook_retention_days`), and a replay after that is stored again. Since
events only wake the reconciler to read the job's status itself, a replayed
event can cause an extra status read, never a wrong state. The same holds for
`static_header` providers, whose body is not signed at all, and for `jwt`
without a `body_claim` (Pub/Sub push: the token does not cover the body).

Likewise, a job id, operation id or client reference read from a header or
from the query string (`header:` / `query:` paths in the provider
description) is not covered by a body-only signature: a replayed body could be
pointed at another job. Prefer body paths where the provider puts them in the
body.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from starlette.datastructures import Headers, QueryParams
from starlette.types import Receive, Scope, Send

from receiver.metrics import ReceiverMetrics, RefusalReason
from receiver.webhooks.batches import batch_elements, element_texts
from receiver.webhooks.ingest import (
    Event,
    Ingestor,
    IngestRejected,
    IngestUnavailable,
    Outcome,
    unstorable_payload,
)
from receiver.webhooks.refusals import RefusalRecorder
from shared import jsonread
from shared.db.pgjson import scrub
from shared.ids import new_trace_id, trace_id_from_traceparent
from shared.ledger.states import RemoteState
from shared.providers import ProviderDescription, WebhookParseError, adapter_for
from shared.providers.adapter import ProviderAdapter, parse_parsed_webhook
from shared.providers.description import GetAnswer, WebhookChallenge, WebhookSpec
from shared.providers.facts import WebhookFact
from shared.providers.paths import PathSource, extract
from shared.providers.responses import body_event_id
from shared.providers.values import as_id, as_str, clip
from shared.redaction import sanitize_bytes_urls, sanitize_text_urls
from shared.secret import Secret
from shared.signatures import (
    Reason,
    SignatureError,
    Verified,
    challenges,
    check_reads_only,
    headers_read,
    reads_form,
    signs_url,
    twilio,
    verifier,
)
from shared.signatures.challenges import usable_token
from shared.signatures.headers import HeaderView
from shared.signatures.spec import RequestCheck
from shared.telemetry import spans
from shared.text import holds_exactly, scrub_text

logger = logging.getLogger(__name__)

# Tells the provider when to retry after a 503: long enough for a database
# restart or failover to finish, short enough to keep webhook latency low.
RETRY_AFTER_SECONDS = 5
# The webhook_events.event_id column holds at most 500 characters; longer
# (signed) ids are replaced by their hash rather than truncated, so two
# distinct ids can never collide. So are ids PostgreSQL cannot hold exactly
# (NUL, a lone surrogate).
MAX_EVENT_ID_CHARS = 500
# Rejection log lines, per reason: a flood of forged requests must not become
# a flood of log lines, nor drown a rarer reason. Metrics count every
# rejection; logs keep a sample, and say how many lines they dropped.
REJECTION_LOG_BURST = 20
REJECTION_LOG_PER_SECOND = 2.0
# A header name quoted in a refusal (body and log) is cut here: names are
# short tokens, and the quote must not let a request choose the log's size.
MAX_QUOTED_HEADER_CHARS = 64

_JSON = "application/json"
# JSON escapes PostgreSQL's jsonb refuses: NUL, and a surrogate outside a valid
# pair (a high one not followed by a low one, a low one not after a high one).
# A valid pair is what any ASCII-escaping encoder writes for an emoji: such a
# body is stored as sent. A body that matches takes the slow path. A backslash
# before a match may be an escaped one (a body's `\\ud800` is a backslash and
# the text "ud800"): the low surrogate's look-behind then refuses to vouch for
# the pair before it, and the body goes the slow (exact, only slower) way.
_HIGH = rb"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
# Every branch starts with the literal `\u`, which keeps the search cheap (the
# low one looks behind only once it matched: a look-behind first costs 15x).
_RISKY_ESCAPE = re.compile(
    rb"\\u(?:0000|[dD][89abAB][0-9a-fA-F]{2}(?!" + _LOW + rb")"
    rb"|[dD][c-fC-F][0-9a-fA-F]{2}(?<![^\\]" + _HIGH + _LOW + rb"))"
)
# The escapes the slow path reads, left to right so that an escaped backslash
# is never taken for the start of an escape: an escaped backslash and a valid
# pair are kept; NUL and a lone surrogate become U+FFFD (`_scrubbed_escape`).
_ESCAPE = re.compile(rb"\\\\|" + _HIGH + _LOW + rb"|\\u0000|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# The content codings that leave a body as it is: none at all, or "identity".
_IDENTITY = (b"", b"identity")
# Most deliveries carry no query string; parsing an empty one costs more than
# the JSON body (QueryParams is immutable, so one instance serves them all).
_NO_QUERY = QueryParams(b"")
# What `_parse_any` returns for a body that is no JSON it reads (None is JSON's null).
_NOT_JSON = object()
# A batch's events are handed to the writer this many at a time: a batch larger
# than the writer's queue is stored all the same, a part at a time.
BATCH_SUBMIT_CHUNK = 256


_STORED_MATCHED = b'{"status":"stored","matched":true}'
_STORED_UNMATCHED = b'{"status":"stored","matched":false}'
_DUPLICATE = b'{"status":"duplicate"}'
_RETRY_AFTER = ((b"retry-after", str(RETRY_AFTER_SECONDS).encode()),)
_CLOSE = (b"connection", b"close")
# RFC 9110 15.5.16: a 415 for a content coding says which codings would do.
_IDENTITY_ONLY = ((b"accept-encoding", b"identity"),)


class _Refusal(Exception):
    """A request refused before anything was stored; `reason` is a metric label.

    `detail` goes to the log line only: fixed words, a header name or an
    exception type, never a value taken from the request. `close` asks the
    server to drop the connection after the answer (the body was not read to
    its end).
    """

    def __init__(
        self,
        status: int,
        reason: RefusalReason,
        body: bytes = b'{"error":"rejected"}',
        *,
        headers: Sequence[tuple[bytes, bytes]] = (),
        detail: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason: RefusalReason = reason
        self.body = body
        self.headers = headers
        self.detail: Mapping[str, str] = detail or {}
        self.close = False


_SIGNATURE_STATUS: Mapping[str, int] = {
    "missing_header": 400,
    "malformed_header": 400,
    "bad_signature": 401,
    "stale_timestamp": 401,
    "future_timestamp": 401,
}


@dataclass(frozen=True, slots=True)
class _Provider:
    name: str
    spec: WebhookSpec
    adapter: ProviderAdapter
    signs_url: bool  # the scheme signs {url}: public_webhook_url is required
    takes_form: bool  # the scheme signs a form's fields (Twilio): a form body is read
    # Lowercase names of the headers verification and extraction read; None: any.
    reads_headers: frozenset[bytes] | None
    token_in_url: bool  # `spec.token_in_url`, worked out once
    # The configured scheme's check of a request, built once from its options and
    # secrets (`signatures.verifier`); None for a plugin that verifies on its own.
    check: RequestCheck | None
    # The lowercase names of the only headers `check` looks up (None: any).
    check_reads: frozenset[bytes] | None
    # The description reads the events (no plugin's `parse_webhook`): its facts'
    # references are storable already (`webhook_fact`), so they are not made so again.
    reads_declared: bool
    # `get_challenge` comes by POST (Microsoft's `?validationToken=`): a POST
    # carrying its parameter is that check, answered before any body is read.
    post_challenge: bool


class _LogBudget:
    """A token bucket for log lines; counts what it drops so the next line can say."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float]) -> None:
        self._burst = float(burst)
        self._rate = per_second
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self.dropped = 0

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        self.dropped += 1
        return False


class WebhookEndpoint:
    """The request handler, bound to the configured providers and the writer."""

    def __init__(
        self,
        providers: Mapping[str, ProviderDescription],
        ingestor: Ingestor,
        metrics: ReceiverMetrics,
        refusals: RefusalRecorder,
        *,
        max_body_bytes: int,
        now: Callable[[], float],
        public_url: str = "",
    ) -> None:
        self._providers = {
            name: _provider(name, desc.webhooks, adapter_for(desc))
            for name, desc in providers.items()
            if desc.webhooks is not None
        }
        for provider in self._providers.values():
            if provider.signs_url and not public_url:
                raise ValueError(
                    f"provider {provider.name}: its webhook scheme signs {{url}}; set "
                    "public_webhook_url to the address the provider sends to"
                )
        self._ingestor = ingestor
        self._metrics = metrics
        self._refusals = refusals
        self._max_body_bytes = max_body_bytes
        self._now = now
        self._public_url = public_url
        # One bucket per reason, created on first use (at most one per
        # RefusalReason, so bounded).
        self._log_budgets: dict[str, _LogBudget] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A plain ASGI endpoint: no Request/Response objects on the hottest path."""
        started = time.perf_counter()
        name = scope["path_params"]["provider"]
        label = self._metrics.label(name)
        self._metrics.received(label)
        try:
            status, body, headers = await self._handle(scope, receive, self._providers.get(name))
        except _Refusal as refusal:
            self._metrics.rejected(label, refusal.reason)
            self._refusals.note(label, refusal.reason, refusal.status)
            if refusal.status == 503:
                self._metrics.unavailable(label)
            self._log_refusal(label, refusal)
            status, body, headers = refusal.status, refusal.body, refusal.headers
            if refusal.close:
                headers = (*headers, _CLOSE)
        await _respond(send, status, body, headers)
        self._metrics.latency.observe(time.perf_counter() - started)

    async def _handle(
        self, scope: Scope, receive: Receive, provider: _Provider | None
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        if provider is not None:
            if scope["method"] != "POST":
                handshake = _handshake(provider, scope)
                if handshake is not None:
                    return handshake
            elif provider.post_challenge and scope.get("query_string"):
                answered = _echoed_get_challenge(provider, scope)
                if answered is not None:
                    return answered
        provider, headers, body = await self._request(scope, receive, provider)
        verified = self._verify(provider, headers, body, scope)
        self._metrics.verified(provider.name)
        body = provider.spec.scrub_token(body)  # echoed in the body: never stored with it
        form = provider.takes_form and twilio.is_form(headers.get("content-type"))
        batch, document, stored_body = read_delivery(provider.spec, body, form=form)
        if batch is not None:
            answered = self._batch_challenge(provider, batch, headers, body, scope)
            if answered is not None:
                return answered
            return await self._batch(provider, verified, headers, scope, body, batch)
        challenge = provider.spec.challenge
        if document is not None and challenge is not None:
            answered = self._challenged(provider, challenge, headers, body, scope, document)
            if answered is not None:
                return answered
        if document is None:  # authentic, but no JSON object this endpoint can read
            return await self._unread(provider, verified, headers, body)
        event = self._event(provider, verified, headers, scope, body, document, stored_body)
        return await self._stored_single(provider, event, headers)

    async def _unread(
        self, provider: _Provider, verified: Verified, headers: Headers, body: bytes
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        """An authentic body stored as one event, unread (`_unread_event`), and counted."""
        self._metrics.unread(provider.name)
        return await self._stored_single(provider, _unread_event(provider, verified, body), headers)

    async def _stored_single(
        self, provider: _Provider, event: Event, headers: Headers
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        """One event stored and answered once it is committed."""
        try:
            outcome = await self._ingestor.submit(event)
        except (IngestUnavailable, IngestRejected) as exc:
            _refuse_unstored(exc)
        spans.webhook_outcome(provider.name, outcome)  # for its span; a no-op unless traced
        return self._answer(provider, event, outcome, headers)

    async def _request(
        self, scope: Scope, receive: Receive, provider: _Provider | None
    ) -> tuple[_Provider, Headers, bytes]:
        """The provider, headers and whole body of a request that passed checks 1-5.

        Every refusal here leaves the body unread or half read, so it closes
        the connection (module docstring).
        """
        try:
            if provider is None:
                raise _Refusal(404, "unknown_provider", b'{"error":"not_found"}')
            if scope["method"] != "POST":
                raise _Refusal(
                    405,
                    "method_not_allowed",
                    b'{"error":"method_not_allowed"}',
                    headers=((b"allow", b"POST"),),
                )
            content_type, declared = _screen_headers(scope["headers"], provider.reads_headers)
            if not _is_json(content_type) and not (
                provider.takes_form and twilio.is_form(content_type)
            ):
                raise _Refusal(415, "unsupported_media_type", b'{"error":"unsupported_media_type"}')
            body = await _read_capped(declared, receive, self._max_body_bytes)
            return provider, Headers(scope=scope), body
        except _Refusal as refusal:
            refusal.close = True
            raise

    def _verify(
        self,
        provider: _Provider,
        headers: Headers,
        body: bytes,
        scope: Scope,
        secrets: list[str] | None = None,
    ) -> Verified:
        """`secrets`: these only (default: every secret of the provider's)."""
        spec = provider.spec
        # a token in the query is the request's own, never one of our config's
        url = (
            _target(scope)
            if provider.token_in_url
            else signed_url(self._public_url, provider.name, scope)
        )
        try:
            if provider.check is not None and secrets is None:
                view = HeaderView.from_raw(scope["headers"], provider.check_reads)
                return provider.check(view, body, self._now(), scope["method"], url)
            return provider.adapter.verify_webhook(
                headers,
                body,
                [secret.reveal() for secret in spec.secrets] if secrets is None else secrets,
                self._now(),
                method=scope["method"],
                url=url,
            )
        except SignatureError as exc:
            status = _SIGNATURE_STATUS.get(exc.reason)
            if status is None:  # no_secret / bad_options: our configuration, not the request
                raise _Refusal(
                    500, exc.reason, b'{"error":"internal"}', detail={"cause": "configuration"}
                ) from None
            raise _Refusal(status, exc.reason) from None
        except Exception as exc:  # a plugin's verifier failing is our fault, never a pass
            raise _Refusal(
                500,
                "bad_options",
                b'{"error":"internal"}',
                detail={"cause": "verifier plugin failed", "error": type(exc).__name__},
            ) from None

    def _challenged(
        self,
        provider: _Provider,
        challenge: WebhookChallenge,
        headers: Headers,
        body: bytes,
        scope: Scope,
        document: dict[str, Any],
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]] | None:
        """The answer to a verified endpoint challenge (`[webhooks] challenge`), or None
        for a delivery that is none. A challenge is answered, never stored: it is
        about no job, and a sender asks again (Zoom every 72 hours)."""
        if as_str(extract(challenge.when, document)) != challenge.equals:
            return None
        token = usable_token(extract(challenge.token, document))
        if token is None:
            raise _Refusal(400, "bad_challenge", b'{"error":"bad_challenge"}')
        secret = self._verifying_secret(provider, headers, body, scope)
        logger.info("webhook challenge answered", extra={"ctx": {"provider": provider.name}})
        return 200, challenges.answer(challenge.answer, token, secret), ()

    def _batch_challenge(
        self,
        provider: _Provider,
        batch: list[Any],
        headers: Headers,
        body: bytes,
        scope: Scope,
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]] | None:
        """The answer to a challenge sent as a batch of one (Event Grid's subscription
        validation), or None. In a longer batch, an element that looks like one is
        an event like the others: a challenge comes alone."""
        challenge = provider.spec.challenge
        if challenge is None or len(batch) != 1 or not isinstance(batch[0], dict):
            return None
        return self._challenged(provider, challenge, headers, body, scope, batch[0])

    def _verifying_secret(
        self, provider: _Provider, headers: Headers, body: bytes, scope: Scope
    ) -> str:
        """The secret the request verifies with: while one secret replaces another,
        the challenge was signed with one of them, and Zoom checks its answer against
        that one. The request verified already, so one of them does."""
        secrets = provider.spec.secrets
        for secret in secrets[:-1]:
            try:
                self._verify(provider, headers, body, scope, [secret.reveal()])
            except _Refusal:
                continue
            return secret.reveal()
        return secrets[-1].reveal()

    def _event(
        self,
        provider: _Provider,
        verified: Verified,
        headers: Headers,
        scope: Scope,
        body: bytes,
        document: dict[str, Any],
        stored_body: bytes,
    ) -> Event:
        """`stored_body`: the body as JSON text (a form's fields as an object), else `body`."""
        event_id = dedupe_id(provider.spec, verified, document, body)
        fact = _parse(provider, document, stored_body, headers, _query(scope), event_id)
        # A pre-signed link an event carries (HeyGen's `event_data.url`, CloudFront's
        # Signature) is a bearer credential until it expires: stored redacted, as the
        # call log keeps a status answer's, after the event was read and its dedupe
        # key taken from the body as signed.
        payload = sanitize_text_urls(storable_payload(stored_body, document))
        return _stored(provider, verified, event_id, fact, payload)

    def _answer(
        self, provider: _Provider, event: Event, outcome: Outcome, headers: Headers
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        self._tally(provider, event, outcome, headers)
        if outcome.status == "duplicate":
            return 200, _DUPLICATE, ()
        matched = outcome.operation_id is not None
        return 200, _STORED_MATCHED if matched else _STORED_UNMATCHED, ()

    def _tally(self, provider: _Provider, event: Event, outcome: Outcome, headers: Headers) -> None:
        """One committed event counted and logged."""
        if outcome.status == "duplicate":
            self._metrics.duplicate(provider.name)
            self._log_event("webhook duplicate", logging.DEBUG, provider, event, outcome, headers)
            return
        matched = outcome.operation_id is not None
        self._metrics.stored(provider.name, matched)
        # An event that reached an operation is part of that operation's story
        # (INFO, with its trace id); one that matched nothing changed nothing
        # and stays queryable in webhook_events (DEBUG, and counted).
        level = logging.INFO if matched else logging.DEBUG
        self._log_event("webhook stored", level, provider, event, outcome, headers)

    async def _batch(
        self,
        provider: _Provider,
        verified: Verified,
        headers: Headers,
        scope: Scope,
        body: bytes,
        elements: list[Any],
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        """A batch delivery (receiver/webhooks/batches.py): each element stored as an
        event, the answer sent once all are committed.

        A part stored before the writer refused the rest (a full queue, the
        database gone) stays stored, and the answer is the 503 that makes the
        sender post the batch again: its stored elements are then duplicates.
        An element refused for good (a plugin failing on it, a row the database
        refuses even in base64) fails no other: the rest are stored, then the
        delivery is answered 500 as that single event's would be.
        """
        spec = provider.spec
        assert spec.events is not None
        query = _query(scope)
        texts = element_texts(body, spec.events, len(elements))
        if texts is None:  # no text to store for each element: the body as one, unread
            return await self._unread(provider, verified, headers, body)
        outcomes: list[Outcome] = []
        refused: _Refusal | None = None  # the first element refused for good
        # The body was parsed and cut whole above; each element is then read and
        # stored a part at a time, so other deliveries run between parts.
        for start in range(0, len(elements), BATCH_SUBMIT_CHUNK):
            part: list[Event] = []
            for index in range(start, min(start + BATCH_SUBMIT_CHUNK, len(elements))):
                try:
                    part.append(
                        self._element_event(
                            provider, verified, headers, query, elements[index], texts[index]
                        )
                    )
                except _Refusal as refusal:  # a plugin failing on this element alone
                    refused = refused or refusal
            stored, failure = await self._submit_part(provider, part, headers)
            outcomes.extend(stored)
            if failure is not None:
                unstored = _unstored(failure)
                if unstored.status == 503:  # the writer takes nothing now: the sender retries
                    raise unstored
                refused = refused or unstored
        if refused is not None:
            raise refused
        if outcomes:  # the span joins the trace of the first operation reached, if any
            reached = [outcome for outcome in outcomes if outcome.operation_id is not None]
            spans.webhook_outcome(provider.name, (reached or outcomes)[0])
        return 200, _batch_answer(outcomes), ()

    def _element_event(
        self,
        provider: _Provider,
        verified: Verified,
        headers: Headers,
        query: QueryParams,
        element: Any,
        text: bytes,
    ) -> Event:
        """One element of a batch as the writer stores it, read as a single event's
        body is (`_event`): a plugin's `parse_webhook` is handed the element's text."""
        event_id = element_dedupe_id(provider.spec, element, text)
        fact = _parse(provider, element, text, headers, query, event_id)
        payload = sanitize_text_urls(storable_payload(text, element))
        return _stored(provider, verified, event_id, fact, payload)

    async def _submit_part(
        self, provider: _Provider, events: Sequence[Event], headers: Headers
    ) -> tuple[list[Outcome], BaseException | None]:
        """`events` stored (one group commit when the writer takes them together),
        each counted and logged, and what refused the others once all have
        settled, none left running: the writer's unavailability before a refusal
        of content (a 503 is retried, and says why the rest was not stored)."""
        results = await asyncio.gather(
            *(self._ingestor.submit(event) for event in events), return_exceptions=True
        )
        outcomes: list[Outcome] = []
        failures: list[BaseException] = []
        for event, result in zip(events, results, strict=True):
            if isinstance(result, BaseException):
                failures.append(result)
                continue
            self._tally(provider, event, result, headers)
            outcomes.append(result)
        unavailable = [exc for exc in failures if isinstance(exc, IngestUnavailable)]
        return outcomes, (unavailable or failures or [None])[0]

    @staticmethod
    def _log_event(
        message: str,
        level: int,
        provider: _Provider,
        event: Event,
        outcome: Outcome,
        headers: Headers,
    ) -> None:
        if not logger.isEnabledFor(level):
            return
        ctx = {
            "provider": provider.name,
            "event_id": event.event_id,
            "operation_id": outcome.operation_id,
            "matched_by": outcome.matched_by,
            # The operation's own trace when matched, so the event joins its story.
            "trace_id": outcome.trace_id or _request_trace_id(headers),
        }
        logger.log(level, message, extra={"ctx": ctx})

    def _log_refusal(self, label: str, refusal: _Refusal) -> None:
        """One line per refusal, within its reason's budget; our own faults at ERROR."""
        budget = self._log_budgets.get(refusal.reason)
        if budget is None:
            budget = _LogBudget(REJECTION_LOG_BURST, REJECTION_LOG_PER_SECOND, time.monotonic)
            self._log_budgets[refusal.reason] = budget
        if not budget.take():
            return
        ctx: dict[str, Any] = {
            **refusal.detail,
            "provider": label,
            "reason": refusal.reason,
            "status": refusal.status,
        }
        if budget.dropped:
            ctx["suppressed_since_last"] = budget.dropped
            budget.dropped = 0
        ours = refusal.status >= 500 and refusal.status != 503
        logger.log(
            logging.ERROR if ours else logging.WARNING, "webhook rejected", extra={"ctx": ctx}
        )


# --------------------------------------------------------------------- helpers


def _provider(name: str, spec: WebhookSpec, adapter: ProviderAdapter) -> _Provider:
    return _Provider(
        name,
        spec,
        adapter,
        signs_url(spec.scheme.value, spec.options),
        reads_form(spec.scheme.value),
        _headers_read(adapter, spec),
        spec.token_in_url,
        request_check(adapter, spec),
        check_reads(adapter.desc.webhooks),
        type(adapter).parse_webhook is ProviderAdapter.parse_webhook,
        spec.get_challenge is not None and spec.get_challenge.method == "POST",
    )


def request_check(adapter: ProviderAdapter, spec: WebhookSpec) -> RequestCheck | None:
    """The scheme's check of a request, built once (None: the adapter's own verifier).

    A configuration the check cannot be built from (bad options, no usable
    secret) fails each delivery with the same reason `verify_webhook` gives,
    a 500 naming our configuration, as it did when every delivery built it.

    A secret from `secrets_file` is read again when its file changes
    (`FollowedSecret`): each delivery then asks every secret for its value,
    as each delivery did before the check was built once, and the check is
    built again when one of them changed. A rotated secret verifies without a
    restart, and the one it replaced stops verifying (README "Rotate webhook
    secrets"). Only a plain `Secret` holds its value for the process's life.
    """
    if type(adapter).verify_webhook is not ProviderAdapter.verify_webhook:
        return None
    # As `verify_webhook` checks: the scheme of the adapter's own description (a
    # plugin may have made its own), with the secrets the endpoint was given.
    scheme = adapter.desc.webhooks
    if scheme is None:
        return _failing_check("bad_options")
    held = spec.secrets
    values = tuple([secret.reveal() for secret in held])
    built = _built_check(scheme, values)
    if all(type(secret) is Secret for secret in held):
        return built
    # (the values the check was built with, the check): one value, so a thread
    # never pairs one with the other's
    current = (values, built)

    def check(
        headers: HeaderView, body: bytes, now: float, method: str | None, url: str | None
    ) -> Verified:
        nonlocal current
        values = tuple([secret.reveal() for secret in held])
        # By identity: a secret keeps its value's object until it reads a new one,
        # and no secret is ever compared with another here.
        if any(new is not old for new, old in zip(values, current[0], strict=True)):
            current = (values, _built_check(scheme, values))
        return current[1](headers, body, now, method, url)

    return check


def _built_check(spec: WebhookSpec, secrets: Sequence[str]) -> RequestCheck:
    try:
        return verifier(spec.scheme.value, spec.options, secrets, spec.tolerance_seconds)
    except SignatureError as exc:
        return _failing_check(exc.reason)


def check_reads(spec: WebhookSpec | None) -> frozenset[bytes] | None:
    """The names `request_check`'s check looks up (lowercase, as ASGI hands them
    over), so a delivery's other headers are left out of its view unread; None
    (all) where the options do not build."""
    if spec is None:
        return None
    try:
        names = check_reads_only(spec.scheme.value, spec.options)
    except ValueError:
        return None
    return None if names is None else frozenset(name.encode("latin-1") for name in names)


def _failing_check(reason: Reason) -> RequestCheck:
    def check(
        headers: HeaderView, body: bytes, now: float, method: str | None, url: str | None
    ) -> Verified:
        raise SignatureError(reason)

    return check


def _parse(
    provider: _Provider,
    document: dict[str, Any],
    body: bytes,
    headers: Headers,
    query: QueryParams,
    event_id: str,
) -> WebhookFact | None:
    """The adapter's reading of an authentic body; None when it names no job.

    An event that names no job (another event type) is kept so its
    redeliveries dedupe and operators can see it; it matches nothing. A plugin
    that fails is our fault: 500, so the provider retries once it is fixed
    (storing the event unmatched would lose its match for good).
    """
    try:
        return parse_parsed_webhook(provider.adapter, document, body, headers, query, event_id)
    except WebhookParseError:
        return None
    except Exception as exc:
        raise _Refusal(
            500,
            "parse_failed",
            b'{"error":"internal"}',
            detail={"cause": "parse_webhook failed", "error": type(exc).__name__},
        ) from None


def _refuse_unstored(exc: BaseException) -> NoReturn:
    """Refuse a delivery the writer did not store (`_unstored`)."""
    raise _unstored(exc) from None


def _unstored(exc: BaseException) -> _Refusal:
    """The refusal of a delivery the writer did not store (all of it, or, in a batch,
    some): 503 so the sender tries again, 500 for content the database refuses.
    Anything else is no answer of the writer's: raised as it is."""
    if isinstance(exc, IngestUnavailable):
        return _Refusal(
            503,
            exc.reason,
            b'{"error":"unavailable"}',
            headers=_RETRY_AFTER,
            detail={"cause": str(exc)},  # our own fixed message
        )
    if isinstance(exc, IngestRejected):
        return _Refusal(500, "database_refused", b'{"error":"internal"}')
    raise exc


def _batch_answer(outcomes: Sequence[Outcome]) -> bytes:
    """A batch's answer: how many events it held and what became of them ("duplicate"
    when every one was stored before)."""
    new = sum(1 for outcome in outcomes if outcome.status == "stored")
    matched = sum(1 for outcome in outcomes if outcome.operation_id is not None)
    answer = {
        "status": "duplicate" if outcomes and not new else "stored",
        "events": len(outcomes),
        "new": new,
        "duplicates": len(outcomes) - new,
        "matched": matched,
    }
    return json.dumps(answer, separators=(",", ":")).encode()


def _reference(value: object) -> str | None:
    """A reference as PostgreSQL holds it exactly, else absent (module docstring).

    Also for a plugin's fact: a float it hands over names nothing exactly (`as_id`).
    """
    text = as_id(value)
    if text is None or not holds_exactly(text):
        return None
    return clip(text)


def _shown(value: object) -> str | None:
    """Text that is only shown, made storable: U+FFFD for NUL and lone surrogates."""
    text = as_str(value)
    return None if text is None else clip(scrub_text(text))


def _remote_state(value: object) -> str | None:
    """The canonical state's name; anything else a plugin returns counts as absent."""
    return value.value if isinstance(value, RemoteState) else None


def _headers_read(adapter: ProviderAdapter, spec: WebhookSpec) -> frozenset[bytes] | None:
    """Lowercase names of the headers a delivery's verification and extraction read.

    The scheme's signature, timestamp and id headers (aliases included) and
    the `header:` paths of the webhook description. None (every header) for a
    plugin that verifies or parses on its own: it may read any of them.
    """
    cls = type(adapter)
    if (
        cls.verify_webhook is not ProviderAdapter.verify_webhook
        or cls.parse_webhook is not ProviderAdapter.parse_webhook
    ):
        return None
    names = list(headers_read(spec.scheme.value, spec.options))
    paths = (spec.event_id, spec.job_id, spec.state, spec.operation_ref, spec.client_reference)
    names += [p.name for p in paths if p is not None and p.source is PathSource.HEADER]
    return frozenset(name.lower().encode("latin-1") for name in names)


def _screen_headers(
    raw: Sequence[tuple[bytes, bytes]], reads: frozenset[bytes] | None
) -> tuple[str | None, str | None]:
    """Refuse a non-ASCII header we read (400, naming it), then a content coding (415);
    else the Content-Type and Content-Length, each its first value as the framework's
    `Headers.get` reads it (Latin-1), or None.

    One pass over the raw headers does all of it: it runs on every delivery.
    ASGI servers hand header names over lowercased.
    """
    encoded = False
    content_type: bytes | None = None
    content_length: bytes | None = None
    for name, value in raw:
        if not (name.isascii() and value.isascii()) and (reads is None or name.lower() in reads):
            quoted = _quoted(name)
            body = json.dumps({"error": "non_ascii_header", "header": quoted})
            raise _Refusal(400, "non_ascii_header", body.encode("ascii"), detail={"header": quoted})
        if name == b"content-type":
            if content_type is None:
                content_type = value
        elif name == b"content-length":
            if content_length is None:
                content_length = value
        elif name == b"content-encoding" and value.strip().lower() not in _IDENTITY:
            encoded = True
    if encoded:
        raise _Refusal(
            415,
            "unsupported_encoding",
            b'{"error":"unsupported_encoding"}',
            headers=_IDENTITY_ONLY,
        )
    return (
        None if content_type is None else content_type.decode("latin-1"),
        None if content_length is None else content_length.decode("latin-1"),
    )


def _quoted(name: bytes) -> str:
    """A header name fit for a log line and a JSON body: escaped, bounded, plain ASCII."""
    escaped = name[:MAX_QUOTED_HEADER_CHARS].decode("latin-1").encode("unicode_escape")
    return escaped.decode("ascii")


async def _read_capped(declared: str | None, receive: Receive, limit: int) -> bytes:
    """The whole body, refusing (413) as soon as it is known to exceed `limit`.

    `declared` (Content-Length) is only a first check: a chunked body has none
    and a lying client can send more, so the stream itself is counted too.
    """
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise _Refusal(400, "bad_content_length")
        if int(declared) > limit:
            raise _Refusal(413, "body_too_large", b'{"error":"too_large"}')
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away mid-body
            raise _Refusal(400, "incomplete_body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _Refusal(413, "body_too_large", b'{"error":"too_large"}')
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _respond(
    send: Send, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]]
) -> None:
    """`body` answered as JSON, unless `headers` name its content type themselves."""
    plain = _PLAIN_HEADERS.get(body) if not headers else None
    typed = plain is None and any(name == b"content-type" for name, _ in headers)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            # a fresh list each time: a middleware may edit the message's in place
            "headers": list(plain)
            if plain is not None
            else [
                *(() if typed else ((b"content-type", b"application/json"),)),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# The headers of the answers every delivery gets, made once.
_PLAIN_HEADERS = {
    body: ((b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()))
    for body in (_STORED_MATCHED, _STORED_UNMATCHED, _DUPLICATE)
}


def _echoed_get_challenge(
    provider: _Provider, scope: Scope
) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]] | None:
    """The answer to a GET carrying the provider's `get_challenge` parameter: its
    value, as Dropbox, Meta and Strava check an endpoint before they deliver
    (unsigned: the value is the asker's own, so echoing it proves only that the
    URL answers). None for a GET without it, refused 405 as any GET is.

    With `method = "POST"` the check is a POST carrying the parameter
    (Microsoft Graph's and Azure AI Speech's `?validationToken=`), answered the
    same way before its body is read; None for a POST without it, a delivery.
    Such a token may hold spaces and colons (Graph's is a sentence).

    With a verify token configured, the GET must carry it (compared in
    constant time) or it is refused (403 `bad_verify_token`) before its
    value is looked at: whoever else found the URL gets nothing back. The
    value is echoed only as 1 to 256 characters of a random token's alphabet
    (letters, digits, `-._~+/=`: no markup, no space, no line break), as
    text/plain that no browser may sniff into anything else, or inside a
    JSON object (`answer = "json"`); any other value, or the parameter sent
    twice, is refused (400 `bad_challenge`). Nothing is stored or read from
    a body.
    """
    get = provider.spec.get_challenge
    assert get is not None
    raw_query = scope.get("query_string", b"")
    query = QueryParams(raw_query) if raw_query else _NO_QUERY
    values = query.getlist(get.param)
    if not values:
        return None
    if get.verify_param is not None:  # a token asked for but not set: nothing passes
        given = query.getlist(get.verify_param)
        if get.verify_token is None or len(given) != 1 or not get.verify_token.matches(given[0]):
            raise _Refusal(403, "bad_verify_token", b'{"error":"bad_verify_token"}')
    token = values[0] if len(values) == 1 else None
    alphabet = _ECHOED_TOKEN if get.method == "GET" else _ECHOED_VALIDATION_TOKEN
    if token is None or alphabet.fullmatch(token) is None:
        raise _Refusal(400, "bad_challenge", b'{"error":"bad_challenge"}')
    logger.debug(
        "webhook query challenge answered",
        extra={"ctx": {"provider": provider.name, "method": get.method}},
    )
    if get.answer is GetAnswer.JSON:
        return 200, json.dumps({get.param: token}, separators=(",", ":")).encode(), _JSON_ECHO
    return 200, token.encode("ascii"), _ECHO_HEADERS


_ECHOED_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{1,256}")
# A POST check's token may be a sentence: Microsoft Graph's reads "Validation:
# Testing client application reachability for subscription Request-Id: <id>".
# Spaces and colons then, still no markup and no line break.
_ECHOED_VALIDATION_TOKEN = re.compile(r"[A-Za-z0-9._~+/=: -]{1,256}")
# What an echoed challenge is answered as (Dropbox's documented answer).
_ECHO_HEADERS = (
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"x-content-type-options", b"nosniff"),
)
# ... and inside a JSON object (Strava's).
_JSON_ECHO = ((b"content-type", b"application/json"), (b"x-content-type-options", b"nosniff"))


def _handshake(
    provider: _Provider, scope: Scope
) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]] | None:
    """The answer to a sender's check of the endpoint before it delivers (a GET
    challenge, CloudEvents' OPTIONS), or None: the request is then refused as any
    method but POST is."""
    method, spec = scope["method"], provider.spec
    if method == "GET" and spec.get_challenge and spec.get_challenge.method == "GET":
        return _echoed_get_challenge(provider, scope)
    if method == "OPTIONS" and spec.allowed_origins:
        return _origin_handshake(spec.allowed_origins, scope["headers"])
    return None


def _origin_handshake(
    allowed: Sequence[str], raw_headers: Sequence[tuple[bytes, bytes]]
) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
    """The answer to CloudEvents' abuse-protection handshake (`allowed_origins`).

    A sender that pushes CloudEvents (Azure Event Grid, Web PubSub) first asks
    the endpoint, with an OPTIONS naming its origin in WebHook-Request-Origin,
    whether it wants them, and delivers nothing until told so. It proves
    nothing (anyone can send the header), so it is answered only for the
    origins the operator listed, and the deliveries are verified as ever.
    The answer names our own configured origin (or "*"), never the request's
    text; the rate is ours to allow, and any suits the group commit. An
    origin not listed, missing or sent twice is refused 403
    `origin_not_allowed`: the sender then refuses the subscription.
    """
    sent = [value for name, value in raw_headers if name.lower() == b"webhook-request-origin"]
    origin = sent[0].decode("latin-1").strip().lower() if len(sent) == 1 else None
    if origin is not None and "*" in allowed:
        granted = "*"
    elif origin is not None and origin in allowed:
        granted = origin
    else:
        raise _Refusal(403, "origin_not_allowed", b'{"error":"origin_not_allowed"}')
    headers = (
        (b"webhook-allowed-origin", granted.encode()),
        (b"webhook-allowed-rate", b"*"),
        (b"allow", b"POST, OPTIONS"),
        (b"content-type", b"text/plain; charset=utf-8"),
    )
    return 200, b"", headers


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == _JSON or (media.startswith("application/") and media.endswith("+json"))


def _reject_constant(name: str) -> NoReturn:
    # NaN / Infinity are not JSON (RFC 8259) and PostgreSQL refuses them.
    raise ValueError(f"non-standard JSON constant {name}")


def _parse_json(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object; None for one that is not a JSON object this
    endpoint can read (nested too deep, an array or a scalar, not JSON, not UTF-8).
    A batch provider's list is read by `read_delivery`, not here.

    Read as `json.loads` reads it, NaN and Infinity refused (RFC 8259), by
    orjson where that reads it the same (`shared.jsonread`); a body that
    fails that reading is read again with integers too long for `int()` as
    `jsonread.LongInt`. Only such bodies pay for the second reading. None is
    never a refusal: the body is authentic (its signature checked), and a 400
    would lose it, no provider resending one (SendGrid posts an array of
    events, a sender may have a bug): it is stored as it came (`_unread_event`).
    """
    document = _parse_any(body)
    return document if isinstance(document, dict) else None


def _parse_any(body: bytes) -> Any:
    """The body as JSON, any value (`_parse_json`'s reading); `_NOT_JSON` if none."""
    try:
        return jsonread.loads(body, _reject_constant)
    except jsonread.NOT_JSON:
        try:
            return json.loads(body, parse_constant=_reject_constant, parse_int=jsonread.int_or_long)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return _NOT_JSON


class Delivery(NamedTuple):
    """A verified body as the endpoint reads it (`read_delivery`)."""

    batch: list[Any] | None  # a batch's events (`[webhooks] events`); else None
    document: dict[str, Any] | None  # one event's object; None: none read (or a batch)
    stored: bytes  # the body as it is stored: a form's fields as one JSON object


def read_delivery(spec: WebhookSpec, body: bytes, *, form: bool) -> Delivery:
    """A verified delivery, its body parsed once: a batch's events where the
    provider's `events` names a list in it; else its document (None: no JSON object
    this endpoint reads, a provider without `events` reading the body the same)
    and the body as it is stored (a form's fields, Twilio's `form`, as one JSON
    object; any other body as it came)."""
    if form:
        try:
            document = _form_document(body)
        except SignatureError:  # verified by a plugin, yet no form we read: stored unread
            return Delivery(None, None, body)
        return Delivery(None, document, json.dumps(document, ensure_ascii=False).encode())
    parsed = _parse_any(body)
    if parsed is _NOT_JSON:
        return Delivery(None, None, body)
    batch = None if spec.events is None else batch_elements(spec.events, parsed)
    if batch is not None:
        return Delivery(batch, None, body)
    return Delivery(None, parsed if isinstance(parsed, dict) else None, body)


def _form_document(body: bytes) -> dict[str, Any]:
    """A verified form's fields as the object paths read (`/CallSid`): a field
    sent once is its value, one sent with several values the list of them, each
    once (as Twilio signs them: a value repeated is not a second one)."""
    values: dict[str, list[str]] = {}
    for name, value in twilio.form_fields(body):
        held = values.setdefault(name, [])
        if value not in held:
            held.append(value)
    return {name: held[0] if len(held) == 1 else held for name, held in values.items()}


def _unread_event(provider: _Provider, verified: Verified, body: bytes) -> Event:
    """An authentic body that is no JSON object readable here, stored matched to nothing.

    Nothing in it is read: no reference (so no match, and no plugin is asked,
    as it would read the same body), its dedupe key the scheme's signed id or
    else the body's hash (`dedupe_id` finds no id in an empty document), so a
    redelivery is a duplicate. Its payload is the body in base64 (jsonb may
    refuse it), as sent but for its links' credential-looking query values,
    redacted as every stored payload's are. Operators find it among the
    unmatched events.
    """
    event_id = dedupe_id(provider.spec, verified, {}, body)
    return _stored(
        provider, verified, event_id, None, unstorable_payload(sanitize_bytes_urls(body))
    )


def _stored(
    provider: _Provider,
    verified: Verified,
    event_id: str,
    fact: WebhookFact | None,
    payload: str,
) -> Event:
    """The event as the writer stores it: what `fact` says, made storable (module
    docstring); None (nothing read, or nothing readable) names nothing."""
    scheme = provider.spec.scheme.value
    if verified.scheme != scheme:  # a plugin's own words: shown, so made storable
        scheme = _shown(verified.scheme) or scheme
    if fact is None:
        return Event(
            provider.name, event_id, scheme, verified.id_signed, None, None, None, None, payload
        )
    if provider.reads_declared:  # `webhook_fact` read them as `_reference` would keep them
        job, operation, client = fact.remote_job_id, fact.operation_ref, fact.client_reference
    else:
        job = _reference(fact.remote_job_id)
        operation = _reference(fact.operation_ref)
        client = _reference(fact.client_reference)
    return Event(
        provider.name,
        event_id,
        scheme,
        verified.id_signed,
        job,
        operation,
        _remote_state(fact.remote_state),
        _shown(fact.raw_state),
        payload,
        client,
    )


def _query(scope: Scope) -> QueryParams:
    """The request's query parameters, for `query:` paths (most deliveries have none)."""
    raw_query = scope.get("query_string", b"")
    return QueryParams(raw_query) if raw_query else _NO_QUERY


def _target(scope: Scope) -> str:
    """The request's own path and query, as it reached us: where a token sent in
    the callback URL is read from (`static_header` with `query`). Not
    `signed_url`: a query in `public_webhook_url` would then be read as the
    sender's, and a request with no token at all would present ours."""
    query = scope.get("query_string", b"").decode("latin-1")
    path: str = scope.get("path", "")
    return path + (f"?{query}" if query else "")


def signed_url(public_url: str, provider: str, scope: Scope) -> str | None:
    """The URL as the sender addressed it, for schemes that sign `{url}`.

    Only from `public_webhook_url` (a scheme that signs the URL is refused at
    start-up without it): the Host header is the sender's to choose, and
    taking the URL from it would let a delivery signed for another endpoint
    sharing the key (staging, another tenant) verify here.
    """
    if not public_url:
        return None
    url, _, own = public_url.replace("{provider}", provider).partition("?")
    # Both routes (with and without a trailing slash) take deliveries; the
    # sender signed the one it addressed, so the public URL follows suit.
    slash = scope.get("path", "").endswith("/")
    if url.endswith("/") != slash:
        url = url + "/" if slash else url[:-1]
    query = scope.get("query_string", b"").decode("latin-1")
    # Its own query (`?tenant=a`) is the sender's too, and arrives in the
    # request's, perhaps followed by more (`&op=…`): checked once (it was
    # checked twice, `?tenant=a?tenant=a`). A request without it is checked
    # against it all the same: a delivery signed for `?tenant=b`, another
    # endpoint sharing the key, must not verify here.
    if own and query != own and not query.startswith(own + "&"):
        query = own + (f"&{query}" if query else "")
    return url + (f"?{query}" if query else "")


def dedupe_id(spec: WebhookSpec, verified: Verified, document: Any, body: bytes) -> str:
    """The event's dedupe key, always one the signature covers (module docstring)."""
    if verified.id_signed and verified.event_id:
        candidate: str | None = verified.event_id
    else:
        candidate = _signed_body_id(spec, document)
    return _kept_id(candidate, body)


def element_dedupe_id(spec: WebhookSpec, element: Any, text: bytes) -> str:
    """A batch element's dedupe key: its own signed id (the event's, the same in any
    batch), else the hash of its bytes. Never the delivery's signed id, which names
    the batch, not the event."""
    return _kept_id(_signed_body_id(spec, element), text)


def _signed_body_id(spec: WebhookSpec, document: Any) -> str | None:
    """The id `event_id` (or the scheme's own) points at in a signed body, if any."""
    path = body_event_id(spec)
    return None if path is None else as_id(extract(path, document))  # a JSON float: absent


def _kept_id(candidate: str | None, body: bytes) -> str:
    """`candidate` as a key the column holds exactly, else a hash (of `body` when
    there is no candidate)."""
    if not candidate:
        return "sha256:" + hashlib.sha256(body).hexdigest()
    if len(candidate) > MAX_EVENT_ID_CHARS or not holds_exactly(candidate):
        return "sha256:" + hashlib.sha256(candidate.encode("utf-8", "surrogatepass")).hexdigest()
    return candidate


def storable_payload(body: bytes, document: Any) -> str:
    """JSON text for the jsonb column, equal in content to the signed body.

    The raw text is stored as is when PostgreSQL can take it (the common case,
    and the cheapest). A UTF-8 body holding escapes jsonb refuses (NUL, an
    unpaired surrogate: `_RISKY_ESCAPE`) is stored as its text with just
    those escapes replaced by U+FFFD's: a batch must never fail because one
    authentic event carried them, and every other character, numbers
    included, stays as sent (re-encoding the parsed document would round
    12345678901234567.89 through a double). A body that is not UTF-8 text
    (with a BOM, or UTF-16/32, which the standard library reads; a raw NUL
    byte is how one without a BOM shows, as no JSON in UTF-8 holds one) is
    re-encoded from the parsed document, scrubbed the same way. A document
    that cannot be re-encoded (a number beyond a double's range, read as
    infinity; extreme nesting) is stored as `unstorable_payload`, which
    keeps the body exactly but for its links' credential-looking query values.

    Numbers beyond PostgreSQL's numeric range (`1e200000`, 20,000 digits
    after the point) in raw text are not looked for here: that would be a
    scan of every body for what almost none holds. The database refuses
    such a payload and the writer stores it as `unstorable_payload` (`ingest`).
    """
    if b"\x00" not in body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if not text.startswith("\ufeff"):
                risky = _RISKY_ESCAPE.search(body)
                return text if risky is None else _scrub_escapes(body).decode("utf-8")
    try:
        return json.dumps(scrub(document), ensure_ascii=False, allow_nan=False)
    except (ValueError, RecursionError):  # e.g. 1e999 parsed as inf; extreme nesting
        # in base64, out of reach of the redaction of the text (`_event`): done here
        return unstorable_payload(sanitize_bytes_urls(body))


def _scrub_escapes(body: bytes) -> bytes:
    """`body` (JSON text) with its NUL and lone surrogate escapes replaced by U+FFFD's."""
    return _ESCAPE.sub(_scrubbed_escape, body)


def _scrubbed_escape(found: re.Match[bytes]) -> bytes:
    """An `_ESCAPE` token as jsonb takes it: kept (an escaped backslash, a pair), else U+FFFD."""
    token = found.group()
    return token if token == b"\\\\" or len(token) == 12 else b"\\ufffd"


def _request_trace_id(headers: Headers) -> str:
    return trace_id_from_traceparent(headers.get("traceparent")) or new_trace_id()
