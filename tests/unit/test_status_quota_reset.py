"""A status read refused for a spent quota waits for the quota's reset. GitHub answers
past its primary rate limit 403 with `x-ratelimit-remaining: 0` and
`x-ratelimit-reset` (a UTC epoch), no Retry-After: before, the read was retried at
the backoff, each try refused until the reset and spending the next window early."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.providers import HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription
from shared.providers.responses import parse_status

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def load() -> ProviderDescription:
    table = {
        "base_url": "https://api.github.example",
        "create": {"path": "/dispatches", "idempotency": "none", "job_id": "/workflow_run_id"},
        "status": {
            "path": "/runs/{job_id}",
            "state": "/status",
            "state_map": {"in_progress": "running", "completed": "succeeded"},
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]


def read(headers: dict[str, str]) -> StatusFact:
    return parse_status(load(), HttpResponse(403, headers, b'{"message": "API rate limit"}'), NOW)


def test_an_epoch_reset_is_the_wait() -> None:
    reset = str(int(NOW.timestamp()) + 120)
    fact = read({"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})
    assert fact.rate_limited and fact.retry_after_seconds == 120.0


def test_a_delay_reset_is_the_wait_and_retry_after_wins() -> None:
    fact = read({"RateLimit-Remaining": "0", "RateLimit-Reset": "30"})
    assert fact.retry_after_seconds == 30.0
    both = read({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30", "retry-after": "5"})
    assert both.retry_after_seconds == 5.0


def test_a_reset_without_a_spent_quota_or_past_is_no_wait_beyond_now() -> None:
    unspent = read({"x-ratelimit-remaining": "12", "x-ratelimit-reset": "30"})
    assert unspent.retry_after_seconds is None
    past = str(int(NOW.timestamp()) - 60)
    fact = read({"x-ratelimit-remaining": "0", "x-ratelimit-reset": past})
    assert fact.retry_after_seconds == 0.0
