"""Configurable HMAC header: signing, verification and option checking."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from shared.signatures import SignatureError, Verified, check_options, sign_generic, verify

SECRET = "generic-secret-1"
OTHER_SECRET = "generic-secret-2"
TIMESTAMP = 1_700_000_000
EVENT_ID = "evt_42"
BODY = b'{"job":"j-1","state":"done"}'
NOW = TIMESTAMP + 10.0

# Every knob set away from its default, so each one is exercised.
OPTIONS: dict[str, object] = {
    "signature_header": "X-Signature",
    "algorithm": "sha512",
    "encoding": "base64",
    "prefix": "v1=",
    "signed_content": "{timestamp}:{id}:{body}",
    "timestamp_header": "X-Timestamp",
    "id_header": "X-Event-Id",
}


def expected(secret: str = SECRET, body: bytes = BODY) -> str:
    """Independent computation of the OPTIONS scheme (not via the library)."""
    content = f"{TIMESTAMP}:{EVENT_ID}:".encode() + body
    return "v1=" + base64.b64encode(hmac.new(secret.encode(), content, "sha512").digest()).decode()


def make_headers(signature: str | None = None, **overrides: str | None) -> dict[str, str]:
    headers: dict[str, str | None] = {
        "X-Signature": expected() if signature is None else signature,
        "X-Timestamp": str(TIMESTAMP),
        "X-Event-Id": EVENT_ID,
    }
    headers.update({name.replace("_", "-"): value for name, value in overrides.items()})
    return {name: value for name, value in headers.items() if value is not None}


def reason(
    headers: dict[str, str] | None = None,
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
    options: dict[str, object] = OPTIONS,
) -> str:
    with pytest.raises(SignatureError) as info:
        verify(
            "generic_hmac",
            options,
            make_headers() if headers is None else headers,
            body,
            secrets,
            now,
        )
    return info.value.reason


def test_sign_generic_matches_independent_computation() -> None:
    assert sign_generic(OPTIONS, SECRET, BODY, TIMESTAMP, EVENT_ID) == expected()


@pytest.mark.parametrize("algorithm", ["sha256", "sha512", "sha1"])
@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_each_algorithm_and_encoding(algorithm: str, encoding: str) -> None:
    options = {"signature_header": "X-Sig", "algorithm": algorithm, "encoding": encoding}
    digest = hmac.new(SECRET.encode(), BODY, algorithm).digest()
    encoded = digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()
    assert sign_generic(options, SECRET, BODY) == encoded
    result = verify("generic_hmac", options, {"x-sig": encoded}, BODY, [SECRET], NOW)
    assert result == Verified("generic_hmac", event_id=None, id_signed=False, timestamp=None)


def test_defaults_are_hex_sha256_over_the_body() -> None:
    signature = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    assert sign_generic({"signature_header": "X-Sig"}, SECRET, BODY) == signature


def test_other_braces_in_template_are_literal() -> None:
    options = {"signature_header": "X-Sig", "signed_content": "{x}{body}{0}"}
    literal = hmac.new(SECRET.encode(), b"{x}" + BODY + b"{0}", hashlib.sha256).hexdigest()
    assert sign_generic(options, SECRET, BODY) == literal
    assert verify("generic_hmac", options, {"X-Sig": literal}, BODY, [SECRET], NOW)


def test_non_ascii_literals_are_signed_as_utf8() -> None:
    options = {"signature_header": "X-Sig", "signed_content": "é·{body}·ü"}
    content = "é·".encode() + BODY + "·ü".encode()
    literal = hmac.new(SECRET.encode(), content, hashlib.sha256).hexdigest()
    assert sign_generic(options, SECRET, BODY) == literal
    assert verify("generic_hmac", options, {"X-Sig": literal}, BODY, [SECRET], NOW)


def test_a_template_that_is_not_valid_unicode_is_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="'signed_content' must be valid Unicode text"):
        check_options("hmac", {"signature_header": "X-Sig", "signed_content": "\ud800{body}"})


def test_valid_signature_verifies_with_signed_id_and_timestamp() -> None:
    result = verify("generic_hmac", OPTIONS, make_headers(), BODY, [SECRET], NOW)
    assert result == Verified(
        "generic_hmac", event_id=EVENT_ID, id_signed=True, timestamp=TIMESTAMP
    )


def test_id_outside_template_is_returned_unsigned() -> None:
    options = {"signature_header": "X-Sig", "id_header": "X-Event-Id"}
    headers = {"X-Sig": sign_generic(options, SECRET, BODY), "X-Event-Id": EVENT_ID}
    result = verify("generic_hmac", options, headers, BODY, [SECRET], NOW)
    assert (result.event_id, result.id_signed) == (EVENT_ID, False)
    del headers["X-Event-Id"]
    assert verify("generic_hmac", options, headers, BODY, [SECRET], NOW).event_id is None


def test_without_timestamp_header_no_window_applies() -> None:
    options = {"signature_header": "X-Sig"}
    headers = {"X-Sig": sign_generic(options, SECRET, BODY)}
    assert verify("generic_hmac", options, headers, BODY, [SECRET], 0.0).timestamp is None


@pytest.mark.parametrize("name", ["X-Signature", "X-Timestamp", "X-Event-Id"])
def test_missing_header(name: str) -> None:
    headers = make_headers()
    del headers[name]
    assert reason(headers) == "missing_header"


def test_malformed_timestamp() -> None:
    assert reason(make_headers(X_Timestamp="2023-11-14T22:13:20Z")) == "malformed_header"


@pytest.mark.parametrize("signature", ["v1=***", "v1=" + "A" * 5, " ".join(["v1=AAAA"] * 17)])
def test_malformed_signature_header(signature: str) -> None:
    assert reason(make_headers(signature)) == "malformed_header"


def test_entries_without_prefix_are_ignored() -> None:
    assert reason(make_headers(expected().removeprefix("v1="))) == "bad_signature"


def test_bad_signature() -> None:
    assert reason(make_headers("v1=" + base64.b64encode(bytes(64)).decode())) == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(secrets=(OTHER_SECRET,)) == "bad_signature"


def test_tampered_body() -> None:
    assert reason(body=BODY.replace(b"done", b"fail")) == "bad_signature"


def test_tampered_id() -> None:
    assert reason(make_headers(X_Event_Id="evt_43")) == "bad_signature"


def test_tampered_timestamp() -> None:
    assert reason(make_headers(X_Timestamp=str(TIMESTAMP + 1))) == "bad_signature"


@pytest.mark.parametrize("signer", [SECRET, OTHER_SECRET])
def test_rotated_secrets_either_signs(signer: str) -> None:
    headers = make_headers(expected(signer))
    assert verify("generic_hmac", OPTIONS, headers, BODY, [SECRET, OTHER_SECRET], NOW).event_id


@pytest.mark.parametrize("separator", [",", " ", ", "])
def test_several_signatures_in_header(separator: str) -> None:
    signature = separator.join([expected(OTHER_SECRET), "v0=whatever", expected()])
    assert verify("generic_hmac", OPTIONS, make_headers(signature), BODY, [SECRET], NOW).event_id


def test_stale_timestamp() -> None:
    assert reason(now=TIMESTAMP + 301) == "stale_timestamp"


def test_future_timestamp() -> None:
    assert reason(now=TIMESTAMP - 301) == "future_timestamp"


def test_forgery_with_stale_timestamp_reports_bad_signature() -> None:
    assert reason(body=b"forged", now=TIMESTAMP + 10_000) == "bad_signature"


def test_empty_secrets() -> None:
    assert reason(secrets=()) == "no_secret"


def test_error_carries_nothing_but_the_reason() -> None:
    with pytest.raises(SignatureError) as info:
        verify("generic_hmac", OPTIONS, make_headers(expected(OTHER_SECRET)), BODY, [SECRET], NOW)
    rendered = f"{info.value} {info.value!r}"
    assert str(info.value) == "bad_signature"
    for material in (SECRET, expected()[3:], expected(OTHER_SECRET)[3:], EVENT_ID):
        assert material not in rendered
    assert info.value.__context__ is None


def test_invalid_options_fail_verification_as_bad_options() -> None:
    assert reason(options={"algorithm": "sha256"}) == "bad_options"


def test_sign_generic_requires_the_signed_values() -> None:
    with pytest.raises(ValueError, match="timestamp"):
        sign_generic(OPTIONS, SECRET, BODY, event_id=EVENT_ID)
    with pytest.raises(ValueError, match="event_id"):
        sign_generic(OPTIONS, SECRET, BODY, timestamp=TIMESTAMP)


def test_check_options_accepts_full_and_minimal_options() -> None:
    check_options("generic_hmac", OPTIONS)
    check_options("generic_hmac", {"signature_header": "X-Sig"})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "'signature_header' is required"),
        ({"signature_header": "X Sig"}, "'signature_header' must be a valid HTTP header name"),
        ({"signature_header": 7}, "'signature_header' must be a string"),
        (
            {"signature_header": "X-Sig", "algorithm": "md5"},
            "'algorithm' must be one of sha1, sha256, sha512",
        ),
        (
            {"signature_header": "X-Sig", "encoding": "base32"},
            "'encoding' must be one of base64, hex",
        ),
        ({"signature_header": "X-Sig", "prefix": "sha256= "}, "'prefix'"),
        ({"signature_header": "X-Sig", "signed_content": "{timestamp}"}, "'signed_content'"),
        (
            {"signature_header": "X-Sig", "signed_content": "{timestamp}.{body}"},
            "'timestamp_header'",
        ),
        ({"signature_header": "X-Sig", "timestamp_header": "X-Ts"}, "'timestamp_header'"),
        ({"signature_header": "X-Sig", "signed_content": "{id}.{body}"}, "'id_header'"),
        ({"signature_header": "X-Sig", "signature_heder": "X-Sig"}, "'signature_heder'"),
    ],
)
def test_check_options_names_the_bad_key(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("generic_hmac", options)
