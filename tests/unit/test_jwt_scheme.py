"""The `jwt` scheme as a pure function of (headers, body, secrets, now): tokens
minted by PyJWT (and by hand where PyJWT refuses to mint the attack), verified
by shared/signatures/jwt_scheme.py through the public dispatch."""

from __future__ import annotations

import argparse
import base64
import datetime
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.x509.oid import NameOID

from shared.cli import providers as cli_providers
from shared.signatures import (
    SignatureError,
    Verified,
    check_options,
    check_secret,
    headers_read,
    signs_body,
    signs_timestamp,
    signs_url,
    verifier,
    verify,
)
from shared.signatures.headers import HeaderView

NOW = 1_800_000_000
URL = "https://hooks.example.test/webhooks/pubsub"
SERVICE_ACCOUNT = "push@project.iam.gserviceaccount.com"
BODY = b'{"message":{"data":"e30=","messageId":"1"},"subscription":"projects/p/subscriptions/s"}'

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()


def public_pem(key: Any) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def private_pem(key: Any) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def jwk(key: Any, kid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**data, "kid": kid, "use": "sig", "alg": "RS256"}


def certificate(key: Any) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securetoken.example")])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=1))  # long expired: only a container
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


PUBSUB = {
    "algorithms": ["RS256"],
    "audience": "{url}",
    "issuer": ["https://accounts.google.com", "accounts.google.com"],
    "claims": {"email": SERVICE_ACCOUNT, "email_verified": True},
}
# Plaid's token carries neither `aud` nor `exp`: `iat` and the body's digest
PLAID = {
    "header": "Plaid-Verification",
    "algorithms": ["ES256"],
    "body_claim": "request_body_sha256",
}


def google_claims(**changes: Any) -> dict[str, Any]:
    claims = {
        "iss": "https://accounts.google.com",
        "aud": URL,
        "azp": "1234567890",
        "email": SERVICE_ACCOUNT,
        "email_verified": True,
        "sub": "1234567890",
        "iat": NOW - 10,
        "exp": NOW + 3590,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def rs256(claims: dict[str, Any], key: Any = RSA_KEY, kid: str | None = "k1") -> str:
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid} if kid else None)


def pubsub(token: str, body: bytes = BODY, **kwargs: Any) -> Verified:
    defaults: dict[str, Any] = {
        "options": PUBSUB,
        "secrets": [public_pem(RSA_KEY)],
        "now": NOW,
        "tolerance": 3600,
    }
    defaults.update(kwargs)
    return verify(
        "jwt",
        defaults["options"],
        {"Authorization": f"Bearer {token}"},
        body,
        defaults["secrets"],
        defaults["now"],
        defaults["tolerance"],
        url=URL,
    )


def plaid_token(body: bytes, **changes: Any) -> str:
    claims: dict[str, Any] = {"iat": NOW - 5}
    claims["request_body_sha256"] = hashlib.sha256(body).hexdigest()
    claims.update(changes)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, EC_KEY, algorithm="ES256", headers={"kid": "plaid-1"})


def plaid(token: str, body: bytes, options: dict[str, Any] = PLAID) -> Verified:
    return verify(
        "jwt", options, {"Plaid-Verification": token}, body, [public_pem(EC_KEY)], NOW, 300
    )


def reason(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SignatureError) as info:
        call(*args, **kwargs)
    # the reason word only: no token, no claim, no chained exception quoting one
    assert str(info.value) == info.value.reason
    assert info.value.__cause__ is None and info.value.__context__ is None
    return info.value.reason


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, Any], claims: dict[str, Any], key: bytes | None) -> str:
    """A token PyJWT refuses to mint: `none`, or HS256 keyed by a public key's PEM."""
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    if key is None:
        return signing_input + "."
    mac = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


# ----------------------------------------------------------------- accepted


def test_a_pubsub_rs256_token_verifies_and_leaves_the_body_unsigned() -> None:
    verified = pubsub(rs256(google_claims()))
    assert verified == Verified("jwt", None, False, NOW - 10)
    # the same token on another message verifies too: it does not cover the body
    assert pubsub(rs256(google_claims()), body=b'{"other":1}').id_signed is False


def test_a_plaid_es256_token_binds_the_body() -> None:
    body = b'{"webhook_type":"TRANSFER","webhook_code":"TRANSFER_EVENTS_UPDATE"}'
    assert plaid(plaid_token(body), body) == Verified("jwt", None, True, NOW - 5)
    # its jti, signed with the body's digest, is the dedupe key
    assert plaid(plaid_token(body, jti="jti-1"), body).event_id == "jti-1"


def test_an_eddsa_token_in_a_named_header_verifies() -> None:
    options = {
        "header": "X-Token",
        "algorithms": ["EdDSA"],
        "audience": "me",
        "claims": {"sub": "it"},
    }
    claims = {"aud": "me", "sub": "it", "iat": NOW, "exp": NOW + 60}
    token = jwt.encode(claims, ED_KEY, algorithm="EdDSA")
    verified = verify("jwt", options, {"X-Token": token}, b"{}", [public_pem(ED_KEY)], NOW)
    assert (verified.id_signed, verified.timestamp) == (False, NOW)


def test_a_body_bound_token_checks_audience_and_expiry_when_given() -> None:
    body = b'{"webhook_code":"DEFAULT_UPDATE"}'
    options = {**PLAID, "audience": "plaid-webhooks"}
    assert plaid(plaid_token(body, aud="plaid-webhooks"), body, options).id_signed
    assert reason(plaid, plaid_token(body, aud="other"), body, options) == "bad_signature"
    assert reason(plaid, plaid_token(body), body, options) == "bad_signature"
    assert reason(plaid, plaid_token(body, exp=NOW - 61), body) == "stale_timestamp"
    assert reason(plaid, plaid_token(body, iat=NOW - 301), body) == "stale_timestamp"
    assert reason(plaid, plaid_token(body, iat=None), body) == "bad_signature"
    assert reason(plaid, plaid_token(body, exp="soon"), body) == "bad_signature"


def test_a_body_digest_in_base64_verifies() -> None:
    body = b'{"a":1}'
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    options = {**PLAID, "body_claim_encoding": "base64"}
    assert plaid(plaid_token(body, request_body_sha256=digest), body, options).id_signed


def test_an_x509_certificate_and_googles_kid_to_pem_map_are_keys() -> None:
    token = rs256(google_claims(), kid="google-kid")
    assert pubsub(token, secrets=[certificate(RSA_KEY)]).scheme == "jwt"
    v1_certs = json.dumps({"old": certificate(RSA_OTHER), "google-kid": certificate(RSA_KEY)})
    assert pubsub(token, secrets=[v1_certs]).scheme == "jwt"
    # by kid: the map's other key is not the one named
    assert reason(pubsub, rs256(google_claims(), kid="old"), secrets=[v1_certs]) == "bad_signature"


def test_a_jwks_with_two_keys_picks_each_by_kid() -> None:
    jwks = json.dumps({"keys": [jwk(RSA_KEY, "a"), jwk(RSA_OTHER, "b")]})
    assert pubsub(rs256(google_claims(), RSA_KEY, "a"), secrets=[jwks]).scheme == "jwt"
    assert pubsub(rs256(google_claims(), RSA_OTHER, "b"), secrets=[jwks]).scheme == "jwt"
    # a kid naming the other key of the set
    assert reason(pubsub, rs256(google_claims(), RSA_OTHER, "a"), secrets=[jwks]) == "bad_signature"


def test_rotation_across_secrets() -> None:
    secrets = [public_pem(RSA_OTHER), public_pem(RSA_KEY)]
    assert pubsub(rs256(google_claims()), secrets=secrets).scheme == "jwt"


def test_an_expired_token_within_the_leeway_still_verifies() -> None:
    assert pubsub(rs256(google_claims(exp=NOW - 30))).timestamp == NOW - 10


# ------------------------------------------------------------------ refused


@pytest.mark.parametrize(
    "changes",
    [
        {"aud": "https://elsewhere.example.test/hook"},
        {"aud": None},
        {"iss": "https://evil.example.test"},
        {"email": "attacker@project.iam.gserviceaccount.com"},
        {"email_verified": "true"},  # text is not the boolean
        {"email_verified": None},
    ],
)
def test_a_token_for_someone_else_is_refused(changes: dict[str, Any]) -> None:
    assert reason(pubsub, rs256(google_claims(**changes))) == "bad_signature"


def test_a_bearer_token_must_name_its_sender_not_only_us() -> None:
    """Anyone with a Google account gets a Google-signed ID token for any
    audience (a service account's generateIdToken): with only `aud` and `iss`
    checked, such a token for our URL passed. A token covering no body now
    needs `claims` naming the sender, and a stranger's token fails them."""
    loose = {k: v for k, v in PUBSUB.items() if k != "claims"}
    with pytest.raises(ValueError, match="must name its sender"):
        check_options("jwt", loose)
    stranger = rs256(google_claims(email="attacker@evil.iam.gserviceaccount.com", sub="666"))
    assert reason(pubsub, stranger) == "bad_signature"
    # a body-bound token (Plaid) is a signature over the body: no claims needed
    check_options("jwt", PLAID)


def test_an_audience_list_verifies_only_when_every_audience_is_ours() -> None:
    """OpenID Connect Core 3.1.3.7: a token naming audiences we do not trust is
    refused. Each audience receives the token, so with `["them", us]` they held
    one that passed here (and, the body being unsigned, could carry any body)."""
    assert reason(pubsub, rs256(google_claims(aud=["https://them.example/", URL]))) == (
        "bad_signature"
    )
    assert reason(pubsub, rs256(google_claims(aud=[]))) == "bad_signature"
    assert pubsub(rs256(google_claims(aud=[URL]))).scheme == "jwt"
    both = {**PUBSUB, "audience": ["{url}", "https://alias.example/"]}
    token = rs256(google_claims(aud=["https://alias.example/", URL]))
    assert pubsub(token, options=both).scheme == "jwt"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"exp": NOW - 61}, "stale_timestamp"),
        ({"iat": NOW - 3601, "exp": NOW + 10}, "stale_timestamp"),
        ({"iat": NOW + 61, "exp": NOW + 3600}, "future_timestamp"),
        ({"nbf": NOW + 120}, "future_timestamp"),
        ({"exp": None}, "bad_signature"),
        ({"iat": None}, "bad_signature"),
        ({"iat": True}, "bad_signature"),
    ],
)
def test_the_window(changes: dict[str, Any], expected: str) -> None:
    assert reason(pubsub, rs256(google_claims(**changes))) == expected


@pytest.mark.parametrize("name", ["iat", "exp", "nbf"])
@pytest.mark.parametrize(
    "value",
    [10**400, -(10**400), True, "1800000000", [NOW]],
    ids=["big", "-big", "bool", "text", "list"],
)
def test_a_time_claim_no_double_holds_is_malformed_not_a_crash(name: str, value: Any) -> None:
    """JSON reads an integer of 400 digits exactly, and float() of it raised
    OverflowError out of `verify` (a 500, retried for ever) instead of a 401."""
    assert reason(pubsub, rs256(google_claims(**{name: value}))) == "bad_signature"


def test_iat_is_held_to_the_providers_tolerance() -> None:
    token = rs256(google_claims(iat=NOW - 400))
    assert pubsub(token, tolerance=3600).timestamp == NOW - 400
    assert reason(pubsub, token, tolerance=300) == "stale_timestamp"


def test_a_forged_token_is_refused_before_its_window() -> None:
    token = rs256(google_claims(exp=NOW - 10_000), key=RSA_OTHER)
    assert reason(pubsub, token) == "bad_signature"


def test_alg_none_is_refused() -> None:
    token = hand_made({"alg": "none", "typ": "JWT"}, google_claims(), None)
    assert reason(pubsub, token) == "bad_signature"


def test_hs256_keyed_by_the_public_pem_is_refused() -> None:
    """The algorithm-confusion attack: the published key used as an HMAC secret."""
    pem = public_pem(RSA_KEY).encode()
    for alg in ("HS256", "RS256"):
        token = hand_made({"alg": alg, "kid": "k1"}, google_claims(), pem)
        assert reason(pubsub, token) == "bad_signature"
    with pytest.raises(ValueError, match="never list 'HS256'"):
        check_options("jwt", {**PUBSUB, "algorithms": ["RS256", "HS256"]})


def test_an_algorithm_outside_the_list_is_refused_even_with_a_matching_key() -> None:
    token = jwt.encode(google_claims(), EC_KEY, algorithm="ES256")
    assert reason(pubsub, token, secrets=[public_pem(RSA_KEY), public_pem(EC_KEY)]) == (
        "bad_signature"
    )
    # listed, but no key of its type: an RSA key never verifies ES256
    options = {**PUBSUB, "algorithms": ["RS256", "ES256"]}
    assert reason(pubsub, token, options=options) == "bad_signature"


def signed_text(header: str, payload: str, key: Any = RSA_KEY) -> str:
    """RS256 over exactly these texts (PyJWT would not write duplicate keys)."""
    signing_input = f"{b64url(header.encode())}.{b64url(payload.encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


CLAIMS_TEXT = json.dumps(google_claims())
HEADER_TEXT = '{"alg":"RS256","kid":"k1"}'


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        # extensions we cannot honour, even when the signature is good
        (signed_text(HEADER_TEXT[:-1] + ',"crit":["exp"],"exp":1}', CLAIMS_TEXT), "bad_signature"),
        # RFC 7797: an unencoded payload, named critical or not
        (signed_text(HEADER_TEXT[:-1] + ',"b64":false,"crit":["b64"]}', "{}"), "bad_signature"),
        (signed_text(HEADER_TEXT[:-1] + ',"b64":false}', CLAIMS_TEXT), "malformed_header"),
        # a key given twice: Python's json keeps the last, another reader the first
        (signed_text('{"alg":"RS256","kid":"zz","kid":"k1"}', CLAIMS_TEXT), "malformed_header"),
        (signed_text('{"alg":"HS256","alg":"RS256","kid":"k1"}', CLAIMS_TEXT), "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT[:-1] + ',"aud":"x"}'), "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT[:-1] + ',"email_verified":0}'), "malformed_header"),
        # the JWS JSON serialization, and padded or spaced compact ones
        (json.dumps({"payload": "e30", "protected": "e30", "signature": "AA"}), "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT) + "==", "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT).replace(".", ". ", 1), "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT) + ".AAAA", "malformed_header"),
        # the payload no object, or signed by another key
        (signed_text(HEADER_TEXT, "[1]"), "malformed_header"),
        (signed_text(HEADER_TEXT, CLAIMS_TEXT, RSA_OTHER), "bad_signature"),
    ],
    ids=[
        "crit", "b64-false-crit", "b64-false", "kid-twice", "alg-twice", "aud-twice",
        "email_verified-twice", "json-serialization", "padded", "spaced", "four-parts",
        "payload-list", "other-key",
    ],
)  # fmt: skip
def test_jose_features_and_ambiguous_tokens_are_refused(token: str, expected: str) -> None:
    assert pubsub(signed_text(HEADER_TEXT, CLAIMS_TEXT)).scheme == "jwt"  # unaltered: verifies
    assert reason(pubsub, token) == expected


def test_a_jwk_alg_binds_its_key_and_eddsa_takes_ed448() -> None:
    """An RSA key serves RS* and PS* alike, unless its JWK names one; Ed448 is
    EdDSA as much as Ed25519 is (RFC 8037)."""
    options = {**PUBSUB, "algorithms": ["RS256", "PS256"]}
    ps256 = jwt.encode(google_claims(), RSA_KEY, algorithm="PS256", headers={"kid": "k1"})
    assert pubsub(ps256, options=options).scheme == "jwt"  # a bare PEM: either
    jwks = json.dumps({"keys": [jwk(RSA_KEY, "k1")]})  # "alg": "RS256"
    assert reason(pubsub, ps256, options=options, secrets=[jwks]) == "bad_signature"
    assert pubsub(rs256(google_claims()), options=options, secrets=[jwks]).scheme == "jwt"
    ed448_key = ed448.Ed448PrivateKey.generate()
    token = jwt.encode(google_claims(), ed448_key, algorithm="EdDSA")
    eddsa = {**PUBSUB, "algorithms": ["EdDSA"]}
    assert pubsub(token, options=eddsa, secrets=[public_pem(ed448_key)]).scheme == "jwt"


def test_an_unknown_kid_is_refused() -> None:
    jwks = json.dumps({"keys": [jwk(RSA_KEY, "a")]})
    assert reason(pubsub, rs256(google_claims(), kid="zzz"), secrets=[jwks]) == "bad_signature"


def test_a_body_claim_mismatch_and_a_tampered_body_are_refused() -> None:
    body = b'{"webhook_code":"TRANSFER_EVENTS_UPDATE"}'
    other = hashlib.sha256(b"another body").hexdigest()
    assert reason(plaid, plaid_token(body, request_body_sha256=other), body) == "bad_signature"
    assert reason(plaid, plaid_token(body), body + b" ") == "bad_signature"
    assert reason(plaid, plaid_token(body, request_body_sha256=None), body) == "bad_signature"
    assert reason(plaid, plaid_token(body, request_body_sha256="zz"), body) == "bad_signature"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, "missing_header"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed_header"),
        ({"Authorization": "Bearer not-a-token"}, "malformed_header"),
        ({"Authorization": "Bearer a.b.c"}, "malformed_header"),
        ({"Authorization": "Bearer " + b64url(b'{"alg":"RS256"}') + ".e30.AAAA"}, "bad_signature"),
    ],
)
def test_request_shaped_failures(headers: dict[str, str], expected: str) -> None:
    def call() -> None:
        verify("jwt", PUBSUB, headers, BODY, [public_pem(RSA_KEY)], NOW, 3600, url=URL)

    assert reason(call) == expected


def test_audience_url_without_the_public_url_is_bad_options() -> None:
    token = rs256(google_claims())
    headers = {"Authorization": f"Bearer {token}"}
    with pytest.raises(SignatureError) as info:
        verify("jwt", PUBSUB, headers, BODY, [public_pem(RSA_KEY)], NOW, 3600)
    assert info.value.reason == "bad_options"


# ------------------------------------------------------------ configuration


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"audience": "x"}, "'algorithms' is required"),
        ({"algorithms": ["RS256"]}, "'audience' is required"),
        ({"algorithms": ["RS256"], "audience": []}, "'audience' must be"),
        ({"algorithms": ["none"], "audience": "x"}, "never list 'none'"),
        ({"algorithms": ["HS512"], "audience": "x"}, "never list 'HS512'"),
        ({"algorithms": ["RS1"], "audience": "x"}, "must list only"),
        ({"algorithms": "RS256", "audience": "x"}, "non-empty list"),
        ({"algorithms": ["RS256"], "audience": "x", "claims": {"aud": "y"}}, "must not name"),
        ({"algorithms": ["RS256"], "audience": "x", "claims": {"n": 1.5}}, "text, a boolean"),
        ({"algorithms": ["RS256"], "audience": "x", "body_claim_encoding": "hex"}, "needs"),
        ({"algorithms": ["RS256"], "audience": "x", "body_claim": "exp"}, "body_claim"),
        ({"algorithms": ["RS256"], "audience": "x", "header": "bad header"}, "'header'"),
        ({"algorithms": ["RS256"], "audience": "x", "leeway": 5}, "unknown option 'leeway'"),
        ({"algorithms": ["RS256"], "audience": "x"}, "'claims' is required unless"),
    ],
)
def test_options_are_checked_at_load(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_options("jwt", options)


def test_private_keys_are_refused_at_load_and_never_echoed() -> None:
    private = [
        private_pem(RSA_KEY),
        private_pem(EC_KEY),
        json.dumps({"keys": [json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(RSA_KEY))]}),
        json.dumps({"kty": "oct", "k": b64url(b"shared")}),
    ]
    for secret in private:
        with pytest.raises(ValueError) as info:
            check_secret("jwt", secret, PUBSUB)
        assert "private key" in str(info.value) or "symmetric" in str(info.value)
        fragments = [secret[i : i + 12] for i in range(0, len(secret) - 12, 6)]
        assert not [part for part in fragments if part in str(info.value)]
        # and at verification such a secret is no key at all
        assert reason(pubsub, rs256(google_claims()), secrets=[secret]) == "no_secret"


def test_the_check_is_built_once_with_its_options_and_keys() -> None:
    # As for a spec's check (`dispatch.verifier`): a secret holding no public key
    # fails when the check is built, before any request is read
    assert reason(verifier, "jwt", PUBSUB, [private_pem(RSA_KEY)], 3600) == "no_secret"
    # and the options are read then, not on each delivery
    claims: dict[str, object] = {"email": SERVICE_ACCOUNT, "email_verified": True}
    check = verifier("jwt", {**PUBSUB, "claims": claims}, [public_pem(RSA_KEY)], 3600)
    claims["email"] = "someone-else@example.test"
    view = HeaderView({"Authorization": f"Bearer {rs256(google_claims())}"})
    assert check(view, BODY, NOW, "POST", URL).timestamp == NOW - 10


def test_secrets_are_checked_against_the_algorithms() -> None:
    check_secret("jwt", public_pem(RSA_KEY), PUBSUB)
    check_secret("jwt", certificate(RSA_KEY), PUBSUB)
    check_secret("jwt", json.dumps({"keys": [jwk(RSA_KEY, "a")]}), PUBSUB)
    with pytest.raises(ValueError, match="no key in this secret"):
        check_secret("jwt", public_pem(EC_KEY), PUBSUB)
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ValueError, match="2048"):
        check_secret("jwt", public_pem(small), PUBSUB)
    with pytest.raises(ValueError, match="PEM public keys"):
        check_secret("jwt", "a shared secret", PUBSUB)


def test_what_the_receiver_asks_of_the_scheme() -> None:
    assert headers_read("jwt", PUBSUB) == ("Authorization",)
    assert headers_read("jwt", PLAID) == ("Plaid-Verification",)
    assert signs_url("jwt", PUBSUB) and not signs_url("jwt", PLAID)
    assert signs_body("jwt", PLAID) and not signs_body("jwt", PUBSUB)
    assert not signs_body("static_header", {"header": "X-T"}) and signs_body("stripe", {})
    assert signs_timestamp("jwt", PUBSUB)


# ------------------------------------------------------------ providers check

CHECKED = """
[jobwarden]
public_webhook_url = "PUBLIC"

[providers.pubsub]
base_url = "https://pubsub.example.test"
result = { source = "none" }
[providers.pubsub.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.pubsub.status]
path = "/jobs/{job_id}"
state = "/state"
state_map = { done = "succeeded" }
[providers.pubsub.webhooks]
scheme = "jwt"
secrets_file = "KEYS"
tolerance_seconds = 3600
job_id = "/message/attributes/operation"
[providers.pubsub.webhooks.options]
OPTIONS
"""
GOOD = (
    'algorithms = ["RS256"]\naudience = "{url}"\n'
    f'claims = {{ email = "{SERVICE_ACCOUNT}", email_verified = true }}'
)


async def check(tmp_path: Path, options: str, keys: str, public: str = URL) -> int:
    (tmp_path / "keys").write_text(keys)
    text = CHECKED.replace("PUBLIC", public).replace("KEYS", str(tmp_path / "keys"))
    config = tmp_path / "jobwarden.toml"
    config.write_text(text.replace("OPTIONS", options))
    defaults = dict.fromkeys(("provider", "delivery", "at", "url", "result", "status"))
    args = argparse.Namespace(config=str(config), json=False, daemon="receiver", **defaults)
    return await cli_providers.cmd_check(args)


async def test_providers_check_validates_the_options_and_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await check(tmp_path, GOOD, public_pem(RSA_KEY)) == 0
    out = capsys.readouterr().out
    assert "webhooks signed?            no   a signed token (jwt" in out
    assert "does not cover the body" in out
    refused = [
        (GOOD.replace('"RS256"', '"HS256"'), public_pem(RSA_KEY), URL, "never list 'HS256'"),
        (GOOD.replace('"RS256"', '"none"'), public_pem(RSA_KEY), URL, "never list 'none'"),
        ('algorithms = ["RS256"]', public_pem(RSA_KEY), URL, "'audience' is required"),
        (GOOD.split("\nclaims")[0], public_pem(RSA_KEY), URL, "must name its sender"),
        (GOOD, private_pem(RSA_KEY), URL, "private key does not belong"),
        (GOOD, public_pem(EC_KEY), URL, "no key in this secret"),
        (GOOD, public_pem(RSA_KEY), "", "public_webhook_url"),
    ]
    for options, keys, public, message in refused:
        assert await check(tmp_path, options, keys, public) == 1
        err = capsys.readouterr().err
        assert message in err, (message, err)
        assert keys.splitlines()[1] not in err  # no key material echoed
