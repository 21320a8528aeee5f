"""Standard Webhooks and Svix-branded senders, against their official libraries.

The `standardwebhooks` and `svix` packages sign with `whsec_` secrets decoded
from base64; Svix sends `svix-id` / `svix-timestamp` / `svix-signature`, which
the `standard_webhooks` preset accepts as aliases of the `webhook-*` headers.
The libraries verify against the real clock, so requests for them are signed
at the current time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import svix.webhooks

from shared.signatures import SignatureError, Verified, check_options, sign, verify

# Official vector from standard-webhooks/libraries/python/tests/test_webhooks.py.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
OFFICIAL_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
NOW = TIMESTAMP + 10.0


def svix_headers(signature: str = OFFICIAL_SIGNATURE, msg_id: str = MSG_ID) -> dict[str, str]:
    return {"svix-id": msg_id, "svix-timestamp": str(TIMESTAMP), "svix-signature": signature}


def reason(headers: dict[str, str], options: dict[str, object] | None = None) -> str:
    with pytest.raises(SignatureError) as info:
        verify("standard_webhooks", options or {}, headers, BODY, [SECRET], NOW)
    return info.value.reason


@pytest.mark.parametrize("library", [standardwebhooks.Webhook, svix.webhooks.Webhook])
def test_libraries_reproduce_the_official_vector(library: type) -> None:
    signed = library(SECRET).sign(MSG_ID, datetime.fromtimestamp(TIMESTAMP, UTC), BODY.decode())
    assert signed == OFFICIAL_SIGNATURE


def test_svix_headers_verify() -> None:
    assert verify("standard_webhooks", {}, svix_headers(), BODY, [SECRET], NOW) == Verified(
        "standard_webhooks", event_id=MSG_ID, id_signed=True, timestamp=TIMESTAMP
    )


def test_svix_and_webhook_headers_may_both_be_sent_when_they_agree() -> None:
    headers = {
        **svix_headers(),
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": OFFICIAL_SIGNATURE,
    }
    assert verify("standard_webhooks", {}, headers, BODY, [SECRET], NOW).event_id == MSG_ID


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("webhook-id", "msg_other"),
        ("webhook-timestamp", str(TIMESTAMP + 1)),
        ("webhook-signature", "v1,AAAA"),
    ],
)
def test_svix_and_webhook_headers_that_disagree_are_malformed(name: str, value: str) -> None:
    assert reason({**svix_headers(), name: value}) == "malformed_header"


def test_svix_lib_verifies_what_we_sign() -> None:
    now = int(time.time())
    body = b'{"type":"job.completed"}'
    signature = sign("standard_webhooks", {}, SECRET, body, timestamp=now, event_id="msg_1")
    headers = {"svix-id": "msg_1", "svix-timestamp": str(now), "svix-signature": signature}
    svix.webhooks.Webhook(SECRET).verify(body, headers)
    standardwebhooks.Webhook(SECRET).verify(
        body,
        {"webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": signature},
    )


def test_svix_lib_signature_with_a_fresh_secret() -> None:
    secret = "whsec_" + "C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
    signature = svix.webhooks.Webhook(secret).sign(
        "msg_2", datetime.fromtimestamp(TIMESTAMP, UTC), BODY.decode()
    )
    headers = svix_headers(signature, msg_id="msg_2")
    assert verify("standard_webhooks", {}, headers, BODY, [secret], NOW).event_id == "msg_2"
    with pytest.raises(SignatureError) as info:
        verify("standard_webhooks", {}, headers, BODY, [SECRET], NOW)
    assert info.value.reason == "bad_signature"


def test_one_byte_body_change() -> None:
    with pytest.raises(SignatureError) as info:
        verify("standard_webhooks", {}, svix_headers(), BODY[:-2] + b"5}", [SECRET], NOW)
    assert info.value.reason == "bad_signature"


def test_header_names_can_be_overridden() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Hook-Signature",
        "timestamp_header": "X-Hook-Timestamp",
        "id_header": "X-Hook-Id",
    }
    headers = {
        "X-Hook-Id": MSG_ID,
        "X-Hook-Timestamp": str(TIMESTAMP),
        "X-Hook-Signature": OFFICIAL_SIGNATURE,
    }
    assert verify("standard_webhooks", options, headers, BODY, [SECRET], NOW).event_id == MSG_ID
    assert reason(svix_headers(), options) == "missing_header"


def test_options_are_header_names_only() -> None:
    check_options("standard_webhooks", {"id_header": ["webhook-id", "x-id"]})
    with pytest.raises(ValueError, match="'format'"):
        check_options("standard_webhooks", {"format": "kv"})
