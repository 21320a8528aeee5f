"""Standard Webhooks: official vector plus one test per failure mode."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
from starlette.datastructures import Headers

from shared.signatures import (
    SignatureError,
    Verified,
    check_options,
    check_secret,
    generate_ed25519_keypair,
    sign_standard_webhooks,
    sign_standard_webhooks_ed25519,
    verify,
)

# Official vector from standard-webhooks/libraries/python/tests/test_webhooks.py.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
OFFICIAL_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
# Same vector with the last base64 character changed (from the same test file).
WRONG_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
OTHER_SECRET = "whsec_" + base64.b64encode(b"another-32-byte-secret-key-12345").decode()
NOW = TIMESTAMP + 10.0


def make_headers(signature: str = OFFICIAL_SIGNATURE, **overrides: str) -> dict[str, str]:
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": signature,
    }
    headers.update({name.replace("_", "-"): value for name, value in overrides.items()})
    return headers


def reason(
    headers: dict[str, str] | None = None,
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
) -> str:
    with pytest.raises(SignatureError) as info:
        verify(
            "standard_webhooks",
            {},
            make_headers() if headers is None else headers,
            body,
            secrets,
            now,
        )
    return info.value.reason


def test_sign_reproduces_official_vector() -> None:
    assert sign_standard_webhooks(SECRET, MSG_ID, TIMESTAMP, BODY) == OFFICIAL_SIGNATURE


def test_official_vector_verifies() -> None:
    result = verify("standard_webhooks", {}, make_headers(), BODY, [SECRET], NOW)
    assert result == Verified(
        scheme="standard_webhooks", event_id=MSG_ID, id_signed=True, timestamp=TIMESTAMP
    )


def test_header_names_are_case_insensitive() -> None:
    mixed = {
        "Webhook-Id": MSG_ID,
        "WEBHOOK-TIMESTAMP": str(TIMESTAMP),
        "Webhook-Signature": OFFICIAL_SIGNATURE,
    }
    assert verify("standard_webhooks", {}, mixed, BODY, [SECRET], NOW).event_id == MSG_ID


def test_framework_header_mapping_is_accepted() -> None:
    headers = Headers(raw=[(k.encode(), v.encode()) for k, v in make_headers().items()])
    assert verify("standard_webhooks", {}, headers, BODY, [SECRET], NOW).event_id == MSG_ID


def test_conflicting_spellings_of_one_header_are_malformed() -> None:
    headers = make_headers()
    headers["Webhook-Id"] = "msg_other"
    assert reason(headers) == "malformed_header"


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_header(name: str) -> None:
    headers = make_headers()
    del headers[name]
    assert reason(headers) == "missing_header"


@pytest.mark.parametrize("name", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_empty_header_counts_as_missing(name: str) -> None:
    assert reason({**make_headers(), name: "  "}) == "missing_header"


@pytest.mark.parametrize(
    "value", ["hello", "-1614265330", "+1614265330", "1614265330.0", "1e9", "١٦١٤٢٦٥٣٣٠"]
)
def test_malformed_timestamp(value: str) -> None:
    assert reason(make_headers(webhook_timestamp=value)) == "malformed_header"


@pytest.mark.parametrize(
    "value",
    [
        "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",  # no version
        ",g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",  # empty version
        "v1,not*base64!",
        "v1a,%%%%",
    ],
)
def test_malformed_signature_header(value: str) -> None:
    assert reason(make_headers(signature=value)) == "malformed_header"


def test_too_many_signatures_are_malformed() -> None:
    signature = " ".join([OFFICIAL_SIGNATURE] * 17)
    assert reason(make_headers(signature=signature)) == "malformed_header"


def test_bad_signature() -> None:
    assert reason(make_headers(signature=WRONG_SIGNATURE)) == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(secrets=(OTHER_SECRET,)) == "bad_signature"


def test_tampered_body() -> None:
    assert reason(body=b'{"test": 2432232315}') == "bad_signature"


def test_tampered_id() -> None:
    assert reason(make_headers(webhook_id="msg_replayed")) == "bad_signature"


def test_tampered_timestamp() -> None:
    assert reason(make_headers(webhook_timestamp=str(TIMESTAMP + 1))) == "bad_signature"


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET])
def test_rotated_secrets_either_signs(signer: str) -> None:
    signature = sign_standard_webhooks(signer, MSG_ID, TIMESTAMP, BODY)
    result = verify(
        "standard_webhooks",
        {},
        make_headers(signature=signature),
        BODY,
        [OTHER_SECRET, SECRET],
        NOW,
    )
    assert result.event_id == MSG_ID


def test_several_signatures_in_header() -> None:
    # The multi-signature case of the reference test suite.
    signature = " ".join(
        [
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
            OFFICIAL_SIGNATURE,
            "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
        ]
    )
    assert (
        verify(
            "standard_webhooks", {}, make_headers(signature=signature), BODY, [SECRET], NOW
        ).timestamp
        == TIMESTAMP
    )


@pytest.mark.parametrize("beside", ["v1,@@@", "v1,", "v2", ",abc", "v1,***"])
def test_an_unreadable_entry_beside_a_valid_one_is_ignored(beside: str) -> None:
    """As the specification and the reference verifier say: the delivery was
    refused as malformed (400) for an entry nobody needed to read."""
    official = standardwebhooks.Webhook(SECRET)
    now = int(time.time())  # the reference verifier reads the real clock
    signed = official.sign(MSG_ID, datetime.fromtimestamp(now, UTC), BODY.decode())
    headers = {
        "webhook-id": MSG_ID,
        "webhook-timestamp": str(now),
        "webhook-signature": f"{beside} {signed}",
    }
    assert verify("standard_webhooks", {}, headers, BODY, [SECRET], now).timestamp == now
    assert official.verify(BODY, headers) is not None  # the reference agrees
    assert reason(make_headers(signature=beside)) in ("malformed_header", "bad_signature")


def test_unknown_versions_alone_do_not_verify() -> None:
    assert reason(make_headers(signature="v2,anything v3,else")) == "bad_signature"


def test_ed25519_signature_verifies() -> None:
    private, public = generate_ed25519_keypair()
    signature = sign_standard_webhooks_ed25519(private, MSG_ID, TIMESTAMP, BODY)
    assert signature.startswith("v1a,")
    result = verify("standard_webhooks", {}, make_headers(signature=signature), BODY, [public], NOW)
    assert result == Verified("standard_webhooks", MSG_ID, True, TIMESTAMP)


def test_ed25519_signature_from_another_key_fails() -> None:
    private, _ = generate_ed25519_keypair()
    _, other_public = generate_ed25519_keypair()
    signature = sign_standard_webhooks_ed25519(private, MSG_ID, TIMESTAMP, BODY)
    assert reason(make_headers(signature=signature), secrets=(other_public,)) == "bad_signature"


def test_ed25519_signature_over_tampered_body_fails() -> None:
    private, public = generate_ed25519_keypair()
    signature = sign_standard_webhooks_ed25519(private, MSG_ID, TIMESTAMP, BODY)
    assert (
        reason(make_headers(signature=signature), body=BODY + b" ", secrets=(public,))
        == "bad_signature"
    )


def test_ed25519_and_hmac_keys_rotate_together() -> None:
    private, public = generate_ed25519_keypair()
    signature = sign_standard_webhooks_ed25519(private, MSG_ID, TIMESTAMP, BODY)
    header = f"{WRONG_SIGNATURE} {signature}"
    result = verify(
        "standard_webhooks", {}, make_headers(signature=header), BODY, [SECRET, public], NOW
    )
    assert result.event_id == MSG_ID


def test_public_key_is_never_used_as_hmac_key() -> None:
    # The public key is public: if its bytes keyed v1 HMACs, anyone could forge.
    _, public = generate_ed25519_keypair()
    key = base64.b64decode(public.removeprefix("whpk_"))
    content = f"{MSG_ID}.{TIMESTAMP}.".encode() + BODY
    forged = "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    assert reason(make_headers(signature=forged), secrets=(public,)) == "bad_signature"


def test_hmac_secret_is_not_used_for_v1a() -> None:
    private, _ = generate_ed25519_keypair()
    signature = sign_standard_webhooks_ed25519(private, MSG_ID, TIMESTAMP, BODY)
    assert reason(make_headers(signature=signature), secrets=(SECRET,)) == "bad_signature"


@pytest.mark.parametrize(
    "secret",
    [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  # no prefix
        "whsk_" + base64.b64encode(b"\x01" * 32).decode(),  # sender's private key
        "whpk_" + base64.b64encode(b"\x01" * 31).decode(),  # wrong key length
        "whsec_not*base64",
    ],
)
def test_unusable_secret_kinds_leave_no_secret(secret: str) -> None:
    assert reason(secrets=(secret,)) == "no_secret"


def test_stale_timestamp() -> None:
    assert reason(now=TIMESTAMP + 301) == "stale_timestamp"


def test_future_timestamp() -> None:
    assert reason(now=TIMESTAMP - 301) == "future_timestamp"


@pytest.mark.parametrize("now", [TIMESTAMP - 300, TIMESTAMP + 300])
def test_tolerance_edges_are_accepted(now: int) -> None:
    assert verify("standard_webhooks", {}, make_headers(), BODY, [SECRET], now).timestamp


def test_custom_tolerance_applies() -> None:
    with pytest.raises(SignatureError) as info:
        verify(
            "standard_webhooks",
            {},
            make_headers(),
            BODY,
            [SECRET],
            TIMESTAMP + 31,
            tolerance_seconds=30,
        )
    assert info.value.reason == "stale_timestamp"


def test_forgery_with_stale_timestamp_reports_bad_signature() -> None:
    # Only authentic requests may be reported as stale (a replay or clock skew).
    assert reason(body=b"forged", now=TIMESTAMP + 10_000) == "bad_signature"


def test_empty_secrets() -> None:
    assert reason(secrets=()) == "no_secret"


def test_error_carries_nothing_but_the_reason() -> None:
    with pytest.raises(SignatureError) as info:
        verify(
            "standard_webhooks", {}, make_headers(signature=WRONG_SIGNATURE), BODY, [SECRET], NOW
        )
    error = info.value
    rendered = f"{error} {error!r} {error.args}"
    assert str(error) == "bad_signature"
    for material in (
        SECRET,
        SECRET.removeprefix("whsec_"),
        OFFICIAL_SIGNATURE[3:],
        WRONG_SIGNATURE[3:],
        MSG_ID,
    ):
        assert material not in rendered
    assert error.__cause__ is None and error.__context__ is None


def test_malformed_header_error_does_not_chain_the_parse_error() -> None:
    with pytest.raises(SignatureError) as info:
        verify(
            "standard_webhooks",
            {},
            make_headers(webhook_timestamp="attacker-text"),
            BODY,
            [SECRET],
            NOW,
        )
    assert info.value.__context__ is None
    assert "attacker-text" not in repr(info.value)


def test_keypair_has_documented_formats() -> None:
    private, public = generate_ed25519_keypair()
    assert private.startswith("whsk_") and len(base64.b64decode(private[5:])) == 32
    assert public.startswith("whpk_") and len(base64.b64decode(public[5:])) == 32


@pytest.mark.parametrize(
    "secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whpk_c2VjcmV0LXZhbHVl"]
)
def test_hmac_signing_refuses_other_secrets_without_quoting_them(secret: str) -> None:
    with pytest.raises(ValueError, match=r"whsec_|public or private key") as info:
        sign_standard_webhooks(secret, MSG_ID, TIMESTAMP, BODY)
    material = secret.removeprefix("whsec_").removeprefix("whpk_")
    assert not material or material not in str(info.value)


def test_ed25519_signing_refuses_hmac_secret() -> None:
    with pytest.raises(ValueError, match="whsk_"):
        sign_standard_webhooks_ed25519(SECRET, MSG_ID, TIMESTAMP, BODY)


def test_check_options_rejects_any_option() -> None:
    check_options("standard_webhooks", {})
    with pytest.raises(ValueError, match="'tolerance'"):
        check_options("standard_webhooks", {"tolerance": 5})


def test_check_secret_accepts_both_kinds() -> None:
    _, public = generate_ed25519_keypair()
    check_secret("standard_webhooks", SECRET)
    check_secret("standard_webhooks", public)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("whsk_" + base64.b64encode(b"\x07" * 32).decode(), "whpk_ public key"),
        ("whsec_***", "base64"),
        ("whpk_" + base64.b64encode(b"\x07" * 16).decode(), "32-byte"),
        ("plainsecretvalue", "must start with"),
    ],
)
def test_check_secret_rejects_without_quoting(secret: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        check_secret("standard_webhooks", secret)
    assert secret not in str(info.value)
