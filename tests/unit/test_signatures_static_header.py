"""Static shared secret in a header (AssemblyAI-style) or in the URL's query (Luma)."""

from __future__ import annotations

import json

import pytest

from shared.signatures import (
    SignatureError,
    Verified,
    check_options,
    check_secret,
    signs_url,
    verify,
)
from shared.signatures.static_header import scrub

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


# ------------------------------------------------------------ the token in the URL's query

QUERY: dict[str, object] = {"query": "token"}
URL_TOKEN = "t0k-9f2c1e7a4b6d8e0f1a2b3c4d"
HOOK = "https://hooks.example.com/webhooks/luma"


def query_reason(url: str | None, secrets: tuple[str, ...] = (URL_TOKEN,)) -> str:
    with pytest.raises(SignatureError) as info:
        verify("static_header", QUERY, {}, BODY, secrets, NOW, url=url)
    return info.value.reason


@pytest.mark.parametrize(
    "url",
    [
        f"{HOOK}?token={URL_TOKEN}",
        f"{HOOK}?op=op_1&token={URL_TOKEN}",
        f"{HOOK}?token=%74{URL_TOKEN[1:]}",  # percent-encoded by the sender
    ],
)
def test_a_token_in_the_query_verifies(url: str) -> None:
    result = verify("static_header", QUERY, {}, BODY, [URL_TOKEN], NOW, url=url)
    assert result == Verified(
        scheme="static_header", event_id=None, id_signed=False, timestamp=None
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"{HOOK}?token=guess", "bad_signature"),
        (f"{HOOK}?token={URL_TOKEN[:-1]}", "bad_signature"),
        (HOOK, "missing_header"),
        (f"{HOOK}?token=", "missing_header"),
        (f"{HOOK}?Token={URL_TOKEN}", "missing_header"),  # names are case-sensitive
        # two values: which one we read must not be the sender's choice
        (f"{HOOK}?token={URL_TOKEN}&token=guess", "malformed_header"),
        (f"{HOOK}?token={URL_TOKEN}&token={URL_TOKEN}", "malformed_header"),
        (None, "bad_options"),  # the receiver was not told its URL
    ],
)
def test_a_wrong_missing_or_doubled_query_token_fails(url: str | None, expected: str) -> None:
    assert query_reason(url) == expected


def test_the_header_is_not_read_when_the_token_travels_in_the_query() -> None:
    with pytest.raises(SignatureError) as info:
        verify("static_header", QUERY, {"token": URL_TOKEN}, BODY, [URL_TOKEN], NOW, url=HOOK)
    assert info.value.reason == "missing_header"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"query": "token", "header": "X-Token"}, "exclude each other"),
        ({"query": "op"}, "as a credential"),  # its echoes would be stored unredacted
        ({"query": "to ken"}, "query parameter name"),
        ({"query": ""}, "query parameter name"),
        ({"query": 7}, "must be a string"),
    ],
)
def test_check_options_of_a_query_token(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("static_header", options)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("short-token-123", "24 to 256"),
        ("a" * 257, "24 to 256"),
        ("tok/with?url&chars=" + "x" * 20, "as written"),
        ("tok with spaces " + "x" * 20, "as written"),
        # some encoders percent-encode `~` (and `.`): its echoes would read otherwise
        ("tok~" + "x" * 24, "as written"),
        ("tok." + "x" * 24, "as written"),
    ],
)
def test_a_query_token_must_be_url_safe_and_long(secret: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_secret("static_header", secret, QUERY)
    check_secret("static_header", secret.strip() or "x", OPTIONS)  # a header's is not bound


def test_a_query_token_signs_no_url() -> None:
    # read from the request's own query, never from a configured URL
    assert not signs_url("static_header", QUERY) and not signs_url("static_header", OPTIONS)


def test_scrub_replaces_every_echo_of_the_token() -> None:
    body = json.dumps(
        {"request": {"callback_url": f"{HOOK}?token={URL_TOKEN}"}, "note": URL_TOKEN}
    ).encode()
    scrubbed = scrub(body, [OTHER_SECRET, URL_TOKEN])
    assert URL_TOKEN.encode() not in scrubbed
    assert json.loads(scrubbed) == {
        "request": {"callback_url": f"{HOOK}?token=[redacted]"},
        "note": "[redacted]",
    }


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-be", "utf-32"])
def test_scrub_finds_the_token_in_every_json_encoding(encoding: str) -> None:
    body = json.dumps({"callback_url": f"{HOOK}?token={URL_TOKEN}"}).encode(encoding)
    scrubbed = scrub(body, [URL_TOKEN])
    assert URL_TOKEN not in scrubbed.decode(encoding)
    assert json.loads(scrubbed.decode(encoding)) == {"callback_url": f"{HOOK}?token=[redacted]"}


@pytest.mark.parametrize(
    "echo",
    [
        "".join(f"\\u{ord(c):04x}" for c in URL_TOKEN),  # every character escaped
        "\\u0074" + URL_TOKEN[1:],  # one
        "%74" + URL_TOKEN[1:],  # percent-encoded inside the string
    ],
)
def test_scrub_finds_the_token_written_otherwise(echo: str) -> None:
    """An encoder that escapes what it need not: the token is found decoded, and
    the document written back without it."""
    body = ('{"request":{"callback_url":"' + HOOK + "?token=" + echo + '"},"n":3}').encode()
    scrubbed = scrub(body, [URL_TOKEN])
    document = json.loads(scrubbed)
    assert document == {"request": {"callback_url": f"{HOOK}?token=[redacted]"}, "n": 3}


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-32-be", "latin-1"])
def test_scrub_finds_the_token_written_otherwise_in_any_encoding(encoding: str) -> None:
    """Escaped in a UTF-16 or UTF-32 body, or in bytes that are no UTF-8 (stored in
    base64, which gives the token back): it was found in UTF-8 text only. The
    reconciler scrubs provider answers with this too (a fuzzer's find)."""
    echo = "\\u0074" + URL_TOKEN[1:]
    text = '{"request":{"callback_url":"' + HOOK + "?token=" + echo + '"},"note":"caf\xe9"}'
    scrubbed = scrub(text.encode(encoding), [URL_TOKEN])
    document = json.loads(scrubbed.decode(encoding))
    assert document == {"request": {"callback_url": f"{HOOK}?token=[redacted]"}, "note": "caf\xe9"}


def test_scrub_leaves_a_body_without_the_token_as_it_came() -> None:
    body = b'{"note":"caf\\u00e9 50%","n":1.10}'
    assert scrub(body, [URL_TOKEN]) == body


def test_scrub_changes_only_the_tokens_span() -> None:
    """Found written otherwise, the token alone is replaced: a document written
    back whole had its other links percent-decoded (another URL), its numbers
    rounded, and a deeply nested one raised."""
    echo = "%74" + URL_TOKEN[1:]
    body = (
        '{"cb":"https://h/p?next=a%2Bb%26c%3Dd&token=' + echo + '","big":12345678901234567890.123,'
        '"e":1E2,"deep":' + "[" * 800 + "]" * 800 + "}"
    ).encode()
    expected = body.replace(echo.encode(), b"[redacted]")
    assert scrub(body, [URL_TOKEN]) == expected
