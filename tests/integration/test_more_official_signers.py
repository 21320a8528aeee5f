"""Senders the receiver had not met before, configured from the README alone.

Each provider is written as a user would write it (a `[providers.NAME.webhooks]`
table in TOML, nothing else), its deliveries signed as the provider documents
and posted to the real receiver over a loopback socket (uvicorn): accepted
when authentic, refused when the body, the timestamp or the signature is
changed, and, where the scheme signs a timestamp, refused outside the window.

Where the provider publishes code on PyPI, that code has the last word:

- Paddle Billing: `paddle-python-sdk`'s `PaddleSignature.verify` (it only
  verifies; it has no signer), and the vector of its own test suite;
- Square: `squareup`'s `verify_signature` (verifies only);
- Mux: no Python verifier exists (`mux-python` has none); the vector of Mux's
  official Elixir library's documentation is posted as is;
- Zoom and Lemon Squeezy: no official Python code on PyPI; signed by a
  re-implementation written from their documentation (for Zoom, Slack's SDK,
  whose `v0:` base string is byte for byte the one Zoom documents, agrees).

The two official Python packages are not dev dependencies: `squareup` is
31 MB installed for a 40-line helper, and `paddle-python-sdk` installs
top-level `tests` and `examples` packages, names this repository's own
packages hold. The two tests that need them skip when they are absent; every
delivery is also signed by the documentation's recipe here, and those tests
always run.
Twilio and Mailgun have schemes of their own, tested in test_twilio_webhooks.py
and test_mailgun_webhooks.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier

from receiver.app import build_app
from shared.serve import serve_app
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    Running,
    describe,
    settings_for,
    stored_events,
)

REJECTED = {"error": "rejected"}

# Everything but [webhooks] is the smallest provider table that loads.
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
processing = "running"
[providers.NAME.result]
source = "none"
"""


def _providers(name: str, webhooks: str, env: Mapping[str, str]) -> dict[str, Any]:
    return describe(_BASE.replace("NAME", name) + webhooks, env)


@asynccontextmanager
async def _receiver(
    pool: Any, providers: dict[str, Any], *, now: float = NOW, **settings: Any
) -> AsyncIterator[Running]:
    """The real receiver on a loopback socket, its clock fixed at `now`."""
    app = build_app(settings_for(providers, **settings), pool, now=lambda: float(now))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield Running(app, client)


def _refusals(rx: Running, provider: str) -> dict[str, float]:
    reasons = ("bad_signature", "stale_timestamp", "future_timestamp", "malformed_header")
    counts = {
        reason: rx.metric(
            "jobwarden_webhook_events_rejected_total", {"provider": provider, "reason": reason}
        )
        for reason in reasons
    }
    return {reason: count for reason, count in counts.items() if count}


def _hmac_hex(secret: str, content: bytes) -> str:
    return hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()


def _flip(signature: str) -> str:
    """The signature with its middle character changed, still hex or base64 (so
    refused as a wrong signature, not as a malformed one)."""
    middle = len(signature) // 2
    other = "1" if signature[middle] == "0" else "0"
    return signature[:middle] + other + signature[middle + 1 :]


# ------------------------------------------------------------------ Paddle Billing

PADDLE_TOML = """
[providers.paddle.webhooks]
scheme = "hmac"
secrets_env = "PADDLE_WEBHOOK_SECRET"
event_id = "/event_id"
job_id = "/data/id"
state = "/data/status"
tolerance_seconds = 300

[providers.paddle.webhooks.options]
signature_header = "Paddle-Signature"
format = "kv"
kv_separator = ";"
timestamp_key = "ts"
signature_key = "h1"
signed_content = "{timestamp}:{body}"
"""
PADDLE_SECRET = "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I"
PADDLE_BODY = json.dumps(
    {
        "event_id": "evt_01hv8x2acma2gz3he1ac4r5fba",
        "event_type": "transaction.completed",
        "occurred_at": "2027-01-15T08:00:00.000000Z",
        "notification_id": "ntf_01hv8x2af8mt1fj4k6gxyyjjfw",
        "data": {"id": "txn_01hv8wptq8987qeep44cyrewp9", "status": "completed"},
    }
).encode()


def paddle_signature(secret: str, timestamp: int, body: bytes) -> str:
    """Paddle's documented recipe: HMAC-SHA256 of `{ts}:{body}`, hex, as `ts=…;h1=…`."""
    return f"ts={timestamp};h1={_hmac_hex(secret, str(timestamp).encode() + b':' + body)}"


def _paddle_cases() -> list[tuple[str, bytes, str, int, str | None]]:
    """(what, body, header, status, refusal reason) for every case posted."""
    good = paddle_signature(PADDLE_SECRET, NOW, PADDLE_BODY)
    ts, h1 = good.split(";")
    changed = PADDLE_BODY.replace(b"completed", b"completes", 1)
    return [
        ("authentic", PADDLE_BODY, good, 200, None),
        ("body changed", changed, good, 401, "bad_signature"),
        ("timestamp changed", PADDLE_BODY, f"ts={NOW + 1};{h1}", 401, "bad_signature"),
        ("signature changed", PADDLE_BODY, f"{ts};{_flip(h1)}", 401, "bad_signature"),
        (
            "stale",
            PADDLE_BODY,
            paddle_signature(PADDLE_SECRET, NOW - 301, PADDLE_BODY),
            401,
            "stale_timestamp",
        ),
        (
            "future",
            PADDLE_BODY,
            paddle_signature(PADDLE_SECRET, NOW + 301, PADDLE_BODY),
            401,
            "future_timestamp",
        ),
    ]


async def test_paddle_billing_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("paddle", PADDLE_TOML, {"PADDLE_WEBHOOK_SECRET": PADDLE_SECRET})
    answers = []
    async with _receiver(pool, providers) as rx:
        for what, body, header, _, _ in _paddle_cases():
            headers = {**JSON_HEADERS, "Paddle-Signature": header}
            answers.append((what, await rx.post(body, headers, "paddle")))
        good = _paddle_cases()[0]
        again = await rx.post(good[1], {**JSON_HEADERS, "Paddle-Signature": good[2]}, "paddle")
        refusals = _refusals(rx, "paddle")
    for (what, response), (_, _, _, status, _) in zip(answers, _paddle_cases(), strict=True):
        assert response.status_code == status, what
        if status == 401:
            assert response.json() == REJECTED, what
    assert again.json() == {"status": "duplicate"}
    assert refusals == {"bad_signature": 3, "stale_timestamp": 1, "future_timestamp": 1}
    [event] = await stored_events(db)
    assert event["event_id"] == "evt_01hv8x2acma2gz3he1ac4r5fba"
    assert (event["remote_job_id"], event["remote_state"]) == (
        "txn_01hv8wptq8987qeep44cyrewp9",
        "succeeded",
    )


async def test_paddles_own_sdk_vector_over_the_wire(db: Any, pool: Any) -> None:
    """The delivery paddle-python-sdk's test suite verifies (its secret, header and
    body `hello-world`), posted at its own time: authentic, so stored unread."""
    secret = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"
    header = "ts=1696195954;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
    providers = _providers("paddle", PADDLE_TOML, {"PADDLE_WEBHOOK_SECRET": secret})
    async with _receiver(pool, providers, now=1696195954) as rx:
        response = await rx.post(
            b"hello-world", {**JSON_HEADERS, "Paddle-Signature": header}, "paddle"
        )
    assert (response.status_code, response.json()) == (200, {"status": "stored", "matched": False})
    assert len(await stored_events(db)) == 1


def test_paddles_official_verifier_agrees_with_every_case() -> None:
    signature_module = pytest.importorskip("paddle_billing.Notifications.PaddleSignature")
    secret_module = pytest.importorskip("paddle_billing.Notifications.Secret")
    verifier = signature_module.PaddleSignature()
    secret = secret_module.Secret(PADDLE_SECRET)
    for what, body, header, status, reason in _paddle_cases():
        # Paddle's signature check has no clock (its Verifier adds one): a stale
        # or future delivery is authentic to it.
        authentic = status == 200 or reason in ("stale_timestamp", "future_timestamp")
        assert verifier.verify(header, body.decode(), secret) is authentic, what


# ---------------------------------------------------------------------------- Zoom

ZOOM_TOML = """
[providers.zoom.webhooks]
scheme = "slack"
secrets_env = "ZOOM_WEBHOOK_SECRET_TOKEN"
job_id = "/payload/object/uuid"
state = "/payload/object/status"

[providers.zoom.webhooks.options]
signature_header = "x-zm-signature"
timestamp_header = "x-zm-request-timestamp"
"""
ZOOM_SECRET = "zoom-secret-token-0123456789abcdef"
ZOOM_BODY = json.dumps(
    {
        "event": "recording.completed",
        "event_ts": NOW * 1000,
        "payload": {
            "account_id": "AAAAAABBBB",
            "object": {"uuid": "4444AAAiAAAAAiAiAiiAii==", "status": "completed"},
        },
    }
).encode()


def zoom_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Zoom's documented recipe: `v0=` + hex HMAC-SHA256 of `v0:{ts}:{body}`."""
    signature = "v0=" + _hmac_hex(secret, b"v0:" + str(timestamp).encode() + b":" + body)
    return {**JSON_HEADERS, "x-zm-signature": signature, "x-zm-request-timestamp": str(timestamp)}


async def test_zoom_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("zoom", ZOOM_TOML, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    good = zoom_headers(ZOOM_SECRET, NOW, ZOOM_BODY)
    # Slack's SDK computes the very string Zoom documents
    same = SignatureVerifier(ZOOM_SECRET).generate_signature(timestamp=str(NOW), body=ZOOM_BODY)
    assert same == good["x-zm-signature"]
    async with _receiver(pool, providers) as rx:
        accepted = await rx.post(ZOOM_BODY, good, "zoom")
        again = await rx.post(ZOOM_BODY, good, "zoom")
        body_changed = await rx.post(ZOOM_BODY.replace(b"AAAAAABBBB", b"AAAAAABBBC"), good, "zoom")
        time_changed = await rx.post(
            ZOOM_BODY, {**good, "x-zm-request-timestamp": str(NOW - 1)}, "zoom"
        )
        signature_changed = await rx.post(
            ZOOM_BODY, {**good, "x-zm-signature": _flip(good["x-zm-signature"])}, "zoom"
        )
        stale = await rx.post(ZOOM_BODY, zoom_headers(ZOOM_SECRET, NOW - 301, ZOOM_BODY), "zoom")
        future = await rx.post(ZOOM_BODY, zoom_headers(ZOOM_SECRET, NOW + 301, ZOOM_BODY), "zoom")
        edge = await rx.post(ZOOM_BODY, zoom_headers(ZOOM_SECRET, NOW - 300, ZOOM_BODY), "zoom")
        refusals = _refusals(rx, "zoom")
    assert accepted.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    for refused in (body_changed, time_changed, signature_changed, stale, future):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    # the same body at another (signed) time is another delivery, and a duplicate
    assert edge.json() == {"status": "duplicate"}
    assert refusals == {"bad_signature": 3, "stale_timestamp": 1, "future_timestamp": 1}
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:")  # Zoom's body carries no event id
    assert event["remote_job_id"] == "4444AAAiAAAAAiAiAiiAii=="


# -------------------------------------------------------------------- Lemon Squeezy

LEMON_TOML = """
[providers.lemonsqueezy.webhooks]
scheme = "hmac"
secrets_env = "LEMONSQUEEZY_SIGNING_SECRET"
job_id = "/data/id"
state = "/data/attributes/status"

[providers.lemonsqueezy.webhooks.options]
signature_header = "X-Signature"

[providers.lemonsqueezy.webhooks.state_map]
paid = "succeeded"
"""
LEMON_SECRET = "lemon-signing-secret"
LEMON_BODY = json.dumps(
    {
        "meta": {"event_name": "order_created", "custom_data": {"op": "op_1"}},
        "data": {"type": "orders", "id": "1", "attributes": {"status": "paid"}},
    }
).encode()


def lemon_headers(secret: str, body: bytes) -> dict[str, str]:
    """Lemon Squeezy's documented recipe: the hex HMAC-SHA256 of the raw body."""
    return {**JSON_HEADERS, "X-Event-Name": "order_created", "X-Signature": _hmac_hex(secret, body)}


async def test_lemon_squeezy_signatures_over_the_wire(db: Any, pool: Any) -> None:
    """No timestamp is signed, so there is no window: a replay is only ever a
    duplicate of the body it copies."""
    providers = _providers(
        "lemonsqueezy", LEMON_TOML, {"LEMONSQUEEZY_SIGNING_SECRET": LEMON_SECRET}
    )
    good = lemon_headers(LEMON_SECRET, LEMON_BODY)
    async with _receiver(pool, providers) as rx:
        accepted = await rx.post(LEMON_BODY, good, "lemonsqueezy")
        body_changed = await rx.post(LEMON_BODY.replace(b"paid", b"void"), good, "lemonsqueezy")
        signature_changed = await rx.post(
            LEMON_BODY, {**good, "X-Signature": _flip(good["X-Signature"])}, "lemonsqueezy"
        )
        wrong_secret = await rx.post(
            LEMON_BODY, lemon_headers("a-guess", LEMON_BODY), "lemonsqueezy"
        )
        replayed = await rx.post(LEMON_BODY, good, "lemonsqueezy")
        refusals = _refusals(rx, "lemonsqueezy")
    assert accepted.json() == {"status": "stored", "matched": False}
    for refused in (body_changed, signature_changed, wrong_secret):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    assert replayed.json() == {"status": "duplicate"}
    assert refusals == {"bad_signature": 3}
    [event] = await stored_events(db)
    assert (event["remote_job_id"], event["remote_state"]) == ("1", "succeeded")


# -------------------------------------------------------------------------- Square

SQUARE_TOML = """
[providers.square.webhooks]
scheme = "hmac"
secrets_env = "SQUARE_WEBHOOK_SIGNATURE_KEY"
event_id = "/event_id"
job_id = "/data/id"
state = "/data/object/payment/status"

[providers.square.webhooks.options]
signature_header = "x-square-hmacsha256-signature"
format = "base64"
signed_content = "{url}{body}"

[providers.square.webhooks.state_map]
COMPLETED = "succeeded"
"""
SQUARE_KEY = "asdf1234asdf1234asdf12"
# public_webhook_url as the operator sets it, and so the notification URL
# registered with Square
SQUARE_PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
SQUARE_URL = "https://hooks.example.test/jobwarden/webhooks/square"
SQUARE_BODY = json.dumps(
    {
        "merchant_id": "6SSW7HV8K2ST5",
        "type": "payment.updated",
        "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
        "created_at": "2027-01-15T08:00:00Z",
        "data": {
            "type": "payment",
            "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY",
            "object": {"payment": {"id": "KkAkhdMsgzn59SM8A89WgKwekxLZY", "status": "COMPLETED"}},
        },
    }
).encode()


def square_headers(key: str, url: str, body: bytes) -> dict[str, str]:
    """Square's documented recipe: base64 HMAC-SHA256 of notification URL + body."""
    mac = hmac.new(key.encode(), url.encode() + body, hashlib.sha256).digest()
    return {**JSON_HEADERS, "x-square-hmacsha256-signature": base64.b64encode(mac).decode()}


def _square_cases() -> list[tuple[str, bytes, dict[str, str], int]]:
    good = square_headers(SQUARE_KEY, SQUARE_URL, SQUARE_BODY)
    header = good["x-square-hmacsha256-signature"]
    return [
        ("authentic", SQUARE_BODY, good, 200),
        ("body changed", SQUARE_BODY.replace(b"COMPLETED", b"FAILED"), good, 401),
        (
            "signature changed",
            SQUARE_BODY,
            {**good, "x-square-hmacsha256-signature": _flip(header)},
            401,
        ),
        (
            "signed for the staging endpoint",
            SQUARE_BODY,
            square_headers(SQUARE_KEY, SQUARE_URL.replace("hooks.", "staging-hooks."), SQUARE_BODY),
            401,
        ),
    ]


async def test_square_signatures_over_the_wire(db: Any, pool: Any) -> None:
    """Square signs the notification URL: the receiver must know it as Square
    addressed it (public_webhook_url), never from the Host header."""
    providers = _providers("square", SQUARE_TOML, {"SQUARE_WEBHOOK_SIGNATURE_KEY": SQUARE_KEY})
    answers = []
    async with _receiver(pool, providers, public_webhook_url=SQUARE_PUBLIC) as rx:
        for what, body, headers, _ in _square_cases():
            answers.append((what, await rx.post(body, headers, "square")))
        again = await rx.post(SQUARE_BODY, _square_cases()[0][2], "square")
        refusals = _refusals(rx, "square")
    for (what, response), (_, _, _, status) in zip(answers, _square_cases(), strict=True):
        assert response.status_code == status, what
    assert again.json() == {"status": "duplicate"}
    assert refusals == {"bad_signature": 3}
    [event] = await stored_events(db)
    assert event["event_id"] == "13b867cf-db3d-4b1c-90b6-2f32a9d78124"
    assert (event["remote_job_id"], event["remote_state"]) == (
        "KkAkhdMsgzn59SM8A89WgKwekxLZY",
        "succeeded",
    )


def test_squares_official_helper_agrees_with_every_case() -> None:
    helper = pytest.importorskip("square.utils.webhooks_helper")
    for what, body, headers, status in _square_cases():
        official = helper.verify_signature(
            request_body=body.decode(),
            signature_header=headers["x-square-hmacsha256-signature"],
            signature_key=SQUARE_KEY,
            notification_url=SQUARE_URL,
        )
        assert official is (status == 200), what


# ----------------------------------------------------------------------------- Mux

MUX_TOML = """
[providers.mux.webhooks]
scheme = "stripe"
secrets_env = "MUX_WEBHOOK_SECRET"
job_id = "/data/id"
state = "/data/status"

[providers.mux.webhooks.options]
signature_header = "Mux-Signature"

[providers.mux.webhooks.state_map]
ready = "succeeded"
"""
MUX_SECRET = "mux-signing-secret"
MUX_BODY = json.dumps(
    {
        "type": "video.asset.ready",
        "id": "3a56ac3d-33da-4366-855b-f592d898409d",
        "data": {"id": "0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002", "status": "ready"},
    }
).encode()


def mux_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Mux's documented recipe: `t=…,v1=` + hex HMAC-SHA256 of `{t}.{body}`."""
    v1 = _hmac_hex(secret, str(timestamp).encode() + b"." + body)
    return {**JSON_HEADERS, "Mux-Signature": f"t={timestamp},v1={v1}"}


async def test_mux_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("mux", MUX_TOML, {"MUX_WEBHOOK_SECRET": MUX_SECRET})
    good = mux_headers(MUX_SECRET, NOW, MUX_BODY)
    stamp, v1 = good["Mux-Signature"].split(",")
    async with _receiver(pool, providers) as rx:
        accepted = await rx.post(MUX_BODY, good, "mux")
        again = await rx.post(MUX_BODY, good, "mux")
        body_changed = await rx.post(MUX_BODY.replace(b"ready", b"error"), good, "mux")
        time_changed = await rx.post(
            MUX_BODY, {**good, "Mux-Signature": f"t={NOW + 1},{v1}"}, "mux"
        )
        signature_changed = await rx.post(
            MUX_BODY, {**good, "Mux-Signature": f"{stamp},{_flip(v1)}"}, "mux"
        )
        stale = await rx.post(MUX_BODY, mux_headers(MUX_SECRET, NOW - 301, MUX_BODY), "mux")
        future = await rx.post(MUX_BODY, mux_headers(MUX_SECRET, NOW + 301, MUX_BODY), "mux")
        refusals = _refusals(rx, "mux")
    assert accepted.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    for refused in (body_changed, time_changed, signature_changed, stale, future):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    assert refusals == {"bad_signature": 3, "stale_timestamp": 1, "future_timestamp": 1}
    [event] = await stored_events(db)
    assert event["event_id"] == "3a56ac3d-33da-4366-855b-f592d898409d"  # Mux's event id
    assert (event["remote_job_id"], event["remote_state"]) == (
        "0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002",
        "succeeded",
    )


async def test_muxs_own_documented_vector_over_the_wire(db: Any, pool: Any) -> None:
    """The example of Mux's official Elixir library (`Mux.Webhooks.TestUtils`):
    body `payload`, secret `SuperSecret123`, at its own time."""
    header = "t=1591664030,v1=e43496b6aae982c4c2fd6f8e92935f1d90216f1f64d56024e72390acfb988272"
    providers = _providers("mux", MUX_TOML, {"MUX_WEBHOOK_SECRET": "SuperSecret123"})
    async with _receiver(pool, providers, now=1591664030) as rx:
        response = await rx.post(b"payload", {**JSON_HEADERS, "Mux-Signature": header}, "mux")
        later = await rx.post(b"payload", {**JSON_HEADERS, "Mux-Signature": header}, "mux")
    assert (response.status_code, response.json()) == (200, {"status": "stored", "matched": False})
    assert later.json() == {"status": "duplicate"}
