"""A second read of `scheme = "twilio"` (shared/signatures/twilio.py): where it
accepted what Twilio never signed, or read Twilio's headers otherwise than
Twilio's own `RequestValidator` does."""

from __future__ import annotations

import hashlib

import pytest
from twilio.request_validator import RequestValidator, get_signature_algorithm

from shared.signatures import SignatureError, verify

TOKEN = "12345"
FORM = {"content-type": "application/x-www-form-urlencoded"}
PARAMS = {"CallSid": "CA1234567890ABCDE", "Digits": "1234"}
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"


def _verify(headers: dict[str, str], body: bytes, url: str) -> object:
    return verify("twilio", {}, headers, body, [TOKEN], now=0.0, url=url)


@pytest.mark.parametrize("body", [b"", b"&", b"&&&&"])
def test_a_json_deliverys_signature_verifies_no_form_sent_in_its_place(body: bytes) -> None:
    """A JSON delivery is signed over its URL alone (the body through `bodySHA256`);
    sent again as a form that holds no field, the signed text was the same URL,
    so it verified and a body Twilio never sent (`{}`) was stored. Twilio sends
    `bodySHA256` with JSON bodies only: wherever it is, the body must match it."""
    sent = b'{"RecordingSid": "RE123", "RecordingStatus": "completed"}'
    url = f"https://mycompany.com/hook?bodySHA256={hashlib.sha256(sent).hexdigest()}"
    signature = RequestValidator(TOKEN).compute_signature(url, {})
    _verify({"content-type": "application/json", "X-Twilio-Signature": signature}, sent, url)
    with pytest.raises(SignatureError) as refused:
        _verify({**FORM, "X-Twilio-Signature": signature}, body, url)
    assert refused.value.reason == "bad_signature"


def test_the_first_algorithm_the_settings_name_is_the_one_used() -> None:
    """Twilio's `get_signature_algorithm` takes the first `algorithm=`; reading the
    last, a request its validator accepts was refused here (and the other way)."""
    settings = "key=webhooks_sharedkey_1,algorithm=HMAC_SHA1,algorithm=HMAC_SHA256"
    algorithm = get_signature_algorithm(settings)
    assert algorithm == "HMAC_SHA1"
    official = RequestValidator(TOKEN).compute_signature(URL, PARAMS, algorithm)
    assert RequestValidator(TOKEN).validate(URL, PARAMS, official, algorithm)
    from urllib.parse import urlencode

    headers = {
        **FORM,
        "X-Twilio-Signature": official,
        "X-Twilio-Webhooks-Signature-Settings": settings,
    }
    _verify(headers, urlencode(PARAMS).encode(), URL)
