"""The `jwt` scheme read by an attacker and by two independent verifiers.

- The option and secret parsers, fuzzed (hypothesis, seeded): whatever a
  provider file holds, loading ends in a ValueError naming the problem (a
  clear config error), never another exception (a traceback at start-up),
  and no message quotes key material.
- Tokens whose header and claims are arbitrary JSON, signed by the real key:
  `verify` answers with a Verified or a SignatureError, nothing else.
- The same tokens decided by PyJWT's `jwt.decode` and by google-auth's
  `google.auth.jwt.decode` (what `google.oauth2.id_token.verify_token` runs,
  offline): our accept/refuse agrees with theirs, except where a difference
  is intended, and each such difference is listed with its reason.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, padding
from google.auth import _helpers as google_helpers
from google.auth import crypt as google_crypt
from google.auth import exceptions as google_exceptions
from google.auth import jwt as google_jwt
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from test_jwt_scheme import (
    BODY,
    EC_KEY,
    ED_KEY,
    NOW,
    PUBSUB,
    RSA_KEY,
    RSA_OTHER,
    SERVICE_ACCOUNT,
    URL,
    b64url,
    certificate,
    google_claims,
    hand_made,
    private_pem,
    public_pem,
)

from shared.signatures import (
    SignatureError,
    check_options,
    check_secret,
    headers_read,
    signs_body,
    signs_url,
    verify,
)

FUZZ = settings(
    max_examples=700,
    deadline=None,
    derandomize=True,  # the same cases on every run: a failure is reproducible
    suppress_health_check=list(HealthCheck),
    database=None,
)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**450), max_value=10**450),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(
        [
            *("RS256", "PS256", "ES256", "EdDSA", "none", "HS256", "{url}", "hex", "base64"),
            *("Authorization", "exp", "iat", "request_body_sha256", "email", "sig", "enc"),
        ]
    ),
)
_NAMES = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["email", "aud", "iat", "exp", "kty", "keys", "n", "e", "x", "crv", "d"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(_NAMES, inner, max_size=5)
    ),
    max_leaves=6,
)
_OPTION_KEYS = st.sampled_from(
    [
        *("header", "algorithms", "audience", "issuer", "claims", "body_claim"),
        *("body_claim_encoding", "leeway"),
    ]
)


def _config_error_or_nothing(call: Callable[[], object]) -> str | None:
    """The ValueError's message, None when the call passed; any other exception fails."""
    try:
        call()
    except ValueError as error:
        return str(error)
    return None


# ------------------------------------------------------------------- options
# A seeded random generator for the bulk (hypothesis spends ~4 ms drawing one
# nested value; this, 20 µs): thousands of cases stay within a second.

_WORDS = (
    *("RS256", "PS256", "ES256", "ES512", "EdDSA", "none", "HS256", "hs256", "{url}"),
    *("hex", "base64", "Authorization", "Plaid-Verification", "bad header", ""),
    *("exp", "iat", "nbf", "aud", "iss", "jti", "request_body_sha256", "email", "sig"),
    *("kty", "keys", "RSA", "EC", "OKP", "oct", "P-256", "Ed25519", "AQAB", "é", "\x00"),
)
_OPTION_NAMES = (
    *("header", "algorithms", "audience", "issuer", "claims", "body_claim"),
    *("body_claim_encoding", "leeway"),
)


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A TOML- or JSON-shaped value, biased to the words the parsers look for."""
    kind = rng.randrange(11 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, NOW, 2**63, 10**400, -(10**400)])
    if kind == 3:
        return rng.choice([1.5, float("nan"), float("inf"), -0.0, 1e308])
    if kind in (4, 5, 6):
        return rng.choice(_WORDS)
    if kind == 7:
        return "".join(rng.choice("aZ09-_.{} =é\n") for _ in range(rng.randrange(70)))
    if kind in (8, 9):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    names = (*_WORDS, *_OPTION_NAMES)
    return {rng.choice(names): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


def test_any_options_load_or_fail_as_a_config_error() -> None:
    rng = random.Random(7001)
    base = [PUBSUB, {"header": "Plaid-Verification", "algorithms": ["ES256"]}, {}]
    for _ in range(4000):
        options = dict(rng.choice(base))
        for _ in range(rng.randrange(1, 4)):
            options[rng.choice(_OPTION_NAMES)] = _value(rng)
        _config_error_or_nothing(lambda options=options: check_options("jwt", options))
        _config_error_or_nothing(
            lambda options=options: check_secret("jwt", public_pem(RSA_KEY), options)
        )
        # what the receiver asks of raw options before they are checked
        signs_url("jwt", options)
        signs_body("jwt", options)
        headers_read("jwt", options)


# ------------------------------------------------------------------- secrets

_JWKS = [
    json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(RSA_KEY.public_key())),
    json.loads(jwt.algorithms.ECAlgorithm.to_jwk(EC_KEY.public_key())),
    json.loads(
        jwt.algorithms.ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP384R1()).public_key())
    ),
    json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(ED_KEY.public_key())),
    json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(ed448.Ed448PrivateKey.generate().public_key())),
]
_JWK_FIELDS = st.sampled_from(
    ["kty", "crv", "x", "y", "n", "e", "alg", "use", "kid", "d", "key_ops", "x5c"]
)
_JWK_VALUES = st.one_of(
    _SCALARS,
    st.text(alphabet="AQgw_-=+/", max_size=400),  # base64url-ish: reaches the key parsers
    st.sampled_from(["RSA", "EC", "OKP", "oct", "P-256", "P-384", "P-521", "secp256k1"]),
    st.sampled_from(["Ed25519", "Ed448", "X25519", "ES512", "RS256", "ES384"]),
    st.lists(st.text(max_size=3), max_size=2),
)
_ALGORITHM_SETS = (["RS256", "PS256"], ["ES256", "ES384"], ["EdDSA"])


@seed(7002)
@FUZZ
@given(
    st.sampled_from(_JWKS),
    st.dictionaries(_JWK_FIELDS, _JWK_VALUES, max_size=3),
    st.lists(_JWK_FIELDS, max_size=2),
)
def test_any_jwk_loads_or_fails_as_a_config_error_without_quoting_it(
    base: dict[str, Any], changes: dict[str, Any], dropped: list[str]
) -> None:
    entry = {**base, **changes}
    for name in dropped:
        entry.pop(name, None)
    material = [
        value
        for name, value in entry.items()
        if name in ("n", "x", "y", "d") and isinstance(value, str) and len(value) >= 8
    ]
    for secret in (json.dumps(entry), json.dumps({"keys": [entry]})):
        for algorithms in _ALGORITHM_SETS:
            options = {**PUBSUB, "algorithms": algorithms}
            message = _config_error_or_nothing(
                lambda secret=secret, options=options: check_secret("jwt", secret, options)
            )
            assert message is None or not any(part in message for part in material)


_PEMS = [public_pem(RSA_KEY), public_pem(EC_KEY), public_pem(ED_KEY), certificate(RSA_KEY)]


@seed(7003)
@FUZZ
@given(
    st.sampled_from([*_PEMS, private_pem(EC_KEY)]),
    st.integers(0, 2000),
    st.text(max_size=3),
    st.integers(0, 5),
)
def test_any_pem_text_loads_or_fails_as_a_config_error_without_quoting_it(
    pem: str, at: int, inserted: str, cut: int
) -> None:
    at %= len(pem)
    secret = pem[:at] + inserted + pem[at + cut :]
    message = _config_error_or_nothing(lambda: check_secret("jwt", secret, PUBSUB))
    body_lines = [line for line in secret.splitlines() if len(line) >= 16 and "-----" not in line]
    assert message is None or not any(line in message for line in body_lines)


def test_any_json_secret_loads_or_fails_as_a_config_error() -> None:
    rng = random.Random(7004)
    for _ in range(3000):
        document = _value(rng)
        if rng.random() < 0.5:  # a real key with some fields replaced
            document = {**rng.choice(_JWKS), **{rng.choice(_WORDS): _value(rng)}}
        secrets = [json.dumps(document)]
        if isinstance(document, dict):
            keys = json.dumps({"keys": [document]})
            secrets += [keys, json.dumps({"k1": json.dumps(document)})]
        for secret in secrets:
            _config_error_or_nothing(lambda secret=secret: check_secret("jwt", secret, PUBSUB))


# -------------------------------------------------------------------- tokens


def _signed(header: bytes, payload: bytes) -> str:
    signing_input = f"{b64url(header)}.{b64url(payload)}"
    signature = RSA_KEY.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def test_any_signed_header_and_claims_verify_or_refuse() -> None:
    """A real signature over anything: only a SignatureError or a Verified.
    A third are wild, a third start from a valid header and claims (so the
    fuzz reaches the claim checks), a third change only a time claim of a
    valid token (so it reaches the window, which runs last)."""
    rng = random.Random(7005)
    header_names = ("alg", "kid", "crit", "b64", "typ", "jku", "jwk", "x5u", "zip")
    claim_names = ("iss", "aud", "email", "email_verified", "iat", "exp", "nbf", "jti", "sub")
    options = (PUBSUB, {**PUBSUB, "body_claim": "request_body_sha256"})
    for case in range(900):
        typical = case % 3 != 0
        header: dict[str, Any] = {"alg": "RS256", "kid": "k1"} if typical else {}
        claims: dict[str, Any] = google_claims() if typical else {}
        if case % 3 == 2:
            claims[rng.choice(("iat", "exp", "nbf"))] = _value(rng)
        else:
            for _ in range(rng.randrange(4)):
                header[rng.choice(header_names)] = _value(rng)
            for _ in range(rng.randrange(4)):
                claims[rng.choice(claim_names)] = _value(rng)
        token = _signed(json.dumps(header).encode(), json.dumps(claims).encode())
        for option in options:
            try:
                verified = verify(
                    "jwt", option, {"Authorization": f"Bearer {token}"}, BODY,
                    [public_pem(RSA_KEY)], NOW, 3600, url=URL,
                )  # fmt: skip
            except SignatureError as error:
                assert str(error) == error.reason
                continue
            assert verified.scheme == "jwt" and isinstance(verified.timestamp, int)


@seed(7006)
@settings(FUZZ, max_examples=700)
@given(st.text(alphabet='ABCabcz019-_.= \t"{}:+/', max_size=80))
def test_any_authorization_value_verifies_or_refuses(value: str) -> None:
    for header in (f"Bearer {value}", value):
        with pytest.raises(SignatureError):
            verify(
                "jwt", PUBSUB, {"Authorization": header}, BODY, [public_pem(RSA_KEY)],
                NOW, 3600, url=URL,
            )  # fmt: skip


# ------------------------------------------------ against independent verifiers

KID = "google-kid-1"
LEEWAY = 60
TOLERANCE = 3600
ISSUERS = ["https://accounts.google.com", "accounts.google.com"]
_CERTS = {KID: certificate(RSA_KEY)}  # Google's v1 certs: kid -> PEM certificate
_PUBLIC = {KID: RSA_KEY.public_key()}  # PyJWT reads no certificate: its key


def _google_token(claims: dict[str, Any], *, key: Any = RSA_KEY, kid: str = KID) -> str:
    """Minted by google-auth itself, as Pub/Sub's push service does."""
    signer = google_crypt.RSASigner.from_string(private_pem(key), kid)
    token: bytes = google_jwt.encode(signer, claims)
    return token.decode()


@pytest.fixture
def frozen_libraries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Both libraries read the wall clock; set it to NOW, as `verify` is given."""
    at = datetime.datetime.fromtimestamp(NOW, tz=datetime.UTC)

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Frozen:
            return cls.fromtimestamp(NOW, tz=tz)

    monkeypatch.setattr(jwt.api_jwt, "datetime", Frozen)
    monkeypatch.setattr(google_helpers, "utcnow", lambda: at.replace(tzinfo=None))
    yield


def _ours(token: str) -> bool:
    try:
        verify(
            "jwt", PUBSUB, {"Authorization": f"Bearer {token}"}, BODY, [json.dumps(_CERTS)],
            NOW, TOLERANCE, url=URL,
        )  # fmt: skip
    except SignatureError:
        return False
    return True


def _expected_claims(claims: dict[str, Any]) -> bool:
    """The `claims` option (email, email_verified), which neither library knows:
    applied to both of theirs, as an application calling them must."""
    return claims.get("email") == SERVICE_ACCOUNT and claims.get("email_verified") is True


def _pyjwt(token: str) -> bool:
    try:
        kid = jwt.get_unverified_header(token).get("kid")
        key = _PUBLIC[kid]  # as PyJWKClient picks the key: by kid, else refused
        claims = jwt.decode(
            token,
            key,
            algorithms=["RS256"],
            audience=URL,
            issuer=ISSUERS,
            leeway=LEEWAY,
            options={"require": ["exp", "iat"]},
        )
    except (jwt.PyJWTError, KeyError):
        return False
    return _expected_claims(claims)


def _google(token: str) -> bool:
    """`id_token.verify_token`'s checks, offline: `jwt.decode` with the certs and
    the audience, then the issuer as `verify_oauth2_token` checks it."""
    try:
        claims = google_jwt.decode(token, certs=_CERTS, audience=URL, clock_skew_in_seconds=LEEWAY)
    except (google_exceptions.GoogleAuthError, ValueError):
        return False
    return claims.get("iss") in ISSUERS and _expected_claims(claims)


# (name, claims changes, token maker or None, ours, PyJWT, google-auth)
_Maker = Callable[[dict[str, Any]], str] | None
CASES: list[tuple[str, dict[str, Any], _Maker, bool, bool, bool]] = [
    ("valid", {}, None, True, True, True),
    ("exp in 1 s", {"exp": NOW + 1}, None, True, True, True),
    ("exp 59 s ago (leeway)", {"exp": NOW - LEEWAY + 1}, None, True, True, True),
    # RFC 7519: not accepted "on or after" exp (+ leeway); google-auth's `<` takes it
    ("exp exactly leeway ago", {"exp": NOW - LEEWAY}, None, False, False, True),
    ("exp 61 s ago", {"exp": NOW - LEEWAY - 1}, None, False, False, False),
    ("exp missing", {"exp": None}, None, False, False, False),
    ("iat 60 s ahead", {"iat": NOW + LEEWAY}, None, True, True, True),
    ("iat 61 s ahead", {"iat": NOW + LEEWAY + 1}, None, False, False, False),
    ("iat missing", {"iat": None}, None, False, False, False),
    # iat within tolerance_seconds, the replay window: neither library bounds its age
    ("iat at the tolerance", {"iat": NOW - TOLERANCE}, None, True, True, True),
    ("iat past the tolerance", {"iat": NOW - TOLERANCE - 1}, None, False, True, True),
    # nbf: google-auth ignores it (Google's tokens carry none); RFC 7519 says check
    ("nbf 60 s ahead", {"nbf": NOW + LEEWAY}, None, True, True, True),
    ("nbf 61 s ahead", {"nbf": NOW + LEEWAY + 1}, None, False, False, True),
    ("aud other", {"aud": "https://other.example/"}, None, False, False, False),
    ("aud missing", {"aud": None}, None, False, False, False),
    # OIDC Core 3.1.3.7 refuses audiences not trusted; PyJWT (not strict_aud)
    # takes a list holding ours, google-auth compares the whole claim with ours
    ("aud list holding ours", {"aud": [URL, "https://other.example/"]}, None, False, True, False),
    ("aud list of ours only", {"aud": [URL]}, None, True, True, False),
    ("aud list without ours", {"aud": ["https://other.example/"]}, None, False, False, False),
    ("iss other", {"iss": "https://evil.example"}, None, False, False, False),
    ("iss short form", {"iss": "accounts.google.com"}, None, True, True, True),
    ("email other", {"email": "attacker@evil.example"}, None, False, False, False),
    ("email_verified text", {"email_verified": "true"}, None, False, False, False),
    ("signed by another key", {}, lambda c: _google_token(c, key=RSA_OTHER), False, False, False),
    ("unknown kid", {}, lambda c: _google_token(c, kid="other"), False, False, False),
    (
        "alg none",
        {},
        lambda c: hand_made({"alg": "none", "kid": KID}, c, None),
        False,
        False,
        False,
    ),
    (
        "HS256 keyed by the certificate",
        {},
        lambda c: hand_made({"alg": "HS256", "kid": KID}, c, _CERTS[KID].encode()),
        False,
        False,
        False,
    ),
]


@pytest.mark.usefixtures("frozen_libraries")
@pytest.mark.parametrize(
    ("changes", "make", "ours", "pyjwt", "google"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_we_decide_as_pyjwt_and_google_auth_but_for_listed_differences(
    changes: dict[str, Any], make: _Maker, ours: bool, pyjwt: bool, google: bool
) -> None:
    claims = google_claims(**changes)
    token = make(claims) if make is not None else _google_token(claims)
    assert (_ours(token), _pyjwt(token), _google(token)) == (ours, pyjwt, google)


# Plaid: ES256, the body's SHA-256 in `request_body_sha256`, `iat` within 5 minutes.
# The oracle is PyJWT plus the two checks Plaid's guide adds (digest, iat's age).
PLAID_BODY = b'{"webhook_type":"TRANSFER","webhook_code":"TRANSFER_EVENTS_UPDATE"}'
PLAID_OPTIONS = {
    "header": "Plaid-Verification",
    "algorithms": ["ES256"],
    "body_claim": "request_body_sha256",
}
PLAID_TOLERANCE = 300


def _plaid_token(changes: dict[str, Any], key: Any = EC_KEY, alg: str = "ES256") -> str:
    claims = {"iat": NOW - 5, "request_body_sha256": hashlib.sha256(PLAID_BODY).hexdigest()}
    claims.update(changes)
    claims = {name: value for name, value in claims.items() if value is not None}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": "plaid-1"})


def _plaid_ours(token: str) -> bool:
    try:
        verify(
            "jwt", PLAID_OPTIONS, {"Plaid-Verification": token}, PLAID_BODY,
            [public_pem(EC_KEY)], NOW, PLAID_TOLERANCE,
        )  # fmt: skip
    except SignatureError:
        return False
    return True


def _plaid_guide(token: str) -> bool:
    try:
        claims = jwt.decode(
            token,
            EC_KEY.public_key(),
            algorithms=["ES256"],
            leeway=LEEWAY,
            options={"require": ["iat"]},
        )
    except jwt.PyJWTError:
        return False
    digest = hashlib.sha256(PLAID_BODY).hexdigest()
    return claims.get("request_body_sha256") == digest and (claims["iat"] >= NOW - PLAID_TOLERANCE)


# (name, claims changes, minting, ours, the guide with PyJWT)
PLAID_CASES: list[tuple[str, dict[str, Any], dict[str, Any], bool, bool]] = [
    ("valid", {}, {}, True, True),
    ("iat at the tolerance", {"iat": NOW - PLAID_TOLERANCE}, {}, True, True),
    ("iat past the tolerance", {"iat": NOW - PLAID_TOLERANCE - 1}, {}, False, False),
    ("iat 61 s ahead", {"iat": NOW + LEEWAY + 1}, {}, False, False),
    ("iat missing", {"iat": None}, {}, False, False),
    ("exp 61 s ago", {"exp": NOW - LEEWAY - 1}, {}, False, False),
    ("nbf 61 s ahead", {"nbf": NOW + LEEWAY + 1}, {}, False, False),
    ("another body's digest", {"request_body_sha256": "00" * 32}, {}, False, False),
    ("digest missing", {"request_body_sha256": None}, {}, False, False),
    # PyJWT refuses an `aud` no audience was asked for; with `body_claim` and no
    # `audience` we do not read it (Plaid's tokens carry none)
    ("an aud it was not asked for", {"aud": "anyone"}, {}, True, False),
    ("another key", {}, {"key": ec.generate_private_key(ec.SECP256R1())}, False, False),
    ("ES384", {}, {"key": ec.generate_private_key(ec.SECP384R1()), "alg": "ES384"}, False, False),
]


@pytest.mark.usefixtures("frozen_libraries")
@pytest.mark.parametrize(
    ("changes", "minting", "ours", "guide"),
    [case[1:] for case in PLAID_CASES],
    ids=[case[0] for case in PLAID_CASES],
)
def test_plaid_tokens_are_decided_as_plaids_guide_with_pyjwt(
    changes: dict[str, Any], minting: dict[str, Any], ours: bool, guide: bool
) -> None:
    token = _plaid_token(changes, **minting)
    assert (_plaid_ours(token), _plaid_guide(token)) == (ours, guide)
