"""A sender's endpoint challenge, answered by the real receiver over a socket.

Zoom enables an endpoint only once it answers `endpoint.url_validation` (and
asks again every 72 hours): the challenge's `plainToken` back, with its
HMAC-SHA256 under the app's secret token. Slack's Events API asks for its
`challenge` echoed. The challenge is signed like any delivery and verified
first; it is answered, never stored. Before `[webhooks] challenge`, the
receiver stored it as an event and answered `{"status": "stored"}`, so Zoom
never enabled the endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from slack_sdk.signature import SignatureVerifier

from shared.providers.errors import ConfigError
from tests.integration.test_more_official_signers import (
    REJECTED,
    ZOOM_BODY,
    ZOOM_SECRET,
    _providers,
    _receiver,
    zoom_headers,
)
from tests.integration.test_receiver_support import JSON_HEADERS, NOW, stored_events

ZOOM_CHALLENGED = """
[providers.zoom.webhooks]
scheme = "slack"
secrets_env = "ZOOM_WEBHOOK_SECRET_TOKEN"
job_id = "/payload/object/uuid"
challenge = "zoom"
[providers.zoom.webhooks.options]
signature_header = "x-zm-signature"
timestamp_header = "x-zm-request-timestamp"
"""
PLAIN_TOKEN = "qgg8vlvZRS6UYooatFL8Aw"


def validation(token: Any = PLAIN_TOKEN) -> bytes:
    """Zoom's documented endpoint.url_validation request body."""
    body = {
        "payload": {"plainToken": token},
        "event_ts": NOW * 1000,
        "event": "endpoint.url_validation",
    }
    return json.dumps(body).encode()


def zoom_answer(secret: str, token: str) -> dict[str, str]:
    digest = hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()
    return {"plainToken": token, "encryptedToken": digest}


async def test_zooms_url_validation_is_answered_and_not_stored(db: Any, pool: Any) -> None:
    providers = _providers("zoom", ZOOM_CHALLENGED, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    body = validation()
    async with _receiver(pool, providers) as rx:
        answered = await rx.post(body, zoom_headers(ZOOM_SECRET, NOW, body), "zoom")
        # asked again (every 72 hours): answered again, never a duplicate
        again = await rx.post(body, zoom_headers(ZOOM_SECRET, NOW, body), "zoom")
        event = await rx.post(ZOOM_BODY, zoom_headers(ZOOM_SECRET, NOW, ZOOM_BODY), "zoom")
    for answer in (answered, again):
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == zoom_answer(ZOOM_SECRET, PLAIN_TOKEN)
    assert event.json() == {"status": "stored", "matched": False}
    [stored] = await stored_events(db)  # the event, not the challenge
    assert stored["remote_job_id"] == "4444AAAiAAAAAiAiAiiAii=="


async def test_a_challenge_that_does_not_verify_gets_no_answer(db: Any, pool: Any) -> None:
    providers = _providers("zoom", ZOOM_CHALLENGED, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    body = validation()
    async with _receiver(pool, providers) as rx:
        forged = await rx.post(body, zoom_headers("not-the-secret", NOW, body), "zoom")
        stale = await rx.post(body, zoom_headers(ZOOM_SECRET, NOW - 301, body), "zoom")
        unsigned = await rx.post(body, JSON_HEADERS, "zoom")
    for refused in (forged, stale):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    assert (unsigned.status_code, unsigned.json()) == (400, REJECTED)  # missing_header
    assert await stored_events(db) == []


async def test_the_answer_uses_the_secret_that_verified_the_challenge(pool: Any) -> None:
    """Two secret tokens while one replaces the other: the challenge is answered
    with the HMAC of the one it was signed with."""
    old, new = ZOOM_SECRET, "zoom-secret-token-fedcba9876543210"
    rotating = ZOOM_CHALLENGED.replace(
        'secrets_env = "ZOOM_WEBHOOK_SECRET_TOKEN"',
        'secrets_env = ["ZOOM_WEBHOOK_SECRET_TOKEN", "ZOOM_WEBHOOK_SECRET_TOKEN_OLD"]',
    )
    env = {"ZOOM_WEBHOOK_SECRET_TOKEN": new, "ZOOM_WEBHOOK_SECRET_TOKEN_OLD": old}
    providers = _providers("zoom", rotating, env)
    body = validation()
    async with _receiver(pool, providers) as rx:
        by_old = await rx.post(body, zoom_headers(old, NOW, body), "zoom")
        by_new = await rx.post(body, zoom_headers(new, NOW, body), "zoom")
    assert by_old.json() == zoom_answer(old, PLAIN_TOKEN)
    assert by_new.json() == zoom_answer(new, PLAIN_TOKEN)


@pytest.mark.parametrize("token", ["", "x" * 257, 42, None, {"a": 1}, "line\nbreak", "é"])
async def test_a_challenge_whose_token_we_would_not_echo_is_refused(
    db: Any, pool: Any, token: Any
) -> None:
    providers = _providers("zoom", ZOOM_CHALLENGED, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    body = validation(token)
    async with _receiver(pool, providers) as rx:
        refused = await rx.post(body, zoom_headers(ZOOM_SECRET, NOW, body), "zoom")
    assert (refused.status_code, refused.json()) == (400, {"error": "bad_challenge"})
    assert await stored_events(db) == []


async def test_without_challenge_a_validation_is_an_event_as_before(db: Any, pool: Any) -> None:
    plain = ZOOM_CHALLENGED.replace('challenge = "zoom"\n', "")
    providers = _providers("zoom", plain, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    body = validation()
    async with _receiver(pool, providers) as rx:
        stored = await rx.post(body, zoom_headers(ZOOM_SECRET, NOW, body), "zoom")
    assert stored.json() == {"status": "stored", "matched": False}
    assert len(await stored_events(db)) == 1


SLACK_CHALLENGED = """
[providers.slack.webhooks]
scheme = "slack"
secrets_env = "SLACK_SIGNING_SECRET"
event_id = "/event_id"
job_id = "/event/job"
challenge = "slack"
"""
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


async def test_slacks_url_verification_is_echoed(db: Any, pool: Any) -> None:
    """Signed by Slack's own SDK, as Slack signs it."""
    providers = _providers("slack", SLACK_CHALLENGED, {"SLACK_SIGNING_SECRET": SLACK_SECRET})
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps(
        {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": challenge, "type": "url_verification"}
    ).encode()
    signer = SignatureVerifier(SLACK_SECRET)
    headers = {
        **JSON_HEADERS,
        "X-Slack-Request-Timestamp": str(NOW),
        "X-Slack-Signature": signer.generate_signature(timestamp=str(NOW), body=body),
    }
    async with _receiver(pool, providers) as rx:
        answered = await rx.post(body, headers, "slack")
    assert answered.json() == {"challenge": challenge}
    assert await stored_events(db) == []


@pytest.mark.parametrize(
    ("challenge", "problem"),
    [
        ('"teams"', "challenge"),
        ('{ answer = "zoom", token = "header:X-Token" }', "token"),
        ('{ answer = "zoom", extra = 1 }', "extra"),
        ('{ when = "/event" }', "answer"),
    ],
)
def test_a_challenge_the_receiver_cannot_answer_is_refused_at_load(
    challenge: str, problem: str
) -> None:
    toml = ZOOM_CHALLENGED.replace('challenge = "zoom"', f"challenge = {challenge}")
    with pytest.raises(ConfigError) as refused:
        _providers("zoom", toml, {"ZOOM_WEBHOOK_SECRET_TOKEN": ZOOM_SECRET})
    assert problem in str(refused.value)


def test_zoom_answers_need_a_secret_that_is_text() -> None:
    """An Ed25519 public key (asymmetric) is no HMAC key: Zoom's answer cannot be made."""
    toml = """
[providers.zoom.webhooks]
scheme = "standard_webhooks"
secrets_env = "ZOOM_WEBHOOK_SECRET_TOKEN"
job_id = "/payload/object/uuid"
challenge = "zoom"
"""
    with pytest.raises(ConfigError) as refused:
        _providers(
            "zoom",
            toml,
            {"ZOOM_WEBHOOK_SECRET_TOKEN": "whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQQ=="},
        )
    assert "challenge" in str(refused.value)
