"""The HMAC family (scheme `hmac`): any sender that MACs a template of the request.

Options: the envelope's (see `envelope`), plus
- `algorithm`: sha256 (default), sha512, or sha1 for legacy senders;
- `key_encoding`: raw (default), base64, hex or whsec (see `keys`);
- `construction`: hmac (default), or secret_suffix: the plain digest of the
  signed content followed by the key, no HMAC: Cloudinary's X-Cld-Signature,
  hex SHA-1 (or SHA-256) of body + X-Cld-Timestamp + api_secret. Weaker than an
  HMAC, and only what such a sender leaves us; the secret ends the digested
  bytes, so a length extension (which needs it first) does not forge one.

Examples: a Stripe-style sender under its own header name is
`{signature_header = "X-Acme-Signature", format = "kv", timestamp_key = "t",
signed_content = "{timestamp}.{body}"}`; Svix under custom header names is
`format = "versioned"`, `key_encoding = "whsec"`,
`signed_content = "{id}.{timestamp}.{body}"` plus the three header names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from .digests import HMAC_ALGORITHMS, any_match, keyed_hmac
from .envelope import ENVELOPE_KEYS, parse_envelope
from .keys import HMAC_KEY_ENCODINGS, hmac_key, hmac_key_problem
from .options import choice, reject_unknown
from .spec import Matcher, Spec
from .templates import PLACEHOLDERS

SCHEME = "hmac"
OPTION_KEYS: tuple[str, ...] = (*ENVELOPE_KEYS, "algorithm", "key_encoding", "construction")
DEFAULT_KEY = "v1"
CONSTRUCTIONS = frozenset({"hmac", "secret_suffix"})


def suffixed_digest(algorithm: str, key: bytes) -> Callable[[bytes], bytes]:
    """`content -> ` the digest of content then key (`construction = "secret_suffix"`)."""
    if algorithm not in HMAC_ALGORITHMS:
        raise ValueError(f"unsupported digest algorithm {algorithm!r}")

    def digest(content: bytes) -> bytes:
        return hashlib.new(algorithm, content + key).digest()

    return digest


@dataclass(frozen=True, slots=True)
class HmacCheck:
    """HMAC over the signed content with each usable secret."""

    label: str
    algorithm: str
    key_encoding: str
    construction: str = "hmac"

    def _keyed(self, key: bytes) -> Callable[[bytes], bytes]:
        if self.construction == "secret_suffix":
            return suffixed_digest(self.algorithm, key)
        return keyed_hmac(self.algorithm, key)

    def matcher(self, secrets: Sequence[str]) -> Matcher | None:
        keys = [key for key in (hmac_key(self.key_encoding, s) for s in secrets) if key]
        if not keys:
            return None
        macs = [self._keyed(key) for key in keys]

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
        return self._keyed(key)(content)


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
        construction=choice(scheme, options, "construction", CONSTRUCTIONS, "hmac"),
    )
    return Spec(scheme=scheme, envelope=envelope, checks=(check,))
