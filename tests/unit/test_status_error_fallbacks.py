"""`status.error_code` and `status.error_message` as lists of paths: the first holding
a value (not null or empty) is read, as `status.state` reads its list. An
Elasticsearch task that threw ends `completed` with `error` {"type", "reason"}; a
reindex aborted on its documents ends `completed` with no `error` but
`response.failures` ("if this is non-empty then the request aborted because of those
failures"). Before, one path each: read at `error`, an aborted reindex was a success;
there was no way to say both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import ConfigError, HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status

CODES = ["/error/type", "/response/failures/0/cause/type"]
MESSAGES = ["/error/reason", "/response/failures/0/cause/reason"]


def load(**status: Any) -> ProviderDescription:
    table = {
        "base_url": "https://es.example.test",
        "create": {"path": "/_reindex", "idempotency": "none", "job_id": "/task"},
        "status": {
            "path": "/_tasks/{job_id}",
            "state": "/completed",
            "state_map": {"false": "running", "true": "succeeded"},
            "error_means_failed": True,
        }
        | status,
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(desc: ProviderDescription, body: dict[str, Any]) -> Any:
    return parse_status(desc, HttpResponse(200, {}, json.dumps(body).encode()))


FAILURE = {"type": "mapper_parsing_exception", "reason": "failed to parse field [price]"}


def test_a_reindex_aborted_on_its_failures_is_failed_with_the_first() -> None:
    desc = load(error_code=CODES, error_message=MESSAGES)
    fact = read(desc, {"completed": True, "response": {"failures": [{"cause": FAILURE}]}})
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == (FAILURE["type"], FAILURE["reason"])


def test_the_first_path_holding_an_error_wins() -> None:
    desc = load(error_code=CODES, error_message=MESSAGES)
    thrown = {"type": "cluster_block_exception", "reason": "index write blocked"}
    body = {"completed": True, "error": thrown, "response": {"failures": [{"cause": FAILURE}]}}
    fact = read(desc, body)
    assert fact.error is not None and fact.error.message == "index write blocked"
    assert fact.error.code == "cluster_block_exception"
    # an empty or null one is none: the next path is read
    fact = read(
        desc,
        {
            "completed": True,
            "error": {"reason": ""},
            "response": {"failures": [{"cause": FAILURE}]},
        },
    )
    assert fact.error is not None and fact.error.message == FAILURE["reason"]


def test_no_error_at_any_path_is_a_success() -> None:
    desc = load(error_code=CODES, error_message=MESSAGES)
    fact = read(desc, {"completed": True, "response": {"created": 3, "failures": []}})
    assert (fact.remote_state, fact.error) == (RemoteState.SUCCEEDED, None)


def test_a_single_path_reads_as_before() -> None:
    fact = read(load(error_message="/error/reason"), {"completed": True, "error": FAILURE})
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.message == FAILURE["reason"]


def test_a_list_that_is_not_of_paths_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"status\.error_message: must be a path or a list"):
        load(error_message=["/error/reason", 3])


def load_done() -> ProviderDescription:
    table = {
        "base_url": "https://ops.example.test",
        "create": {"path": "/ops", "idempotency": "none", "job_id": "/name"},
        "status": {
            "path": "/{job_id}",
            "done": "/done",
            "error_code": ["/error/code", "/response/failure/code"],
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


@pytest.mark.parametrize(
    ("code", "state"), [(8, RemoteState.FAILED), (1, RemoteState.CANCELLED), (0, None)]
)
def test_with_done_a_later_code_path_decides_the_outcome(
    code: int, state: RemoteState | None
) -> None:
    """With `done`, the code decides failed or cancelled: it is read at the first path
    holding one, as the error it shows is; before, the first path alone was read, so
    a done operation whose code sat at a later path was a success carrying an error."""
    fact = read(load_done(), {"done": True, "response": {"failure": {"code": code}}})
    assert fact.remote_state is (state or RemoteState.SUCCEEDED)
    if state is not None:
        assert fact.error is not None and fact.error.code == str(code)


def test_lists_of_one_length_are_pairs_never_one_errors_code_with_anothers_message() -> None:
    """An `error` naming its type alone beside a failure naming both: the pair at
    `error` holds a code, so its (absent) message is read there too. Before, each
    list was read on its own: the thrown error's type shown with the failure's
    reason, a message no error had."""
    desc = load(error_code=CODES, error_message=MESSAGES)
    body = {
        "completed": True,
        "error": {"type": "task_cancelled_exception"},
        "response": {"failures": [{"cause": FAILURE}]},
    }
    fact = read(desc, body)
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("task_cancelled_exception", None)
