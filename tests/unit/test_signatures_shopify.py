"""Shopify (`X-Shopify-Hmac-Sha256`: base64 HMAC-SHA256 of the raw body).

Shopify publishes the algorithm, not a vector: the expected values here are
computed with the standard library exactly as its documentation describes,
keyed with the app's client secret as text.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from shared.signatures import SignatureError, Verified, check_options, sign, verify

SECRET = "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"
OTHER_SECRET = "shpss_00000000000000000000000000000000"
BODY = b'{"id":820982911946154508,"email":"jon@example.com","closed_at":null}'
WEBHOOK_ID = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
NOW = 1_700_000_000.0


def documented(secret: str = SECRET, body: bytes = BODY) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def headers(signature: str | None = None) -> dict[str, str]:
    return {
        "X-Shopify-Hmac-Sha256": documented() if signature is None else signature,
        "X-Shopify-Webhook-Id": WEBHOOK_ID,
        "X-Shopify-Topic": "orders/create",
    }


def reason(h: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)) -> str:
    with pytest.raises(SignatureError) as info:
        verify("shopify", {}, h, body, secrets, NOW)
    return info.value.reason


def test_documented_algorithm_verifies_with_an_unsigned_id() -> None:
    assert verify("shopify", {}, headers(), BODY, [SECRET], NOW) == Verified(
        "shopify", event_id=WEBHOOK_ID, id_signed=False, timestamp=None
    )


def test_sign_matches_the_documented_algorithm() -> None:
    assert sign("shopify", {}, SECRET, BODY) == documented()


def test_one_byte_body_change() -> None:
    assert reason(headers(), body=BODY.replace(b"jon", b"jom")) == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(headers(documented(OTHER_SECRET))) == "bad_signature"


def test_a_hex_digest_does_not_verify() -> None:
    # 64 hex characters happen to be valid base64, of 48 other bytes.
    hex_digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    assert reason(headers(hex_digest)) == "bad_signature"


def test_not_base64_is_malformed() -> None:
    assert reason(headers("not*base64")) == "malformed_header"


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET])
def test_rotation_here(signer: str) -> None:
    result = verify("shopify", {}, headers(documented(signer)), BODY, [SECRET, OTHER_SECRET], NOW)
    assert result.event_id == WEBHOOK_ID


def test_nothing_is_timed() -> None:
    # Like GitHub: no timestamp is signed, so replay protection is dedupe only.
    assert verify("shopify", {}, headers(), BODY, [SECRET], NOW + 10 * 365 * 86400)


def test_header_names_can_be_overridden() -> None:
    options: dict[str, object] = {"signature_header": "X-Shop-Hmac", "id_header": "X-Shop-Id"}
    h = {"X-Shop-Hmac": documented(), "X-Shop-Id": "d-1"}
    assert verify("shopify", options, h, BODY, [SECRET], NOW).event_id == "d-1"


def test_only_header_names_are_options() -> None:
    with pytest.raises(ValueError, match="'algorithm'"):
        check_options("shopify", {"algorithm": "sha1"})
