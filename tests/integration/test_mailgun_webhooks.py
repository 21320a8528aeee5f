"""Mailgun's deliveries on the real receiver over a socket: the signature in the
body, the signed single-use token the dedupe key. Before `scheme = "mailgun"`,
no scheme could read a signature from the body."""

from __future__ import annotations

import json
from typing import Any

from shared.signatures.mailgun import sign
from tests.integration.test_more_official_signers import REJECTED, _providers, _receiver
from tests.integration.test_receiver_support import JSON_HEADERS, NOW, stored_events

MAILGUN_TOML = """
[providers.mailgun.webhooks]
scheme = "mailgun"
secrets_env = "MAILGUN_WEBHOOK_SIGNING_KEY"
job_id = "/event-data/message/headers/message-id"
state = "/event-data/event"
[providers.mailgun.webhooks.state_map]
delivered = "succeeded"
failed = "failed"
"""
KEY = "mailgun-http-webhook-signing-key"
TOKEN = "a8ce0edb2dd8301dea6c90a6d1b8c6fd4e2d2a5e5f3d5f27d5"


def delivery(event: str, token: str = TOKEN, at: int = NOW, key: str = KEY) -> bytes:
    data = {"event": event, "message": {"headers": {"message-id": "msg-1@example.test"}}}
    return json.dumps({"signature": sign(key, at, token), "event-data": data}).encode()


async def test_a_delivery_is_stored_under_its_signed_token(db: Any, pool: Any) -> None:
    providers = _providers("mailgun", MAILGUN_TOML, {"MAILGUN_WEBHOOK_SIGNING_KEY": KEY})
    async with _receiver(pool, providers) as rx:
        stored = await rx.post(delivery("delivered"), JSON_HEADERS, "mailgun")
        # the signature copied onto other event data: the token was used, nothing read
        copied = await rx.post(delivery("failed"), JSON_HEADERS, "mailgun")
        forged = await rx.post(
            delivery("failed", "fresh-token", key="guess"), JSON_HEADERS, "mailgun"
        )
        stale = await rx.post(
            delivery("failed", "old-token", at=NOW - 301), JSON_HEADERS, "mailgun"
        )
        unsigned = await rx.post(b'{"event-data": {"event": "failed"}}', JSON_HEADERS, "mailgun")
    assert stored.json() == {"status": "stored", "matched": False}
    assert copied.json() == {"status": "duplicate"}
    for refused in (forged, stale):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    assert (unsigned.status_code, unsigned.json()) == (400, REJECTED)
    [event] = await stored_events(db)
    assert (event["event_id"], event["id_signed"]) == (TOKEN, True)
    assert (event["remote_job_id"], event["remote_state"]) == ("msg-1@example.test", "succeeded")
