"""`lookup.body`: the JSON object a lookup sends, for an API whose every call is a
POST naming the job in its body (AWS JSON 1.1: Transcribe's GetTranscriptionJob
{TranscriptionJobName}, the name we chose). Before, no lookup key could name the
job in a body: such an API's lookup could not be described, and a lost create of a
job we named went to a human
(`test_unseen_round57b.py::test_transcribe_a_lost_start_is_adopted_by_its_name_at_the_conflict`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import build_lookup, parse_providers
from shared.providers.config import ConfigError, advisories
from shared.providers.description import ProviderDescription
from shared.providers.guarantees import describe_guarantees

TOKEN = "idem_0123456789abcdef0123456789abcdef"


def load(**lookup: Any) -> ProviderDescription:
    table = {
        "base_url": "https://transcribe.example.test",
        "headers": {"X-Amz-Target": "Transcribe.GetTranscriptionJob"},
        "create": {
            "path": "/",
            "idempotency": "client_job_id",
            "set_body": {"/TranscriptionJobName": "{idempotency_token}"},
            "job_id": "/TranscriptionJob/TranscriptionJobName",
        },
        "status": {
            "method": "POST",
            "path": "/",
            "body": {"TranscriptionJobName": "{job_id}"},
            "state": "/TranscriptionJob/TranscriptionJobStatus",
            "state_map": {"IN_PROGRESS": "running", "COMPLETED": "succeeded"},
        },
        "result": {"source": "none"},
        "lookup": {
            "kind": "get",
            "method": "POST",
            "path": "/",
            "job_id": "/TranscriptionJob/TranscriptionJobName",
            **lookup,
        },
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def test_the_lookup_sends_its_body_with_our_token_in_it() -> None:
    desc = load(body={"TranscriptionJobName": "{idempotency_token}", "Note": "{client_reference}"})
    req = build_lookup(desc, "op_123", TOKEN)
    assert (req.method, req.url) == ("POST", "https://transcribe.example.test/")
    assert req.json == {"TranscriptionJobName": TOKEN, "Note": "op_123"}
    assert json.dumps(req.json)


def test_without_it_the_lookup_sends_none() -> None:
    desc = load(path="/?name={idempotency_token}")
    assert build_lookup(desc, "op_123", TOKEN).json is None


def test_a_direct_read_naming_nothing_of_ours_is_refused_at_load() -> None:
    """A kind = get lookup whose path, body and query name neither our reference
    nor our token (POST / with no body; Fivetran's connector at a fixed path, read
    after a sync named no job) answers whatever is there: it would be adopted as
    our job, perhaps another's. Before, it loaded, and such a read was adopted."""
    with pytest.raises(ConfigError, match=r"lookup\.path: a kind = get lookup must name our"):
        load()
    with pytest.raises(ConfigError, match="must name our reference"):
        load(body={"TranscriptionJobName": "fixed-name"})
    assert load(query_param="name").lookup.filtered


@pytest.mark.parametrize(
    ("lookup", "said"),
    [
        ({"body": {"Name": "{job_id}"}}, "lookup.body.Name"),
        ({"body": "TranscriptionJobName"}, "lookup.body: must be a table"),
        ({"method": "GET", "body": {"N": "{idempotency_token}"}}, "lookup.body: a GET carries"),
    ],
)
def test_a_body_that_cannot_be_sent_is_refused_at_load(lookup: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace(".", r"\.")):
        load(**lookup)


def test_a_list_filtered_by_its_body_is_not_advised_as_unfiltered() -> None:
    """A list whose body names our reference (ListTranscriptionJobs
    {JobNameContains}) is filtered by the provider: one page is its answer, no
    warning that only a first page of everything is read. Before, only the path
    and query_param counted, and `providers check` said the lookup was weak."""
    desc = load(
        kind="list",
        body={"JobNameContains": "{idempotency_token}"},
        list="/TranscriptionJobSummaries",
        match="/TranscriptionJobName",
        job_id="/TranscriptionJobName",
    )
    assert desc.lookup.filtered
    assert not [a for a in advisories(desc) if a.startswith("lookup")]
    assert not load(kind="list", list="/L", match="/N", job_id="/N").lookup.filtered


def test_providers_check_says_what_the_body_names() -> None:
    (_, found, how) = describe_guarantees(
        load(body={"TranscriptionJobName": "{idempotency_token}"})
    )[1]
    assert found and "a direct read of POST / (its body naming {idempotency_token})" in how, how
