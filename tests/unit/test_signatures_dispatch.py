"""The public entry points shared by every scheme."""

from __future__ import annotations

import dataclasses

import pytest

from shared.signatures import (
    REASONS,
    SCHEMES,
    SignatureError,
    Verified,
    check_options,
    check_secret,
    sign_github,
    verify,
)

BODY = b"{}"
NOW = 1_700_000_000.0

VALID_OPTIONS: dict[str, dict[str, object]] = {
    "standard_webhooks": {},
    "stripe": {},
    "github": {},
    "slack": {},
    "shopify": {},
    "generic_hmac": {"signature_header": "X-Sig"},
    "hmac": {"signature_header": "X-Sig"},
    "asymmetric": {"signature_header": "X-Sig", "algorithm": "ed25519"},
    "static_header": {"header": "X-Token"},
    "twilio": {},
    "mailgun": {},
    "jwt": {
        "algorithms": ["RS256"],
        "audience": "https://example.test/hook",
        "claims": {"email": "push@example.test"},
    },
}


def test_schemes_are_the_documented_ones() -> None:
    assert frozenset(VALID_OPTIONS) == SCHEMES


def test_reasons_are_the_documented_seven() -> None:
    assert {
        "missing_header",
        "malformed_header",
        "stale_timestamp",
        "future_timestamp",
        "bad_signature",
        "no_secret",
        "bad_options",
    } == REASONS


def test_signature_error_message_is_the_reason() -> None:
    error = SignatureError("bad_signature")
    assert (str(error), error.reason, error.args) == (
        "bad_signature",
        "bad_signature",
        ("bad_signature",),
    )


def test_signature_error_refuses_unknown_reasons() -> None:
    with pytest.raises(ValueError, match="unknown"):
        SignatureError("oops")  # type: ignore[arg-type]


def test_verified_is_immutable() -> None:
    result = Verified(scheme="github", event_id="d", id_signed=False, timestamp=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.event_id = "other"  # type: ignore[misc]


def test_check_options_unknown_scheme_names_it() -> None:
    with pytest.raises(ValueError, match="'hmac_v9'"):
        check_options("hmac_v9", {})


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_check_options_accepts_valid_options(scheme: str) -> None:
    check_options(scheme, VALID_OPTIONS[scheme])


def test_verify_unknown_scheme_is_bad_options() -> None:
    with pytest.raises(SignatureError) as info:
        verify("hmac_v9", {}, {}, BODY, ["s"], NOW)
    assert info.value.reason == "bad_options"


def test_verify_bad_options_keeps_the_config_error_for_operators() -> None:
    with pytest.raises(SignatureError) as info:
        verify("static_header", {"heder": "X"}, {}, BODY, ["s"], NOW)
    assert info.value.reason == "bad_options"
    assert "'heder'" in str(info.value.__cause__)


def test_negative_tolerance_is_bad_options() -> None:
    with pytest.raises(SignatureError) as info:
        verify("github", {}, {}, BODY, ["s"], NOW, tolerance_seconds=-1)
    assert info.value.reason == "bad_options"


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("secrets", [[], [""], ["  ", "\t"]])
def test_no_usable_secret_is_reported_before_looking_at_the_request(
    scheme: str, secrets: list[str]
) -> None:
    with pytest.raises(SignatureError) as info:
        verify(scheme, VALID_OPTIONS[scheme], {}, BODY, secrets, NOW)
    assert info.value.reason == "no_secret"


def test_a_single_string_is_not_a_list_of_secrets() -> None:
    headers = {"X-Hub-Signature-256": sign_github("s", BODY)}
    with pytest.raises(TypeError, match="sequence of strings") as info:
        verify("github", {}, headers, BODY, "s", NOW)
    assert "'s'" not in str(info.value)


def test_check_secret_rejects_blank_secrets() -> None:
    with pytest.raises(ValueError, match="blank"):
        check_secret("github", "   ")


def test_check_secret_accepts_any_nonblank_hmac_key() -> None:
    check_secret("stripe", "whsec_anything")
    check_secret("generic_hmac", "x")


def test_check_secret_unknown_scheme_does_not_quote_the_secret() -> None:
    with pytest.raises(ValueError, match="'hmac_v9'") as info:
        check_secret("hmac_v9", "super-secret-value")
    assert "super-secret-value" not in str(info.value)


def test_a_specs_cached_hash_agrees_with_its_equality() -> None:
    """The hash is computed once at construction; equal specs must still hash alike,
    and a changed copy must not keep the old hash (the matcher cache keys on it)."""
    from shared.signatures.hmac_family import parse_options

    first = parse_options({"signature_header": "X-Sig"})
    second = parse_options({"signature_header": "X-Sig"})
    assert first is not second and first == second and hash(first) == hash(second)
    changed = dataclasses.replace(first, id_in_body=True)
    assert changed != first
    assert hash(changed) == hash((changed.scheme, changed.envelope, changed.checks, True))
    assert hash(changed) != hash(first)
