"""`lookup.page_token_body_field`: a lookup list read by a POST whose next page's
cursor travels in the body (Azure Data Factory's queryPipelineRuns answers
`continuationToken` and wants it back in the next request's body). Before, no key
could write it there: the token went as a query parameter the API ignores (every
"next page" the first again, the scan cut short with no absence proven), or the
list was described unpaged, its first page taken for the whole
(Azure Data Factory, round 57e)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import build_lookup, parse_providers
from shared.providers.config import ConfigError
from shared.providers.description import ProviderDescription
from shared.providers.guarantees import describe_guarantees
from shared.providers.messages import HttpResponse
from shared.providers.responses import parse_lookup

QUERY = {
    "lastUpdatedAfter": "2020-01-01T00:00:00Z",
    "filters": [{"operand": "PipelineName", "operator": "Equals", "values": ["copy"]}],
}


def load(**lookup: Any) -> ProviderDescription:
    table = {
        "base_url": "https://adf.example.test",
        "create": {
            "path": "/pipelines/copy/createRun",
            "idempotency": "none",
            "client_reference_field": "/ref",
            "job_id": "/runId",
        },
        "status": {
            "path": "/pipelineruns/{job_id}",
            "state": "/status",
            "state_map": {"InProgress": "running", "Succeeded": "succeeded"},
        },
        "result": {"source": "none"},
        "lookup": {
            "method": "POST",
            "path": "/queryPipelineRuns?api-version=2018-06-01",
            "body": QUERY,
            "list": "/value",
            "match": "/parameters/ref",
            "job_id": "/runId",
            "next_page_token": "/continuationToken",
            **lookup,
        },
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def test_the_next_pages_token_is_written_in_the_body_not_the_query() -> None:
    desc = load(page_token_body_field="/continuationToken")
    first = build_lookup(desc, "op_1", None)
    assert first.json == QUERY and "continuationToken" not in first.url
    nxt = build_lookup(desc, "op_1", None, "tok+2/=")
    assert nxt.url == "https://adf.example.test/queryPipelineRuns?api-version=2018-06-01"
    assert nxt.json == QUERY | {"continuationToken": "tok+2/="}
    assert desc.lookup.body == QUERY  # the description's own body is untouched
    page = {
        "value": [{"runId": "r1", "parameters": {"ref": "op_other"}}],
        "continuationToken": "t2",
    }
    fact = parse_lookup(desc, HttpResponse(200, {}, json.dumps(page).encode()), "op_1", None)
    assert fact.next_page_token == "t2" and fact.found_job_ids == ()
    said = describe_guarantees(desc)
    assert "in the body's /continuationToken" in str(said), said


def test_without_it_the_token_still_goes_in_the_query() -> None:
    nxt = build_lookup(load(), "op_1", None, "t2")
    assert nxt.url.endswith("&page_token=t2") and nxt.json == QUERY


@pytest.mark.parametrize(
    ("lookup", "said"),
    [
        ({"page_token_body_field": "/c", "next_page_token": None}, "only with next_page_token"),
        ({"page_token_body_field": "/c", "body": None}, "needs body"),
        ({"page_token_body_field": "/c", "page_token_param": "c"}, "contradicts"),
        ({"page_token_body_field": "/a/[x=1]/c"}, "page_token_body_field"),
    ],
)
def test_a_token_that_cannot_be_written_is_refused_at_load(
    lookup: dict[str, Any], said: str
) -> None:
    table = {k: v for k, v in lookup.items() if v is not None}
    dropped = [k for k, v in lookup.items() if v is None]
    with pytest.raises(ConfigError, match=said):
        load_without(dropped, **table)


def load_without(dropped: list[str], **lookup: Any) -> ProviderDescription:
    table = {
        "method": "POST",
        "path": "/queryPipelineRuns",
        "body": QUERY,
        "list": "/value",
        "match": "/parameters/ref",
        "job_id": "/runId",
        "next_page_token": "/continuationToken",
    }
    table = {k: v for k, v in (table | lookup).items() if k not in dropped}
    full = {
        "base_url": "https://adf.example.test",
        "create": {
            "path": "/c",
            "idempotency": "none",
            "client_reference_field": "/ref",
            "job_id": "/runId",
        },
        "status": {"path": "/r/{job_id}", "state": "/s", "state_map": {"a": "running"}},
        "result": {"source": "none"},
        "lookup": table,
    }
    return parse_providers({"providers": {"p": full}}, "test.toml", {})["p"]


@pytest.mark.parametrize(
    "field", ["/lastUpdatedAfter/continuationToken", "/filters/continuationToken"]
)
def test_a_token_written_through_a_value_that_is_no_object_is_refused_at_load(
    field: str,
) -> None:
    """The body holds a string or a list on the way: the token could not be written,
    and the second page's build raised on every claim (the lost create never found,
    the step failing until its deadline). Refused at load, naming the member."""
    with pytest.raises(ConfigError, match="holds no object to write the token in"):
        load(page_token_body_field=field)


def test_a_token_written_under_an_absent_member_creates_it() -> None:
    nxt = build_lookup(load(page_token_body_field="/paging/token"), "op_1", None, "t2")
    assert nxt.json == QUERY | {"paging": {"token": "t2"}}
