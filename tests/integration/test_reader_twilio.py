"""A second read of Twilio's callbacks on the real receiver over a socket: what a
holder of one captured delivery can make the receiver store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import pytest
from twilio.request_validator import RequestValidator

from shared.providers.adapter import ProviderAdapter
from shared.signatures import SignatureError, Verified
from tests.integration.test_more_official_signers import _BASE, REJECTED, _providers, _receiver
from tests.integration.test_receiver_support import describe, stored_events
from tests.integration.test_twilio_webhooks import (
    FIELDS,
    FORM,
    PUBLIC,
    TOKEN,
    TWILIO_TOML,
    URL,
    form_delivery,
)


async def test_a_json_delivery_sent_again_as_an_empty_form_is_refused(db: Any, pool: Any) -> None:
    """Its signature covers the URL alone; as a form with no field the signed text
    was that URL, so it verified and `{}` was stored, each spelling of "no field"
    (``, `&`, `&&`...) a new event."""
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TOKEN})
    body = json.dumps({"RecordingSid": "RE9", "RecordingStatus": "completed"}).encode()
    query = f"?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(TOKEN).compute_signature(URL + query, {})
    headers = {"content-type": "application/json", "X-Twilio-Signature": signature}
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        stored = await rx.post(body, headers, "twilio", query=query)
        as_forms = [
            await rx.post(empty, {**headers, "content-type": FORM}, "twilio", query=query)
            for empty in (b"", b"&", b"&&")
        ]
    assert stored.json() == {"status": "stored", "matched": False}
    for refused in as_forms:
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "RE9"


async def test_a_captured_form_sent_again_in_another_spelling_is_a_duplicate(
    db: Any, pool: Any
) -> None:
    """Twilio signs the sorted set of fields, not the bytes: the same fields in
    another order, `%20` for `+`, a stray `&`, a field sent twice all verify.
    The dedupe key was the raw body's hash, so each was stored as a new event
    (the module docstring: 'Dedupe ids are always ones the signature covers')."""
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TOKEN})
    fields = {**FIELDS, "CallerName": "Ada Lovelace"}
    body, headers = form_delivery(fields)
    respelled = [
        urlencode(dict(reversed(list(fields.items())))).encode(),
        body.replace(b"+", b"%20"),
        body + b"&",
        body + b"&RecordingSid=RE0123456789",
    ]
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        first = await rx.post(body, headers, "twilio")
        again = [await rx.post(sent, headers, "twilio") for sent in respelled]
    assert first.json() == {"status": "stored", "matched": False}
    assert [answer.json() for answer in again] == [{"status": "duplicate"}] * len(respelled)
    assert len(await stored_events(db)) == 1


class TrustingFormPlugin(ProviderAdapter):
    """A plugin on `scheme = "twilio"` with a verifier of its own (here: a header),
    as `[providers.X] plugin` allows: the receiver then reads the form itself."""

    def verify_webhook(
        self,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Sequence[str],
        now: float,
        *,
        method: str | None = None,
        url: str | None = None,
    ) -> Verified:
        if {k.lower(): v for k, v in headers.items()}.get("x-plugin-proof") != secrets[0]:
            raise SignatureError("bad_signature")
        return Verified(scheme="plugin", event_id=None, id_signed=False, timestamp=None)


@pytest.mark.parametrize(
    "body", [b"RecordingSid=%FF%FE", b"RecordingSid=\xff", b"&".join([b"k=v"] * 1001)]
)
async def test_an_authentic_form_read_by_no_field_is_stored_unread_not_a_500(
    db: Any, pool: Any, body: bytes
) -> None:
    plugin = f'plugin = "{__name__}:TrustingFormPlugin"\nbase_url'
    toml = _BASE.replace("NAME", "twilio").replace("base_url", plugin, 1) + TWILIO_TOML
    providers = describe(toml, {"TWILIO_AUTH_TOKEN": TOKEN})
    headers = {"content-type": FORM, "x-plugin-proof": TOKEN}
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        answer = await rx.post(body, headers, "twilio")
    assert (answer.status_code, answer.headers["content-type"]) == (200, "application/json")
    assert answer.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert event["remote_job_id"] is None
