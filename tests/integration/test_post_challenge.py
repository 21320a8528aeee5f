"""POST challenges: Microsoft Graph's and Azure AI Speech's `?validationToken=`.

Before Microsoft Graph creates a change-notification subscription (and Azure AI
Speech a web hook), it POSTs to the notification URL with a `validationToken`
query parameter and no body, and wants the token back, as text/plain, within
ten seconds; until then it delivers nothing. Graph's token is a sentence
("Validation: Testing client application reachability for subscription
Request-Id: …"). `get_challenge = { param = "validationToken", method = "POST" }`
answers such a POST before reading any body; a POST without the parameter is a
delivery, verified and stored as ever. Before, the POST was read as a
delivery (refused 415 for its text/plain, or 401), so the subscription could
never be made. Everything runs through the real receiver on a loopback socket.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from shared.providers.errors import ConfigError
from shared.providers.guarantees import describe_guarantees
from tests.integration.test_more_official_signers import _providers, _receiver
from tests.integration.test_receiver_support import stored_events

CLIENT_TOKEN = "graph-notification-token-0123456789"
GRAPH_TOML = """
[providers.graph.webhooks]
scheme = "static_header"
secrets_env = "GRAPH_NOTIFICATION_TOKEN"
events = "/value"
event_id = "/subscriptionId"
job_id = "/resourceData/id"
state = "/changeType"
CHALLENGE

[providers.graph.webhooks.options]
query = "token"
"""
POST_CHALLENGE = 'get_challenge = { param = "validationToken", method = "POST" }'
GRAPH_ENV = {"GRAPH_NOTIFICATION_TOKEN": CLIENT_TOKEN}
VALIDATION = (
    "Validation: Testing client application reachability for subscription "
    "Request-Id: 5c2a6df4-1c7f-4a1f-9a4e-2f5d8e7c6b1a"
)
NOTIFICATION = json.dumps(
    {
        "value": [
            {
                "subscriptionId": "sub-7f105c7d-2dc5-4530-97cd-4e7ae6534c07",
                "changeType": "updated",
                "resource": "users/me/messages/AAMk",
                "resourceData": {"id": "AAMkAGUwNjQ4ZjIxAAA="},
            }
        ]
    }
).encode()


def _graph(challenge: str = POST_CHALLENGE) -> dict[str, Any]:
    return _providers("graph", GRAPH_TOML.replace("CHALLENGE", challenge), GRAPH_ENV)


def _rejected(rx: Any, reason: str) -> float:
    labels = {"provider": "graph", "reason": reason}
    return float(rx.metric("jobwarden_webhook_events_rejected_total", labels))


async def test_graph_subscription_validation_is_echoed_then_notifications_stored(
    db: Any, pool: Any
) -> None:
    async with _receiver(pool, _graph()) as rx:
        # Graph keeps the notification URL's own query and adds its token
        check = await rx.client.post(
            "/webhooks/graph",
            params={"token": CLIENT_TOKEN, "validationToken": VALIDATION},
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
        assert await stored_events(db) == []  # a check stores nothing
        delivered = await rx.client.post(
            "/webhooks/graph",
            params={"token": CLIENT_TOKEN},
            content=NOTIFICATION,
            headers={"Content-Type": "application/json"},
        )
        forged = await rx.client.post(
            "/webhooks/graph",
            params={"token": "not-the-token-0123456789abcdef"},
            content=NOTIFICATION.replace(b"updated", b"deleted"),
            headers={"Content-Type": "application/json"},
        )
    assert (check.status_code, check.text) == (200, VALIDATION)
    assert check.headers["content-type"].startswith("text/plain")
    assert check.headers["x-content-type-options"] == "nosniff"
    assert delivered.status_code == 200, delivered.text
    assert forged.status_code == 401
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "AAMkAGUwNjQ4ZjIxAAA="


async def test_a_post_check_carrying_a_body_stores_none_of_it(db: Any, pool: Any) -> None:
    """Whoever adds the parameter gets its value back and nothing else: the body
    beside it is not read, so a forged event rides on no check."""
    async with _receiver(pool, _graph()) as rx:
        answer = await rx.client.post(
            "/webhooks/graph",
            params={"validationToken": "abc123"},
            content=NOTIFICATION,
            headers={"Content-Type": "application/json"},
        )
    assert (answer.status_code, answer.text) == (200, "abc123")
    assert await stored_events(db) == []


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("validationToken=%3Cscript%3E", "bad_challenge"),  # markup
        ("validationToken=a%0Ab", "bad_challenge"),  # a line break
        ("validationToken=caf%C3%A9", "bad_challenge"),  # not ASCII
        ("validationToken=" + "x" * 257, "bad_challenge"),  # too long
        ("validationToken=a&validationToken=b", "bad_challenge"),  # which one: neither
        ("validationToken=", "bad_challenge"),  # empty: nothing to give back
    ],
)
async def test_a_post_check_echoes_only_one_plain_token(
    db: Any, pool: Any, query: str, reason: str
) -> None:
    async with _receiver(pool, _graph()) as rx:
        answer = await rx.client.post(f"/webhooks/graph?{query}")
        assert answer.status_code == 400
        assert "script" not in answer.text and "x" * 257 not in answer.text
        assert _rejected(rx, reason) == 1
    assert await stored_events(db) == []


async def test_a_post_challenge_answers_no_get_and_a_get_challenge_no_post(
    db: Any, pool: Any
) -> None:
    async with _receiver(pool, _graph()) as rx:
        get = await rx.client.get("/webhooks/graph", params={"validationToken": "abc"})
        assert get.status_code == 405
        assert _rejected(rx, "method_not_allowed") == 1
    # the GET kind (Dropbox's) does not answer a POST: it is read as a delivery
    async with _receiver(pool, _graph('get_challenge = "validationToken"')) as rx:
        post = await rx.client.post(
            "/webhooks/graph", params={"validationToken": "abc"}, content=b""
        )
        assert post.status_code == 415  # no JSON: not a check, not stored
        assert "abc" not in post.text
    assert await stored_events(db) == []


async def test_a_post_check_with_a_verify_token_needs_it(db: Any, pool: Any) -> None:
    table = (
        '[providers.graph.webhooks.get_challenge]\nparam = "validationToken"\nmethod = "POST"\n'
        'verify_token = "verify"\nverify_token_env = "GRAPH_VERIFY"\n'
    )
    toml = GRAPH_TOML.replace("CHALLENGE", "") + table
    providers = _providers("graph", toml, {**GRAPH_ENV, "GRAPH_VERIFY": "speech-verify-1"})
    async with _receiver(pool, providers) as rx:
        without = await rx.client.post("/webhooks/graph", params={"validationToken": "t1"})
        wrong = await rx.client.post(
            "/webhooks/graph", params={"validationToken": "t1", "verify": "speech-verify-2"}
        )
        right = await rx.client.post(
            "/webhooks/graph", params={"validationToken": "t1", "verify": "speech-verify-1"}
        )
    assert (without.status_code, wrong.status_code) == (403, 403)
    assert "t1" not in without.text + wrong.text
    assert (right.status_code, right.text) == (200, "t1")
    assert await stored_events(db) == []


@pytest.mark.parametrize("method", ['"PUT"', '"post"', '""', "1"])
def test_a_challenge_method_other_than_get_or_post_is_refused_at_load(method: str) -> None:
    challenge = f'get_challenge = {{ param = "validationToken", method = {method} }}'
    with pytest.raises(ConfigError) as refused:
        _graph(challenge)
    assert "method" in str(refused.value)


def test_providers_check_says_a_post_check_is_echoed() -> None:
    graph = _graph()["graph"]
    [line] = [line for name, _, line in describe_guarantees(graph) if name == "webhooks signed"]
    assert "echoes a POST's ?validationToken= as text/plain (unsigned, its body unread" in line
    assert CLIENT_TOKEN not in line


SPEECH_SECRET = "speech-webhook-secret"
SPEECH_TOML = """
[providers.speech.webhooks]
scheme = "hmac"
options = { signature_header = "X-MicrosoftSpeechServices-Signature", format = "base64" }
secrets_env = "SPEECH_SECRET"
job_id = "/self"
state = "header:X-MicrosoftSpeechServices-Event"
get_challenge = { param = "validationToken", method = "POST" }
[providers.speech.webhooks.state_map]
TranscriptionCompletion = "succeeded"
"""


async def test_azure_speech_web_hook_challenge_then_a_signed_call(db: Any, pool: Any) -> None:
    """Azure AI Speech's web hook (as tests/fixtures_providers/unseen/azure_speech.toml
    describes it): the registration's POST ?validationToken= echoed, then each call
    verified by its base64 HMAC-SHA256 of the body."""
    providers = _providers("speech", SPEECH_TOML, {"SPEECH_SECRET": SPEECH_SECRET})
    body = json.dumps({"self": "https://westus.api.cognitive.microsoft.com/t/42"}).encode()
    signature = base64.b64encode(
        hmac.new(SPEECH_SECRET.encode(), body, hashlib.sha256).digest()
    ).decode()
    async with _receiver(pool, providers) as rx:
        check = await rx.client.post(
            "/webhooks/speech", params={"validationToken": "8c1d2e3f-aa55-4c1e-9d7b-1f2e3d4c5b6a"}
        )
        call = await rx.client.post(
            "/webhooks/speech",
            content=body,
            headers={
                "Content-Type": "application/json",
                "X-MicrosoftSpeechServices-Event": "TranscriptionCompletion",
                "X-MicrosoftSpeechServices-Signature": signature,
            },
        )
    assert (check.status_code, check.text) == (200, "8c1d2e3f-aa55-4c1e-9d7b-1f2e3d4c5b6a")
    assert call.status_code == 200, call.text
    [event] = await stored_events(db)
    assert (event["remote_job_id"], event["remote_state"]) == (
        "https://westus.api.cognitive.microsoft.com/t/42",
        "succeeded",
    )
