"""Mailgun's signature in the body (shared/signatures/mailgun.py)."""

from __future__ import annotations

import json

import pytest

from shared.signatures import SignatureError, verify
from shared.signatures.mailgun import sign

KEY = "key-mailgun-signing-0123"
TOKEN = "a8ce0edb2dd8301dea6c90a6d1b8c6fd4e2d2a5e5f3d5f27d5"
STAMP = 1529006854
# `echo -n 1529006854a8ce0edb2dd8301dea6c90a6d1b8c6fd4e2d2a5e5f3d5f27d5 |
#  openssl dgst -sha256 -hmac key-mailgun-signing-0123`: an independent HMAC
VECTOR = "576e6c79dbff094581f72bf3bc591b14b63d3df7ccfa834f4e45e49366929b8c"


def body(signature: object, event: object | None = None) -> bytes:
    data = event if event is not None else {"event": "delivered", "id": "ev-1"}
    return json.dumps({"signature": signature, "event-data": data}).encode()


def check(sent: bytes, now: float = STAMP, secrets: tuple[str, ...] = (KEY,)) -> object:
    return verify("mailgun", {}, {}, sent, list(secrets), now)


def test_the_documented_recipe_verifies_and_the_token_is_the_signed_id() -> None:
    signature = {"timestamp": str(STAMP), "token": TOKEN, "signature": VECTOR}
    assert sign(KEY, STAMP, TOKEN) == signature
    verified = check(body(signature))
    assert (verified.event_id, verified.id_signed, verified.timestamp) == (TOKEN, True, STAMP)  # type: ignore[attr-defined]


def test_the_event_data_is_not_signed_so_the_token_is_what_dedupes() -> None:
    """A signature copied onto other event data verifies: the receiver stores only
    the first delivery under its token (see test_mailgun_webhooks.py)."""
    verified = check(body(sign(KEY, STAMP, TOKEN), {"event": "failed", "id": "forged"}))
    assert verified.event_id == TOKEN  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "signature",
    [
        {**sign(KEY, STAMP, TOKEN), "token": TOKEN + "x"},
        {**sign(KEY, STAMP, TOKEN), "timestamp": str(STAMP + 1)},
        sign("another-key", STAMP, TOKEN),
    ],
)
def test_a_changed_timestamp_token_or_key_is_refused(signature: dict[str, str]) -> None:
    with pytest.raises(SignatureError) as refused:
        check(body(signature), now=STAMP + 1)
    assert refused.value.reason == "bad_signature"


def test_the_timestamp_is_held_to_the_window() -> None:
    sent = body(sign(KEY, STAMP, TOKEN))
    check(sent, now=STAMP + 300)
    for now, reason in ((STAMP + 301, "stale_timestamp"), (STAMP - 301, "future_timestamp")):
        with pytest.raises(SignatureError) as refused:
            check(sent, now=now)
        assert refused.value.reason == reason


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (b"not json", "missing_header"),
        (b"[1, 2]", "missing_header"),
        (json.dumps({"event-data": {}}).encode(), "missing_header"),
        (body({"timestamp": str(STAMP), "token": TOKEN}), "missing_header"),
        (body({"timestamp": "15e8", "token": TOKEN, "signature": VECTOR}), "malformed_header"),
        (body({"timestamp": str(STAMP), "token": "", "signature": VECTOR}), "malformed_header"),
        (body({"timestamp": str(STAMP), "token": "t\n", "signature": VECTOR}), "malformed_header"),
        (body({"timestamp": str(STAMP), "token": TOKEN, "signature": "zz"}), "malformed_header"),
        (body({"timestamp": True, "token": TOKEN, "signature": VECTOR}), "malformed_header"),
        (body("a string"), "missing_header"),
    ],
)
def test_a_body_without_a_readable_signature_is_refused(sent: bytes, reason: str) -> None:
    with pytest.raises(SignatureError) as refused:
        check(sent)
    assert refused.value.reason == reason


def test_a_numeric_timestamp_is_read_as_its_digits() -> None:
    signature = {**sign(KEY, STAMP, TOKEN), "timestamp": STAMP}
    check(body(signature))
