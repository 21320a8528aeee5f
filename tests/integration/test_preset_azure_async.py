"""The `azure_async` preset against an Azure long-running operation fixture, end to end."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.harness import TestClock
from shared.ledger.states import LocalState
from shared.providers import describe_guarantees, parse_providers
from tests.fixtures_providers.azure import ACCESS_TOKEN, CREATE_PATH, AzureFixture
from tests.fixtures_providers.rig import preset_rig

S = LocalState
ENV = {"AZURE_ACCESS_TOKEN": ACCESS_TOKEN}
# The operation's `result` is kept by overriding the preset's result table.
KEEP_RESULT = {"create": {"path": CREATE_PATH}, "result": {"source": "inline", "inline": "/result"}}


def analyze(scenario: str) -> dict[str, Any]:
    return {"scenario": scenario, "source": "https://example.com/widget.png"}


def rig(
    pool: Any,
    tmp_path: Path,
    fixture: AzureFixture,
    overrides: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fixture.app(),
        preset="azure_async",
        name="widgets",
        env=ENV,
        overrides=overrides or {"create": {"path": CREATE_PATH}},
        **kwargs,
    )


async def test_status_monitor_result_is_collected(pool: Any, tmp_path: Path) -> None:
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx, KEEP_RESULT) as r:
        op_id = await r.submit(analyze("happy"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        (sent,) = fx.operation_ids
        assert sent is not None and uuid.UUID(sent).version == 4
        assert op.remote_job_id == sent  # we chose the operation id
        assert op.status_url == f"{r.url}/operations/{sent}?api-version=2024-01-01"
        stored = await pool.fetchval(
            "SELECT inline FROM results WHERE result_id = $1", op.result_id
        )
        assert stored == {"widgets": 3, "label": "ok"}


async def test_failed_operation_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(analyze("failed"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.last_error == {
            "code": "InvalidWidget",
            "message": "The widget is not analyzable.",
        }


async def test_lost_create_response_is_retried_with_the_same_operation_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = AzureFixture()
    # The 60 s no-hint delay also spaces create retries; shorten it for the test.
    quick = {"create": {"path": CREATE_PATH}, "limits": {"default_poll_after_seconds": 0.05}}
    async with rig(pool, tmp_path, fx, quick) as r:
        op_id = await r.submit(analyze("lost"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.NEEDS_ATTENTION}) is S.SUCCEEDED
        assert len(fx.registry.jobs) == 1
        first, second = fx.operation_ids
        assert first == second  # the retry is recognised, not a second operation
        assert "create_unknown" in await r.history(op_id)


@pytest.mark.parametrize(
    ("scenario", "waiting_in"),
    [
        ("no_retry_after", S.OBSERVING),  # a read without Retry-After
        # a 202 without one: not read at once either (it would only say NotStarted)
        ("silent_accept", S.ACCEPTED),
    ],
)
async def test_without_retry_after_the_next_read_waits_sixty_seconds(
    pool: Any, tmp_path: Path, scenario: str, waiting_in: S
) -> None:
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(analyze(scenario))
        await r.settle(op_id, {waiting_in})
        op = await r.op(op_id)
        assert op.next_poll_at is not None
        wait = (op.next_poll_at - datetime.now(UTC)).total_seconds()
        assert 55.0 <= wait <= 60.5, wait
        assert fx.registry.calls["status"] == (0 if waiting_in is S.ACCEPTED else 1)


async def test_arm_location_is_polled_by_http_status(pool: Any, tmp_path: Path) -> None:
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(analyze("arm_location"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.status_url is not None and "/arm/results/" in op.status_url
        raw = await pool.fetch(
            "SELECT remote_state_raw FROM observations WHERE operation_id = $1 ORDER BY 1", op_id
        )
        assert [row[0] for row in raw] == ["HTTP 200", "HTTP 202"]
        assert fx.registry.calls["location"] >= 2


async def test_cancel_is_unsupported_by_default(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Nothing is sent; the job is read on until the cancel deadline, then a human is
    asked, told why."""
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit(analyze("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=30.0)
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.CANCEL_REQUESTED  # read on, not escalated
        await clock.advance(31.0)
        final = await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED, S.CANCELLED})
        assert final is S.CANCELLATION_UNCONFIRMED
        assert "defines no standard cancel" in (await r.escalation(op_id))["reason"]
        assert await r.calls(op_id, "cancel") == []


def test_guarantees_client_chosen_id() -> None:
    document = {
        "providers": {"widgets": {"preset": "azure_async", "create": {"path": CREATE_PATH}}}
    }
    desc = parse_providers(document, "config.toml", ENV)["widgets"]
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"] == (
        True,
        "we choose the job id (a UUID derived from our token); a second create with it cannot "
        "make a second job",
    )
    assert report["lookup after lost response"][0] is False
    assert report["cancellable"][0] is False
    assert report["webhooks signed"][0] is False
    assert report["result integrity checked"] == (False, "the job produces no result document")


async def test_accepted_without_any_status_header_needs_a_human(pool: Any, tmp_path: Path) -> None:
    # The guidelines make Operation-Location (and ARM's headers) a SHOULD: a 202
    # without one leaves nothing to read. The job is kept, and a human is asked.
    fx = AzureFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(analyze("no_monitor"))
        assert await r.settle(op_id, {S.NEEDS_ATTENTION, S.SUCCEEDED}) is S.NEEDS_ATTENTION
        op = await r.op(op_id)
        (sent,) = fx.operation_ids
        assert op.remote_job_id == sent and op.status_url is None
        escalation = await r.escalation(op_id)
        assert escalation["state"] == "needs_attention"
        assert "status read cannot be built" in escalation["reason"]
        assert "no status URL" in escalation["reason"]
        assert fx.registry.calls["create"] == 1 and fx.registry.calls["status"] == 0
        assert await r.calls(op_id, "status") == []  # nothing was sent, nothing is on record
        assert await r.history(op_id) == ["create_pending", "accepted", "needs_attention"]
