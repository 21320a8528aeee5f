"""The `hmac` family: options, header formats, key encodings, templates, limits."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from shared.signatures import (
    SignatureError,
    Verified,
    check_options,
    check_secret,
    generate_ed25519_keypair,
    sign,
    verify,
)

SECRET = "family-secret-1"
OTHER_SECRET = "family-secret-2"
TIMESTAMP = 1_700_000_000
NOW = TIMESTAMP + 5.0
BODY = b'{"job":"j-1","state":"done"}'
EVENT_ID = "evt_42"


def mac(content: bytes, key: bytes = SECRET.encode(), algorithm: str = "sha256") -> bytes:
    """Independent computation (not via the library)."""
    return hmac.new(key, content, getattr(hashlib, algorithm)).digest()


def reason(options: dict[str, object], headers: dict[str, str], **kwargs: object) -> str:
    body = kwargs.pop("body", BODY)
    secrets = kwargs.pop("secrets", [SECRET])
    now = kwargs.pop("now", NOW)
    with pytest.raises(SignatureError) as info:
        verify("hmac", options, headers, body, secrets, now, **kwargs)  # type: ignore[arg-type]
    return info.value.reason


# ----------------------------------------------------------------- formats


def test_default_is_bare_hex_sha256_over_the_body_with_a_raw_key() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    headers = {"X-Sig": mac(BODY).hex()}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW) == Verified(
        "hmac", event_id=None, id_signed=False, timestamp=None
    )


def test_kv_format_with_timestamp_in_the_signature_header() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Acme-Signature",
        "format": "kv",
        "timestamp_key": "ts",
        "signature_key": "sig",
        "signed_content": "{timestamp}.{body}",
    }
    digest = mac(f"{TIMESTAMP}.".encode() + BODY).hex()
    headers = {"X-Acme-Signature": f"ts={TIMESTAMP}, sig=00ff, v1=zz, sig={digest}"}
    result = verify("hmac", options, headers, BODY, [SECRET], NOW)
    assert result.timestamp == TIMESTAMP
    assert (
        sign("hmac", options, SECRET, BODY, timestamp=TIMESTAMP) == f"ts={TIMESTAMP},sig={digest}"
    )


def test_kv_format_with_base64_signatures() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Sig",
        "format": "kv",
        "signature_encoding": "base64",
    }
    headers = {"X-Sig": "v1=" + base64.b64encode(mac(BODY)).decode()}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)


@pytest.mark.parametrize(
    "header",
    [
        f"ts={TIMESTAMP},ts={TIMESTAMP},sig=00",  # ambiguous timestamp
        "sig=00",  # no timestamp
        f"ts={TIMESTAMP},sig",  # item without '='
        f"ts={TIMESTAMP},sig=xyz",  # not hex
        f"ts={TIMESTAMP},sig=",  # empty signature
    ],
)
def test_kv_format_malformed(header: str) -> None:
    options: dict[str, object] = {
        "signature_header": "X-Sig",
        "format": "kv",
        "timestamp_key": "ts",
        "signature_key": "sig",
        "signed_content": "{timestamp}.{body}",
    }
    assert reason(options, {"X-Sig": header}) == "malformed_header"


def test_versioned_format_several_signatures_at_the_sender() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "format": "versioned"}
    good = base64.b64encode(mac(BODY)).decode()
    bad = base64.b64encode(mac(BODY, key=b"rotated-out")).decode()
    headers = {"X-Sig": f"v1,{bad} v2,whatever v1,{good}"}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)
    assert sign("hmac", options, SECRET, BODY) == f"v1,{good}"


@pytest.mark.parametrize("header", ["v1", ",abc", "v1,***"])
def test_versioned_format_malformed(header: str) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "format": "versioned"}
    assert reason(options, {"X-Sig": header}) == "malformed_header"


@pytest.mark.parametrize("separator", [",", " ", ", "])
def test_bare_base64_with_prefix_and_several_signatures(separator: str) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "format": "base64", "prefix": "v0="}
    good = "v0=" + base64.b64encode(mac(BODY)).decode()
    other = "v0=" + base64.b64encode(mac(BODY, key=b"x")).decode()
    headers = {"X-Sig": separator.join([other, "sha1=ignored", good])}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)
    assert sign("hmac", options, SECRET, BODY) == good


def test_bare_entries_without_our_prefix_are_ignored() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "prefix": "sha256="}
    assert reason(options, {"X-Sig": mac(BODY).hex()}) == "bad_signature"


def test_uppercase_hex_is_accepted() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    assert verify("hmac", options, {"X-Sig": mac(BODY).hex().upper()}, BODY, [SECRET], NOW)


# ------------------------------------------------------- algorithms and keys


@pytest.mark.parametrize("algorithm", ["sha256", "sha512", "sha1"])
def test_each_algorithm(algorithm: str) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "algorithm": algorithm}
    headers = {"X-Sig": mac(BODY, algorithm=algorithm).hex()}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)
    assert sign("hmac", options, SECRET, BODY) == headers["X-Sig"]


def test_a_digest_of_another_algorithm_does_not_verify() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "algorithm": "sha512"}
    assert reason(options, {"X-Sig": mac(BODY, algorithm="sha256").hex()}) == "bad_signature"


KEY = b"\x00\x01binary key \xff\xfe"


@pytest.mark.parametrize(
    ("encoding", "secret"),
    [
        ("raw", KEY.decode("latin-1")),
        ("base64", base64.b64encode(KEY).decode()),
        ("base64", base64.b64encode(KEY).decode().rstrip("=")),  # pasted unpadded
        ("hex", KEY.hex()),
        ("whsec", "whsec_" + base64.b64encode(KEY).decode()),
    ],
)
def test_key_encodings_decode_to_the_key_bytes(encoding: str, secret: str) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "key_encoding": encoding}
    key = secret.encode() if encoding == "raw" else KEY
    assert verify("hmac", options, {"X-Sig": mac(BODY, key=key).hex()}, BODY, [secret], NOW)


def test_whsec_secret_keys_with_decoded_bytes_not_its_text() -> None:
    # The reported Svix problem: generic_hmac keys with the text "whsec_...".
    secret = "whsec_" + base64.b64encode(KEY).decode()
    text_keyed = mac(BODY, key=secret.encode()).hex()
    whsec: dict[str, object] = {"signature_header": "X-Sig", "key_encoding": "whsec"}
    assert reason(whsec, {"X-Sig": text_keyed}, secrets=[secret]) == "bad_signature"
    assert verify("hmac", whsec, {"X-Sig": mac(BODY, key=KEY).hex()}, BODY, [secret], NOW)


@pytest.mark.parametrize("encoding", ["base64", "hex", "whsec"])
def test_secrets_that_do_not_decode_are_skipped(encoding: str) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "key_encoding": encoding}
    assert reason(options, {"X-Sig": "00"}, secrets=["***not a key***"]) == "no_secret"


@pytest.mark.parametrize(
    ("encoding", "secret", "message"),
    [
        ("base64", "***", "not non-empty base64"),
        ("hex", "xyz", "not non-empty hex"),
        ("whsec", "c2VjcmV0", "must start with whsec_"),
        ("whsec", "whsec_***", "whsec_ secret is not non-empty base64"),
    ],
)
def test_check_secret_with_options_names_the_problem(
    encoding: str, secret: str, message: str
) -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "key_encoding": encoding}
    with pytest.raises(ValueError, match=message) as info:
        check_secret("hmac", secret, options)
    assert secret not in str(info.value)


def test_check_secret_without_options_checks_only_blankness() -> None:
    check_secret("hmac", "anything")
    with pytest.raises(ValueError, match="blank"):
        check_secret("hmac", " ")


# ----------------------------------------------------------------- templates


def test_template_with_id_and_timestamp_headers() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Sig",
        "timestamp_header": "X-Ts",
        "id_header": "X-Id",
        "signed_content": "{id}:{timestamp}:{body}",
    }
    digest = mac(f"{EVENT_ID}:{TIMESTAMP}:".encode() + BODY).hex()
    headers = {"X-Sig": digest, "X-Ts": str(TIMESTAMP), "X-Id": EVENT_ID}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW) == Verified(
        "hmac", event_id=EVENT_ID, id_signed=True, timestamp=TIMESTAMP
    )
    assert reason(options, {**headers, "X-Id": "evt_43"}) == "bad_signature"


METHOD_URL: dict[str, object] = {
    "signature_header": "X-Square-Signature",
    "format": "base64",
    "signed_content": "{method} {url}\n{body}",
}
URL = "https://hooks.example.test/webhooks/square?x=1"


def test_method_and_url_are_signed_when_the_caller_passes_them() -> None:
    digest = base64.b64encode(mac(f"POST {URL}\n".encode() + BODY)).decode()
    headers = {"X-Square-Signature": digest}
    assert verify("hmac", METHOD_URL, headers, BODY, [SECRET], NOW, method="POST", url=URL)
    assert reason(METHOD_URL, headers, method="PUT", url=URL) == "bad_signature"
    assert reason(METHOD_URL, headers, method="POST", url=URL + "2") == "bad_signature"
    assert sign("hmac", METHOD_URL, SECRET, BODY, method="POST", url=URL) == digest


def test_method_or_url_missing_at_verify_is_our_configuration() -> None:
    check_options("hmac", METHOD_URL)  # supported, so accepted at config load
    assert reason(METHOD_URL, {}, url=URL) == "bad_options"
    assert reason(METHOD_URL, {}, method="POST") == "bad_options"


def test_other_braces_are_literal() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig", "signed_content": "{x}{body}{0}"}
    headers = {"X-Sig": mac(b"{x}" + BODY + b"{0}").hex()}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)


# ------------------------------------------------------------------- headers


def test_header_aliases_read_either_name() -> None:
    options: dict[str, object] = {"signature_header": ["X-Sig", "X-Legacy-Sig"]}
    digest = mac(BODY).hex()
    assert verify("hmac", options, {"x-legacy-sig": digest}, BODY, [SECRET], NOW)
    assert verify("hmac", options, {"X-Sig": digest, "X-Legacy-Sig": digest}, BODY, [SECRET], NOW)


def test_aliases_that_disagree_are_malformed() -> None:
    options: dict[str, object] = {"signature_header": ["X-Sig", "X-Legacy-Sig"]}
    headers = {"X-Sig": mac(BODY).hex(), "X-Legacy-Sig": "00"}
    assert reason(options, headers) == "malformed_header"


def test_oversized_header_is_malformed_before_any_work() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    assert reason(options, {"X-Sig": "0" * 5000}) == "malformed_header"


def test_too_many_signatures_are_malformed() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    assert reason(options, {"X-Sig": " ".join([mac(BODY).hex()] * 17)}) == "malformed_header"


def test_sixteen_signatures_are_fine() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    headers = {"X-Sig": " ".join(["00" * 32] * 15 + [mac(BODY).hex()])}
    assert verify("hmac", options, headers, BODY, [SECRET], NOW)


def test_error_never_carries_the_secret_or_the_expected_mac() -> None:
    options: dict[str, object] = {"signature_header": "X-Sig"}
    with pytest.raises(SignatureError) as info:
        verify("hmac", options, {"X-Sig": mac(BODY, key=b"x").hex()}, BODY, [SECRET], NOW)
    rendered = f"{info.value} {info.value!r} {info.value.args}"
    assert SECRET not in rendered and mac(BODY).hex() not in rendered
    assert info.value.__context__ is None and info.value.__cause__ is None


# ------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "'signature_header' is required"),
        ({"signature_header": ["X-A", "x-a"]}, "'signature_header' lists a header name twice"),
        ({"signature_header": []}, "'signature_header' must list between 1 and 4"),
        ({"signature_header": ["X-A", 3]}, "'signature_header' must be a string"),
        ({"signature_header": "X-Sig", "format": "xml"}, "'format' must be one of"),
        ({"signature_header": "X-Sig", "algorithm": "md5"}, "'algorithm' must be one of"),
        ({"signature_header": "X-Sig", "key_encoding": "utf16"}, "'key_encoding' must be one of"),
        ({"signature_header": "X-Sig", "signature_key": "v1"}, "'signature_key' only applies"),
        ({"signature_header": "X-Sig", "signature_encoding": "hex"}, "'signature_encoding'"),
        (
            {"signature_header": "X-Sig", "format": "versioned", "timestamp_key": "t"},
            "'timestamp_key' only applies to format kv",
        ),
        ({"signature_header": "X-Sig", "format": "kv", "prefix": "v1="}, "'prefix' only applies"),
        ({"signature_header": "X-Sig", "prefix": "a,b"}, "'prefix' must not contain"),
        ({"signature_header": "X-Sig", "signed_content": "{timestamp}"}, "must contain {body}"),
        ({"signature_header": "X-Sig", "signed_content": "x" * 300}, "'signed_content' must be"),
        (
            {"signature_header": "X-Sig", "signed_content": "{timestamp}.{body}"},
            "'timestamp_header'",
        ),
        ({"signature_header": "X-Sig", "timestamp_header": "X-Ts"}, "'timestamp_header'"),
        (
            {
                "signature_header": "X-Sig",
                "format": "kv",
                "timestamp_key": "t",
                "timestamp_header": "X-Ts",
                "signed_content": "{timestamp}{body}",
            },
            "not both",
        ),
        (
            {
                "signature_header": "X-Sig",
                "format": "kv",
                "timestamp_key": "v1",
                "signed_content": "{timestamp}{body}",
            },
            "'timestamp_key' must differ",
        ),
        (
            {"signature_header": "X-Sig", "format": "kv", "signature_key": "v 1"},
            "'signature_key' must be letters",
        ),
        ({"signature_header": "X-Sig", "signed_content": "{id}{body}"}, "'id_header' is required"),
        ({"signature_header": "X-Sig", "encoding": "hex"}, "unknown option 'encoding'"),
    ],
)
def test_check_options_names_the_bad_key(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("hmac", options)


def test_invalid_options_fail_verification_as_bad_options_with_the_cause() -> None:
    with pytest.raises(SignatureError) as info:
        verify("hmac", {"signature_header": "X-Sig", "algorithm": "md5"}, {}, BODY, [SECRET], NOW)
    assert info.value.reason == "bad_options"
    assert "'algorithm'" in str(info.value.__cause__)


def test_sign_refuses_missing_signed_values() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Sig",
        "timestamp_header": "X-Ts",
        "signed_content": "{timestamp}{body}",
    }
    with pytest.raises(ValueError, match="pass a timestamp"):
        sign("hmac", options, SECRET, BODY)


def test_sign_with_a_public_key_scheme_needs_the_private_key() -> None:
    _, public = generate_ed25519_keypair()
    options = {"signature_header": "X-Sig", "algorithm": "ed25519"}
    with pytest.raises(ValueError, match="PEM") as info:
        sign("asymmetric", options, public, BODY)
    assert public not in str(info.value)
