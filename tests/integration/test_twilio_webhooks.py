"""Twilio's callbacks on the real receiver over a socket: form bodies signed with
`X-Twilio-Signature` by Twilio's own `RequestValidator`, JSON bodies signed
through their digest in the URL. Before `scheme = "twilio"`, a form body was
refused 415 before any verifier ran, and no scheme could express Twilio's
signature."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlencode

from twilio.request_validator import RequestValidator

from tests.integration.test_more_official_signers import REJECTED, _providers, _receiver
from tests.integration.test_receiver_support import stored_events

TWILIO_TOML = """
[providers.twilio.webhooks]
scheme = "twilio"
secrets_env = "TWILIO_AUTH_TOKEN"
job_id = "/RecordingSid"
state = "/RecordingStatus"
[providers.twilio.webhooks.state_map]
completed = "succeeded"
absent = "failed"
"""
TOKEN = "twilio-auth-token-0123456789abcdef"
PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
URL = "https://hooks.example.test/jobwarden/webhooks/twilio"
FIELDS = {
    "AccountSid": "AC0123",
    "CallSid": "CA0123",
    "RecordingSid": "RE0123456789",
    "RecordingStatus": "completed",
    "RecordingUrl": "https://api.twilio.com/2010-04-01/Accounts/AC0123/Recordings/RE0123456789",
    "RecordingDuration": "42",
}
FORM = "application/x-www-form-urlencoded"


def form_delivery(fields: dict[str, str], url: str = URL) -> tuple[bytes, dict[str, str]]:
    body = urlencode(fields).encode()
    signature = RequestValidator(TOKEN).compute_signature(url, fields)
    return body, {"content-type": FORM, "X-Twilio-Signature": signature}


async def test_a_form_callback_is_verified_read_and_stored_as_json(db: Any, pool: Any) -> None:
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TOKEN})
    body, headers = form_delivery(FIELDS)
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        stored = await rx.post(body, headers, "twilio")
        again = await rx.post(body, headers, "twilio")  # Twilio retries the same request
        changed = await rx.post(
            urlencode({**FIELDS, "RecordingStatus": "absent"}).encode(), headers, "twilio"
        )
        elsewhere = await rx.post(*form_delivery(FIELDS, URL + "-staging"), "twilio")
    assert stored.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    for refused in (changed, elsewhere):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    [event] = await stored_events(db)
    assert (event["remote_job_id"], event["remote_state"]) == ("RE0123456789", "succeeded")
    assert event["payload"] == FIELDS  # the fields as one JSON object
    assert event["signature_scheme"] == "twilio" and event["id_signed"]
    assert event["event_id"].startswith("twilio:")


async def test_a_json_callback_is_signed_through_its_digest(db: Any, pool: Any) -> None:
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TOKEN})
    body = json.dumps({"RecordingSid": "RE9", "RecordingStatus": "completed"}).encode()
    query = f"?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(TOKEN).compute_signature(URL + query, {})
    headers = {"content-type": "application/json", "X-Twilio-Signature": signature}
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        stored = await rx.post(body, headers, "twilio", query=query)
        tampered = await rx.post(body.replace(b"RE9", b"RE8"), headers, "twilio", query=query)
        undigested = await rx.post(body, headers, "twilio")
    assert stored.json() == {"status": "stored", "matched": False}
    for refused in (tampered, undigested):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "RE9"


async def test_a_form_is_still_refused_for_a_scheme_that_signs_bytes(db: Any, pool: Any) -> None:
    """Only Twilio's scheme reads a form: elsewhere its fields are no JSON body."""
    toml = TWILIO_TOML.replace('scheme = "twilio"', 'scheme = "github"')
    providers = _providers("twilio", toml, {"TWILIO_AUTH_TOKEN": TOKEN})
    body, headers = form_delivery(FIELDS)
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        refused = await rx.post(body, headers, "twilio")
    assert refused.status_code == 415
    assert await stored_events(db) == []


async def test_a_public_url_with_a_query_of_its_own_is_signed_as_twilio_was_given_it(
    db: Any, pool: Any
) -> None:
    """public_webhook_url `…/{provider}?src=jw`: Twilio signs the URL it was given,
    query included, and calls it; the URL checked was that query twice
    (`?src=jw?src=jw`), so every callback was refused."""
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TOKEN})
    given = URL + "?src=jw"
    body, headers = form_delivery(FIELDS, given)
    async with _receiver(pool, providers, public_webhook_url=PUBLIC + "?src=jw") as rx:
        stored = await rx.post(body, headers, "twilio", query="?src=jw")
    assert stored.json() == {"status": "stored", "matched": False}
