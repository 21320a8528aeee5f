"""Every scheme and preset against the sender's own signing code.

Each case is signed by the official library where the sender publishes one
(standardwebhooks, svix, stripe, slack_sdk), else by the sender's documented
algorithm computed here with the standard library, or by `cryptography` for
public-key schemes. For each: the genuine request verifies; a one-byte change
of the body, a key other than the sender's, and (for schemes that sign a
timestamp) a timestamp outside the window, past or future, are refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
import svix.webhooks
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from slack_sdk.signature import SignatureVerifier

from shared.signatures import SignatureError, verify

BODY = b'{"id":"evt_1","type":"job.completed","data":{"job":"j-1","state":"done"}}'
TIMESTAMP = 1_700_000_000
NOW = TIMESTAMP + 30.0
TOLERANCE = 300
MSG_ID = "msg_2XyQ0mX1kBn0bI9Kq7u1aD4QfZx"
WHSEC = "whsec_" + base64.b64encode(b"contract-test-standard-webhooks!").decode()
OTHER_WHSEC = "whsec_" + base64.b64encode(b"some-other-32-byte-secret-value!").decode()

Signer = Callable[[bytes, int], dict[str, str]]


@dataclass(frozen=True)
class Case:
    name: str
    scheme: str
    options: dict[str, object]
    secret: str
    wrong_secret: str
    sign: Signer
    timed: bool = True


def _standardwebhooks(body: bytes, ts: int) -> dict[str, str]:
    signature = standardwebhooks.Webhook(WHSEC).sign(
        MSG_ID, datetime.fromtimestamp(ts, UTC), body.decode()
    )
    return {"webhook-id": MSG_ID, "webhook-timestamp": str(ts), "webhook-signature": signature}


def _svix(body: bytes, ts: int) -> dict[str, str]:
    signature = svix.webhooks.Webhook(WHSEC).sign(
        MSG_ID, datetime.fromtimestamp(ts, UTC), body.decode()
    )
    return {"svix-id": MSG_ID, "svix-timestamp": str(ts), "svix-signature": signature}


STRIPE_SECRET = "whsec_contract_stripe_endpoint_secret"


def _stripe(header: str) -> Signer:
    def sign(body: bytes, ts: int) -> dict[str, str]:
        value = stripe.WebhookSignature.generate_signature_header(
            body.decode(), STRIPE_SECRET, timestamp=ts
        )
        return {header: value}

    return sign


SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented example secret


def _slack(body: bytes, ts: int) -> dict[str, str]:
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=str(ts), body=body)
    assert signature is not None
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": str(ts)}


GITHUB_SECRET = "It's a Secret to Everybody"  # GitHub's documented example secret


def _github(body: bytes, ts: int) -> dict[str, str]:
    # GitHub's documented algorithm: HMAC-SHA256 of the body, hex, "sha256=".
    digest = hmac.new(GITHUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": "sha256=" + digest, "X-GitHub-Delivery": "d-1"}


SHOPIFY_SECRET = "shpss_contract_client_secret"


def _shopify(body: bytes, ts: int) -> dict[str, str]:
    # Shopify's documented algorithm: base64 HMAC-SHA256 of the raw body.
    digest = hmac.new(SHOPIFY_SECRET.encode(), body, hashlib.sha256).digest()
    return {"X-Shopify-Hmac-Sha256": base64.b64encode(digest).decode()}


GENERIC_SECRET = "generic-contract-secret"


def _generic(body: bytes, ts: int) -> dict[str, str]:
    content = f"{ts}.".encode() + body
    digest = hmac.new(GENERIC_SECRET.encode(), content, hashlib.sha512).hexdigest()
    return {"X-Signature": "v1=" + digest, "X-Timestamp": str(ts)}


ED25519_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
ED25519_PUBLIC = "whpk_" + base64.b64encode(ED25519_KEY.public_key().public_bytes_raw()).decode()
OTHER_ED25519_PUBLIC = (
    "whpk_"
    + base64.b64encode(
        Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key().public_bytes_raw()
    ).decode()
)


def _ed25519(body: bytes, ts: int) -> dict[str, str]:
    signature = ED25519_KEY.sign(f"{MSG_ID}.{ts}.".encode() + body)
    return {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(ts),
        "webhook-signature": "v1a," + base64.b64encode(signature).decode(),
    }


P256_KEY = ec.derive_private_key(0x1234567890ABCDEF, ec.SECP256R1())


def _spki_base64(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


def _ecdsa(raw: bool) -> Signer:
    def sign(body: bytes, ts: int) -> dict[str, str]:
        signature = P256_KEY.sign(str(ts).encode() + body, ec.ECDSA(hashes.SHA256()))
        if raw:
            r, s = decode_dss_signature(signature)
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return {
            "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
            "X-Twilio-Email-Event-Webhook-Timestamp": str(ts),
        }

    return sign


SENDGRID_LAYOUT: dict[str, object] = {
    "algorithm": "ecdsa_p256",
    "signature_header": "X-Twilio-Email-Event-Webhook-Signature",
    "timestamp_header": "X-Twilio-Email-Event-Webhook-Timestamp",
    "signed_content": "{timestamp}{body}",
}
SVIX_LAYOUT: dict[str, object] = {
    "signature_header": "svix-signature",
    "timestamp_header": "svix-timestamp",
    "id_header": "svix-id",
    "format": "versioned",
    "key_encoding": "whsec",
    "signed_content": "{id}.{timestamp}.{body}",
}
STRIPE_LIKE: dict[str, object] = {
    "signature_header": "X-Acme-Signature",
    "format": "kv",
    "timestamp_key": "t",
    "signed_content": "{timestamp}.{body}",
}

CASES = [
    Case("standardwebhooks-lib", "standard_webhooks", {}, WHSEC, OTHER_WHSEC, _standardwebhooks),
    Case("svix-lib", "standard_webhooks", {}, WHSEC, OTHER_WHSEC, _svix),
    Case("svix-lib-hmac-family", "hmac", SVIX_LAYOUT, WHSEC, OTHER_WHSEC, _svix),
    Case("stripe-lib", "stripe", {}, STRIPE_SECRET, "whsec_other", _stripe("Stripe-Signature")),
    Case(
        "stripe-lib-own-header",
        "stripe",
        {"signature_header": "X-Acme-Signature"},
        STRIPE_SECRET,
        "whsec_other",
        _stripe("X-Acme-Signature"),
    ),
    Case(
        "stripe-lib-hmac-family",
        "hmac",
        STRIPE_LIKE,
        STRIPE_SECRET,
        "whsec_other",
        _stripe("X-Acme-Signature"),
    ),
    Case("slack-sdk", "slack", {}, SLACK_SECRET, "0" * 32, _slack),
    Case("github-documented", "github", {}, GITHUB_SECRET, "another", _github, timed=False),
    Case("shopify-documented", "shopify", {}, SHOPIFY_SECRET, "another", _shopify, timed=False),
    Case(
        "generic-hmac",
        "generic_hmac",
        {
            "signature_header": "X-Signature",
            "algorithm": "sha512",
            "prefix": "v1=",
            "signed_content": "{timestamp}.{body}",
            "timestamp_header": "X-Timestamp",
        },
        GENERIC_SECRET,
        "another",
        _generic,
    ),
    Case("ed25519-v1a", "standard_webhooks", {}, ED25519_PUBLIC, OTHER_ED25519_PUBLIC, _ed25519),
    Case(
        "ecdsa-p256-der",
        "asymmetric",
        SENDGRID_LAYOUT,
        _spki_base64(P256_KEY),
        _spki_base64(ec.derive_private_key(7, ec.SECP256R1())),
        _ecdsa(raw=False),
    ),
    Case(
        "ecdsa-p256-raw",
        "asymmetric",
        {**SENDGRID_LAYOUT, "ecdsa_signature": "raw"},
        _spki_base64(P256_KEY),
        _spki_base64(ec.derive_private_key(7, ec.SECP256R1())),
        _ecdsa(raw=True),
    ),
]
TIMED = [case for case in CASES if case.timed]


def _reason(case: Case, headers: dict[str, str], body: bytes, secret: str, now: float) -> str:
    with pytest.raises(SignatureError) as info:
        verify(case.scheme, case.options, headers, body, [secret], now, TOLERANCE)
    return info.value.reason


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_genuine_request_verifies(case: Case) -> None:
    headers = case.sign(BODY, TIMESTAMP)
    result = verify(case.scheme, case.options, headers, BODY, [case.secret], NOW, TOLERANCE)
    assert result.scheme == case.scheme
    assert result.timestamp == (TIMESTAMP if case.timed else None)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("position", [0, len(BODY) // 2, len(BODY) - 1])
def test_one_byte_body_change_is_refused(case: Case, position: int) -> None:
    headers = case.sign(BODY, TIMESTAMP)
    tampered = bytearray(BODY)
    tampered[position] ^= 0x01
    assert _reason(case, headers, bytes(tampered), case.secret, NOW) == "bad_signature"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_wrong_key_is_refused(case: Case) -> None:
    headers = case.sign(BODY, TIMESTAMP)
    assert _reason(case, headers, BODY, case.wrong_secret, NOW) == "bad_signature"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_rotation_here_any_configured_key_verifies(case: Case) -> None:
    headers = case.sign(BODY, TIMESTAMP)
    secrets = [case.wrong_secret, case.secret]
    assert verify(case.scheme, case.options, headers, BODY, secrets, NOW, TOLERANCE)


@pytest.mark.parametrize("case", TIMED, ids=lambda case: case.name)
@pytest.mark.parametrize(
    ("offset", "expected"),
    [(-TOLERANCE - 1, "stale_timestamp"), (TOLERANCE + 1, "future_timestamp")],
)
def test_timestamp_outside_the_window_is_refused(case: Case, offset: int, expected: str) -> None:
    # Genuinely signed at TIMESTAMP + offset, received at TIMESTAMP.
    headers = case.sign(BODY, TIMESTAMP + offset)
    assert _reason(case, headers, BODY, case.secret, TIMESTAMP) == expected


@pytest.mark.parametrize("case", TIMED, ids=lambda case: case.name)
@pytest.mark.parametrize("offset", [-TOLERANCE, TOLERANCE])
def test_window_edges_are_accepted(case: Case, offset: int) -> None:
    headers = case.sign(BODY, TIMESTAMP + offset)
    assert verify(case.scheme, case.options, headers, BODY, [case.secret], TIMESTAMP, TOLERANCE)
