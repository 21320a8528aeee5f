"""`providers check --delivery/--result`: proof from captured traffic, offline.

A configuration that loads is a claim; a real delivery that verifies, or a
real result that validates, is the proof. Both run the very code the daemons
run (the signature scheme, the adapter's webhook parser, the result
validator) on captured bytes, with no database and no network, and say in
plain words what the daemons would have done with them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any
from urllib.parse import urlsplit

from receiver.webhooks.batches import element_texts
from receiver.webhooks.endpoint import (
    dedupe_id,
    element_dedupe_id,
    read_delivery,
    signed_url,
)
from shared.cli.captures import Capture
from shared.providers import (
    HttpResponse,
    ProviderDescription,
    WebhookFact,
    WebhookParseError,
    adapter_for,
)
from shared.providers.adapter import ProviderAdapter, parse_parsed_webhook
from shared.providers.description import WebhookScheme, WebhookSpec
from shared.providers.paths import extract
from shared.providers.values import as_str
from shared.signatures import SignatureError, signs_url, twilio
from shared.signatures.challenges import usable_token

# What to look at when a captured delivery is refused, per reason word.
_HINTS: dict[str, str] = {
    "missing_header": "a header the scheme reads is absent: check the header-name options "
    "against the capture's headers",
    "malformed_header": "a signature or timestamp header does not have the configured format "
    "(format, prefix, signature_encoding, timestamp_key)",
    "bad_signature": "no configured secret signs this body: a wrong or rotated secret, "
    "another signed_content template or key_encoding, or a capture tool that re-encoded the "
    "body (it must be the bytes as sent)",
    "no_secret": "no configured secret is usable by this scheme (see secrets_env/secrets_file)",
    "bad_options": "the scheme needs what the capture lacks (a {url} template, or a token in "
    "the query string, needs --url)",
}

# Where a scheme of its own module goes wrong otherwise than the families: the
# generic hint names templates and key encodings these schemes do not have.
_SCHEME_HINTS: dict[tuple[WebhookScheme, str], str] = {
    (WebhookScheme.TWILIO, "bad_signature"): "the Auth Token does not sign this request at "
    "this URL: Twilio signs the exact URL it was given (scheme, host, port, path, trailing "
    "slash and query, bodySHA256 included), so public_webhook_url (or --url) must spell it "
    "so; else a wrong or rotated Auth Token, or a capture tool that re-encoded the form",
    (WebhookScheme.MAILGUN, "bad_signature"): "the key does not sign this timestamp and "
    "token: Mailgun signs with the HTTP webhook signing key (Sending > Webhooks), not the "
    "API key",
    (WebhookScheme.MAILGUN, "missing_header"): "the body has no signature object "
    '{"timestamp", "token", "signature"} at the top level, where Mailgun\'s JSON webhooks '
    "put it (a capture of the event data alone, or of another sender)",
    (WebhookScheme.MAILGUN, "malformed_header"): "the body's signature object is unreadable: "
    "its timestamp must be plain unix seconds (no leading zeros), its token 1 to 256 "
    "printable characters, its signature hex",
    (WebhookScheme.TWILIO, "malformed_header"): "X-Twilio-Signature (or the header named by "
    "signature_header) is not base64, or X-Twilio-Webhooks-Signature-Settings names an "
    "algorithm other than HMAC_SHA1 or HMAC_SHA256",
}

# What the receiver does with an authentic body that is no JSON object it reads.
_UNREAD = (
    "it is no JSON object the receiver reads (not JSON or not UTF-8, NaN or Infinity, "
    "nested too deeply, an array or a scalar): stored as it came, matched to no operation"
)

# Appended to `_UNREAD` for a provider that reads no batches: the array may be one.
_BATCH_HINT = (
    '; if it is a batch of events (a JSON array, as HubSpot and SendGrid post), events = "" '
    "in [webhooks] reads each element as an event of its own"
)

# The elements of a batch listed one by one; the rest are counted ("more").
BATCH_LISTED = 20


def prove_delivery(
    desc: ProviderDescription,
    capture: Capture,
    *,
    at: float | None,
    url: str | None,
    public_url: str = "",
) -> dict[str, Any]:
    """Whether the captured delivery verifies, and what the receiver would record.

    `public_url`: the configuration's public_webhook_url, from which the receiver
    takes the URL a scheme signs (with the request's own query string), so a
    capture of Twilio's proves without --url as the receiver would verify it."""
    spec = desc.webhooks
    if spec is None:
        return {
            "verified": False,
            "why": "no webhooks configured for this provider, or its webhook secret is not "
            "set (an optional [webhooks] table without its secrets_env/secrets_file is dropped)",
        }
    now = time.time() if at is None else at
    # a scheme signing {url} needs it whole; a token in the query, the request line's
    whole = capture.target and ("://" in capture.target or spec.token_in_url)
    target = url or (capture.target if whole else None)
    if (
        target is None
        and public_url
        and capture.target
        and signs_url(spec.scheme.value, spec.options)
    ):
        path, _, query = capture.target.partition("?")
        scope = {"path": path, "query_string": query.encode("latin-1")}
        target = signed_url(public_url, desc.name, scope)
    adapter = adapter_for(desc)
    try:
        # as the receiver verifies: the adapter's, so a plugin's own verifier too
        verified = adapter.verify_webhook(
            capture.headers,
            capture.body,
            [secret.reveal() for secret in spec.secrets],
            now,
            method=capture.method or "POST",
            url=target,
        )
    except SignatureError as exc:
        if exc.reason in ("stale_timestamp", "future_timestamp"):
            # the signature is checked before the window: this capture is authentic
            return {
                "verified": True,
                "fresh": False,
                "why": f"authentic, but its timestamp is outside the {spec.tolerance_seconds} s "
                "replay window now, so the receiver would refuse it as a replay; pass "
                "--at UNIX_SECONDS (when it was sent) to see what it would record",
            }
        why = _SCHEME_HINTS.get((spec.scheme, exc.reason)) or _HINTS.get(exc.reason, "")
        if why and exc.reason == "bad_signature" and spec.scheme is WebhookScheme.TWILIO:
            why = f"{why} (checked against {_shown(target)})"
        return {"verified": False, "reason": exc.reason, "why": why}
    body = spec.scrub_token(capture.body)  # as the receiver stores and reads it
    # read as the receiver reads it: integers past int()'s digits kept whole,
    # NaN refused; None for a body it stores unread (nested too deeply, not
    # JSON, no object)
    content_type = next(
        (value for name, value in capture.headers.items() if name.lower() == "content-type"), None
    )
    form = spec.scheme is WebhookScheme.TWILIO and twilio.is_form(content_type)
    why = _verifies(adapter, spec)
    # a batch is split before any challenge is looked for, as the receiver does
    elements, document, stored = read_delivery(spec, body, form=form)
    texts = None if elements is None else _cut(spec, body, elements)
    if elements is not None and texts is not None:
        if len(elements) == 1 and spec.challenge is not None:  # Event Grid's validation
            challenged = _challenge(spec, elements[0])
            if challenged is not None:
                return challenged
        return _prove_batch(adapter, spec, capture, elements, texts, why)
    if document is not None and spec.challenge is not None:
        challenged = _challenge(spec, document)
        if challenged is not None:
            return challenged
    # the key the receiver would deduplicate on: a signed id (a signed header,
    # or a field of the signed body), else the body's digest
    dedupe_key = dedupe_id(spec, verified, {} if document is None else document, body)
    report: dict[str, Any] = {
        "verified": True,
        "fresh": True,
        "why": why,
        "event_id": dedupe_key,
        "claimed_event_id": None,
        "event_id_signed": dedupe_key != _digest(body),
    }
    if document is None:
        report["records"] = None
        report["parse_error"] = _UNREAD if spec.events is not None else _UNREAD + _BATCH_HINT
        return report
    try:
        fact = parse_parsed_webhook(adapter, document, stored, capture.headers, capture.query)
    except WebhookParseError as exc:
        report["records"] = None
        report["parse_error"] = str(exc)
        return report
    # the id the configuration points at, when it is not the dedupe key
    if not fact.event_id.startswith("sha256:"):
        report["claimed_event_id"] = fact.event_id
    report["records"] = _recorded(dedupe_key, fact)
    # The receiver tries the references carried in this order; the first that
    # names an operation of this provider wins (what the database holds decides).
    report["match_by"] = [name for name, _ in fact.references]
    return report


def _verifies(adapter: ProviderAdapter, spec: WebhookSpec) -> str:
    """What verified the capture: a plugin's own verifier is named, as it is not the scheme's."""
    if type(adapter).verify_webhook is ProviderAdapter.verify_webhook:
        return f"verifies with the {spec.scheme.value} scheme"
    return f"verifies with the plugin's verify_webhook ({type(adapter).__name__})"


def _digest(data: bytes) -> str:
    """The key the receiver falls back to: the hash of what was signed."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _recorded(event_id: str, fact: WebhookFact) -> dict[str, Any]:
    """The columns the receiver fills from a fact (as the proof has always shown them)."""
    return {
        "event_id": event_id,
        "operation_id": fact.operation_ref,
        "client_reference": fact.client_reference,
        "job_id": fact.remote_job_id,
        "state": fact.remote_state.value if fact.remote_state else None,
        "raw_state": fact.raw_state,
    }


def _cut(spec: WebhookSpec, body: bytes, elements: list[Any]) -> list[bytes] | None:
    """Each element's text as the receiver cuts it; None when it cannot (it then
    stores the body as one unread event, as this proof then reports it)."""
    assert spec.events is not None  # read_delivery found a list where it points
    return element_texts(body, spec.events, len(elements))


def _prove_batch(
    adapter: ProviderAdapter,
    spec: WebhookSpec,
    capture: Capture,
    elements: list[Any],
    texts: list[bytes],
    why: str,
) -> dict[str, Any]:
    """A batch delivery (`[webhooks] events`) as the receiver's `_batch` stores it: each
    element an event of its own, keyed and read from its own text as sent.

    Every element is read (the dedupe summary covers them all); the first
    `BATCH_LISTED` are listed, the rest counted, so a batch of thousands
    (SendGrid's) stays a report one can read."""
    entries = [
        _batch_entry(adapter, spec, capture, element, text)
        for element, text in zip(elements, texts, strict=True)
    ]
    own_ids = sum(1 for entry in entries if entry["event_id_signed"])
    return {
        "verified": True,
        "fresh": True,
        "why": why,
        "events": len(entries),
        # "id": each element's own signed id; "hash": each one's bytes'; "mixed": both
        "deduplicated_by": _deduplicated_by(own_ids, len(entries)),
        "records": entries[:BATCH_LISTED],
        "more": max(0, len(entries) - BATCH_LISTED),
    }


def _deduplicated_by(own_ids: int, events: int) -> str | None:
    """How a batch's elements are keyed: all by their own id, all by their bytes' hash,
    or some each way (an element lacking the id the others carry); None for no elements."""
    if events == 0:
        return None
    if own_ids == events:
        return "id"
    return "hash" if own_ids == 0 else "mixed"


def _batch_entry(
    adapter: ProviderAdapter, spec: WebhookSpec, capture: Capture, element: Any, text: bytes
) -> dict[str, Any]:
    """One element as the receiver's `_element_event` reads it: its key from its own
    signed id or its bytes, its references from its own body paths (header and
    query paths from the request's), a plugin handed the element's text."""
    event_id = element_dedupe_id(spec, element, text)
    signed = event_id != _digest(text)
    try:
        fact = parse_parsed_webhook(
            adapter, element, text, capture.headers, capture.query, event_id
        )
    except WebhookParseError as exc:
        # stored all the same, matched to nothing, so its redeliveries dedupe
        return {"event_id": event_id, "event_id_signed": signed, "parse_error": str(exc)}
    return {
        **_recorded(event_id, fact),
        "event_id_signed": signed,
        "match_by": [name for name, _ in fact.references],
    }


def _shown(url: str | None) -> str:
    """The URL a signature was checked against, without what may be a credential:
    no user:password (Twilio takes basic auth in the URL) and no query."""
    if url is None:
        return "no URL"
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    query = "?…" if parts.query else ""
    return f"{parts.scheme}://{host}{port}{parts.path}{query}"


def _challenge(spec: WebhookSpec, document: Any) -> dict[str, Any] | None:
    """What the receiver does with a verified endpoint challenge: answers it (never
    stores it), or refuses a token it will not echo; None for a delivery that is none."""
    challenge = spec.challenge
    assert challenge is not None
    if as_str(extract(challenge.when, document)) != challenge.equals:
        return None
    kind = challenge.answer.value
    if usable_token(extract(challenge.token, document)) is None:
        return {
            "verified": False,
            "reason": "bad_challenge",
            "why": f"an authentic endpoint challenge ({kind}) whose token at "
            f"{challenge.token.text} is not 1 to 256 printable ASCII characters: the receiver "
            "answers 400 and the sender never enables the endpoint",
        }
    return {
        "verified": True,
        "fresh": True,
        "challenge": kind,
        "why": f"verifies; an endpoint challenge ({kind}): the receiver would answer it 200 "
        "with its token, as the sender expects, and never stored (it is about no job)",
    }


def prove_result(
    desc: ProviderDescription, result: Capture, status: Capture | None
) -> dict[str, Any]:
    """What result validation says of captured result bytes (and the status that led there)."""
    adapter = adapter_for(desc)
    fact = None
    if status is not None:
        fact = adapter.parse_status(_response(status))
    check = adapter.validate_result(_response(result), fact)
    return {
        "valid": check.ok,
        "unavailable": check.unavailable,
        "reason": check.reason,
        "sha256": check.sha256,
        "size": check.size,
        "content_type": check.content_type,
        "items": {
            "total": check.items_total,
            "succeeded": check.items_succeeded,
            "failed": check.items_failed,
        },
        "status_state": fact.remote_state.value if fact and fact.remote_state else None,
    }


def _response(capture: Capture) -> HttpResponse:
    return HttpResponse(capture.status_code or 200, capture.headers, capture.body)
