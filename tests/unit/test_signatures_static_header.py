"""Static shared secret in a header (AssemblyAI-style)."""

from __future__ import annotations

import pytest

from shared.signatures import SignatureError, Verified, check_options, verify

OPTIONS: dict[str, object] = {"header": "X-Webhook-Token"}
SECRET = "tok_9f2c1e7a4b6d"
OTHER_SECRET = "tok_00aa11bb22cc"
BODY = b'{"transcript_id":"t-1","status":"completed"}'
NOW = 1_700_000_000.0


def reason(
    headers: dict[str, str] | None = None,
    secrets: tuple[str, ...] = (SECRET,),
    options: dict[str, object] = OPTIONS,
) -> str:
    headers = {"X-Webhook-Token": SECRET} if headers is None else headers
    with pytest.raises(SignatureError) as info:
        verify("static_header", options, headers, BODY, secrets, NOW)
    return info.value.reason


def test_valid_token_verifies() -> None:
    result = verify("static_header", OPTIONS, {"x-webhook-token": SECRET}, BODY, [SECRET], NOW)
    assert result == Verified(
        scheme="static_header", event_id=None, id_signed=False, timestamp=None
    )


def test_missing_header() -> None:
    assert reason({"X-Other": SECRET}) == "missing_header"


def test_wrong_token() -> None:
    assert reason({"X-Webhook-Token": OTHER_SECRET}) == "bad_signature"


@pytest.mark.parametrize("value", [SECRET[:-1], SECRET + "0", SECRET.upper()])
def test_near_miss_tokens_fail(value: str) -> None:
    assert reason({"X-Webhook-Token": value}) == "bad_signature"


def test_non_ascii_token_fails_without_crashing() -> None:
    assert reason({"X-Webhook-Token": "tok_é\ud800"}) == "bad_signature"


@pytest.mark.parametrize("presented", [SECRET, OTHER_SECRET])
def test_rotated_secrets_either_passes(presented: str) -> None:
    result = verify(
        "static_header", OPTIONS, {"X-Webhook-Token": presented}, BODY, [SECRET, OTHER_SECRET], NOW
    )
    assert result.scheme == "static_header"


def test_empty_secrets() -> None:
    assert reason(secrets=()) == "no_secret"


def test_blank_secret_never_matches_blank_header() -> None:
    assert reason({"X-Webhook-Token": " "}, secrets=("", SECRET)) == "missing_header"


def test_error_carries_nothing_but_the_reason() -> None:
    with pytest.raises(SignatureError) as info:
        verify("static_header", OPTIONS, {"X-Webhook-Token": OTHER_SECRET}, BODY, [SECRET], NOW)
    rendered = f"{info.value} {info.value!r}"
    assert str(info.value) == "bad_signature"
    assert SECRET not in rendered and OTHER_SECRET not in rendered


def test_invalid_options_fail_verification_as_bad_options() -> None:
    assert reason(options={}) == "bad_options"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "'header' is required"),
        ({"header": "X Token"}, "'header' must be a valid HTTP header name"),
        ({"header": "X-Token", "value": "x"}, "'value'"),
    ],
)
def test_check_options_names_the_bad_key(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("static_header", options)
