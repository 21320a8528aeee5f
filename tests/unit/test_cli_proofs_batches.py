"""`providers check --delivery` on a batch delivery (`[webhooks] events`), offline.

The receiver stores each element of a batch as an event of its own (its own
key, its own references, read from its own bytes as sent); the proof must say
so, element by element, rather than call the body an unreadable array.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from shared.cli import providers as cli_providers
from shared.cli.captures import Capture
from shared.cli.proofs import BATCH_LISTED, prove_delivery
from shared.providers import parse_providers
from tests.integration.test_webhook_batches import hubspot_event
from tests.unit.test_cli_proofs import CONFIG, NOW, ns

HUBSPOT_SECRET = "a1b2c3d4-hubspot-client-secret"
PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
PATH = "/jobwarden/webhooks/acme"

# acme's API, its webhooks configured as HubSpot's v3 are: a JSON array per delivery.
HUBSPOT_WEBHOOKS = """[providers.acme.webhooks]
scheme = "hmac"
secrets_env = "ACME_WEBHOOK_SECRET"
events = ""
event_id = "/eventId"
job_id = "/objectId"
state = "/subscriptionType"
[providers.acme.webhooks.options]
signature_header = "X-HubSpot-Signature-v3"
format = "base64"
timestamp_header = "X-HubSpot-Request-Timestamp"
timestamp_format = "unix_ms"
signed_content = "{method}{url}{body}{timestamp}"
[providers.acme.webhooks.state_map]
"job.finished" = "succeeded"
"job.progress" = "running"
"""
HUBSPOT = (
    f'[jobwarden]\npublic_webhook_url = "{PUBLIC}"\n'
    + CONFIG.split("[providers.acme.webhooks]")[0]
    + HUBSPOT_WEBHOOKS
)


def hubspot_delivery(tmp_path: Path, body: bytes) -> Path:
    """A raw capture signed by HubSpot's v3 recipe: base64 HMAC-SHA256 of method + URI
    + body + timestamp (ms), the URI the one public_webhook_url gives."""
    ms = str(NOW * 1000 + 7)
    url = PUBLIC.format(provider="acme")
    content = b"POST" + url.encode() + body + ms.encode()
    mac = base64.b64encode(hmac.new(HUBSPOT_SECRET.encode(), content, hashlib.sha256).digest())
    path = tmp_path / "delivery.http"
    path.write_bytes(
        f"POST {PATH} HTTP/1.1\r\nHost: hooks.example.test\r\n".encode()
        + b"Content-Type: application/json\r\n"
        + b"X-HubSpot-Signature-v3: "
        + mac
        + b"\r\nX-HubSpot-Request-Timestamp: "
        + ms.encode()
        + b"\r\n\r\n"
        + body
    )
    return path


def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str = HUBSPOT) -> str:
    monkeypatch.setenv("ACME_WEBHOOK_SECRET", HUBSPOT_SECRET)
    path = tmp_path / "jobwarden.toml"
    path.write_text(text)
    return str(path)


async def checked(
    config: str, delivery: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], str]:
    """The JSON report's delivery proof, and the text rendering of the same check."""
    assert (
        await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW, json=True)) == 0
    )
    [entry] = json.loads(capsys.readouterr().out)["providers"]
    assert await cli_providers.cmd_check(ns(config=config, delivery=delivery, at=NOW)) == 0
    return entry["delivery"], capsys.readouterr().out


async def test_a_hubspot_batch_is_reported_event_by_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configured(tmp_path, monkeypatch)
    other = {**hubspot_event(102, "unused"), "subscriptionType": "contact.creation"}
    del other["objectId"]  # another event type: it names no job
    batch = [hubspot_event(100, "j_a"), hubspot_event(101, "j_b", "job.progress"), other]
    delivery = hubspot_delivery(tmp_path, json.dumps(batch, indent=1).encode())
    proof, out = await checked(config, delivery, capsys)

    assert (proof["verified"], proof["fresh"], proof["events"], proof["more"]) == (
        True,
        True,
        3,
        0,
    )
    assert proof["why"] == "verifies with the hmac scheme"
    assert proof["deduplicated_by"] == "id"
    first, second, third = proof["records"]
    assert first == {
        "event_id": "100",
        "event_id_signed": True,
        "operation_id": None,
        "client_reference": None,
        "job_id": "j_a",
        "state": "succeeded",
        "raw_state": "job.finished",
        "match_by": ["job_id"],
    }
    assert (second["event_id"], second["job_id"], second["state"]) == ("101", "j_b", "running")
    assert third["event_id"] == "102" and "no job id" in third["parse_error"]
    assert "job_id" not in third

    assert "delivery: verifies; a batch of 3 events, each deduplicated by its own signed" in out
    assert (
        "\n    event 100: would record job_id j_a, state succeeded, raw_state job.finished; "
        "would match by job_id\n" in out
    )
    assert "\n    event 101: would record job_id j_b, state running" in out
    assert "\n    event 102: names no job (webhook carries no job id" in out
    assert "stored, matched to no operation" in out
    assert "cannot be read" not in out and HUBSPOT_SECRET not in out


@pytest.mark.parametrize(
    ("events", "wrap"),
    [('""', "{}"), ('"/value"', '{"value": {}, "@odata.context": "x"}')],
    ids=["top_level_array", "graph_value"],
)
async def test_a_batch_without_ids_is_keyed_by_each_elements_bytes_as_sent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    events: str,
    wrap: str,
) -> None:
    """The bytes as sent, not a re-encoding: a long decimal and odd spacing are kept."""
    text = HUBSPOT.replace('event_id = "/eventId"\n', "").replace(
        'events = ""', f"events = {events}"
    )
    config = configured(tmp_path, monkeypatch, text)
    texts = [
        b'{"objectId": "j_a",  "subscriptionType": "job.finished", "amount": 12345678901234567.89}',
        b'{ "objectId" : "j_b" }',
    ]
    array = b"[\n  " + b" ,\n\t".join(texts) + b"\n]"
    delivery = hubspot_delivery(tmp_path, wrap.replace("{}", array.decode(), 1).encode())
    proof, out = await checked(config, delivery, capsys)

    keys = ["sha256:" + hashlib.sha256(element).hexdigest() for element in texts]
    assert [entry["event_id"] for entry in proof["records"]] == keys
    assert [entry["job_id"] for entry in proof["records"]] == ["j_a", "j_b"]
    assert not any(entry["event_id_signed"] for entry in proof["records"])
    assert (proof["events"], proof["deduplicated_by"]) == (2, "hash")
    assert "a batch of 2 events, each deduplicated by the sha256 of its bytes as sent" in out
    assert f"\n    event {keys[1]}: would record job_id j_b; would match by job_id" in out


async def test_a_long_batch_lists_its_first_events_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configured(tmp_path, monkeypatch)
    extra = 5
    batch = [hubspot_event(500 + n, f"j_{n}") for n in range(BATCH_LISTED + extra)]
    delivery = hubspot_delivery(tmp_path, json.dumps(batch).encode())
    proof, out = await checked(config, delivery, capsys)

    assert (proof["events"], proof["more"]) == (BATCH_LISTED + extra, extra)
    listed = [entry["event_id"] for entry in proof["records"]]
    assert listed == [str(500 + n) for n in range(BATCH_LISTED)]
    assert out.count("\n    event ") == BATCH_LISTED
    assert f"\n    … and {extra} more" in out
    assert f"event {500 + BATCH_LISTED}:" not in out


async def test_an_empty_batch_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configured(tmp_path, monkeypatch)
    proof, out = await checked(config, hubspot_delivery(tmp_path, b"[]"), capsys)
    assert (proof["events"], proof["records"], proof["more"]) == (0, [], 0)
    assert proof["deduplicated_by"] is None
    assert "delivery: verifies; a batch of 0 events: nothing would be stored" in out


async def test_a_provider_without_events_is_told_how_to_read_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configured(tmp_path, monkeypatch, HUBSPOT.replace('events = ""\n', ""))
    delivery = hubspot_delivery(tmp_path, json.dumps([hubspot_event(100, "j_a")]).encode())
    proof, out = await checked(config, delivery, capsys)
    assert proof["records"] is None and "events" not in proof
    assert "an array or a scalar" in proof["parse_error"]
    assert 'events = "" in [webhooks] reads each element as an event of its own' in out


async def test_a_body_holding_no_list_where_events_points_is_one_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the receiver reads it: the single delivery's report, and no hint to set
    what is set already."""
    config = configured(tmp_path, monkeypatch, HUBSPOT.replace('events = ""', 'events = "/value"'))
    single = hubspot_delivery(tmp_path, json.dumps(hubspot_event(100, "j_a")).encode())
    proof, out = await checked(config, single, capsys)
    assert "events" not in proof and proof["records"]["job_id"] == "j_a"
    assert "delivery: verifies; event id 100 (signed); would record job_id j_a" in out

    array = hubspot_delivery(tmp_path, json.dumps([hubspot_event(100, "j_a")]).encode())
    proof, out = await checked(config, array, capsys)
    assert proof["records"] is None and "events = " not in proof["parse_error"]


async def test_an_element_lacking_the_id_the_others_carry_is_keyed_by_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = configured(tmp_path, monkeypatch)
    anonymous = b'{"objectId": "j_b", "subscriptionType": "job.finished"}'
    body = b"[" + json.dumps(hubspot_event(100, "j_a")).encode() + b", " + anonymous + b"]"
    proof, out = await checked(config, hubspot_delivery(tmp_path, body), capsys)
    keyed = [(entry["event_id"], entry["event_id_signed"]) for entry in proof["records"]]
    assert keyed == [("100", True), ("sha256:" + hashlib.sha256(anonymous).hexdigest(), False)]
    assert proof["deduplicated_by"] == "mixed"
    assert "each deduplicated by its own signed event id, else (where it carries none)" in out


def test_event_grids_validation_in_a_batch_of_one_is_said_to_be_answered() -> None:
    """As the receiver does: a challenge alone in a batch is answered, not stored;
    the same element beside another is an event of the batch."""
    toml = """
    [providers.grid]
    preset = "simulator"
    [providers.grid.webhooks]
    scheme = "static_header"
    secrets_env = "EG_KEY"
    events = ""
    job_id = "/subject"
    challenge = "event_grid"
    [providers.grid.webhooks.options]
    query = "key"
    """
    key = "eg-callback-key-0123456789abcdef"
    desc = parse_providers(tomllib.loads(toml), "test.toml", {"EG_KEY": key})["grid"]
    validation = {
        "id": "v-1",
        "eventType": "Microsoft.EventGrid.SubscriptionValidationEvent",
        "subject": "",
        "data": {"validationCode": "512d38b6"},
    }

    def proved(body: bytes) -> dict[str, Any]:
        capture = Capture(
            {"content-type": "application/json"},
            body,
            "POST",
            f"/webhooks/grid?key={key}",
            query={"key": key},
        )
        return prove_delivery(desc, capture, at=float(NOW), url=None)

    alone = proved(json.dumps([validation]).encode())
    assert (alone["verified"], alone["challenge"]) == (True, "event_grid")
    beside = proved(json.dumps([validation, {"subject": "job-1"}]).encode())
    assert (beside["events"], "challenge" in beside) == (2, False)
