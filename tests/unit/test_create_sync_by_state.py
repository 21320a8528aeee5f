"""A create answered done is told by its body's state, not only by its HTTP status.

Dropbox's files/save_url answers 200 either way: {".tag": "async_job_id",
"async_job_id": ...} for a job to check, or {".tag": "complete", <the file's
metadata>} when the save is already done. Before, `create.sync_result` was read
only for a status in `sync_result_statuses`, so the completion (no job id) was an
ambiguous create, sent to a human; and `sync_result` written without those
statuses was silently never read.
"""

from __future__ import annotations

import json
from typing import Any

from shared.providers.description import ProviderDescription
from shared.providers.messages import HttpResponse
from shared.providers.responses import parse_create
from tests.unit.test_providers_loader import acme, config_error, load

DROPBOX_CREATE = {
    "idempotency": "none",
    "job_id": "/async_job_id",
    "state": "/.tag",
    "sync_result": "",
    "accepted_statuses": [200],
}
STATE_MAP = {"async_job_id": "pending", "in_progress": "running", "complete": "succeeded"}


def dropbox() -> ProviderDescription:
    return load(acme(create=DROPBOX_CREATE, status={"state_map": STATE_MAP}))


def answer(code: int, body: dict[str, Any]) -> HttpResponse:
    return HttpResponse(code, {"content-type": "application/json"}, json.dumps(body).encode())


def test_a_create_whose_state_reads_succeeded_is_its_result() -> None:
    done = {".tag": "complete", "id": "id:a4ayc", "path_lower": "/inbox/now.pdf"}
    fact = parse_create(dropbox(), answer(200, done))
    assert fact.kind == "sync_result" and fact.sync_result == done


def test_a_create_naming_a_job_is_still_accepted() -> None:
    fact = parse_create(dropbox(), answer(200, {".tag": "async_job_id", "async_job_id": "j1"}))
    assert fact.kind == "accepted" and fact.remote_job_id == "j1"


def test_a_success_state_outside_accepted_statuses_is_no_result() -> None:
    done = {".tag": "complete", "id": "id:a4ayc"}
    fact = parse_create(dropbox(), answer(299, done))
    assert fact.kind == "ambiguous"


def test_sync_result_with_nothing_to_tell_it_by_is_refused() -> None:
    create = {k: v for k, v in DROPBOX_CREATE.items() if k != "state"}
    message = config_error(acme(create=create, status={"state_map": STATE_MAP}))
    assert message.startswith("config.toml: providers.acme.create.sync_result: needs")
