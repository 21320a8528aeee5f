"""Progress reported as a share of 1 (`status.progress_fraction`): Runway's 0.42 is 42 %.

A new user describing Runway found no key for it: `progress_percent` kept 0.42
as 0.42 %, which the agent reads and the forecast builds on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers import ConfigError, parse_providers
from shared.providers.messages import HttpResponse
from shared.providers.responses import parse_status
from tests.fixtures_providers.rig import SETTLE_TIMEOUT_SECONDS, PresetRig
from tests.fixtures_providers.unseen_media import RunwayFixture
from tests.integration.test_unseen_fal_runway import IMAGE, runway

S = LocalState


def _described(**status: Any) -> Any:
    table = {
        "base_url": "https://api.example.com",
        "create": {"path": "/v1/tasks", "idempotency": "none", "job_id": "/id"},
        "status": {
            "path": "/v1/tasks/{job_id}",
            "state": "/status",
            "state_map": {"RUNNING": "running", "SUCCEEDED": "succeeded"},
            **status,
        },
        "result": {"source": "inline", "inline": "/output", "format": "json"},
    }
    return parse_providers({"providers": {"p": table}}, "config.toml", {})["p"]


def _read(desc: Any, body: bytes) -> Any:
    resp = HttpResponse(status_code=200, headers={}, body=body, elapsed=0.01, url="")
    return parse_status(desc, resp)


@pytest.mark.parametrize(
    ("body", "percent"),
    [
        (b'{"status": "RUNNING", "progress": 0.42}', 42.0),
        (b'{"status": "RUNNING", "progress": 0}', 0.0),
        (b'{"status": "RUNNING", "progress": 1}', 100.0),
        (b'{"status": "RUNNING", "progress": "0.5"}', 50.0),
        (b'{"status": "RUNNING"}', None),
        # out of range: kept as read (times 100) for the record's checks to name
        (b'{"status": "RUNNING", "progress": 42}', 4200.0),
    ],
)
def test_a_fraction_is_read_as_its_percent(body: bytes, percent: float | None) -> None:
    fact = _read(_described(progress_fraction="/progress"), body)
    assert fact.progress_percent == percent


def test_without_the_key_a_fraction_is_not_a_percent_of_anything() -> None:
    assert _read(_described(), b'{"status": "RUNNING", "progress": 0.42}').progress_percent is None


def test_percent_and_fraction_exclude_each_other() -> None:
    with pytest.raises(ConfigError, match="progress_percent and progress_fraction"):
        _described(progress_percent="/p", progress_fraction="/progress")


async def _progress(r: PresetRig, op_id: str) -> float:
    """Run the reconciler until the operation shows a progress (the task running)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        await r.reconciler.run_once()
        value = await r.pool.fetchval(
            "SELECT progress_percent FROM operations WHERE operation_id = $1", op_id
        )
        if value is not None:
            return float(value)
    raise AssertionError(f"{op_id} never showed a progress: {await r.history(op_id)}")


async def test_runways_running_task_shows_42_percent(pool: Any, tmp_path: Path) -> None:
    fx = RunwayFixture()
    async with runway(pool, tmp_path, fx, status={"progress_fraction": "/progress"}) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})  # running at 0.42, never ends
        assert await _progress(r, op_id) == 42.0
        assert await r.state(op_id) is S.OBSERVING
