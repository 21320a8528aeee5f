"""`status.cancelled_error_codes` beyond AIP-151's `done`: a failed read whose error
code is listed is the job cancelled. BigQuery's cancelled job reads DONE with
errorResult.reason "stopped"; Snowflake's cancelled statement answers 422 with code
"000604". Before, the key was read with `done` alone and ignored elsewhere without
a word: every cancel of such a job read as a failure, and `providers check` said a
cancel could never be confirmed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import HttpResponse, parse_providers
from shared.providers.config import ConfigError
from shared.providers.description import ProviderDescription
from shared.providers.guarantees import describe_guarantees
from shared.providers.responses import parse_status

BIGQUERY_STATUS = {
    "path": "/bigquery/v2/projects/p/jobs/{job_id}?location=US",
    "state": "/status/state",
    "state_map": {"PENDING": "pending", "RUNNING": "running", "DONE": "succeeded"},
    "error_code": "/status/errorResult/reason",
    "error_message": "/status/errorResult/message",
    "error_means_failed": True,
    "cancelled_error_codes": ["stopped"],
}
SNOWFLAKE_STATUS = {
    "path": "/api/v2/statements/{job_id}",
    "state": "/code",
    "state_map": {"333334": "running", "090001": "succeeded"},
    "state_from_http_status": {"422": "failed"},
    "error_code": "/code",
    "error_message": "/message",
    "cancelled_error_codes": ["000604"],
}


def load(status: dict[str, Any]) -> ProviderDescription:
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": status,
        "cancel": {"path": "/jobs/{job_id}/cancel"},
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(desc: ProviderDescription, body: Any, code: int = 200) -> Any:
    return parse_status(desc, HttpResponse(code, {}, json.dumps(body).encode()))


def bigquery_done(reason: str, message: str) -> dict[str, Any]:
    error = {"reason": reason, "message": message}
    return {"status": {"state": "DONE", "errorResult": error, "errors": [error]}}


def test_a_done_job_stopped_by_a_cancel_is_cancelled_not_failed() -> None:
    desc = load(BIGQUERY_STATUS)
    fact = read(desc, bigquery_done("stopped", "Job execution was cancelled: User requested"))
    assert fact.remote_state is RemoteState.CANCELLED, fact
    assert fact.raw_state == "DONE"


def test_a_done_job_with_another_error_is_still_failed() -> None:
    desc = load(BIGQUERY_STATUS)
    fact = read(desc, bigquery_done("invalidQuery", "Syntax error: Unexpected end of script"))
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.code == "invalidQuery"


def test_a_failure_told_by_the_http_status_is_cancelled_by_its_code() -> None:
    desc = load(SNOWFLAKE_STATUS)
    cancelled = {"code": "000604", "message": "SQL execution canceled", "sqlState": "57014"}
    assert read(desc, cancelled, 422).remote_state is RemoteState.CANCELLED
    failed = {"code": "002003", "message": "SQL compilation error", "sqlState": "02000"}
    assert read(desc, failed, 422).remote_state is RemoteState.FAILED


def test_providers_check_says_such_a_cancel_can_be_confirmed() -> None:
    guarantees = describe_guarantees(load(BIGQUERY_STATUS))
    (cancellable,) = [g for g in guarantees if g[0] == "cancellable"]
    assert cancellable[1] is True, cancellable


def test_without_done_no_code_is_assumed_and_one_listed_needs_error_code() -> None:
    bare = {k: v for k, v in BIGQUERY_STATUS.items() if k != "cancelled_error_codes"}
    assert load(bare).status.cancelled_error_codes == frozenset()
    with pytest.raises(ConfigError, match="cancelled_error_codes: needs error_code"):
        load({k: v for k, v in BIGQUERY_STATUS.items() if k != "error_code"})


def test_with_done_the_default_stays_aip151s_cancelled() -> None:
    desc = load({"path": "/v1/{+job_id}", "done": "/done", "error": "/error"})
    assert desc.status.cancelled_error_codes == frozenset({"1"})


def test_a_code_read_from_the_error_object_needs_no_error_code() -> None:
    """`status.error` names the error object, whose `code` (else `type`) is the
    code read: listed codes are found there as well, and such a description was
    refused for want of an `error_code` it does not need."""
    desc = load(
        {
            "path": "/jobs/{job_id}",
            "state": "/status",
            "state_map": {"running": "running", "failed": "failed", "done": "succeeded"},
            "error": "/error",
            "cancelled_error_codes": ["job_cancelled"],
        }
    )
    cancelled = {"status": "failed", "error": {"code": "job_cancelled", "message": "by user"}}
    assert read(desc, cancelled).remote_state is RemoteState.CANCELLED
    failed = {"status": "failed", "error": {"code": "oom", "message": "out of memory"}}
    assert read(desc, failed).remote_state is RemoteState.FAILED
