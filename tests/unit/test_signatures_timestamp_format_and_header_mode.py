"""`timestamp_format` and `signature_header_mode`: two hmac-family options
HubSpot and Box need.

- HubSpot v3 signs `X-HubSpot-Request-Timestamp` in milliseconds; read as
  seconds it is 1000 times in the future, so every delivery was refused
  `future_timestamp` (or, with a huge tolerance, the window meant nothing).
- Box signs `BOX-DELIVERY-TIMESTAMP` as ISO 8601 text
  (`2027-01-15T08:00:00-08:00`), which no option could read: every delivery
  was `malformed_header`.
- Box sends `BOX-SIGNATURE-PRIMARY` and `BOX-SIGNATURE-SECONDARY`, each under
  its own key; as aliases they had to agree, so a Box delivery (whose two
  always differ) was `malformed_header`. With `signature_header_mode = "each"`
  either may verify, as Box's own `validate_message` does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from shared.signatures import SignatureError, check_options, verify

NOW = 1_800_000_000  # 2027-01-15T08:00:00Z
BODY = b'{"id":"evt_1","status":"done"}'

HUBSPOT: dict[str, object] = {
    "signature_header": "X-HubSpot-Signature-v3",
    "format": "base64",
    "timestamp_header": "X-HubSpot-Request-Timestamp",
    "timestamp_format": "unix_ms",
    "signed_content": "{method}{url}{body}{timestamp}",
}
URL = "https://hooks.example.test/jobwarden/webhooks/hubspot"

BOX: dict[str, object] = {
    "signature_header": ["BOX-SIGNATURE-PRIMARY", "BOX-SIGNATURE-SECONDARY"],
    "signature_header_mode": "each",
    "format": "base64",
    "timestamp_header": "BOX-DELIVERY-TIMESTAMP",
    "timestamp_format": "iso8601",
    "signed_content": "{body}{timestamp}",
}


def _b64_mac(key: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(key.encode(), content, hashlib.sha256).digest()).decode()


def _hubspot(ms: int, secret: str = "hs-secret") -> dict[str, str]:
    content = b"POST" + URL.encode() + BODY + str(ms).encode()
    return {
        "X-HubSpot-Signature-v3": _b64_mac(secret, content),
        "X-HubSpot-Request-Timestamp": str(ms),
    }


def _reason(scheme: str, options: dict[str, object], headers: dict[str, str], **kw: object) -> str:
    with pytest.raises(SignatureError) as info:
        verify(scheme, options, headers, BODY, ["hs-secret", "box-primary"], NOW, **kw)  # type: ignore[arg-type]
    return info.value.reason


def test_milliseconds_are_read_as_milliseconds() -> None:
    ms = NOW * 1000 + 999
    verified = verify(
        "hmac", HUBSPOT, _hubspot(ms), BODY, ["hs-secret"], NOW, method="POST", url=URL
    )
    assert verified.timestamp == NOW
    kw = {"method": "POST", "url": URL}
    assert _reason("hmac", HUBSPOT, _hubspot((NOW - 301) * 1000), **kw) == "stale_timestamp"
    assert _reason("hmac", HUBSPOT, _hubspot((NOW + 301) * 1000), **kw) == "future_timestamp"
    assert _reason("hmac", HUBSPOT, _hubspot(NOW * 1000, "other"), **kw) == "bad_signature"
    # the method and URL are signed
    assert _reason("hmac", HUBSPOT, _hubspot(NOW * 1000), method="PUT", url=URL) == "bad_signature"
    assert _reason("hmac", HUBSPOT, _hubspot(NOW * 1000), method="POST", url=URL + "/") == (
        "bad_signature"
    )


def _box(stamp: str, primary: str | None, secondary: str | None) -> dict[str, str]:
    headers = {"BOX-DELIVERY-TIMESTAMP": stamp}
    if primary is not None:
        headers["BOX-SIGNATURE-PRIMARY"] = _b64_mac(primary, BODY + stamp.encode())
    if secondary is not None:
        headers["BOX-SIGNATURE-SECONDARY"] = _b64_mac(secondary, BODY + stamp.encode())
    return headers


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2027-01-15T08:00:00Z", NOW),
        ("2027-01-15T00:00:00-08:00", NOW),
        ("2027-01-15T08:00:00.750+00:00", NOW),
        ("2027-01-15T07:59:00+00:00", NOW - 60),
    ],
)
def test_iso8601_timestamps_are_read_with_their_offset(stamp: str, seconds: int) -> None:
    verified = verify("hmac", BOX, _box(stamp, "box-primary", "x"), BODY, ["box-primary"], NOW)
    assert verified.timestamp == seconds


def test_either_box_key_verifies_and_neither_alone_is_enough_when_wrong() -> None:
    stamp = "2027-01-15T08:00:00Z"
    # rotation: we hold only the secondary key, the primary header is another key's
    verify("hmac", BOX, _box(stamp, "new-primary", "box-primary"), BODY, ["box-primary"], NOW)
    verify("hmac", BOX, _box(stamp, None, "box-primary"), BODY, ["box-primary"], NOW)
    assert _reason("hmac", BOX, _box(stamp, "a", "b")) == "bad_signature"
    assert _reason("hmac", BOX, {"BOX-DELIVERY-TIMESTAMP": stamp}) == "missing_header"
    assert _reason("hmac", BOX, _box("2027-01-15T07:54:59Z", "box-primary", None)) == (
        "stale_timestamp"
    )


@pytest.mark.parametrize(
    "stamp",
    [
        "2027-01-15T08:00:00",
        "1800000000",
        "2027-01-15",
        "now",
        "+2027-01-15T08:00:00Z",
        "٢٠٢٧-01-15T08:00:00Z",
    ],
)
def test_an_iso8601_timestamp_without_offset_or_not_a_time_is_malformed(stamp: str) -> None:
    assert _reason("hmac", BOX, _box(stamp, "box-primary", None)) == "malformed_header"


def test_aliases_still_must_agree_by_default() -> None:
    options = {key: value for key, value in BOX.items() if key != "signature_header_mode"}
    headers = _box("2027-01-15T08:00:00Z", "box-primary", "other")
    assert _reason("hmac", options, headers) == "malformed_header"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"signature_header": "X-Sig", "timestamp_format": "unix_ms"}, "needs a signed timestamp"),
        ({**HUBSPOT, "timestamp_format": "ms"}, "timestamp_format"),
        ({"signature_header": "X-Sig", "signature_header_mode": "each"}, "at least two"),
        (
            {"signature_header": ["X-A", "X-B"], "format": "kv", "signature_header_mode": "each"},
            "format hex or base64",
        ),
        ({"signature_header": ["X-A", "X-B"], "signature_header_mode": "all"}, "aliases, each"),
    ],
)
def test_misuse_is_refused_at_load(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("hmac", options)
