"""Keys anyone can sign for, timestamps with two spellings, work an attacker multiplies.

Each case came from a security review of the signature families; each test
fails on the code before its fix.
"""

from __future__ import annotations

import base64
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from shared.signatures import SignatureError, check_secret, sign, verify
from shared.signatures.ed25519_points import is_safe_public_key

# The torsion points of Ed25519 (orders 1, 2, 4, 8) and non-canonical spellings:
# with any of them as the public key, signatures can be computed without a private key.
SMALL_ORDER = [
    bytes(32),
    b"\x01" + bytes(31),
    bytes.fromhex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
    bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"),
    bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"),
    bytes.fromhex("0000000000000000000000000000000000000000000000000000000000000080"),
    bytes.fromhex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
]
RFC8032_TEST1_KEY = bytes.fromhex(
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)


@pytest.mark.parametrize("raw", SMALL_ORDER, ids=lambda b: b.hex()[:8])
def test_a_small_order_or_non_canonical_ed25519_key_is_refused_at_load(raw: bytes) -> None:
    assert not is_safe_public_key(raw)
    with pytest.raises(ValueError):
        check_secret("standard_webhooks", "whpk_" + base64.b64encode(raw).decode())


def test_the_identity_key_cannot_verify_a_forged_v1a_signature() -> None:
    # with A = identity, the signature (R = B, S = 1) satisfies the equation for any message
    base = bytes.fromhex("5866666666666666666666666666666666666666666666666666666666666666")
    forged = base64.b64encode(base + (1).to_bytes(32, "little")).decode()
    now = int(time.time())
    headers = {
        "webhook-id": "msg_forged",
        "webhook-timestamp": str(now),
        "webhook-signature": f"v1a,{forged}",
    }
    identity = "whpk_" + base64.b64encode(b"\x01" + bytes(31)).decode()
    with pytest.raises(SignatureError) as info:
        verify("standard_webhooks", {}, headers, b"{}", [identity], now)
    assert info.value.reason == "no_secret"  # the key is never usable


def test_real_keys_stay_usable() -> None:
    assert is_safe_public_key(RFC8032_TEST1_KEY)
    for _ in range(50):
        assert is_safe_public_key(Ed25519PrivateKey.generate().public_key().public_bytes_raw())


@pytest.mark.parametrize(
    "secret",
    [
        "whpk_" + base64.b64encode(RFC8032_TEST1_KEY).decode(),
        "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
        "-----END PUBLIC KEY-----",
    ],
    ids=["whpk", "pem"],
)
def test_a_public_key_is_no_hmac_secret(secret: str) -> None:
    for scheme in ("github", "stripe", "hmac"):
        options = {"signature_header": "X-Sig"} if scheme == "hmac" else {}
        with pytest.raises(ValueError, match="public or private key"):
            check_secret(scheme, secret, options)
    body = b"{}"
    forged = sign("hmac", {"signature_header": "X-Sig"}, "s", body)  # shape only
    with pytest.raises(SignatureError) as info:
        verify("hmac", {"signature_header": "X-Sig"}, {"X-Sig": forged}, body, [secret], 0)
    assert info.value.reason == "no_secret"


def test_a_timestamp_with_leading_zeros_is_malformed() -> None:
    options = {
        "signature_header": "X-Sig",
        "timestamp_header": "X-Ts",
        "id_header": "X-Id",
        "signed_content": "{id}{timestamp}.{body}",
    }
    body = b"{}"
    now = 1_700_000_000
    signature = sign("hmac", options, "k", body, timestamp=now, event_id="evt_100")
    good = {"X-Sig": signature, "X-Ts": str(now), "X-Id": "evt_100"}
    assert verify("hmac", options, good, body, ["k"], now).event_id == "evt_100"
    shifted = {"X-Sig": signature, "X-Ts": "00" + str(now), "X-Id": "evt_1"}
    with pytest.raises(SignatureError) as info:
        verify("hmac", options, shifted, body, ["k"], now)
    assert info.value.reason == "malformed_header"


def test_a_pem_secret_that_is_not_ascii_is_refused_not_raised() -> None:
    secret = "-----BEGIN PUBLIC KEY-----\udcff"
    options = {"algorithm": "ed25519", "key_encoding": "pem", "signature_header": "X-S"}
    with pytest.raises(ValueError) as info:
        check_secret("asymmetric", secret, options)
    assert "\udcff" not in str(info.value)
    with pytest.raises(SignatureError):
        verify("asymmetric", options, {"X-S": "AAAA"}, b"{}", [secret], 0)
