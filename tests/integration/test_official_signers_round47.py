"""Seven more senders, configured from README's "Webhook signature schemes" alone.

As in test_more_official_signers.py: each provider is a `[providers.NAME.webhooks]`
table as a user would write it, its deliveries signed as the provider
documents and posted to the real receiver over a loopback socket (uvicorn);
authentic ones are stored once (a second copy is `duplicate`), and a changed
body, a wrong key and, where a timestamp is signed, a stale one are refused
401 (a missing signature 400) with the reason counted.

- HubSpot v3 and Box could not be configured before this round: HubSpot's
  timestamp is in milliseconds, Box's is ISO 8601 and Box sends two
  signatures under two keys in two headers (aliases had to agree). The
  options `timestamp_format` and `signature_header_mode` say them now
  (tests/unit/test_signatures_timestamp_format_and_header_mode.py).
- DocuSign Connect sends `X-DocuSign-Signature-1`, `-2`, … one per active
  HMAC key: `signature_header_mode = "each"` too (up to 4 of them).
- Intercom, Typeform, Calendly and Dropbox's POSTs needed nothing new.
- Dropbox's GET `?challenge=` verification needed `get_challenge =
  "challenge"`: the receiver took POSTs only (405).

Official Python code, where it exists, is the ground truth (skipped when not
installed; neither is a dev dependency: `hubspot-api-client` is 52 MB, the
`boxsdk` distribution, `box_sdk_gen`, 7.7 MB plus `requests`):
`hubspot.utils.signature.Signature.get_signature` (v3) and
`box_sdk_gen.internal.utils.compute_webhook_signature` on every case, and
their validators (`Signature.is_valid`, `WebhooksManager.validate_message`,
which read the wall clock) beside ours on deliveries made now. Every delivery is
also signed by the documentation's recipe here, and those tests always run.
DocuSign, Intercom, Typeform, Calendly and Dropbox publish no Python verifier
on PyPI (docusign-esign has none).
"""

from __future__ import annotations

import base64
import hmac
import json
import time
import tomllib
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from shared.providers.errors import ConfigError
from shared.providers.guarantees import describe_guarantees
from shared.signatures import SignatureError, verify
from tests.integration.test_more_official_signers import REJECTED, _providers, _receiver
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    Running,
    stored_events,
)

STORED = {"status": "stored", "matched": False}
PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"


def _refusals(rx: Running, provider: str) -> dict[str, float]:
    reasons = (
        "bad_signature",
        "stale_timestamp",
        "future_timestamp",
        "malformed_header",
        "missing_header",
    )
    counts = {
        reason: rx.metric(
            "jobwarden_webhook_events_rejected_total", {"provider": provider, "reason": reason}
        )
        for reason in reasons
    }
    return {reason: count for reason, count in counts.items() if count}


def _mac(key: str, content: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key.encode(), content, algorithm).digest()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


Case = tuple[str, bytes, dict[str, str], str | None]  # what, body, headers, refusal reason


async def _deliver(
    pool: Any, providers: dict[str, Any], name: str, cases: list[Case], **settings: Any
) -> tuple[list[tuple[str, httpx.Response]], httpx.Response, dict[str, float]]:
    """Post every case, then the first (authentic) one again."""
    answers = []
    async with _receiver(pool, providers, **settings) as rx:
        for what, body, headers, _ in cases:
            answers.append((what, await rx.post(body, {**JSON_HEADERS, **headers}, name)))
        again = await rx.post(cases[0][1], {**JSON_HEADERS, **cases[0][2]}, name)
        refusals = _refusals(rx, name)
    return answers, again, refusals


def _check(
    cases: list[Case],
    answers: list[tuple[str, httpx.Response]],
    again: httpx.Response,
    refusals: dict[str, float],
) -> None:
    for (what, response), (_, _, _, reason) in zip(answers, cases, strict=True):
        if reason is None:
            assert (response.status_code, response.json()) == (200, STORED), what
        else:
            status = 400 if reason in ("missing_header", "malformed_header") else 401
            assert (response.status_code, response.json()) == (status, REJECTED), what
    assert again.json() == {"status": "duplicate"}
    expected: dict[str, float] = {}
    for *_, reason in cases:
        if reason is not None:
            expected[reason] = expected.get(reason, 0) + 1
    assert refusals == expected


# ------------------------------------------------------------------------ HubSpot v3

HUBSPOT_TOML = """
[providers.hubspot.webhooks]
scheme = "hmac"
secrets_env = "HUBSPOT_CLIENT_SECRET"
job_id = "/0/objectId"
state = "/0/subscriptionType"

[providers.hubspot.webhooks.options]
signature_header = "X-HubSpot-Signature-v3"
format = "base64"
timestamp_header = "X-HubSpot-Request-Timestamp"
timestamp_format = "unix_ms"
signed_content = "{method}{url}{body}{timestamp}"

[providers.hubspot.webhooks.state_map]
"deal.propertyChange" = "running"
"""
HUBSPOT_SECRET = "a1b2c3d4-hubspot-client-secret"
HUBSPOT_URL = "https://hooks.example.test/jobwarden/webhooks/hubspot"
HUBSPOT_BODY = json.dumps(
    [
        {
            "eventId": 100,
            "subscriptionId": 2100,
            "portalId": 62515,
            "appId": 1160452,
            "occurredAt": NOW * 1000,
            "subscriptionType": "deal.propertyChange",
            "attemptNumber": 0,
            "objectId": 1246965,
            "propertyName": "dealstage",
            "propertyValue": "closedwon",
        }
    ]
).encode()


def hubspot_headers(secret: str, ms: int, body: bytes, url: str = HUBSPOT_URL) -> dict[str, str]:
    """HubSpot's v3 recipe: base64 HMAC-SHA256 of method + URI + body + timestamp (ms).

    HubSpot signs the URI it called with some percent-escapes decoded (`%3A`,
    `%2F`, `%3F`, `%40`, `%21`, `%24`, `%27`, `%28`, `%29`, `%2A`, `%2C`,
    `%3B`); the receiver signs `public_webhook_url` plus the request's query as
    received, so a URL holding such escapes would not verify (not tested: keep
    them out of the URL registered with HubSpot)."""
    content = b"POST" + url.encode() + body + str(ms).encode()
    return {
        "X-HubSpot-Signature-v3": _b64(_mac(secret, content)),
        "X-HubSpot-Request-Timestamp": str(ms),
    }


def _hubspot_cases() -> list[Case]:
    ms = NOW * 1000 + 123
    good = hubspot_headers(HUBSPOT_SECRET, ms, HUBSPOT_BODY)
    return [
        ("authentic", HUBSPOT_BODY, good, None),
        ("body changed", HUBSPOT_BODY.replace(b"closedwon", b"closedlost"), good, "bad_signature"),
        (
            "timestamp changed",
            HUBSPOT_BODY,
            {**good, "X-HubSpot-Request-Timestamp": str(ms + 1)},
            "bad_signature",
        ),
        (
            "wrong secret",
            HUBSPOT_BODY,
            hubspot_headers("a-guess", ms, HUBSPOT_BODY),
            "bad_signature",
        ),
        (
            "signed for another URL",
            HUBSPOT_BODY,
            hubspot_headers(HUBSPOT_SECRET, ms, HUBSPOT_BODY, HUBSPOT_URL + "-staging"),
            "bad_signature",
        ),
        (
            "older than 5 minutes",
            HUBSPOT_BODY,
            hubspot_headers(HUBSPOT_SECRET, (NOW - 301) * 1000, HUBSPOT_BODY),
            "stale_timestamp",
        ),
    ]


async def test_hubspot_v3_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("hubspot", HUBSPOT_TOML, {"HUBSPOT_CLIENT_SECRET": HUBSPOT_SECRET})
    cases = _hubspot_cases()
    answers, again, refusals = await _deliver(
        pool, providers, "hubspot", cases, public_webhook_url=PUBLIC
    )
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:")  # a batch: no one event id
    # HubSpot always posts a JSON array (a batch of up to 100 events); without
    # `events` (this table has none) the receiver stores an authentic array as
    # it came, unread (as SendGrid's), so its paths name nothing: the event
    # wakes no operation by itself. With `events = ""` each element is an
    # event of its own (test_webhook_batches.py).
    assert (event["remote_job_id"], event["remote_state"]) == (None, None)


def test_hubspots_own_signer_agrees_with_the_recipe() -> None:
    signature = pytest.importorskip("hubspot.utils.signature").Signature
    for what, body, headers, _ in _hubspot_cases():
        official = signature.get_signature(
            HUBSPOT_SECRET,
            body.decode(),
            "v3",
            http_uri=HUBSPOT_URL,
            http_method="POST",
            timestamp=headers["X-HubSpot-Request-Timestamp"],
        )
        # HubSpot's signature check has no clock (`is_valid` adds the wall clock's)
        authentic = what in ("authentic", "older than 5 minutes")
        assert (official == headers["X-HubSpot-Signature-v3"]) is authentic, what


# ------------------------------------------------------------------------------ Box

BOX_TOML = """
[providers.box.webhooks]
scheme = "hmac"
secrets_env = ["BOX_PRIMARY_KEY", "BOX_SECONDARY_KEY"]
event_id = "/id"
job_id = "/source/id"
state = "/trigger"
tolerance_seconds = 600

[providers.box.webhooks.options]
signature_header = ["BOX-SIGNATURE-PRIMARY", "BOX-SIGNATURE-SECONDARY"]
signature_header_mode = "each"
format = "base64"
timestamp_header = "BOX-DELIVERY-TIMESTAMP"
timestamp_format = "iso8601"
signed_content = "{body}{timestamp}"

[providers.box.webhooks.state_map]
"FILE.UPLOADED" = "succeeded"
"""
BOX_PRIMARY = "SamplePrimaryKey0123456789abcdef"
BOX_SECONDARY = "SampleSecondaryKey0123456789abcd"
BOX_STAMP = "2027-01-15T00:00:00-08:00"  # NOW, as Box writes it (with an offset)
BOX_BODY = json.dumps(
    {
        "type": "webhook_event",
        "id": "0f46a6ca-86bf-44ab-8cf5-f08e1e02876b",
        "created_at": BOX_STAMP,
        "trigger": "FILE.UPLOADED",
        "source": {"id": "1234567890", "type": "file"},
    }
).encode()


def box_headers(
    primary: str | None, secondary: str | None, stamp: str, body: bytes
) -> dict[str, str]:
    """Box's recipe: base64 HMAC-SHA256 of the body's bytes then the timestamp's, once
    per key, in its own header."""
    headers = {
        "BOX-DELIVERY-ID": "f96bb54b-ee16-4fc5-aa65-8c2d9e5b546f",
        "BOX-DELIVERY-TIMESTAMP": stamp,
        "BOX-SIGNATURE-ALGORITHM": "HmacSHA256",
        "BOX-SIGNATURE-VERSION": "1",
    }
    if primary is not None:
        headers["BOX-SIGNATURE-PRIMARY"] = _b64(_mac(primary, body + stamp.encode()))
    if secondary is not None:
        headers["BOX-SIGNATURE-SECONDARY"] = _b64(_mac(secondary, body + stamp.encode()))
    return headers


def _box_cases() -> list[Case]:
    good = box_headers(BOX_PRIMARY, BOX_SECONDARY, BOX_STAMP, BOX_BODY)
    return [
        ("authentic", BOX_BODY, good, None),
        ("body changed", BOX_BODY.replace(b"1234567890", b"1234567891"), good, "bad_signature"),
        (
            "timestamp changed",
            BOX_BODY,
            {**good, "BOX-DELIVERY-TIMESTAMP": "2027-01-15T00:00:01-08:00"},
            "bad_signature",
        ),
        (
            "wrong keys",
            BOX_BODY,
            box_headers("guess-1", "guess-2", BOX_STAMP, BOX_BODY),
            "bad_signature",
        ),
        (
            "older than 10 minutes",
            BOX_BODY,
            box_headers(BOX_PRIMARY, BOX_SECONDARY, "2027-01-15T07:49:59Z", BOX_BODY),
            "stale_timestamp",
        ),
    ]


async def test_box_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers(
        "box", BOX_TOML, {"BOX_PRIMARY_KEY": BOX_PRIMARY, "BOX_SECONDARY_KEY": BOX_SECONDARY}
    )
    cases = _box_cases()
    answers, again, refusals = await _deliver(pool, providers, "box", cases)
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["event_id"] == "0f46a6ca-86bf-44ab-8cf5-f08e1e02876b"
    assert (event["remote_job_id"], event["remote_state"]) == ("1234567890", "succeeded")


async def test_box_key_rotation_either_header_verifies(db: Any, pool: Any) -> None:
    """While the primary key is being replaced, we may hold only the secondary
    (and the reverse): either header verifying is enough, as for Box's SDK."""
    env = {"BOX_PRIMARY_KEY": "a-key-box-no-longer-uses", "BOX_SECONDARY_KEY": BOX_SECONDARY}
    secondary_only = _providers("box", BOX_TOML, env)
    bodies = [BOX_BODY, BOX_BODY.replace(b"0f46a6ca", b"1f46a6ca")]
    async with _receiver(pool, secondary_only) as rx:
        rotated = await rx.post(
            bodies[0],
            {**JSON_HEADERS, **box_headers("fresh-primary", BOX_SECONDARY, BOX_STAMP, bodies[0])},
            "box",
        )
        only_one_sent = await rx.post(
            bodies[1],
            {**JSON_HEADERS, **box_headers(None, BOX_SECONDARY, BOX_STAMP, bodies[1])},
            "box",
        )
    assert rotated.json() == STORED
    assert only_one_sent.json() == STORED


def test_boxs_own_signer_agrees_with_the_recipe() -> None:
    utils = pytest.importorskip("box_sdk_gen.internal.utils")
    for what, body, headers, _ in _box_cases():
        lowered = {name.lower(): value for name, value in headers.items()}
        for key, header in (
            (BOX_PRIMARY, "box-signature-primary"),
            (BOX_SECONDARY, "box-signature-secondary"),
        ):
            official = utils.compute_webhook_signature(body.decode(), lowered, key)
            # Box's window check reads the wall clock, so only signatures are compared
            authentic = what in ("authentic", "older than 10 minutes")
            assert (official == lowered[header]) is authentic, what


def test_boxs_own_validator_and_ours_agree_at_the_wall_clock() -> None:
    """`validate_message` reads the wall clock: a delivery made now, under each
    key alone and under neither, is judged by it and by our verifier alike."""
    webhooks = pytest.importorskip("box_sdk_gen.managers.webhooks")
    options = tomllib.loads(BOX_TOML)["providers"]["box"]["webhooks"]["options"]
    now = time.time()
    stamp = datetime.fromtimestamp(int(now), UTC).isoformat()
    for primary, secondary in (
        (BOX_PRIMARY, BOX_SECONDARY),
        ("rotated-away", BOX_SECONDARY),
        (BOX_PRIMARY, "rotated-away"),
        ("guess-1", "guess-2"),
    ):
        headers = box_headers(primary, secondary, stamp, BOX_BODY)
        lowered = {name.lower(): value for name, value in headers.items()}
        theirs = webhooks.WebhooksManager.validate_message(
            BOX_BODY.decode(), lowered, BOX_PRIMARY, secondary_key=BOX_SECONDARY
        )
        try:
            verify("hmac", options, headers, BOX_BODY, [BOX_PRIMARY, BOX_SECONDARY], now, 600)
            ours = True
        except SignatureError:
            ours = False
        assert theirs is ours is (primary == BOX_PRIMARY or secondary == BOX_SECONDARY)


def test_hubspots_own_validator_and_ours_agree_at_the_wall_clock() -> None:
    signature = pytest.importorskip("hubspot.utils.signature").Signature
    options = tomllib.loads(HUBSPOT_TOML)["providers"]["hubspot"]["webhooks"]["options"]
    now = time.time()
    for secret in (HUBSPOT_SECRET, "a-guess"):
        headers = hubspot_headers(secret, int(now * 1000), HUBSPOT_BODY)
        theirs = signature.is_valid(
            headers["X-HubSpot-Signature-v3"],
            HUBSPOT_SECRET,
            HUBSPOT_BODY.decode(),
            http_uri=HUBSPOT_URL,
            signature_version="v3",
            timestamp=headers["X-HubSpot-Request-Timestamp"],
        )
        try:
            verify(
                "hmac",
                options,
                headers,
                HUBSPOT_BODY,
                [HUBSPOT_SECRET],
                now,
                method="POST",
                url=HUBSPOT_URL,
            )
            ours = True
        except SignatureError:
            ours = False
        assert theirs is ours is (secret == HUBSPOT_SECRET)


# ------------------------------------------------------------------ DocuSign Connect

DOCUSIGN_TOML = """
[providers.docusign.webhooks]
scheme = "hmac"
secrets_env = ["DOCUSIGN_HMAC_KEY_1", "DOCUSIGN_HMAC_KEY_2"]
job_id = "/data/envelopeId"
state = "/event"

# One X-DocuSign-Signature-N per active HMAC key (N in the order the keys were
# added, as DocuSign's guide describes it; unsure whether N follows a removed
# key's slot, hence all four names and any one verifying).
[providers.docusign.webhooks.options]
signature_header = ["X-DocuSign-Signature-1", "X-DocuSign-Signature-2",
                    "X-DocuSign-Signature-3", "X-DocuSign-Signature-4"]
signature_header_mode = "each"
format = "base64"

[providers.docusign.webhooks.state_map]
envelope-completed = "succeeded"
"""
DOCUSIGN_KEYS = ("Rz6ZxOUgc4pZ6mZ2p3v0Ow6g5Ir7+7Ai8WpT7Oq1y8A=", "c2Vjb25kLWRvY3VzaWduLWtleQ==")
DOCUSIGN_BODY = json.dumps(
    {
        "event": "envelope-completed",
        "apiVersion": "v2.1",
        "uri": "/restapi/v2.1/accounts/8a1b/envelopes/93be49e7",
        "retryCount": 0,
        "configurationId": 10418,
        "generatedDateTime": "2027-01-15T08:00:00.0000000Z",
        "data": {"accountId": "8a1b", "userId": "fd1e", "envelopeId": "93be49e7"},
    }
).encode()


def docusign_headers(keys: tuple[str, ...], body: bytes) -> dict[str, str]:
    """DocuSign's recipe: base64 HMAC-SHA256 of the body under each key (the key's
    text as is, as in DocuSign's C#/Node samples), header -1, -2, …"""
    return {f"X-DocuSign-Signature-{n}": _b64(_mac(key, body)) for n, key in enumerate(keys, 1)}


async def test_docusign_connect_signatures_over_the_wire(db: Any, pool: Any) -> None:
    """Two keys active (a rotation): either signature verifies. No timestamp is
    signed (no window, as GitHub): a replay is a duplicate of what it copies."""
    env = {"DOCUSIGN_HMAC_KEY_1": DOCUSIGN_KEYS[0], "DOCUSIGN_HMAC_KEY_2": DOCUSIGN_KEYS[1]}
    providers = _providers("docusign", DOCUSIGN_TOML, env)
    good = docusign_headers(DOCUSIGN_KEYS, DOCUSIGN_BODY)
    changed = DOCUSIGN_BODY.replace(b"93be49e7", b"93be49e8")
    cases: list[Case] = [
        ("authentic", DOCUSIGN_BODY, good, None),
        ("body changed", changed, good, "bad_signature"),
        ("wrong key", changed, docusign_headers(("a-guess",), changed), "bad_signature"),
        # the key we still hold signed -2; -1 is under a key we no longer hold
        (
            "rotated",
            changed,
            docusign_headers(("new-key-not-ours", DOCUSIGN_KEYS[1]), changed),
            None,
        ),
        ("no signature", DOCUSIGN_BODY, {}, "missing_header"),
    ]
    answers, again, refusals = await _deliver(pool, providers, "docusign", cases)
    _check(cases, answers, again, refusals)
    events = await stored_events(db)
    assert sorted(event["remote_job_id"] for event in events) == ["93be49e7", "93be49e8"]


# ------------------------------------------------------------------------- Intercom

INTERCOM_TOML = """
[providers.intercom.webhooks]
scheme = "hmac"
secrets_env = "INTERCOM_CLIENT_SECRET"
event_id = "/id"
job_id = "/data/item/id"
state = "/topic"

[providers.intercom.webhooks.options]
signature_header = "X-Hub-Signature"
algorithm = "sha1"
prefix = "sha1="

[providers.intercom.webhooks.state_map]
"conversation.admin.closed" = "succeeded"
"""
INTERCOM_SECRET = "intercom-app-client-secret"
INTERCOM_BODY = json.dumps(
    {
        "type": "notification_event",
        "id": "notif_ccd8a4d2-3b47-4b4b-9b7b-0c8a4e5c7a11",
        "topic": "conversation.admin.closed",
        "created_at": NOW,
        "data": {"type": "notification_event_data", "item": {"type": "conversation", "id": "147"}},
    }
).encode()


def intercom_headers(secret: str, body: bytes) -> dict[str, str]:
    """Intercom's recipe: `sha1=` + hex HMAC-SHA1 of the body under the client secret."""
    return {"X-Hub-Signature": "sha1=" + _mac(secret, body, "sha1").hex()}


async def test_intercom_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("intercom", INTERCOM_TOML, {"INTERCOM_CLIENT_SECRET": INTERCOM_SECRET})
    good = intercom_headers(INTERCOM_SECRET, INTERCOM_BODY)
    sha256 = {"X-Hub-Signature": "sha256=" + _mac(INTERCOM_SECRET, INTERCOM_BODY).hex()}
    cases: list[Case] = [
        ("authentic", INTERCOM_BODY, good, None),
        ("body changed", INTERCOM_BODY.replace(b'"147"', b'"148"'), good, "bad_signature"),
        (
            "wrong secret",
            INTERCOM_BODY,
            intercom_headers("a-guess", INTERCOM_BODY),
            "bad_signature",
        ),
        # a SHA-256 MAC is not Intercom's: ignored, so no signature of ours
        ("sha256 instead", INTERCOM_BODY, sha256, "bad_signature"),
    ]
    answers, again, refusals = await _deliver(pool, providers, "intercom", cases)
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["event_id"] == "notif_ccd8a4d2-3b47-4b4b-9b7b-0c8a4e5c7a11"
    assert (event["remote_job_id"], event["remote_state"]) == ("147", "succeeded")


# ------------------------------------------------------------------------- Typeform

TYPEFORM_TOML = """
[providers.typeform.webhooks]
scheme = "hmac"
secrets_env = "TYPEFORM_WEBHOOK_SECRET"
event_id = "/event_id"
job_id = "/form_response/token"
state = "/event_type"

[providers.typeform.webhooks.options]
signature_header = "Typeform-Signature"
format = "base64"
prefix = "sha256="

[providers.typeform.webhooks.state_map]
form_response = "succeeded"
"""
TYPEFORM_SECRET = "typeform-webhook-secret"
TYPEFORM_BODY = json.dumps(
    {
        "event_id": "01HV8X2ACMA2GZ3HE1AC4R5FBA",
        "event_type": "form_response",
        "form_response": {"form_id": "lT4Z3j", "token": "a3a12ec67a1365927098a606107fac15"},
    }
).encode()


def typeform_headers(secret: str, body: bytes) -> dict[str, str]:
    """Typeform's recipe: `sha256=` + base64 HMAC-SHA256 of the body."""
    return {"Typeform-Signature": "sha256=" + _b64(_mac(secret, body))}


async def test_typeform_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("typeform", TYPEFORM_TOML, {"TYPEFORM_WEBHOOK_SECRET": TYPEFORM_SECRET})
    good = typeform_headers(TYPEFORM_SECRET, TYPEFORM_BODY)
    cases: list[Case] = [
        ("authentic", TYPEFORM_BODY, good, None),
        ("body changed", TYPEFORM_BODY.replace(b"lT4Z3j", b"lT4Z3k"), good, "bad_signature"),
        (
            "wrong secret",
            TYPEFORM_BODY,
            typeform_headers("a-guess", TYPEFORM_BODY),
            "bad_signature",
        ),
    ]
    answers, again, refusals = await _deliver(pool, providers, "typeform", cases)
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["event_id"] == "01HV8X2ACMA2GZ3HE1AC4R5FBA"
    assert event["remote_job_id"] == "a3a12ec67a1365927098a606107fac15"


# ------------------------------------------------------------------------- Calendly

CALENDLY_TOML = """
[providers.calendly.webhooks]
scheme = "stripe"
secrets_env = "CALENDLY_WEBHOOK_SIGNING_KEY"
job_id = "/payload/uri"
state = "/payload/status"
tolerance_seconds = 180   # Calendly's guide suggests three minutes

[providers.calendly.webhooks.options]
signature_header = "Calendly-Webhook-Signature"

[providers.calendly.webhooks.state_map]
active = "succeeded"
"""
CALENDLY_KEY = "calendly-webhook-signing-key"
CALENDLY_BODY = json.dumps(
    {
        "event": "invitee.created",
        "created_at": "2027-01-15T08:00:00.000000Z",
        "payload": {
            "uri": "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAA",
            "status": "active",
        },
    }
).encode()


def calendly_headers(key: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Calendly's recipe: `t=<unix>,v1=` + hex HMAC-SHA256 of `{t}.{body}`."""
    v1 = _mac(key, str(timestamp).encode() + b"." + body).hex()
    return {"Calendly-Webhook-Signature": f"t={timestamp},v1={v1}"}


async def test_calendly_signatures_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers(
        "calendly", CALENDLY_TOML, {"CALENDLY_WEBHOOK_SIGNING_KEY": CALENDLY_KEY}
    )
    good = calendly_headers(CALENDLY_KEY, NOW, CALENDLY_BODY)
    v1 = good["Calendly-Webhook-Signature"].split(",")[1]
    cases: list[Case] = [
        ("authentic", CALENDLY_BODY, good, None),
        ("body changed", CALENDLY_BODY.replace(b"active", b"canceled"), good, "bad_signature"),
        (
            "timestamp changed",
            CALENDLY_BODY,
            {"Calendly-Webhook-Signature": f"t={NOW - 1},{v1}"},
            "bad_signature",
        ),
        (
            "wrong key",
            CALENDLY_BODY,
            calendly_headers("a-guess", NOW, CALENDLY_BODY),
            "bad_signature",
        ),
        (
            "older than 3 minutes",
            CALENDLY_BODY,
            calendly_headers(CALENDLY_KEY, NOW - 181, CALENDLY_BODY),
            "stale_timestamp",
        ),
    ]
    answers, again, refusals = await _deliver(pool, providers, "calendly", cases)
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:")  # Calendly's body carries no event id
    assert event["remote_state"] == "succeeded"


# -------------------------------------------------------------------------- Dropbox

DROPBOX_TOML = """
[providers.dropbox.webhooks]
scheme = "hmac"
secrets_env = "DROPBOX_APP_SECRET"
job_id = "/list_folder/accounts/0"
get_challenge = "challenge"

[providers.dropbox.webhooks.options]
signature_header = "X-Dropbox-Signature"
"""
DROPBOX_SECRET = "dropbox-app-secret"
DROPBOX_BODY = json.dumps(
    {
        "list_folder": {"accounts": ["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]},
        "delta": {"users": [12345678]},
    }
).encode()


def dropbox_headers(secret: str, body: bytes) -> dict[str, str]:
    """Dropbox's recipe: hex HMAC-SHA256 of the body under the app secret."""
    return {"X-Dropbox-Signature": _mac(secret, body).hex()}


async def test_dropbox_notifications_over_the_wire(db: Any, pool: Any) -> None:
    providers = _providers("dropbox", DROPBOX_TOML, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    good = dropbox_headers(DROPBOX_SECRET, DROPBOX_BODY)
    cases: list[Case] = [
        ("authentic", DROPBOX_BODY, good, None),
        ("body changed", DROPBOX_BODY.replace(b"12345678", b"12345679"), good, "bad_signature"),
        ("wrong secret", DROPBOX_BODY, dropbox_headers("a-guess", DROPBOX_BODY), "bad_signature"),
    ]
    answers, again, refusals = await _deliver(pool, providers, "dropbox", cases)
    _check(cases, answers, again, refusals)
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"


async def test_dropbox_get_challenge_is_echoed(db: Any, pool: Any) -> None:
    """Dropbox checks an endpoint with an unsigned GET `?challenge=…` it wants echoed
    as text/plain (`get_challenge = "challenge"`); nothing is stored."""
    providers = _providers("dropbox", DROPBOX_TOML, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    async with _receiver(pool, providers) as rx:
        answer = await rx.client.get("/webhooks/dropbox", params={"challenge": "abc123XYZ"})
        slash = await rx.client.get("/webhooks/dropbox/", params={"challenge": "a-b_c.d~e+/="})
    assert (answer.status_code, answer.text) == (200, "abc123XYZ")
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert (slash.status_code, slash.text) == (200, "a-b_c.d~e+/=")
    assert await stored_events(db) == []


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("", 405),  # a GET without the parameter is any GET
        ("other=1", 405),
        ("challenge=", 400),  # empty: nothing to echo
        ("challenge=" + "x" * 257, 400),  # past 256 characters
        ("challenge=%3Cscript%3E%0A", 400),  # a newline is no printable character
        ("challenge=caf%C3%A9", 400),  # not ASCII
        ("challenge=%3Cb%3Eok", 400),  # markup: no token's alphabet
        ("challenge=a%20b", 400),  # nor a space
        ("challenge=a&challenge=b", 400),  # which one: neither
    ],
)
async def test_a_get_challenge_echoes_only_one_plain_token(
    db: Any, pool: Any, query: str, status: int
) -> None:
    providers = _providers("dropbox", DROPBOX_TOML, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    async with _receiver(pool, providers) as rx:
        answer = await rx.client.get(f"/webhooks/dropbox?{query}")
    assert answer.status_code == status
    assert "x" * 257 not in answer.text and "script" not in answer.text
    reason = {405: "method_not_allowed", 400: "bad_challenge"}[status]
    labels = {"provider": "dropbox", "reason": reason}
    assert rx.metric("jobwarden_webhook_events_rejected_total", labels) == 1
    assert await stored_events(db) == []


async def test_without_get_challenge_a_get_is_refused(pool: Any) -> None:
    toml = DROPBOX_TOML.replace('get_challenge = "challenge"\n', "")
    providers = _providers("dropbox", toml, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    async with _receiver(pool, providers) as rx:
        answer = await rx.client.get("/webhooks/dropbox", params={"challenge": "abc"})
    assert answer.status_code == 405
    assert "abc" not in answer.text


@pytest.mark.parametrize(
    "name", ['""', '"a b"', '"chal&lenge"', '"x=y"', '"' + "c" * 65 + '"', "1"]
)
def test_a_get_challenge_that_names_no_query_parameter_is_refused_at_load(name: str) -> None:
    toml = DROPBOX_TOML.replace('get_challenge = "challenge"', f"get_challenge = {name}")
    with pytest.raises(ConfigError) as refused:
        _providers("dropbox", toml, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    assert "get_challenge" in str(refused.value)


def test_providers_check_says_a_get_challenge_is_echoed_unsigned() -> None:
    providers = _providers("dropbox", DROPBOX_TOML, {"DROPBOX_APP_SECRET": DROPBOX_SECRET})
    lines = [line for _, signed, line in describe_guarantees(providers["dropbox"]) if signed]
    assert any("echoes a GET's ?challenge= as text/plain (unsigned" in line for line in lines)
