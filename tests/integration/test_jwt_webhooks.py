"""Deliveries carrying a JWT on the real receiver over a socket (`scheme = "jwt"`).

(a) Google Cloud Pub/Sub push: an OIDC ID token in `Authorization: Bearer`,
minted by Google's own library (`google.auth.jwt.encode` with an
`RSASigner`), verified against a JWKS holding Google's old and current keys.
The token names the endpoint, not the message: the body is unsigned, so it is
deduplicated on its hash (never on the `messageId` it claims) and one token
serves every message, as Google reuses it.

(b) Plaid: an ES256 token in `Plaid-Verification` whose `request_body_sha256`
binds the body, minted by PyJWT; replayed on another body it is refused.

Before `scheme = "jwt"` no scheme could verify either: the configurations did
not load.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.auth import crypt as google_crypt
from google.auth import jwt as google_jwt

from tests.integration.test_more_official_signers import (
    REJECTED,
    _providers,
    _receiver,
    _refusals,
)
from tests.integration.test_receiver_support import JSON_HEADERS, NOW, stored_events

PUBLIC = "https://hooks.example.test/jobwarden/webhooks/{provider}"
URL = "https://hooks.example.test/jobwarden/webhooks/pubsub"
PUSH_ACCOUNT = "jobwarden-push@acme-prod.iam.gserviceaccount.com"

PUBSUB_TOML = f"""
[providers.pubsub.webhooks]
scheme = "jwt"
secrets_env = "GOOGLE_OIDC_JWKS"
tolerance_seconds = 3600  # Google reuses a token for up to its hour
event_id = "/message/messageId"  # in the unsigned body: never the dedupe key
job_id = "/message/attributes/operation"
state = "/message/attributes/state"
[providers.pubsub.webhooks.options]
algorithms = ["RS256"]
audience = "{{url}}"
issuer = ["https://accounts.google.com", "accounts.google.com"]
claims = {{ email = "{PUSH_ACCOUNT}", email_verified = true }}
[providers.pubsub.webhooks.state_map]
DONE = "succeeded"
FAILED = "failed"
"""

PLAID_TOML = """
[providers.plaid.webhooks]
scheme = "jwt"
secrets_file = "KEYS"
job_id = "/item_id"
state = "/webhook_code"
[providers.plaid.webhooks.options]
header = "Plaid-Verification"
algorithms = ["ES256"]
body_claim = "request_body_sha256"
[providers.plaid.webhooks.state_map]
TRANSACTIONS_REMOVED = "failed"
SYNC_UPDATES_AVAILABLE = "succeeded"
"""

GOOGLE_OLD = rsa.generate_private_key(public_exponent=65537, key_size=2048)
GOOGLE_NOW = rsa.generate_private_key(public_exponent=65537, key_size=2048)
STRANGER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PLAID_KEY = ec.generate_private_key(ec.SECP256R1())


def private_pem(key: Any) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def jwks(*entries: tuple[Any, str]) -> str:
    keys = []
    for key, kid in entries:
        public = key.public_key()
        algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else None
        data = json.loads(
            algorithm.to_jwk(public) if algorithm else jwt.algorithms.ECAlgorithm.to_jwk(public)
        )
        keys.append({**data, "kid": kid, "use": "sig"})
    return json.dumps({"keys": keys})


def google_token(key: Any = GOOGLE_NOW, kid: str = "google-2026b", **changes: Any) -> str:
    """An OIDC ID token as Pub/Sub push sends it, minted by google-auth itself."""
    payload = {
        "aud": URL,
        "azp": "113774264463038321964",
        "email": PUSH_ACCOUNT,
        "email_verified": True,
        "exp": NOW + 3000,
        "iat": NOW - 600,  # minted ten minutes ago, reused since
        "iss": "https://accounts.google.com",
        "sub": "113774264463038321964",
        **changes,
    }
    signer = google_crypt.RSASigner.from_string(private_pem(key).decode(), kid)
    token: bytes = google_jwt.encode(signer, payload)
    return token.decode()


def push_body(message_id: str, operation: str, state: str) -> bytes:
    data = {"name": operation, "done": state == "DONE"}
    return json.dumps(
        {
            "message": {
                "attributes": {"operation": operation, "state": state},
                "data": base64.b64encode(json.dumps(data).encode()).decode(),
                "messageId": message_id,
                "publishTime": "2027-01-15T08:00:00.000Z",
            },
            "subscription": "projects/acme-prod/subscriptions/jobwarden-push",
        }
    ).encode()


def bearer(token: str) -> dict[str, str]:
    return {**JSON_HEADERS, "Authorization": f"Bearer {token}"}


async def test_a_pubsub_push_with_googles_own_token(db: Any, pool: Any) -> None:
    env = {"GOOGLE_OIDC_JWKS": jwks((GOOGLE_OLD, "google-2026a"), (GOOGLE_NOW, "google-2026b"))}
    providers = _providers("pubsub", PUBSUB_TOML, env)
    token = google_token()
    first = push_body("9001", "operations/build-1", "DONE")
    # another message under the same token (Google reuses it), claiming the same messageId
    second = push_body("9001", "operations/build-2", "FAILED")
    async with _receiver(pool, providers, public_webhook_url=PUBLIC) as rx:
        stored = await rx.post(first, bearer(token), "pubsub")
        again = await rx.post(first, bearer(token), "pubsub")
        other = await rx.post(second, bearer(token), "pubsub")
        old_key = await rx.post(
            push_body("9002", "operations/build-3", "DONE"),
            bearer(google_token(GOOGLE_OLD, "google-2026a")),
            "pubsub",
        )
        refused = {
            "another endpoint": await rx.post(
                first, bearer(google_token(aud=URL + "-b")), "pubsub"
            ),
            "another account": await rx.post(
                first, bearer(google_token(email="someone@evil.iam.gserviceaccount.com")), "pubsub"
            ),
            "unknown key": await rx.post(
                first, bearer(google_token(STRANGER, "google-2026b")), "pubsub"
            ),
            "expired": await rx.post(
                first, bearer(google_token(iat=NOW - 3700, exp=NOW - 100)), "pubsub"
            ),
        }
        unsigned = await rx.post(first, JSON_HEADERS, "pubsub")
        reasons = _refusals(rx, "pubsub")
    assert stored.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    assert other.json() == {"status": "stored", "matched": False}
    assert old_key.json() == {"status": "stored", "matched": False}
    for why, response in refused.items():
        assert (response.status_code, response.json()) == (401, REJECTED), why
    assert (unsigned.status_code, unsigned.json()) == (400, REJECTED)
    assert reasons == {"bad_signature": 3, "stale_timestamp": 1}
    events = await stored_events(db)
    # the unsigned body's messageId is never the dedupe key: its hash is
    assert [(e["event_id"], e["id_signed"]) for e in events] == [
        ("sha256:" + hashlib.sha256(body).hexdigest(), False)
        for body in (first, second, push_body("9002", "operations/build-3", "DONE"))
    ]
    assert [(e["remote_job_id"], e["remote_state"]) for e in events][:2] == [
        ("operations/build-1", "succeeded"),
        ("operations/build-2", "failed"),
    ]


def plaid_token(body: bytes, **changes: Any) -> str:
    claims = {"iat": NOW - 3, "request_body_sha256": hashlib.sha256(body).hexdigest(), **changes}
    return jwt.encode(claims, PLAID_KEY, algorithm="ES256", headers={"kid": "plaid-kid-1"})


async def test_a_plaid_delivery_binds_its_body(db: Any, pool: Any, tmp_path: Path) -> None:
    keys = tmp_path / "plaid-jwks.json"
    keys.write_text(jwks((PLAID_KEY, "plaid-kid-1")))
    providers = _providers("plaid", PLAID_TOML.replace("KEYS", str(keys)), {})
    body = (
        b'{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE",'
        b'"item_id":"item-1"}'
    )
    changed = body.replace(b"SYNC_UPDATES_AVAILABLE", b"TRANSACTIONS_REMOVED")
    token = plaid_token(body)
    async with _receiver(pool, providers) as rx:
        stored = await rx.post(body, {**JSON_HEADERS, "Plaid-Verification": token}, "plaid")
        again = await rx.post(body, {**JSON_HEADERS, "Plaid-Verification": token}, "plaid")
        replayed = await rx.post(changed, {**JSON_HEADERS, "Plaid-Verification": token}, "plaid")
        stale = await rx.post(
            changed,
            {**JSON_HEADERS, "Plaid-Verification": plaid_token(changed, iat=NOW - 301)},
            "plaid",
        )
        with_jti = await rx.post(
            changed,
            {**JSON_HEADERS, "Plaid-Verification": plaid_token(changed, jti="delivery-77")},
            "plaid",
        )
        reasons = _refusals(rx, "plaid")
    assert stored.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    for response in (replayed, stale):
        assert (response.status_code, response.json()) == (401, REJECTED)
    assert reasons == {"bad_signature": 1, "stale_timestamp": 1}
    assert with_jti.json() == {"status": "stored", "matched": False}
    events = await stored_events(db)
    assert [(e["event_id"], e["id_signed"], e["remote_state"]) for e in events] == [
        ("sha256:" + hashlib.sha256(body).hexdigest(), True, "succeeded"),
        ("delivery-77", True, "failed"),
    ]
