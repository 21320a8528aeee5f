"""`POST /webhooks/{provider}`: verify the raw body, pick a signed dedupe id, store.

Checks run cheapest-and-least-trusting first, and nothing from a request is
used before its signature verified:

1. the provider is configured with webhooks (else 404, generic body);
2. the body is read with a hard cap (413), whatever Content-Length claims;
3. the content type is JSON (415);
4. the signature is verified on the raw bytes (missing or malformed headers
   400, bad signature / stale / future timestamp 401; the body is only
   ``{"error": "rejected"}`` so a forger learns nothing);
5. the body is parsed (malformed JSON after a valid signature: 400);
6. the event is handed to the group-commit writer (`ingest`) and the answer
   (200 stored / duplicate) is sent only after COMMIT; a database that cannot
   take it within the timeouts gives 503 with Retry-After, so the provider
   retries. An authentic event that names no job (another event type) is
   stored too, matched to nothing, so its redeliveries deduplicate.

Dedupe ids are always ones the signature covers:

- the scheme's signed id when there is one (Standard Webhooks `webhook-id`,
  generic HMAC with ``{id}`` in the signed content);
- else an id inside the signed body (Stripe's ``/id``, or the provider's
  ``event_id`` path when it points into the body);
- else ``sha256:<hash of the raw body>``.

GitHub signs only the body: its `X-GitHub-Delivery` id is not covered, so it is
never used as the dedupe key (an attacker replaying a captured body under a
fresh delivery id would otherwise pass dedupe). GitHub events are deduplicated
by the body hash instead, which has two consequences: a redelivery (same body)
and a replay are both caught as duplicates, but there is no replay *window* —
an identical body is refused as a duplicate only while its dedupe row is kept
(`webhook_retention_days`), and a replay after that is stored again. Since
events only wake the reconciler to read the job's status itself, a replayed
event can cause an extra status read, never a wrong state. The same holds for
`static_header` providers, whose body is not signed at all.

Likewise, a job id, operation id or client reference read from a header or
from the query string (`header:` / `query:` paths in the provider
description) is not covered by a body-only signature: a replayed body could be
pointed at another job. Prefer body paths where the provider puts them in the
body.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from starlette.datastructures import Headers, QueryParams
from starlette.types import Receive, Scope, Send

from receiver.metrics import ReceiverMetrics
from receiver.webhooks.ingest import Event, Ingestor, IngestRejected, IngestUnavailable, Outcome
from shared.db.pgjson import scrub
from shared.ids import new_trace_id, trace_id_from_traceparent
from shared.providers import ProviderDescription, WebhookParseError, adapter_for
from shared.providers.adapter import ProviderAdapter
from shared.providers.description import WebhookScheme, WebhookSpec
from shared.providers.paths import PathSource, ValuePath, extract, parse_path
from shared.providers.values import as_str
from shared.signatures import SignatureError, Verified, signs_url

logger = logging.getLogger(__name__)

# Tells the provider when to retry after a 503: long enough for a database
# restart or failover to finish, short enough to keep webhook latency low.
RETRY_AFTER_SECONDS = 5
# The webhook_events.event_id column holds at most 500 characters; longer
# (signed) ids are replaced by their hash rather than truncated, so two
# distinct ids can never collide. So are ids PostgreSQL cannot hold exactly
# (NUL, a lone surrogate).
MAX_EVENT_ID_CHARS = 500
# Rejection log lines: a flood of forged requests must not become a flood of
# log lines. Metrics count every rejection; logs keep a sample.
REJECTION_LOG_BURST = 20
REJECTION_LOG_PER_SECOND = 2.0

_JSON = "application/json"
_SCHEME_BODY_ID: Mapping[WebhookScheme, ValuePath] = {
    WebhookScheme.STRIPE: parse_path("/id"),
    WebhookScheme.SLACK: parse_path("/event_id"),
}
# JSON escapes PostgreSQL's jsonb refuses (NUL) or may refuse (surrogates, which
# are fine only in valid pairs): such bodies take the slow, re-encoding path.
_RISKY_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_UNSTORABLE = '{"jobwarden": "payload not representable as jsonb"}'


_STORED_MATCHED = b'{"status":"stored","matched":true}'
_STORED_UNMATCHED = b'{"status":"stored","matched":false}'
_DUPLICATE = b'{"status":"duplicate"}'
_RETRY_AFTER = ((b"retry-after", str(RETRY_AFTER_SECONDS).encode()),)


class _Refusal(Exception):
    """A request refused before anything was stored; `reason` is a metric label."""

    def __init__(self, status: int, reason: str, body: bytes = b'{"error":"rejected"}') -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.body = body


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
        *,
        max_body_bytes: int,
        now: Callable[[], float],
        public_url: str = "",
    ) -> None:
        self._providers = {
            name: _Provider(
                name,
                desc.webhooks,
                adapter_for(desc),
                signs_url(desc.webhooks.scheme.value, desc.webhooks.options),
            )
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
        self._max_body_bytes = max_body_bytes
        self._now = now
        self._public_url = public_url
        self._log_budget = _LogBudget(REJECTION_LOG_BURST, REJECTION_LOG_PER_SECOND, time.monotonic)

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
            self._log_refusal(label, refusal)
            status, body, headers = refusal.status, refusal.body, ()
        await _respond(send, status, body, headers)
        self._metrics.latency.observe(time.perf_counter() - started)

    async def _handle(
        self, scope: Scope, receive: Receive, provider: _Provider | None
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        if provider is None:
            raise _Refusal(404, "unknown_provider", b'{"error":"not_found"}')
        headers = Headers(scope=scope)
        body = await _read_capped(headers, receive, self._max_body_bytes)
        if not _is_json(headers.get("content-type")):
            raise _Refusal(415, "unsupported_media_type", b'{"error":"unsupported_media_type"}')
        verified = self._verify(provider, headers, body, scope)
        self._metrics.verified(provider.name)
        document = _parse_json(body)
        event = self._event(provider, verified, headers, scope, body, document)
        try:
            outcome = await self._ingestor.submit(event)
        except IngestUnavailable:
            self._metrics.unavailable(provider.name)
            return 503, b'{"error":"unavailable"}', _RETRY_AFTER
        except IngestRejected:
            return 500, b'{"error":"internal"}', ()
        return self._answer(provider, event, outcome, headers)

    def _verify(self, provider: _Provider, headers: Headers, body: bytes, scope: Scope) -> Verified:
        spec = provider.spec
        try:
            return provider.adapter.verify_webhook(
                headers,
                body,
                [secret.reveal() for secret in spec.secrets],
                self._now(),
                method=scope["method"],
                url=signed_url(self._public_url, provider.name, scope),
            )
        except SignatureError as exc:
            status = _SIGNATURE_STATUS.get(exc.reason)
            if status is None:  # no_secret / bad_options: our configuration, not the request
                logger.error(
                    "webhook verification is misconfigured",
                    extra={"ctx": {"provider": provider.name, "reason": exc.reason}},
                )
                raise _Refusal(500, exc.reason, b'{"error":"internal"}') from None
            raise _Refusal(status, exc.reason) from None
        except Exception as exc:  # a plugin's verifier failing is our fault, never a pass
            logger.error(
                "webhook verification plugin failed",
                extra={"ctx": {"provider": provider.name, "error": type(exc).__name__}},
            )
            raise _Refusal(500, "bad_options", b'{"error":"internal"}') from None

    def _event(
        self,
        provider: _Provider,
        verified: Verified,
        headers: Headers,
        scope: Scope,
        body: bytes,
        document: dict[str, Any],
    ) -> Event:
        event_id = dedupe_id(provider.spec, verified, document, body)
        query = QueryParams(scope.get("query_string", b""))
        try:
            fact = provider.adapter.parse_webhook(body, headers, query)
        except WebhookParseError:
            # Authentic but naming no job (another event type): kept so its
            # redeliveries dedupe and operators can see it; it matches nothing.
            job_id = operation_ref = client_reference = state = raw_state = None
        else:
            job_id, operation_ref = fact.remote_job_id, fact.operation_ref
            client_reference = fact.client_reference
            state = fact.remote_state.value if fact.remote_state is not None else None
            raw_state = fact.raw_state
        return Event(
            provider=provider.name,
            event_id=event_id,
            scheme=verified.scheme,
            id_signed=verified.id_signed,
            remote_job_id=job_id,
            operation_ref=operation_ref,
            client_reference=client_reference,
            remote_state=state,
            remote_state_raw=raw_state,
            payload=storable_payload(body, document),
        )

    def _answer(
        self, provider: _Provider, event: Event, outcome: Outcome, headers: Headers
    ) -> tuple[int, bytes, Sequence[tuple[bytes, bytes]]]:
        if outcome.status == "duplicate":
            self._metrics.duplicate(provider.name)
            self._log_event("webhook duplicate", logging.DEBUG, provider, event, outcome, headers)
            return 200, _DUPLICATE, ()
        matched = outcome.operation_id is not None
        self._metrics.stored(provider.name, matched)
        # An event that reached an operation is part of that operation's story
        # (INFO, with its trace id); one that matched nothing changed nothing
        # and stays queryable in webhook_events (DEBUG, and counted).
        level = logging.INFO if matched else logging.DEBUG
        self._log_event("webhook stored", level, provider, event, outcome, headers)
        return 200, _STORED_MATCHED if matched else _STORED_UNMATCHED, ()

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
        if not self._log_budget.take():
            return
        ctx: dict[str, Any] = {
            "provider": label,
            "reason": refusal.reason,
            "status": refusal.status,
        }
        if self._log_budget.dropped:
            ctx["suppressed_since_last"] = self._log_budget.dropped
            self._log_budget.dropped = 0
        logger.warning("webhook rejected", extra={"ctx": ctx})


# --------------------------------------------------------------------- helpers


async def _read_capped(headers: Headers, receive: Receive, limit: int) -> bytes:
    """The whole body, refusing (413) as soon as it is known to exceed `limit`.

    Content-Length is only a first check: a chunked body has none and a
    lying client can send more, so the stream itself is counted too.
    """
    declared = headers.get("content-length")
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
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == _JSON or (media.startswith("application/") and media.endswith("+json"))


def _reject_constant(name: str) -> NoReturn:
    # NaN / Infinity are not JSON (RFC 8259) and PostgreSQL refuses them.
    raise ValueError(f"non-standard JSON constant {name}")


def _parse_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; anything else is a 400 (the sender is authentic)."""
    try:
        document = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise _Refusal(400, "malformed_json", b'{"error":"malformed_json"}') from None
    if not isinstance(document, dict):
        raise _Refusal(400, "not_an_object", b'{"error":"malformed_json"}')
    return document


def signed_url(public_url: str, provider: str, scope: Scope) -> str | None:
    """The URL as the sender addressed it, for schemes that sign `{url}`.

    Only from `public_webhook_url` (a scheme that signs the URL is refused at
    start-up without it): the Host header is the sender's to choose, and
    taking the URL from it would let a delivery signed for another endpoint
    sharing the key (staging, another tenant) verify here.
    """
    if not public_url:
        return None
    query = scope.get("query_string", b"").decode("latin-1")
    return public_url.replace("{provider}", provider) + (f"?{query}" if query else "")


def dedupe_id(spec: WebhookSpec, verified: Verified, document: Any, body: bytes) -> str:
    """The event's dedupe key, always one the signature covers (module docstring)."""
    candidate: str | None = None
    if verified.id_signed and verified.event_id:
        candidate = verified.event_id
    else:
        path = spec.event_id or _SCHEME_BODY_ID.get(spec.scheme)
        body_signed = spec.scheme is not WebhookScheme.STATIC_HEADER
        if path is not None and path.source is PathSource.BODY and body_signed:
            candidate = as_str(extract(path, document))
    if not candidate:
        return "sha256:" + hashlib.sha256(body).hexdigest()
    if len(candidate) > MAX_EVENT_ID_CHARS or not _storable(candidate):
        return "sha256:" + hashlib.sha256(candidate.encode("utf-8", "surrogatepass")).hexdigest()
    return candidate


def _storable(text: str) -> bool:
    """PostgreSQL text holds it exactly: no NUL, no lone surrogate."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_payload(body: bytes, document: Any) -> str:
    """JSON text for the jsonb column, equal in content to the signed body.

    The raw text is stored as is when PostgreSQL can take it (the common case,
    and the cheapest). Otherwise the parsed document is re-encoded with NUL
    and unpaired surrogates replaced by U+FFFD: jsonb cannot hold them, and a
    batch must never fail because one authentic event carried them.
    """
    if not _RISKY_ESCAPE.search(body):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if not text.startswith("\ufeff"):
                return text
    try:
        return json.dumps(scrub(document), ensure_ascii=False, allow_nan=False)
    except (ValueError, RecursionError):  # e.g. 1e999 parsed as inf; extreme nesting
        return _UNSTORABLE


def _request_trace_id(headers: Headers) -> str:
    return trace_id_from_traceparent(headers.get("traceparent")) or new_trace_id()
