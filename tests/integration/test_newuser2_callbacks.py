"""A new user's Zoom, Twilio, Mailgun and Slack callbacks, set up from README.md
alone, each signed as its provider documents it (Zoom's recipe, Twilio's own
`RequestValidator`, Mailgun's recipe, Slack's `slack_sdk`) and posted to the
real receiver over a loopback socket; and what `providers check` says of each."""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

from shared.cli import providers as cli_providers
from shared.ledger.states import LocalState
from shared.providers.errors import ConfigError
from shared.signatures import SignatureError, challenges
from shared.signatures.challenges import ChallengeAnswer
from shared.signatures.mailgun import sign as mailgun_sign
from shared.signatures.twilio import sign as twilio_sign
from tests.harness import webhook_rig
from tests.integration.test_more_official_signers import REJECTED, _providers, _receiver
from tests.integration.test_receiver_support import JSON_HEADERS, NOW, stored_events

ZOOM_SECRET = "zoom-webhook-secret-token"
TWILIO_TOKEN = "twilio-auth-token-0123456789abcdef"
MAILGUN_KEY = "mailgun-http-webhook-signing-key"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
TWILIO_URL = "https://hooks.example.test/jobwarden/webhooks/twilio"
FORM = "application/x-www-form-urlencoded"

ZOOM_TOML = """
[providers.zoom.webhooks]
scheme = "slack"
options = { signature_header = "x-zm-signature", timestamp_header = "x-zm-request-timestamp" }
challenge = "zoom"
secrets_env = "ZOOM_WEBHOOK_SECRET"
job_id = "/payload/object/uuid"
state = "/event"
[providers.zoom.webhooks.state_map]
"recording.completed" = "succeeded"
"""
TWILIO_TOML = """
[providers.twilio.webhooks]
scheme = "twilio"
secrets_env = "TWILIO_AUTH_TOKEN"
job_id = "/RecordingSid"
state = "/RecordingStatus"
[providers.twilio.webhooks.state_map]
completed = "succeeded"
absent = "failed"
"""
MAILGUN_TOML = """
[providers.mailgun.webhooks]
scheme = "mailgun"
secrets_env = "MAILGUN_SIGNING_KEY"
job_id = "/event-data/message/headers/message-id"
state = "/event-data/event"
[providers.mailgun.webhooks.state_map]
delivered = "succeeded"
failed = "failed"
"""
SLACK_TOML = """
[providers.slack.webhooks]
scheme = "slack"
challenge = "slack"
secrets_env = "SLACK_SIGNING_SECRET"
job_id = "/event/file_id"
state = "/event/type"
"""

# ------------------------------------------------------------------ signers


def zoom_delivery(
    document: dict[str, Any], *, at: int = NOW, secret: str = ZOOM_SECRET
) -> tuple[bytes, dict[str, str]]:
    """Zoom's documented recipe: `v0=` hex HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    body = json.dumps(document).encode()
    message = f"v0:{at}:".encode() + body
    signature = "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    headers = {
        **JSON_HEADERS,
        "x-zm-signature": signature,
        "x-zm-request-timestamp": str(at),
    }
    return body, headers


ZOOM_RECORDING = {
    "event": "recording.completed",
    "event_ts": 1626230691572,
    "payload": {
        "account_id": "AAAAAABBBB",
        "object": {"uuid": "4444AAAiAAAAAiAiAiiAii==", "id": 123456789, "topic": "standup"},
    },
}
PLAIN_TOKEN = "qgg8vlvZRS6UYooatFL8Aw"
ZOOM_CHALLENGE = {
    "payload": {"plainToken": PLAIN_TOKEN},
    "event_ts": 1654503849680,
    "event": "endpoint.url_validation",
}


def twilio_form(fields: dict[str, str], token: str = TWILIO_TOKEN) -> tuple[bytes, dict[str, str]]:
    signature = RequestValidator(token).compute_signature(TWILIO_URL, fields)
    return urlencode(fields).encode(), {"content-type": FORM, "X-Twilio-Signature": signature}


TWILIO_FIELDS = {
    "AccountSid": "AC0123",
    "CallSid": "CA0123",
    "RecordingSid": "RE0123456789",
    "RecordingStatus": "completed",
    "RecordingUrl": "https://api.twilio.com/2010-04-01/Accounts/AC0123/Recordings/RE0123456789",
    "RecordingDuration": "42",
}


def mailgun_delivery(
    event: str, token: str = "a8ce0edb2dd8301dea6c90a6d1b8c6fd4e2d2a5e5f3d5f27d5", at: int = NOW
) -> bytes:
    """Mailgun's recipe: hex HMAC-SHA256 of timestamp + token under the signing key
    (checked against a plain `hmac` computation below, not only the module's own)."""
    signature = mailgun_sign(MAILGUN_KEY, at, token)
    expected = hmac.new(MAILGUN_KEY.encode(), f"{at}{token}".encode(), hashlib.sha256)
    assert signature["signature"] == expected.hexdigest()
    data = {"event": event, "message": {"headers": {"message-id": "msg-1@example.test"}}}
    return json.dumps({"signature": signature, "event-data": data}).encode()


def slack_delivery(
    document: dict[str, Any], *, at: int = NOW, secret: str = SLACK_SECRET
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(document).encode()
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(at), body=body)
    assert signature is not None
    headers = {
        **JSON_HEADERS,
        "X-Slack-Signature": signature,
        "X-Slack-Request-Timestamp": str(at),
    }
    return body, headers


# ------------------------------------------------------------------ the receiver


async def test_zoom_challenge_is_answered_only_when_signed_and_recordings_are_stored(
    db: Any, pool: Any
) -> None:
    providers = _providers("zoom", ZOOM_TOML, {"ZOOM_WEBHOOK_SECRET": ZOOM_SECRET})
    async with _receiver(pool, providers) as rx:
        answered = await rx.post(*zoom_delivery(ZOOM_CHALLENGE), "zoom")
        again = await rx.post(*zoom_delivery(ZOOM_CHALLENGE), "zoom")
        forged = await rx.post(*zoom_delivery(ZOOM_CHALLENGE, secret="guess"), "zoom")
        stale = await rx.post(*zoom_delivery(ZOOM_CHALLENGE, at=NOW - 301), "zoom")
        stored = await rx.post(*zoom_delivery(ZOOM_RECORDING), "zoom")
        duplicate = await rx.post(*zoom_delivery(ZOOM_RECORDING), "zoom")
    expected = hmac.new(ZOOM_SECRET.encode(), PLAIN_TOKEN.encode(), hashlib.sha256).hexdigest()
    for answer in (answered, again):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json() == {"plainToken": PLAIN_TOKEN, "encryptedToken": expected}
    for refused in (forged, stale):
        assert (refused.status_code, refused.json()) == (401, REJECTED)
    assert stored.json() == {"status": "stored", "matched": False}
    assert duplicate.json() == {"status": "duplicate"}
    [event] = await stored_events(db)  # the challenges are not stored
    assert (event["remote_job_id"], event["remote_state"]) == (
        "4444AAAiAAAAAiAiAiiAii==",
        "succeeded",
    )
    assert ZOOM_SECRET not in json.dumps(dict(event), default=str)


async def test_twilio_form_and_json_callbacks_verify_and_a_wrong_token_does_not(
    db: Any, pool: Any
) -> None:
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    body = json.dumps({"RecordingSid": "RE9", "RecordingStatus": "absent"}).encode()
    query = f"?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(TWILIO_URL + query, {})
    json_headers = {**JSON_HEADERS, "X-Twilio-Signature": signature}
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        form = await rx.post(*twilio_form(TWILIO_FIELDS), "twilio")
        as_json = await rx.post(body, json_headers, "twilio", query=query)
        again = await rx.post(body, json_headers, "twilio", query=query)
        wrong = await rx.post(*twilio_form(TWILIO_FIELDS, token="another-token"), "twilio")
    assert form.json() == as_json.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    assert (wrong.status_code, wrong.json()) == (401, REJECTED)
    events = {e["remote_job_id"]: e for e in await stored_events(db)}
    assert events["RE0123456789"]["remote_state"] == "succeeded"
    assert events["RE9"]["remote_state"] == "failed"
    assert TWILIO_TOKEN not in json.dumps([dict(e) for e in events.values()], default=str)


async def test_twilio_without_public_webhook_url_is_refused_at_start_with_a_clear_message(
    pool: Any,
) -> None:
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    with pytest.raises(ValueError, match="set public_webhook_url"):
        async with _receiver(pool, providers):
            pass


async def test_mailgun_events_dedupe_on_the_signed_token(db: Any, pool: Any) -> None:
    providers = _providers("mailgun", MAILGUN_TOML, {"MAILGUN_SIGNING_KEY": MAILGUN_KEY})
    async with _receiver(pool, providers) as rx:
        stored = await rx.post(mailgun_delivery("delivered"), JSON_HEADERS, "mailgun")
        copied = await rx.post(mailgun_delivery("failed"), JSON_HEADERS, "mailgun")
        stale = await rx.post(
            mailgun_delivery("failed", "tok-2", at=NOW - 301), JSON_HEADERS, "mailgun"
        )
    assert stored.json() == {"status": "stored", "matched": False}
    assert copied.json() == {"status": "duplicate"}
    assert (stale.status_code, stale.json()) == (401, REJECTED)
    [event] = await stored_events(db)
    assert event["remote_state"] == "succeeded"


async def test_slack_url_verification_is_answered_only_when_signed(db: Any, pool: Any) -> None:
    providers = _providers("slack", SLACK_TOML, {"SLACK_SIGNING_SECRET": SLACK_SECRET})
    challenge = {
        "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        "type": "url_verification",
    }
    async with _receiver(pool, providers) as rx:
        answered = await rx.post(*slack_delivery(challenge), "slack")
        forged = await rx.post(*slack_delivery(challenge, secret="guess"), "slack")
        unsigned = await rx.post(json.dumps(challenge).encode(), JSON_HEADERS, "slack")
    assert (answered.status_code, answered.json()) == (200, {"challenge": challenge["challenge"]})
    assert (forged.status_code, forged.json()) == (401, REJECTED)
    assert unsigned.status_code == 400 and unsigned.json() == REJECTED
    assert await stored_events(db) == []


async def test_a_zoom_challenge_under_mailgun_is_no_signing_oracle(db: Any, pool: Any) -> None:
    """Mailgun signs only `timestamp + token`; a genuine signature copied onto a
    challenge body verified, and the answer was HMAC-SHA256(key, plainToken). With
    plainToken = a later timestamp and a fresh token, that answer IS the Mailgun
    signature of a delivery nobody sent (a signing oracle). Refused at load now."""
    toml = MAILGUN_TOML.replace('scheme = "mailgun"', 'scheme = "mailgun"\nchallenge = "zoom"')
    with pytest.raises(ConfigError) as refused:
        _providers("mailgun", toml, {"MAILGUN_SIGNING_KEY": MAILGUN_KEY})
    assert "would sign for anyone" in str(refused.value)
    # and what it prevents: the answer would have been Mailgun's own signature
    later, token = NOW + 86_400, "forged-token-0001"
    answer = challenges.answer(ChallengeAnswer.ZOOM, f"{later}{token}", MAILGUN_KEY)
    forged = json.loads(answer)["encryptedToken"]
    assert forged == mailgun_sign(MAILGUN_KEY, later, token)["signature"]


# ------------------------------------------------------------------ providers check

_BASE = """
[providers.NAME]
base_url = "https://api.provider.example.test"
[providers.NAME.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.NAME.status]
path = "/jobs/{job_id}"
state = "/status"
[providers.NAME.status.state_map]
completed = "succeeded"
processing = "running"
[providers.NAME.result]
source = "none"
"""


def ns(**values: object) -> argparse.Namespace:
    defaults = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    return argparse.Namespace(**{"json": False, **defaults, **values})


def write_config(tmp_path: Path, name: str, webhooks: str, header: str = "") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(header + _BASE.replace("NAME", name) + webhooks)
    return str(path)


def capture(tmp_path: Path, target: str, body: bytes, headers: dict[str, str]) -> Path:
    path = tmp_path / "delivery.http"
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    path.write_bytes(
        f"POST {target} HTTP/1.1\r\nHost: hooks.example.test\r\n{head}\r\n".encode() + body
    )
    return path


@pytest.fixture
def secrets_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOM_WEBHOOK_SECRET", ZOOM_SECRET)
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", TWILIO_TOKEN)
    monkeypatch.setenv("MAILGUN_SIGNING_KEY", MAILGUN_KEY)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
    monkeypatch.delenv("JW_PUBLIC_WEBHOOK_URL", raising=False)


@pytest.mark.parametrize("daemon", ["reconciler", "receiver"])
async def test_check_refuses_twilio_without_public_webhook_url_as_the_receiver_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None, daemon: str
) -> None:
    """The receiver will not start without it (above); before, the check said
    "valid" and exited 0 for a config the receiver refuses."""
    config = write_config(tmp_path, "twilio", TWILIO_TOML)
    assert await cli_providers.cmd_check(ns(config=config, daemon=daemon)) == 1
    out = capsys.readouterr()
    message = out.out + out.err
    assert "providers.twilio.webhooks" in message and "public_webhook_url" in message


async def test_check_proves_a_twilio_json_capture_with_the_configured_public_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    """The receiver signs with public_webhook_url plus the request's query; the
    check did not read public_webhook_url at all and asked for --url (bad_options)."""
    header = f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    config = write_config(tmp_path, "twilio", TWILIO_TOML, header)
    body = json.dumps({"RecordingSid": "RE9", "RecordingStatus": "completed"}).encode()
    query = f"?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(TWILIO_URL + query, {})
    headers = {**JSON_HEADERS, "X-Twilio-Signature": signature}
    delivery = capture(tmp_path, "/jobwarden/webhooks/twilio" + query, body, headers)
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 0
    out = capsys.readouterr().out
    assert "delivery: verifies" in out and "job_id RE9" in out
    # the form too, from the same configuration
    form_body, form_headers = twilio_form(TWILIO_FIELDS)
    delivery = capture(tmp_path, "/jobwarden/webhooks/twilio", form_body, form_headers)
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 0
    assert "job_id RE0123456789" in capsys.readouterr().out


async def test_check_says_a_zoom_challenge_capture_would_be_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    """Before: "but the body cannot be read: webhook carries no job id", for the
    one delivery Zoom sends before any other, which the receiver answers."""
    config = write_config(tmp_path, "zoom", ZOOM_TOML)
    delivery = capture(tmp_path, "/webhooks/zoom", *zoom_delivery(ZOOM_CHALLENGE))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 0
    out = capsys.readouterr().out
    assert "endpoint challenge (zoom)" in out and "never stored" in out
    assert "cannot be read" not in out and ZOOM_SECRET not in out
    # a token the receiver would not echo is said so, and fails the check
    bad = {**ZOOM_CHALLENGE, "payload": {"plainToken": "x" * 257}}
    delivery = capture(tmp_path, "/webhooks/zoom", *zoom_delivery(bad))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 1
    assert "bad_challenge" in capsys.readouterr().out


async def test_check_guarantee_lines_say_what_each_scheme_signs_and_dedupes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    header = f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    lines = {}
    for name, toml in (
        ("mailgun", MAILGUN_TOML),
        ("twilio", TWILIO_TOML),
        ("zoom", ZOOM_TOML),
        ("slack", SLACK_TOML),
    ):
        config = write_config(tmp_path, name, toml, header)
        assert await cli_providers.cmd_check(ns(config=config)) == 0
        [line] = [x for x in capsys.readouterr().out.splitlines() if "webhooks signed?" in x]
        lines[name] = line
    assert "not the event data" in lines["mailgun"]
    assert "deduplicated on the signed single-use token" in lines["mailgun"]
    assert "no replay window" in lines["twilio"]
    assert "deduplicated on the digest of the signed URL and fields" in lines["twilio"]
    assert "answers zoom endpoint challenges" in lines["zoom"]
    assert "answers slack endpoint challenges" in lines["slack"]
    assert "deduplicated on the body's sha256" in lines["zoom"]


async def test_check_refuses_a_zoom_challenge_under_mailgun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    toml = MAILGUN_TOML.replace('scheme = "mailgun"', 'scheme = "mailgun"\nchallenge = "zoom"')
    config = write_config(tmp_path, "mailgun", toml)
    assert await cli_providers.cmd_check(ns(config=config)) != 0
    captured = capsys.readouterr()
    assert "would sign for anyone" in captured.out + captured.err


# ------------------------------------------------------------------ the full path

ZOOM_OPTIONS = {"signature_header": "x-zm-signature", "timestamp_header": "x-zm-request-timestamp"}


async def test_a_zoom_signed_completion_wakes_the_reconciler_through_the_receiver(
    pool: Any, tmp_path: Path
) -> None:
    """The simulator signs as Zoom does (Slack's v0 under Zoom's headers), the
    receiver is configured with Zoom's challenge too: the job's completion comes
    through it and the reconciler reads the job at once, 30 s before its backstop."""
    webhooks = {"scheme": "slack", "options": ZOOM_OPTIONS, "challenge": "zoom"}
    async with webhook_rig(
        pool, tmp_path, webhooks=webhooks, webhook_scheme="slack", webhook_options=ZOOM_OPTIONS
    ) as r:
        op_id = await r.submit("success", duration=0.3)
        started = time.monotonic()
        assert await r.settle(op_id, {LocalState.SUCCEEDED}, timeout=10) is LocalState.SUCCEEDED
        assert time.monotonic() - started < 8
        events = await pool.fetch(
            "SELECT remote_state::text, signature_scheme FROM webhook_events"
            " WHERE operation_id = $1",
            op_id,
        )
        assert ("succeeded", "slack") in [tuple(e) for e in events]


@pytest.mark.parametrize("scheme", ["twilio", "mailgun"])
async def test_a_provider_signed_callback_wakes_the_reconciler_through_the_receiver(
    pool: Any, tmp_path: Path, scheme: str
) -> None:
    """The simulator cannot sign as Twilio or Mailgun, so it sends nothing
    verifiable (its unsigned deliveries are refused); the callback is signed here
    (Twilio's own RequestValidator; Mailgun's recipe) and posted to the same
    receiver, which wakes the reconciler 30 s before its backstop poll."""
    secret = {"twilio": TWILIO_TOKEN, "mailgun": MAILGUN_KEY}[scheme]
    webhooks = {"scheme": scheme, "secrets_env": ["JW_SIM_WEBHOOK_SECRET"]}
    if scheme == "twilio":  # the callback URL given per job: `{webhook_url}?op={operation_id}`
        webhooks["operation_id"] = "query:op"
    async with webhook_rig(
        pool, tmp_path, webhooks=webhooks, verify_with=secret, webhook_secret=None
    ) as r:
        op_id = await r.submit("success", duration=1.0)

        async def has_job() -> bool:
            row = await pool.fetchrow(
                "SELECT remote_job_id FROM operations WHERE operation_id = $1", op_id
            )
            return row is not None and row["remote_job_id"] is not None

        await r.run_until(has_job, timeout=10)
        job_id = await pool.fetchval(
            "SELECT remote_job_id FROM operations WHERE operation_id = $1", op_id
        )
        assert r.ctx.webhook_url is not None
        public = r.ctx.webhook_url.replace("{provider}", r.provider)
        document: dict[str, Any] = {"job_id": job_id, "state": "succeeded"}
        headers = dict(JSON_HEADERS)
        query = ""
        if scheme == "twilio":
            body = json.dumps(document).encode()
            # Twilio adds bodySHA256 to the URL it was given, our operation id in it
            query = f"?op={op_id}&bodySHA256={hashlib.sha256(body).hexdigest()}"
            validator = RequestValidator(TWILIO_TOKEN)
            headers["X-Twilio-Signature"] = validator.compute_signature(public + query, {})
        else:
            token = hashlib.sha256(op_id.encode()).hexdigest()[:50]
            document["signature"] = mailgun_sign(MAILGUN_KEY, int(time.time()), token)
            body = json.dumps(document).encode()
        started = time.monotonic()
        async with httpx.AsyncClient() as client:
            answer = await client.post(public + query, content=body, headers=headers)
        assert answer.json() == {"status": "stored", "matched": True}
        how = await pool.fetchval(
            "SELECT count(*) FROM webhook_events WHERE operation_id = $1 AND signature_scheme = $2",
            op_id,
            scheme,
        )
        assert how == 1
        assert await r.settle(op_id, {LocalState.SUCCEEDED}, timeout=10) is LocalState.SUCCEEDED
        assert time.monotonic() - started < 8  # the backstop poll is 30 s away


async def test_check_explains_a_refused_twilio_or_mailgun_capture_in_its_own_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    """The generic hint spoke of signed_content templates and key_encoding, which
    neither scheme has; a Twilio refusal is nearly always the URL."""
    header = '[jobwarden]\npublic_webhook_url = "http://hooks.example.test/jobwarden/webhooks/{provider}"\n'
    config = write_config(tmp_path, "twilio", TWILIO_TOML, header)
    delivery = capture(tmp_path, "/jobwarden/webhooks/twilio", *twilio_form(TWILIO_FIELDS))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 1
    out = capsys.readouterr().out
    assert "REFUSED (bad_signature)" in out and "Twilio signs the exact URL" in out
    assert "checked against http://hooks.example.test/jobwarden/webhooks/twilio" in out
    assert "signed_content" not in out and TWILIO_TOKEN not in out
    config = write_config(tmp_path, "mailgun", MAILGUN_TOML)
    body = mailgun_delivery("delivered").replace(b'"delivered"', b'"failed"')
    wrong = json.loads(body)
    wrong["signature"] = mailgun_sign("the-api-key", NOW, "tok")
    delivery = capture(tmp_path, "/webhooks/mailgun", json.dumps(wrong).encode(), JSON_HEADERS)
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 1
    out = capsys.readouterr().out
    assert "REFUSED (bad_signature)" in out and "HTTP webhook signing key" in out


async def test_a_refused_twilio_capture_never_prints_credentials_in_its_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    url = "https://jw:hunter2-password@hooks.example.test:8443/jobwarden/webhooks/twilio?k=v"
    config = write_config(
        tmp_path, "twilio", TWILIO_TOML, f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    )
    delivery = capture(tmp_path, "/jobwarden/webhooks/twilio", *twilio_form(TWILIO_FIELDS))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, url=url)) == 1
    out = capsys.readouterr().out
    assert "checked against https://hooks.example.test:8443/jobwarden/webhooks/twilio?…" in out
    assert "hunter2" not in out and "k=v" not in out


async def test_twilio_content_types_with_a_charset_and_unicode_fields_verify(
    db: Any, pool: Any
) -> None:
    """Twilio's forms say `charset=UTF-8`; a caller's name may be any text."""
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    fields = {**TWILIO_FIELDS, "RecordingSid": "RE77", "CallerName": "Zoë Ünal & co+1 ☎"}
    body, headers = twilio_form(fields)
    headers["content-type"] = "application/x-www-form-urlencoded; charset=UTF-8"
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        answer = await rx.post(body, headers, "twilio")
    assert answer.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert event["payload"]["CallerName"] == "Zoë Ünal & co+1 ☎"


async def test_challenge_tokens_with_json_specials_are_echoed_as_json(db: Any, pool: Any) -> None:
    zoom = _providers("zoom", ZOOM_TOML, {"ZOOM_WEBHOOK_SECRET": ZOOM_SECRET})
    slack = _providers("slack", SLACK_TOML, {"SLACK_SIGNING_SECRET": SLACK_SECRET})
    token = 'a"b\\c</script>{}'
    zoom_challenge = {**ZOOM_CHALLENGE, "payload": {"plainToken": token}}
    slack_challenge = {"type": "url_verification", "challenge": token}
    async with _receiver(pool, {**zoom, **slack}) as rx:
        zoom_answer = await rx.post(*zoom_delivery(zoom_challenge), "zoom")
        slack_answer = await rx.post(*slack_delivery(slack_challenge), "slack")
        control = await rx.post(
            *slack_delivery({**slack_challenge, "challenge": "a\x01b"}), "slack"
        )
    assert zoom_answer.json()["plainToken"] == token
    assert slack_answer.json() == {"challenge": token}
    # a control character is not echoed, whoever signed it
    assert (control.status_code, control.json()) == (400, {"error": "bad_challenge"})
    assert await stored_events(db) == []


async def test_no_log_line_holds_a_secret_a_signature_or_a_challenge_token(
    db: Any, pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    zoom = _providers("zoom", ZOOM_TOML, {"ZOOM_WEBHOOK_SECRET": ZOOM_SECRET})
    twilio = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    mailgun = _providers("mailgun", MAILGUN_TOML, {"MAILGUN_SIGNING_KEY": MAILGUN_KEY})
    body, headers = zoom_delivery(ZOOM_CHALLENGE)
    form, form_headers = twilio_form(TWILIO_FIELDS)
    caplog.set_level("DEBUG")
    async with _receiver(pool, {**zoom, **twilio, **mailgun}, public_webhook_url=PUBLIC) as rx:
        await rx.post(body, headers, "zoom")
        await rx.post(*zoom_delivery(ZOOM_CHALLENGE, secret="guess"), "zoom")
        await rx.post(form, form_headers, "twilio")
        await rx.post(form + b"&x=1", form_headers, "twilio")
        await rx.post(mailgun_delivery("delivered"), JSON_HEADERS, "mailgun")
        await rx.post(mailgun_delivery("delivered"), JSON_HEADERS, "mailgun")
    logged = "\n".join(
        f"{r.getMessage()} {json.dumps(r.__dict__, default=str)}" for r in caplog.records
    )
    assert "webhook challenge answered" in logged and "webhook rejected" in logged
    signature = json.loads(mailgun_delivery("delivered"))["signature"]["signature"]
    for secret in (
        ZOOM_SECRET,
        TWILIO_TOKEN,
        MAILGUN_KEY,
        PLAIN_TOKEN,
        headers["x-zm-signature"],
        form_headers["X-Twilio-Signature"],
        signature,
    ):
        assert secret not in logged


async def test_twilio_json_events_dedupe_on_a_configured_event_id_as_the_check_says(
    db: Any, pool: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    toml = TWILIO_TOML.replace(
        'state = "/RecordingStatus"', 'state = "/RecordingStatus"\nevent_id = "/EventSid"'
    )
    config = write_config(
        tmp_path, "twilio", toml, f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    )
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    assert "a JSON body on the event id at /EventSid, else its sha256" in capsys.readouterr().out
    providers = _providers("twilio", toml, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    body = json.dumps(
        {"EventSid": "EV1", "RecordingSid": "RE9", "RecordingStatus": "completed"}
    ).encode()
    query = f"?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(TWILIO_TOKEN).compute_signature(TWILIO_URL + query, {})
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        await rx.post(
            body, {**JSON_HEADERS, "X-Twilio-Signature": signature}, "twilio", query=query
        )
    [event] = await stored_events(db)
    assert event["event_id"] == "EV1"


async def test_an_unreadable_mailgun_or_twilio_signature_is_explained_in_its_own_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    """The generic malformed_header hint names header format options (prefix,
    timestamp_key) neither scheme takes."""
    config = write_config(tmp_path, "mailgun", MAILGUN_TOML)
    body = b'{"signature": {"timestamp": "0123", "token": "t", "signature": "zz"}}'
    delivery = capture(tmp_path, "/webhooks/mailgun", body, JSON_HEADERS)
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 1
    out = capsys.readouterr().out
    assert "REFUSED (malformed_header)" in out and "plain unix seconds" in out
    assert "timestamp_key" not in out
    header = f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    config = write_config(tmp_path, "twilio", TWILIO_TOML, header)
    form, headers = twilio_form(TWILIO_FIELDS)
    headers["X-Twilio-Signature"] = "not base64!"
    delivery = capture(tmp_path, "/jobwarden/webhooks/twilio", form, headers)
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 1
    out = capsys.readouterr().out
    assert "REFUSED (malformed_header)" in out and "is not base64" in out


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"A",
        b"=&&=",
        b"A=%ff%fe&B=%",
        b"A=1&A=2&A=1",
        b"RecordingSid=RE1&RecordingSid=RE2",
        b"RecordingSid=%00RE1",
        b"RecordingStatus=" + b"x" * 5000,
        "Name=Zo\u00eb".encode("latin-1"),
    ],
)
async def test_odd_twilio_forms_are_stored_or_refused_never_a_500(
    db: Any, pool: Any, body: bytes
) -> None:
    providers = _providers("twilio", TWILIO_TOML, {"TWILIO_AUTH_TOKEN": TWILIO_TOKEN})
    try:
        signature = twilio_sign(TWILIO_TOKEN, TWILIO_URL, body, form=True)
    except SignatureError:  # fields that are no UTF-8 text: nobody can sign them
        signature = base64.b64encode(b"x" * 20).decode()
    headers = {"content-type": FORM, "X-Twilio-Signature": signature}
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        signed = await rx.post(body, headers, "twilio")
        again = await rx.post(body, headers, "twilio")
        unsigned = await rx.post(body, {"content-type": FORM}, "twilio")
    if signature == base64.b64encode(b"x" * 20).decode():
        assert (signed.status_code, signed.json()) == (401, REJECTED)
    else:
        assert signed.status_code == 200, signed.text
        assert again.json() == {"status": "duplicate"}
    assert unsigned.status_code == 400


async def test_a_slack_challenge_under_mailgun_is_no_oracle_and_not_called_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], secrets_env: None
) -> None:
    """Slack's answer echoes the token: no HMAC, nothing to forge with."""
    toml = MAILGUN_TOML.replace('scheme = "mailgun"', 'scheme = "mailgun"\nchallenge = "slack"')
    config = write_config(tmp_path, "mailgun", toml)
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if "webhooks signed?" in x]
    assert "signing oracle" not in line and "answers slack endpoint challenges" in line
