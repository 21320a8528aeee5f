"""The `asymmetric` family: Ed25519 and ECDSA P-256 against published vectors."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from shared.signatures import (
    SignatureError,
    Verified,
    check_options,
    check_secret,
    generate_ed25519_keypair,
    sign_standard_webhooks_ed25519,
    verify,
)

# RFC 8032 section 7.1, TEST 2 and TEST 3 (public key, message, signature).
RFC8032 = [
    (
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        "72",
        "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
        "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    ),
    (
        "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        "af82",
        "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
        "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    ),
]
RAW_ED25519: dict[str, object] = {
    "algorithm": "ed25519",
    "key_encoding": "hex",
    "signature_header": "X-Signature-Ed25519",
    "format": "hex",
}

# SendGrid's published Event Webhook test vector (its libraries' test suites):
# ECDSA P-256 / SHA-256 over `{timestamp}{body}`, DER signature in base64,
# public key a base64 DER SubjectPublicKeyInfo.
SENDGRID_PUBLIC_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7"
    "yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
)
SENDGRID_FAILING_PUBLIC_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8RE"
    "ntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA=="
)
SENDGRID_SIGNATURE = (
    "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlx"
    "FDWYNH2j/0="
)
SENDGRID_FAILING_SIGNATURE = (
    "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlx"
    "FDWYNH3j/0="
)
SENDGRID_TIMESTAMP = 1588788367
SENDGRID_PAYLOAD = b'{"category":"example_payload","event":"test_event","message_id":"message_id"}'
SENDGRID: dict[str, object] = {
    "algorithm": "ecdsa_p256",
    "signature_header": "X-Twilio-Email-Event-Webhook-Signature",
    "timestamp_header": "X-Twilio-Email-Event-Webhook-Timestamp",
    "signed_content": "{timestamp}{body}",
}
SENDGRID_NOW = SENDGRID_TIMESTAMP + 60.0


def sendgrid_headers(signature: str = SENDGRID_SIGNATURE) -> dict[str, str]:
    return {
        "X-Twilio-Email-Event-Webhook-Signature": signature,
        "X-Twilio-Email-Event-Webhook-Timestamp": str(SENDGRID_TIMESTAMP),
    }


def reason(scheme: str, options: dict[str, object], headers: dict[str, str], **kw: object) -> str:
    body = kw.get("body", SENDGRID_PAYLOAD)
    secrets = kw.get("secrets", [SENDGRID_PUBLIC_KEY])
    now = kw.get("now", SENDGRID_NOW)
    with pytest.raises(SignatureError) as info:
        verify(scheme, options, headers, body, secrets, now)  # type: ignore[arg-type]
    return info.value.reason


# ------------------------------------------------------------------- Ed25519


@pytest.mark.parametrize(("public", "message", "signature"), RFC8032)
def test_rfc8032_vectors_verify(public: str, message: str, signature: str) -> None:
    headers = {"X-Signature-Ed25519": signature}
    result = verify("asymmetric", RAW_ED25519, headers, bytes.fromhex(message), [public], 0.0)
    assert result == Verified("asymmetric", event_id=None, id_signed=False, timestamp=None)


@pytest.mark.parametrize(("public", "message", "signature"), RFC8032)
def test_rfc8032_vectors_refuse_a_changed_message(
    public: str, message: str, signature: str
) -> None:
    tampered = bytes.fromhex(message)[:-1] + bytes([bytes.fromhex(message)[-1] ^ 1])
    headers = {"X-Signature-Ed25519": signature}
    assert reason("asymmetric", RAW_ED25519, headers, body=tampered, secrets=[public]) == (
        "bad_signature"
    )


def test_rfc8032_vector_refuses_the_other_key() -> None:
    (public, _, _), (_, message, signature) = RFC8032
    headers = {"X-Signature-Ed25519": signature}
    body = bytes.fromhex(message)
    assert reason("asymmetric", RAW_ED25519, headers, body=body, secrets=[public]) == (
        "bad_signature"
    )


def test_discord_style_layout_timestamp_then_body() -> None:
    # Discord interactions: hex Ed25519 over `{timestamp}{body}`, hex public key.
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes_raw().hex()
    options: dict[str, object] = {
        **RAW_ED25519,
        "timestamp_header": "X-Signature-Timestamp",
        "signed_content": "{timestamp}{body}",
    }
    body = b'{"type":1}'
    headers = {
        "X-Signature-Ed25519": private.sign(b"1700000000" + body).hex(),
        "X-Signature-Timestamp": "1700000000",
    }
    assert verify("asymmetric", options, headers, body, [public], 1_700_000_001).timestamp
    stale = reason("asymmetric", options, headers, body=body, secrets=[public], now=1_700_000_301)
    assert stale == "stale_timestamp"


@pytest.mark.parametrize("encoding", ["whpk", "base64", "hex", "pem"])
def test_ed25519_key_encodings(encoding: str) -> None:
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes_raw()
    secret = {
        "whpk": "whpk_" + base64.b64encode(raw).decode(),
        "base64": base64.b64encode(raw).decode(),
        "hex": raw.hex(),
        "pem": private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    }[encoding]
    options: dict[str, object] = {
        "algorithm": "ed25519",
        "key_encoding": encoding,
        "signature_header": "X-Sig",
    }
    headers = {"X-Sig": base64.b64encode(private.sign(b"body")).decode()}
    check_secret("asymmetric", secret, options)
    assert verify("asymmetric", options, headers, b"body", [secret], 0.0)


def test_standard_webhooks_v1a_through_the_family() -> None:
    private, public = generate_ed25519_keypair()
    options: dict[str, object] = {
        "algorithm": "ed25519",
        "key_encoding": "whpk",
        "format": "versioned",
        "signature_header": ["webhook-signature", "svix-signature"],
        "timestamp_header": ["webhook-timestamp", "svix-timestamp"],
        "id_header": ["webhook-id", "svix-id"],
        "signed_content": "{id}.{timestamp}.{body}",
    }
    headers = {
        "svix-id": "msg_1",
        "svix-timestamp": "1700000000",
        "svix-signature": "v1,AAAA "
        + sign_standard_webhooks_ed25519(private, "msg_1", 1_700_000_000, b"{}"),
    }
    assert verify("asymmetric", options, headers, b"{}", [public], 1_700_000_000) == Verified(
        "asymmetric", event_id="msg_1", id_signed=True, timestamp=1_700_000_000
    )


# --------------------------------------------------------------- ECDSA P-256


def test_sendgrid_vector_verifies() -> None:
    result = verify(
        "asymmetric",
        SENDGRID,
        sendgrid_headers(),
        SENDGRID_PAYLOAD,
        [SENDGRID_PUBLIC_KEY],
        SENDGRID_NOW,
    )
    assert result == Verified(
        "asymmetric", event_id=None, id_signed=False, timestamp=SENDGRID_TIMESTAMP
    )


def test_sendgrid_vector_refuses_the_failing_key() -> None:
    assert reason(
        "asymmetric", SENDGRID, sendgrid_headers(), secrets=[SENDGRID_FAILING_PUBLIC_KEY]
    ) == ("bad_signature")


def test_sendgrid_vector_refuses_the_failing_signature() -> None:
    headers = sendgrid_headers(SENDGRID_FAILING_SIGNATURE)
    assert reason("asymmetric", SENDGRID, headers) == "bad_signature"


@pytest.mark.parametrize("position", [0, 40, len(SENDGRID_PAYLOAD) - 1])
def test_sendgrid_vector_refuses_a_one_byte_change(position: int) -> None:
    tampered = bytearray(SENDGRID_PAYLOAD)
    tampered[position] ^= 0x20
    assert reason("asymmetric", SENDGRID, sendgrid_headers(), body=bytes(tampered)) == (
        "bad_signature"
    )


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (SENDGRID_TIMESTAMP + 301, "stale_timestamp"),
        (SENDGRID_TIMESTAMP - 301, "future_timestamp"),
    ],
)
def test_sendgrid_vector_outside_the_window(now: float, expected: str) -> None:
    assert reason("asymmetric", SENDGRID, sendgrid_headers(), now=now) == expected


def test_sendgrid_vector_as_raw_r_s() -> None:
    r, s = decode_dss_signature(base64.b64decode(SENDGRID_SIGNATURE))
    raw = base64.b64encode(r.to_bytes(32, "big") + s.to_bytes(32, "big")).decode()
    options = {**SENDGRID, "ecdsa_signature": "raw"}
    assert verify(
        "asymmetric",
        options,
        sendgrid_headers(raw),
        SENDGRID_PAYLOAD,
        [SENDGRID_PUBLIC_KEY],
        SENDGRID_NOW,
    )
    # A DER signature is not accepted where raw is configured, nor the reverse.
    assert reason("asymmetric", options, sendgrid_headers()) == "bad_signature"
    assert reason("asymmetric", SENDGRID, sendgrid_headers(raw)) == "bad_signature"


@pytest.mark.parametrize(
    ("encoding", "form"),
    [("base64", "spki"), ("base64", "point"), ("hex", "spki"), ("hex", "point"), ("pem", "spki")],
)
def test_p256_key_encodings(encoding: str, form: str) -> None:
    key = serialization.load_der_public_key(base64.b64decode(SENDGRID_PUBLIC_KEY))
    assert isinstance(key, ec.EllipticCurvePublicKey)
    if encoding == "pem":
        material = key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        secret = material.decode()
    else:
        material = (
            key.public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            if form == "spki"
            else key.public_bytes(
                serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
            )
        )
        secret = base64.b64encode(material).decode() if encoding == "base64" else material.hex()
    options = {**SENDGRID, "key_encoding": encoding}
    check_secret("asymmetric", secret, options)
    assert verify(
        "asymmetric", options, sendgrid_headers(), SENDGRID_PAYLOAD, [secret], SENDGRID_NOW
    )


def test_a_key_on_another_curve_is_refused() -> None:
    p384 = ec.generate_private_key(ec.SECP384R1()).public_key()
    der = p384.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    secret = base64.b64encode(der).decode()
    with pytest.raises(ValueError, match="not an ecdsa_p256 public key"):
        check_secret("asymmetric", secret, SENDGRID)
    assert reason("asymmetric", SENDGRID, sendgrid_headers(), secrets=[secret]) == "no_secret"


def test_an_ed25519_key_is_not_a_p256_key() -> None:
    _, public = generate_ed25519_keypair()
    raw = base64.b64decode(public.removeprefix("whpk_"))
    secret = base64.b64encode(raw).decode()
    assert reason("asymmetric", SENDGRID, sendgrid_headers(), secrets=[secret]) == "no_secret"


def test_ecdsa_rotation_here() -> None:
    result = verify(
        "asymmetric",
        SENDGRID,
        sendgrid_headers(),
        SENDGRID_PAYLOAD,
        [SENDGRID_FAILING_PUBLIC_KEY, SENDGRID_PUBLIC_KEY],
        SENDGRID_NOW,
    )
    assert result.timestamp == SENDGRID_TIMESTAMP


def test_fresh_p256_signature_with_sha256() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    signature = private.sign(b"1700000000{}", ec.ECDSA(hashes.SHA256()))
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": "1700000000",
    }
    secret = base64.b64encode(der).decode()
    assert verify("asymmetric", SENDGRID, headers, b"{}", [secret], 1_700_000_000)


# ------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"signature_header": "X-Sig"}, "'algorithm' is required"),
        ({"signature_header": "X-Sig", "algorithm": "rsa"}, "'algorithm' must be one of"),
        (
            {"signature_header": "X-Sig", "algorithm": "ecdsa_p256", "key_encoding": "whpk"},
            "whpk is for algorithm ed25519 only",
        ),
        (
            {"signature_header": "X-Sig", "algorithm": "ed25519", "ecdsa_signature": "raw"},
            "'ecdsa_signature' only applies",
        ),
        (
            {"signature_header": "X-Sig", "algorithm": "ecdsa_p256", "ecdsa_signature": "p1363"},
            "'ecdsa_signature' must be one of der, raw",
        ),
        ({"signature_header": "X-Sig", "algorithm": "ed25519", "sha": "1"}, "unknown option 'sha'"),
    ],
)
def test_check_options_names_the_bad_key(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("asymmetric", options)


def test_private_keys_are_refused_without_being_quoted() -> None:
    private, _ = generate_ed25519_keypair()
    options: dict[str, object] = {
        "algorithm": "ed25519",
        "key_encoding": "whpk",
        "signature_header": "X-Sig",
    }
    with pytest.raises(ValueError, match="does not belong on the receiver") as info:
        check_secret("asymmetric", private, options)
    assert private not in str(info.value) and private[5:] not in str(info.value)
