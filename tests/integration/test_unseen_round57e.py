"""dbt Cloud job runs, Fivetran connector syncs, Azure Data Factory pipeline runs and
Twelve Labs video indexing tasks, described in TOML as a new user would
(tests/fixtures_providers/unseen/: dbt_cloud, fivetran, azure_data_factory,
twelvelabs) and driven through the real reconciler (and receiver) against fakes on
loopback (tests/fixtures_providers/unseen_round57e.py): success with the result
collected, failure with its reason, cancel (or its absence), a lost create answer,
and each API's own edge: dbt's numeric status codes and its webhook signed in
`Authorization`; Fivetran's sync, which names no job (a human is told, nothing is
claimed from the connector's last sync); Data Factory's query of runs, its cursor
in the body; Twelve Labs' Stripe-like TL-Signature.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.providers.config import ConfigError
from tests.fixtures_providers.described import ENDS, cancelled_with_no_endpoint, described, reason
from tests.fixtures_providers.rig import PresetRig, load, preset_rig
from tests.fixtures_providers.unseen_round57e import (
    ADF_FAILURE,
    ADF_TOKEN,
    DBT_FAILURE,
    DBT_HOOK_SECRET,
    DBT_RESULTS,
    DBT_TOKEN,
    FT_BASIC,
    FT_CONNECTOR,
    FT_OLD_SUCCESS,
    TL_HOOK_SECRET,
    TL_INDEX,
    TL_KEY,
    TL_VIDEO,
    DataFactoryFixture,
    DbtCloudFixture,
    FivetranFixture,
    TwelveLabsFixture,
    dbt_signature,
    post,
    tl_signature,
)

S = LocalState


def rig(
    pool: Any,
    tmp_path: Path,
    fx: Any,
    name: str,
    env: dict[str, str],
    *,
    with_receiver: bool = False,
    **over: Any,
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """The described provider; its webhooks only with the receiver."""
    table = described(name, **over)
    if not with_receiver:
        table.pop("webhooks", None)
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name=name,
        env=env,
        overrides=table,
        with_receiver=with_receiver,
    )


async def attached(r: PresetRig) -> list[tuple[str, str]]:
    rows = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
    return [tuple(e) for e in rows]


# --- dbt Cloud ---------------------------------------------------------------------

DBT_ENV = {"DBT_CLOUD_TOKEN": DBT_TOKEN, "DBT_CLOUD_WEBHOOK_SECRET": DBT_HOOK_SECRET}
BUILD = {"git_branch": "main", "steps_override": ["dbt build --select orders+"]}


def dbt(pool: Any, tmp_path: Path, fx: DbtCloudFixture, **kwargs: Any) -> Any:
    return rig(pool, tmp_path, fx, "dbt_cloud", DBT_ENV, **kwargs)


async def test_dbt_a_run_succeeds_by_its_numeric_code_and_its_run_results_are_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = DbtCloudFixture()
    async with dbt(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(BUILD))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["cause"] == op_id  # our id is the run's cause
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert {"2", "3", "10"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id)) == DBT_RESULTS
        assert (await r.op(op_id)).last_error is None


async def test_dbt_an_errored_run_is_failed_with_its_status_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = DbtCloudFixture()
    fx.script = "fail"
    async with dbt(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(BUILD))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "20" in await r.raw_states(op_id)
        assert await reason(r, op_id) == DBT_FAILURE


async def test_dbt_a_cancelled_run_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = DbtCloudFixture()
    fx.script = "slow"
    async with dbt(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(BUILD))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [rid for rid, _ in fx.cancels] == [fx.only()["id"]]
        assert "30" in await r.raw_states(op_id)
        assert fx.artifact_reads == 0


async def test_dbt_a_cancel_of_a_run_that_ended_is_no_cancel(pool: Any, tmp_path: Path) -> None:
    """The cancel of a run that already succeeded answers the run as it is (10): its
    run_results are collected, no cancel claimed."""
    fx = DbtCloudFixture()
    fx.script = "slow"
    async with dbt(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(BUILD))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = 10
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == DBT_RESULTS


async def test_dbt_a_lost_trigger_is_found_by_its_cause_never_run_twice(
    pool: Any, tmp_path: Path
) -> None:
    """The trigger's answer is lost; the job's runs, listed with their trigger,
    show our operation id as one run's cause (beside runs started elsewhere):
    that run is adopted, none started again."""
    fx = DbtCloudFixture(lose_first_create=True)
    fx.others = 3
    async with dbt(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(BUILD))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        (ours,) = [j for j in fx.jobs.values() if j["cause"] == op_id]
        assert (await r.op(op_id)).remote_job_id == ours["id"]
        assert fx.list_reads and fx.list_reads[0] == ("0", "100")
        assert json.loads(await r.result_bytes(op_id)) == DBT_RESULTS


async def test_dbt_the_webhook_signed_in_authorization_wakes_the_run_a_forged_one_refused(
    pool: Any, tmp_path: Path
) -> None:
    """dbt signs the raw body (hex HMAC-SHA256) and sends it in `Authorization`,
    no scheme word; the signature here is computed on its own, not by jobwarden.
    A forged one, one under another secret and one with a scheme word before it
    are refused; the true one wakes the run's read (polling is 30 s away)."""
    fx = DbtCloudFixture()
    fx.script = "slow"
    async with dbt(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(dict(BUILD))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.only()["state"] = 10
        body = fx.event(rid)
        sign = dbt_signature(DBT_HOOK_SECRET, body)
        json_type = {"Content-Type": "application/json"}
        forged = body.replace(b'"Success"', b'"Errored"')
        assert await post(r.hook_url, forged, json_type | {"Authorization": sign}) == 401
        other = dbt_signature("another-secret", body)
        assert await post(r.hook_url, body, json_type | {"Authorization": other}) == 401
        worded = f"Token {sign}"
        assert await post(r.hook_url, body, json_type | {"Authorization": worded}) in (400, 401)
        assert await attached(r) == []
        assert await post(r.hook_url, body, json_type | {"Authorization": sign}) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await attached(r) == [(op_id, rid)]
        assert json.loads(await r.result_bytes(op_id)) == DBT_RESULTS
        # dbt retries a delivery (five times): the same eventId is one event
        assert await post(r.hook_url, body, json_type | {"Authorization": sign}) == 200
        kept = await r.pool.fetch("SELECT event_id, duplicate_deliveries FROM webhook_events")
        assert [tuple(e) for e in kept] == [(f"wev_{rid}", 1)]


async def test_dbt_a_webhook_before_the_lost_trigger_is_found_waits_and_is_attached(
    pool: Any, tmp_path: Path
) -> None:
    """The trigger's answer is lost and the run ends before jobwarden knows its id:
    the signed job.run.completed arrives first, names a run no operation holds and
    is kept; once the runs list shows our cause and the run is adopted, the event
    is attached to it and no second run is started."""
    fx = DbtCloudFixture(lose_first_create=True)
    async with dbt(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(dict(BUILD))
        while fx.creates == 0:
            await r.reconciler.run_once()
        rid = fx.only()["id"]
        fx.only()["state"] = 10
        body = fx.event(rid)
        signed = {"Content-Type": "application/json"}
        signed["Authorization"] = dbt_signature(DBT_HOOK_SECRET, body)
        assert await post(r.hook_url, body, signed) == 200
        assert await attached(r) == [(None, rid)]
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert (await r.op(op_id)).remote_job_id == rid
        assert await attached(r) == [(op_id, rid)]


# --- Fivetran ----------------------------------------------------------------------

FT_ENV = {"FIVETRAN_BASIC": FT_BASIC}


async def test_fivetran_a_sync_names_no_job_so_a_human_is_told_and_nothing_claimed(
    pool: Any, tmp_path: Path
) -> None:
    """The sync is triggered (one trigger, never sent again) and answers no job id:
    the operation goes to a human saying so. The connector's last success (before
    the trigger) is never read as this sync's, nor is any other end claimed."""
    fx = FivetranFixture()
    async with rig(pool, tmp_path, fx, "fivetran", FT_ENV) as r:
        op_id = await r.submit({"force": False})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert len(fx.syncs) == 1 and fx.syncs[0] == {"force": False}
        # the human hears why the 200 left the sync unknown: it named no job; before,
        # "the last create got HTTP 200 (Success: Sync has been successfully
        # triggered ...)", an uncertain create that read as a success
        said = (await r.escalation(op_id))["reason"]
        assert "naming no job id (create.job_id: /data/id)" in said, said
        assert "cannot deduplicate creates" in said, said
        op = await r.op(op_id)
        assert op.remote_job_id is None and op.result_id is None
        assert fx.reads == 0  # the connector (its old succeeded_at) never read as the job
        assert fx.connector["succeeded_at"] == FT_OLD_SUCCESS
        history = await r.history(op_id)
        assert not {"succeeded", "failed", "cancelled"} & set(history), history


def test_fivetran_the_connector_read_as_the_job_is_refused_at_load() -> None:
    """A user who reads the connector itself as the sync's job (a direct lookup at
    its fixed path, job_id its id) is refused at load: that read names nothing of
    ours, so it would adopt the connector whatever the trigger did, and every
    later sync would be that same "job" (one operation per job id: a second sync
    went to a human, told the job was the first's). Before, it loaded."""
    lookup = {"kind": "get", "path": f"/v1/connectors/{FT_CONNECTOR}", "job_id": "/data/id"}
    table = described("fivetran", lookup=lookup)
    with pytest.raises(ConfigError, match=r"lookup\.path: a kind = get lookup must name our"):
        load("fivetran", None, "http://127.0.0.1:9", FT_ENV, table)


async def test_fivetran_a_lost_trigger_goes_to_a_human_never_sent_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = FivetranFixture(lose_first_create=True)
    async with rig(pool, tmp_path, fx, "fivetran", FT_ENV) as r:
        op_id = await r.submit({"force": False})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and fx.reads == 0


# --- Azure Data Factory ------------------------------------------------------------

ADF_ENV = {"AZURE_MGMT_TOKEN": ADF_TOKEN}
PARAMETERS = {"sourceContainer": "raw", "targetTable": "sales.orders"}


def adf(pool: Any, tmp_path: Path, fx: DataFactoryFixture) -> Any:
    return rig(pool, tmp_path, fx, "azure_data_factory", ADF_ENV)


async def test_adf_a_pipeline_run_succeeds(pool: Any, tmp_path: Path) -> None:
    fx = DataFactoryFixture()
    async with adf(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PARAMETERS))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["parameters"] == PARAMETERS | {"jobwarden_reference": op_id}
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert {"InProgress", "Succeeded"} <= await r.raw_states(op_id)
        assert (await r.op(op_id)).last_error is None
        assert fx.bad_calls == []


async def test_adf_a_failed_run_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = DataFactoryFixture()
    fx.script = "fail"
    async with adf(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PARAMETERS))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == ADF_FAILURE


async def test_adf_a_cancel_goes_through_canceling_to_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = DataFactoryFixture()
    fx.script = "slow"
    async with adf(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PARAMETERS))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [rid for rid, _ in fx.cancels] == [fx.only()["id"]]
        assert {"Canceling", "Cancelled"} <= await r.raw_states(op_id)
        assert fx.bad_calls == []


async def test_adf_a_lost_create_is_found_on_the_querys_second_page(
    pool: Any, tmp_path: Path
) -> None:
    """createRun's answer is lost; runs started since push ours to the query's
    second page (two a page here), reached by the continuationToken written back
    in the body (`lookup.page_token_body_field`): ours, told by its
    jobwarden_reference parameter, is adopted, no second run started."""
    fx = DataFactoryFixture(page_size=2, lose_first_create=True)
    fx.others = 3
    async with adf(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PARAMETERS))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        (ours,) = [j for j in fx.jobs.values() if j["parameters"].get("jobwarden_reference")]
        assert (await r.op(op_id)).remote_job_id == ours["id"]
        tokens = [q.get("continuationToken") for q in fx.queries]
        assert tokens[:2] == [None, "2"], tokens
        assert all(q["filters"][0]["values"] == ["copy_sales"] for q in fx.queries)


# --- Twelve Labs -------------------------------------------------------------------

TL_ENV = {"TWELVE_LABS_API_KEY": TL_KEY, "TWELVE_LABS_WEBHOOK_SECRET": TL_HOOK_SECRET}
VIDEO = {"index_id": TL_INDEX, "video_url": TL_VIDEO}


def twelvelabs(pool: Any, tmp_path: Path, fx: TwelveLabsFixture, **kwargs: Any) -> Any:
    return rig(pool, tmp_path, fx, "twelvelabs", TL_ENV, **kwargs)


async def test_twelvelabs_an_indexed_video_is_kept_with_its_video_id(
    pool: Any, tmp_path: Path
) -> None:
    fx = TwelveLabsFixture()
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(VIDEO))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.fields == [VIDEO]  # sent as multipart fields
        assert {"pending", "indexing", "ready"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["video_id"] == fx.only()["video"] and kept["index_id"] == TL_INDEX


async def test_twelvelabs_a_failed_task_is_failed(pool: Any, tmp_path: Path) -> None:
    """A failed task names no reason (none is documented): failed all the same,
    its raw state on record, no result."""
    fx = TwelveLabsFixture()
    fx.script = "fail"
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(VIDEO))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failed" in await r.raw_states(op_id)
        assert (await r.op(op_id)).result_id is None
        said = await reason(r, op_id)
        assert said == "the provider's status says 'failed' (a failed state) and gives no reason"


async def test_twelvelabs_a_refused_create_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = TwelveLabsFixture()
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit({"index_id": TL_INDEX})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Either video_file or video_url must be provided."
        assert fx.jobs == {}


async def test_twelvelabs_a_cancel_sends_nothing_and_the_deadline_tells_a_human(
    pool: Any, tmp_path: Path
) -> None:
    fx = TwelveLabsFixture()
    fx.script = "slow"
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(VIDEO))
        await r.settle(op_id, {S.OBSERVING})
        await cancelled_with_no_endpoint(r, op_id)


async def test_twelvelabs_a_rate_limited_create_is_sent_again_one_task(
    pool: Any, tmp_path: Path
) -> None:
    """429 too_many_requests refuses the upload whole (create.not_created_statuses):
    sent again after its Retry-After, no lookup, no human; one task."""
    fx = TwelveLabsFixture()
    fx.throttle_first = True
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(VIDEO))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.throttled_creates == 1 and len(fx.fields) == 2 and len(fx.jobs) == 1
        assert "create_unknown" not in await r.history(op_id)


async def test_twelvelabs_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = TwelveLabsFixture(lose_first_create=True)
    async with twelvelabs(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(VIDEO))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_twelvelabs_the_signed_webhook_wakes_the_task_a_forged_or_stale_one_refused(
    pool: Any, tmp_path: Path
) -> None:
    """TL-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">, computed here on
    its own: under another secret, over another body, or an hour old, refused."""
    fx = TwelveLabsFixture()
    fx.script = "slow"
    async with twelvelabs(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(dict(VIDEO))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        tid = fx.only()["id"]
        fx.only()["state"] = "ready"
        body = fx.event(tid)
        json_type = {"Content-Type": "application/json"}

        def signed(secret: str, content: bytes, at: int | None = None) -> dict[str, str]:
            return json_type | {"TL-Signature": tl_signature(secret, content, at)}

        assert await post(r.hook_url, body, signed("another", body)) == 401
        forged = body.replace(b"index.task.ready", b"index.task.failed")
        assert await post(r.hook_url, forged, signed(TL_HOOK_SECRET, body)) == 401
        stale = signed(TL_HOOK_SECRET, body, int(time.time()) - 3600)
        assert await post(r.hook_url, body, stale) in (400, 401)
        assert await attached(r) == []
        assert await post(r.hook_url, body, signed(TL_HOOK_SECRET, body)) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await attached(r) == [(op_id, tid)]
