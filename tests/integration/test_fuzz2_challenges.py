"""The receiver's challenge path (`[webhooks] challenge`), fuzzed through the
real app: hostile challenge bodies, signed and not, for a Zoom-style answer
(under Slack's scheme and under Twilio's, two secrets while one replaces the
other) and a Slack-style echo (under Mailgun's scheme, whose signature rides
in the body).

Properties, over generated input (hypothesis, derandomized):

- never a 500, never an exception out of the app: each answer is one input
  may get (a refusal with its reason, stored/duplicate, or a challenge's
  answer);
- a challenge's answer goes only to a body that verified, and says what was
  asked: the token the body carries, its HMAC under the secret that signed it.

JW_FUZZ_EXAMPLES raises the example count (e.g. 2000 for a long run).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receiver.app import build_app
from shared.signatures import mailgun, twilio
from tests.integration.test_more_official_signers import zoom_headers
from tests.integration.test_receiver_support import NOW, describe, settings_for
from tests.integration.test_webhook_endpoint_fuzz import (
    ALLOWED,
    LogLines,
    asgi_request,
    check_logs,
    logs,  # noqa: F401  (the fixture)
)

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 300
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # one receiver and database per test, on purpose
    ],
)
NEW, OLD = "fuzz2-challenge-secret-new-0123456789", "fuzz2-challenge-secret-old-0123456789"
PUBLIC = "https://hooks.example.test/webhooks/{provider}?tenant=a"
_BASE = """
[providers.NAME]
base_url = "https://api.provider.example.test"
[providers.NAME.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.NAME.status]
path = "/jobs/{job_id}"
state = "/status"
[providers.NAME.status.state_map]
completed = "succeeded"
[providers.NAME.result]
source = "none"
[providers.NAME.webhooks]
secrets_env = ["NEW", "OLD"]
job_id = "/payload/object/uuid"
"""
WEBHOOKS = {
    "zoom": 'scheme = "slack"\nchallenge = "zoom"\n[providers.zoom.webhooks.options]\n'
    'signature_header = "x-zm-signature"\ntimestamp_header = "x-zm-request-timestamp"\n',
    "twiliozoom": 'scheme = "twilio"\nchallenge = "zoom"\n',
    "mailgunslack": 'scheme = "mailgun"\n'
    '[providers.mailgunslack.webhooks.challenge]\nanswer = "slack"\nwhen = "/type"\n'
    'equals = "url_verification"\ntoken = "/challenge"\n',
}


def _providers() -> dict[str, Any]:
    toml = "".join(_BASE.replace("NAME", name) + table for name, table in WEBHOOKS.items())
    return describe(toml, {"NEW": NEW, "OLD": OLD})


@pytest_asyncio.fixture
async def app(pool: Any, db: Any, logs: LogLines) -> AsyncIterator[Any]:  # noqa: F811
    built = build_app(
        settings_for(_providers(), public_webhook_url=PUBLIC), pool, now=lambda: float(NOW)
    )
    async with built.router.lifespan_context(built):
        yield built


# ----------------------------------------------------------------- generation

_PRINTABLE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=20)
_TOKENS = st.one_of(
    _PRINTABLE,
    st.text(max_size=20),
    st.sampled_from(["", " ", "\x00", "\u2028", "a" * 256, "a" * 257, "\ud800x", '"}{', "\\u0000"]),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.none(),
    st.booleans(),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
_EVENTS = st.one_of(
    st.sampled_from(
        [
            "endpoint.url_validation",
            "url_verification",
            "Endpoint.URL_Validation",
            "endpoint.url_validation ",
            "",
            "event",
        ]
    ),
    _TOKENS,
)
_ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-32", "latin-1"])


def _json(document: Any, encoding: str, raw: bool) -> bytes:
    text = json.dumps(document, ensure_ascii=not raw, allow_nan=True)
    return (
        text.encode(encoding, "surrogatepass")
        if encoding != "latin-1"
        else text.encode("latin-1", "backslashreplace")
    )


@st.composite
def challenge_bodies(draw: st.DrawFn, provider: str) -> tuple[dict[str, Any], bytes]:
    # mostly the challenge as documented, so the answer is reached often
    token = draw(st.one_of(_PRINTABLE, _PRINTABLE, _TOKENS))
    right = "url_verification" if provider == "mailgunslack" else "endpoint.url_validation"
    event = right if draw(st.integers(0, 2)) else draw(_EVENTS)
    if provider == "mailgunslack":
        document: dict[str, Any] = {"type": event, "challenge": token}
    else:
        document = {"event": event, "payload": {"plainToken": token}, "event_ts": NOW * 1000}
    extra = draw(
        st.dictionaries(
            st.sampled_from(["payload", "event", "x", "challenge"]), _TOKENS, max_size=2
        )
    )
    if draw(st.booleans()):
        document.update(extra)
    body = _json(document, draw(_ENCODINGS), draw(st.booleans()))
    shape = draw(st.sampled_from(["json"] * 4 + ["duplicate", "long", "truncated", "trailing"]))
    if shape == "duplicate":  # a second `event`/`plainToken` key: the last one counts in json
        body = body[:-1] + b', "event": "endpoint.url_validation", "type": "url_verification"}'
    elif shape == "long":
        body = body.replace(b'"event_ts": ', b'"event_ts": ' + b"9" * 5000 + b"", 1)
    elif shape == "truncated":
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))]
    elif shape == "trailing":
        body += draw(st.sampled_from([b"\x00", b" ", b"\n{}", b"\xff"]))
    return document, body


def _mailgun_body(body: bytes, secret: str) -> bytes:
    """The challenge with Mailgun's signature object put in (the body is what it signs in)."""
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if not isinstance(document, dict):
        return body
    document["signature"] = mailgun.sign(
        secret, NOW, "tok-" + hashlib.sha256(body).hexdigest()[:20]
    )
    return json.dumps(document).encode()


def _headers(provider: str, body: bytes, secret: str, query: bytes) -> list[tuple[bytes, bytes]]:
    if provider == "zoom":
        named = zoom_headers(secret, NOW, body)
    elif provider == "twiliozoom":
        url = PUBLIC.replace("{provider}", provider).partition("?")[0] + "?" + query.decode()
        named = {
            "content-type": "application/json",
            twilio.SIGNATURE_HEADER: twilio.sign(secret, url, body, form=False),
        }
    else:
        named = {"content-type": "application/json"}
    return [(k.lower().encode(), v.encode("latin-1")) for k, v in named.items()]


def _expected_answer(provider: str, body: bytes, secret: str) -> dict[str, Any] | None:
    """What a verified challenge is answered, read from the bytes sent as JSON reads them."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    if provider == "mailgunslack":
        if document.get("type") != "url_verification":
            return None
        token = document.get("challenge")
    else:
        payload = document.get("payload")
        if document.get("event") != "endpoint.url_validation":
            return None
        token = payload.get("plainToken") if isinstance(payload, dict) else None
    if not (
        isinstance(token, str) and 0 < len(token) <= 256 and token.isascii() and token.isprintable()
    ):
        return {"error": "bad_challenge"}
    if provider == "mailgunslack":
        return {"challenge": token}
    digest = hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()
    return {"plainToken": token, "encryptedToken": digest}


# ---------------------------------------------------------------------- tests


@FUZZ
@given(data=st.data())
async def test_a_hostile_challenge_is_answered_only_when_it_verified_never_a_500(
    app: Any,
    logs: LogLines,  # noqa: F811
    data: st.DataObject,
) -> None:
    provider = data.draw(st.sampled_from(sorted(WEBHOOKS)))
    _document, body = data.draw(challenge_bodies(provider))
    secret = data.draw(st.sampled_from([NEW, OLD]))
    signed = data.draw(st.sampled_from(["genuine", "genuine", "wrong_secret", "changed"]))
    query = b"tenant=a"
    if provider == "twiliozoom":  # a JSON body's digest rides in the signed URL
        query += b"&bodySHA256=" + hashlib.sha256(body).hexdigest().encode()
    if provider == "mailgunslack":
        body = _mailgun_body(body, secret if signed != "wrong_secret" else "not-the-secret")
    headers = _headers(provider, body, secret if signed != "wrong_secret" else "not-it", query)
    if signed == "changed":
        if provider == "mailgunslack":  # its signature covers its timestamp and token only
            body = body.replace(b'"timestamp": "', b'"timestamp": "1', 1)
        else:
            body += b" "
    answer = await asgi_request(app, f"/webhooks/{provider}", headers, [body], query=query)
    assert answer.status != 500 and answer.status in ALLOWED, (answer.status, answer.body)
    document = json.loads(answer.body)
    answered = "plainToken" in document or "encryptedToken" in document or "challenge" in document
    if signed != "genuine":
        assert not answered, (provider, signed, body, document)
        assert answer.status in {400, 401}, (answer.status, document)
    else:
        expected = _expected_answer(provider, body, secret)
        if answered:
            assert document == expected, (body, document)
    check_logs(logs, [NEW, OLD])
