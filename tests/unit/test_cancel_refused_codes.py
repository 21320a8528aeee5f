"""A 2xx cancel answer that says the cancel was not taken is a refusal.

Baseten's `DELETE /async_request/{id}` answers 200 for every request it knows:
{"canceled": true} for a QUEUED one, {"canceled": false, "message": "Only QUEUED
requests may be canceled..."} for one already running. Before, no description
could tell the second from the first: the 200 was a cancel taken, the operation
waited in cancelling for the cancel deadline while the request ran on.
`[cancel.refused_codes]` (path -> codes; an answer's boolean is read as JSON
writes it, `"/canceled" = ["false"]`) says so.
"""

from __future__ import annotations

import json
from typing import Any

from shared.providers.messages import HttpResponse
from shared.providers.responses import parse_cancel
from tests.unit.test_providers_loader import acme, config_error, load

CANCEL = {"method": "DELETE", "path": "/v1/jobs/{job_id}", "accepted_statuses": [200]}


def answer(code: int, body: dict[str, Any]) -> HttpResponse:
    return HttpResponse(code, {"content-type": "application/json"}, json.dumps(body).encode())


def test_a_200_carrying_a_refused_code_is_a_refusal_naming_it() -> None:
    desc = load(acme(cancel=CANCEL | {"refused_codes": {"/canceled": ["false"]}}))
    refused = parse_cancel(desc, answer(200, {"canceled": False, "message": "Only QUEUED"}))
    assert refused.kind == "rejected"
    assert refused.error is not None and refused.error.code == "/canceled = false"
    taken = parse_cancel(desc, answer(200, {"canceled": True, "message": "Canceled"}))
    assert taken.kind == "accepted"


def test_without_the_key_a_200_is_a_cancel_taken() -> None:
    desc = load(acme(cancel=CANCEL))
    assert parse_cancel(desc, answer(200, {"canceled": False})).kind == "accepted"


def test_refused_codes_must_be_a_list_of_codes() -> None:
    message = config_error(acme(cancel=CANCEL | {"refused_codes": {"/canceled": []}}))
    assert message == (
        "config.toml: providers.acme.cancel.refused_codes./canceled: must be a non-empty"
        " list of codes (strings or integers)"
    )
    message = config_error(acme(cancel=CANCEL | {"refused_codes": {"/canceled": [False]}}))
    assert message == (
        "config.toml: providers.acme.cancel.refused_codes./canceled: a boolean is written"
        ' as text here: ["false"], ["true"]'
    )
