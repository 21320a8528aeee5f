"""A provider jobwarden has no preset for, described in TOML alone, on every path.

"Acme Exports" (examples/acme_exports/) is the simulator in another API's
clothes: its own paths and field names, upper-case state words, the
idempotency key in a body field, cancel by DELETE, a lookup under its own
query parameter, CSV results with `;` and its own column names checked by
Content-Digest, and webhooks signed like Stripe under a header of its own.
`provider.toml` is exactly what a user would write from the README; no
plugin, no preset. Each test drives one job path through the real
reconciler (and, for webhooks, the real receiver) to its right end state.
"""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shared import ledger
from shared.ledger.states import LocalState
from shared.simulator import SimulatorSettings
from shared.simulator.shape import ApiShape
from tests.harness import Rig, rig, webhook_rig
from tests.support import history_states

S = LocalState
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acme_exports"
PROVIDER: dict[str, Any] = tomllib.loads((EXAMPLE / "provider.toml").read_text())["providers"][
    "acme"
]
NAME = "acme"


# How Acme's key travels, in the simulator's shape and in the TOML a user writes.
IDEMPOTENCY: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "body": ({}, {}),
    "header": (
        {"idempotency_field": "", "idempotency_header": "X-Acme-Idempotency-Key"},
        {"idempotency": "header", "idempotency_header": "X-Acme-Idempotency-Key"},
    ),
    "none": ({"idempotency_field": ""}, {"idempotency": "none"}),
}


def _described(idempotency: str) -> tuple[SimulatorSettings, dict[str, Any]]:
    shape_keys, create_keys = IDEMPOTENCY[idempotency]
    sim = SimulatorSettings().with_shape_file(EXAMPLE / "shape.toml")
    if shape_keys:
        table = {**tomllib.loads((EXAMPLE / "shape.toml").read_text()), **shape_keys}
        del table["webhooks"]
        sim = replace(sim, shape=ApiShape.from_mapping(table))
    create = dict(PROVIDER["create"])
    if create_keys:
        del create["idempotency_body_field"]
        create.update(create_keys)
    return sim, {**PROVIDER, "create": create}


@contextlib.asynccontextmanager
async def acme(
    pool: Any, tmp_path: Path, *, webhooks: bool = False, idempotency: str = "body"
) -> AsyncIterator[Rig]:
    """The reconciler (and the receiver, with webhooks) against Acme.

    The simulator signs as shape.toml says; the receiver verifies as
    provider.toml says: two descriptions that must agree, as with a real API.
    """
    sim, described = _described(idempotency)
    if webhooks:
        dressed = {
            "shape": sim.shape,
            "webhook_scheme": sim.webhook_scheme,
            "webhook_options": sim.webhook_options,
        }
        async with webhook_rig(pool, tmp_path, described=described, name=NAME, **dressed) as r:
            yield r
        return
    async with rig(pool, tmp_path, sim=sim, described=described, name=NAME) as r:
        yield r


async def _result(pool: Any, op_id: str) -> Any:
    return await pool.fetchrow(
        "SELECT r.valid, r.items_total, r.items_succeeded, r.items_failed, r.content_type,"
        " (SELECT array_agg(f.message ORDER BY f.item_key) FROM result_item_failures f"
        "  WHERE f.result_id = r.result_id) AS failures"
        " FROM results r WHERE r.operation_id = $1",
        op_id,
    )


async def _escalation_reason(pool: Any, op_id: str) -> str:
    reason: str = await pool.fetchval(
        "SELECT reason FROM escalations WHERE operation_id = $1 ORDER BY 1 DESC LIMIT 1", op_id
    )
    return reason


async def _calls(pool: Any, op_id: str, kind: str) -> list[Any]:
    return await pool.fetch(
        "SELECT method, url, status_code, provider_request_id, started_at, finished_at"
        " FROM provider_calls WHERE operation_id = $1 AND call_kind = $2 ORDER BY call_id",
        op_id,
        kind,
    )


async def test_success_by_webhook(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path, webhooks=True) as r:
        op_id = await r.submit("success", duration=0.2, total=5, result_format="csv")
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
    events = await pool.fetch(
        "SELECT remote_state::text, remote_state_raw FROM webhook_events WHERE operation_id = $1",
        op_id,
    )
    # verified (nothing unverified is stored), matched by job id, in Acme's words
    assert ("succeeded", "COMPLETED") in {(e[0], e[1]) for e in events}
    # the webhook woke the reconciler: the 30 s backstop never had to read
    assert len(await _calls(pool, op_id, "status")) <= 2
    row = await _result(pool, op_id)
    assert row["valid"] and (row["items_total"], row["items_succeeded"]) == (5, 5)


async def test_success_by_polling(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("success", duration=0.3, total=4, result_format="csv")
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
    [create] = await _calls(pool, op_id, "create")
    assert create["method"] == "POST" and create["url"].endswith("/api/v2/exports")
    assert create["provider_request_id"] is not None  # from Acme-Request-Id
    op = await ledger.load_operation(pool, op_id)
    assert op.remote_job_id is not None and op.remote_job_id.startswith("job_")
    observed = await pool.fetch(
        "SELECT DISTINCT remote_state_raw FROM observations WHERE operation_id = $1", op_id
    )
    assert "COMPLETED" in {o[0] for o in observed}
    assert (await _result(pool, op_id))["items_succeeded"] == 4


async def test_late_failure(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("late_failure", duration=0.3)
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
    op = await ledger.load_operation(pool, op_id)
    assert op.last_error is not None and op.last_error["code"] == "worker_crashed"
    assert op.result_id is None
    assert await history_states(pool, op_id) == [
        "create_pending",
        "accepted",
        "observing",
        "failed",
    ]


async def test_partial_csv_is_counted_with_its_failed_rows(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("partial", duration=0.2, total=6, failed=2, result_format="csv")
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED}) is S.SUCCEEDED
    row = await _result(pool, op_id)
    assert row["valid"] and row["content_type"].startswith("text/csv")
    assert (row["items_total"], row["items_succeeded"], row["items_failed"]) == (6, 4, 2)
    assert len(row["failures"]) == 2 and all("was rejected" in m for m in row["failures"])
    view = await pool.fetchrow(
        "SELECT outcome, done FROM agent_operations WHERE operation_id = $1", op_id
    )
    assert (view["outcome"], view["done"]) == ("completed_with_errors", True)


@pytest.mark.parametrize("idempotency", ["body", "header"])
async def test_lost_create_response_runs_the_export_once(
    pool: Any, tmp_path: Path, idempotency: str
) -> None:
    async with acme(pool, tmp_path, idempotency=idempotency) as r:
        op_id = await r.submit("lost_create_response", duration=0.2, hang_seconds=5)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=20) is S.SUCCEEDED
        stats = await r.stats()
    op = await ledger.load_operation(pool, op_id)
    assert stats["jobs_total"] == 1
    # the retry carried the same key where Acme looks for it: one export, under our token
    assert stats["creates_per_token"] == {op.idempotency_token: 1}
    assert op.create_attempts == 2
    assert (await history_states(pool, op_id))[:3] == [
        "create_pending",
        "create_unknown",
        "accepted",
    ]


async def test_lost_create_response_without_idempotency_is_found_by_lookup(
    pool: Any, tmp_path: Path
) -> None:
    async with acme(pool, tmp_path, idempotency="none") as r:
        op_id = await r.submit("lost_create_response", duration=0.2, hang_seconds=5)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=20) is S.SUCCEEDED
        stats = await r.stats()
    assert stats["jobs_total"] == 1
    assert (await ledger.load_operation(pool, op_id)).create_attempts == 1  # never re-sent
    lookups = await _calls(pool, op_id, "lookup")
    assert lookups and "reference=" in lookups[0]["url"]


async def test_cancel_is_confirmed_by_acme(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("never_finishes")
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="wrong month")
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        op = await ledger.load_operation(pool, op_id)
        assert (await r.stats())["cancels_per_job"] == {op.remote_job_id: 1}
    [cancel] = await _calls(pool, op_id, "cancel")
    assert cancel["method"] == "DELETE" and cancel["url"].endswith(f"/{op.remote_job_id}")
    assert (await history_states(pool, op_id))[-3:] == [
        "cancel_requested",
        "cancelling",
        "cancelled",
    ]


async def test_a_result_arriving_during_the_cancel_is_collected(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("cancel_race", duration=30, result_format="csv")
        await r.settle(op_id, {S.OBSERVING})
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="stop")
        assert await r.settle(op_id, {S.SUCCEEDED, S.CANCELLED}) is S.SUCCEEDED
    assert (await history_states(pool, op_id))[-4:] == [
        "cancel_requested",
        "cancelling",
        "result_collecting",
        "succeeded",
    ]


async def test_a_download_whose_bytes_differ_from_its_digest_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("checksum_mismatch", duration=0.1, result_format="csv")
        final = await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED})
    assert final is S.RESULT_VALIDATION_FAILED
    assert "digest" in (await _escalation_reason(pool, op_id)).lower()


async def test_an_expired_download_link_is_result_unavailable(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("expiring_result", duration=0.1, result_ttl=0.0)
        final = await r.settle(op_id, {S.RESULT_UNAVAILABLE, S.SUCCEEDED})
    assert final is S.RESULT_UNAVAILABLE
    results = await _calls(pool, op_id, "result")
    assert results and all(c["status_code"] == 410 for c in results)


async def test_rate_limiting_waits_out_retry_after(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("rate_limited", duration=0.1, limited_reads=1, retry_after=1)
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        assert (await r.stats())["retry_after_violations_total"] == 0
    calls = await _calls(pool, op_id, "status")
    assert calls[0]["status_code"] == 429
    gap = (calls[1]["started_at"] - calls[0]["finished_at"]).total_seconds()
    assert gap >= 0.9, f"read again {gap:.2f}s after a Retry-After of 1s"


async def test_a_cancelled_exports_partial_csv_is_kept(pool: Any, tmp_path: Path) -> None:
    """Its total stays the job's size; the rows are what it did (succeeded + failed)."""
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit(
            "cancellable", duration=30, total=8, failed=2, cancel_delay=0.2, partial_on_cancel=True
        )
        await r.run_until(lambda: _progressed(pool, op_id))
        async with pool.acquire() as conn:
            await ledger.request_cancel(conn, op_id, requested_by="human:ann", reason="enough")
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
    row = await _result(pool, op_id)
    assert row is not None and row["valid"], "the partial output was thrown away"
    assert row["items_succeeded"] + row["items_failed"] < 8


async def _progressed(pool: Any, op_id: str) -> bool:
    done = await pool.fetchval(
        "SELECT max(progress_completed) FROM observations WHERE operation_id = $1", op_id
    )
    return bool(done and done >= 1)


async def test_an_export_missing_a_required_column_is_refused(pool: Any, tmp_path: Path) -> None:
    async with acme(pool, tmp_path) as r:
        op_id = await r.submit("invalid_result", duration=0.1, total=3)
        final = await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED})
    assert final is S.RESULT_VALIDATION_FAILED
    assert "value" in await _escalation_reason(pool, op_id)
