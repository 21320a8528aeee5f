"""Hostile webhook input, over a real socket: authentic events carrying text
PostgreSQL cannot hold, the trailing-slash URL, non-ASCII headers, and the
rule that every refusal is both a metric label and a log line.

Deliveries go to a real uvicorn server on loopback (`serve_app`), signed the
way a provider signs them. `VerbatimPlugin` is an adapter that hands the
receiver what an authentic body says, uncleaned, as a third-party plugin may:
the receiver, not the adapter, must make it storable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from receiver.app import build_app
from receiver.metrics import REFUSAL_REASONS
from receiver.webhooks import ingest
from shared.db.connect import create_pool
from shared.ledger.states import RemoteState
from shared.logs import JsonFormatter
from shared.providers import ProviderDescription, WebhookParseError, parse_providers
from shared.providers.adapter import ProviderAdapter
from shared.providers.description import GetChallenge, WebhookChallenge
from shared.providers.facts import WebhookFact
from shared.providers.paths import parse_path
from shared.secret import Secret
from shared.serve import serve_app
from shared.settings import Settings
from shared.signatures import Verified, sign, sign_standard_webhooks
from shared.signatures.challenges import ChallengeAnswer
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    PROVIDER,
    SECRET,
    WRONG_SECRET,
    Running,
    delivery,
    describe,
    settings_for,
    sim_description,
    standard_headers,
    stored_events,
)

# Bound on waiting for a signal the test set up; generous for a loaded CI box.
WAIT_SECONDS = 5.0
REJECTED = "jobwarden_webhook_events_rejected_total"
VERBATIM = "verbatim"  # the provider whose adapter is VerbatimPlugin
NO_SECRET = "nosecret"  # a provider whose webhook secrets are all gone
CHALLENGED = "challenged"  # a provider that answers Slack's endpoint challenge
VERIFY_TOKEN = "the-token-given-to-the-sender"  # its GET check's (Meta's hub.verify_token)
MAX_BODY = 4096
# What an authentic provider may put in any string PostgreSQL's text refuses.
UNSTORABLE = {"nul": "\x00", "high_surrogate": "\ud800", "low_surrogate": "\udfff"}


class VerbatimPlugin(ProviderAdapter):
    """The configured verification, then the body's fields as they are.

    `scheme` and `id` in the body stand for metadata a plugin's verifier
    reports (it may take them from the signed body); `explode` makes parsing
    fail and the header `x-plugin-fault: verify` makes verification fail, as
    a buggy plugin would.
    """

    def verify_webhook(
        self,
        headers: Mapping[str, str],
        body: bytes,
        secrets: Sequence[str],
        now: float,
        *,
        method: str | None = None,
        url: str | None = None,
    ) -> Verified:
        if {k.lower(): v for k, v in headers.items()}.get("x-plugin-fault") == "verify":
            raise RuntimeError("a verifier plugin bug")
        verified = super().verify_webhook(headers, body, secrets, now, method=method, url=url)
        document = json.loads(body)
        return dataclasses.replace(
            verified,
            scheme=document.get("scheme", verified.scheme),
            event_id=document.get("id", verified.event_id),
        )

    def parse_webhook(
        self, body: bytes, headers: Mapping[str, str], query: Mapping[str, str]
    ) -> WebhookFact:
        document = json.loads(body)
        if document.get("explode"):
            raise RuntimeError("a parser plugin bug")
        if "job_id" not in document:
            raise WebhookParseError("names no job")
        state = document.get("state")
        return WebhookFact(
            event_id=document.get("id", "unused"),
            remote_job_id=document["job_id"],
            remote_state=RemoteState(state) if state in set(RemoteState) else None,
            raw_state=state,
            operation_ref=document.get("operation_id"),
            thin=False,
            client_reference=document.get("client_reference"),
        )


def _providers() -> dict[str, ProviderDescription]:
    """sim (the declarative adapter), verbatim (VerbatimPlugin), nosecret (no key left)."""
    plugin = f"{__name__}:VerbatimPlugin"
    table = {"preset": "simulator", "plugin": plugin, "webhooks": {"secrets_env": "SECRET"}}
    verbatim = parse_providers({"providers": {VERBATIM: table}}, "test", {"SECRET": SECRET})
    sim = sim_description()
    assert sim.webhooks is not None
    keyless = dataclasses.replace(sim, webhooks=dataclasses.replace(sim.webhooks, secrets=()))
    slack = WebhookChallenge(
        ChallengeAnswer.SLACK, parse_path("/type"), "url_verification", parse_path("/challenge")
    )
    # and a GET check that asks for a verify token (Meta's)
    get = GetChallenge("hub.challenge", "hub.verify_token", Secret(VERIFY_TOKEN, "env:TEST"))
    challenged = dataclasses.replace(
        sim,
        name=CHALLENGED,
        webhooks=dataclasses.replace(
            sim.webhooks,
            challenge=slack,
            get_challenge=get,
            allowed_origins=("eventgrid.azure.net",),
        ),
    )
    return {PROVIDER: sim, VERBATIM: verbatim[VERBATIM], NO_SECRET: keyless, CHALLENGED: challenged}


def _settings(**overrides: Any) -> Settings:
    return settings_for(_providers(), max_body_bytes=MAX_BODY, **overrides)


@asynccontextmanager
async def served(pool: Any, settings: Settings | None = None) -> AsyncIterator[Running]:
    """The receiver app on a real uvicorn socket, with a client on its base URL."""
    app = build_app(settings or _settings(), pool, now=lambda: float(NOW))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        yield Running(app, client)


class RefusalLines(logging.Handler):
    """Collects the endpoint's "webhook rejected" lines and signals each one.

    Tests wait on the line itself (a refused request whose client went away
    has no response to wait for), never on time.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._arrived = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "webhook rejected":
            self.records.append(record)
            self._arrived.set()

    def with_reason(self, reason: str) -> list[logging.LogRecord]:
        return [r for r in self.records if _ctx(r).get("reason") == reason]

    async def wait_for(self, reason: str) -> logging.LogRecord:
        async with asyncio.timeout(WAIT_SECONDS):
            while not self.with_reason(reason):
                self._arrived.clear()
                await self._arrived.wait()
        return self.with_reason(reason)[0]


@pytest.fixture
def refusals() -> Iterator[RefusalLines]:
    handler = RefusalLines()
    endpoint_logger = logging.getLogger("receiver.webhooks.endpoint")
    level = endpoint_logger.level
    endpoint_logger.setLevel(logging.DEBUG)
    endpoint_logger.addHandler(handler)
    yield handler
    endpoint_logger.removeHandler(handler)
    endpoint_logger.setLevel(level)


def _ctx(record: logging.LogRecord) -> dict[str, Any]:
    ctx = getattr(record, "ctx", None)
    return ctx if isinstance(ctx, dict) else {}


def _signed(
    document: Mapping[str, Any], msg_id: str, **headers: str
) -> tuple[bytes, dict[str, str]]:
    # ensure_ascii: NUL and lone surrogates travel as \u escapes, as JSON senders write them
    body = json.dumps(document).encode()
    return body, {**standard_headers(body, msg_id), **headers}


# ------------------------------------------------ extracted fields PostgreSQL refuses

REFERENCE_FIELDS = ("job_id", "operation_id", "client_reference")
SHOWN_FIELDS = ("state", "scheme")


@pytest.mark.parametrize("bad", sorted(UNSTORABLE))
@pytest.mark.parametrize("field", [*REFERENCE_FIELDS, *SHOWN_FIELDS, "id"])
async def test_an_authentic_event_with_unstorable_extracted_text_is_stored_once(
    db: Any, pool: Any, field: str, bad: str
) -> None:
    hostile = f"x{UNSTORABLE[bad]}y"
    document = {"job_id": "job_1", "state": "running", "client_reference": "ref_1", field: hostile}
    body, headers = _signed(document, f"msg_{field}_{bad}")
    async with served(pool) as rx:
        first = await rx.post(body, headers, VERBATIM)
        again = await rx.post(body, headers, VERBATIM)
    assert (first.status_code, first.json()) == (200, {"status": "stored", "matched": False})
    assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
    [event] = await stored_events(db)
    assert event["payload"][field] == "x\ufffdy"  # the payload as before: cleaned
    stored = {
        "job_id": event["remote_job_id"],
        "operation_id": event["operation_ref"],
        "client_reference": event["client_reference"],
        "state": event["remote_state_raw"],
        "scheme": event["signature_scheme"],
    }
    if field in REFERENCE_FIELDS:
        # a cleaned reference would name another job: it counts as absent
        assert stored[field] is None
    elif field in SHOWN_FIELDS:
        assert stored[field] == "x\ufffdy"
    else:  # a signed event id PostgreSQL cannot hold is keyed by its hash
        assert event["event_id"].startswith("sha256:")


@pytest.mark.parametrize("bad", sorted(UNSTORABLE))
async def test_the_declarative_adapter_stores_such_events_too(db: Any, pool: Any, bad: str) -> None:
    hostile = f"x{UNSTORABLE[bad]}y"
    bad_job, headers_1 = _signed({"job_id": hostile, "state": "running"}, f"msg_job_{bad}")
    bad_state, headers_2 = _signed({"job_id": "job_1", "state": hostile}, f"msg_state_{bad}")
    async with served(pool) as rx:
        answers = [await rx.post(bad_job, headers_1), await rx.post(bad_state, headers_2)]
    assert [(r.status_code, r.json()["status"]) for r in answers] == [(200, "stored")] * 2
    no_job, with_job = await stored_events(db)
    # left with no reference, the event names no job: stored, matching nothing
    assert (no_job["remote_job_id"], no_job["remote_state_raw"]) == (None, None)
    assert (with_job["remote_job_id"], with_job["remote_state_raw"]) == ("job_1", "x\ufffdy")


# ------------------------------------------------------------------ trailing slash


async def test_the_trailing_slash_path_is_the_same_route_without_a_redirect(
    db: Any, pool: Any
) -> None:
    body, headers = delivery("job_1", "msg_slash")
    async with served(pool) as rx:
        slash = await rx.client.post(f"/webhooks/{PROVIDER}/", content=body, headers=headers)
        plain = await rx.client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
        unknown = await rx.client.post("/webhooks/nosuch/", content=body, headers=headers)
        get = await rx.client.get(f"/webhooks/{PROVIDER}/")
        labels = {"provider": "unknown", "reason": "unknown_provider"}
        assert rx.metric(REJECTED, labels) == 1
    assert (slash.status_code, slash.json()) == (200, {"status": "stored", "matched": False})
    assert "location" not in slash.headers
    # one event, whichever spelling delivered it
    assert (plain.status_code, plain.json()) == (200, {"status": "duplicate"})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "not_found"})
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_slash"]


async def test_a_url_signing_sender_addressing_the_slash_url_verifies(db: Any, pool: Any) -> None:
    options = {"signature_header": "X-Sig", "signed_content": "{method} {url}\n{body}"}
    toml = (
        '[providers.urly]\nbase_url = "https://provider.example.test"\n'
        '[providers.urly.create]\npath = "/jobs"\nidempotency = "none"\njob_id = "/id"\n'
        '[providers.urly.status]\npath = "/jobs/{job_id}"\nstate = "/status"\n'
        '[providers.urly.status.state_map]\ndone = "succeeded"\n'
        '[providers.urly.result]\nsource = "none"\n'
        '[providers.urly.webhooks]\nscheme = "hmac"\nsecrets_env = "URLY"\njob_id = "/job"\n'
        '[providers.urly.webhooks.options]\nsignature_header = "X-Sig"\n'
        'signed_content = "{method} {url}\\n{body}"\n'
    )
    providers = describe(toml, {"URLY": "k"})
    public = "https://hooks.example.test/jw/webhooks/{provider}"
    body = json.dumps({"job": "j7", "status": "done"}).encode()

    def signed_for(url: str) -> dict[str, str]:
        return {**JSON_HEADERS, "x-sig": sign("hmac", options, "k", body, method="POST", url=url)}

    settings = settings_for(providers, public_webhook_url=public)
    async with served(pool, settings) as rx:
        slash = await rx.client.post(
            "/webhooks/urly/",
            content=body,
            headers=signed_for("https://hooks.example.test/jw/webhooks/urly/"),
        )
        # signed for the slash-less URL, delivered to the other: not what was signed
        other = await rx.client.post(
            "/webhooks/urly/",
            content=body,
            headers=signed_for("https://hooks.example.test/jw/webhooks/urly"),
        )
    assert slash.status_code == 200
    assert other.status_code == 401
    assert len(await stored_events(db)) == 1


# --------------------------------------------------------------- non-ASCII headers


# A non-ASCII header the receiver does not read (a User-Agent) is accepted:
# tests/integration/test_webhook_hostile_bodies.py.
@pytest.mark.parametrize("header", ["webhook-id", "webhook-signature"])
async def test_a_non_ascii_header_is_refused_naming_the_header(
    db: Any, pool: Any, refusals: RefusalLines, header: str
) -> None:
    msg_id = "msg_caf\u00e9"
    body = json.dumps({"job_id": "job_1", "state": "running"}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"webhook-id", msg_id.encode() if header == "webhook-id" else b"msg_ascii"),
        (b"webhook-timestamp", str(NOW).encode()),
    ]
    # signed as a sender signs: over the UTF-8 id it sends
    signature = sign_standard_webhooks(
        SECRET, msg_id if header == "webhook-id" else "msg_ascii", NOW, body
    )
    if header == "webhook-signature":
        signature += " v1,caf\u00e9"
    headers.append((b"webhook-signature", signature.encode()))
    async with served(pool) as rx:
        resp = await rx.client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
        labels = {"provider": PROVIDER, "reason": "non_ascii_header"}
        assert rx.metric(REJECTED, labels) == 1
    assert resp.status_code == 400
    assert resp.json() == {"error": "non_ascii_header", "header": header}
    [line] = refusals.with_reason("non_ascii_header")
    assert (_ctx(line)["header"], _ctx(line)["status"]) == (header, 400)
    formatted = JsonFormatter().format(line)
    assert formatted.isascii() and "caf" not in formatted and "sum" not in formatted
    assert await stored_events(db) == []


# ------------------------------------------------- every refusal: a label and a line


@dataclasses.dataclass
class Env:
    """What a refusal scenario may act on: the running receiver and its database."""

    rx: Running
    db: Any
    pool: Any
    url: str
    monkeypatch: pytest.MonkeyPatch


Scenario = Callable[[Env], Awaitable[tuple[int, str]]]


def _status(resp: httpx.Response) -> tuple[int, str]:
    return resp.status_code, PROVIDER


async def _unknown_provider(env: Env) -> tuple[int, str]:
    resp = await env.rx.post(*delivery(), provider="nosuch")
    return resp.status_code, "unknown"


async def _method_not_allowed(env: Env) -> tuple[int, str]:
    return _status(await env.rx.client.put(f"/webhooks/{PROVIDER}", content=b"{}"))


async def _non_ascii_header(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    raw = [(k.encode(), v.encode()) for k, v in {**headers, "webhook-id": "msg_\u00e9"}.items()]
    return _status(await env.rx.client.post(f"/webhooks/{PROVIDER}", content=body, headers=raw))


async def _bad_content_length(env: Env) -> tuple[int, str]:
    # uvicorn (h11) answers a non-numeric Content-Length itself, before any
    # app runs; the check is for servers that pass it on, so this one goes
    # through the app's ASGI interface directly.
    body, headers = delivery()
    transport = httpx.ASGITransport(app=env.rx.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rx") as client:
        resp = await client.post(
            f"/webhooks/{PROVIDER}", content=body, headers={**headers, "content-length": "1e3"}
        )
    return _status(resp)


async def _body_too_large(env: Env) -> tuple[int, str]:
    body = json.dumps({"job_id": "job_1", "padding": "x" * MAX_BODY}).encode()
    return _status(await env.rx.post(body, standard_headers(body)))


async def _incomplete_body(env: Env) -> tuple[int, str]:
    # The client announces 100 bytes, sends 10 and hangs up: there is no
    # response to read, so the test waits for the log line instead.
    parts = urlsplit(env.url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        f"POST /webhooks/{PROVIDER} HTTP/1.1\r\nhost: rx\r\ncontent-type: application/json\r\n"
        'content-length: 100\r\n\r\n{"job_id":'.encode()
    )
    await writer.drain()
    writer.write_eof()
    await reader.read()  # the server closes its side once it saw ours go
    writer.close()
    await writer.wait_closed()
    return 400, PROVIDER


async def _bad_challenge(env: Env) -> tuple[int, str]:
    # authentic, but its token is nothing we would echo
    body, headers = _signed({"type": "url_verification", "challenge": "a\nb"}, "msg_challenge")
    resp = await env.rx.post(body, headers, provider=CHALLENGED)
    return resp.status_code, CHALLENGED


async def _bad_verify_token(env: Env) -> tuple[int, str]:
    # a GET check carrying someone else's token: its challenge is not echoed
    params = {"hub.challenge": "1158201444", "hub.verify_token": "a-guess"}
    resp = await env.rx.client.get(f"/webhooks/{CHALLENGED}", params=params)
    assert "1158201444" not in resp.text
    return resp.status_code, CHALLENGED


async def _origin_not_allowed(env: Env) -> tuple[int, str]:
    # a CloudEvents handshake from a sender the operator did not list
    headers = {"WebHook-Request-Origin": "attacker.example.test"}
    resp = await env.rx.client.options(f"/webhooks/{CHALLENGED}", headers=headers)
    assert "webhook-allowed-origin" not in resp.headers
    return resp.status_code, CHALLENGED


async def _unsupported_encoding(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    return _status(await env.rx.post(body, {**headers, "content-encoding": "gzip"}))


async def _unsupported_media_type(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    return _status(await env.rx.post(body, {**headers, "content-type": "text/plain"}))


async def _missing_header(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    del headers["webhook-signature"]
    return _status(await env.rx.post(body, headers))


async def _malformed_header(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    return _status(await env.rx.post(body, {**headers, "webhook-signature": "v1,not b64!"}))


async def _bad_signature(env: Env) -> tuple[int, str]:
    body, _ = delivery()
    return _status(await env.rx.post(body, standard_headers(body, secret=WRONG_SECRET)))


async def _stale_timestamp(env: Env) -> tuple[int, str]:
    body, _ = delivery()
    return _status(await env.rx.post(body, standard_headers(body, timestamp=NOW - 301)))


async def _future_timestamp(env: Env) -> tuple[int, str]:
    body, _ = delivery()
    return _status(await env.rx.post(body, standard_headers(body, timestamp=NOW + 301)))


async def _no_secret(env: Env) -> tuple[int, str]:
    resp = await env.rx.post(*delivery(), provider=NO_SECRET)
    return resp.status_code, NO_SECRET


async def _bad_options(env: Env) -> tuple[int, str]:
    body, headers = delivery()
    resp = await env.rx.post(body, {**headers, "x-plugin-fault": "verify"}, provider=VERBATIM)
    return resp.status_code, VERBATIM


async def _parse_failed(env: Env) -> tuple[int, str]:
    body, headers = _signed({"job_id": "job_1", "explode": True}, "msg_explode")
    resp = await env.rx.post(body, headers, provider=VERBATIM)
    return resp.status_code, VERBATIM


async def _database_refused(env: Env) -> tuple[int, str]:
    # A rule of this test's database only: PostgreSQL itself refuses the row.
    await env.db.execute(
        "ALTER TABLE webhook_events ADD CONSTRAINT refused_in_this_test"
        " CHECK (event_id <> 'msg_refused')"
    )
    return _status(await env.rx.post(*delivery("job_1", "msg_refused")))


async def _queue_full(env: Env) -> tuple[int, str]:
    env.monkeypatch.setattr(ingest, "MAX_QUEUED_EVENTS", 0)  # no room at all
    return _status(await env.rx.post(*delivery()))


async def _not_accepting(env: Env) -> tuple[int, str]:
    await env.rx.app.state.ingestor.close()  # what shutdown does first
    return _status(await env.rx.post(*delivery()))


async def _database_unavailable(env: Env) -> tuple[int, str]:
    # Every pool connection is held: the writer's acquire times out.
    held = [await env.pool.acquire() for _ in range(env.pool.get_max_size())]
    try:
        return _status(await env.rx.post(*delivery()))
    finally:
        for conn in held:
            await env.pool.release(conn)


SCENARIOS: Mapping[str, Scenario] = {
    "unknown_provider": _unknown_provider,
    "method_not_allowed": _method_not_allowed,
    "non_ascii_header": _non_ascii_header,
    "bad_content_length": _bad_content_length,
    "body_too_large": _body_too_large,
    "incomplete_body": _incomplete_body,
    "bad_challenge": _bad_challenge,
    "bad_verify_token": _bad_verify_token,
    "origin_not_allowed": _origin_not_allowed,
    "unsupported_encoding": _unsupported_encoding,
    "unsupported_media_type": _unsupported_media_type,
    "missing_header": _missing_header,
    "malformed_header": _malformed_header,
    "bad_signature": _bad_signature,
    "stale_timestamp": _stale_timestamp,
    "future_timestamp": _future_timestamp,
    "no_secret": _no_secret,
    "bad_options": _bad_options,
    "parse_failed": _parse_failed,
    "database_refused": _database_refused,
    "queue_full": _queue_full,
    "not_accepting": _not_accepting,
    "database_unavailable": _database_unavailable,
}
STATUS = {
    "unknown_provider": 404,
    "method_not_allowed": 405,
    "bad_verify_token": 403,
    "origin_not_allowed": 403,
    "body_too_large": 413,
    "unsupported_encoding": 415,
    "unsupported_media_type": 415,
    "bad_signature": 401,
    "stale_timestamp": 401,
    "future_timestamp": 401,
    **dict.fromkeys(("no_secret", "bad_options", "parse_failed", "database_refused"), 500),
    **dict.fromkeys(("queue_full", "not_accepting", "database_unavailable"), 503),
}


def test_every_refusal_reason_has_a_scenario() -> None:
    assert set(SCENARIOS) == REFUSAL_REASONS


@pytest.mark.parametrize("reason", sorted(SCENARIOS))
async def test_each_refusal_reason_is_a_metric_label_and_a_log_line(
    db: Any, db_url: str, refusals: RefusalLines, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    # Two connections: the writer's and one spare, so holding both is an outage.
    pool = await create_pool(db_url, min_size=1, max_size=2)
    try:
        async with served(pool, _settings(db_acquire_timeout=0.2)) as rx:
            env = Env(rx, db, pool, str(rx.client.base_url), monkeypatch)
            status, provider = await SCENARIOS[reason](env)
            line = await refusals.wait_for(reason)
            count = rx.metric(REJECTED, {"provider": provider, "reason": reason})
            others = sum(
                rx.metric(REJECTED, {"provider": provider, "reason": r}) for r in SCENARIOS
            )
    finally:
        await pool.close()
    expected = STATUS.get(reason, 400)
    assert status == expected
    assert (count, others) == (1, 1)  # counted once, under this reason only
    ctx = _ctx(line)
    assert (ctx["provider"], ctx["reason"], ctx["status"]) == (provider, reason, expected)
    ours = expected >= 500 and expected != 503
    assert line.levelno == (logging.ERROR if ours else logging.WARNING)
    formatted = JsonFormatter().format(line)
    assert formatted.isascii()
    assert SECRET not in formatted and "v1," not in formatted  # no key, no signature
    assert "job_1" not in formatted  # nothing from the body
    if reason not in ("database_refused", "queue_full", "not_accepting", "database_unavailable"):
        assert await stored_events(db) == []


async def test_every_reason_is_exposed_at_zero_from_the_start(pool: Any) -> None:
    async with served(pool) as rx:
        text = (await rx.client.get("/metrics")).text
    for reason in sorted(REFUSAL_REASONS):
        assert f'{REJECTED}{{provider="{PROVIDER}",reason="{reason}"}} 0.0' in text


async def test_a_flood_of_one_reason_does_not_hide_another(
    db: Any, pool: Any, refusals: RefusalLines
) -> None:
    body, _ = delivery()
    forged = standard_headers(body, secret=WRONG_SECRET)
    async with served(pool) as rx:
        answers = await asyncio.gather(*(rx.post(body, forged) for _ in range(60)))
        rare = await rx.post(*delivery(), provider=NO_SECRET)
    assert {r.status_code for r in answers} == {401}
    assert rare.status_code == 500
    assert 1 <= len(refusals.with_reason("bad_signature")) <= 25  # sampled
    assert len(refusals.with_reason("no_secret")) == 1  # yet the rare one is there
