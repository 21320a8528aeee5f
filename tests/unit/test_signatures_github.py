"""GitHub-style `X-Hub-Signature-256`: official vector plus each failure mode."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from shared.signatures import SignatureError, Verified, check_options, sign_github, verify

# Official vector from GitHub's "Validating webhook deliveries" documentation.
SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
OFFICIAL_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
OTHER_SECRET = "a different secret"
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
NOW = 1_700_000_000.0


def make_headers(signature: str | None = OFFICIAL_SIGNATURE) -> dict[str, str]:
    headers = {"X-GitHub-Delivery": DELIVERY}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return headers


def reason(
    headers: dict[str, str] | None = None, body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> str:
    with pytest.raises(SignatureError) as info:
        verify("github", {}, make_headers() if headers is None else headers, body, secrets, NOW)
    return info.value.reason


def test_sign_reproduces_official_vector() -> None:
    assert sign_github(SECRET, BODY) == OFFICIAL_SIGNATURE


def test_official_vector_verifies_with_unsigned_delivery_id() -> None:
    result = verify("github", {}, make_headers(), BODY, [SECRET], NOW)
    assert result == Verified(scheme="github", event_id=DELIVERY, id_signed=False, timestamp=None)


def test_missing_delivery_header_still_verifies_without_id() -> None:
    headers = {"X-Hub-Signature-256": OFFICIAL_SIGNATURE}
    assert verify("github", {}, headers, BODY, [SECRET], NOW).event_id is None


def test_uppercase_hex_is_accepted() -> None:
    upper = "sha256=" + OFFICIAL_SIGNATURE.removeprefix("sha256=").upper()
    assert verify("github", {}, make_headers(upper), BODY, [SECRET], NOW).event_id == DELIVERY


def test_missing_signature_header() -> None:
    assert reason(make_headers(None)) == "missing_header"


@pytest.mark.parametrize(
    "signature",
    [
        OFFICIAL_SIGNATURE.removeprefix("sha256="),  # no prefix
        "sha1=" + OFFICIAL_SIGNATURE.removeprefix("sha256="),
        "sha256=not-hex",
        "sha256=",
    ],
)
def test_malformed_header(signature: str) -> None:
    assert reason(make_headers(signature)) == "malformed_header"


def test_bad_signature() -> None:
    assert reason(make_headers(OFFICIAL_SIGNATURE[:-1] + "0")) == "bad_signature"


def test_truncated_signature_does_not_verify() -> None:
    assert reason(make_headers(OFFICIAL_SIGNATURE[:-2])) == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(secrets=(OTHER_SECRET,)) == "bad_signature"


def test_tampered_body() -> None:
    assert reason(body=b"Hello, World?") == "bad_signature"


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET])
def test_rotated_secrets_either_signs(signer: str) -> None:
    headers = make_headers(sign_github(signer, BODY))
    assert verify("github", {}, headers, BODY, [OTHER_SECRET, SECRET], NOW).event_id == DELIVERY


def test_nothing_is_timed_so_an_old_capture_still_verifies() -> None:
    # Documents the scheme's weakness: replay protection is dedupe on the id only.
    result = verify("github", {}, make_headers(), BODY, [SECRET], NOW + 10 * 365 * 86400)
    assert result.id_signed is False


def test_empty_secrets() -> None:
    assert reason(secrets=()) == "no_secret"


def test_empty_key_signature_is_not_accepted() -> None:
    assert reason(make_headers(sign_github("", BODY)), secrets=("", SECRET)) == "bad_signature"


def test_error_carries_nothing_but_the_reason() -> None:
    forged = sign_github(OTHER_SECRET, BODY)
    with pytest.raises(SignatureError) as info:
        verify("github", {}, make_headers(forged), BODY, [SECRET], NOW)
    rendered = f"{info.value} {info.value!r}"
    assert str(info.value) == "bad_signature"
    for material in (SECRET, OFFICIAL_SIGNATURE[7:], forged[7:], DELIVERY):
        assert material not in rendered
    assert info.value.__context__ is None


def test_check_options_allows_only_header_names() -> None:
    check_options("github", {})
    check_options("github", {"signature_header": "X-Gitea-Hub", "id_header": "X-Request-Id"})
    with pytest.raises(ValueError, match="'prefix'"):
        check_options("github", {"prefix": "sha1="})


def test_header_names_can_be_overridden() -> None:
    # A sender signing exactly like GitHub under headers of its own.
    options = {"signature_header": "X-Forge-Signature", "id_header": "X-Forge-Delivery"}
    headers = {"X-Forge-Signature": OFFICIAL_SIGNATURE, "X-Forge-Delivery": DELIVERY}
    result = verify("github", options, headers, BODY, [SECRET], NOW)
    assert result == Verified(scheme="github", event_id=DELIVERY, id_signed=False, timestamp=None)
    with pytest.raises(SignatureError) as info:
        verify("github", options, make_headers(), BODY, [SECRET], NOW)
    assert info.value.reason == "missing_header"


def test_legacy_sha1_header_through_the_hmac_family() -> None:
    # GitHub's older `X-Hub-Signature: sha1=<hex>`, per its documented algorithm.
    options: dict[str, object] = {
        "signature_header": "X-Hub-Signature",
        "algorithm": "sha1",
        "prefix": "sha1=",
        "id_header": "X-GitHub-Delivery",
    }
    signature = "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest()
    headers = {"X-Hub-Signature": signature, "X-GitHub-Delivery": DELIVERY}
    result = verify("hmac", options, headers, BODY, [SECRET], NOW)
    assert result == Verified(scheme="hmac", event_id=DELIVERY, id_signed=False, timestamp=None)
    with pytest.raises(SignatureError) as info:
        verify("hmac", options, headers, b"Hello, World?", [SECRET], NOW)
    assert info.value.reason == "bad_signature"
