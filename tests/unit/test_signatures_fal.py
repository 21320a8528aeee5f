"""fal.ai's webhook signature, described with the `asymmetric` scheme.

fal signs Ed25519 over "{request id}\\n{user id}\\n{timestamp}\\n{hex SHA-256 of the
body}" (X-Fal-Webhook-Request-Id, -User-Id, -Timestamp; the signature hex in
X-Fal-Webhook-Signature) and publishes its public keys as a JWKS
(https://rest.alpha.fal.ai/.well-known/jwks.json: `x`, base64url without
padding). Before `{body_sha256}` and `key_encoding = "base64url"`, no option could
say either: a new user could not verify fal's deliveries at all. Signed here by
fal's recipe as its reference verifiers (docs.fal.ai, "Verifying Your Webhook")
compute it.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.signatures import SignatureError, check_options, check_secret, verify

USER = "8f3a1b2c-user"
FAL: dict[str, object] = {
    "algorithm": "ed25519",
    "key_encoding": "base64url",
    "format": "hex",
    "signature_header": "X-Fal-Webhook-Signature",
    "timestamp_header": "X-Fal-Webhook-Timestamp",
    "id_header": "X-Fal-Webhook-Request-Id",
    "signed_content": "{id}\n" + USER + "\n{timestamp}\n{body_sha256}",
}
BODY = b'{"request_id": "req-1", "gateway_request_id": "req-1", "status": "OK", "payload": {}}'
NOW = 1_752_019_770


def jwk_x(private: Ed25519PrivateKey) -> str:
    """The key as fal's JWKS publishes it: base64url, no padding."""
    raw = private.public_key().public_bytes_raw()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def fal_signed(
    private: Ed25519PrivateKey, body: bytes, *, user: str = USER, ts: int = NOW
) -> dict[str, str]:
    message = "\n".join(["req-1", user, str(ts), hashlib.sha256(body).hexdigest()])
    return {
        "X-Fal-Webhook-Request-Id": "req-1",
        "X-Fal-Webhook-User-Id": user,
        "X-Fal-Webhook-Timestamp": str(ts),
        "X-Fal-Webhook-Signature": private.sign(message.encode()).hex(),
    }


def refused(headers: dict[str, str], body: bytes, key: str, now: float = NOW) -> str:
    with pytest.raises(SignatureError) as info:
        verify("asymmetric", FAL, headers, body, [key], now)
    return info.value.reason


def test_a_fal_delivery_verifies_with_its_published_key() -> None:
    private = Ed25519PrivateKey.generate()
    key = jwk_x(private)
    check_options("asymmetric", FAL)
    check_secret("asymmetric", key, FAL)
    verified = verify("asymmetric", FAL, fal_signed(private, BODY), BODY, [key], NOW + 1)
    assert verified.event_id == "req-1"
    assert verified.timestamp == NOW


def test_a_fal_delivery_is_refused_when_anything_signed_changes() -> None:
    private = Ed25519PrivateKey.generate()
    key = jwk_x(private)
    headers = fal_signed(private, BODY)
    assert refused(headers, BODY.replace(b"OK", b"ER"), key) == "bad_signature"
    assert refused(fal_signed(private, BODY, user="someone-else"), BODY, key) == "bad_signature"
    assert refused({**headers, "X-Fal-Webhook-Request-Id": "req-2"}, BODY, key) == "bad_signature"
    late = fal_signed(private, BODY, ts=NOW - 301)
    assert refused(late, BODY, key) == "stale_timestamp"
    other = jwk_x(Ed25519PrivateKey.generate())
    assert refused(headers, BODY, other) == "bad_signature"


def test_a_template_covers_the_body_itself_or_its_digest() -> None:
    with pytest.raises(ValueError, match=r"must contain \{body\}"):
        check_options("asymmetric", {**FAL, "signed_content": "{id}\n{timestamp}"})


def test_base64url_takes_padding_or_none_and_refuses_the_standard_alphabet_only_chars() -> None:
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes_raw()
    padded = base64.urlsafe_b64encode(raw).decode()
    check_secret("asymmetric", padded, FAL)
    with pytest.raises(ValueError, match="base64url"):
        check_secret("asymmetric", padded.replace("=", "") + "+/", FAL)
