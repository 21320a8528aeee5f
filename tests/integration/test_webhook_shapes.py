"""The same job, its webhook signed the way other providers sign theirs.

The simulator signs with the scheme the provider's TOML names (presets under
headers of their own, the hmac family over method and URL), the real
receiver verifies it, and the reconciler finishes the job from the wake-up.
A delivery the receiver could not verify would not be stored at all, so a
stored, matched, terminal event is the proof.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.signatures import generate_ed25519_keypair, generate_p256_private_pem
from tests.harness import webhook_rig

S = LocalState

SHAPES: dict[str, dict[str, Any]] = {
    "stripe_under_its_own_header": {
        "scheme": "stripe",
        "options": {"signature_header": "X-Acme-Signature"},
    },
    "stripe_layout_spelled_out": {
        "scheme": "hmac",
        "options": {
            "signature_header": "X-Acme-Signature",
            "format": "kv",
            "timestamp_key": "t",
            "signed_content": "{timestamp}.{body}",
        },
    },
    "svix_layout_under_custom_headers": {
        "scheme": "hmac",
        "options": {
            "signature_header": "X-Hook-Signature",
            "timestamp_header": "X-Hook-Timestamp",
            "id_header": "X-Hook-Id",
            "format": "versioned",
            "key_encoding": "whsec",
            "signed_content": "{id}.{timestamp}.{body}",
        },
    },
    "sha512_over_method_and_url": {
        "scheme": "hmac",
        "options": {
            "signature_header": "X-Sig",
            "timestamp_header": "X-Sig-Time",
            "format": "base64",
            "algorithm": "sha512",
            "signed_content": "{method} {url}\n{timestamp}\n{body}",
        },
    },
    "ed25519_over_id_timestamp_body": {
        "scheme": "asymmetric",
        "options": {
            "algorithm": "ed25519",
            "key_encoding": "whpk",
            "signature_header": "X-Acme-Signature",
            "timestamp_header": "X-Acme-Timestamp",
            "id_header": "X-Acme-Event",
            "format": "versioned",
            "signed_content": "{id}.{timestamp}.{body}",
        },
    },
    "ecdsa_p256_raw_hex": {
        "scheme": "asymmetric",
        "options": {
            "algorithm": "ecdsa_p256",
            "ecdsa_signature": "raw",
            "signature_header": "X-Sig",
            "timestamp_header": "X-Sig-Time",
            "format": "hex",
            "signed_content": "{timestamp}{body}",
        },
    },
    "github": {"scheme": "github", "options": {}},
    "slack": {"scheme": "slack", "options": {}},
    "shopify": {"scheme": "shopify", "options": {}},
}


KEYPAIRS = {"ed25519": generate_ed25519_keypair, "ecdsa_p256": generate_p256_private_pem}


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_webhook_signed_like_another_provider_finishes_the_job(
    pool: Any, tmp_path: Path, shape: str
) -> None:
    table = SHAPES[shape]
    sim: dict[str, Any] = {"webhook_scheme": table["scheme"], "webhook_options": table["options"]}
    if table["scheme"] == "asymmetric":  # the simulator signs, the receiver holds the public key
        private, public = KEYPAIRS[table["options"]["algorithm"]]()
        sim.update(webhook_secret=private, verify_with=public)
    async with webhook_rig(pool, tmp_path, webhooks=table, **sim) as r:
        op_id = await r.submit("success", duration=0.3)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=20) is S.SUCCEEDED

        async def announced() -> bool:
            return bool(
                await pool.fetchval(
                    "SELECT count(*) FROM webhook_events WHERE operation_id = $1"
                    " AND remote_state = 'succeeded'",
                    op_id,
                )
            )

        await r.run_until(announced, timeout=20)
    rejected = await pool.fetchval("SELECT count(*) FROM webhook_events WHERE operation_id IS NULL")
    assert rejected == 0
