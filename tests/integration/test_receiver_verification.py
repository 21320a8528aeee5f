"""POST /webhooks/{provider}: one test per way a delivery can fail verification.

Every refused delivery is answered with a body that names nothing, is counted
by reason, and leaves no row behind.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
import stripe
import svix.webhooks
from slack_sdk.signature import SignatureVerifier

from shared.providers import ProviderDescription
from shared.providers.adapter import ProviderAdapter
from shared.providers.errors import ConfigError
from shared.signatures import (
    SignatureError,
    Verified,
    generate_ed25519_keypair,
    sign,
    sign_generic,
    sign_github,
    sign_standard_webhooks,
    sign_standard_webhooks_ed25519,
    sign_stripe,
)
from tests.integration.test_receiver_support import (
    JSON_HEADERS,
    NOW,
    OLD_SECRET,
    PROVIDER,
    SECRET,
    WRONG_SECRET,
    Running,
    delivery,
    describe,
    event_body,
    running_receiver,
    settings_for,
    sim_description,
    standard_headers,
    stored_events,
)

REJECTED = {"error": "rejected"}


class TokenTimesBodyPlugin(ProviderAdapter):
    """A sender no scheme describes: X-Proof is sha256(secret + ":" + body), hex."""

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
        proof = {k.lower(): v for k, v in headers.items()}.get("x-proof")
        if proof is None:
            raise SignatureError("missing_header")
        if proof == "boom":
            raise RuntimeError("a plugin bug")
        for secret in secrets:
            expected = hashlib.sha256(secret.encode() + b":" + body).hexdigest()
            if hmac.compare_digest(expected, proof):
                return Verified(scheme="plugin", event_id=None, id_signed=False, timestamp=None)
        raise SignatureError("bad_signature")


# Minimal provider tables: everything but [webhooks] is required boilerplate.
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
working = "running"
[providers.NAME.result]
source = "none"
"""


def _provider_toml(name: str, webhooks: str) -> str:
    return _BASE.replace("NAME", name) + f"[providers.{name}.webhooks]\n{webhooks}\n"


async def _refused(
    rx: Running, db: Any, body: bytes, headers: dict[str, str], status: int, reason: str
) -> None:
    resp = await rx.post(body, headers)
    assert resp.status_code == status
    assert resp.json() == REJECTED
    assert (
        rx.metric(
            "jobwarden_webhook_events_rejected_total", {"provider": PROVIDER, "reason": reason}
        )
        == 1
    )
    assert await stored_events(db) == []


async def test_missing_signature_header_is_400(db: Any, pool: Any) -> None:
    body, headers = delivery()
    del headers["webhook-signature"]
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 400, "missing_header")


async def test_missing_timestamp_header_is_400(db: Any, pool: Any) -> None:
    body, headers = delivery()
    del headers["webhook-timestamp"]
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 400, "missing_header")


async def test_malformed_signature_header_is_400(db: Any, pool: Any) -> None:
    body, headers = delivery()
    headers["webhook-signature"] = "v1,not base64!"
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 400, "malformed_header")


async def test_bad_signature_is_401(db: Any, pool: Any) -> None:
    body, headers = delivery()
    headers["webhook-signature"] = "v1," + "A" * 43 + "="
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 401, "bad_signature")


async def test_wrong_secret_is_401(db: Any, pool: Any) -> None:
    body = event_body()
    headers = standard_headers(body, secret=WRONG_SECRET)
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 401, "bad_signature")


async def test_tampered_body_is_401(db: Any, pool: Any) -> None:
    body, headers = delivery(state="failed")
    tampered = body.replace(b"failed", b"succeeded")
    async with running_receiver(pool) as rx:
        await _refused(rx, db, tampered, headers, 401, "bad_signature")


async def test_stale_timestamp_is_401(db: Any, pool: Any) -> None:
    body = event_body()
    headers = standard_headers(body, timestamp=NOW - 301)  # tolerance is 300 s
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 401, "stale_timestamp")


async def test_future_timestamp_is_401(db: Any, pool: Any) -> None:
    body = event_body()
    headers = standard_headers(body, timestamp=NOW + 301)
    async with running_receiver(pool) as rx:
        await _refused(rx, db, body, headers, 401, "future_timestamp")


async def test_timestamp_at_the_edge_of_the_window_is_accepted(db: Any, pool: Any) -> None:
    body = event_body()
    async with running_receiver(pool) as rx:
        old = await rx.post(body, standard_headers(body, "msg_old", timestamp=NOW - 300))
        new = await rx.post(body, standard_headers(body, "msg_new", timestamp=NOW + 300))
    assert (old.status_code, new.status_code) == (200, 200)
    assert len(await stored_events(db)) == 2


async def test_rotated_secrets_both_verify_during_the_rotation(db: Any, pool: Any) -> None:
    settings = settings_for({PROVIDER: sim_description(f"{SECRET},{OLD_SECRET}")})
    body = event_body()
    async with running_receiver(pool, settings) as rx:
        signed_old = await rx.post(body, standard_headers(body, "msg_a", secret=OLD_SECRET))
        signed_new = await rx.post(body, standard_headers(body, "msg_b", secret=SECRET))
        # A sender mid-rotation signs with both; one unknown signature is fine.
        both = " ".join(
            sign_standard_webhooks(s, "msg_c", NOW, body) for s in (WRONG_SECRET, SECRET)
        )
        signed_both = await rx.post(body, standard_headers(body, "msg_c", signature=both))
    assert [r.status_code for r in (signed_old, signed_new, signed_both)] == [200, 200, 200]
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_a", "msg_b", "msg_c"]


async def test_retired_secret_is_refused_after_rotation(db: Any, pool: Any) -> None:
    body = event_body()
    async with running_receiver(pool) as rx:  # only SECRET is configured now
        await _refused(
            rx, db, body, standard_headers(body, secret=OLD_SECRET), 401, "bad_signature"
        )


async def test_v1a_ed25519_signature_verifies_with_a_whpk_key(db: Any, pool: Any) -> None:
    private, public = generate_ed25519_keypair()
    settings = settings_for({PROVIDER: sim_description(public)})
    body = event_body()
    signature = sign_standard_webhooks_ed25519(private, "msg_ed", NOW, body)
    async with running_receiver(pool, settings) as rx:
        good = await rx.post(body, standard_headers(body, "msg_ed", signature=signature))
        other_private, _ = generate_ed25519_keypair()
        forged = sign_standard_webhooks_ed25519(other_private, "msg_x", NOW, body)
        bad = await rx.post(body, standard_headers(body, "msg_x", signature=forged))
    assert good.status_code == 200 and good.json()["status"] == "stored"
    assert bad.status_code == 401
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_ed"]


async def test_official_standard_webhooks_vector_is_accepted(db: Any, pool: Any) -> None:
    # From the Standard Webhooks reference library's tests.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    headers = {
        **JSON_HEADERS,
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    settings = settings_for({PROVIDER: sim_description(secret)})
    async with running_receiver(pool, settings, now=lambda: 1614265330 + 10) as rx:
        resp = await rx.post(b'{"test": 2432232314}', headers)
    # Authentic but naming no job: kept (so redeliveries dedupe), matched to nothing.
    assert resp.status_code == 200 and resp.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert (event["event_id"], event["remote_job_id"]) == ("msg_p5jXN8AQM9LWM0D4loKWxJek", None)


async def test_unknown_provider_is_404_with_a_generic_body(db: Any, pool: Any) -> None:
    body, headers = delivery()
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, headers, provider="nosuchprovider")
        assert resp.status_code == 404 and resp.json() == {"error": "not_found"}
        labels = {"provider": "unknown", "reason": "unknown_provider"}
        assert rx.metric("jobwarden_webhook_events_rejected_total", labels) == 1
    assert await stored_events(db) == []


async def test_provider_without_webhooks_is_404(db: Any, pool: Any) -> None:
    providers = describe(
        _provider_toml(
            "quiet", 'scheme = "github"\nsecrets_env = "NONE"\noptional = true\njob_id = "/id"'
        ),
        {},
    )
    async with running_receiver(pool, settings_for({**providers})) as rx:
        body, headers = delivery()
        resp = await rx.post(body, headers, provider="quiet")
    assert resp.status_code == 404
    assert await stored_events(db) == []


async def test_oversized_body_is_413_by_content_length(db: Any, pool: Any) -> None:
    body = event_body(padding="x" * 2048)
    async with running_receiver(pool, settings_for(max_body_bytes=1024)) as rx:
        resp = await rx.post(body, standard_headers(body))
        assert resp.status_code == 413
        labels = {"provider": PROVIDER, "reason": "body_too_large"}
        assert rx.metric("jobwarden_webhook_events_rejected_total", labels) == 1
    assert await stored_events(db) == []


async def test_oversized_chunked_body_is_413_without_content_length(db: Any, pool: Any) -> None:
    body = event_body(padding="x" * 2048)

    async def chunks() -> Any:
        for start in range(0, len(body), 256):
            yield body[start : start + 256]

    async with running_receiver(pool, settings_for(max_body_bytes=1024)) as rx:
        resp = await rx.client.post(
            f"/webhooks/{PROVIDER}", content=chunks(), headers=standard_headers(body)
        )
    assert resp.status_code == 413
    assert await stored_events(db) == []


async def test_body_at_the_limit_is_accepted(db: Any, pool: Any) -> None:
    body = event_body()
    body = event_body(padding="x" * (1024 - len(body) - len(', "padding": ""')))
    assert len(body) == 1024
    async with running_receiver(pool, settings_for(max_body_bytes=1024)) as rx:
        resp = await rx.post(body, standard_headers(body))
    assert resp.status_code == 200


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_non_json_content_type_is_415(db: Any, pool: Any, content_type: str | None) -> None:
    body, headers = delivery()
    del headers["content-type"]
    if content_type is not None:
        headers["content-type"] = content_type
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, headers)
    assert resp.status_code == 415
    assert await stored_events(db) == []


async def test_json_media_types_with_parameters_are_accepted(db: Any, pool: Any) -> None:
    body = event_body()
    async with running_receiver(pool) as rx:
        first = await rx.post(
            body,
            {**standard_headers(body, "m1"), "content-type": "application/json; charset=utf-8"},
        )
        second = await rx.post(
            body, {**standard_headers(body, "m2"), "content-type": "application/cloudevents+json"}
        )
    assert (first.status_code, second.status_code) == (200, 200)


@pytest.mark.parametrize(
    "body",
    [
        b'{"job_id": "job_1", "state": ',  # cut short
        b'["job_1", "succeeded"]',  # an array: SendGrid's event webhook posts one
        b'{"job_id": "caf\xe9"}',  # latin-1, not UTF-8
    ],
)
async def test_an_authentic_body_that_is_no_json_object_is_stored_unread(
    db: Any, pool: Any, body: bytes
) -> None:
    """It was answered 400 and lost (no provider resends a 400): now it is kept,
    as it came, matched to nothing, and its redelivery is a duplicate."""
    async with running_receiver(pool) as rx:
        first = await rx.post(body, standard_headers(body, "evt_unread"))
        again = await rx.post(body, standard_headers(body, "evt_unread"))
        assert rx.metric("jobwarden_webhook_events_verified_total", {"provider": PROVIDER}) == 2
        # both read as nothing; the second is then a duplicate
        assert rx.metric("jobwarden_webhook_events_unread_total", {"provider": PROVIDER}) == 2
    assert (first.status_code, first.json()) == (200, {"status": "stored", "matched": False})
    assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
    [event] = await stored_events(db)
    assert (event["event_id"], event["operation_id"], event["remote_job_id"]) == (
        "evt_unread",
        None,
        None,
    )
    assert _kept_body(event["payload"]) == body


async def test_nan_is_not_json_and_names_nothing(db: Any, pool: Any) -> None:
    """Read as JSON it would claim job_1 succeeded: NaN is not JSON (RFC 8259), so
    nothing in it is read; the authentic body is kept, matched to nothing."""
    body = b'{"job_id": "job_1", "state": "succeeded", "progress": NaN}'
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, standard_headers(body))
    assert (resp.status_code, resp.json()) == (200, {"status": "stored", "matched": False})
    [event] = await stored_events(db)
    assert (event["remote_job_id"], event["remote_state"]) == (None, None)
    assert _kept_body(event["payload"]) == body


def _kept_body(payload: Any) -> bytes:
    """The body an unread event keeps, as it came (base64 in the payload)."""
    kept = json.loads(payload) if isinstance(payload, str) else payload
    return base64.b64decode(kept["body_base64"])


async def test_duplicated_signature_header_with_different_values_is_400(db: Any, pool: Any) -> None:
    body, headers = delivery()
    raw = [(k, v) for k, v in headers.items()] + [("webhook-signature", "v1,AAAA")]
    async with running_receiver(pool) as rx:
        resp = await rx.client.post(f"/webhooks/{PROVIDER}", content=body, headers=raw)
    assert resp.status_code == 400
    assert await stored_events(db) == []


async def test_rejections_are_logged_at_a_bounded_rate(
    db: Any, pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    body = event_body()
    headers = standard_headers(body, secret=WRONG_SECRET)
    caplog.set_level("WARNING", logger="receiver.webhooks.endpoint")
    async with running_receiver(pool) as rx:
        answers = await asyncio.gather(*(rx.post(body, headers) for _ in range(100)))
        assert {r.status_code for r in answers} == {401}
        labels = {"provider": PROVIDER, "reason": "bad_signature"}
        assert rx.metric("jobwarden_webhook_events_rejected_total", labels) == 100
    lines = [r for r in caplog.records if r.getMessage() == "webhook rejected"]
    assert 1 <= len(lines) <= 25  # a burst of 20, plus what refills during the test


# ------------------------------------------------------------------ other schemes

STRIPE_SECRET = "whsec_stripe_style_secret_used_as_is"


async def test_stripe_style_signature_and_body_event_id(db: Any, pool: Any) -> None:
    providers = describe(
        _provider_toml(
            "stripeish",
            'scheme = "stripe"\nsecrets_env = "STRIPE"\njob_id = "/data/object/id"\n'
            'state = "/data/object/status"',
        ),
        {"STRIPE": STRIPE_SECRET},
    )
    body = json.dumps(
        {"id": "evt_123", "type": "job.updated", "data": {"object": {"id": "j1", "status": "done"}}}
    ).encode()
    good = {**JSON_HEADERS, "stripe-signature": sign_stripe(STRIPE_SECRET, NOW, body)}
    stale = {**JSON_HEADERS, "stripe-signature": sign_stripe(STRIPE_SECRET, NOW - 400, body)}
    async with running_receiver(pool, settings_for(providers)) as rx:
        first = await rx.post(body, good, provider="stripeish")
        again = await rx.post(body, good, provider="stripeish")
        old = await rx.post(body, stale, provider="stripeish")
    assert first.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    assert old.status_code == 401
    [event] = await stored_events(db)
    assert (event["event_id"], event["id_signed"]) == ("evt_123", True)
    assert (event["remote_job_id"], event["remote_state"]) == ("j1", "succeeded")


GITHUB_SECRET = "It's a Secret to Everybody"


def _github_providers() -> dict[str, Any]:
    return describe(
        _provider_toml("gh", 'scheme = "github"\nsecrets_env = "GH"\njob_id = "/job/id"'),
        {"GH": GITHUB_SECRET},
    )


async def test_github_documented_example_verifies_then_fails_as_json(db: Any, pool: Any) -> None:
    # GitHub's documented example: the signature is right, the payload is not JSON.
    headers = {
        **JSON_HEADERS,
        "x-hub-signature-256": "sha256="
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    }
    async with running_receiver(pool, settings_for(_github_providers())) as rx:
        resp = await rx.post(b"Hello, World!", headers, provider="gh")
        assert rx.metric("jobwarden_webhook_events_verified_total", {"provider": "gh"}) == 1
    # authentic: kept as it came, matched to nothing
    assert (resp.status_code, resp.json()) == (200, {"status": "stored", "matched": False})
    [event] = await stored_events(db)
    assert _kept_body(event["payload"]) == b"Hello, World!"


async def test_github_dedupes_on_the_body_not_the_unsigned_delivery_id(db: Any, pool: Any) -> None:
    body = json.dumps({"action": "completed", "job": {"id": "j9"}}).encode()
    signature = sign_github(GITHUB_SECRET, body)
    async with running_receiver(pool, settings_for(_github_providers())) as rx:
        first = await rx.post(
            body,
            {**JSON_HEADERS, "x-hub-signature-256": signature, "x-github-delivery": "d-1"},
            "gh",
        )
        # A captured body replayed under a fresh (unsigned) delivery id.
        replay = await rx.post(
            body,
            {**JSON_HEADERS, "x-hub-signature-256": signature, "x-github-delivery": "d-2"},
            "gh",
        )
    assert first.json()["status"] == "stored" and replay.json() == {"status": "duplicate"}
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:") and event["id_signed"] is False


async def test_generic_hmac_with_signed_id_and_timestamp(db: Any, pool: Any) -> None:
    options = {
        "signature_header": "X-Signature",
        "encoding": "base64",
        "prefix": "hmac-sha256=",
        "signed_content": "{id}:{timestamp}:{body}",
        "timestamp_header": "X-Timestamp",
        "id_header": "X-Event-Id",
    }
    providers = describe(
        _provider_toml(
            "generic",
            'scheme = "generic_hmac"\nsecrets_env = "GEN"\njob_id = "/job"\n'
            "[providers.generic.webhooks.options]\n"
            + "\n".join(f'{k} = "{v}"' for k, v in options.items()),
        ),
        {"GEN": "generic-secret"},
    )
    body = json.dumps({"job": "j5", "status": "working"}).encode()

    def headers(event_id: str, secret: str = "generic-secret") -> dict[str, str]:
        signature = sign_generic(options, secret, body, timestamp=NOW, event_id=event_id)
        return {
            **JSON_HEADERS,
            "x-signature": signature,
            "x-timestamp": str(NOW),
            "x-event-id": event_id,
        }

    async with running_receiver(pool, settings_for(providers)) as rx:
        good = await rx.post(body, headers("e-1"), provider="generic")
        forged = await rx.post(body, headers("e-2", "guess"), provider="generic")
    assert good.status_code == 200 and forged.status_code == 401
    [event] = await stored_events(db)
    assert (event["event_id"], event["id_signed"]) == ("e-1", True)


async def test_static_header_secret(db: Any, pool: Any) -> None:
    providers = describe(
        _provider_toml(
            "static",
            'scheme = "static_header"\nsecrets_env = "TOKEN"\njob_id = "/job"\n'
            '[providers.static.webhooks.options]\nheader = "X-Webhook-Token"',
        ),
        {"TOKEN": "shared-token-value"},
    )
    body = json.dumps({"job": "j7"}).encode()
    async with running_receiver(pool, settings_for(providers)) as rx:
        good = await rx.post(
            body, {**JSON_HEADERS, "x-webhook-token": "shared-token-value"}, provider="static"
        )
        bad = await rx.post(body, {**JSON_HEADERS, "x-webhook-token": "guess"}, provider="static")
        missing = await rx.post(body, JSON_HEADERS, provider="static")
    assert (good.status_code, bad.status_code, missing.status_code) == (200, 401, 400)
    assert len(await stored_events(db)) == 1


# ------------------------------------------------------------ families and presets


async def test_stripe_format_under_a_header_of_its_own_name(db: Any, pool: Any) -> None:
    # signed by Stripe's own library; only the header name is the provider's
    providers = describe(
        _provider_toml(
            "acme",
            'scheme = "stripe"\nsecrets_env = "ACME"\njob_id = "/data/object/id"\n'
            '[providers.acme.webhooks.options]\nsignature_header = "X-Acme-Signature"',
        ),
        {"ACME": STRIPE_SECRET},
    )
    body = json.dumps({"id": "evt_9", "data": {"object": {"id": "j9"}}}).encode()
    header = stripe.WebhookSignature.generate_signature_header(
        body.decode(), STRIPE_SECRET, timestamp=NOW
    )
    async with running_receiver(pool, settings_for(providers)) as rx:
        under_stripes_name = await rx.post(
            body, {**JSON_HEADERS, "stripe-signature": header}, "acme"
        )
        good = await rx.post(body, {**JSON_HEADERS, "x-acme-signature": header}, "acme")
    assert under_stripes_name.status_code == 400  # the configured header is the one read
    assert good.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert (event["event_id"], event["id_signed"]) == ("evt_9", True)


async def test_svix_branded_headers_verify_with_the_svix_library(db: Any, pool: Any) -> None:
    secret = "whsec_" + "C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
    providers = describe(
        _provider_toml(
            "svixy", 'scheme = "standard_webhooks"\nsecrets_env = "SVIX"\njob_id = "/job"'
        ),
        {"SVIX": secret},
    )
    body = json.dumps({"job": "j4", "status": "done"}).encode()
    signature = svix.webhooks.Webhook(secret).sign(
        "msg_svix_1", datetime.fromtimestamp(NOW, UTC), body.decode()
    )
    headers = {
        **JSON_HEADERS,
        "svix-id": "msg_svix_1",
        "svix-timestamp": str(NOW),
        "svix-signature": signature,
    }
    async with running_receiver(pool, settings_for(providers)) as rx:
        first = await rx.post(body, headers, "svixy")
        again = await rx.post(body, headers, "svixy")
        tampered = await rx.post(body.replace(b"j4", b"j5"), headers, "svixy")
    assert first.json()["status"] == "stored" and again.json() == {"status": "duplicate"}
    assert tampered.status_code == 401
    [event] = await stored_events(db)
    assert (event["event_id"], event["id_signed"]) == ("msg_svix_1", True)


async def test_slack_signature_made_by_slacks_sdk(db: Any, pool: Any) -> None:
    secret = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented example secret
    providers = describe(
        _provider_toml("slacky", 'scheme = "slack"\nsecrets_env = "SLACK"\njob_id = "/job"'),
        {"SLACK": secret},
    )
    body = json.dumps({"event_id": "Ev01", "job": "j6", "status": "done"}).encode()
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(NOW), body=body)
    assert signature is not None
    headers = {
        **JSON_HEADERS,
        "x-slack-signature": signature,
        "x-slack-request-timestamp": str(NOW),
    }
    stale = {**headers, "x-slack-request-timestamp": str(NOW - 400)}
    async with running_receiver(pool, settings_for(providers)) as rx:
        good = await rx.post(body, headers, "slacky")
        old = await rx.post(body, stale, "slacky")
    assert good.status_code == 200 and old.status_code == 401
    [event] = await stored_events(db)
    assert event["event_id"] == "Ev01"


async def test_an_hmac_over_method_and_url_uses_the_public_url(db: Any, pool: Any) -> None:
    options = {
        "signature_header": "X-Sig",
        "format": "base64",
        "signed_content": "{method} {url}\n{timestamp}\n{body}",
        "timestamp_header": "X-Sig-Time",
        "algorithm": "sha512",
        "key_encoding": "hex",
    }
    key = "00112233445566778899aabbccddeeff"
    providers = describe(
        _provider_toml(
            "urly",
            'scheme = "hmac"\nsecrets_env = "URLY"\njob_id = "/job"\n'
            "[providers.urly.webhooks.options]\n"
            + "\n".join(f"{k} = {json.dumps(v)}" for k, v in options.items()),
        ),
        {"URLY": key},
    )
    public = "https://hooks.example.test/jw/webhooks/{provider}"
    body = json.dumps({"job": "j7", "status": "done"}).encode()

    def signed(url: str) -> dict[str, str]:
        value = sign("hmac", options, key, body, timestamp=NOW, method="POST", url=url)
        return {**JSON_HEADERS, "x-sig": value, "x-sig-time": str(NOW)}

    settings = settings_for(providers, public_webhook_url=public)
    async with running_receiver(pool, settings) as rx:
        # the sender signed the public address, not what the proxy forwarded to us
        good = await rx.post(
            body, signed("https://hooks.example.test/jw/webhooks/urly?x=1"), "urly", "?x=1"
        )
        internal = await rx.post(body, signed("http://receiver.test/webhooks/urly"), "urly")
    assert good.status_code == 200
    assert internal.status_code == 401


async def test_a_scheme_that_signs_the_url_needs_the_public_url(db: Any, pool: Any) -> None:
    # the Host header is the sender's to choose: it must not decide the signed URL
    providers = describe(
        _provider_toml(
            "urly",
            'scheme = "hmac"\nsecrets_env = "URLY"\njob_id = "/job"\n'
            "[providers.urly.webhooks.options]\n"
            'signature_header = "X-Sig"\nsigned_content = "{url}\\n{body}"',
        ),
        {"URLY": "k"},
    )
    with pytest.raises(ValueError, match="public_webhook_url"):
        async with running_receiver(pool, settings_for(providers)):
            pass


QUERY_TOKEN = "q-token-0123456789abcdef0123"


def _query_token_provider(secret: str = QUERY_TOKEN) -> dict[str, ProviderDescription]:
    return describe(
        _provider_toml(
            "unsigned",
            'scheme = "static_header"\nsecrets_env = "Q"\njob_id = "/job"\n'
            '[providers.unsigned.webhooks.options]\nquery = "token"',
        ),
        {"Q": secret},
    )


@pytest.mark.parametrize(
    "public", ["", f"https://hooks.example.test/webhooks/{{provider}}?token={QUERY_TOKEN}"]
)
async def test_a_query_token_is_the_requests_own_never_the_public_urls(
    db: Any, pool: Any, public: str
) -> None:
    """An operator who wrote the token into public_webhook_url (meaning it for the
    provider) must not have it presented on every request's behalf: a request
    without a token was taken. No public URL is needed either."""
    body = json.dumps({"job": "j9"}).encode()
    settings = settings_for(_query_token_provider(), public_webhook_url=public)
    async with running_receiver(pool, settings) as rx:
        bare = await rx.post(body, JSON_HEADERS, "unsigned")
        other = await rx.post(body, JSON_HEADERS, "unsigned", "?x=1")
        good = await rx.post(body, JSON_HEADERS, "unsigned", f"?token={QUERY_TOKEN}")
    assert (bare.status_code, other.status_code, good.status_code) == (400, 400, 200)


def test_a_query_path_reading_the_token_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match="the token: it is no id"):
        describe(
            _provider_toml(
                "unsigned",
                'scheme = "static_header"\nsecrets_env = "Q"\njob_id = "query:token"\n'
                '[providers.unsigned.webhooks.options]\nquery = "token"',
            ),
            {"Q": QUERY_TOKEN},
        )


async def test_a_query_token_authenticates_and_is_scrubbed_from_the_stored_body(
    db: Any, pool: Any
) -> None:
    public = "https://hooks.example.test/webhooks/{provider}"
    echoed = f"https://hooks.example.test/webhooks/unsigned?token={QUERY_TOKEN}"
    body = json.dumps({"job": "j9", "callback_url": echoed}).encode()
    settings = settings_for(_query_token_provider(), public_webhook_url=public)
    async with running_receiver(pool, settings) as rx:
        good = await rx.post(body, JSON_HEADERS, "unsigned", f"?token={QUERY_TOKEN}")
        forged = await rx.post(body, JSON_HEADERS, "unsigned", "?token=guess")
        missing = await rx.post(body, JSON_HEADERS, "unsigned")
        header = await rx.post(body, {**JSON_HEADERS, "token": QUERY_TOKEN}, "unsigned")
    assert (good.status_code, forged.status_code) == (200, 401)
    assert (missing.status_code, header.status_code) == (400, 400)
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "j9"
    assert QUERY_TOKEN not in json.dumps(event["payload"])
    assert event["payload"]["callback_url"].endswith("?token=[redacted]")


def test_a_short_or_url_unsafe_query_token_is_refused_at_load() -> None:
    for secret in ("short", "has space but long enough to pass"):
        with pytest.raises(ConfigError, match="token sent in the URL") as info:
            _query_token_provider(secret)
        assert secret not in str(info.value)


async def test_a_plugin_verifies_what_no_scheme_can_describe(db: Any, pool: Any) -> None:
    providers = describe(
        _provider_toml(
            "odd",
            'scheme = "static_header"\nsecrets_env = "ODD"\njob_id = "/job"\n'
            '[providers.odd.webhooks.options]\nheader = "X-Unused"',
        ).replace(
            "[providers.odd.create]",
            'plugin = "tests.integration.test_receiver_verification:TokenTimesBodyPlugin"\n'
            "[providers.odd.create]",
        ),
        {"ODD": "odd-secret"},
    )
    body = json.dumps({"job": "j8", "status": "done"}).encode()
    proof = hashlib.sha256(b"odd-secret:" + body).hexdigest()
    async with running_receiver(pool, settings_for(providers)) as rx:
        good = await rx.post(body, {**JSON_HEADERS, "x-proof": proof}, "odd")
        forged = await rx.post(body, {**JSON_HEADERS, "x-proof": "0" * 64}, "odd")
        crashed = await rx.post(body, {**JSON_HEADERS, "x-proof": "boom"}, "odd")
    assert good.status_code == 200
    assert forged.status_code == 401
    assert crashed.status_code == 500 and crashed.json() == {"error": "internal"}
    [event] = await stored_events(db)
    assert event["remote_job_id"] == "j8"
