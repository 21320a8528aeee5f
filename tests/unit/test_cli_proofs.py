"""`providers check --delivery/--result`: proof from captured traffic, offline."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pytest
import stripe
from twilio.request_validator import RequestValidator

from shared.cli import providers as cli_providers
from shared.cli.captures import CaptureError, read_capture
from shared.cli.main import build_parser
from shared.providers.values import clip

SECRET = "whsec_acme_signing_secret"
NOW = 1_767_225_600
CONFIG = """
[providers.acme]
base_url = "https://api.acme.test"
[providers.acme.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.acme.status]
path = "/jobs/{job_id}"
state = "/status"
result_url = "/result_url"
[providers.acme.status.state_map]
done = "succeeded"
working = "running"
[providers.acme.result]
source = "url"
format = "json"
[providers.acme.result.expect]
required_fields = ["output"]
[providers.acme.webhooks]
scheme = "stripe"
secrets_env = "ACME_WEBHOOK_SECRET"
job_id = "/data/job"
state = "/data/status"
[providers.acme.webhooks.options]
signature_header = "X-Acme-Signature"
"""
BODY = json.dumps({"id": "evt_1", "data": {"job": "j_42", "status": "done"}}).encode()


def ns(**values: object) -> argparse.Namespace:
    # the defaults of `providers check`'s options
    defaults = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    return argparse.Namespace(**{"json": False, **defaults, **values})


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", SECRET)
    path = tmp_path / "jobwarden.toml"
    path.write_text(CONFIG)
    return str(path)


def raw_delivery(tmp_path: Path, body: bytes, signature: str) -> Path:
    path = tmp_path / "delivery.http"
    path.write_bytes(
        b"POST /webhooks/acme HTTP/1.1\r\nHost: hooks.example.test\r\n"
        b"Content-Type: application/json\r\n"
        + f"X-Acme-Signature: {signature}\r\n\r\n".encode()
        + body
    )
    return path


def signed(body: bytes = BODY, secret: str = SECRET) -> str:
    return stripe.WebhookSignature.generate_signature_header(body.decode(), secret, timestamp=NOW)


async def test_without_a_delivery_a_signature_is_only_configured(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await cli_providers.cmd_check(ns(config=config)) == 0
    out = capsys.readouterr().out
    assert "webhooks signed?" in out and "cfg  configured, not yet verified" in out
    assert " yes  stripe signatures" not in out


async def test_a_captured_delivery_that_verifies_proves_it_and_says_what_it_records(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = raw_delivery(tmp_path, BODY, signed())
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 0
    out = capsys.readouterr().out
    assert "yes  stripe signatures" in out
    assert "delivery: verifies; event id evt_1 (signed)" in out
    assert "job_id j_42" in out and "state succeeded" in out
    assert SECRET not in out


async def test_a_stale_capture_is_authentic_but_would_be_refused_now(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = raw_delivery(tmp_path, BODY, signed())
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery)) == 0
    out = capsys.readouterr().out
    assert "authentic, but its timestamp is outside the 300 s replay window" in out


@pytest.mark.parametrize(
    ("body", "secret", "reason"),
    [(BODY.replace(b"j_42", b"j_43"), SECRET, "bad_signature"), (BODY, "whsec_x", "bad_signature")],
)
async def test_a_refused_delivery_fails_the_check_and_names_the_reason(
    config: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    body: bytes,
    secret: str,
    reason: str,
) -> None:
    delivery = raw_delivery(tmp_path, body, signed(secret=secret))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 1
    out = capsys.readouterr().out
    assert f"delivery: REFUSED ({reason})" in out and "re-encoded the body" in out
    assert "webhooks signed?" in out and "a captured delivery was refused" in out


async def test_a_json_capture_and_json_output(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "delivery.json"
    capture = {"headers": {"X-Acme-Signature": signed()}, "body": BODY.decode()}
    path.write_text(json.dumps(capture))
    args = ns(config=config, delivery=path, at=NOW, json=True)
    assert await cli_providers.cmd_check(args) == 0
    [entry] = json.loads(capsys.readouterr().out)["providers"]
    assert entry["delivery"]["records"]["job_id"] == "j_42"
    signed_g = next(g for g in entry["guarantees"] if g["guarantee"] == "webhooks signed")
    assert signed_g["proved"] is True


async def test_a_delivery_says_which_references_it_carries_and_the_order_they_match_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", SECRET)
    path = tmp_path / "jobwarden.toml"
    path.write_text(CONFIG.replace('job_id = "/data/job"', 'client_reference = "/data/meta/ref"'))
    body = json.dumps({"id": "evt_1", "data": {"meta": {"ref": "inv-42"}, "status": "done"}})
    delivery = raw_delivery(tmp_path, body.encode(), signed(body.encode()))
    assert await cli_providers.cmd_check(ns(config=str(path), delivery=delivery, at=NOW)) == 0
    out = capsys.readouterr().out
    assert "would record client_reference inv-42, state succeeded" in out
    assert "would match by client_reference (if exactly one operation of this provider" in out

    capture = tmp_path / "delivery.json"
    both = json.dumps({"id": "evt_2", "data": {"job": "j_42", "meta": {"ref": "inv-42"}}})
    capture.write_text(
        json.dumps({"headers": {"X-Acme-Signature": signed(both.encode())}, "body": both})
    )
    config = CONFIG.replace(
        'job_id = "/data/job"', 'job_id = "/data/job"\nclient_reference = "/data/meta/ref"'
    )
    path.write_text(config)
    args = ns(config=str(path), delivery=capture, at=NOW, json=True)
    assert await cli_providers.cmd_check(args) == 0
    [entry] = json.loads(capsys.readouterr().out)["providers"]
    records = entry["delivery"]["records"]
    assert (records["client_reference"], records["job_id"], records["operation_id"]) == (
        "inv-42",
        "j_42",
        None,
    )
    assert entry["delivery"]["match_by"] == ["client_reference", "job_id"]


async def test_a_captured_result_is_validated_offline(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "result.json"
    body = json.dumps({"output": {"text": "hi"}}).encode()
    result.write_bytes(body)
    assert await cli_providers.cmd_check(ns(config=config, result=result)) == 0
    out = capsys.readouterr().out
    assert "result: valid" in out and hashlib.sha256(body).hexdigest() in out


async def test_a_result_that_fails_validation_fails_the_check(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "result.http"
    result.write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{not json")
    assert await cli_providers.cmd_check(ns(config=config, result=result)) == 1
    assert "result: INVALID" in capsys.readouterr().out


async def test_a_capture_for_an_unknown_provider_is_a_clear_error(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = raw_delivery(tmp_path, BODY, signed())
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, provider="x")) == 1
    assert "no provider 'x'" in capsys.readouterr().err


def test_raw_captures_keep_the_body_bytes_exactly(tmp_path: Path) -> None:
    path = tmp_path / "d.http"
    body = b'{"a": 1}\r\n\r\n  '
    path.write_bytes(b"POST /h?x=1 HTTP/1.1\nA: 1\nA: 2\n\n" + body)
    capture = read_capture(path)
    assert capture.body == body and capture.headers == {"a": "1, 2"}
    assert (capture.method, capture.query) == ("POST", {"x": "1"})


@pytest.mark.parametrize(
    "text",
    [b"POST / HTTP/1.1\r\nno colon here\r\n\r\n{}", b"POST / HTTP/1.1\r\nA: 1\r\n"],
)
def test_broken_raw_captures_are_refused_with_a_reason(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "d.http"
    path.write_bytes(text)
    with pytest.raises(CaptureError):
        read_capture(path)


HMAC_KV = CONFIG.replace('scheme = "stripe"', 'scheme = "hmac"').replace(
    'signature_header = "X-Acme-Signature"',
    'signature_header = "X-Acme-Signature"\nformat = "kv"\ntimestamp_key = "t"\n'
    'signed_content = "{timestamp}.{body}"',
)


@pytest.mark.parametrize(
    ("event_id", "expected"),
    [
        ('event_id = "/id"\n', "event id evt_1 (signed)"),
        ("", "no event id found where the description points"),
    ],
    ids=["id_in_the_signed_body", "no_id_path"],
)
async def test_the_reported_event_id_is_the_key_the_receiver_dedupes_on(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    event_id: str,
    expected: str,
) -> None:
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", SECRET)
    config = tmp_path / "jobwarden.toml"
    config.write_text(
        HMAC_KV.replace('job_id = "/data/job"\n', f'job_id = "/data/job"\n{event_id}')
    )
    delivery = raw_delivery(tmp_path, BODY, signed())  # Stripe's layout: the same bytes
    assert await cli_providers.cmd_check(ns(config=str(config), delivery=delivery, at=NOW)) == 0
    assert expected in capsys.readouterr().out


async def test_a_webhook_client_reference_at_our_own_reference_field_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """That field carries our operation id; matching it as an agent's reference never attaches."""
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", SECRET)
    config = tmp_path / "jobwarden.toml"
    text = CONFIG.replace(
        'job_id = "/id"\n', 'job_id = "/id"\nclient_reference_field = "/meta/ref"\n'
    )
    config.write_text(text.replace('job_id = "/data/job"\n', 'client_reference = "/meta/ref"\n'))
    assert await cli_providers.cmd_check(ns(config=str(config))) == 0
    assert "set webhooks.operation_id to that path instead" in capsys.readouterr().out


LUMA_TOKEN = "luma_callback_token_0123456789"
LUMA = """
[providers.luma]
base_url = "https://api.lumalabs.ai/dream-machine/v1"
[providers.luma.create]
path = "/generations"
idempotency = "none"
job_id = "/id"
set_body = { "/callback_url" = "{webhook_url}?token={webhook_secret}" }
[providers.luma.status]
path = "/generations/{job_id}"
state = "/state"
[providers.luma.status.state_map]
completed = "succeeded"
[providers.luma.result]
source = "none"
[providers.luma.webhooks]
scheme = "static_header"
options = { query = "token" }
secrets_env = "LUMA_CALLBACK_TOKEN"
job_id = "/id"
state = "/state"
"""


@pytest.mark.parametrize(("query", "verifies"), [(f"?token={LUMA_TOKEN}", True), ("", False)])
async def test_a_captured_callback_proves_its_query_token_from_its_request_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    query: str,
    verifies: bool,
) -> None:
    """The request line of a raw capture holds the token: no --url (which would
    put the token on a command line, in ps and the shell's history)."""
    monkeypatch.setenv("LUMA_CALLBACK_TOKEN", LUMA_TOKEN)
    config = tmp_path / "jobwarden.toml"
    config.write_text(LUMA)
    body = json.dumps({"id": "gen_1", "state": "completed"}).encode()
    delivery = tmp_path / "callback.http"
    delivery.write_bytes(
        f"POST /webhooks/luma{query} HTTP/1.1\r\nHost: hooks.example.test\r\n".encode()
        + b"Content-Type: application/json\r\n\r\n"
        + body
    )
    assert await cli_providers.cmd_check(ns(config=str(config), delivery=delivery)) == (
        0 if verifies else 1
    )
    out = capsys.readouterr().out
    assert ("delivery: verifies" in out) is verifies, out
    assert LUMA_TOKEN not in out


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": "evt_1", "data": ' + b"[" * 100_000 + b"}",  # deeper than json.loads recurses
        b'{"id": "evt_1", "data": {"job": NaN}}',  # no JSON number: the receiver refuses NaN
        b'[{"id": "evt_1"}]',
    ],
    ids=["nested_too_deeply", "nan", "an_array"],
)
async def test_a_body_the_receiver_stores_unread_is_said_so_not_a_traceback(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes
) -> None:
    """The nested body was a RecursionError traceback out of `providers check`."""
    delivery = raw_delivery(tmp_path, body, signed(body))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 0
    out = capsys.readouterr().out
    assert "the body cannot be read: it is no JSON object the receiver reads" in out
    assert "stored as it came, matched to no operation" in out


async def test_a_job_id_longer_than_int_reads_is_recorded_as_the_receiver_reads_it(
    config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The receiver reads it digit for digit and matches by it; the check said the
    body was not JSON."""
    digits = "7" * 5000
    body = b'{"id": "evt_1", "data": {"job": ' + digits.encode() + b', "status": "done"}}'
    delivery = raw_delivery(tmp_path, body, signed(body))
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 0
    out = capsys.readouterr().out
    assert f"job_id {clip(digits)}" in out and "state succeeded" in out  # as it is stored


@pytest.mark.parametrize("at", ["nan", "inf", "-inf", "1e400", "soon"])
def test_at_must_be_a_finite_time(at: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every replay-window comparison with NaN is false: `--at nan` passed a capture
    of any age as fresh."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["providers", "check", "c.toml", f"--at={at}"])
    assert f"argument --at: {at!r} is not a time in unix seconds" in capsys.readouterr().err


TWILIO = (
    CONFIG.replace("[providers.acme.webhooks.options]\n", "")
    .replace('scheme = "stripe"', 'scheme = "twilio"')
    .replace('signature_header = "X-Acme-Signature"\n', "")
    .replace(
        'job_id = "/data/job"\nstate = "/data/status"',
        'job_id = "/RecordingSid"\nstate = "/Status"',
    )
)


async def test_a_twilio_form_capture_proves_and_says_what_it_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A form body is read as the receiver reads it (its fields as one object), and
    its dedupe key is the receiver's: the digest of what the signature covers."""
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", SECRET)
    config = tmp_path / "jobwarden.toml"
    # the receiver refuses twilio without it, and so does the check
    config.write_text(
        '[jobwarden]\npublic_webhook_url = "https://elsewhere.test/{provider}"\n' + TWILIO
    )
    url = "https://hooks.example.test/webhooks/acme"
    body = b"RecordingSid=RE42&Status=done&AccountSid=AC1"
    signature = RequestValidator(SECRET).compute_signature(
        url, {"RecordingSid": "RE42", "Status": "done", "AccountSid": "AC1"}
    )
    delivery = tmp_path / "delivery.http"
    delivery.write_bytes(
        b"POST /webhooks/acme HTTP/1.1\r\nHost: hooks.example.test\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        + f"X-Twilio-Signature: {signature}\r\n\r\n".encode()
        + body
    )
    args = ns(config=str(config), delivery=delivery, url=url, json=True)
    assert await cli_providers.cmd_check(args) == 0
    out = capsys.readouterr().out
    report = json.loads(out)
    assert "RE42" in out and "succeeded" in out, report
    covered = url + "AccountSidAC1RecordingSidRE42Statusdone"
    assert f"twilio:{hashlib.sha256(covered.encode()).hexdigest()}" in out
