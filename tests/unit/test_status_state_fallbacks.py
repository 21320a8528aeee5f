"""`status.state` as a list of paths: the first holding a state is read. A Databricks
run names its result_state (SUCCESS, FAILED, CANCELED...) only once it ended, and its
life_cycle_state (PENDING, RUNNING, TERMINATED...) always; neither alone tells a
running run from a failed one. Before, `state` took one path: read at result_state,
every running run named no state (ten in a row: a human); at life_cycle_state,
every ended run was TERMINATED, a failure or a cancel read as whatever that mapped
to."""

from __future__ import annotations

import json
from typing import Any

from shared.ledger.states import RemoteState
from shared.providers import HttpResponse, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status

RESULT_STATES = {"SUCCESS": "succeeded", "FAILED": "failed", "CANCELED": "cancelled"}
LIFE_CYCLE = {"PENDING": "pending", "RUNNING": "running", "TERMINATING": "running"}


def load(state: Any) -> ProviderDescription:
    table = {
        "base_url": "https://dbc.example.test",
        "create": {"path": "/api/2.1/jobs/runs/submit", "idempotency": "none", "job_id": "/run_id"},
        "status": {
            "path": "/api/2.1/jobs/runs/get?run_id={job_id}",
            "state": state,
            "state_map": RESULT_STATES | LIFE_CYCLE | {"TERMINATED": "succeeded"},
            "error_message": "/state/state_message",
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(desc: ProviderDescription, state: dict[str, Any]) -> Any:
    body = {"run_id": 7, "state": state}
    return parse_status(desc, HttpResponse(200, {}, json.dumps(body).encode()))


DATABRICKS = ["/state/result_state", "/state/life_cycle_state"]


def test_a_running_run_is_read_at_its_life_cycle_state() -> None:
    fact = read(load(DATABRICKS), {"life_cycle_state": "RUNNING", "state_message": "In run"})
    assert (fact.remote_state, fact.raw_state) == (RemoteState.RUNNING, "RUNNING")


def test_an_ended_run_is_read_at_its_result_state() -> None:
    desc = load(DATABRICKS)
    ended = {"life_cycle_state": "TERMINATED", "state_message": ""}
    fact = read(desc, ended | {"result_state": "SUCCESS"})
    assert (fact.remote_state, fact.raw_state) == (RemoteState.SUCCEEDED, "SUCCESS")
    failed = read(desc, ended | {"result_state": "FAILED", "state_message": "Workload failed"})
    assert failed.remote_state is RemoteState.FAILED
    assert failed.error is not None and failed.error.message == "Workload failed"
    assert read(desc, ended | {"result_state": "CANCELED"}).remote_state is RemoteState.CANCELLED


def test_an_empty_first_path_holds_no_state_and_one_path_is_read_as_before() -> None:
    fact = read(load(DATABRICKS), {"life_cycle_state": "PENDING", "result_state": ""})
    assert fact.remote_state is RemoteState.PENDING
    alone = read(load("/state/life_cycle_state"), {"life_cycle_state": "TERMINATED"})
    assert alone.remote_state is RemoteState.SUCCEEDED
    assert load("/state/life_cycle_state").status.state_also == ()
