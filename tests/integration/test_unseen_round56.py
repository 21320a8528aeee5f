"""Vertex AI batch prediction jobs, Twilio Bulk Exports, Azure OpenAI batch and
Transloadit assemblies, described in TOML as a new user would
(tests/fixtures_providers/unseen/: vertex_batch, twilio_exports,
azure_openai_batch, transloadit) and driven through the real reconciler (and
receiver) against fakes on loopback (tests/fixtures_providers/unseen_round56.py):
success with the result collected, failure with its reason, cancel, a lost
create answer, and each API's own edge: Vertex's job name with slashes, its
`:cancel` and CANCELLING, its int64 counts written as strings and its labels
filter for the lookup; Twilio's form create, its state read from `details`
grouping days by status, its DELETE that removes the job and its
X-Twilio-Signature form webhook; Azure's api-version on every call, the
openai_batch preset overridden; Transloadit's params as a multipart JSON field,
its status at assembly_ssl_url and its failure told only by an `error` code.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round56 import (
    AZ_FAILURE,
    AZ_KEY,
    DAYS,
    TL_ERROR,
    TL_FAILURE,
    TL_KEY,
    TW_BASIC,
    TW_TOKEN,
    VX_FAILURE,
    VX_OUTPUT,
    VX_TOKEN,
    AzureBatchFixture,
    TransloaditFixture,
    TwilioExportsFixture,
    VertexFixture,
    tl_results,
)

S = LocalState


# --- Vertex AI ---------------------------------------------------------------------

VX_ENV = {"VERTEX_ACCESS_TOKEN": VX_TOKEN}


def batch_job(script: str | None = None) -> dict[str, Any]:
    labels = {"team": "ml"} | ({"script": script} if script else {})
    return {
        "displayName": "nightly-scoring",
        "model": "publishers/google/models/gemini-2.0-flash-001",
        "inputConfig": {
            "instancesFormat": "jsonl",
            "gcsSource": {"uris": ["gs://my-bucket/in/requests.jsonl"]},
        },
        "outputConfig": {
            "predictionsFormat": "jsonl",
            "gcsDestination": {"outputUriPrefix": "gs://my-bucket/out/"},
        },
        "labels": labels,
    }


def vertex(pool: Any, tmp_path: Path, fx: VertexFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="vertex_batch",
        env=VX_ENV,
        overrides=described("vertex_batch"),
    )


async def test_vertex_a_job_is_read_by_its_name_and_its_output_directory_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = VertexFixture()
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        job = fx.only()
        assert op.remote_job_id == job["id"]
        assert job["body"]["labels"]["jobwarden_operation"] == op_id
        assert {"JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id)) == {"gcsOutputDirectory": VX_OUTPUT}


async def test_vertex_a_partial_success_is_partial_with_its_string_counts(
    pool: Any, tmp_path: Path
) -> None:
    """completionStats' int64 counts come as JSON strings ("2", "1"): read as
    numbers, the job's two of three kept as its counts."""
    fx = VertexFixture()
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("partial"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        assert "JOB_STATE_PARTIALLY_SUCCEEDED" in await r.raw_states(op_id)
        summary = op.result_summary
        assert (summary["items_total"], summary["items_failed"]) == (3, 1), summary


async def test_vertex_a_failed_job_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = VertexFixture()
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == VX_FAILURE
        assert str((await r.op(op_id)).last_error["code"]) == "5"


async def test_vertex_a_cancel_goes_through_cancelling_to_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = VertexFixture()
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert "JOB_STATE_CANCELLED" in await r.raw_states(op_id)


async def test_vertex_a_lost_create_is_found_by_its_label(pool: Any, tmp_path: Path) -> None:
    fx = VertexFixture(lose_first_create=True)
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.list_filters == [f'labels.jobwarden_operation="{op_id}"'] * len(fx.list_filters)
        assert fx.list_filters
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_vertex_a_cancel_of_a_finished_job_is_refused_and_its_output_kept(
    pool: Any, tmp_path: Path
) -> None:
    """400 FAILED_PRECONDITION to a cancel of a job that ended: it succeeded,
    collected, no cancel claimed."""
    fx = VertexFixture()
    async with vertex(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "JOB_STATE_SUCCEEDED"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == {"gcsOutputDirectory": VX_OUTPUT}


# --- Twilio Bulk Export ------------------------------------------------------------

TW_ENV = {"TWILIO_BASIC": TW_BASIC, "TWILIO_AUTH_TOKEN": TW_TOKEN}


def export() -> dict[str, Any]:
    """FriendlyName is written with our reference (create.client_reference_field)."""
    return {"StartDay": DAYS[0], "EndDay": DAYS[-1], "FriendlyName": "december calls"}


@contextlib.asynccontextmanager
async def twilio(
    pool: Any, tmp_path: Path, fx: TwilioExportsFixture, *, with_receiver: bool = False
) -> AsyncIterator[PresetRig]:
    table = described("twilio_exports")
    if not with_receiver:
        table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="twilio_exports",
        env=TW_ENV,
        overrides=table,
        with_receiver=with_receiver,
    ) as r:
        yield r


async def test_twilio_an_export_is_read_from_its_details_and_its_days_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = TwilioExportsFixture()
    async with twilio(pool, tmp_path, fx) as r:
        op_id = await r.submit(export())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (form,) = fx.forms
        assert form["FriendlyName"] == op_id, form
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"RUNNING", "COMPLETED"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert [d["day"] for d in kept["days"]] == DAYS
        assert (await r.op(op_id)).result_summary["items_total"] == 2


async def test_twilio_a_failed_export_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = TwilioExportsFixture()
    fx.script = "fail"
    async with twilio(pool, tmp_path, fx) as r:
        op_id = await r.submit(export())
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "FAILED" in await r.raw_states(op_id)
        assert fx.day_reads == 0


async def test_twilio_a_deleted_export_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = TwilioExportsFixture()
    fx.script = "slow"
    async with twilio(pool, tmp_path, fx) as r:
        op_id = await r.submit(export())
        await r.settle(op_id, {S.OBSERVING})
        sid = fx.only()["id"]
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [sid]


async def test_twilio_a_cancel_of_a_finished_export_deletes_nothing(
    pool: Any, tmp_path: Path
) -> None:
    """DELETE removes a job whatever its state (cancel.deletes_job, read_first):
    the export that completed before the cancel is read first, no DELETE sent, its
    days collected."""
    fx = TwilioExportsFixture()
    fx.script = "slow"
    async with twilio(pool, tmp_path, fx) as r:
        op_id = await r.submit(export())
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.day_reads >= 1


async def test_twilio_a_lost_create_is_found_on_the_lists_second_page(
    pool: Any, tmp_path: Path
) -> None:
    """The list names its next page by a whole URL (meta.next_page_url, PageToken
    inside: lookup.next_page_url), followed as given: ours, on the second page,
    adopted, never created twice. Before, no lookup key could follow such a
    list: a lost create went to a human."""
    fx = TwilioExportsFixture(lose_first_create=True)
    fx.seed("made elsewhere")
    table = described("twilio_exports", lookup={"path": "/v1/Exports/Calls/Jobs?PageSize=1"})
    table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="twilio_exports",
        env=TW_ENV,
        overrides=table,
    ) as r:
        op_id = await r.submit(export())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert len(fx.list_urls) >= 2 and "PageToken=PA" in fx.list_urls[1], fx.list_urls
        ours = [sid for sid, j in fx.jobs.items() if j["form"]["FriendlyName"] == op_id]
        assert (await r.op(op_id)).remote_job_id == ours[0]


async def test_twilio_the_signed_webhook_wakes_the_export(pool: Any, tmp_path: Path) -> None:
    fx = TwilioExportsFixture()
    fx.script = "slow"
    async with twilio(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(export())
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        sid = fx.only()["id"]
        assert fx.forms[0]["WebhookUrl"] == r.hook_url
        fx.finish(sid)
        assert await fx.deliver(r.hook_url, sid, token="another") == 401
        assert await fx.deliver(r.hook_url, sid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, sid)]


# --- Azure OpenAI batch ------------------------------------------------------------

AZ_ENV = {"AZURE_OPENAI_API_KEY": AZ_KEY}


def azure_batch(script: str | None = None) -> dict[str, Any]:
    meta = {"team": "ml"} | ({"script": script} if script else {})
    return {
        "input_file_id": "file-abc123",
        "endpoint": "/chat/completions",
        "completion_window": "24h",
        "metadata": meta,
    }


def azure(pool: Any, tmp_path: Path, fx: AzureBatchFixture) -> Any:
    table = described("azure_openai_batch")
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=table.pop("preset"),
        name="azure_openai_batch",
        env=AZ_ENV,
        overrides=table,
    )


async def test_azure_a_batch_is_read_and_its_output_file_kept(pool: Any, tmp_path: Path) -> None:
    fx = AzureBatchFixture()
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(azure_batch())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.unversioned == 0
        assert fx.only()["body"]["metadata"]["jobwarden_operation_id"] == op_id
        lines = (await r.result_bytes(op_id)).decode().splitlines()
        assert [json.loads(x)["custom_id"] for x in lines] == ["task-0", "task-1", "task-2"]


async def test_azure_a_failed_batch_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = AzureBatchFixture()
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(azure_batch("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == AZ_FAILURE


async def test_azure_a_cancel_is_confirmed(pool: Any, tmp_path: Path) -> None:
    fx = AzureBatchFixture()
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(azure_batch("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.unversioned == 0


async def test_azure_a_lost_create_is_found_in_the_list(pool: Any, tmp_path: Path) -> None:
    fx = AzureBatchFixture(lose_first_create=True)
    async with azure(pool, tmp_path, fx) as r:
        op_id = await r.submit(azure_batch())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads >= 1 and fx.unversioned == 0


# --- Transloadit -------------------------------------------------------------------

TL_ENV: dict[str, str] = {}


def assembly(script: str | None = None) -> dict[str, Any]:
    fields = {"album": "summer"} | ({"script": script} if script else {})
    return {
        "params": {
            "auth": {"key": TL_KEY},
            "steps": {
                "imported": {"robot": "/http/import", "url": "https://example.com/photo.jpg"},
                "resized": {"use": "imported", "robot": "/image/resize", "width": 320},
            },
            "fields": fields,
        }
    }


def transloadit(pool: Any, tmp_path: Path, fx: TransloaditFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="transloadit",
        env=TL_ENV,
        overrides=described("transloadit"),
    )


async def test_transloadit_an_assembly_is_read_at_its_url_and_its_results_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = TransloaditFixture()
    async with transloadit(pool, tmp_path, fx) as r:
        op_id = await r.submit(assembly())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["params"]["fields"]["jobwarden_operation"] == op_id
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert json.loads(await r.result_bytes(op_id)) == tl_results(job["id"])


async def test_transloadit_a_failed_assembly_is_failed_with_its_error(
    pool: Any, tmp_path: Path
) -> None:
    """A failed assembly carries `error` (one code of dozens) and `message`, no
    `ok` (status.error_means_failed): failed, with that code and message. Before,
    the read named no state (written state = ["/error", "/ok"], the code read as an
    unmapped state), and after ten reads a human was told of a missing state."""
    fx = TransloaditFixture()
    async with transloadit(pool, tmp_path, fx) as r:
        op_id = await r.submit(assembly("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == TL_FAILURE
        assert str((await r.op(op_id)).last_error["code"]) == TL_ERROR


async def test_transloadit_a_deleted_assembly_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = TransloaditFixture()
    async with transloadit(pool, tmp_path, fx) as r:
        op_id = await r.submit(assembly("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_transloadit_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = TransloaditFixture(lose_first_create=True)
    async with transloadit(pool, tmp_path, fx) as r:
        op_id = await r.submit(assembly())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
