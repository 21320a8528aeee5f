"""`create.poll_after_seconds`: the create answer's word on when the first read is
worth making (ElevenLabs' dubbing answers {"dubbing_id", "expected_duration_sec"},
which no status read repeats).

A new user describing ElevenLabs found no key for it: `status.poll_after_seconds`
reads status answers only, and the create's hint was lost (the first read came at
the backoff's first step, then the backoff's climb).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.providers import ConfigError, parse_create, parse_providers
from shared.providers.messages import HttpResponse


def _described(**create: Any) -> Any:
    table = {
        "base_url": "https://api.example.com",
        "create": {"path": "/v1/dubbing", "idempotency": "none", "job_id": "/dubbing_id", **create},
        "status": {
            "path": "/v1/dubbing/{job_id}",
            "state": "/status",
            "state_map": {"dubbing": "running", "dubbed": "succeeded"},
        },
        "result": {"source": "none"},
    }
    return parse_providers({"providers": {"p": table}}, "config.toml", {})["p"]


def _created(body: Any, headers: dict[str, str] | None = None) -> HttpResponse:
    return HttpResponse(status_code=200, headers=headers or {}, body=json.dumps(body).encode())


@pytest.mark.parametrize(
    ("hint", "seconds"),
    [(42.5, 42.5), (30, 30.0), ("PT2M", 120.0), ("90s", 90.0), (None, None), (-3, None)],
)
def test_the_create_answers_hint_is_read(hint: Any, seconds: float | None) -> None:
    desc = _described(poll_after_seconds="/expected_duration_sec")
    fact = parse_create(desc, _created({"dubbing_id": "d1", "expected_duration_sec": hint}))
    assert fact.kind == "accepted"
    assert fact.poll_after_seconds == seconds


def test_without_the_key_no_hint_is_read() -> None:
    fact = parse_create(_described(), _created({"dubbing_id": "d1", "expected_duration_sec": 9}))
    assert fact.poll_after_seconds is None


def test_a_hint_in_a_header_is_read() -> None:
    desc = _described(poll_after_seconds="header:X-Expected-Seconds")
    fact = parse_create(desc, _created({"dubbing_id": "d1"}, {"X-Expected-Seconds": "12"}))
    assert fact.poll_after_seconds == 12.0


def test_a_hint_that_is_no_path_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"create\.poll_after_seconds"):
        _described(poll_after_seconds=30)
