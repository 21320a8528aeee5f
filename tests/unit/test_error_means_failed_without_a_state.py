"""`status.error_means_failed` on a read that names no state at all: Transloadit's
failed assembly carries `error` (one code of dozens: IMPORT_FILE_ERROR,
INTERNAL_COMMAND_ERROR, ...) and `message`, and no `ok`, where every other read
names its state in `ok`. Before, such a read named no state, the operation
never moved, and after ten of them a human was told the state was missing
(`test_unseen_round56.py::test_transloadit_a_failed_assembly_is_failed_with_its_error`)."""

from __future__ import annotations

from shared.ledger.states import RemoteState
from tests.unit.test_error_means_failed_and_file_urls import load, read

ASSEMBLY = {
    "state": "/ok",
    "state_map": {"ASSEMBLY_EXECUTING": "running", "ASSEMBLY_COMPLETED": "succeeded"},
    "error_code": "/error",
    "error_message": "/message",
}


def test_a_read_naming_no_state_with_an_error_is_failed_with_that_error() -> None:
    desc = load({**ASSEMBLY, "error_means_failed": True})
    fact = read(desc, {"error": "IMPORT_FILE_ERROR", "message": "404 Not Found"})
    assert fact.remote_state is RemoteState.FAILED, fact
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("IMPORT_FILE_ERROR", "404 Not Found")


def test_without_the_key_such_a_read_still_names_no_state() -> None:
    desc = load(ASSEMBLY)
    fact = read(desc, {"error": "IMPORT_FILE_ERROR", "message": "404 Not Found"})
    assert fact.remote_state is None and fact.raw_state is None


def test_a_read_naming_no_state_and_no_error_names_none() -> None:
    desc = load({**ASSEMBLY, "error_means_failed": True})
    for body in ({}, {"error": "", "message": None}, {"assembly_id": "a1"}):
        assert read(desc, body).remote_state is None, body


def test_a_running_state_with_an_error_is_still_running() -> None:
    """Only a success or no state at all is turned: a running job's passing error
    (a retried step) is not its end."""
    desc = load({**ASSEMBLY, "error_means_failed": True})
    fact = read(desc, {"ok": "ASSEMBLY_EXECUTING", "error": "RETRYING", "message": "again"})
    assert fact.remote_state is RemoteState.RUNNING
