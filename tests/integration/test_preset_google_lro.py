"""The `google_lro` preset against an AIP-151 operation fixture, end to end."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.providers import build_create, describe_guarantees, parse_providers
from tests.fixtures_providers.google_lro import ACCESS_TOKEN, CREATE_PATH, GoogleLROFixture
from tests.fixtures_providers.rig import preset_rig

S = LocalState
ENV = {"GOOGLE_ACCESS_TOKEN": ACCESS_TOKEN}
OVERRIDES = {"create": {"path": CREATE_PATH}}


def widget(scenario: str) -> dict[str, Any]:
    return {"displayName": scenario, "sizeGb": 10}


def rig(pool: Any, tmp_path: Path, fixture: GoogleLROFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fixture.app(),
        preset="google_lro",
        name="widgets",
        env=ENV,
        overrides=OVERRIDES,
    )


async def test_done_operation_response_is_the_result(pool: Any, tmp_path: Path) -> None:
    fx = GoogleLROFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(widget("happy"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.SUCCEEDED
        op = await r.op(op_id)
        assert op.remote_job_id == "projects/p/locations/l/operations/op-0001"
        stored = await pool.fetchval(
            "SELECT inline FROM results WHERE result_id = $1", op.result_id
        )
        assert stored["displayName"] == "happy"
        # while running, `done` was absent (proto3 JSON): read as running, not as finished
        raw = await pool.fetch(
            "SELECT remote_state_raw FROM observations WHERE operation_id = $1 ORDER BY 1", op_id
        )
        assert {row[0] for row in raw} == {"done=false", "done=true"}


async def test_done_with_an_error_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = GoogleLROFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(widget("failed"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.FAILED}) is S.FAILED
        op = await r.op(op_id)
        assert op.remote_state_raw == "done=true error=3"
        assert op.last_error == {"code": "3", "message": "widget size out of range"}


async def test_cancel_is_confirmed_by_error_code_1(pool: Any, tmp_path: Path) -> None:
    fx = GoogleLROFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(widget("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED}) is S.CANCELLED
        assert fx.registry.calls["cancel"] == 1
        assert (await r.op(op_id)).remote_state_raw == "done=true error=1"
        (cancel,) = await r.calls(op_id, "cancel")
        assert cancel["url"].endswith("/operations/op-0001:cancel")


async def test_lost_create_response_is_retried_with_the_same_request_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = GoogleLROFixture()
    async with rig(pool, tmp_path, fx) as r:
        op_id = await r.submit(widget("lost"))
        assert await r.settle(op_id, {S.SUCCEEDED, S.NEEDS_ATTENTION}) is S.SUCCEEDED
        assert len(fx.registry.jobs) == 1  # one operation at Google
        assert fx.registry.calls["create"] == 2  # the retry found it by requestId
        first, second = fx.request_ids
        assert first == second
        assert uuid.UUID(first).version == 4 and len(first) == 36  # AIP-155 wants a UUID
        assert (await r.op(op_id)).create_attempts == 2
        assert "create_unknown" in await r.history(op_id)


def test_a_method_without_request_id_switches_to_no_idempotency() -> None:
    document = {
        "providers": {
            "legacy": {
                "preset": "google_lro",
                "create": {"path": CREATE_PATH, "idempotency": "none"},
            }
        }
    }
    desc = parse_providers(document, "config.toml", ENV)["legacy"]
    request = build_create(
        desc, body=widget("happy"), idempotency_token="idem_1", client_reference="op_1"
    )
    assert "requestId" not in request.json
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"][0] is False
    assert report["lookup after lost response"][1].startswith(
        "create after a lost response cannot be reconciled automatically"
    )


def test_guarantees_request_id_and_best_effort_cancel() -> None:
    document = {"providers": {"widgets": {"preset": "google_lro", "create": {"path": CREATE_PATH}}}}
    desc = parse_providers(document, "config.toml", ENV)["widgets"]
    report = {name: (holds, why) for name, holds, why in describe_guarantees(desc)}
    assert report["at-most-once create"] == (
        True,
        "the token travels (as a UUID derived from it) in the body field requestId; a retry "
        "after a lost response returns the original job",
    )
    assert report["lookup after lost response"][0] is False
    assert report["cancellable"][0] is True
    assert report["webhooks signed"][0] is False
    assert report["result integrity checked"][0] is False
