"""`result.empty_without_items`: a JSON document without its item list holds none.
BigQuery's query results leave `rows` out when the query returned no row
(`{"totalRows": "0", "schema": ..., "jobComplete": true}`); before, such a result
was refused ("missing item list /rows") and a query that matched nothing ended
result_validation_failed, for a human."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import ConfigError, HttpResponse, parse_providers, validate_result
from shared.providers.description import ProviderDescription
from shared.providers.responses import result_next_page


def load(**result: Any) -> ProviderDescription:
    table = {
        "base_url": "https://bigquery.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": "/jobs/{job_id}", "state": "/s", "state_map": {"DONE": "succeeded"}},
        "result": {"source": "path", "path": "/queries/{job_id}", "format": "json"} | result,
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def page(body: Any) -> HttpResponse:
    return HttpResponse(200, {"content-type": "application/json"}, json.dumps(body).encode())


NO_ROW = {"totalRows": "0", "schema": {"fields": []}, "jobComplete": True}


def test_a_document_without_its_list_holds_no_item() -> None:
    check = validate_result(load(items="/rows", empty_without_items=True), page(NO_ROW), None)
    assert check.ok, check.reason
    assert (check.items_total, check.items_failed) == (0, 0)


def test_without_the_key_it_is_refused_and_a_list_of_another_type_always_is() -> None:
    refused = validate_result(load(items="/rows"), page(NO_ROW), None)
    assert not refused.ok and "missing item list /rows" in refused.reason
    desc = load(items="/rows", empty_without_items=True)
    wrong = validate_result(desc, page(NO_ROW | {"rows": "none"}), None)
    assert not wrong.ok and "missing item list /rows" in wrong.reason


def test_a_page_without_its_list_ends_an_offset_paged_result() -> None:
    pages = {"offset_param": "startIndex"}
    desc = load(items="/rows", empty_without_items=True, pages=pages)
    assert result_next_page(desc, page(NO_ROW), "10") is None


@pytest.mark.parametrize(
    "result", [{"empty_without_items": True}, {"items": "", "empty_without_items": True}]
)
def test_the_key_needs_a_named_item_list(result: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="empty_without_items: only with format = json"):
        load(**result)
