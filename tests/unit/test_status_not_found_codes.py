"""`[status.not_found_codes]`: a job gone, told by an error code and not a 404.
Dropbox's `check_job_status` answers 409 `{"error": {".tag": "invalid_async_job_id"}}`
for a job id expired or never issued; before, such a read was a refused read,
repeated at the backoff until enough of them sent the operation to a human as
unreadable, never "job not found"."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import ConfigError, HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status

GONE = {"error_summary": "invalid_async_job_id/", "error": {".tag": "invalid_async_job_id"}}


def load(**status: Any) -> ProviderDescription:
    table = {
        "base_url": "https://api.dropboxapi.example",
        "create": {"path": "/2/files/save_url", "idempotency": "none", "job_id": "/async_job_id"},
        "status": {
            "path": "/2/files/save_url/check_job_status",
            "method": "POST",
            "body": {"async_job_id": "{job_id}"},
            "state": "/.tag",
            "state_map": {"in_progress": "running", "complete": "succeeded", "failed": "failed"},
        }
        | status,
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(desc: ProviderDescription, code: int, body: Any) -> Any:
    return parse_status(desc, HttpResponse(code, {}, json.dumps(body).encode()))


def test_a_listed_code_is_job_not_found() -> None:
    desc = load(not_found_codes={"/error/.tag": ["invalid_async_job_id"]})
    fact = read(desc, 409, GONE)
    assert fact.not_found, fact
    assert fact.problem == "HTTP 409, /error/.tag = invalid_async_job_id: job not found"


def test_another_code_or_no_key_is_a_refused_read_as_before() -> None:
    desc = load(not_found_codes={"/error/.tag": ["invalid_async_job_id"]})
    other = read(desc, 409, {"error": {".tag": "internal_error"}})
    assert not other.not_found and other.problem == "HTTP 409", other
    assert not read(load(), 409, GONE).not_found


def test_a_2xx_carrying_the_code_is_read_as_a_status() -> None:
    """Only a refused read is judged by it: a 2xx is the job's status."""
    desc = load(not_found_codes={"/.tag": ["complete"]})
    fact = read(desc, 200, {".tag": "complete"})
    assert not fact.not_found and fact.remote_state is not None


def test_a_2xx_naming_no_state_and_null_where_the_job_was_is_job_not_found() -> None:
    """Leonardo answers a generation it does not hold (a deleted one too) 200
    {"generations_by_pk": null}: listed as "null", that read is "job not found".
    Before, it was a read without a state: the DELETE that cancels a generation
    (cancel.deletes_job) left the operation cancelling until its deadline."""
    desc = load(
        state="/generations_by_pk/status",
        state_map={"PENDING": "running", "COMPLETE": "succeeded"},
        not_found_codes={"/generations_by_pk": ["null"]},
    )
    fact = read(desc, 200, {"generations_by_pk": None})
    assert fact.not_found, fact
    assert fact.problem == "HTTP 200, /generations_by_pk = null: job not found"
    # the generation there: its status, whatever else
    live = read(desc, 200, {"generations_by_pk": {"status": "PENDING"}})
    assert not live.not_found and live.raw_state == "PENDING"
    # unlisted, null is a read naming no state, as before
    plain = load(
        state="/generations_by_pk/status",
        state_map={"PENDING": "running", "COMPLETE": "succeeded"},
    )
    assert not read(plain, 200, {"generations_by_pk": None}).not_found
    # a body that is no JSON object (a proxy's page) is not the provider saying so
    page = parse_status(desc, HttpResponse(200, {}, b"<html>maintenance</html>"))
    assert not page.not_found


def test_an_empty_list_is_refused() -> None:
    with pytest.raises(ConfigError, match="not_found_codes"):
        load(not_found_codes={"/error/.tag": []})


def test_null_beside_an_error_is_that_error_not_the_job_gone() -> None:
    """A 2xx naming no state that carries an error (GraphQL's `errors` with no
    `data`, a throttle or an expired token; an error the description's own paths
    read) says what went wrong, not that the job is gone: the path is empty
    because nothing was answered. Before, "null" listed made such a read "job not
    found", a throttle counted toward "does not exist", and after an accepted
    DELETE (cancel.deletes_job) the job recorded cancelled while it ran."""
    desc = load(
        state="/data/node/status",
        state_map={"PENDING": "running", "COMPLETE": "succeeded"},
        error_code="/code",
        error_message="/error",
        not_found_codes={"/data/node": ["null"]},
    )
    throttled = read(desc, 200, {"errors": [{"message": "Throttled"}]})
    assert not throttled.not_found and throttled.request_failed, throttled
    expired = read(desc, 200, {"error": "Could not verify JWT: JWTExpired", "code": "invalid-jwt"})
    assert not expired.not_found, expired
    # the same answer without a word of error is the job gone, as before
    assert read(desc, 200, {"data": {"node": None}}).not_found
    # a code listed for the error itself still says the job is gone
    listed = load(
        state="/data/node/status",
        state_map={"PENDING": "running"},
        not_found_codes={"/data/node": ["null"], "/errors/0/type": ["NOT_FOUND"]},
    )
    gone = read(listed, 200, {"data": {"node": None}, "errors": [{"type": "NOT_FOUND"}]})
    assert gone.not_found and gone.problem == "HTTP 200, /errors/0/type = NOT_FOUND: job not found"


def test_a_2xx_whose_status_code_is_mapped_to_a_state_is_that_state_not_gone() -> None:
    """A 2xx the description maps to a state (`state_from_http_status`: 202 while
    running, the job not yet in the body) names that state, so "null" where the job would be is
    no miss: the code decides, as it does for a non-2xx the description maps.
    Before, the "null" was read first, and every running read was the job gone."""
    desc = load(
        state="/job/status",
        state_map={"done": "succeeded"},
        state_from_http_status={"202": "running"},
        not_found_codes={"/job": ["null"]},
    )
    running = read(desc, 202, {"id": "j1"})
    assert not running.not_found and running.remote_state is RemoteState.RUNNING, running
    assert read(desc, 200, {"job": None}).not_found
