"""Garbage in, SignatureError out: no request can make a verifier raise anything else.

Headers are attacker-controlled, so any other exception (a TypeError from
`compare_digest`, a UnicodeEncodeError, a ValueError from `int()` or from a
crypto library) would be a crash an attacker can trigger at will, and could
quote header material in a traceback. Seeds are fixed, so a failure replays.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from shared.signatures import (
    SCHEMES,
    SignatureError,
    check_options,
    generate_ed25519_keypair,
    sign,
    sign_standard_webhooks_ed25519,
    verify,
)

ITERATIONS = 400
NOW = 1_700_000_000.0
STAMP = str(int(NOW))
METHOD = "POST"
URL = "https://x.test/webhooks/p"
MUTATION_BODY = b'{"id":"evt_1","state":"done"}'
WHSEC = "whsec_" + base64.b64encode(b"fuzz-secret-32-bytes-long-000000").decode()
PRIVATE, PUBLIC = generate_ed25519_keypair()
P256_PRIVATE = ec.derive_private_key(0xF022, ec.SECP256R1())
P256_PUBLIC = base64.b64encode(
    P256_PRIVATE.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()

CONFIGS: list[tuple[str, str, dict[str, object], list[str]]] = [
    ("standard_webhooks", "standard_webhooks", {}, [WHSEC, PUBLIC]),
    ("stripe", "stripe", {}, ["whsec_text_key"]),
    ("github", "github", {}, ["s"]),
    ("slack", "slack", {}, ["s"]),
    ("shopify", "shopify", {}, ["s"]),
    ("static_header", "static_header", {"header": "X-Token"}, ["tok"]),
    (
        "generic_hmac",
        "generic_hmac",
        {
            "signature_header": "X-Signature",
            "encoding": "base64",
            "prefix": "v1=",
            "signed_content": "{timestamp}:{id}:{body}",
            "timestamp_header": "X-Timestamp",
            "id_header": "X-Event-Id",
        },
        ["s"],
    ),
    (
        "hmac-kv",
        "hmac",
        {
            "signature_header": "X-Signature",
            "format": "kv",
            "timestamp_key": "t",
            "signed_content": "{timestamp}.{body}",
            "algorithm": "sha512",
        },
        ["s"],
    ),
    (
        "hmac-versioned-whsec",
        "hmac",
        {
            "signature_header": ["svix-signature", "webhook-signature"],
            "timestamp_header": "svix-timestamp",
            "id_header": "svix-id",
            "format": "versioned",
            "key_encoding": "whsec",
            "signed_content": "{id}.{timestamp}.{body}",
        },
        [WHSEC],
    ),
    (
        "hmac-method-url",
        "hmac",
        {"signature_header": "X-Signature", "signed_content": "{method}{url}{body}"},
        ["s"],
    ),
    (
        "ed25519-versioned",
        "asymmetric",
        {
            "algorithm": "ed25519",
            "key_encoding": "whpk",
            "format": "versioned",
            "signature_header": "X-Signature",
            "timestamp_header": "X-Timestamp",
            "signed_content": "{timestamp}.{body}",
        },
        [PUBLIC],
    ),
    (
        "ecdsa-der",
        "asymmetric",
        {
            "algorithm": "ecdsa_p256",
            "signature_header": "X-Signature",
            "timestamp_header": "X-Timestamp",
            "signed_content": "{timestamp}{body}",
        },
        [P256_PUBLIC],
    ),
    (
        "ecdsa-raw-hex",
        "asymmetric",
        {
            "algorithm": "ecdsa_p256",
            "ecdsa_signature": "raw",
            "format": "hex",
            "signature_header": "X-Signature",
        },
        [P256_PUBLIC],
    ),
]

HEADER_NAMES = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "Stripe-Signature",
    "X-Hub-Signature-256",
    "X-GitHub-Delivery",
    "X-Slack-Signature",
    "X-Slack-Request-Timestamp",
    "X-Shopify-Hmac-Sha256",
    "X-Shopify-Webhook-Id",
    "X-Token",
    "X-Signature",
    "X-Timestamp",
    "X-Event-Id",
]
PIECES = [
    "t=",
    "v1=",
    "v1,",
    "v1a,",
    "v0=",
    "sha256=",
    ",",
    " ",
    "=",
    "\t",
    "1700000000",
    "-1",
    "9" * 40,
    "١٢٣",
    "é",
    "\ud800",
    "\x00",
    "\u2028",
    "==",
    "+/",
    "00ff",
    "{body}",
]


def garbage(rng: random.Random) -> str:
    """A header value built to hit parsers' edges rather than uniformly random."""
    kind = rng.randrange(9)
    if kind >= 6:  # well-formed but wrong: reaches the cryptography
        return rng.choice(
            [
                str(int(NOW) + rng.randrange(-100, 100)),
                base64.b64encode(rng.randbytes(rng.choice([64, 70, 71, 72]))).decode(),
                "v1a," + base64.b64encode(rng.randbytes(64)).decode(),
                rng.randbytes(rng.choice([20, 32, 64])).hex(),
            ]
        )
    if kind == 0:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(60)))
    if kind == 1:
        return "".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 20)))
    if kind == 2:
        return "v1," + base64.b64encode(rng.randbytes(rng.choice([0, 31, 32, 64, 65]))).decode()
    if kind == 3:
        entries = [f"v1={rng.randbytes(32).hex()}" for _ in range(rng.randrange(30))]
        return f"t={rng.randrange(10**12)}," + ",".join(entries)
    if kind == 4:
        return rng.choice(["x", "A", "0"]) * rng.choice([1, 4095, 4096, 4097, 9000])
    return rng.choice(PIECES) + rng.randbytes(rng.randrange(80)).hex()


def random_headers(rng: random.Random) -> dict[str, str]:
    """Most known names present (so parsing is reached), in random spellings."""
    headers: dict[str, str] = {}
    for name in HEADER_NAMES:
        if rng.random() < 0.8:
            headers[rng.choice([name, name.upper(), name.lower()])] = garbage(rng)
    return headers


def outcome(*args: Any, **kwargs: Any) -> str:
    """`verify(*args, **kwargs)`'s reason word, or "verified"; any other exception escapes."""
    try:
        verify(*args, **kwargs)
    except SignatureError as exc:
        return exc.reason
    return "verified"


CONFIG_IDS = [config[0] for config in CONFIGS]


def config(config_id: str) -> tuple[str, dict[str, object], list[str]]:
    _, scheme, options, secrets = next(c for c in CONFIGS if c[0] == config_id)
    return scheme, options, secrets


@pytest.mark.parametrize("config_id", CONFIG_IDS)
def test_random_headers_only_ever_raise_signature_error(config_id: str) -> None:
    scheme, options, secrets = config(config_id)
    rng = random.Random(f"headers-{config_id}")
    for _ in range(ITERATIONS):
        headers = random_headers(rng)
        body = rng.randbytes(rng.randrange(64))
        result = outcome(scheme, options, headers, body, secrets, NOW, method=METHOD, url=URL)
        assert result != "verified", sorted(headers)


def _hmac_headers(
    scheme: str, options: dict[str, object], secret: str, header: str
) -> dict[str, str]:
    value = sign(
        scheme,
        options,
        secret,
        MUTATION_BODY,
        timestamp=int(NOW),
        event_id="evt_1",
        method=METHOD,
        url=URL,
    )
    return {header: value, "X-Timestamp": STAMP, "X-Event-Id": "evt_1"}


def _ed25519_headers() -> dict[str, str]:
    seed = base64.b64decode(PRIVATE.removeprefix("whsk_"))
    signature = Ed25519PrivateKey.from_private_bytes(seed).sign(
        f"{STAMP}.".encode() + MUTATION_BODY
    )
    entry = "v1a," + base64.b64encode(signature).decode()
    return {"X-Signature": entry, "X-Timestamp": STAMP}


def _ecdsa_headers(raw: bool) -> dict[str, str]:
    content = (STAMP if not raw else "").encode() + MUTATION_BODY
    signature = P256_PRIVATE.sign(content, ec.ECDSA(hashes.SHA256()))
    if raw:
        r, s = decode_dss_signature(signature)
        encoded = (r.to_bytes(32, "big") + s.to_bytes(32, "big")).hex()
        return {"X-Signature": encoded}
    return {"X-Signature": base64.b64encode(signature).decode(), "X-Timestamp": STAMP}


def _genuine(config_id: str) -> dict[str, str]:
    """A correctly signed request for each configuration, to mutate."""
    scheme, options, _ = config(config_id)
    if config_id == "standard_webhooks":
        entry = sign_standard_webhooks_ed25519(PRIVATE, "msg_1", int(NOW), MUTATION_BODY)
        return {"webhook-id": "msg_1", "webhook-timestamp": STAMP, "webhook-signature": entry}
    if config_id == "static_header":
        return {"X-Token": "tok"}
    if config_id == "ed25519-versioned":
        return _ed25519_headers()
    if config_id.startswith("ecdsa"):
        return _ecdsa_headers(raw=config_id.endswith("raw-hex"))
    if config_id == "hmac-versioned-whsec":
        headers = _hmac_headers("hmac", options, WHSEC, "svix-signature")
        return {**headers, "svix-timestamp": STAMP, "svix-id": "evt_1"}
    if config_id == "slack":
        return {
            **_hmac_headers("slack", options, "s", "X-Slack-Signature"),
            "X-Slack-Request-Timestamp": STAMP,
        }
    header = {
        "stripe": "Stripe-Signature",
        "github": "X-Hub-Signature-256",
        "shopify": "X-Shopify-Hmac-Sha256",
    }.get(config_id, "X-Signature")
    secret = "whsec_text_key" if scheme == "stripe" else "s"
    return _hmac_headers(scheme, options, secret, header)


@pytest.mark.parametrize("config_id", CONFIG_IDS)
def test_mutated_genuine_requests_only_ever_raise_signature_error(config_id: str) -> None:
    scheme, options, secrets = config(config_id)
    rng = random.Random(f"mutate-{config_id}")
    genuine = _genuine(config_id)

    def run(headers: dict[str, str]) -> str:
        return outcome(
            scheme, options, headers, MUTATION_BODY, secrets, NOW, method=METHOD, url=URL
        )

    assert run(genuine) == "verified"
    for _ in range(ITERATIONS):
        headers = dict(genuine)
        name = rng.choice(sorted(headers))
        value = headers[name]
        position = rng.randrange(len(value) + 1)
        mutation = rng.randrange(4)
        if mutation == 0:  # replace one character
            value = value[:position] + rng.choice(PIECES)[:1] + value[position + 1 :]
        elif mutation == 1:  # insert a piece
            value = value[:position] + rng.choice(PIECES) + value[position:]
        elif mutation == 2:  # truncate
            value = value[:position]
        else:  # a second spelling of the header with another value
            headers[name.swapcase()] = garbage(rng)
        headers[name] = value
        run(headers)


OPTION_VALUES: list[object] = [
    None,
    "",
    "X-Sig",
    "x y",
    "{body}",
    "{timestamp}{body}",
    7,
    True,
    ["X-A", "X-B"],
    [],
    [1, "X"],
    {"nested": "table"},
    "kv",
    "versioned",
    "sha1",
    "whsec",
    "ed25519",
    "raw",
    "\ud800",
    "v" * 400,
]
OPTION_KEYS = [
    "signature_header",
    "timestamp_header",
    "id_header",
    "format",
    "signature_encoding",
    "signature_key",
    "timestamp_key",
    "prefix",
    "signed_content",
    "algorithm",
    "key_encoding",
    "ecdsa_signature",
    "encoding",
    "header",
]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_random_options_only_ever_raise_value_error(scheme: str) -> None:
    rng = random.Random(f"options-{scheme}")
    for _ in range(ITERATIONS):
        options = {
            rng.choice(OPTION_KEYS): rng.choice(OPTION_VALUES) for _ in range(rng.randrange(6))
        }
        try:
            check_options(scheme, options)
        except ValueError:
            continue
        # Options accepted at load are usable: verification reasons only.
        outcome(scheme, options, {}, b"{}", ["s"], NOW)
