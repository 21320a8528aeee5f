"""Which 4xx status reads count toward a human as refused (`_passing_codes`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from reconciler.steps.poll import _passing_codes
from shared.providers import parse_providers


def test_a_code_read_for_the_jobs_state_is_no_refused_read() -> None:
    """A 4xx `status.state_in_error_statuses` lists is read for the job's state:
    such reads saw the job (409 with {"status": "running"}), as a code
    state_from_http_status maps does. Before, they were counted as refused reads,
    never breaking the run: a job read running on it for hours went to a human on
    the first 401 blip, "the last N status reads were refused"."""
    table: dict[str, Any] = {
        "base_url": "https://api.example.test",
        "create": {"path": "/v1/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/jobs/{job_id}",
            "state": "/status",
            "state_map": {"running": "running", "done": "succeeded"},
            "state_in_error_statuses": [409],
        },
        "result": {"source": "inline", "inline": "/output"},
    }
    desc = parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]
    step = cast(Any, SimpleNamespace(adapter=SimpleNamespace(desc=desc)))
    passing = _passing_codes(step)
    assert 409 in passing
    assert 401 not in passing and 403 not in passing
