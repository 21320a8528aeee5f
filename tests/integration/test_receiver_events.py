"""Pure rules of the receiver: which id deduplicates an event, what JSON text is stored."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from receiver.webhooks.endpoint import dedupe_id, storable_payload
from shared.providers.description import WebhookSpec
from shared.signatures import Verified
from tests.integration.test_receiver_support import describe

_TOML = """
[providers.{name}]
base_url = "https://provider.example.test"
[providers.{name}.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.{name}.status]
path = "/jobs/{{job_id}}"
state = "/status"
[providers.{name}.status.state_map]
done = "succeeded"
[providers.{name}.result]
source = "none"
[providers.{name}.webhooks]
scheme = "{scheme}"
secrets_env = "S"
job_id = "/job"
{extra}
"""


def _spec(scheme: str, extra: str = "") -> WebhookSpec:
    toml = _TOML.format(name="p", scheme=scheme, extra=extra)
    secret = "whsec_c2VjcmV0" if scheme == "standard_webhooks" else "secret"
    spec = describe(toml, {"S": secret})["p"].webhooks
    assert spec is not None
    return spec


BODY = json.dumps({"id": "evt_body", "job": "j1", "delivery": {"id": "d_body"}}).encode()
DOC: Any = json.loads(BODY)
BODY_HASH = "sha256:" + hashlib.sha256(BODY).hexdigest()


def _verified(scheme: str, event_id: str | None, id_signed: bool) -> Verified:
    return Verified(scheme=scheme, event_id=event_id, id_signed=id_signed, timestamp=None)


def test_the_schemes_signed_id_wins() -> None:
    spec = _spec("standard_webhooks", 'event_id = "/id"')
    assert dedupe_id(spec, _verified("standard_webhooks", "msg_1", True), DOC, BODY) == "msg_1"


def test_stripe_takes_the_id_from_the_signed_body() -> None:
    assert dedupe_id(_spec("stripe"), _verified("stripe", None, True), DOC, BODY) == "evt_body"


def test_an_unsigned_header_id_is_never_the_dedupe_key() -> None:
    spec = _spec("github")
    verified = _verified("github", "delivery-guid", False)
    assert dedupe_id(spec, verified, DOC, BODY) == BODY_HASH


def test_a_configured_body_path_is_signed_by_a_body_signature() -> None:
    spec = _spec("github", 'event_id = "/delivery/id"')
    assert dedupe_id(spec, _verified("github", "guid", False), DOC, BODY) == "d_body"


def test_a_configured_header_path_falls_back_to_the_body_hash() -> None:
    spec = _spec("github", 'event_id = "header:X-GitHub-Delivery"')
    assert dedupe_id(spec, _verified("github", "guid", False), DOC, BODY) == BODY_HASH


def test_static_header_bodies_are_unsigned_so_only_their_hash_counts() -> None:
    spec = _spec(
        "static_header", 'event_id = "/id"\n[providers.p.webhooks.options]\nheader = "X-T"'
    )
    assert dedupe_id(spec, _verified("static_header", None, False), DOC, BODY) == BODY_HASH


def test_a_missing_body_id_falls_back_to_the_body_hash() -> None:
    body = b'{"job": "j1"}'
    spec = _spec("stripe")
    assert dedupe_id(spec, _verified("stripe", None, True), json.loads(body), body) == (
        "sha256:" + hashlib.sha256(body).hexdigest()
    )


def test_an_overlong_id_becomes_its_hash_not_a_truncation() -> None:
    long_a, long_b = "a" * 501, "a" * 500 + "b"
    spec = _spec("standard_webhooks")
    first = dedupe_id(spec, _verified("standard_webhooks", long_a, True), DOC, BODY)
    second = dedupe_id(spec, _verified("standard_webhooks", long_b, True), DOC, BODY)
    assert first.startswith("sha256:") and second.startswith("sha256:") and first != second
    exact = "a" * 500
    assert dedupe_id(spec, _verified("standard_webhooks", exact, True), DOC, BODY) == exact


def test_ordinary_json_is_stored_byte_for_byte() -> None:
    body = b'{"b": 1,  "a": [1.50, "caf\xc3\xa9", "\\u00e9"]}'
    assert storable_payload(body, json.loads(body)) == body.decode()


def test_nul_and_lone_surrogates_are_replaced_and_pairs_kept() -> None:
    body = b'{"a": "x\\u0000y", "b": "\\ud800", "c": "\\ud83d\\ude00"}'
    stored = json.loads(storable_payload(body, json.loads(body)))
    assert stored == {"a": "x\ufffdy", "b": "\ufffd", "c": "\U0001f600"}


def test_utf16_and_bom_bodies_are_reencoded_as_utf8_text() -> None:
    document = {"job": "j1", "note": "é"}
    for body in (
        json.dumps(document).encode("utf-16"),
        b"\xef\xbb\xbf" + json.dumps(document).encode(),
    ):
        text = storable_payload(body, json.loads(body))
        assert json.loads(text) == document and not text.startswith("\ufeff")


def test_a_number_beyond_float_range_in_a_reencoded_body_keeps_the_body_in_base64() -> None:
    body = '{"a": "\\u0000", "big": 1e999}'.encode("utf-16-le")
    assert json.loads(storable_payload(body, json.loads(body))) == {
        "jobwarden": "payload not representable as jsonb",
        "body_base64": base64.b64encode(body).decode(),
    }


def test_a_number_beyond_float_range_beside_a_nul_escape_stays_as_sent() -> None:
    # only the escape is replaced: 1e999 is a number jsonb holds (no double involved)
    body = b'{"a": "\\u0000", "big": 1e999}'
    assert storable_payload(body, json.loads(body)) == '{"a": "\\ufffd", "big": 1e999}'
