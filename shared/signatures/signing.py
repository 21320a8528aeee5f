"""Sender-side signing, for the simulated provider, benchmarks and tests.

`sign` produces exactly the header value a sender using an HMAC scheme would
send, from the same spec the verifier uses, so the two cannot drift apart.
The named helpers keep the signatures older callers use.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from .asymmetric import AsymmetricCheck
from .dispatch import build_spec
from .hmac_family import HmacCheck
from .keys import ED25519_KEY_BYTES, WHPK_PREFIX, WHSK_PREFIX, prefixed_base64
from .spec import Spec


def sign(
    scheme: str,
    options: Mapping[str, object],
    secret: str,
    body: bytes,
    *,
    timestamp: int | None = None,
    event_id: str | None = None,
    method: str | None = None,
    url: str | None = None,
) -> str:
    """One signature header value, as its sender would send it.

    HMAC schemes sign with the shared secret; the asymmetric family with a
    private key (PEM PKCS#8, or a `whsk_` seed for Ed25519) whose public half
    the receiver is configured with.
    """
    spec = build_spec(scheme, options)
    check = spec.checks[0]
    content = _signed_content(spec, body, timestamp, event_id, method, url)
    try:
        if isinstance(check, HmacCheck):
            mac = check.sign(secret, content)
        elif isinstance(check, AsymmetricCheck):
            mac = _sign_asymmetric(check, secret, content)
        else:
            raise ValueError("this scheme signs nothing")
    except ValueError as exc:  # its message never quotes the secret
        raise ValueError(f"{scheme}: {exc}") from None
    fmt = spec.envelope.format
    encoded = mac.hex() if fmt.encoding == "hex" else base64.b64encode(mac).decode("ascii")
    if fmt.kind == "versioned":
        return f"{check.label},{encoded}"
    if fmt.kind == "kv":
        stamp = ""
        if fmt.timestamp_key is not None:
            stamp = f"{fmt.timestamp_key}={timestamp}{fmt.separator}"
        return f"{stamp}{check.label}={encoded}"
    return fmt.prefix + encoded


def _sign_asymmetric(check: AsymmetricCheck, private_key: str, content: bytes) -> bytes:
    key = _private_key(private_key)
    if check.algorithm == "ed25519":
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("algorithm ed25519 signs with an Ed25519 private key")
        return key.sign(content)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("algorithm ecdsa_p256 signs with a P-256 private key")
    der = key.sign(content, ec.ECDSA(hashes.SHA256()))
    if check.ecdsa_signature == "der":
        return der
    r, s = decode_dss_signature(der)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def _private_key(secret: str) -> object:
    if secret.startswith(WHSK_PREFIX):
        seed = prefixed_base64(secret, WHSK_PREFIX)
        if seed is None or len(seed) != ED25519_KEY_BYTES:
            raise ValueError(f"a {WHSK_PREFIX} key is base64 of a 32-byte seed")
        return Ed25519PrivateKey.from_private_bytes(seed)
    try:
        return serialization.load_pem_private_key(secret.encode("ascii"), password=None)
    except (ValueError, TypeError, UnicodeEncodeError):
        raise ValueError("the private key must be PEM (PKCS#8) or a whsk_ seed") from None


def generate_p256_private_pem() -> tuple[str, str]:
    """A fresh P-256 (private PKCS#8 PEM, public base64 DER) pair, for tests and demos."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, base64.b64encode(public).decode("ascii")


def sign_headers(
    scheme: str,
    options: Mapping[str, object],
    secret: str,
    body: bytes,
    *,
    timestamp: int,
    event_id: str,
    method: str | None = None,
    url: str | None = None,
) -> dict[str, str]:
    """Every header a sender of a signing scheme sends: signature, and the
    timestamp and id headers where the scheme's envelope has them (first
    name of each alias list)."""
    envelope = build_spec(scheme, options).envelope
    headers = {
        envelope.signature_headers[0]: sign(
            scheme,
            options,
            secret,
            body,
            timestamp=timestamp,
            event_id=event_id,
            method=method,
            url=url,
        )
    }
    if envelope.timestamp_headers:
        headers[envelope.timestamp_headers[0]] = str(timestamp)
    if envelope.id_headers:
        headers[envelope.id_headers[0]] = event_id
    return headers


def sign_generic(
    options: Mapping[str, object],
    secret: str,
    body: bytes,
    timestamp: int | None = None,
    event_id: str | None = None,
) -> str:
    """One `generic_hmac` signature, prefix included."""
    return sign("generic_hmac", options, secret, body, timestamp=timestamp, event_id=event_id)


def sign_stripe(secret: str, timestamp: int, body: bytes) -> str:
    """A complete `Stripe-Signature` header value."""
    return sign("stripe", {}, secret, body, timestamp=timestamp)


def sign_github(secret: str, body: bytes) -> str:
    """A complete `X-Hub-Signature-256` header value."""
    return sign("github", {}, secret, body)


def sign_standard_webhooks(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """A `v1,<base64>` signature entry for a `whsec_` secret."""
    return sign("standard_webhooks", {}, secret, body, timestamp=timestamp, event_id=msg_id)


def sign_standard_webhooks_ed25519(
    private_key_secret: str, msg_id: str, timestamp: int, body: bytes
) -> str:
    """A `v1a,<base64>` signature entry for a `whsk_` private seed."""
    seed = prefixed_base64(private_key_secret, WHSK_PREFIX)
    if seed is None or len(seed) != ED25519_KEY_BYTES:
        raise ValueError(
            f"standard_webhooks: signing needs a {WHSK_PREFIX} key (base64 of a 32-byte seed)"
        )
    spec = build_spec("standard_webhooks", {})
    content = _signed_content(spec, body, timestamp, msg_id, None, None)
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(content)
    return "v1a," + base64.b64encode(signature).decode("ascii")


def generate_ed25519_keypair() -> tuple[str, str]:
    """A fresh (`whsk_` private seed, `whpk_` public key) pair."""
    private_key = Ed25519PrivateKey.generate()
    seed = private_key.private_bytes_raw()
    public = private_key.public_key().public_bytes_raw()
    return (
        WHSK_PREFIX + base64.b64encode(seed).decode("ascii"),
        WHPK_PREFIX + base64.b64encode(public).decode("ascii"),
    )


def _signed_content(
    spec: Spec,
    body: bytes,
    timestamp: int | None,
    event_id: str | None,
    method: str | None,
    url: str | None,
) -> bytes:
    values: dict[str, bytes | str | None] = {
        "body": body,
        "timestamp": None if timestamp is None else str(timestamp),
        "id": event_id,
        "method": method,
        "url": url,
    }
    template = spec.envelope.template
    for name, value in values.items():
        if template.uses(name) and value is None:
            argument = "an event_id" if name == "id" else f"a {name}"
            raise ValueError(f"{spec.scheme}: signed_content has {{{name}}}; pass {argument}")
    return template.render(values)
