"""`create.already_exists_codes`: with a job id we chose (client_job_id), a 409 the
provider documents as "a job with this id already exists" is our earlier create,
read by that id (the lookup) rather than resent. BigQuery's jobs.insert resent
after a lost answer says 409 "Already Exists: Job p:US.<our id>", reason
"duplicate"; before, that was an ambiguous conflict, resent until ten minutes of
409s (or the create deadline) sent a running job to a human."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import HttpResponse, parse_providers
from shared.providers.config import ConfigError
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_create

TOKEN = "idem_0123456789abcdef0123456789abcdef"
DUPLICATE = {
    "error": {
        "code": 409,
        "message": f"Already Exists: Job p:US.{TOKEN}",
        "errors": [{"message": f"Already Exists: Job p:US.{TOKEN}", "reason": "duplicate"}],
        "status": "ALREADY_EXISTS",
    }
}


def load(lookup: bool = True, **create: Any) -> ProviderDescription:
    table = {
        "base_url": "https://bigquery.example.test",
        "create": {
            "path": "/bigquery/v2/projects/p/jobs",
            "idempotency": "client_job_id",
            "set_body": {"/jobReference/jobId": "{idempotency_token}"},
            "job_id": "/jobReference/jobId",
            "error_code": "/error/errors/0/reason",
            **create,
        },
        "status": {
            "path": "/bigquery/v2/projects/p/jobs/{job_id}",
            "state": "/status/state",
            "state_map": {"RUNNING": "running", "DONE": "succeeded"},
        },
        "result": {"source": "none"},
        "lookup": {
            "kind": "get",
            "path": "/bigquery/v2/projects/p/jobs/{idempotency_token}",
            "job_id": "/jobReference/jobId",
            "not_found_means_absent": True,
        },
    }
    if not lookup:
        del table["lookup"]
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def answer(code: int, body: Any) -> HttpResponse:
    return HttpResponse(code, {}, json.dumps(body).encode())


def test_a_409_already_exists_says_the_job_with_our_id_exists() -> None:
    """Still no acceptance (the ledger takes a 2xx as proof of a job, a lookup's
    read of it): the fact says the job exists, to be read by our id."""
    fact = parse_create(load(already_exists_codes=["duplicate"]), answer(409, DUPLICATE), TOKEN)
    assert (fact.kind, fact.exists) == ("ambiguous", True), fact
    assert "already_exists_codes" in fact.reason


def test_a_400_carrying_a_named_code_says_so_too_and_without_one_stays_a_refusal() -> None:
    """AWS JSON 1.1 answers every client error 400: Transcribe's StartTranscriptionJob
    resent with the job name it holds is 400 ConflictException. Before, only a 409
    was read for the code, and the 400 was a refusal of a job that ran (after a lost
    answer, a human told of it)."""
    desc = load(already_exists_codes=["duplicate"])
    fact = parse_create(desc, answer(400, DUPLICATE), TOKEN)
    assert (fact.kind, fact.exists) == ("ambiguous", True), fact
    assert fact.reason.startswith("HTTP 400 duplicate:"), fact.reason
    other = {"error": {"code": 400, "errors": [{"reason": "invalid"}]}}
    assert parse_create(desc, answer(400, other), TOKEN).kind == "rejected"
    assert parse_create(load(), answer(400, DUPLICATE), TOKEN).kind == "rejected"


def test_another_409_stays_ambiguous_and_without_the_key_so_does_this_one() -> None:
    desc = load(already_exists_codes=["duplicate"])
    other = {"error": {"code": 409, "errors": [{"reason": "jobInternalError"}]}}
    assert not parse_create(desc, answer(409, other), TOKEN).exists
    assert not parse_create(load(), answer(409, DUPLICATE), TOKEN).exists


def test_the_key_is_refused_where_the_job_id_is_not_ours() -> None:
    with pytest.raises(ConfigError, match="already_exists_codes: only with idempotency"):
        load(idempotency="none", already_exists_codes=["duplicate"], set_body={})
    with pytest.raises(ConfigError, match="already_exists_codes: needs a \\[lookup\\]"):
        load(lookup=False, already_exists_codes=["duplicate"])


@pytest.mark.parametrize(
    "overlap",
    [
        {"conflict_reject_codes": ["duplicate", "invalid"]},
        {"not_created_codes": {"/error/errors/0/reason": ["duplicate"]}},
    ],
)
def test_a_code_cannot_say_the_job_exists_and_that_nothing_was_created(
    overlap: dict[str, Any],
) -> None:
    """Before, the load took both and the answer's reading order picked one: a
    `not_created_codes` entry won (the create resent), a `conflict_reject_codes`
    one lost (the rejection the user wrote never happened)."""
    with pytest.raises(ConfigError, match=r"'duplicate' also in create\.") as refused:
        load(already_exists_codes=["duplicate"], **overlap)
    assert "not both" in str(refused.value)


def test_not_created_codes_at_another_path_may_name_the_same_code() -> None:
    """Only the error code's own path can conflict: a code read elsewhere in the
    answer is another field's value."""
    desc = load(
        already_exists_codes=["duplicate"], not_created_codes={"/error/status": ["duplicate"]}
    )
    assert desc.create.already_exists_codes == {"duplicate"}
