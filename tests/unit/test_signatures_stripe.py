"""Stripe-style `t=…,v1=…` signatures: one test per failure mode."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest
import stripe

from shared.signatures import SignatureError, Verified, check_options, sign_stripe, verify

SECRET = "whsec_stripe_endpoint_secret_1"
OTHER_SECRET = "whsec_stripe_endpoint_secret_2"
TIMESTAMP = 1_700_000_000
BODY = b'{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"payment_intent.succeeded"}'
NOW = TIMESTAMP + 10.0


def v1(secret: str = SECRET, timestamp: int = TIMESTAMP, body: bytes = BODY) -> str:
    """Independent computation of Stripe's documented scheme (not via the library)."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def reason(
    header: str | None = None,
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
) -> str:
    headers = {} if header is None else {"Stripe-Signature": header}
    with pytest.raises(SignatureError) as info:
        verify("stripe", {}, headers, body, secrets, now)
    return info.value.reason


def test_sign_stripe_builds_the_documented_header() -> None:
    assert sign_stripe(SECRET, TIMESTAMP, BODY) == f"t={TIMESTAMP},v1={v1()}"


def test_valid_signature_verifies() -> None:
    headers = {"stripe-signature": sign_stripe(SECRET, TIMESTAMP, BODY)}
    result = verify("stripe", {}, headers, BODY, [SECRET], NOW)
    # The event id is in the signed body: the caller reads it from there.
    assert result == Verified(scheme="stripe", event_id=None, id_signed=True, timestamp=TIMESTAMP)


def test_missing_header() -> None:
    assert reason(None) == "missing_header"


@pytest.mark.parametrize(
    "header",
    [
        f"v1={v1()}",  # no timestamp
        f"t={TIMESTAMP},t={TIMESTAMP + 1},v1={v1()}",  # ambiguous timestamp
        f"t=yesterday,v1={v1()}",
        f"t={TIMESTAMP},{v1()}",  # item without key
        f"t={TIMESTAMP},v1={v1()},",  # empty item
        f"t={TIMESTAMP},v1=not-hex",
        f"t={TIMESTAMP},v1=abc",  # odd-length hex
        ",".join([f"t={TIMESTAMP}"] + [f"v1={v1()}"] * 17),  # too many signatures
    ],
)
def test_malformed_header(header: str) -> None:
    assert reason(header) == "malformed_header"


def test_bad_signature() -> None:
    assert reason(f"t={TIMESTAMP},v1={'0' * 64}") == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(sign_stripe(OTHER_SECRET, TIMESTAMP, BODY)) == "bad_signature"


def test_tampered_body() -> None:
    assert reason(sign_stripe(SECRET, TIMESTAMP, BODY), body=BODY.replace(b"1NG", b"2NG")) == (
        "bad_signature"
    )


def test_tampered_timestamp() -> None:
    assert reason(f"t={TIMESTAMP + 1},v1={v1()}") == "bad_signature"


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET])
def test_rotated_secrets_either_signs(signer: str) -> None:
    header = sign_stripe(signer, TIMESTAMP, BODY)
    result = verify("stripe", {}, {"Stripe-Signature": header}, BODY, [SECRET, OTHER_SECRET], NOW)
    assert result.timestamp == TIMESTAMP


def test_several_signatures_in_header() -> None:
    header = f"t={TIMESTAMP}, v1={'0' * 64}, v1={v1()}, v0={'1' * 64}"
    result = verify("stripe", {}, {"Stripe-Signature": header}, BODY, [SECRET], NOW)
    assert result.timestamp == TIMESTAMP


def test_only_other_schemes_do_not_verify() -> None:
    assert reason(f"t={TIMESTAMP},v0={v1()}") == "bad_signature"


def test_stale_timestamp() -> None:
    assert reason(sign_stripe(SECRET, TIMESTAMP, BODY), now=TIMESTAMP + 301) == "stale_timestamp"


def test_future_timestamp() -> None:
    assert reason(sign_stripe(SECRET, TIMESTAMP, BODY), now=TIMESTAMP - 301) == "future_timestamp"


def test_forgery_with_stale_timestamp_reports_bad_signature() -> None:
    # Only authentic requests may be reported as stale (a replay or clock skew).
    assert reason(f"t={TIMESTAMP},v1={'0' * 64}", now=TIMESTAMP + 10_000) == "bad_signature"


def test_empty_secrets() -> None:
    assert reason(sign_stripe(SECRET, TIMESTAMP, BODY), secrets=()) == "no_secret"


def test_empty_key_signature_is_not_accepted() -> None:
    # Anyone can compute an HMAC keyed with "": a blank configured secret must not count.
    assert reason(sign_stripe("", TIMESTAMP, BODY), secrets=("", SECRET)) == "bad_signature"


def test_error_carries_nothing_but_the_reason() -> None:
    header = sign_stripe(OTHER_SECRET, TIMESTAMP, BODY)
    with pytest.raises(SignatureError) as info:
        verify("stripe", {}, {"Stripe-Signature": header}, BODY, [SECRET], NOW)
    rendered = f"{info.value} {info.value!r}"
    assert str(info.value) == "bad_signature"
    for material in (SECRET, v1(), v1(OTHER_SECRET), str(TIMESTAMP)):
        assert material not in rendered
    assert info.value.__context__ is None


def test_check_options_allows_only_the_header_name() -> None:
    check_options("stripe", {})
    check_options("stripe", {"signature_header": "X-Acme-Signature"})
    with pytest.raises(ValueError, match="'header'"):
        check_options("stripe", {"header": "Stripe-Signature"})
    with pytest.raises(ValueError, match="'timestamp_key'"):
        check_options("stripe", {"timestamp_key": "ts"})


def test_stripe_layout_under_another_header_name() -> None:
    # The reported case: signs exactly like Stripe, in a header of its own name.
    options: dict[str, object] = {"signature_header": "X-Acme-Signature"}
    header = sign_stripe(SECRET, TIMESTAMP, BODY)
    result = verify("stripe", options, {"X-Acme-Signature": header}, BODY, [SECRET], NOW)
    assert result == Verified(scheme="stripe", event_id=None, id_signed=True, timestamp=TIMESTAMP)
    with pytest.raises(SignatureError) as info:
        verify("stripe", options, {"Stripe-Signature": header}, BODY, [SECRET], NOW)
    assert info.value.reason == "missing_header"


# ------------------------------------------------- Stripe's own library (stripe-python)


def test_stripe_library_header_verifies() -> None:
    header = stripe.WebhookSignature.generate_signature_header(
        BODY.decode(), SECRET, timestamp=TIMESTAMP
    )
    assert header == sign_stripe(SECRET, TIMESTAMP, BODY)
    assert verify("stripe", {}, {"Stripe-Signature": header}, BODY, [SECRET], NOW).timestamp


def test_stripe_library_verifies_what_we_sign() -> None:
    now = int(time.time())
    header = sign_stripe(SECRET, now, BODY)
    assert stripe.WebhookSignature.verify_header(BODY, header, SECRET, tolerance=300)


def test_stripe_library_refuses_what_we_refuse() -> None:
    now = int(time.time())
    header = sign_stripe(OTHER_SECRET, now, BODY)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY, header, SECRET, tolerance=300)
    assert reason(header, now=now) == "bad_signature"


def test_sender_rotation_two_v1_entries_from_the_library() -> None:
    old = stripe.WebhookSignature.generate_signature_header(
        BODY.decode(), OTHER_SECRET, timestamp=TIMESTAMP
    )
    new = stripe.WebhookSignature.generate_signature_header(
        BODY.decode(), SECRET, timestamp=TIMESTAMP
    )
    header = old + "," + new.split(",", 1)[1]  # t=...,v1=<old>,v1=<new>
    assert verify("stripe", {}, {"Stripe-Signature": header}, BODY, [SECRET], NOW).timestamp
