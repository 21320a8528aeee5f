"""A status read's error whose code is a state the description maps to no failure
is no error. Snowflake's SQL API carries a code and a message on every answer
(`error_code = error_message = "/code", "/message"` read its 422 failures):
before, "Statement executed successfully." was kept as the operation's last
error, and shown as what went wrong when its result was then refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status


def load() -> ProviderDescription:
    table = {
        "base_url": "https://acct.snowflakecomputing.com",
        "create": {"path": "/api/v2/statements", "idempotency": "none", "job_id": "/h"},
        "status": {
            "path": "/api/v2/statements/{job_id}",
            "state": "/code",
            "error_code": "/code",
            "error_message": "/message",
            "state_map": {"333334": "running", "090001": "succeeded", "000604": "failed"},
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(status: int, body: Any) -> Any:
    return parse_status(load(), HttpResponse(status, {}, json.dumps(body).encode()))


@pytest.mark.parametrize(
    ("status", "code", "state"),
    [(202, "333334", RemoteState.RUNNING), (200, "090001", RemoteState.SUCCEEDED)],
)
def test_the_code_of_a_running_or_succeeded_state_is_no_error(
    status: int, code: str, state: RemoteState
) -> None:
    fact = read(status, {"code": code, "message": "Statement executed successfully."})
    assert (fact.remote_state, fact.error) == (state, None)


def test_a_failure_code_keeps_its_error() -> None:
    fact = read(200, {"code": "000604", "message": "SQL execution canceled"})
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("000604", "SQL execution canceled")


def test_a_code_the_state_map_does_not_name_is_still_an_error() -> None:
    fact = read(200, {"code": "002003", "message": "Object does not exist"})
    assert fact.error is not None and fact.error.code == "002003"


def load_numbered() -> ProviderDescription:
    """States and error codes both numbers, at their own paths: an error's code may
    equal a state's key by chance."""
    table = {
        "base_url": "https://jobs.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/jobs/{job_id}",
            "state": "/status",
            "error_code": "/error/code",
            "error_message": "/error/message",
            "error_means_failed": True,
            "state_map": {"1": "running", "2": "succeeded", "3": "failed"},
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


@pytest.mark.parametrize("status", [2, 3])
def test_a_code_equal_to_a_state_key_read_beside_another_state_is_an_error(status: int) -> None:
    """The code is no error only when it is the state read (Snowflake's one field):
    an error code 1 beside status 3 (failed) or 2 (succeeded, error_means_failed)
    is the job's failure. Before, any code a non-failure state was keyed by was
    dropped: the failure lost its error, or read as a success."""
    body = {"status": status, "error": {"code": 1, "message": "quota exceeded"}}
    fact = parse_status(load_numbered(), HttpResponse(200, {}, json.dumps(body).encode()))
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("1", "quota exceeded")
