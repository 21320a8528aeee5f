"""Result redirects (`result.follow_redirects`): GitHub's run logs answer 302 to a signed
archive; the fetch was declared unavailable at once."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.providers import (
    ConfigError,
    HttpResponse,
    RequestBuildError,
    StatusFact,
    parse_providers,
    validate_result,
)
from shared.providers.description import ProviderDescription
from shared.providers.requests import build_redirect, build_result_requests

BASE = "https://api.github.test"


def described(**result: Any) -> ProviderDescription:
    table = {
        "base_url": BASE,
        "auth": {"secret_env": "GH_TOKEN"},
        "create": {"path": "/runs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": "/runs/{job_id}", "state": "/s", "state_map": {"done": "succeeded"}},
        "result": {"source": "path", "path": "/runs/{job_id}/logs", "format": "binary", **result},
    }
    return parse_providers({"providers": {"gh": table}}, "test.toml", {"GH_TOKEN": "t0k"})["gh"]


DESC = described(follow_redirects=True)
FIRST = build_result_requests(DESC, "7", StatusFact(status_code=200))[0]


def test_follow_redirects_is_off_unless_asked() -> None:
    assert described().result.follow_redirects is False
    assert DESC.result.follow_redirects is True


def test_only_a_fetched_result_can_follow_redirects() -> None:
    with pytest.raises(ConfigError, match="follow_redirects: nothing is fetched"):
        described(source="inline", inline="", format="json", follow_redirects=True)


def test_a_same_origin_hop_keeps_the_credential_and_resolves_relative_locations() -> None:
    hop = build_redirect(DESC, FIRST, "logs/archive")
    assert hop.url == f"{BASE}/runs/7/logs/archive"
    assert hop.headers["Authorization"] == "Bearer t0k"
    assert hop.method == "GET" and hop.action == "result"
    explicit_port = build_redirect(DESC, FIRST, "https://API.github.test:443/x")
    assert explicit_port.headers["Authorization"] == "Bearer t0k"


@pytest.mark.parametrize(
    "location",
    [
        "https://blobs.github.test/logs.zip?sig=abc",
        "http://api.github.test/logs.zip",  # another scheme is another origin
        "https://api.github.test:8443/logs.zip",  # and another port
    ],
)
def test_a_hop_off_the_providers_origin_drops_the_credential(location: str) -> None:
    hop = build_redirect(DESC, FIRST, location)
    assert "Authorization" not in hop.headers
    assert "Authorization" in hop.secret_headers  # still redacted should it reappear
    back = build_redirect(DESC, hop, f"{BASE}/again")
    assert "Authorization" not in back.headers  # once dropped, it stays dropped


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("ftp://files.test/logs.zip", "not an http(s) URL"),
        ("javascript:alert(1)", "not an http(s) URL"),
        ("https://h.test/a\nb", "control character"),
        ("https://h.test:99999/x", "cannot be parsed"),
    ],
)
def test_a_redirect_nowhere_we_fetch_from_is_refused(location: str, problem: str) -> None:
    with pytest.raises(RequestBuildError, match=re.escape(problem)):
        build_redirect(DESC, FIRST, location)


def test_a_redirect_answer_is_not_called_unavailable() -> None:
    check = validate_result(DESC, HttpResponse(302, {"Location": "/x"}), None)
    assert not check.ok and not check.unavailable
    assert check.reason == (
        "result fetch answered HTTP 302: redirect not followed (set result.follow_redirects)"
    )
