"""`result.headers`: headers of the result's fetches alone.

Rev.ai's transcript is asked for as `Accept: application/vnd.rev.transcript.v1.0+json`
while its job calls answer JSON. Before, only the top-level `headers` could carry
an Accept, which every call then sent (and `result.headers` was an unknown key).
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.facts import StatusFact
from shared.providers.requests import build_result_requests, build_status

TRANSCRIPT = "application/vnd.rev.transcript.v1.0+json"


def provider(result: dict[str, Any], status_path: str = "/jobs/{job_id}") -> ProviderDescription:
    table = {
        "base_url": "https://api.rev.test",
        "headers": {"X-Client": "jobwarden"},
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": status_path, "state": "/status", "state_map": {"done": "succeeded"}},
        "result": result,
    }
    return parse_providers({"providers": {"rev": table}}, "test.toml", {})["rev"]


def test_the_result_fetch_alone_sends_them_over_the_top_level_headers() -> None:
    desc = provider(
        {"source": "path", "path": "/jobs/{job_id}/transcript", "headers": {"Accept": TRANSCRIPT}}
    )
    (fetch,) = build_result_requests(desc, "j1", StatusFact(status_code=200))
    assert fetch.headers["Accept"] == TRANSCRIPT
    assert fetch.headers["X-Client"] == "jobwarden"
    read = build_status(desc, "j1")
    assert read.headers["Accept"] == "application/json"


def test_each_file_on_another_host_is_asked_for_alike() -> None:
    desc = provider(
        {"source": "files", "file_ids": "/files", "headers": {"Accept": "application/pdf"}}
    )
    status = StatusFact(
        status_code=200, result_file_ids=("https://cdn.test/a", "https://cdn.test/b")
    )
    fetches = build_result_requests(desc, "j1", status)
    assert [f.headers["Accept"] for f in fetches] == ["application/pdf"] * 2


def test_a_status_read_at_the_results_url_asks_as_the_result_does() -> None:
    """Stability's /v2beta/results/{id}: the read of a finished job is the download."""
    desc = provider(
        {"source": "path", "path": "/results/{job_id}", "headers": {"Accept": "video/*"}},
        status_path="/results/{job_id}",
    )
    (fetch,) = build_result_requests(desc, "j1", StatusFact(status_code=200))
    read = build_status(desc, "j1")
    assert read.headers == fetch.headers
    assert read.headers["Accept"] == "video/*"
    bare = provider(
        {"source": "path", "path": "/results/{job_id}"}, status_path="/results/{job_id}"
    )
    assert "Accept" not in build_status(bare, "j1").headers  # the lane's */*, as a fetch's


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            {"source": "inline", "inline": "/r", "headers": {"Accept": "x/y"}},
            "no result is fetched",
        ),
        ({"source": "none", "headers": {"Accept": "x/y"}}, "no result is fetched"),
        (
            {"source": "path", "path": "/r/{job_id}", "headers": {"Authorization": "Bearer k"}},
            "looks like a credential",
        ),
        ({"source": "path", "path": "/r/{job_id}", "headers": {"Bad Name": "x"}}, "not a valid"),
    ],
)
def test_what_the_load_refuses(result: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=rf"providers\.rev\.result\.headers.*{message}"):
        provider(result)
