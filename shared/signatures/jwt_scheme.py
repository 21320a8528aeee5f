"""A JSON Web Token carried by the delivery (scheme `jwt`): Google Cloud Pub/Sub
push (an OIDC ID token in `Authorization: Bearer`), Plaid (`Plaid-Verification`).

The sender signs a token with its private key; the receiver holds only the
public keys (PEM keys, X.509 certificates or a JWKS), so nothing in its
configuration can mint one. What the token proves depends on the sender:

- Pub/Sub's token names the endpoint (`aud`), the push service account
  (`email`) and a validity window, but not the body: the body is unsigned,
  and the receiver treats it as it treats `static_header` (deduplicated on
  its hash, no id read from it; an event only wakes our own status read).
  Google also reuses one token across messages, so the token is no dedupe key.
- Plaid's token carries the body's SHA-256 (`request_body_sha256`): with
  `body_claim` naming that claim the body is signed, and the token's `jti`
  (when present, else the body's hash or a configured body id) dedupes.

Options:
- `header`: default `Authorization`, read as `Bearer <token>`; any other
  header holds the bare token.
- `algorithms` (required): an allow-list of RS256, RS384, RS512, PS256,
  PS384, PS512, ES256, ES384, EdDSA. `none` and the HS* family are refused at
  load: an HMAC "keyed" by a published public key is one anyone can compute
  (the algorithm-confusion attack). The token's own `alg` must be listed, and
  a key is used only with an algorithm of its own type (an RSA key never
  verifies ES256, a JWK that names its `alg` only that one).
- `audience`: a string or a list; `{url}` is the URL the sender addressed
  (`public_webhook_url`), as for schemes that sign the URL. Every audience the
  token names must be one of them (an `aud` list naming another party too is
  refused: that party holds a token that would pass here). Required without
  `body_claim`: a token that covers no body is a bearer credential, which must
  name us (any token the sender minted for another audience would pass) and
  expire. With it the token is a signature over the body, as Plaid's, which
  carries neither `aud` nor `exp`: `aud` is then checked only when configured,
  `exp` only when present, and `iat` bounds the replay.
- `issuer`: a string or a list; the token's `iss` must be one of them.
- `claims`: claim = value (text, boolean or integer) equalities that must hold
  exactly (`email_verified = true` is not met by `"true"`). Required without
  `body_claim`: the audience is chosen by whoever asks for a token (Google
  signs one for any audience to any account), so the token must also name
  its sender (Pub/Sub: `email`, the push service account).
- `body_claim` / `body_claim_encoding` (hex, default, or base64): the claim
  holding the SHA-256 of the raw body.

Time, with `now` injected: `exp` must be in the future (and present, without
`body_claim`) and `iat` present and no older than the provider's
`tolerance_seconds`; `exp`, a future `iat` and `nbf` (when
present) allow `LEEWAY_SECONDS` of clock skew.

Order of work as in `spec`: the signature first, then audience, issuer,
claims and body, and the window last, so `stale_timestamp` and
`future_timestamp` only ever describe authentic tokens. No error or
exception carries anything of the token.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from cryptography.x509 import load_pem_x509_certificate

from .digests import decode_base64
from .ed25519_points import is_safe_public_key
from .errors import SignatureError
from .headers import HeaderView
from .options import header_name, optional_str, reject_unknown
from .spec import RequestCheck
from .verified import Verified

SCHEME = "jwt"
OPTION_KEYS = (
    "header",
    "algorithms",
    "audience",
    "issuer",
    "claims",
    "body_claim",
    "body_claim_encoding",
)
ALGORITHMS: tuple[str, ...] = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "EdDSA",
)
BODY_CLAIM_ENCODINGS = ("hex", "base64")
DEFAULT_HEADER = "Authorization"
# Clock skew allowed on `exp`, `nbf` and a future `iat` (PyJWT's and Google's
# libraries default to none and 10 s; a minute covers an unsynchronised host).
LEEWAY_SECONDS = 60
MIN_RSA_BITS = 2048
MAX_LIST = 4  # audiences, issuers
MAX_CLAIMS = 16
# Claims with options of their own, or checked against the clock.
_RESERVED_CLAIMS = frozenset({"exp", "iat", "nbf", "aud", "iss"})
_TOKEN = re.compile(r"[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+)")
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)
_MAX_JTI_CHARS = 256
_JWS = jwt.PyJWS()

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey | Ed25519PublicKey | Ed448PublicKey


@dataclass(frozen=True, slots=True)
class _Config:
    header: str
    bearer: bool
    algorithms: frozenset[str]
    audiences: tuple[str, ...]
    issuers: tuple[str, ...]
    claims: tuple[tuple[str, str | bool | int], ...]
    body_claim: str | None
    body_claim_encoding: str


@dataclass(frozen=True, slots=True)
class _Key:
    kid: str | None
    alg: str | None  # a JWK's own `alg`: only that algorithm may use it
    key: PublicKey


# --------------------------------------------------------------------- options


def check_options(options: Mapping[str, object]) -> None:
    """Validate the options at config load; ValueError names the bad key."""
    _config(options)


def _config(options: Mapping[str, object]) -> _Config:
    reject_unknown(SCHEME, options, OPTION_KEYS)
    header = header_name(SCHEME, options, "header", required=False) or DEFAULT_HEADER
    algorithms = _algorithms(options.get("algorithms"))
    body_claim = optional_str(SCHEME, options, "body_claim", max_chars=64)
    audiences = _strings(options, "audience", required=body_claim is None)
    issuers = _strings(options, "issuer", required=False)
    if body_claim is not None and (not body_claim or body_claim in _RESERVED_CLAIMS):
        raise ValueError(
            f"{SCHEME}: option 'body_claim' must name a claim other than exp, iat, nbf, aud, iss"
        )
    encoding = optional_str(SCHEME, options, "body_claim_encoding")
    if encoding is not None:
        if body_claim is None:
            raise ValueError(f"{SCHEME}: option 'body_claim_encoding' needs 'body_claim'")
        if encoding not in BODY_CLAIM_ENCODINGS:
            raise ValueError(f"{SCHEME}: option 'body_claim_encoding' must be one of hex, base64")
    claims = _claims(options.get("claims"), body_claim)
    if body_claim is None and not claims:
        # The audience is the asker's choice: Google signs an ID token for any
        # audience to any account that asks (a service account's
        # generateIdToken), so `aud` alone would let anyone with a Google
        # account deliver here. Only a claim naming the sender closes that.
        raise ValueError(
            f"{SCHEME}: option 'claims' is required unless 'body_claim' binds the body: a "
            "token that covers no body must name its sender, not only us (Google signs a "
            "token for any audience to anyone who asks), e.g. claims = { email = "
            '"<the push service account>" }'
        )
    return _Config(
        header=header,
        bearer=header.lower() == "authorization",
        algorithms=algorithms,
        audiences=audiences,
        issuers=issuers,
        claims=claims,
        body_claim=body_claim,
        body_claim_encoding=encoding or "hex",
    )


def _algorithms(value: object) -> frozenset[str]:
    allowed = ", ".join(ALGORITHMS)
    if value is None:
        raise ValueError(f"{SCHEME}: option 'algorithms' is required (a list of: {allowed})")
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{SCHEME}: option 'algorithms' must be a non-empty list of: {allowed}")
    for name in value:
        if name.lower() == "none" or name.upper().startswith("HS"):
            raise ValueError(
                f"{SCHEME}: option 'algorithms' must never list {name!r}: the receiver holds "
                "public keys, and an unsigned token or an HMAC keyed by a published key is "
                "one anyone can make"
            )
        if name not in ALGORITHMS:
            raise ValueError(f"{SCHEME}: option 'algorithms' must list only: {allowed}")
    return frozenset(value)


def _strings(options: Mapping[str, object], key: str, *, required: bool) -> tuple[str, ...]:
    value = options.get(key)
    if value is None:
        if required:
            raise ValueError(
                f"{SCHEME}: option {key!r} is required (a string or a list) unless "
                "'body_claim' binds the body: a token that covers no body must name us"
            )
        return ()
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= MAX_LIST or not all(
        isinstance(item, str) and 0 < len(item) <= 512 for item in items
    ):
        raise ValueError(
            f"{SCHEME}: option {key!r} must be a non-empty string or a list of 1 to "
            f"{MAX_LIST} of them"
        )
    return tuple(str(item) for item in items)


def _claims(value: object, body_claim: str | None) -> tuple[tuple[str, str | bool | int], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not 1 <= len(value) <= MAX_CLAIMS:
        raise ValueError(
            f"{SCHEME}: option 'claims' must be a table of 1 to {MAX_CLAIMS} claim = value"
        )
    found: list[tuple[str, str | bool | int]] = []
    for name, expected in value.items():
        if not isinstance(name, str) or name in _RESERVED_CLAIMS or name == body_claim:
            raise ValueError(
                f"{SCHEME}: option 'claims' must not name exp, iat, nbf, aud, iss or the "
                "body claim (they have options of their own)"
            )
        if not isinstance(expected, str | bool | int):
            raise ValueError(
                f"{SCHEME}: option 'claims': {name!r} must be text, a boolean or an integer"
            )
        found.append((name, expected))
    return tuple(found)


def headers_read(options: Mapping[str, object]) -> tuple[str, ...]:
    """The one header the token travels in."""
    header = options.get("header")
    return (header if isinstance(header, str) else DEFAULT_HEADER,)


def signs_url(options: Mapping[str, object]) -> bool:
    """Whether an audience is `{url}`: the receiver must know its public URL."""
    audience = options.get("audience")
    items = audience if isinstance(audience, list) else [audience]
    return "{url}" in items


def signs_body(options: Mapping[str, object]) -> bool:
    """Whether the token binds the body (a `body_claim`); else the body is unsigned."""
    return options.get("body_claim") is not None


# ------------------------------------------------------------------------ keys


def check_secret(secret: str, options: Mapping[str, object] | None) -> None:
    """A secret must hold public keys only, and with options, one the algorithms use."""
    keys, problem = _keys(secret)
    if problem is not None:
        raise ValueError(f"{SCHEME}: {problem}")
    if options is None:
        return
    try:
        algorithms = _config(options).algorithms
    except ValueError:
        return  # check_options names the bad option
    if not any(_fits(alg, key) for key in keys for alg in algorithms):
        raise ValueError(
            f"{SCHEME}: no key in this secret is one of the listed algorithms "
            f"({', '.join(sorted(algorithms))})"
        )


@functools.lru_cache(maxsize=64)
def _keys(secret: str) -> tuple[tuple[_Key, ...], str | None]:
    """The public keys a secret holds, or why it holds none (never quoting it).

    A file may hold PEM public keys or X.509 certificates (one or several
    blocks), a JWKS (`{"keys": [...]}`, Google's v3 certs), one JWK, or a
    map of key id to PEM certificate (Google's v1 certs). A private key, in
    any of these forms, refuses the whole secret: it belongs to the sender.
    Parsing costs more than a verification, and a secret changes only on a
    rotation: cached, as `spec._plan` caches matchers.
    """
    text = secret.strip()
    if text.startswith("{"):
        return _json_keys(text)
    if "-----BEGIN" in text:
        return _pem_keys(text, None)
    return (), "a secret must be PEM public keys or certificates, a JWKS or a JWK"


def _pem_keys(text: str, kid: str | None) -> tuple[tuple[_Key, ...], str | None]:
    blocks = list(_PEM_BLOCK.finditer(text))
    if not blocks:
        return (), "PEM text without a complete BEGIN/END block"
    keys: list[_Key] = []
    for block in blocks:
        label = block.group(1)
        if "PRIVATE" in label:
            return (), _PRIVATE
        data = block.group(0).encode("ascii", "replace")
        try:
            if label == "CERTIFICATE":
                loaded: object = load_pem_x509_certificate(data).public_key()
            else:
                loaded = load_pem_public_key(data)
        except (ValueError, UnsupportedAlgorithm):
            return (), f"a PEM block ({label}) is no public key or certificate this scheme reads"
        key, problem = _usable(loaded)
        if key is None:
            return (), problem
        keys.append(_Key(kid, None, key))
    return tuple(keys), None


_PRIVATE = (
    "a private key does not belong on the receiver (it mints tokens); configure the "
    "sender's public key, certificate or JWKS"
)


def _json_keys(text: str) -> tuple[tuple[_Key, ...], str | None]:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return (), "a secret starting with '{' must be JSON (a JWKS, a JWK or kid: PEM)"
    if not isinstance(document, dict):
        return (), "a JSON secret must be an object"
    if "keys" in document:
        entries = document["keys"]
        if not isinstance(entries, list) or not entries:
            return (), "a JWKS's 'keys' must be a non-empty list"
    elif "kty" in document:
        entries = [document]
    elif document and all(isinstance(v, str) for v in document.values()):
        keys: list[_Key] = []
        for kid, pem in document.items():  # Google's v1 certs: kid -> PEM certificate
            found, problem = _pem_keys(pem, kid)
            if problem is not None:
                return (), problem
            keys.extend(found)
        return tuple(keys), None
    else:
        return (), "a JSON secret must be a JWKS, a JWK, or a map of key id to PEM"
    keys = []
    for entry in entries:
        if not isinstance(entry, dict):
            return (), "a JWKS entry must be an object"
        if entry.get("use", "sig") != "sig":
            continue  # an encryption key published alongside
        key, problem = _jwk(entry)
        if key is None:
            return (), problem
        keys.append(key)
    if not keys:
        return (), "a JWKS without a signing key"
    return tuple(keys), None


def _jwk(entry: dict[str, Any]) -> tuple[_Key | None, str | None]:
    if entry.get("kty") == "oct":
        return None, "a symmetric (oct) JWK is no public key: anyone holding it mints tokens"
    if any(part in entry for part in ("d", "p", "q", "dp", "dq", "qi")):
        return None, _PRIVATE
    kid = entry.get("kid")
    alg = entry.get("alg")
    if (kid is not None and not isinstance(kid, str)) or (
        alg is not None and alg not in ALGORITHMS
    ):
        return None, "a JWK's kid must be text and its alg one of " + ", ".join(ALGORITHMS)
    try:
        loaded: object = jwt.PyJWK(entry).key
    except (
        jwt.PyJWKError,
        jwt.InvalidKeyError,
        ValueError,
        TypeError,
        KeyError,
        UnsupportedAlgorithm,
    ):
        return None, "a JWK is no RSA, EC (P-256, P-384) or OKP (Ed25519, Ed448) public key"
    key, problem = _usable(loaded)
    if key is None:
        return None, problem
    return _Key(kid, alg, key), None


def _usable(loaded: object) -> tuple[PublicKey | None, str | None]:
    """Public keys of a type and strength some listed algorithm can use."""
    if isinstance(loaded, rsa.RSAPublicKey):
        if loaded.key_size < MIN_RSA_BITS:
            return None, f"an RSA key shorter than {MIN_RSA_BITS} bits is refused"
        return loaded, None
    if isinstance(loaded, ec.EllipticCurvePublicKey) and isinstance(
        loaded.curve, ec.SECP256R1 | ec.SECP384R1
    ):
        return loaded, None
    if isinstance(loaded, Ed25519PublicKey):
        if not is_safe_public_key(loaded.public_bytes_raw()):
            return None, "an Ed25519 key of small order is refused (anyone could sign for it)"
        return loaded, None
    if isinstance(loaded, Ed448PublicKey):
        return loaded, None
    return None, "a key that is not RSA, EC P-256/P-384, Ed25519 or Ed448 (or a private key)"


def _fits(alg: str, key: _Key) -> bool:
    """Whether `alg` may use `key`: a key serves only algorithms of its own type."""
    if key.alg is not None and key.alg != alg:
        return False
    public = key.key
    if alg[:2] in ("RS", "PS"):
        return isinstance(public, rsa.RSAPublicKey)
    if alg == "ES256":
        return isinstance(public, ec.EllipticCurvePublicKey) and isinstance(
            public.curve, ec.SECP256R1
        )
    if alg == "ES384":
        return isinstance(public, ec.EllipticCurvePublicKey) and isinstance(
            public.curve, ec.SECP384R1
        )
    return alg == "EdDSA" and isinstance(public, Ed25519PublicKey | Ed448PublicKey)


# ------------------------------------------------------------------ verifying


def verifier(
    options: Mapping[str, object], secrets: Sequence[str], tolerance_seconds: int
) -> RequestCheck:
    """The check of one delivery by its token (see the module docstring), with its
    options read and its keys gathered once: `dispatch.verifier` builds it per
    configuration. Raises `no_secret` here, before any request is read."""
    config = _config(options)
    keys = tuple(key for secret in secrets for key in _keys(secret)[0])
    if not keys:
        raise SignatureError("no_secret")

    def check(
        headers: HeaderView, body: bytes, now: float, method: str | None, url: str | None
    ) -> Verified:
        audiences = _audiences(config, url)
        token = _token(config, headers)
        alg, kid = _header(token)
        if alg not in config.algorithms:
            raise SignatureError("bad_signature")  # `none`, HS256 and the unlisted alike
        claims = _verified_claims(token, alg, kid, keys)
        if not _names_us(claims, config, audiences):
            raise SignatureError("bad_signature")
        if config.body_claim is not None and not _binds(
            claims.get(config.body_claim), body, config
        ):
            raise SignatureError("bad_signature")
        iat = _check_window(claims, now, tolerance_seconds, expires=config.body_claim is None)
        if config.body_claim is None:
            return Verified(SCHEME, None, False, iat)
        jti = claims.get("jti")
        event_id = jti if isinstance(jti, str) and 0 < len(jti) <= _MAX_JTI_CHARS else None
        return Verified(SCHEME, event_id, True, iat)

    return check


def _audiences(config: _Config, url: str | None) -> tuple[str, ...]:
    if "{url}" in config.audiences and not url:
        raise SignatureError("bad_options")  # the receiver was not told its own URL
    return tuple(url if item == "{url}" and url else item for item in config.audiences)


def _token(config: _Config, headers: HeaderView) -> str:
    value = headers.require(config.header)
    if config.bearer:
        found = _BEARER.fullmatch(value)
        if found is None:
            raise SignatureError("malformed_header")
        value = found.group(1)
    if _TOKEN.fullmatch(value) is None:
        raise SignatureError("malformed_header")
    return value


def _header(token: str) -> tuple[str, str | None]:
    """The token's `alg` and `kid` (unverified: they only pick a key)."""
    raw = decode_base64(_unurl(token.partition(".")[0]), pad=True)
    header = _object(raw)
    if header is None:
        raise SignatureError("malformed_header")
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or (kid is not None and not isinstance(kid, str)):
        raise SignatureError("malformed_header")
    if "crit" in header:
        raise SignatureError("bad_signature")  # extensions we cannot honour (RFC 7515 §4.1.11)
    return alg, kid


def _verified_claims(token: str, alg: str, kid: str | None, keys: Sequence[_Key]) -> dict[str, Any]:
    """The payload, once a configured key of the token's algorithm verified it.

    A key with a `kid` serves only tokens naming it (a token naming none is
    tried on every key); a key without one (a bare PEM) serves any token.
    """
    for key in keys:
        if key.kid is not None and kid is not None and key.kid != kid:
            continue
        if not _fits(alg, key):
            continue
        try:
            decoded: dict[str, Any] | None = _JWS.decode_complete(
                token, key=key.key, algorithms=[alg]
            )
        except jwt.InvalidSignatureError:
            continue
        except jwt.PyJWTError:
            decoded = None
        # raised here, not in the handler: `from None` only hides the PyJWT
        # error, which stays on the SignatureError as its __context__
        if decoded is None:
            raise SignatureError("malformed_header")
        claims = _object(decoded["payload"])
        if claims is None:
            raise SignatureError("malformed_header")
        return claims
    raise SignatureError("bad_signature")


def _names_us(claims: Mapping[str, Any], config: _Config, audiences: Sequence[str]) -> bool:
    aud = claims.get("aud")
    presented = aud if isinstance(aud, list) else [aud]
    # Every audience named must be ours (OpenID Connect Core 3.1.3.7: refuse a
    # token with "additional audiences not trusted"): each party a token
    # names receives it, so with `["us", "them"]` they hold a token that passes here.
    if audiences and not (
        presented and all(isinstance(item, str) and item in audiences for item in presented)
    ):
        return False
    if config.issuers and claims.get("iss") not in config.issuers:
        return False
    for name, expected in config.claims:
        value = claims.get(name)
        # type first: True == 1 in Python, and a claim of "true" is not true
        if type(value) is not type(expected) or value != expected:
            return False
    return True


def _binds(value: object, body: bytes, config: _Config) -> bool:
    """Whether the claim holds the body's SHA-256, compared in constant time."""
    if not isinstance(value, str) or not value.isascii():
        return False
    if config.body_claim_encoding == "hex":
        try:
            presented: bytes | None = bytes.fromhex(value)
        except ValueError:
            presented = None
    else:
        presented = decode_base64(_unurl(value), pad=True)
    digest = hashlib.sha256(body).digest()
    return presented is not None and hmac.compare_digest(presented, digest)


def _check_window(
    claims: Mapping[str, Any], now: float, tolerance_seconds: int, *, expires: bool
) -> int:
    """`exp` ahead, `nbf` passed, `iat` within the window; returns `iat`.

    `expires`: `exp` is required (a bearer token that never expires is not
    accepted); else it is checked when present."""
    exp, iat, nbf = _time(claims, "exp"), _time(claims, "iat"), _time(claims, "nbf")
    malformed = [name for name, value in (("exp", exp), ("nbf", nbf)) if value is None]
    if iat is None or any(name in claims for name in malformed) or (expires and exp is None):
        raise SignatureError("bad_signature")
    if (exp is not None and exp <= now - LEEWAY_SECONDS) or iat < now - tolerance_seconds:
        raise SignatureError("stale_timestamp")
    if iat > now + LEEWAY_SECONDS or (nbf is not None and nbf > now + LEEWAY_SECONDS):
        raise SignatureError("future_timestamp")
    return int(iat)


def _time(claims: Mapping[str, Any], name: str) -> float | None:
    """A time claim as a finite number, else None (malformed). JSON reads an
    integer of any length (up to 4300 digits), which no float holds: such a
    claim is malformed too, never an OverflowError out of `verify`."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _unurl(text: str) -> str:
    return text.replace("-", "+").replace("_", "/")


def _object(raw: bytes | None) -> dict[str, Any] | None:
    """A JSON object with no key given twice (which one counts must not be the
    sender's choice), else None."""
    if raw is None:
        return None
    try:
        value = json.loads(raw, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("duplicate key")
    return found
