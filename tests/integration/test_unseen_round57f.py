"""Creatomate renders, OpenAI fine-tuning jobs, Klaviyo bulk profile imports and
Intercom content data exports, described in TOML as a new user would
(tests/fixtures_providers/unseen/: creatomate, openai_fine_tuning, klaviyo_imports,
intercom_exports) and driven through the real reconciler against fakes on loopback
(tests/fixtures_providers/unseen_round57f.py): success with the result collected,
failure with its reason, cancel (or its absence), a lost create answer, and each
API's own edge: Creatomate's create answering an array of renders, its output URL
named before the file exists, on a CDN that gets no credential.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, cancelled_with_no_endpoint, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round54 import OPENAI_WEBHOOK_SECRET, deliver_standard
from tests.fixtures_providers.unseen_round57f import (
    CM_FAILURE,
    CM_KEY,
    CM_TEMPLATE,
    CM_VIDEO,
    FT_FAILURE,
    FT_METRICS,
    FT_TRAINING,
    IC_CSV,
    IC_TOKEN,
    KL_BAD_EMAIL,
    KL_KEY,
    OAI_KEY,
    CreatomateFixture,
    FineTuningFixture,
    IntercomFixture,
    KlaviyoFixture,
    kl_profiles,
)

S = LocalState


def rig(
    pool: Any,
    tmp_path: Path,
    app: Any,
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
        app,
        preset=None,
        name=name,
        env=env,
        overrides=table,
        with_receiver=with_receiver,
    )


# --- Creatomate --------------------------------------------------------------------

CM_ENV = {"CREATOMATE_API_KEY": CM_KEY}
PROMO = {"template_id": CM_TEMPLATE, "modifications": {"Title": "Winter sale"}}


@contextlib.asynccontextmanager
async def creatomate(pool: Any, tmp_path: Path, fx: CreatomateFixture) -> AsyncIterator[Any]:
    """The API and its CDN, another server (another port) beside it."""
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url
        async with rig(pool, tmp_path, fx.app(), "creatomate", CM_ENV) as r:
            yield r


async def test_creatomate_the_render_named_in_the_array_is_followed_and_its_mp4_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The create answers 202 with an array of renders: the job is its one
    element's id (`/0/id`). The output URL, named from the first answer on, is
    fetched only once the render succeeded (the CDN never answered 404), and the
    API key never goes to the CDN."""
    fx = CreatomateFixture()
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert job["metadata"] == op_id
        assert {"waiting", "transcribing", "rendering", "succeeded"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == CM_VIDEO
        assert fx.cdn_misses == 0
        assert fx.cdn_auth == [None]
        assert (await r.op(op_id)).last_error is None


async def test_creatomate_a_failed_render_is_failed_with_its_error_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    fx.script = "fail"
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == CM_FAILURE
        assert fx.cdn_auth == []
        assert (await r.op(op_id)).result_id is None


async def test_creatomate_a_refused_create_is_failed_with_its_hint(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit({"modifications": {"Title": "no template"}})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Either template_id or source must be provided."
        assert fx.jobs == {}


async def test_creatomate_a_cancel_sends_nothing_and_the_deadline_tells_a_human(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    fx.script = "slow"
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        await r.settle(op_id, {S.OBSERVING})
        await cancelled_with_no_endpoint(r, op_id)


async def test_creatomate_a_lost_create_goes_to_a_human_never_rendered_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture(lose_first_create=True)
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and len(fx.jobs) == 1
        assert (await r.op(op_id)).remote_job_id is None


# --- OpenAI fine-tuning ------------------------------------------------------------

OAI_ENV = {"OPENAI_API_KEY": OAI_KEY}
TUNE = {"model": "gpt-4o-mini-2024-07-18", "training_file": FT_TRAINING}


def fine_tuning(pool: Any, tmp_path: Path, fx: FineTuningFixture, **over: Any) -> Any:
    return rig(pool, tmp_path, fx.app(), "openai_fine_tuning", OAI_ENV, **over)


async def test_fine_tuning_the_signed_webhook_wakes_the_job_a_forged_one_refused(
    pool: Any, tmp_path: Path
) -> None:
    """fine_tuning.job.succeeded, Standard Webhooks under the project's whsec_
    secret: under another secret refused; the true one wakes the read (polling is
    30 s away), the metrics kept."""
    fx = FineTuningFixture()
    fx.script = "slow"
    env = OAI_ENV | {"OPENAI_WEBHOOK_SECRET": OPENAI_WEBHOOK_SECRET}
    async with rig(pool, tmp_path, fx.app(), "openai_fine_tuning", env, with_receiver=True) as r:
        op_id = await r.submit(dict(TUNE))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        jid = fx.only()["id"]
        fx.only()["state"] = "succeeded"
        other = "whsec_" + "YW5vdGhlci1zZWNyZXQtYWx0b2dldGhlcg=="
        event = "fine_tuning.job.succeeded"
        assert await deliver_standard(r.hook_url, event, jid, secret=other) == 401
        assert await deliver_standard(r.hook_url, event, jid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == FT_METRICS


async def test_fine_tuning_a_job_succeeds_and_its_metrics_csv_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = FineTuningFixture()
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(TUNE))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["metadata"] == {"jobwarden_operation": op_id}
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert {"queued", "running", "succeeded"} <= await r.raw_states(op_id)
        assert fx.file_reads == [job["result_file"]]
        assert await r.result_bytes(op_id) == FT_METRICS
        assert (await r.op(op_id)).last_error is None


async def test_fine_tuning_a_failed_job_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = FineTuningFixture()
    fx.script = "fail"
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(TUNE))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert op.last_error is not None
        assert op.last_error.get("code") == FT_FAILURE[0], op.last_error
        assert await reason(r, op_id) == FT_FAILURE[1]
        assert op.result_id is None and fx.file_reads == []


async def test_fine_tuning_a_refused_create_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = FineTuningFixture()
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit({"model": "gpt-4o-mini-2024-07-18"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Missing required parameter: 'training_file'."
        assert fx.jobs == {}


async def test_fine_tuning_a_cancelled_job_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = FineTuningFixture()
    fx.script = "slow"
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(TUNE))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [jid for jid, _ in fx.cancels] == [fx.only()["id"]]
        assert fx.file_reads == []


async def test_fine_tuning_a_cancel_of_a_job_that_succeeded_collects_its_result(
    pool: Any, tmp_path: Path
) -> None:
    """The job succeeds as the cancel goes out: the cancel is refused (400, "already
    completed"), the job is read succeeded and its metrics kept, no cancel claimed."""
    fx = FineTuningFixture()
    fx.script = "slow"
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(TUNE))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "succeeded"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert await r.result_bytes(op_id) == FT_METRICS


async def test_fine_tuning_a_lost_create_is_found_by_its_metadata_never_made_twice(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost; the list, filtered by our metadata, shows our
    job alone (beside newer ones made elsewhere): it is adopted, none made again."""
    fx = FineTuningFixture(lose_first_create=True)
    fx.others = 3
    async with fine_tuning(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(TUNE))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        (ours,) = [j for j in fx.jobs.values() if j["metadata"]]
        assert (await r.op(op_id)).remote_job_id == ours["id"]
        assert fx.list_reads[0]["metadata[jobwarden_operation]"] == op_id
        assert await r.result_bytes(op_id) == FT_METRICS


async def test_fine_tuning_a_lost_create_is_found_after_the_last_id_of_a_page(
    pool: Any, tmp_path: Path
) -> None:
    """A list that ignores the metadata filter, two jobs a page: the list names no
    last_id, so the next page is asked `after` the last job's id (`/data/-1/id`)
    while has_more; ours, on the second page, is matched by its metadata."""
    fx = FineTuningFixture(lose_first_create=True, filters_metadata=False)
    fx.others = 3
    path = "/v1/fine_tuning/jobs?limit=2&metadata[jobwarden_operation]={client_reference}"
    async with fine_tuning(pool, tmp_path, fx, lookup={"path": path}) as r:
        op_id = await r.submit(dict(TUNE))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        (ours,) = [j for j in fx.jobs.values() if j["metadata"]]
        assert (await r.op(op_id)).remote_job_id == ours["id"]
        afters = [q.get("after") for q in fx.list_reads]
        assert afters[:2] == [None, "ftjob-other0001"], afters


# --- Klaviyo -----------------------------------------------------------------------

KL_ENV = {"KLAVIYO_PRIVATE_KEY": KL_KEY}


def klaviyo(pool: Any, tmp_path: Path, fx: KlaviyoFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "klaviyo_imports", KL_ENV)


async def test_klaviyo_an_import_with_no_failure_succeeds_with_an_empty_error_list(
    pool: Any, tmp_path: Path
) -> None:
    fx = KlaviyoFixture()
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit(kl_profiles(3))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"processing", "complete"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id))["data"] == []
        assert fx.bad_calls == []


async def test_klaviyo_a_complete_import_with_failed_profiles_is_partial_every_error_kept(
    pool: Any, tmp_path: Path
) -> None:
    """complete, failed_count 3 of 5: a partial import; its three import-errors,
    one a page here, are read through links.next (absolute URLs) and kept, each a
    failed item with its code and detail."""
    fx = KlaviyoFixture(page_size=1)
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit(kl_profiles(5, bad=3))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.error_reads == [None, "1", "2"]
        op = await r.op(op_id)
        assert op.remote_state == "partially_succeeded", op.remote_state
        summary = op.result_summary
        counted = (summary["items_total"], summary["items_succeeded"], summary["items_failed"])
        assert counted == (5, 2, 3), summary
        items = await r.pool.fetch(
            "SELECT item_key, code, message FROM result_item_failures"
            " WHERE result_id = $1 ORDER BY item_key",
            op.result_id,
        )
        jid = fx.only()["id"]
        assert [tuple(i) for i in items] == [
            (f"err-{jid}-{n}", "invalid", KL_BAD_EMAIL) for n in range(3)
        ]


async def test_klaviyo_an_import_whose_every_profile_failed_is_failed_its_errors_kept(
    pool: Any, tmp_path: Path
) -> None:
    """complete, failed_count 2 of 2: failed by its counts, and why each profile
    failed is kept: the import-errors are read and attached, as a cancelled job's
    partial output is. Before, the operation ended failed saying "0 succeeded, 2
    failed", the errors (the only account of why) never read."""
    fx = KlaviyoFixture()
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit(kl_profiles(2, bad=2))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        said = await reason(r, op_id)
        assert "0 succeeded" in said and "2 failed" in said, said
        assert fx.error_reads == [None]
        op = await r.op(op_id)
        assert op.result_id is not None, await r.history(op_id)
        summary = op.result_summary
        counted = (summary["items_total"], summary["items_succeeded"], summary["items_failed"])
        assert counted == (2, 0, 2), summary
        assert summary["partial"] is True
        failures = await r.pool.fetch(
            "SELECT message FROM result_item_failures WHERE result_id = $1", op.result_id
        )
        assert [f["message"] for f in failures] == [KL_BAD_EMAIL] * 2
        # the agent is pointed at them
        row = await r.pool.fetchrow(
            "SELECT errors_ref, items_failed, message FROM agent_operations"
            " WHERE operation_id = $1",
            op_id,
        )
        assert row["errors_ref"] == f"/v1/operations/{op_id}/failed-items", dict(row)
        assert row["items_failed"] == 2 and row["message"].startswith("FAILED: "), dict(row)


async def test_klaviyo_a_refused_create_is_failed_with_its_detail(
    pool: Any, tmp_path: Path
) -> None:
    fx = KlaviyoFixture()
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit({"data": {"type": "profile-bulk-import-job", "attributes": {}}})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Profiles are required."
        assert fx.jobs == {}


async def test_klaviyo_a_cancel_sends_nothing_and_the_deadline_tells_a_human(
    pool: Any, tmp_path: Path
) -> None:
    fx = KlaviyoFixture()
    fx.script = "slow"
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit(kl_profiles(2))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=0.5)
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []


async def test_klaviyo_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = KlaviyoFixture(lose_first_create=True)
    async with klaviyo(pool, tmp_path, fx) as r:
        op_id = await r.submit(kl_profiles(2))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and len(fx.jobs) == 1


# --- Intercom ----------------------------------------------------------------------

IC_ENV = {"INTERCOM_ACCESS_TOKEN": IC_TOKEN}
WINDOW = {"created_at_after": 1733011200, "created_at_before": 1733616000}


def intercom(pool: Any, tmp_path: Path, fx: IntercomFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "intercom_exports", IC_ENV)


async def test_intercom_an_export_completes_and_its_gzipped_csv_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = IntercomFixture()
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"in_progress", "completed"} <= await r.raw_states(op_id)
        assert fx.downloads == ["application/octet-stream"]
        assert gzip.decompress(await r.result_bytes(op_id)) == IC_CSV


async def test_intercom_a_failed_export_read_as_a_504_is_failed(pool: Any, tmp_path: Path) -> None:
    """A failed job's read answers HTTP 504, the job (status failed) in its body."""
    fx = IntercomFixture()
    fx.script = "fail"
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failed" in await r.raw_states(op_id)
        said = await reason(r, op_id)
        assert said == "the provider's status says 'failed' (a failed state) and gives no reason"
        assert fx.downloads == []


async def test_intercom_a_completed_export_read_as_a_504_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """A listed error code (`state_in_error_statuses = [504]`) whose body names the
    job completed: the read that decided is the collection's final read too. Before,
    the final read took the newest 2xx on record (the job "in_progress") or, read
    again, refused the 504 as no answer: the export was given up, never collected."""
    fx = IntercomFixture()
    fx.completed_code = 504
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert gzip.decompress(await r.result_bytes(op_id)) == IC_CSV


async def test_intercom_a_no_data_export_is_finished_with_nothing_no_download(
    pool: Any, tmp_path: Path
) -> None:
    """no_data: the export finished, with nothing in it (its download_url empty, the
    download path 404). With `result.empty_states = ["no_data"]` it succeeds with an
    empty result, no download tried. Before, the download was tried six times and
    the export was result_unavailable, a human told its result was lost."""
    fx = IntercomFixture()
    fx.script = "empty"
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "no_data" in await r.raw_states(op_id)
        assert fx.downloads == []
        assert await r.result_bytes(op_id) == b""
        assert (await r.op(op_id)).result_summary["size_bytes"] == 0


async def test_intercom_a_refused_create_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = IntercomFixture()
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit({"created_at_after": 1733616000, "created_at_before": 1733011200})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "created_at_after must be before created_at_before"
        assert fx.jobs == {}


async def test_intercom_a_cancelled_export_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = IntercomFixture()
    fx.script = "slow"
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [jid for jid, _ in fx.cancels] == [fx.only()["id"]]
        assert "canceled" in await r.raw_states(op_id)
        assert fx.downloads == []


async def test_intercom_a_lost_create_goes_to_a_human_never_exported_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = IntercomFixture(lose_first_create=True)
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and len(fx.jobs) == 1


async def test_intercom_a_cancel_of_an_export_that_completed_collects_it(
    pool: Any, tmp_path: Path
) -> None:
    """A job that reached a terminal state is returned unchanged by the cancel: the
    export completed is read so, its CSV kept, no cancel claimed."""
    fx = IntercomFixture()
    fx.script = "slow"
    async with intercom(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(WINDOW))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "completed"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert gzip.decompress(await r.result_bytes(op_id)) == IC_CSV


async def test_intercom_a_second_export_waits_for_the_pending_one_never_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """One pending export per workspace: the second create is refused 429 while the
    first runs (create.not_created_statuses), sent again later, and made once the
    first completed; both exports kept, no human told."""
    fx = IntercomFixture()
    async with intercom(pool, tmp_path, fx) as r:
        first = await r.submit(dict(WINDOW))
        while not fx.jobs:
            await r.reconciler.run_once()
        second = await r.submit({"created_at_after": 1733616000, "created_at_before": 1734220800})
        assert await r.settle(second, ENDS) is S.SUCCEEDED, await r.history(second)
        assert await r.settle(first, ENDS) is S.SUCCEEDED, await r.history(first)
        assert fx.throttled_creates >= 1 and len(fx.jobs) == 2
        assert "create_unknown" not in await r.history(second)
