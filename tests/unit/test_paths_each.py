"""`[*]`: every element of a list, for `result.file_ids` (paths.py).

CloudConvert's export task names its files as objects ({"filename", "size",
"url"}): a PDF made PNG pages exports one per page. Before, no path could name
every file's URL (`[*]` was "not a selector"), and `files/0/url` stored the
first page as the whole result.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.messages import HttpResponse
from shared.providers.paths import EACH, PathSyntaxError, extract, parse_path, writable_keys
from shared.providers.responses import parse_status

FILES = "/data/tasks/[operation=export/url]/result/files/[*]/url"


def job(*files: dict[str, Any]) -> dict[str, Any]:
    export = {"operation": "export/url", "status": "finished", "result": {"files": list(files)}}
    return {"data": {"id": "j1", "status": "finished", "tasks": [export]}}


def page(n: int) -> dict[str, Any]:
    return {"filename": f"p{n}.png", "url": f"https://storage.example.test/p{n}.png"}


def provider(file_ids: Any, fmt: str = "json") -> ProviderDescription:
    table = {
        "base_url": "https://api.cloudconvert.test",
        "create": {"path": "/v2/jobs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/v2/jobs/{job_id}",
            "state": "/data/status",
            "state_map": {"finished": "succeeded", "error": "failed"},
        },
        "result": {"source": "files", "file_ids": file_ids, "format": fmt},
    }
    return parse_providers({"providers": {"cc": table}}, "test.toml", {})["cc"]


def test_each_reads_the_rest_of_the_path_in_every_element() -> None:
    path = parse_path(FILES, each=True)
    assert EACH in path.segments
    assert extract(path, job(page(1), page(2))) == [page(1)["url"], page(2)["url"]]
    dotted = parse_path("data.tasks[operation=export/url].result.files[*].url", each=True)
    assert extract(dotted, job(page(1))) == [page(1)["url"]]


def test_an_element_without_the_value_reads_none_in_its_place_and_no_list_none() -> None:
    path = parse_path(FILES, each=True)
    assert extract(path, job(page(1), {"filename": "x"})) == [page(1)["url"], None]
    assert extract(path, job()) == []
    assert extract(path, {"data": {"tasks": [{"operation": "export/url", "result": None}]}}) is None


def test_each_is_refused_unless_asked_for_and_once_per_path() -> None:
    with pytest.raises(PathSyntaxError, match=r"read only where a list of values is wanted"):
        parse_path(FILES)
    with pytest.raises(PathSyntaxError, match=r"one \[\*\] per path"):
        parse_path("/a/[*]/b/[*]/c", each=True)
    with pytest.raises(PathSyntaxError, match="is read, never written"):
        writable_keys(parse_path("/a/[*]/b", each=True))


def test_a_description_takes_each_in_file_ids_only() -> None:
    assert provider(FILES).result.file_ids == (parse_path(FILES, each=True),)
    with pytest.raises(ConfigError, match=r"providers\.cc\.status\.result_url.*\[\*\]"):
        parse_providers(
            {
                "providers": {
                    "cc": {
                        "base_url": "https://api.cloudconvert.test",
                        "create": {"path": "/v2/jobs", "idempotency": "none", "job_id": "/id"},
                        "status": {
                            "path": "/v2/jobs/{job_id}",
                            "state": "/s",
                            "state_map": {"done": "succeeded"},
                            "result_url": FILES,
                        },
                        "result": {"source": "url"},
                    }
                }
            },
            "test.toml",
            {},
        )


def response(body: Any) -> HttpResponse:
    raw = httpx.Response(200, json=body)
    return HttpResponse(200, dict(raw.headers), raw.content)


def test_a_final_read_names_every_exported_file_or_none() -> None:
    desc = provider(FILES)
    fact = parse_status(desc, response(job(page(1), page(2), page(3))))
    assert fact.result_file_ids == tuple(page(n)["url"] for n in (1, 2, 3))
    # a file named without its URL: part of a result is never fetched as the whole
    fact = parse_status(desc, response(job(page(1), {"filename": "p2.png"})))
    assert fact.result_file_ids == ()
