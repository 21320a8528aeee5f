"""The HMAC family (scheme `hmac`): any sender that MACs a template of the request.

Options: the envelope's (see `envelope`), plus
- `algorithm`: sha256 (default), sha512, or sha1 for legacy senders;
- `key_encoding`: raw (default), base64, hex or whsec (see `keys`).

Examples: a Stripe-style sender under its own header name is
`{signature_header = "X-Acme-Signature", format = "kv", timestamp_key = "t",
signed_content = "{timestamp}.{body}"}`; Svix under custom header names is
`format = "versioned"`, `key_encoding = "whsec"`,
`signed_content = "{id}.{timestamp}.{body}"` plus the three header names.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .digests import HMAC_ALGORITHMS, any_match, hmac_digest, keyed_hmac
from .envelope import ENVELOPE_KEYS, parse_envelope
from .keys import HMAC_KEY_ENCODINGS, hmac_key, hmac_key_problem
from .options import choice, reject_unknown
from .spec import Matcher, Spec
from .templates import PLACEHOLDERS

SCHEME = "hmac"
OPTION_KEYS: tuple[str, ...] = (*ENVELOPE_KEYS, "algorithm", "key_encoding")
DEFAULT_KEY = "v1"


@dataclass(frozen=True, slots=True)
class HmacCheck:
    """HMAC over the signed content with each usable secret."""

    label: str
    algorithm: str
    key_encoding: str

    def matcher(self, secrets: Sequence[str]) -> Matcher | None:
        keys = [key for key in (hmac_key(self.key_encoding, s) for s in secrets) if key]
        if not keys:
            return None
        macs = [keyed_hmac(self.algorithm, key) for key in keys]

        def matches(content: bytes, signatures: Sequence[bytes]) -> bool:
            if not signatures:  # nothing to compare: no MAC to compute
                return False
            return any_match([mac(content) for mac in macs], signatures)

        return matches

    def secret_problem(self, secret: str) -> str | None:
        return hmac_key_problem(self.key_encoding, secret)

    def sign(self, secret: str, content: bytes) -> bytes:
        """The raw MAC a sender holding `secret` would send (sender side, tests)."""
        # An empty raw key is allowed here: tests sign with one to show the
        # verifier never accepts it.
        key = hmac_key(self.key_encoding, secret) or (
            b"" if self.key_encoding == "raw" and not secret else None
        )
        if key is None:
            problem = hmac_key_problem(self.key_encoding, secret)
            raise ValueError(f"signing needs a usable secret: {problem}")
        return hmac_digest(self.algorithm, key, content)


def parse_options(
    options: Mapping[str, object],
    scheme: str = SCHEME,
    allowed: Collection[str] = OPTION_KEYS,
    placeholders: Collection[str] = PLACEHOLDERS,
) -> Spec:
    """The spec for `options`, or ValueError naming the offending key.

    `scheme`, `allowed` and `placeholders` let a preset reuse the family under
    its own name and with its own (smaller) set of options.
    """
    reject_unknown(scheme, options, allowed)
    envelope, label = parse_envelope(
        scheme, options, default_format="hex", default_key=DEFAULT_KEY, placeholders=placeholders
    )
    check = HmacCheck(
        label=label,
        algorithm=choice(scheme, options, "algorithm", HMAC_ALGORITHMS, "sha256"),
        key_encoding=choice(scheme, options, "key_encoding", HMAC_KEY_ENCODINGS, "raw"),
    )
    return Spec(scheme=scheme, envelope=envelope, checks=(check,))
