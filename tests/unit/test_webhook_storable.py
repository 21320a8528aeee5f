"""What the endpoint makes of an authentic body and headers before anything is stored.

`storable_payload` keeps the raw text whenever PostgreSQL can take it and
otherwise re-encodes, or keeps the body exactly in base64; `_parse_json`
reads integers longer than Python's `int()` reads; `_headers_read` and
`_screen_headers` decide which headers may refuse a delivery.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import pytest

from receiver.webhooks.endpoint import (
    _headers_read,
    _parse_json,
    _screen_headers,
    storable_payload,
)
from receiver.webhooks.ingest import UNSTORABLE_MARKER, unstorable_payload
from shared.providers import ProviderDescription, parse_providers
from shared.providers.adapter import ProviderAdapter, adapter_for
from shared.providers.values import as_int, as_str, raw_text
from tests.integration.test_receiver_support import SECRET, describe, sim_description

DOCUMENT = {"job_id": "job_1", "note": "caf\u00e9 \U0001f600", "n": [1, 2.5, None, True]}
TOO_LONG = "9" * (sys.get_int_max_str_digits() + 1)


def _stored(body: bytes) -> str:
    return storable_payload(body, _parse_json(body))


def _kept_body(payload: str) -> bytes:
    document = json.loads(payload)
    assert document["jobwarden"] == UNSTORABLE_MARKER
    return base64.b64decode(document["body_base64"])


# ------------------------------------------------------------------ payloads


def test_a_plain_utf8_body_is_stored_as_its_own_text() -> None:
    body = json.dumps(DOCUMENT, ensure_ascii=False).encode()
    assert _stored(body) == body.decode()


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_a_body_in_utf16_or_utf32_without_a_bom_is_reencoded_as_utf8(encoding: str) -> None:
    document = {"job_id": "job_1", "n": [1, 2.5, None, True]}
    body = json.dumps(document).encode(encoding)
    assert "\x00" in body.decode("utf-8")  # ASCII in UTF-16: valid UTF-8, full of NULs
    text = _stored(body)
    assert "\x00" not in text and json.loads(text) == document


@pytest.mark.parametrize("number", ["1e200000", "0." + "1" * 20000, TOO_LONG])
def test_a_number_postgres_may_refuse_is_left_in_the_raw_text_for_the_database_to_judge(
    number: str,
) -> None:
    # No scan of every body for it: the writer stores what the database refuses
    # as unstorable_payload (tests/integration/test_webhook_hostile_bodies.py).
    body = f'{{"job_id": "job_1", "n": {number}}}'.encode()
    assert _stored(body) == body.decode()


@pytest.mark.parametrize("number", ["1e999", TOO_LONG])
def test_a_body_that_must_be_reencoded_but_cannot_be_is_kept_exactly(number: str) -> None:
    body = f'{{"note": "a\\u0000b", "n": {number}}}'.encode("utf-16-le")
    assert _kept_body(_stored(body)) == body


# Numbers a double does not hold as written: a re-encoded document rounded them.
EXACT_NUMBERS = '"amount": 12345678901234567.89, "price": 10.50, "tiny": 1e-400'


@pytest.mark.parametrize(
    "name",
    ["\\ud83d\\ude00", "\\uD83D\\uDE00 \\u00e9", "\\\\\\ud83d\\ude00", "\\udbff\\udfff"],
    ids=["emoji", "upper_case", "after_escaped_backslash", "last_pair"],
)
def test_an_escaped_surrogate_pair_leaves_the_body_as_sent(name: str) -> None:
    body = f'{{"job_id": "job_1", "name": "{name}", {EXACT_NUMBERS}}}'.encode()
    assert _stored(body) == body.decode()


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        ("a\\u0000b", "a\\ufffdb"),
        ("\\ud800", "\\ufffd"),  # a high surrogate alone
        ("\\ud83d x", "\\ufffd x"),
        ("\\ud83d\\ud83d\\ude00", "\\ufffd\\ud83d\\ude00"),  # a high one, then a pair
        ("\\ude00", "\\ufffd"),  # a low surrogate alone
        ("\\ude00\\ud83d", "\\ufffd\\ufffd"),  # low then high: no pair
        ("\\\\\\ude00", "\\\\\\ufffd"),  # an escaped backslash, then a lone low one
        ("\\\\ud83d\\ude00", "\\\\ud83d\\ufffd"),  # text "\\ud83d", then a lone low one
        ("\\\\u0000", "\\\\u0000"),  # the text "\\u0000": nothing to replace
    ],
)
def test_nul_and_lone_surrogates_are_replaced_and_everything_else_kept_as_sent(
    name: str, stored: str
) -> None:
    body = f'{{"job_id": "job_1", "name": "{name}", {EXACT_NUMBERS}}}'.encode()
    text = _stored(body)
    assert text == body.decode().replace(name, stored)  # numbers included, digit for digit
    assert json.loads(text)["name"] == json.loads(f'"{stored}"')


def test_unstorable_payload_is_ascii_json_keeping_any_bytes() -> None:
    raw = bytes(range(256))
    payload = unstorable_payload(raw)
    assert payload.isascii() and _kept_body(payload) == raw


# ---------------------------------------------------------- long integers


@pytest.mark.parametrize("digits", [TOO_LONG, "-" + TOO_LONG])
def test_an_integer_longer_than_int_reads_is_json_and_its_text_is_exact(digits: str) -> None:
    document = _parse_json(f'{{"job_id": {digits}, "ok": 12}}'.encode())
    assert document is not None
    value = document["job_id"]
    assert as_str(value) == str(value) == digits  # an id read from it: every digit
    assert value == (float("-inf") if digits.startswith("-") else float("inf"))
    assert as_int(value) is None  # no count pretends to be it
    assert raw_text(value) in ("Infinity", "-Infinity")  # a state: no crash, no match
    assert document["ok"] == 12 and type(document["ok"]) is int


def test_a_body_malformed_either_way_is_read_as_nothing() -> None:
    assert _parse_json(f'{{"job_id": {TOO_LONG}'.encode()) is None


# ------------------------------------------------------------------ headers


def _toml(webhooks: str) -> str:
    return (
        '[providers.p]\nbase_url = "https://provider.example.test"\n'
        '[providers.p.create]\npath = "/jobs"\nidempotency = "none"\njob_id = "/id"\n'
        '[providers.p.status]\npath = "/jobs/{job_id}"\nstate = "/status"\n'
        '[providers.p.status.state_map]\ndone = "succeeded"\n'
        '[providers.p.result]\nsource = "none"\n'
        f"[providers.p.webhooks]\n{webhooks}\n"
    )


def _reads(desc: ProviderDescription) -> frozenset[bytes] | None:
    assert desc.webhooks is not None
    return _headers_read(adapter_for(desc), desc.webhooks)


@pytest.mark.parametrize(
    ("webhooks", "expected"),
    [
        # the delivery id is unsigned, yet the verifier reads it: checked too
        (
            'scheme = "github"\nsecrets_env = "S"\njob_id = "/job"',
            {b"x-hub-signature-256", b"x-github-delivery"},
        ),
        ('scheme = "stripe"\nsecrets_env = "S"\njob_id = "/job"', {b"stripe-signature"}),
        (
            'scheme = "github"\nsecrets_env = "S"\njob_id = "header:X-Job"\n'
            'event_id = "header:X-Delivery-Id"',
            {b"x-hub-signature-256", b"x-github-delivery", b"x-job", b"x-delivery-id"},
        ),
        (
            'scheme = "static_header"\nsecrets_env = "S"\njob_id = "/job"\n'
            '[providers.p.webhooks.options]\nheader = "X-Webhook-Token"',
            {b"x-webhook-token"},
        ),
    ],
    ids=["github", "stripe", "header_paths", "static_header"],
)
def test_the_headers_read_are_the_schemes_and_the_header_paths(
    webhooks: str, expected: set[bytes]
) -> None:
    desc = describe(_toml(webhooks), {"S": "a-secret"})["p"]
    assert _reads(desc) == expected


def test_standard_webhooks_reads_its_headers_under_both_brands() -> None:
    reads = _reads(sim_description())
    assert reads is not None
    assert {b"webhook-id", b"webhook-timestamp", b"webhook-signature"} <= reads
    assert {b"svix-id", b"svix-timestamp", b"svix-signature"} <= reads
    assert b"user-agent" not in reads


class OwnVerifier(ProviderAdapter):
    """A plugin with a verifier of its own: it may read any header."""

    def verify_webhook(self, *args: Any, **kwargs: Any) -> Any:
        return super().verify_webhook(*args, **kwargs)


def test_a_plugin_that_verifies_or_parses_itself_has_every_header_checked() -> None:
    plugin = f"{__name__}:OwnVerifier"
    table = {"preset": "simulator", "plugin": plugin, "webhooks": {"secrets_env": "S"}}
    desc = parse_providers({"providers": {"p": table}}, "test", {"S": SECRET})["p"]
    assert _reads(desc) is None


def _refusal(raw: list[tuple[bytes, bytes]], reads: frozenset[bytes] | None) -> tuple[int, str]:
    with pytest.raises(Exception) as caught:
        _screen_headers(raw, reads)
    return caught.value.status, caught.value.reason  # type: ignore[attr-defined]


READS = frozenset({b"webhook-id"})
CAFE = "caf\u00e9".encode()


def test_a_non_ascii_header_is_refused_only_where_it_is_read() -> None:
    _screen_headers([(b"user-agent", CAFE), (b"webhook-id", b"msg_1")], READS)
    assert _refusal([(b"webhook-id", CAFE)], READS) == (400, "non_ascii_header")
    assert _refusal([(b"user-agent", CAFE)], None) == (400, "non_ascii_header")


@pytest.mark.parametrize("coding", [b"gzip", b"deflate", b"br", b"GZIP", b"gzip, identity"])
def test_a_content_coding_is_refused_and_identity_is_not(coding: bytes) -> None:
    assert _refusal([(b"content-encoding", coding)], READS) == (415, "unsupported_encoding")
    _screen_headers([(b"content-encoding", b"identity"), (b"content-encoding", b"")], READS)
