"""Authentic deliveries a careless receiver loses, and refusals that must end the connection.

Each delivery is signed the way its provider signs it (Standard Webhooks,
Stripe, GitHub, generic HMAC) and sent over a real socket to a real uvicorn
server (`serve_app`). For every authentic event the test checks the answer,
that exactly one row holds it, and that a forged copy stored nothing:

- bodies PostgreSQL will not hold as they came (a number beyond its numeric
  range, UTF-16 without a BOM), an integer longer than Python reads, and an
  object nested deeper than Python reads;
- ids written as JSON floats that one double holds (two events, not one),
  and numbers beside an escaped emoji (kept as sent, not rounded);
- a poison event in a group-commit batch with neighbours;
- a non-ASCII header the receiver does not read;
- a compressed body (415, never decompressed), a wrong content type under
  `Expect: 100-continue` (refused before the upload), and refusals that
  leave the body unread (answered with `Connection: close`).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from starlette.types import Message

from receiver.app import build_app
from receiver.webhooks.ingest import BatchReport, Event, Ingestor, Outcome
from shared import ledger
from shared.ledger import RequestSpec
from shared.providers import ProviderDescription, parse_providers
from shared.providers.adapter import ProviderAdapter
from shared.providers.facts import WebhookFact
from shared.serve import serve_app
from shared.settings import Settings
from shared.signatures import sign, sign_generic
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    PROVIDER,
    SECRET,
    WRONG_SECRET,
    Running,
    describe,
    settings_for,
    sim_description,
    standard_headers,
    stored_events,
)

# Bound on waiting for a signal the test set up (an answer, the server's
# end of the connection); generous for a loaded CI box.
WAIT_SECONDS = 5.0
REJECTED = "jobwarden_webhook_events_rejected_total"
SMALL_BODY_LIMIT = 4096
STRIPE_SECRET = "whsec_stripe_style_secret_used_as_is"
GITHUB_SECRET = "It's a Secret to Everybody"
GENERIC_SECRET = "generic-secret"
GENERIC_OPTIONS = {
    "signature_header": "X-Signature",
    "signed_content": "{id}.{timestamp}.{body}",
    "timestamp_header": "X-Timestamp",
    "id_header": "X-Event-Id",
}
# What a payload stored in base64 says it is (receiver.webhooks.ingest).
UNSTORABLE_MARKER = "payload not representable as jsonb"
CAFE_AGENT = "ProviderBot/1.0 (caf\u00e9)".encode()

_BASE = """
[providers.NAME]
base_url = "https://provider.example.test"
[providers.NAME.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.NAME.status]
path = "/jobs/{job_id}"
state = "/status"
[providers.NAME.status.state_map]
done = "succeeded"
[providers.NAME.result]
source = "none"
[providers.NAME.webhooks]
"""


class OwnParser(ProviderAdapter):
    """A plugin that parses deliveries itself, so it may read any header."""

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact:
        return super().parse_webhook(body, headers, query)


def _providers() -> dict[str, ProviderDescription]:
    generic_options = "\n".join(f'{k} = "{v}"' for k, v in GENERIC_OPTIONS.items())
    toml = "".join(
        _BASE.replace("NAME", name) + webhooks
        for name, webhooks in (
            ("stripeish", 'scheme = "stripe"\nsecrets_env = "STRIPE"\njob_id = "/job_id"\n'),
            ("gh", 'scheme = "github"\nsecrets_env = "GH"\njob_id = "/job_id"\n'),
            ("byheader", 'scheme = "github"\nsecrets_env = "GH"\njob_id = "header:X-Job-Id"\n'),
            (
                "generic",
                'scheme = "generic_hmac"\nsecrets_env = "GEN"\njob_id = "/job_id"\n'
                f"[providers.generic.webhooks.options]\n{generic_options}\n",
            ),
        )
    )
    env = {"STRIPE": STRIPE_SECRET, "GH": GITHUB_SECRET, "GEN": GENERIC_SECRET}
    plugin = f"{__name__}:OwnParser"
    table = {"preset": "simulator", "plugin": plugin, "webhooks": {"secrets_env": "SECRET"}}
    own = parse_providers({"providers": {"ownparser": table}}, "test", {"SECRET": SECRET})
    return {**describe(toml, env), **own, PROVIDER: sim_description()}


def _settings(**overrides: Any) -> Settings:
    return settings_for(_providers(), **overrides)


@asynccontextmanager
async def served(pool: Any, settings: Settings | None = None) -> AsyncIterator[Running]:
    """The receiver on a real uvicorn socket, with an httpx client on its base URL."""
    app = build_app(settings or _settings(), pool, now=lambda: float(NOW))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield Running(app, client)


@dataclass(frozen=True)
class Sender:
    """One signature scheme as its provider signs a delivery."""

    provider: str
    secret: str
    forged_secret: str
    signer: Callable[[bytes, str, str], dict[str, str]]
    body_keyed: bool = False  # GitHub signs only the body: the dedupe key is its hash

    def headers(self, body: bytes, event_id: str) -> dict[str, str]:
        return self.signer(body, event_id, self.secret)

    def forged(self, body: bytes, event_id: str) -> dict[str, str]:
        return self.signer(body, event_id, self.forged_secret)

    def dedupe_id(self, body: bytes, event_id: str) -> str:
        return "sha256:" + hashlib.sha256(body).hexdigest() if self.body_keyed else event_id


def _standard(body: bytes, event_id: str, secret: str) -> dict[str, str]:
    return standard_headers(body, event_id, secret=secret)


def _stripe(body: bytes, event_id: str, secret: str) -> dict[str, str]:
    # Stripe's event id is the body's /id, which every body here carries
    return {**JSON_HEADERS, "stripe-signature": sign("stripe", {}, secret, body, timestamp=NOW)}


def _github(body: bytes, event_id: str, secret: str) -> dict[str, str]:
    signature = sign("github", {}, secret, body)
    return {**JSON_HEADERS, "x-hub-signature-256": signature, "x-github-delivery": event_id}


def _generic(body: bytes, event_id: str, secret: str) -> dict[str, str]:
    signature = sign_generic(GENERIC_OPTIONS, secret, body, timestamp=NOW, event_id=event_id)
    return {
        **JSON_HEADERS,
        "x-signature": signature,
        "x-timestamp": str(NOW),
        "x-event-id": event_id,
    }


SENDERS = {
    "standard_webhooks": Sender(PROVIDER, SECRET, WRONG_SECRET, _standard),
    "stripe": Sender("stripeish", STRIPE_SECRET, "whsec_a_guess", _stripe),
    "github": Sender("gh", GITHUB_SECRET, "a guess", _github, body_keyed=True),
    "generic_hmac": Sender("generic", GENERIC_SECRET, "a guess", _generic),
}


def _text(event_id: str, number: str) -> str:
    """A delivery's JSON text with `number` written as is."""
    return f'{{"id": "{event_id}", "type": "job.updated", "job_id": "job_1", "n": {number}}}'


async def _rows(db: Any) -> list[tuple[str, str | None, str]]:
    """(event id, job id, payload as text): the payload read as text, not by the
    connection's json codec, which could not read back every number stored."""
    rows = await db.fetch(
        "SELECT event_id, remote_job_id, payload::text AS payload FROM webhook_events"
        " ORDER BY webhook_event_id"
    )
    return [(r["event_id"], r["remote_job_id"], r["payload"]) for r in rows]


async def _deliver_twice_and_forge(
    pool: Any, sender: Sender, body: bytes, forged_body: bytes
) -> list[tuple[int, Any]]:
    """The authentic delivery, its redelivery and a forged one: their answers."""
    async with served(pool) as rx:
        answers = [
            await rx.post(body, sender.headers(body, "evt_1"), sender.provider),
            await rx.post(body, sender.headers(body, "evt_1"), sender.provider),
            await rx.post(forged_body, sender.forged(forged_body, "evt_forged"), sender.provider),
        ]
    return [(a.status_code, a.json()) for a in answers]


STORED_TWICE_FORGED_ONCE = [
    (200, {"status": "stored", "matched": False}),
    (200, {"status": "duplicate"}),
    (401, {"error": "rejected"}),
]


# --------------------------------------------------- payloads PostgreSQL refuses


@pytest.mark.parametrize(
    "number",
    ["1e200000", "-1e-16384", "0." + "1" * 20000, "9" * 131073],
    ids=["exponent", "tiny", "20000_decimals", "131073_digits"],
)
@pytest.mark.parametrize("scheme", sorted(SENDERS))
async def test_a_number_beyond_postgres_numeric_is_stored_once_with_its_body_in_base64(
    db: Any, pool: Any, scheme: str, number: str
) -> None:
    sender = SENDERS[scheme]
    body = _text("evt_1", number).encode()
    forged = _text("evt_forged", number).encode()
    answers = await _deliver_twice_and_forge(pool, sender, body, forged)
    assert answers == STORED_TWICE_FORGED_ONCE
    [(event_id, job_id, payload)] = await _rows(db)
    assert (event_id, job_id) == (sender.dedupe_id(body, "evt_1"), "job_1")
    kept = json.loads(payload)
    assert kept == {"jobwarden": UNSTORABLE_MARKER, "body_base64": base64.b64encode(body).decode()}
    assert base64.b64decode(kept["body_base64"]) == body  # the body exactly


@pytest.mark.parametrize(
    ("encoding", "accented"),
    [("utf-16-le", False), ("utf-16-be", False), ("utf-32-le", False), ("utf-16-le", True)],
    ids=["utf16le", "utf16be", "utf32le", "utf16le_accented"],
)
@pytest.mark.parametrize("scheme", sorted(SENDERS))
async def test_a_body_in_utf16_without_a_bom_is_stored_once_as_utf8(
    db: Any, pool: Any, scheme: str, encoding: str, accented: bool
) -> None:
    sender = SENDERS[scheme]
    text = _text("evt_1", "1.5")
    if accented:  # no longer UTF-8 at all: re-encoded even before NUL bytes were looked for
        text = text.replace('"job.updated"', '"caf\u00e9 \U0001f600"')
    body, forged = text.encode(encoding), _text("evt_forged", "1").encode(encoding)
    assert b"\x00" in body  # what PostgreSQL refused, read as UTF-8
    answers = await _deliver_twice_and_forge(pool, sender, body, forged)
    assert answers == STORED_TWICE_FORGED_ONCE
    [(event_id, job_id, payload)] = await _rows(db)
    assert (event_id, job_id) == (sender.dedupe_id(body, "evt_1"), "job_1")
    assert json.loads(payload) == json.loads(text)  # re-encoded, every character kept


@pytest.mark.parametrize("scheme", sorted(SENDERS))
async def test_an_integer_longer_than_python_reads_is_stored_once_digit_for_digit(
    db: Any, pool: Any, scheme: str
) -> None:
    sender = SENDERS[scheme]
    digits = "7" * 5000  # past sys.get_int_max_str_digits() (4,300)
    body, forged = _text("evt_1", digits).encode(), _text("evt_forged", digits).encode()
    answers = await _deliver_twice_and_forge(pool, sender, body, forged)
    assert answers == STORED_TWICE_FORGED_ONCE
    [(event_id, job_id, _)] = await _rows(db)
    assert (event_id, job_id) == (sender.dedupe_id(body, "evt_1"), "job_1")
    # the raw text, kept as jsonb: the number is the sender's, every digit
    assert await db.fetchval("SELECT payload->>'n' FROM webhook_events") == digits


async def test_a_long_integer_job_id_is_read_digit_for_digit(db: Any, pool: Any) -> None:
    digits = "12345" * 900
    body = f'{{"job_id": {digits}, "state": "running"}}'.encode()
    async with served(pool) as rx:
        resp = await rx.post(body, standard_headers(body, "msg_long"))
    assert resp.json() == {"status": "stored", "matched": False}
    [event] = await _rows(db)
    assert event[1] is not None and digits.startswith(event[1].rstrip("\u2026"))


def _body_hash(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize("depth", [1000, 10_000])
@pytest.mark.parametrize("scheme", sorted(SENDERS))
async def test_an_object_nested_deeper_than_python_reads_is_stored_once_unread(
    db: Any, pool: Any, scheme: str, depth: int
) -> None:
    sender = SENDERS[scheme]
    nested = "[" * depth + "]" * depth
    body = _text("evt_1", nested).encode()
    forged = _text("evt_forged", nested).encode()
    answers = await _deliver_twice_and_forge(pool, sender, body, forged)
    assert answers == STORED_TWICE_FORGED_ONCE
    [(event_id, job_id, payload)] = await _rows(db)
    # nothing in the body is read: no job id, and no id from it (Stripe's /id)
    signed_id = scheme in ("standard_webhooks", "generic_hmac")
    assert (event_id, job_id) == ("evt_1" if signed_id else _body_hash(body), None)
    assert _kept_body(payload) == body


async def test_a_deep_text_that_is_not_json_is_kept_unread_too(db: Any, pool: Any) -> None:
    body = b'{"job_id": "job_1", "deep": ' + b"[" * 5000 + b"}"
    async with served(pool) as rx:
        resp = await rx.post(body, standard_headers(body, "evt_1"))
    assert (resp.status_code, resp.json()) == (200, {"status": "stored", "matched": False})
    [event] = await stored_events(db)
    assert (event["remote_job_id"], _kept_body(event["payload"])) == (None, body)


def _kept_body(payload: Any) -> bytes:
    kept = json.loads(payload) if isinstance(payload, str) else payload
    assert kept["jobwarden"] == UNSTORABLE_MARKER
    return base64.b64decode(kept["body_base64"])


# ------------------------------------------------- ids written as JSON floats


async def _operation_with_job(db: Any, provider: str, job_id: str) -> str:
    spec = RequestSpec("POST", "/jobs", {"n": 1})
    sub = await ledger.submit_operation(
        db, provider=provider, kind="export", request=spec, requested_by="agent:test"
    )
    await ledger.record_remote_job(db, sub.operation_id, job_id, create_mode="async")
    return sub.operation_id


async def test_two_float_ids_one_double_holds_are_two_events_naming_no_job(
    db: Any, pool: Any
) -> None:
    """Stripe's signed /id and the job id as 1e400 then 2e400: both "inf" to a double."""
    sender = SENDERS["stripe"]
    inf_operation = await _operation_with_job(db, sender.provider, "inf")
    bodies = [
        f'{{"id": {n}, "type": "job.updated", "job_id": {n}}}'.encode() for n in ("1e400", "2e400")
    ]
    async with served(pool) as rx:
        answers = [await rx.post(b, sender.headers(b, "-"), sender.provider) for b in bodies]
        again = await rx.post(bodies[1], sender.headers(bodies[1], "-"), sender.provider)
    stored = {"status": "stored", "matched": False}
    assert [(a.status_code, a.json()) for a in answers] == [(200, stored), (200, stored)]
    assert again.json() == {"status": "duplicate"}  # each still deduplicates by its hash
    assert [r[:2] for r in await _rows(db)] == [(_body_hash(b), None) for b in bodies]
    attached = "SELECT count(*) FROM webhook_events WHERE operation_id = $1"
    assert await db.fetchval(attached, inf_operation) == 0


async def test_numbers_beside_an_escaped_emoji_are_stored_as_sent(db: Any, pool: Any) -> None:
    numbers = '"amount": 12345678901234567.89, "price": 10.50'
    emoji = f'{{"job_id": "job_1", "name": "\\ud83d\\ude00", {numbers}}}'.encode()
    lone = f'{{"job_id": "job_1", "name": "\\ud800 \\u0000", {numbers}}}'.encode()
    async with served(pool) as rx:
        for event_id, body in (("msg_emoji", emoji), ("msg_lone", lone)):
            resp = await rx.post(body, standard_headers(body, event_id))
            assert resp.json() == {"status": "stored", "matched": False}
    rows = await db.fetch(
        "SELECT event_id, payload->>'name' AS name, (payload->'amount')::text AS amount,"
        " (payload->'price')::text AS price FROM webhook_events ORDER BY event_id"
    )
    assert [tuple(r) for r in rows] == [
        ("msg_emoji", "\U0001f600", "12345678901234567.89", "10.50"),
        ("msg_lone", "\ufffd \ufffd", "12345678901234567.89", "10.50"),
    ]


# --------------------------------------------------- a poison event in a batch


def _event(event_id: str, payload: str, remote_state: str | None = None) -> Event:
    return Event(
        PROVIDER, event_id, "standard_webhooks", True, "job_1", None, remote_state, None, payload
    )


async def test_a_poison_event_in_a_batch_fails_none_of_its_neighbours(db: Any, pool: Any) -> None:
    batches: list[BatchReport] = []
    ingestor = Ingestor(pool, acquire_timeout=WAIT_SECONDS, on_batch=batches.append)
    ingestor.start()
    poison = _text("evt_poison", "1e200000")
    try:
        # Submitted together before the writer runs: one batch (checked below).
        answers = await asyncio.gather(
            ingestor.submit(_event("before", '{"a": 1}')),
            ingestor.submit(_event("poison", poison)),
            ingestor.submit(_event("refused", '{"a": 2}', remote_state="not_a_state")),
            ingestor.submit(_event("after", '{"a": 3}')),
            return_exceptions=True,
        )
    finally:
        await ingestor.close()
    assert [(b.size, b.failed) for b in batches] == [(4, False)]
    before, stored_poison, refused, after = answers
    for outcome in (before, stored_poison, after):
        assert isinstance(outcome, Outcome) and outcome.status == "stored"
    # a refusal the payload does not explain stays one, and fails alone
    assert type(refused).__name__ == "IngestRejected"
    rows = {r[0]: r[2] for r in await _rows(db)}
    assert sorted(rows) == ["after", "before", "poison"]
    assert base64.b64decode(json.loads(rows["poison"])["body_base64"]).decode() == poison


async def test_poison_and_plain_deliveries_at_once_are_each_stored_once(db: Any, pool: Any) -> None:
    bodies = [_text(f"evt_{i}", "1e200000" if i == 3 else str(i)).encode() for i in range(8)]
    async with served(pool) as rx:
        answers = await asyncio.gather(
            *(rx.post(b, standard_headers(b, f"msg_{i}")) for i, b in enumerate(bodies))
        )
    assert [(a.status_code, a.json()["status"]) for a in answers] == [(200, "stored")] * 8
    assert sorted(r[0] for r in await _rows(db)) == [f"msg_{i}" for i in range(8)]


# ------------------------------------------------------ headers we do not read


def _raw(headers: Mapping[str, str], *extra: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()] + list(extra)


@pytest.mark.parametrize("scheme", sorted(SENDERS))
async def test_a_non_ascii_header_no_one_reads_does_not_lose_the_event(
    db: Any, pool: Any, scheme: str
) -> None:
    sender = SENDERS[scheme]
    body, forged = _text("evt_1", "1").encode(), _text("evt_forged", "1").encode()
    agent = (b"user-agent", CAFE_AGENT)
    url = f"/webhooks/{sender.provider}"
    async with served(pool) as rx:
        first = await rx.client.post(
            url, content=body, headers=_raw(sender.headers(body, "evt_1"), agent)
        )
        bad = await rx.client.post(
            url, content=forged, headers=_raw(sender.forged(forged, "evt_forged"), agent)
        )
    assert (first.status_code, first.json()) == (200, {"status": "stored", "matched": False})
    assert bad.status_code == 401
    assert [r[:2] for r in await _rows(db)] == [(sender.dedupe_id(body, "evt_1"), "job_1")]


@pytest.mark.parametrize(
    ("provider", "header"),
    [("generic", "x-event-id"), ("byheader", "x-job-id"), ("ownparser", "user-agent")],
    ids=["signed_id", "header_path", "plugin_reads_any"],
)
async def test_a_non_ascii_header_we_read_is_refused_naming_it(
    db: Any, pool: Any, provider: str, header: str
) -> None:
    body = _text("evt_1", "1").encode()
    headers = {
        "generic": _generic(body, "evt_1", GENERIC_SECRET),
        "byheader": _github(body, "evt_1", GITHUB_SECRET),
        "ownparser": standard_headers(body, "evt_1"),
    }[provider]
    raw = [(k.encode(), v.encode()) for k, v in headers.items() if k != header]
    raw.append((header.encode(), CAFE_AGENT))
    async with served(pool) as rx:
        resp = await rx.client.post(f"/webhooks/{provider}", content=body, headers=raw)
        count = rx.metric(REJECTED, {"provider": provider, "reason": "non_ascii_header"})
    assert (resp.status_code, resp.json()) == (
        400,
        {"error": "non_ascii_header", "header": header},
    )
    assert count == 1
    assert await stored_events(db) == []


# --------------------------------------------------- content codings: never decoded


def _compressed(encoding: str, body: bytes) -> bytes:
    return zlib.compress(body) if encoding.startswith("deflate") else gzip.compress(body)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "GZIP", "gzip, identity", "br"])
async def test_a_compressed_body_is_415_before_verifying_and_the_plain_one_is_stored(
    db: Any, pool: Any, encoding: str
) -> None:
    plain = _text("evt_1", "1").encode()
    packed = _compressed(encoding, plain)
    async with served(pool) as rx:
        # signed as a provider would sign it: over the bytes it sends
        refused = await rx.post(
            packed, {**standard_headers(packed, "msg_1"), "content-encoding": encoding}
        )
        counted = rx.metric(REJECTED, {"provider": PROVIDER, "reason": "unsupported_encoding"})
        verified = rx.metric("jobwarden_webhook_events_verified_total", {"provider": PROVIDER})
        stored = await rx.post(plain, {**standard_headers(plain, "msg_1")})
        identity = await rx.post(
            plain, {**standard_headers(plain, "msg_1"), "content-encoding": "identity"}
        )
    assert (refused.status_code, refused.json()) == (415, {"error": "unsupported_encoding"})
    assert refused.headers["accept-encoding"] == "identity"
    assert (counted, verified) == (1, 0)
    assert stored.json() == {"status": "stored", "matched": False}
    assert identity.json() == {"status": "duplicate"}
    assert [r[0] for r in await _rows(db)] == ["msg_1"]


# ------------------------------------ refused before the body: the connection ends


@asynccontextmanager
async def _socket(rx: Running) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    parts = urlsplit(str(rx.client.base_url))
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        await writer.wait_closed()


def _request_head(*headers: tuple[str, str]) -> bytes:
    lines = [f"POST /webhooks/{PROVIDER} HTTP/1.1", "host: rx", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """The first response on the connection, then its end: (status, headers, body).

    Reading to EOF is the signal that the server closed the connection; the
    bound only turns a server that keeps it open into a failure.
    """
    async with asyncio.timeout(WAIT_SECONDS):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")[:-2]
        headers = dict(line.lower().split(": ", 1) for line in lines)
        status = int(status_line.split(" ")[1])
        if status == 100 or headers.get("connection") != "close":
            return status, headers, b""  # no end to wait for: the test fails on these
        return status, headers, await reader.read()


@pytest.mark.parametrize(
    ("headers", "status", "reason"),
    [
        ((("content-type", "text/plain"),), 415, "unsupported_media_type"),
        (
            (("content-type", "application/json"), ("content-encoding", "gzip")),
            415,
            "unsupported_encoding",
        ),
        (
            (("content-type", "application/json"), ("content-length", "99999")),
            413,
            "body_too_large",
        ),
    ],
    ids=["content_type", "content_encoding", "declared_size"],
)
async def test_expect_100_continue_is_refused_before_the_upload(
    db: Any, pool: Any, headers: Sequence[tuple[str, str]], status: int, reason: str
) -> None:
    if not any(k == "content-length" for k, _ in headers):
        headers = (*headers, ("content-length", "1000"))
    settings = _settings(max_body_bytes=SMALL_BODY_LIMIT)
    async with served(pool, settings) as rx, _socket(rx) as (reader, writer):
        writer.write(_request_head(("expect", "100-continue"), *headers))
        await writer.drain()
        answer, response_headers, body = await _answer(reader)
        count = rx.metric(REJECTED, {"provider": PROVIDER, "reason": reason})
    assert answer == status  # not 100 Continue: the body is never asked for
    assert response_headers["connection"] == "close"
    assert json.loads(body)["error"] and count == 1
    assert await stored_events(db) == []


async def test_a_chunked_stream_over_the_limit_gets_413_and_the_connection_ends(
    db: Any, pool: Any
) -> None:
    chunk = b"x" * (SMALL_BODY_LIMIT + 1)
    async with (
        served(pool, _settings(max_body_bytes=SMALL_BODY_LIMIT)) as rx,
        _socket(rx) as (reader, writer),
    ):
        # a stream with no end in sight: only the server closing stops it
        writer.write(
            _request_head(("content-type", "application/json"), ("transfer-encoding", "chunked"))
            + f"{len(chunk):x}\r\n".encode()
            + chunk
            + b"\r\n"
        )
        await writer.drain()
        status, headers, body = await _answer(reader)
    assert (status, headers["connection"], json.loads(body)) == (
        413,
        "close",
        {"error": "too_large"},
    )
    assert await stored_events(db) == []


async def test_a_declared_size_over_the_limit_gets_413_with_connection_close(
    db: Any, pool: Any
) -> None:
    body = _text("evt_1", "1" * SMALL_BODY_LIMIT).encode()
    async with served(pool, _settings(max_body_bytes=SMALL_BODY_LIMIT)) as rx:
        resp = await rx.post(body, standard_headers(body))
    assert (resp.status_code, resp.headers["connection"]) == (413, "close")
    assert await stored_events(db) == []


async def test_a_body_cut_short_is_answered_with_connection_close(pool: Any) -> None:
    """Through the app's ASGI interface: over a socket the client that went away
    is gone before the answer, so only the app can show what it answers."""
    app = build_app(_settings(), pool, now=lambda: float(NOW))
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"job_id":', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/webhooks/{PROVIDER}",
        "raw_path": f"/webhooks/{PROVIDER}".encode(),
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
        "root_path": "",
        "http_version": "1.1",
        "scheme": "http",
    }
    await app(scope, receive, send)
    start = sent[0]
    assert start["status"] == 400
    assert (b"connection", b"close") in start["headers"]
    assert (
        app.state.metrics.registry.get_sample_value(
            REJECTED, {"provider": PROVIDER, "reason": "incomplete_body"}
        )
        == 1
    )
