"""The asymmetric family (scheme `asymmetric`): Ed25519 or ECDSA P-256 over a template.

The receiver holds only public keys, so nothing in its configuration can
forge an event, which is the point of these schemes. Options: the envelope's
(see `envelope`; default format base64, default signature key `v1a` as in
Standard Webhooks), plus
- `algorithm` (required): ed25519 or ecdsa_p256 (ECDSA with SHA-256).
- `key_encoding`: base64 (default), hex, pem, or whpk (Ed25519 only).
- `ecdsa_signature`: der (default; ASN.1 as most libraries emit) or raw
  (64 bytes r||s, as JOSE and WebCrypto emit). ECDSA only.

Example: SendGrid's signed Event Webhook is `algorithm = "ecdsa_p256"`,
`signature_header = "X-Twilio-Email-Event-Webhook-Signature"`,
`timestamp_header = "X-Twilio-Email-Event-Webhook-Timestamp"`,
`signed_content = "{timestamp}{body}"` with the published base64 DER key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from .envelope import ENVELOPE_KEYS, parse_envelope
from .keys import (
    PUBLIC_KEY_ENCODINGS,
    WHSK_PREFIX,
    PublicKey,
    public_key,
    public_key_problem,
)
from .options import choice, reject_unknown
from .spec import Matcher, Spec
from .templates import PLACEHOLDERS

SCHEME = "asymmetric"
ALGORITHMS: frozenset[str] = frozenset({"ed25519", "ecdsa_p256"})
ECDSA_SIGNATURE_FORMS: frozenset[str] = frozenset({"der", "raw"})
OPTION_KEYS: tuple[str, ...] = (*ENVELOPE_KEYS, "algorithm", "key_encoding", "ecdsa_signature")
DEFAULT_KEY = "v1a"

_P256_SCALAR_BYTES = 32


# Signatures per header an asymmetric check verifies (a sender rotating keys
# sends two); the rest are ignored.
MAX_ASYMMETRIC_SIGNATURES = 4


@dataclass(frozen=True, slots=True)
class AsymmetricCheck:
    """A public-key signature over the signed content, for each usable key."""

    label: str
    algorithm: str
    key_encoding: str
    ecdsa_signature: str = "der"

    def matcher(self, secrets: Sequence[str]) -> Matcher | None:
        keys = [key for key in (self._key(s) for s in secrets) if key is not None]
        if not keys:
            return None

        def matches(content: bytes, signatures: Sequence[bytes]) -> bool:
            # each check hashes the whole body: a few signatures are rotation,
            # more are an unauthenticated sender multiplying our work
            tried = signatures[:MAX_ASYMMETRIC_SIGNATURES]
            return any(self._valid(key, sig, content) for key in keys for sig in tried)

        return matches

    def secret_problem(self, secret: str) -> str | None:
        return public_key_problem(self.algorithm, self.key_encoding, secret)

    def _key(self, secret: str) -> PublicKey | None:
        # A private key must not be used here, even if some encoding would load it.
        if secret.startswith(WHSK_PREFIX):
            return None
        return public_key(self.algorithm, self.key_encoding, secret)

    def _valid(self, key: PublicKey, signature: bytes, content: bytes) -> bool:
        try:
            if isinstance(key, Ed25519PublicKey):
                key.verify(signature, content)
                return True
            if self.ecdsa_signature == "raw":
                if len(signature) != 2 * _P256_SCALAR_BYTES:
                    return False
                r = int.from_bytes(signature[:_P256_SCALAR_BYTES], "big")
                s = int.from_bytes(signature[_P256_SCALAR_BYTES:], "big")
                signature = encode_dss_signature(r, s)
            key.verify(signature, content, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, ValueError):
            # ValueError: what cryptography raises for some undecodable inputs.
            return False
        return True


def parse_options(
    options: Mapping[str, object],
    scheme: str = SCHEME,
    allowed: Collection[str] = OPTION_KEYS,
    placeholders: Collection[str] = PLACEHOLDERS,
) -> Spec:
    """The spec for `options`, or ValueError naming the offending key."""
    reject_unknown(scheme, options, allowed)
    if options.get("algorithm") is None:
        raise ValueError(f"{scheme}: option 'algorithm' is required (ed25519 or ecdsa_p256)")
    algorithm = choice(scheme, options, "algorithm", ALGORITHMS, "ed25519")
    key_encoding = choice(scheme, options, "key_encoding", PUBLIC_KEY_ENCODINGS, "base64")
    if key_encoding == "whpk" and algorithm != "ed25519":
        raise ValueError(f"{scheme}: option 'key_encoding' whpk is for algorithm ed25519 only")
    if options.get("ecdsa_signature") is not None and algorithm != "ecdsa_p256":
        raise ValueError(f"{scheme}: option 'ecdsa_signature' only applies to ecdsa_p256")
    envelope, label = parse_envelope(
        scheme, options, default_format="base64", default_key=DEFAULT_KEY, placeholders=placeholders
    )
    check = AsymmetricCheck(
        label=label,
        algorithm=algorithm,
        key_encoding=key_encoding,
        ecdsa_signature=choice(scheme, options, "ecdsa_signature", ECDSA_SIGNATURE_FORMS, "der"),
    )
    return Spec(scheme=scheme, envelope=envelope, checks=(check,))
