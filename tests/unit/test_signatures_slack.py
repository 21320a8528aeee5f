"""Slack (`v0=` over `v0:{timestamp}:{body}`): documented vector and slack_sdk's output."""

from __future__ import annotations

import pytest
from slack_sdk.signature import Clock, SignatureVerifier

from shared.signatures import SignatureError, Verified, check_options, sign, verify

# The example in Slack's "Verifying requests from Slack" documentation.
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TIMESTAMP = 1531420618
BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
    b"channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&"
    b"command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    b"%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
    b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
NOW = TIMESTAMP + 10.0


class FixedClock(Clock):
    def now(self) -> float:
        return NOW


def headers(signature: str = SIGNATURE, timestamp: int = TIMESTAMP) -> dict[str, str]:
    return {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": str(timestamp)}


def reason(h: dict[str, str], body: bytes = BODY, now: float = NOW, secret: str = SECRET) -> str:
    with pytest.raises(SignatureError) as info:
        verify("slack", {}, h, body, [secret], now)
    return info.value.reason


def test_documented_vector_verifies() -> None:
    assert verify("slack", {}, headers(), BODY, [SECRET], NOW) == Verified(
        "slack", event_id=None, id_signed=False, timestamp=TIMESTAMP
    )


def test_sign_reproduces_the_documented_vector() -> None:
    assert sign("slack", {}, SECRET, BODY, timestamp=TIMESTAMP) == SIGNATURE


def test_slack_sdk_agrees_both_ways() -> None:
    verifier = SignatureVerifier(SECRET, clock=FixedClock())
    body = b'{"type":"event_callback","event_id":"Ev1"}'
    ours = sign("slack", {}, SECRET, body, timestamp=TIMESTAMP)
    assert verifier.is_valid(body=body, timestamp=str(TIMESTAMP), signature=ours)
    theirs = verifier.generate_signature(timestamp=str(TIMESTAMP), body=body)
    assert theirs is not None
    assert verify("slack", {}, headers(theirs), body, [SECRET], NOW).timestamp == TIMESTAMP


def test_one_byte_body_change() -> None:
    assert reason(headers(), body=BODY.replace(b"foobar", b"foobaz")) == "bad_signature"


def test_wrong_secret() -> None:
    assert reason(headers(), secret="8f742231b10e8888abcd99yyyzzz85a6") == "bad_signature"


def test_tampered_timestamp() -> None:
    assert reason(headers(timestamp=TIMESTAMP + 1)) == "bad_signature"


@pytest.mark.parametrize(
    ("now", "expected"),
    [(TIMESTAMP + 301, "stale_timestamp"), (TIMESTAMP - 301, "future_timestamp")],
)
def test_outside_the_window(now: float, expected: str) -> None:
    assert reason(headers(), now=now) == expected


@pytest.mark.parametrize("missing", ["X-Slack-Signature", "X-Slack-Request-Timestamp"])
def test_missing_header(missing: str) -> None:
    h = headers()
    del h[missing]
    assert reason(h) == "missing_header"


def test_a_signature_without_the_v0_prefix_is_ignored() -> None:
    assert reason(headers(SIGNATURE.removeprefix("v0="))) == "bad_signature"


def test_header_names_can_be_overridden() -> None:
    options: dict[str, object] = {
        "signature_header": "X-Chat-Signature",
        "timestamp_header": "X-Chat-Timestamp",
    }
    h = {"X-Chat-Signature": SIGNATURE, "X-Chat-Timestamp": str(TIMESTAMP)}
    assert verify("slack", options, h, BODY, [SECRET], NOW).scheme == "slack"


def test_only_header_names_are_options() -> None:
    check_options("slack", {"signature_header": "X-A", "timestamp_header": "X-B"})
    with pytest.raises(ValueError, match="'prefix'"):
        check_options("slack", {"prefix": "v1="})
