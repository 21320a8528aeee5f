"""`status.error_means_failed` (a success state read with an error is a failure:
fal.ai's `COMPLETED` with `error`) and `source = "files"` without a path (the
status names the files by URL: Runway's `output`), at load and as read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.ledger.states import RemoteState
from shared.providers import ConfigError, HttpResponse, StatusFact, parse_providers
from shared.providers.config import advisories
from shared.providers.description import ProviderDescription
from shared.providers.errors import RequestBuildError
from shared.providers.requests import build_result_requests
from shared.providers.responses import parse_status
from tests.unit.result_fixtures import provider_table


def load(status: dict[str, Any] | None = None, **result: Any) -> ProviderDescription:
    table = provider_table({"source": "url", **result}, status)
    table["providers"]["p"]["auth"] = {"value": "Bearer {secret}", "secret_env": "K"}
    return parse_providers(table, "t.toml", {"K": "sekrit"})["p"]


def error(status: dict[str, Any] | None = None, **result: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        load(status, **result)
    return str(caught.value)


FAL = {
    "state_map": {"COMPLETED": "succeeded", "IN_PROGRESS": "running"},
    "error_message": "/error",
    "error_code": "/error_type",
}


def read(desc: ProviderDescription, body: dict[str, Any], code: int = 200) -> StatusFact:
    return parse_status(desc, HttpResponse(code, {}, json.dumps(body).encode()))


# --- status.error_means_failed -----------------------------------------------------


def test_completed_with_an_error_reads_failed_with_that_error() -> None:
    desc = load({**FAL, "error_means_failed": True})
    fact = read(desc, {"status": "COMPLETED", "error": "timed out", "error_type": "timeout"})
    assert fact.remote_state is RemoteState.FAILED
    assert fact.raw_state == "COMPLETED"
    assert fact.error is not None
    assert (fact.error.code, fact.error.message) == ("timeout", "timed out")


@pytest.mark.parametrize(
    "body",
    [
        {"status": "COMPLETED"},
        {"status": "COMPLETED", "error": None, "error_type": None},
        {"status": "COMPLETED", "error": ""},
    ],
)
def test_completed_without_an_error_is_a_success(body: dict[str, Any]) -> None:
    desc = load({**FAL, "error_means_failed": True})
    assert read(desc, body).remote_state is RemoteState.SUCCEEDED


def test_a_running_state_with_an_error_still_runs() -> None:
    """Only an end read as a success is turned: a retried step's error is news."""
    desc = load({**FAL, "error_means_failed": True})
    fact = read(desc, {"status": "IN_PROGRESS", "error": "retrying"})
    assert fact.remote_state is RemoteState.RUNNING


def test_off_by_default_an_error_beside_a_success_stays_a_success() -> None:
    desc = load(FAL)
    assert desc.status.error_means_failed is False
    fact = read(desc, {"status": "COMPLETED", "error": "a warning", "error_type": "w"})
    assert fact.remote_state is RemoteState.SUCCEEDED


def test_a_state_told_by_the_http_status_is_turned_too() -> None:
    status = {
        **FAL,
        "error_means_failed": True,
        "state_from_http_status": {"200": "succeeded", "202": "running"},
    }
    desc = load(status)
    fact = read(desc, {"error": "the runner died"})  # no state in the body: HTTP 200 says
    assert fact.remote_state is RemoteState.FAILED
    assert fact.error is not None and fact.error.message == "the runner died"


def test_error_means_failed_needs_a_place_to_find_the_error() -> None:
    message = error({"state_map": {"COMPLETED": "succeeded"}, "error_means_failed": True})
    assert "providers.p.status.error_means_failed: needs error, error_code or error_message" in (
        message
    )


def test_error_means_failed_is_refused_with_done() -> None:
    """With done (AIP-151) an error already means failed: the key would say nothing."""
    table = provider_table({"source": "url"}, {"done": "/done", "error_means_failed": True})
    status = table["providers"]["p"]["status"]
    del status["state"], status["state_map"]
    with pytest.raises(ConfigError) as caught:
        parse_providers(table, "t.toml", {})
    assert "with done, an error already means failed" in str(caught.value)


# --- source = files without a path: file URLs --------------------------------------


def urls(desc: ProviderDescription, *named: str) -> list[tuple[str, str | None]]:
    status = StatusFact(200, remote_state=RemoteState.SUCCEEDED, result_file_ids=named)
    reqs = build_result_requests(desc, "job_1", status)
    return [(r.url, r.headers.get("Authorization")) for r in reqs]


def test_file_urls_are_fetched_as_named_and_the_key_stays_home() -> None:
    desc = load(source="files", file_ids="/output", format="binary")
    assert desc.result.file_urls
    cdn = "https://cdn.example.net/v/a.mp4?_jwt=x.y"
    own = "https://api.example.test/files/b.mp4"
    assert urls(desc, cdn, own, "/files/c.mp4") == [
        (cdn, None),
        (own, "Bearer sekrit"),
        ("https://api.example.test/files/c.mp4", "Bearer sekrit"),  # relative: base_url's
    ]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.0.0.5/a.mp4", "private"),
        ("ftp://cdn.example.net/a.mp4", "not an http(s) URL"),
    ],
)
def test_a_file_url_that_may_not_be_sent_is_refused(url: str, said: str) -> None:
    desc = load(source="files", file_ids="/output", format="binary")
    with pytest.raises(RequestBuildError) as caught:
        urls(desc, "https://cdn.example.net/ok.mp4", url)
    assert said in str(caught.value)


def test_the_files_status_names_are_read_from_a_list() -> None:
    desc = load(source="files", file_ids="/output", format="binary")
    body = {"status": "done", "output": ["https://cdn.example.net/a.mp4", "https://c/b.mp4"]}
    assert read(desc, body).result_file_ids == tuple(body["output"])


def test_a_path_with_files_still_names_the_file_id() -> None:
    message = error(source="files", file_ids="/output", path="/v1/jobs/{job_id}/files")
    assert "providers.p.result.path: with source = files, names {file_id}" in message


def test_file_ids_are_still_required_with_source_files() -> None:
    assert "result.file_ids: required with source = files" in error(source="files")


# --- providers check -----------------------------------------------------------------

NO_FAILED = "but nothing read can say the job failed"


def test_providers_check_warns_when_nothing_read_can_say_failed() -> None:
    """fal's COMPLETED-only map, its error read, without error_means_failed or
    [result.failed]: every failed request would be read as a success."""
    assert any(NO_FAILED in w for w in advisories(load(FAL)))
    assert not any(NO_FAILED in w for w in advisories(load({**FAL, "error_means_failed": True})))
    failed = {"statuses": [422], "error": "/detail"}
    assert not any(NO_FAILED in w for w in advisories(load(FAL, failed=failed)))
    mapped = {**FAL, "state_map": {"COMPLETED": "succeeded", "ERROR": "failed"}}
    assert not any(NO_FAILED in w for w in advisories(load(mapped)))
    unread = {"state_map": {"COMPLETED": "succeeded"}}  # no error read: nothing to say
    assert not any(NO_FAILED in w for w in advisories(load(unread)))
