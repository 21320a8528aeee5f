"""Ids and references read from a webhook body: text or a JSON integer, never a JSON float.

A float literal (a fraction or an exponent) is rounded to a double as it is
read, so two ids the sender told apart would read as one (1e400 and 2e400
are both "inf") and a job id of 1e400 would name the job "inf". Such an id
counts as absent: the dedupe key falls back to the body's hash (which the
signature covers), and a reference is not used (`as_id`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

import pytest

from receiver.webhooks.endpoint import _parse_json, _reference, dedupe_id
from shared.providers import WebhookParseError
from shared.providers.description import ProviderDescription, WebhookSpec
from shared.providers.responses import webhook_fact
from shared.providers.values import as_id
from shared.signatures import Verified
from tests.integration.test_receiver_support import describe

_TOML = """
[providers.p]
base_url = "https://provider.example.test"
[providers.p.create]
path = "/jobs"
idempotency = "none"
job_id = "/id"
[providers.p.status]
path = "/jobs/{{job_id}}"
state = "/status"
[providers.p.status.state_map]
done = "succeeded"
[providers.p.result]
source = "none"
[providers.p.webhooks]
scheme = "{scheme}"
secrets_env = "S"
job_id = "/job"
client_reference = "/ref"
"""
# Pairs of distinct literals one double holds: the second event was a "duplicate".
SAME_DOUBLE = [
    ("1e400", "2e400"),
    ("1.00000000000000001", "1.00000000000000002"),
    ("9007199254740993.0", "9007199254740992.0"),
]
TOO_LONG = "7" * (sys.get_int_max_str_digits() + 1)


def _desc(scheme: str) -> ProviderDescription:
    return describe(_TOML.format(scheme=scheme), {"S": "secret"})["p"]


def _spec(scheme: str) -> WebhookSpec:
    spec = _desc(scheme).webhooks
    assert spec is not None
    return spec


def _hash(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _body_id_key(scheme: str, id_key: str, literal: str) -> tuple[bytes, str]:
    """A body whose signed id is `literal` written as is, and its dedupe key."""
    body = f'{{"{id_key}": {literal}, "job": "j1"}}'.encode()
    verified = Verified(scheme=scheme, event_id=None, id_signed=True, timestamp=None)
    document = _parse_json(body)
    return body, dedupe_id(_spec(scheme), verified, document, body)


@pytest.mark.parametrize(("first", "second"), SAME_DOUBLE)
@pytest.mark.parametrize(("scheme", "id_key"), [("stripe", "id"), ("slack", "event_id")])
def test_a_float_body_id_falls_back_to_the_body_hash(
    scheme: str, id_key: str, first: str, second: str
) -> None:
    body_a, key_a = _body_id_key(scheme, id_key, first)
    body_b, key_b = _body_id_key(scheme, id_key, second)
    assert (key_a, key_b) == (_hash(body_a), _hash(body_b))
    assert key_a != key_b  # two events, not one and a "duplicate"


@pytest.mark.parametrize("literal", ["42", "-7", "123456789012345678901234567890", TOO_LONG])
def test_an_integer_body_id_is_the_key_exactly_however_long(literal: str) -> None:
    _, found = _body_id_key("stripe", "id", literal)
    # past MAX_EVENT_ID_CHARS an id is its own hash: still every digit counted
    expected = literal if len(literal) <= 500 else _hash(literal.encode())
    assert found == expected


@pytest.mark.parametrize("value", [1e400, 2.0, 0.5, -0.0, float("nan")])
def test_as_id_reads_no_float(value: float) -> None:
    assert as_id(value) is None
    assert _reference(value) is None  # a plugin's float reference is absent too


def test_as_id_reads_text_and_integers_as_given() -> None:
    assert [as_id(v) for v in ("job_1", 42, 2**70, True, None, "", [1])] == [
        "job_1",
        "42",
        str(2**70),
        None,
        None,
        None,
        None,
    ]
    document = _parse_json(f'{{"n": {TOO_LONG}}}'.encode())
    assert document is not None and as_id(document["n"]) == TOO_LONG


def _fact(body: bytes, scheme: str = "stripe") -> Any:
    return webhook_fact(_desc(scheme), json.loads(body), body, {}, {})


@pytest.mark.parametrize("literal", ["1e400", "2e400", "1.0", "9007199254740993.0"])
def test_a_float_reference_is_absent(literal: str) -> None:
    body = f'{{"job": {literal}, "ref": "inv-1"}}'.encode()
    fact = _fact(body)
    assert (fact.remote_job_id, fact.client_reference) == (None, "inv-1")
    with pytest.raises(WebhookParseError, match="no job id"):
        _fact(f'{{"job": {literal}, "ref": {literal}}}'.encode())


def test_an_integer_reference_still_names_its_job() -> None:
    fact = _fact(b'{"job": 123456789012345678901234567890, "ref": 42}')
    assert (fact.remote_job_id, fact.client_reference) == ("123456789012345678901234567890", "42")


@pytest.mark.parametrize(("first", "second"), SAME_DOUBLE)
def test_a_float_event_id_in_a_fact_is_the_body_hash(first: str, second: str) -> None:
    body_a = f'{{"id": {first}, "job": "j1"}}'.encode()
    body_b = f'{{"id": {second}, "job": "j1"}}'.encode()
    assert (_fact(body_a).event_id, _fact(body_b).event_id) == (_hash(body_a), _hash(body_b))
    assert _fact(b'{"id": 42, "job": "j1"}').event_id == "42"
