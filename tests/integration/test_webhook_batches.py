"""Batch deliveries (`[webhooks] events`): one signed body, many events.

HubSpot posts a JSON array of events, SendGrid's Event Webhook an array of any
length, Microsoft Graph an object whose `value` is one. Each delivery here is
signed as its sender signs it and posted to the real receiver over a loopback
socket; each element must become an event of its own: deduplicated by its own
id (or its bytes' hash), matched to its own operation, stored with its own
text, and the answer sent only once every element is committed. Before
`events`, such a body was stored as one unread event that woke no operation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bench.harness import free_port, wait_until
from receiver.webhooks import endpoint, ingest
from receiver.webhooks.endpoint import BATCH_SUBMIT_CHUNK
from shared import ledger
from shared.ledger.states import LocalState, RemoteState
from shared.providers.adapter import ProviderAdapter
from shared.providers.errors import ConfigError
from shared.providers.facts import WebhookFact
from shared.providers.guarantees import describe_guarantees
from tests.integration.test_more_official_signers import _receiver
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    SECRET,
    describe,
    standard_headers,
    stored_events,
    webhook_observations,
)
from tests.support import drive, submit

PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
HUBSPOT_SECRET = "a1b2c3d4-hubspot-client-secret"
HUBSPOT_URL = PUBLIC.format(provider="sim")

# The simulator's provider ("sim", the one tests.support.submit creates
# operations for) configured as HubSpot's v3 webhooks are, a batch per delivery.
HUBSPOT_SIM = """
[providers.sim]
preset = "simulator"
[providers.sim.webhooks]
scheme = "hmac"
secrets_env = "HUBSPOT_CLIENT_SECRET"
events = ""
event_id = "/eventId"
job_id = "/objectId"
state = "/subscriptionType"
[providers.sim.webhooks.options]
signature_header = "X-HubSpot-Signature-v3"
format = "base64"
timestamp_header = "X-HubSpot-Request-Timestamp"
timestamp_format = "unix_ms"
signed_content = "{method}{url}{body}{timestamp}"
[providers.sim.webhooks.state_map]
"job.finished" = "succeeded"
"job.progress" = "running"
"""


def _hubspot_providers() -> dict[str, Any]:
    return describe(HUBSPOT_SIM, {"HUBSPOT_CLIENT_SECRET": HUBSPOT_SECRET})


def hubspot_headers(body: bytes, ms: int = NOW * 1000 + 7) -> dict[str, str]:
    """HubSpot's v3 recipe: base64 HMAC-SHA256 of method + URI + body + timestamp (ms)."""
    content = b"POST" + HUBSPOT_URL.encode() + body + str(ms).encode()
    mac = hmac.new(HUBSPOT_SECRET.encode(), content, hashlib.sha256).digest()
    return {
        **JSON_HEADERS,
        "X-HubSpot-Signature-v3": base64.b64encode(mac).decode(),
        "X-HubSpot-Request-Timestamp": str(ms),
    }


def hubspot_event(event_id: int, job_id: str, kind: str = "job.finished") -> dict[str, Any]:
    return {
        "eventId": event_id,
        "subscriptionId": 2100,
        "portalId": 62515,
        "occurredAt": NOW * 1000,
        "subscriptionType": kind,
        "attemptNumber": 0,
        "objectId": job_id,
    }


async def _observing(db: Any, count: int) -> list[tuple[str, str]]:
    """`count` observing operations: (operation id, remote job id) each."""
    found = []
    for _ in range(count):
        op_id = await submit(db)
        await drive(db, op_id, LocalState.OBSERVING)
        job = (await ledger.load_operation(db, op_id)).remote_job_id
        assert job is not None
        found.append((op_id, job))
    return found


async def _wakes(db: Any, op_id: str) -> int:
    return int(
        await db.fetchval("SELECT count(*) FROM operation_wakes WHERE operation_id = $1", op_id)
    )


async def test_each_event_of_a_hubspot_batch_is_stored_matched_and_woken(
    db: Any, pool: Any
) -> None:
    (op_a, job_a), (op_b, job_b) = await _observing(db, 2)
    batch = [
        hubspot_event(100, job_a),
        hubspot_event(101, job_b, "job.progress"),
        hubspot_event(102, "job-nobody-knows"),
    ]
    body = json.dumps(batch, indent=1).encode()  # as sent: whitespace between elements
    async with _receiver(pool, _hubspot_providers(), public_webhook_url=PUBLIC) as rx:
        first = await rx.post(body, hubspot_headers(body))
        again = await rx.post(body, hubspot_headers(body, NOW * 1000 + 900))
        stored = rx.metric(
            "jobwarden_webhook_events_stored_total", {"provider": "sim", "matched": "true"}
        )
        duplicates = rx.metric("jobwarden_webhook_events_duplicate_total", {"provider": "sim"})
    assert (first.status_code, first.json()) == (
        200,
        {"status": "stored", "events": 3, "new": 3, "duplicates": 0, "matched": 2},
    )
    assert again.json() == {
        "status": "duplicate",
        "events": 3,
        "new": 0,
        "duplicates": 3,
        "matched": 0,
    }
    assert (stored, duplicates) == (2, 3)
    events = sorted(await stored_events(db), key=lambda e: e["event_id"])
    assert [(e["event_id"], e["remote_job_id"], e["remote_state"]) for e in events] == [
        ("100", job_a, "succeeded"),
        ("101", job_b, "running"),
        ("102", "job-nobody-knows", "succeeded"),
    ]
    assert [e["operation_id"] for e in events] == [op_a, op_b, None]
    # each event's payload is its own element, not the batch
    assert [e["payload"] for e in events] == batch
    assert [o["remote_state"] for o in await webhook_observations(db, op_a)] == ["succeeded"]
    assert [o["remote_state"] for o in await webhook_observations(db, op_b)] == ["running"]
    assert await _wakes(db, op_a) == 1  # an end wakes its operation for the final read


async def test_an_event_sent_again_in_a_later_batch_is_a_duplicate_there(
    db: Any, pool: Any
) -> None:
    [(op_a, job_a)] = await _observing(db, 1)
    first = json.dumps([hubspot_event(200, job_a, "job.progress")]).encode()
    later = json.dumps(
        [hubspot_event(201, "job-x"), hubspot_event(200, job_a, "job.progress")]
    ).encode()
    async with _receiver(pool, _hubspot_providers(), public_webhook_url=PUBLIC) as rx:
        await rx.post(first, hubspot_headers(first))
        answer = await rx.post(later, hubspot_headers(later))
    assert answer.json() == {
        "status": "stored",
        "events": 2,
        "new": 1,
        "duplicates": 1,
        "matched": 0,
    }
    assert sorted(e["event_id"] for e in await stored_events(db)) == ["200", "201"]
    assert len(await webhook_observations(db, op_a)) == 1


async def test_a_forged_or_stale_batch_stores_nothing(db: Any, pool: Any) -> None:
    body = json.dumps([hubspot_event(300, "job-1")]).encode()
    forged = body.replace(b"300", b"301")
    async with _receiver(pool, _hubspot_providers(), public_webhook_url=PUBLIC) as rx:
        bad = await rx.post(forged, hubspot_headers(body))
        stale = await rx.post(body, hubspot_headers(body, (NOW - 301) * 1000))
    assert (bad.status_code, stale.status_code) == (401, 401)
    assert await stored_events(db) == []


# ---------------------------------------------------------------- SendGrid

SENDGRID_KEY = ec.generate_private_key(ec.SECP256R1())
SENDGRID_PUBLIC = base64.b64encode(
    SENDGRID_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()
SENDGRID_SIM = """
[providers.sim]
preset = "simulator"
[providers.sim.webhooks]
scheme = "asymmetric"
secrets_env = "SENDGRID_KEY"
events = ""
event_id = "/sg_event_id"
job_id = "/job_id"
state = "/event"
[providers.sim.webhooks.options]
algorithm = "ecdsa_p256"
signature_header = "X-Twilio-Email-Event-Webhook-Signature"
timestamp_header = "X-Twilio-Email-Event-Webhook-Timestamp"
signed_content = "{timestamp}{body}"
[providers.sim.webhooks.state_map]
delivered = "succeeded"
bounce = "failed"
processed = "running"
"""


def sendgrid_headers(body: bytes, timestamp: int = NOW) -> dict[str, str]:
    """SendGrid's signed Event Webhook: ECDSA P-256 over timestamp + body, DER, base64."""
    signature = SENDGRID_KEY.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        **JSON_HEADERS,
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp),
    }


async def test_a_sendgrid_batch_keeps_each_elements_text_exactly(db: Any, pool: Any) -> None:
    """Each payload is the element's own bytes as signed: a decimal past a double's
    precision and an escaped character stay as sent (a re-encoding of the parsed
    element would round 12345678901234567.89)."""
    [(op_a, job_a)] = await _observing(db, 1)
    body = (
        b'[{"sg_event_id":"sg-1","event":"processed","job_id":"' + job_a.encode() + b'",'
        b'"amount":12345678901234567.89,"name":"caf\\u00e9"},\n'
        b' {"sg_event_id":"sg-2","event":"delivered","job_id":"' + job_a.encode() + b'"},'
        b'{"sg_event_id":"sg-3","event":"open","email":"x@example.test"}]'
    )
    providers = describe(SENDGRID_SIM, {"SENDGRID_KEY": SENDGRID_PUBLIC})
    async with _receiver(pool, providers) as rx:
        answer = await rx.post(body, sendgrid_headers(body))
    assert answer.json() == {
        "status": "stored",
        "events": 3,
        "new": 3,
        "duplicates": 0,
        "matched": 2,
    }
    rows = await db.fetch(
        "SELECT event_id, payload->>'amount' AS amount, payload->>'name' AS name,"
        " remote_state, operation_id FROM webhook_events ORDER BY event_id"
    )
    assert [tuple(r) for r in rows] == [
        ("sg-1", "12345678901234567.89", "café", "running", op_a),
        ("sg-2", None, None, "succeeded", op_a),
        ("sg-3", None, None, None, None),
    ]
    assert [o["remote_state"] for o in await webhook_observations(db, op_a)] == [
        "running",
        "succeeded",
    ]


# ------------------------------------------- batches without an id of their own

# Standard Webhooks (the simulator's own scheme), a batch per delivery, no
# per-event id: each element is keyed by its bytes' hash.
STANDARD_BATCH = """
[providers.sim]
preset = "simulator"
[providers.sim.webhooks]
secrets_env = "S"
events = "EVENTS"
"""


def _standard(events: str = "") -> dict[str, Any]:
    return describe(STANDARD_BATCH.replace("EVENTS", events), {"S": SECRET})


def _digest(text: bytes) -> str:
    return "sha256:" + hashlib.sha256(text).hexdigest()


async def test_elements_without_ids_are_keyed_by_their_bytes(db: Any, pool: Any) -> None:
    """Not by the delivery's signed id (it names the batch): an element repeated
    verbatim is one event, and elements that are no object (a number, a
    string, a list) are stored too, matched to nothing."""
    same = b'{"job_id":"job-9","state":"running"}'
    body = b"[" + same + b"," + same + b', 7, "text", [1, 2]]'
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_batch"))
        again = await rx.post(body, standard_headers(body, "msg_batch_resent"))
    assert answer.json() == {
        "status": "stored",
        "events": 5,
        "new": 4,
        "duplicates": 1,
        "matched": 0,
    }
    assert again.json()["status"] == "duplicate"
    # the writer inserts a batch in its keys' order, not the elements'
    events = {e["event_id"]: e for e in await stored_events(db)}
    assert {key: (e["remote_job_id"], e["payload"]) for key, e in events.items()} == {
        _digest(same): ("job-9", {"job_id": "job-9", "state": "running"}),
        _digest(b"7"): (None, 7),
        _digest(b'"text"'): (None, "text"),
        _digest(b"[1, 2]"): (None, [1, 2]),
    }


async def test_a_graph_style_list_inside_an_object(db: Any, pool: Any) -> None:
    """Microsoft Graph's `{"value": [...]}`; a body whose `value` is no list is one
    event, read with the same paths (here: naming no job)."""
    body = json.dumps(
        {"value": [{"job_id": "job-1", "state": "running"}, {"job_id": "job-2"}]}
    ).encode()
    single = json.dumps({"job_id": "job-3", "state": "succeeded", "value": {}}).encode()
    async with _receiver(pool, _standard("/value")) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_graph"))
        one = await rx.post(single, standard_headers(single, "msg_single"))
    assert answer.json()["events"] == 2
    assert one.json() == {"status": "stored", "matched": False}
    events = await stored_events(db)
    assert {(e["event_id"], e["remote_job_id"]) for e in events} == {
        (_digest(b'{"job_id": "job-1", "state": "running"}'), "job-1"),
        (_digest(b'{"job_id": "job-2"}'), "job-2"),
        ("msg_single", "job-3"),  # a single event keeps the scheme's signed id
    }


async def test_an_empty_batch_is_answered_and_stores_nothing(db: Any, pool: Any) -> None:
    body = b"[ ]"
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_empty"))
    assert (answer.status_code, answer.json()) == (
        200,
        {"status": "stored", "events": 0, "new": 0, "duplicates": 0, "matched": 0},
    )
    assert await stored_events(db) == []


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
async def test_a_batch_in_another_encoding_is_cut_as_sent(
    db: Any, pool: Any, encoding: str
) -> None:
    """A UTF-16/32 body or one with a BOM (JSON's readers take them) is cut as a UTF-8
    body is: each element's own text, in UTF-8. A re-encoding of the parsed element
    would round a long decimal through a double and write a number past a double's
    range, or an integer longer than `int()` reads, as Infinity, its digits lost."""
    long = "1" + "0" * 5000
    text = (
        '[{"job_id": "job-1", "d": 12345678901234567.89},\n'
        ' {"job_id": "job-2", "big": 1e400, "n": ' + long + ', "name": "caf\\u00e9 \u00e9"}]'
    )
    body = text.encode(encoding)
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, f"msg_{encoding}"))
    assert answer.json()["new"] == 2
    rows = await db.fetch(
        "SELECT event_id, remote_job_id, payload::text AS payload, payload->>'name' AS name"
        " FROM webhook_events"
        " ORDER BY remote_job_id"
    )
    elements = [
        '{"job_id": "job-1", "d": 12345678901234567.89}',
        '{"job_id": "job-2", "big": 1e400, "n": ' + long + ', "name": "caf\\u00e9 \u00e9"}',
    ]
    assert [(r["event_id"], r["remote_job_id"]) for r in rows] == [
        (_digest(elements[0].encode()), "job-1"),
        (_digest(elements[1].encode()), "job-2"),
    ]
    assert "12345678901234567.89" in rows[0]["payload"]
    assert long in rows[1]["payload"]
    assert rows[1]["name"] == "café é"


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf", b""])
async def test_a_deeply_nested_batch_is_stored_whatever_its_encoding(
    db: Any, pool: Any, bom: bytes
) -> None:
    """An element nested as deep as the reader follows, in a body with a BOM, is
    stored as one without: the answer was a 500 on every delivery (its
    re-encoding recursed past the interpreter's limit), the batch never stored."""
    deep = b'{"a":' * 600 + b"1" + b"}" * 600
    body = bom + b"[" + deep + b', {"job_id": "job-1"}]'
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_deep"))
    assert (answer.status_code, answer.json()["new"]) == (200, 2)
    keys = {e["event_id"] for e in await stored_events(db)}
    assert keys == {_digest(deep), _digest(b'{"job_id": "job-1"}')}


async def test_a_batch_larger_than_the_writers_queue_is_stored_a_part_at_a_time(
    db: Any, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "MAX_QUEUED_EVENTS", 300)
    body = json.dumps([{"job_id": f"job-{n}"} for n in range(700)]).encode()
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_big"))
    assert answer.json()["new"] == 700
    assert await db.fetchval("SELECT count(*) FROM webhook_events") == 700


async def test_a_batch_the_writer_takes_only_part_of_is_retried_and_stored_once(
    db: Any, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full queue refuses part of a batch: the part stored stays, the answer is
    503 (the sender retries the whole batch), and the retry stores the rest,
    each element exactly once."""
    body = json.dumps([{"job_id": f"job-{n}"} for n in range(200)]).encode()
    headers = standard_headers(body, "msg_partial")
    async with _receiver(pool, _standard()) as rx:
        monkeypatch.setattr(ingest, "MAX_QUEUED_EVENTS", 50)
        refused = await rx.post(body, headers)
        part = await db.fetchval("SELECT count(*) FROM webhook_events")
        monkeypatch.setattr(ingest, "MAX_QUEUED_EVENTS", 4096)
        retried = await rx.post(body, headers)
        unavailable = rx.metric(
            "jobwarden_webhook_events_rejected_total", {"provider": "sim", "reason": "queue_full"}
        )
    assert (refused.status_code, refused.headers["retry-after"]) == (503, "5")
    assert 50 <= part < 200
    assert retried.json() == {
        "status": "stored",
        "events": 200,
        "new": 200 - part,
        "duplicates": part,
        "matched": 0,
    }
    assert unavailable == 1
    keys = [e["remote_job_id"] for e in await stored_events(db)]
    assert sorted(keys) == sorted(f"job-{n}" for n in range(200))


class ElementParser(ProviderAdapter):
    """A plugin reading each delivery itself: in a batch, each element's text."""

    seen: list[bytes] = []

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact:
        ElementParser.seen.append(body)
        document = json.loads(body)
        return WebhookFact(
            event_id="ignored: the receiver keys the event",
            remote_job_id=document["ref"].upper(),
            remote_state=RemoteState.RUNNING,
            raw_state="running",
            operation_ref=None,
            thin=False,
        )


async def test_a_plugin_reads_each_element_of_a_batch(db: Any, pool: Any) -> None:
    toml = STANDARD_BATCH.replace(
        'preset = "simulator"', f'preset = "simulator"\nplugin = "{__name__}:ElementParser"'
    )
    providers = describe(toml.replace("EVENTS", ""), {"S": SECRET})
    ElementParser.seen.clear()
    body = b'[{"ref": "job-a"},  {"ref": "job-b"}]'
    async with _receiver(pool, providers) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_plugin"))
    assert answer.json()["new"] == 2
    assert ElementParser.seen == [b'{"ref": "job-a"}', b'{"ref": "job-b"}']
    events = await stored_events(db)
    assert sorted((e["remote_job_id"], e["remote_state"]) for e in events) == [
        ("JOB-A", "running"),
        ("JOB-B", "running"),
    ]


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("events", "says"),
    [
        ("/", 'the body itself is ""'),
        ("/items/[kind=a]", "no selector"),
        ("header:X-Events", "reads the header"),
        ("/a/b~", "bad path"),
    ],
)
def test_an_events_path_that_names_no_list_is_refused_at_load(events: str, says: str) -> None:
    with pytest.raises(ConfigError, match="events") as raised:
        _standard(events)
    assert says in str(raised.value)


def test_without_events_an_array_is_one_unread_event_as_before() -> None:
    desc = describe(STANDARD_BATCH.replace('events = "EVENTS"\n', ""), {"S": SECRET})["sim"]
    assert desc.webhooks is not None and desc.webhooks.events is None


def _webhooks_line(providers: dict[str, Any]) -> str:
    [line] = [
        why for name, _, why in describe_guarantees(providers["sim"]) if name == "webhooks signed"
    ]
    return line


def test_providers_check_says_how_a_batch_is_read() -> None:
    assert (
        "batches: each element of the list the body is an event of its own, deduplicated on "
        "its own id at /eventId, answered once all are stored"
    ) in _webhooks_line(_hubspot_providers())
    assert (
        "each element of the list at /value is an event of its own, deduplicated on its "
        "bytes' sha256"
    ) in _webhooks_line(_standard("/value"))
    plain = describe(STANDARD_BATCH.replace('events = "EVENTS"\n', ""), {"S": SECRET})
    assert "batches" not in _webhooks_line(plain)


async def test_a_batch_whose_list_cannot_be_cut_is_stored_whole_unread(
    db: Any, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last resort (no JSON the reader reads is known to reach it): the body as
    one unread event, exactly as sent, as a provider without `events` stores it."""
    monkeypatch.setattr(endpoint, "element_texts", lambda *_: None)
    body = b'[{"job_id": "job-1"}, {"job_id": "job-2"}]'
    async with _receiver(pool, _standard()) as rx:
        answer = await rx.post(body, standard_headers(body, "msg_uncut"))
        unread = rx.metric("jobwarden_webhook_events_unread_total", {"provider": "sim"})
    assert answer.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert (event["event_id"], event["remote_job_id"], unread) == ("msg_uncut", None, 1)
    assert base64.b64decode(event["payload"]["body_base64"]) == body


# ------------------------------------------- one element refused for good


class FailingParser(ProviderAdapter):
    """A plugin that fails on the element naming `broken` (until it is fixed)."""

    broken: str | None = None

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact:
        ref = json.loads(body)["ref"]
        if ref == FailingParser.broken:
            raise RuntimeError("a plugin's bug")
        return WebhookFact(
            event_id="ignored: the receiver keys the event",
            remote_job_id=ref,
            remote_state=RemoteState.RUNNING,
            raw_state="running",
            operation_ref=None,
            thin=False,
        )


async def test_an_element_a_plugin_fails_on_keeps_no_other_from_being_stored(
    db: Any, pool: Any
) -> None:
    """The delivery is answered 500 (the sender retries it once the plugin is fixed),
    but every other element, in its part and in later ones, is stored at once: one
    poison element must not fail its neighbours, as the writer's own rule is for
    rows. Before, its part and every later part were never stored, on any retry
    before the fix (a sender gives up after a day: they were lost)."""
    toml = STANDARD_BATCH.replace(
        'preset = "simulator"', f'preset = "simulator"\nplugin = "{__name__}:FailingParser"'
    )
    providers = describe(toml.replace("EVENTS", ""), {"S": SECRET})
    count = BATCH_SUBMIT_CHUNK + 10  # two parts
    body = json.dumps([{"ref": f"job-{n}"} for n in range(count)]).encode()
    FailingParser.broken = "job-3"
    async with _receiver(pool, providers) as rx:
        refused = await rx.post(body, standard_headers(body, "msg_poison"))
        stored = {e["remote_job_id"] for e in await stored_events(db)}
        FailingParser.broken = None
        retried = await rx.post(body, standard_headers(body, "msg_poison"))
    assert refused.status_code == 500
    assert stored == {f"job-{n}" for n in range(count)} - {"job-3"}
    assert retried.json() == {
        "status": "stored",
        "events": count,
        "new": 1,
        "duplicates": count - 1,
        "matched": 0,
    }


async def test_an_element_the_database_refuses_keeps_no_other_from_being_stored(
    db: Any, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An element refused even in base64 (here: the fallback made unstorable too) is
    answered 500, the other elements of every part stored all the same."""
    monkeypatch.setattr(ingest, "unstorable_payload", lambda _raw: "not json")
    count = BATCH_SUBMIT_CHUNK + 10
    elements = [f'{{"job_id": "job-{n}"}}' for n in range(count)]
    elements[5] = '{"job_id": "job-5", "n": 1e200000}'  # past PostgreSQL's numeric range
    body = ("[" + ", ".join(elements) + "]").encode()
    async with _receiver(pool, _standard()) as rx:
        refused = await rx.post(body, standard_headers(body, "msg_refused"))
    assert refused.status_code == 500
    stored = {e["remote_job_id"] for e in await stored_events(db)}
    assert stored == {f"job-{n}" for n in range(count)} - {"job-5"}


async def test_one_id_twice_in_a_batch_keeps_the_first_element(db: Any, pool: Any) -> None:
    """SendGrid may repeat an sg_event_id within one batch (a retried event joined to
    a new one): the first element is the event, the second a duplicate of it,
    in one part or across two."""
    count = BATCH_SUBMIT_CHUNK + 2
    elements = [{"sg_event_id": f"sg-{n}", "event": "processed"} for n in range(count)]
    elements[1] = {"sg_event_id": "sg-0", "event": "delivered"}  # the same part
    elements[-1] = {"sg_event_id": "sg-2", "event": "open"}  # the next part
    body = json.dumps(elements).encode()
    providers = describe(SENDGRID_SIM, {"SENDGRID_KEY": SENDGRID_PUBLIC})
    async with _receiver(pool, providers) as rx:
        answer = await rx.post(body, sendgrid_headers(body))
    assert (answer.json()["new"], answer.json()["duplicates"]) == (count - 2, 2)
    kept = await db.fetch(
        "SELECT event_id, payload->>'event' AS event FROM webhook_events"
        " WHERE event_id IN ('sg-0', 'sg-2') ORDER BY event_id"
    )
    assert [tuple(row) for row in kept] == [("sg-0", "processed"), ("sg-2", "processed")]


# ------------------------------------------------------------- Azure Event Grid

EVENT_GRID_KEY = "eg-callback-key-0123456789abcdef"
EVENT_GRID_SIM = """
[providers.sim]
preset = "simulator"
[providers.sim.webhooks]
scheme = "static_header"
secrets_env = "EG_KEY"
events = ""
event_id = "/id"
job_id = "/subject"
state = "/eventType"
challenge = "event_grid"
[providers.sim.webhooks.options]
query = "key"
[providers.sim.webhooks.state_map]
"Contoso.Jobs.Finished" = "succeeded"
"""
VALIDATION = "Microsoft.EventGrid.SubscriptionValidationEvent"


def _event_grid() -> dict[str, Any]:
    return describe(EVENT_GRID_SIM, {"EG_KEY": EVENT_GRID_KEY})


def grid_event(event_id: str, subject: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """An event in Event Grid's own schema."""
    return {
        "id": event_id,
        "topic": "/subscriptions/s/resourceGroups/g/providers/Contoso.Jobs/jobs",
        "subject": subject,
        "eventType": kind,
        "eventTime": "2027-01-15T08:00:00Z",
        "data": data,
        "dataVersion": "1",
        "metadataVersion": "1",
    }


async def test_event_grids_subscription_validation_is_answered_never_stored(
    db: Any, pool: Any
) -> None:
    code = "512d38b6-c7b8-40c8-89fe-f46f9e9622b6"
    data = {"validationCode": code, "validationUrl": "https://rp-eastus2.eventgrid.azure.net/x"}
    body = json.dumps([grid_event("v-1", "", VALIDATION, data)]).encode()
    async with _receiver(pool, _event_grid()) as rx:
        answered = await rx.post(body, JSON_HEADERS, query=f"?key={EVENT_GRID_KEY}")
        forged = await rx.post(body, JSON_HEADERS, query="?key=a-guess-at-the-key-0123456")
    assert (answered.status_code, answered.json()) == (200, {"validationResponse": code})
    assert forged.status_code == 401  # verified first: a stranger learns nothing
    assert await stored_events(db) == []


async def test_event_grid_events_are_stored_one_by_one_and_a_lookalike_among_them_too(
    db: Any, pool: Any
) -> None:
    """A challenge comes alone: in a longer batch, an element shaped like one is
    an event like the others (stored, never answered)."""
    [(op_a, job_a)] = await _observing(db, 1)
    lookalike = grid_event("v-2", "", VALIDATION, {"validationCode": "c"})
    body = json.dumps(
        [grid_event("e-1", job_a, "Contoso.Jobs.Finished", {"size": 3}), lookalike]
    ).encode()
    async with _receiver(pool, _event_grid()) as rx:
        answer = await rx.post(body, JSON_HEADERS, query=f"?key={EVENT_GRID_KEY}")
    assert answer.json() == {
        "status": "stored",
        "events": 2,
        "new": 2,
        "duplicates": 0,
        "matched": 1,
    }
    # a token in the URL signs no body: each element is keyed by its bytes' hash
    events = {e["payload"]["id"]: e for e in await stored_events(db)}
    assert all(e["event_id"].startswith("sha256:") for e in events.values())
    assert (events["e-1"]["operation_id"], events["e-1"]["remote_state"]) == (op_a, "succeeded")
    assert events["v-2"]["operation_id"] is None
    # the callback token in the URL is never kept
    assert EVENT_GRID_KEY not in json.dumps([dict(e) for e in events.values()], default=str)


def test_event_grids_challenge_needs_events() -> None:
    with pytest.raises(ConfigError, match='set events = ""'):
        describe(EVENT_GRID_SIM.replace('events = ""\n', ""), {"EG_KEY": EVENT_GRID_KEY})


def test_a_schemes_own_body_id_keys_batch_elements_and_check_says_so() -> None:
    """Stripe's scheme reads `/id` with no `event_id` set: each element's own id."""
    toml = """
    [providers.sim]
    preset = "simulator"
    [providers.sim.webhooks]
    scheme = "stripe"
    secrets_env = "S"
    events = "/data"
    """
    line = _webhooks_line(describe(toml, {"S": "whsec_stripe_test_secret"}))
    assert (
        "each element of the list at /data is an event of its own, deduplicated on its "
        "own id at /id" in line
    )


# ------------------------------------------------------------- a real crash


async def _started_receiver(
    tmp_path: Path, db_url: str, name: str
) -> tuple[subprocess.Popen[bytes], int]:
    """`jobwarden receiver` in a process of its own, once it says it is ready."""
    config = tmp_path / "jobwarden.toml"
    config.write_text(STANDARD_BATCH.replace("EVENTS", ""))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / f"notify-{name}"))
    notify.setblocking(False)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "JW_CONFIG": str(config),
        "S": SECRET,
        "NOTIFY_SOCKET": str(tmp_path / f"notify-{name}"),
        "JW_LOG_LEVEL": "WARNING",
    }
    with (tmp_path / f"{name}.log").open("wb") as log:  # the child keeps its own copy
        proc = subprocess.Popen(
            [sys.executable, "-m", "shared.cli", "receiver", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=log,
        )
    loop = asyncio.get_running_loop()
    try:
        ready = await asyncio.wait_for(loop.sock_recv(notify, 1024), 60)
    finally:
        notify.close()
    assert ready == b"READY=1"
    return proc, port


async def test_a_receiver_killed_mid_batch_loses_nothing_and_the_resend_stores_each_once(
    db: Any, db_url: str, tmp_path: Path
) -> None:
    """SIGKILL while a long batch is being stored, parts committed and parts not: the
    sender, unanswered, posts the batch again to the restarted receiver, which
    stores the rest, each element exactly once."""
    count = 40_000
    body = json.dumps([{"job_id": f"j-{n:05}"} for n in range(count)]).encode()
    headers = standard_headers(body, "msg_killed", timestamp=int(time.time()))
    proc, port = await _started_receiver(tmp_path, db_url, "first")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            posting = asyncio.create_task(
                client.post("/webhooks/sim", content=body, headers=headers)
            )
            await wait_until(
                lambda: _stored_count(db, lambda n: n > 0), 60, "a first part committed", 0.005
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            with pytest.raises(httpx.TransportError):
                await posting  # never answered: the sender will post it again
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    survived = int(await db.fetchval("SELECT count(*) FROM webhook_events"))
    assert 0 < survived < count  # killed mid-batch: some parts in, some not
    proc, port = await _started_receiver(tmp_path, db_url, "second")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            resent = await client.post("/webhooks/sim", content=body, headers=headers)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert resent.json() == {
        "status": "stored",
        "events": count,
        "new": count - survived,
        "duplicates": survived,
        "matched": 0,
    }
    rows = await db.fetch("SELECT remote_job_id FROM webhook_events")
    assert sorted(r["remote_job_id"] for r in rows) == [f"j-{n:05}" for n in range(count)]


async def _stored_count(db: Any, holds: Callable[[int], bool]) -> bool:
    return holds(int(await db.fetchval("SELECT count(*) FROM webhook_events")))
