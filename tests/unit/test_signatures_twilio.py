"""Twilio's `X-Twilio-Signature` (shared/signatures/twilio.py), checked against the
`twilio` package's own `RequestValidator`: every request it signs verifies
here, and every request it refuses is refused here."""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qsl, urlencode

import pytest
from twilio.request_validator import RequestValidator

from shared.signatures import SignatureError, verify
from shared.signatures.twilio import sign

TOKEN = "12345"  # the Auth Token of Twilio's documented example
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
# Twilio's documented example request (its security guide)
PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+12349013030",
    "Digits": "1234",
    "From": "+12349013030",
    "To": "+18005551212",
}
FORM = {"content-type": "application/x-www-form-urlencoded"}


def _verify(
    headers: dict[str, str], body: bytes, url: str = URL, secrets: tuple[str, ...] = (TOKEN,)
) -> object:
    return verify("twilio", {}, headers, body, list(secrets), now=0.0, url=url)


def test_the_documented_example_verifies_with_the_official_signature() -> None:
    official = RequestValidator(TOKEN).compute_signature(URL, PARAMS)
    body = urlencode(PARAMS).encode()
    verified = _verify({**FORM, "X-Twilio-Signature": official}, body)
    # the key of a form is what its signature covers: the URL and the sorted fields
    assert verified.scheme == "twilio" and verified.id_signed  # type: ignore[attr-defined]
    assert verified.event_id.startswith("twilio:")  # type: ignore[attr-defined]
    assert sign(TOKEN, URL, body, form=True) == official


@pytest.mark.parametrize(
    "params",
    [
        [("b", "2"), ("a", "1")],
        [("To", "+1"), ("To", "+2"), ("To", "+1")],  # repeated, a value twice
        [("Body", "héllo wörld ✓"), ("Empty", "")],
        [("a b", "c&d=e"), ("ü", "%")],
    ],
)
def test_forms_signed_by_the_official_validator_verify(params: list[tuple[str, str]]) -> None:
    body = urlencode(params).encode()
    multi: dict[str, list[str]] = {}
    for name, value in params:
        multi.setdefault(name, []).append(value)
    official = RequestValidator(TOKEN).compute_signature(URL, _MultiDict(multi))
    assert RequestValidator(TOKEN).validate(URL, _MultiDict(multi), official)
    _verify({**FORM, "X-Twilio-Signature": official}, body)


def test_a_changed_field_or_url_is_refused() -> None:
    body = urlencode(PARAMS).encode()
    signature = sign(TOKEN, URL, body, form=True)
    changed = urlencode({**PARAMS, "Digits": "1235"}).encode()
    for headers, sent, url in (
        ({**FORM, "X-Twilio-Signature": signature}, changed, URL),
        ({**FORM, "X-Twilio-Signature": signature}, body, URL.replace("foo=1", "foo=2")),
        ({**FORM, "X-Twilio-Signature": sign("other", URL, body, form=True)}, body, URL),
    ):
        assert not RequestValidator(TOKEN).validate(
            url, dict(_pairs(sent)), headers["X-Twilio-Signature"]
        )
        with pytest.raises(SignatureError) as refused:
            _verify(headers, sent, url)
        assert refused.value.reason == "bad_signature"


def test_the_url_verifies_with_its_port_or_without() -> None:
    """Twilio's servers sign either spelling; its validator takes both."""
    body = urlencode(PARAMS).encode()
    for signed_as in ("https://mycompany.com:443/myapp.php", "https://mycompany.com/myapp.php"):
        official = RequestValidator(TOKEN).compute_signature(signed_as, PARAMS)
        _verify({**FORM, "X-Twilio-Signature": official}, body, "https://mycompany.com/myapp.php")
        _verify(
            {**FORM, "X-Twilio-Signature": official}, body, "https://mycompany.com:443/myapp.php"
        )


def test_a_json_body_is_signed_through_its_digest_in_the_url() -> None:
    body = b'{"ResourceSid": "RE123", "Status": "completed"}'
    url = f"https://mycompany.com/hook?bodySHA256={hashlib.sha256(body).hexdigest()}"
    official = RequestValidator(TOKEN).compute_signature(url, {})
    assert RequestValidator(TOKEN).validate(url, body.decode(), official)
    headers = {"content-type": "application/json", "X-Twilio-Signature": official}
    _verify(headers, body, url)
    for sent, at in ((body + b" ", url), (body, "https://mycompany.com/hook")):
        with pytest.raises(SignatureError) as refused:
            _verify(headers, sent, at)
        assert refused.value.reason == "bad_signature"


def test_a_shared_key_signs_with_hmac_sha256() -> None:
    body = urlencode(PARAMS).encode()
    official = RequestValidator(TOKEN).compute_signature(URL, PARAMS, "HMAC_SHA256")
    settings = "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"
    headers = {
        **FORM,
        "X-Twilio-Signature": official,
        "X-Twilio-Webhooks-Signature-Settings": settings,
    }
    _verify(headers, body)
    with pytest.raises(SignatureError):  # the same signature read as HMAC-SHA1
        _verify({**FORM, "X-Twilio-Signature": official}, body)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_header"),
        ({"X-Twilio-Signature": "not base64!"}, "malformed_header"),
        (
            {
                "X-Twilio-Signature": "AAAA",
                "X-Twilio-Webhooks-Signature-Settings": "algorithm=HMAC_MD5",
            },
            "malformed_header",
        ),
    ],
)
def test_an_unreadable_signature_is_refused(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(SignatureError) as refused:
        _verify({**FORM, **headers}, urlencode(PARAMS).encode())
    assert refused.value.reason == reason


def test_a_form_that_does_not_decode_is_refused_not_raised() -> None:
    for body in (b"a=%FF%FE", b"&".join(b"k=v" for _ in range(1001))):
        signature = "A" * 28
        with pytest.raises(SignatureError) as refused:
            _verify({**FORM, "X-Twilio-Signature": signature}, body)
        assert refused.value.reason == "bad_signature"


def test_without_the_url_the_receiver_is_misconfigured() -> None:
    with pytest.raises(SignatureError) as refused:
        verify("twilio", {}, {**FORM, "X-Twilio-Signature": "AAAA"}, b"", [TOKEN], now=0.0)
    assert refused.value.reason == "bad_options"


class _MultiDict(dict[str, list[str]]):
    """What Flask hands Twilio's validator: `getall` for a repeated name."""

    def getall(self, name: str) -> list[str]:
        return self[name]


def _pairs(body: bytes) -> list[tuple[str, str]]:
    return parse_qsl(body.decode(), keep_blank_values=True)
