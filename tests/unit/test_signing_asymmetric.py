"""The sender side of the asymmetric family: what `sign` produces, `verify` accepts.

The simulator signs its webhooks with these, so a provider whose events are
signed with Ed25519 or ECDSA P-256 can be exercised end to end; the verifier
is tested against published vectors elsewhere (test_signatures_asymmetric).
"""

from __future__ import annotations

import time

import pytest

from shared.signatures import (
    SignatureError,
    generate_ed25519_keypair,
    generate_p256_private_pem,
    sign_headers,
    verify,
)

BODY = b'{"id":"exp_1","status":"COMPLETED"}'


def _options(algorithm: str, **extra: str) -> dict[str, object]:
    return {
        "algorithm": algorithm,
        "signature_header": "X-Acme-Signature",
        "timestamp_header": "X-Acme-Timestamp",
        "signed_content": "{timestamp}.{body}",
        **extra,
    }


CASES = {
    "ed25519_whsk": ("ed25519", {"key_encoding": "whpk"}),
    "ecdsa_der": ("ecdsa_p256", {}),
    "ecdsa_raw_hex": ("ecdsa_p256", {"ecdsa_signature": "raw", "format": "hex"}),
}


def _keys(algorithm: str) -> tuple[str, str]:
    if algorithm == "ed25519":
        return generate_ed25519_keypair()
    return generate_p256_private_pem()


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_signed_delivery_verifies_and_a_changed_one_does_not(case: str) -> None:
    algorithm, extra = CASES[case]
    options = _options(algorithm, **extra)
    private, public = _keys(algorithm)
    now = int(time.time())
    headers = sign_headers("asymmetric", options, private, BODY, timestamp=now, event_id="e1")
    assert set(headers) == {"X-Acme-Signature", "X-Acme-Timestamp"}
    verify("asymmetric", options, headers, BODY, [public], now)
    with pytest.raises(SignatureError):
        verify("asymmetric", options, headers, BODY + b" ", [public], now)
    with pytest.raises(SignatureError):
        verify("asymmetric", options, headers, BODY, [_keys(algorithm)[1]], now)
    with pytest.raises(SignatureError):
        verify("asymmetric", options, headers, BODY, [public], now + 3600)


def test_a_key_of_the_wrong_kind_is_refused_without_quoting_it() -> None:
    private, _ = generate_ed25519_keypair()
    with pytest.raises(ValueError) as caught:
        sign_headers("asymmetric", _options("ecdsa_p256"), private, BODY, timestamp=1, event_id="e")
    assert "P-256" in str(caught.value) and private not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        sign_headers(
            "asymmetric", _options("ed25519"), "not a key", BODY, timestamp=1, event_id="e"
        )
    assert "PEM" in str(caught.value) and "not a key" not in str(caught.value)
