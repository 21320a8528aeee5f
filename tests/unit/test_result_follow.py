"""`result.follow`: a fetched result document names the result's link (MiniMax's
file record, Azure AI Speech's files listing), and the result is what it answers.

What the description accepts and refuses, the link read from the document (never a
success when there is none), and the followed fetch built as a status-named result
URL's is: no credential off the provider's origins, internal hosts refused unless
allowed. The end-to-end collection is tests/integration/test_unseen_round53.py and
test_unseen_round52b.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import ConfigError, RequestBuildError, parse_providers
from shared.providers.messages import HttpResponse
from shared.providers.requests import build_followed
from shared.providers.results import followed_link

BASE = "https://api.acme.test"


def table(**result: Any) -> dict[str, Any]:
    """A provider whose result is one hop past a file record at /v1/files/{job_id}."""
    return {
        "base_url": BASE,
        "auth": {"header": "Authorization", "value": "Bearer {secret}", "secret_env": "ACME_KEY"},
        "create": {"path": "/v1/jobs", "idempotency": "header", "job_id": "/id"},
        "status": {
            "path": "/v1/jobs/{job_id}",
            "state": "/status",
            "state_map": {"running": "running", "done": "succeeded"},
        },
        "result": {
            "source": "path",
            "path": "/v1/files/{job_id}",
            "follow": "/file/download_url",
            "format": "binary",
            "expect": {"content_types": ["video/mp4"]},
            **result,
        },
    }


def load(description: dict[str, Any]) -> Any:
    return parse_providers({"providers": {"acme": description}}, "config.toml", {"ACME_KEY": "k"})[
        "acme"
    ]


def refused(description: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load(description)
    return str(caught.value)


def test_follow_loads_for_a_binary_result_one_hop_past_a_json_document() -> None:
    desc = load(table())
    assert desc.result.follow is not None and desc.result.follow.text == "/file/download_url"


def test_follow_is_refused_where_nothing_is_fetched() -> None:
    description = table(source="inline", inline="/output", format="json", expect={})
    del description["result"]["path"]
    message = refused(description)
    assert "acme.result.follow" in message and "status.result_url" in message, message


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"side_effects": True}, "result.side_effects"),
        ({"partial_on_cancel": True}, "result.partial_on_cancel"),
        ({"base64": "/video"}, "result.base64"),
        (
            {"format": "json", "expect": {}, "items": "/data", "pages": {"offset_param": "offset"}},
            "result.pages.offset_param",
        ),
    ],
)
def test_follow_is_refused_beside_what_it_cannot_be_safe_with(
    extra: dict[str, Any], named: str
) -> None:
    message = refused({**table(), "result": {**table()["result"], **extra}})
    assert "acme.result.follow: not with " + named in message, message


def test_a_paged_document_of_a_binary_result_loads() -> None:
    """The pages are the document's (JSON), not the followed result's: a binary
    result one hop past a paged listing is no 'binary result joined from pages'."""
    desc = load(table(pages={"next_page_url": "/next"}))
    assert desc.result.pages is not None


def doc(value: Any, url: str = f"{BASE}/v1/files/1") -> HttpResponse:
    return HttpResponse(
        200, {"content-type": "application/json"}, json.dumps(value).encode(), url=url
    )


def test_the_link_is_read_at_its_path() -> None:
    desc = load(table())
    link = "https://cdn.acme-storage.test/v.mp4?Signature=abc"
    assert followed_link(desc, doc({"file": {"download_url": link}})) == link


def test_a_document_naming_no_link_is_unavailable_in_the_providers_words() -> None:
    check = followed_link(
        load(table()), doc({"base_resp": {"status_code": 1013, "status_msg": "file not found"}})
    )
    assert not isinstance(check, str) and not check.ok and check.unavailable
    assert "no link at /file/download_url (result.follow)" in check.reason, check.reason
    assert "file not found" in check.reason, check.reason


def test_a_document_that_is_not_json_is_invalid_not_a_success() -> None:
    check = followed_link(load(table()), HttpResponse(200, {}, b"<html>oops</html>"))
    assert not isinstance(check, str) and not check.ok and not check.unavailable
    assert "not valid JSON" in check.reason, check.reason


def test_a_link_that_is_no_string_is_invalid() -> None:
    check = followed_link(load(table()), doc({"file": {"download_url": 42}}))
    assert not isinstance(check, str) and not check.ok and "a number" in check.reason


def test_the_followed_fetch_carries_no_credential_off_the_providers_origin() -> None:
    desc = load(table())
    req = build_followed(desc, f"{BASE}/v1/files/1", "https://cdn.acme-storage.test/v.mp4?s=1")
    assert req.method == "GET" and req.url == "https://cdn.acme-storage.test/v.mp4?s=1"
    assert "authorization" not in {k.lower() for k in req.headers}


def test_a_relative_link_resolves_against_the_document_and_keeps_the_credential() -> None:
    desc = load(table())
    req = build_followed(desc, f"{BASE}/v1/files/1", "../download/1.mp4")
    assert req.url == f"{BASE}/v1/download/1.mp4"
    assert req.headers.get("Authorization") == "Bearer k"


@pytest.mark.parametrize(
    "link",
    ["http://127.0.0.1:9/v.mp4", "http://localhost/v.mp4", "ftp://cdn.test/v.mp4"],
)
def test_a_link_to_an_internal_host_or_no_http_url_is_refused(link: str) -> None:
    with pytest.raises(RequestBuildError):
        build_followed(load(table()), f"{BASE}/v1/files/1", link)


def test_a_link_to_an_allowed_internal_host_is_built() -> None:
    desc = load(table(allowed_hosts=["localhost"]))
    req = build_followed(desc, f"{BASE}/v1/files/1", "http://localhost:8080/v.mp4")
    assert req.url == "http://localhost:8080/v.mp4"
    assert "authorization" not in {k.lower() for k in req.headers}


def test_a_link_with_a_user_name_is_refused() -> None:
    with pytest.raises(RequestBuildError, match="user name or password"):
        build_followed(load(table()), f"{BASE}/v1/files/1", "https://u:p@cdn.test/v.mp4")
