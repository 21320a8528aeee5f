"""`kv_separator`: kv signature headers whose entries are split by `;` (Paddle Billing).

Paddle sends `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]` over
`{ts}:{body}`: Stripe's layout but for the separator. The vector below is the
one Paddle's own Python SDK (`paddle-python-sdk`, tests/Unit/Notification/
test_Verifier.py) verifies with its `Verifier`.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from shared.signatures import SignatureError, Verified, check_options, sign, verify

PADDLE: dict[str, object] = {
    "signature_header": "Paddle-Signature",
    "format": "kv",
    "kv_separator": ";",
    "timestamp_key": "ts",
    "signature_key": "h1",
    "signed_content": "{timestamp}:{body}",
}
# Paddle's SDK test: the third of its secrets signs b"hello-world" at 1696195954.
PADDLE_SECRET = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"
PADDLE_WRONG = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4"
PADDLE_TS = 1696195954
PADDLE_H1 = "d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
PADDLE_BODY = b"hello-world"


def _reason(options: dict[str, object], header: str, body: bytes, now: float) -> str:
    with pytest.raises(SignatureError) as info:
        verify("hmac", options, {"Paddle-Signature": header}, body, [PADDLE_SECRET], now)
    return info.value.reason


def test_paddles_own_sdk_vector_verifies() -> None:
    # an independent computation first, so the vector is known to be what it claims
    content = f"{PADDLE_TS}:".encode() + PADDLE_BODY
    assert hmac.new(PADDLE_SECRET.encode(), content, hashlib.sha256).hexdigest() == PADDLE_H1
    header = f"ts={PADDLE_TS};h1={PADDLE_H1}"
    verified = verify(
        "hmac",
        PADDLE,
        {"Paddle-Signature": header},
        PADDLE_BODY,
        [PADDLE_WRONG, PADDLE_SECRET],
        PADDLE_TS,
    )
    assert verified == Verified("hmac", event_id=None, id_signed=False, timestamp=PADDLE_TS)


def test_any_h1_of_a_rotating_sender_verifies() -> None:
    other = hmac.new(b"old-secret", f"{PADDLE_TS}:hello-world".encode(), "sha256").hexdigest()
    header = f"ts={PADDLE_TS};h1={other};h1={PADDLE_H1}"
    verify("hmac", PADDLE, {"Paddle-Signature": header}, PADDLE_BODY, [PADDLE_SECRET], PADDLE_TS)


def test_an_entry_that_is_no_hex_makes_the_header_malformed() -> None:
    """Paddle's SDK test also sends `h1=dummy` beside the valid entry, and its
    verifier skips it. Here, as for every kv header, an entry under our key that
    does not decode is malformed: no real Paddle delivery carries one."""
    header = f"ts={PADDLE_TS};h1=dummy;h1={PADDLE_H1}"
    assert _reason(PADDLE, header, PADDLE_BODY, PADDLE_TS) == "malformed_header"


def test_a_changed_body_timestamp_or_signature_is_refused() -> None:
    good = f"ts={PADDLE_TS};h1={PADDLE_H1}"
    assert _reason(PADDLE, good, b"hello-worle", PADDLE_TS) == "bad_signature"
    moved = f"ts={PADDLE_TS + 1};h1={PADDLE_H1}"
    assert _reason(PADDLE, moved, PADDLE_BODY, PADDLE_TS) == "bad_signature"
    flipped = f"ts={PADDLE_TS};h1={PADDLE_H1[:-1]}3"
    assert _reason(PADDLE, flipped, PADDLE_BODY, PADDLE_TS) == "bad_signature"


def test_the_signed_timestamp_keeps_its_window() -> None:
    good = f"ts={PADDLE_TS};h1={PADDLE_H1}"
    assert _reason(PADDLE, good, PADDLE_BODY, PADDLE_TS + 301) == "stale_timestamp"
    assert _reason(PADDLE, good, PADDLE_BODY, PADDLE_TS - 301) == "future_timestamp"


def test_the_separator_is_the_one_configured_and_no_other() -> None:
    commas = f"ts={PADDLE_TS},h1={PADDLE_H1}"
    assert _reason(PADDLE, commas, PADDLE_BODY, PADDLE_TS) == "malformed_header"
    stripe_like = {**PADDLE}
    del stripe_like["kv_separator"]
    semicolons = f"ts={PADDLE_TS};h1={PADDLE_H1}"
    assert _reason(stripe_like, semicolons, PADDLE_BODY, PADDLE_TS) == "malformed_header"
    # the default stays Stripe's comma
    verify(
        "hmac", stripe_like, {"Paddle-Signature": commas}, PADDLE_BODY, [PADDLE_SECRET], PADDLE_TS
    )


def test_two_timestamps_are_malformed() -> None:
    header = f"ts={PADDLE_TS};ts={PADDLE_TS + 1};h1={PADDLE_H1}"
    assert _reason(PADDLE, header, PADDLE_BODY, PADDLE_TS) == "malformed_header"


def test_the_sender_side_writes_the_configured_separator() -> None:
    header = sign("hmac", PADDLE, PADDLE_SECRET, PADDLE_BODY, timestamp=PADDLE_TS)
    assert header == f"ts={PADDLE_TS};h1={PADDLE_H1}"


def test_asymmetric_family_takes_the_option_too() -> None:
    check_options(
        "asymmetric",
        {
            "signature_header": "X-Sig",
            "algorithm": "ed25519",
            "format": "kv",
            "kv_separator": ";",
            "signature_key": "sig",
        },
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kv_separator": "|"}, 'option \'kv_separator\' must be "," or ";"'),
        ({"kv_separator": ""}, 'option \'kv_separator\' must be "," or ";"'),
        ({"kv_separator": " ;"}, 'option \'kv_separator\' must be "," or ";"'),
        ({"kv_separator": 59}, "option 'kv_separator' must be a string"),
    ],
)
def test_a_bad_separator_is_refused_at_load(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("hmac", {**PADDLE, **change})


def test_the_separator_is_for_the_kv_format_only() -> None:
    with pytest.raises(ValueError, match="option 'kv_separator' only applies to format kv"):
        check_options("hmac", {"signature_header": "X-Sig", "kv_separator": ";"})
    with pytest.raises(ValueError, match="unknown option 'kv_separator'"):
        check_options("stripe", {"kv_separator": ";"})
