"""Google BigQuery's query jobs, Databricks' one-time runs, Cloudflare Stream's
copied videos, Snowflake's SQL API statements and Shopify's bulk operations,
described in TOML as a new user would (tests/fixtures_providers/unseen/:
bigquery_jobs, databricks_runs, cloudflare_stream, snowflake_sql, shopify_bulk) and
driven through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round54b.py):
success with the result collected and validated, failure with its reason, cancel
(confirmed, or refused as the API documents), a lost create answer, and each API's
own edge: BigQuery's job id of our choosing (a resend answered 409 "Already
Exists") and its cancel told by errorResult "stopped", best effort only;
Databricks' state told by two fields (result_state only once the run ended), its
output read per task run, its cancel asynchronous (TERMINATING first); Cloudflare
Stream's lost copy found by its creator, its DELETE (a ready video never deleted)
and its `Webhook-Signature: time=,sig1=` deliveries; Snowflake's 202-then-200
statement read by HTTP status and code, its cancel told by 422 code 000604, its
resubmission by requestId, and a result of several partitions read by number;
Shopify's GraphQL everywhere (200 for errors: THROTTLED and OPERATION_IN_PROGRESS
creating nothing, throttled reads read past), its empty result without a URL and
its bulk_operations/finish webhook.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round54b import (
    BIGQUERY_FAILURE,
    BIGQUERY_ROWS,
    BIGQUERY_STOPPED,
    BIGQUERY_TOKEN,
    CLOUDFLARE_FAILURE,
    CLOUDFLARE_TOKEN,
    CLOUDFLARE_WEBHOOK_SECRET,
    DATABRICKS_FAILURE,
    DATABRICKS_SKIPPED,
    DATABRICKS_TIMEOUT,
    DATABRICKS_TOKEN,
    SHOPIFY_LINES,
    SHOPIFY_TOKEN,
    SHOPIFY_WEBHOOK_SECRET,
    SNOWFLAKE_FAILURE,
    SNOWFLAKE_JWT,
    SNOWFLAKE_ROWS,
    BigQueryFixture,
    CloudflareStreamFixture,
    DatabricksFixture,
    ShopifyBulkFixture,
    SnowflakeFixture,
    databricks_output,
)

S = LocalState


# --- BigQuery ----------------------------------------------------------------------


def query(script: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "query": {
            "query": "SELECT word, n FROM `my-project.demo.words` ORDER BY n",
            "useLegacySql": False,
        }
    }
    if script:
        config["labels"] = {"script": script}
    return {"configuration": config}


@contextlib.asynccontextmanager
async def bigquery(pool: Any, tmp_path: Path, fx: BigQueryFixture) -> AsyncIterator[PresetRig]:
    """The description as written, its access token in a file (as a timer keeps it)."""
    token_file = tmp_path / "bigquery_token"
    token_file.write_text(BIGQUERY_TOKEN + "\n")
    table = described("bigquery_jobs")
    table["auth"] = {**table["auth"], "secret_file": str(token_file)}
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="bigquery_jobs", env={}, overrides=table
    ) as r:
        yield r


def rows_of(kept: bytes) -> list[list[str]]:
    """The rows of every page kept, in order: the pages are one JSON array."""
    pages = json.loads(kept)
    pages = pages if isinstance(pages, list) else [pages]
    return [[cell["v"] for cell in row["f"]] for page in pages for row in page["rows"]]


async def test_bigquery_a_query_job_is_collected_page_by_page(pool: Any, tmp_path: Path) -> None:
    """The job id is ours (jobReference.jobId, our token), read in its location;
    PENDING, RUNNING, DONE; the rows are read a page at a time behind pageToken,
    all five kept in order."""
    fx = BigQueryFixture()
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        job = fx.only()
        assert job["id"] == op.remote_job_id == op.idempotency_token
        assert {"RUNNING", "DONE"} <= await r.raw_states(op_id)
        assert set(fx.locations) == {"US"}
        assert fx.page_reads == [None, "BHZ2", "BHZ4"]
        assert rows_of(await r.result_bytes(op_id)) == BIGQUERY_ROWS
        summary = op.result_summary
        assert summary["items_total"] == len(BIGQUERY_ROWS), summary


async def test_bigquery_a_query_that_returned_no_row_is_an_empty_success(
    pool: Any, tmp_path: Path
) -> None:
    """totalRows "0" and no `rows` at all (BigQuery omits an empty list): a
    success with no item (result.empty_without_items), never a result refused for
    its missing item list."""
    fx = BigQueryFixture()
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query("empty"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "rows" not in json.loads(await r.result_bytes(op_id))
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == 0, summary


async def test_bigquery_done_with_an_error_result_is_failed_with_its_message(
    pool: Any, tmp_path: Path
) -> None:
    """DONE is every end: with status.errorResult it is a failure, its reason and
    message kept (error_means_failed)."""
    fx = BigQueryFixture()
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == BIGQUERY_FAILURE
        assert (await r.op(op_id)).last_error["code"] == "invalidQuery"
        assert fx.page_reads == []


async def test_bigquery_a_cancel_is_confirmed_by_done_stopped(pool: Any, tmp_path: Path) -> None:
    """The cancel answers the job still RUNNING; the next read is DONE with
    errorResult.reason "stopped": cancelled (status.cancelled_error_codes), never
    failed."""
    fx = BigQueryFixture()
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert fx.only()["error"]["message"] == BIGQUERY_STOPPED
        assert "failed" not in await r.history(op_id)


async def test_bigquery_a_job_that_completes_despite_the_cancel_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """Best effort: the cancel is taken and the job completes all the same (DONE,
    no error). It succeeded, its rows collected; no cancel is claimed."""
    fx = BigQueryFixture()
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query("race"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert len(fx.cancels) == 1
        assert "cancelled" not in await r.history(op_id)
        assert rows_of(await r.result_bytes(op_id)) == BIGQUERY_ROWS


async def test_bigquery_a_lost_insert_is_ours_at_the_first_already_exists(
    pool: Any, tmp_path: Path
) -> None:
    """The insert's answer is lost; the same insert (the same jobId) is sent again
    and answered 409 "Already Exists", reason duplicate: that job is ours, accepted
    under the id we chose (create.already_exists_codes) and collected, one job run.
    Before, the 409 was an ambiguous conflict resent for ten minutes, then a human
    (here: past the create deadline's lookup, after the settle's wait)."""
    fx = BigQueryFixture(lose_first_create=True)
    async with bigquery(pool, tmp_path, fx) as r:
        op_id = await r.submit(query())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.duplicates == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert rows_of(await r.result_bytes(op_id)) == BIGQUERY_ROWS


# --- Databricks --------------------------------------------------------------------

DATABRICKS_ENV = {"DATABRICKS_TOKEN": DATABRICKS_TOKEN}


def run_submit(script: str | None = None, tasks: tuple[str, ...] = ("ingest",)) -> dict[str, Any]:
    params = {"date": "2026-12-06"} | ({"script": script} if script else {})
    return {
        "run_name": "nightly ingest",
        "tasks": [
            {
                "task_key": key,
                "notebook_task": {"notebook_path": f"/Repos/etl/{key}", "base_parameters": params},
                "existing_cluster_id": "0923-164208-meows279",
            }
            for key in tasks
        ],
        "timeout_seconds": 3600,
    }


def databricks(pool: Any, tmp_path: Path, fx: DatabricksFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="databricks_runs",
        env=DATABRICKS_ENV,
        overrides=described("databricks_runs"),
    )


async def test_databricks_each_task_runs_output_is_collected(pool: Any, tmp_path: Path) -> None:
    """A run of two tasks: the token rides in idempotency_token; RUNNING, and
    then TERMINATED, read at its result_state SUCCESS. runs/get-output is asked of
    each task run (never of the submitted run, which refuses a multi-task run) and
    the two outputs kept as one array."""
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit(tasks=("ingest", "publish")))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        assert fx.tokens == [op.idempotency_token]
        assert {"RUNNING", "SUCCESS"} <= await r.raw_states(op_id)
        job = fx.only()
        assert fx.output_reads == [tid for tid, _ in job["tasks"]]
        outputs = json.loads(await r.result_bytes(op_id))
        assert [o["notebook_output"]["result"] for o in outputs] == [
            databricks_output("ingest"),
            databricks_output("publish"),
        ]


async def test_databricks_a_failed_run_is_failed_with_its_state_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == DATABRICKS_FAILURE
        assert "FAILED" in await r.raw_states(op_id)
        assert fx.output_reads == []


async def test_databricks_a_timed_out_run_is_failed_saying_so(pool: Any, tmp_path: Path) -> None:
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit("timeout"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == DATABRICKS_TIMEOUT
        assert "TIMEDOUT" in await r.raw_states(op_id)


async def test_databricks_a_skipped_run_ends_failed_read_at_its_life_cycle_state(
    pool: Any, tmp_path: Path
) -> None:
    """SKIPPED ends a run with no result_state at all: read at the second path,
    life_cycle_state, a failure saying why it never ran."""
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit("skip"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "SKIPPED" in await r.raw_states(op_id)
        assert await reason(r, op_id) == DATABRICKS_SKIPPED


async def test_databricks_a_cancel_is_confirmed_once_the_run_terminates(
    pool: Any, tmp_path: Path
) -> None:
    """runs/cancel answers {} while the run is TERMINATING (no result_state yet:
    still running); the next read is TERMINATED, CANCELED: cancelled."""
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        rid = fx.only()["id"]
        assert fx.cancels == [(rid, "RUNNING")]
        assert [str(b["run_id"]) for b in fx.cancel_bodies] == [rid]
        assert {"TERMINATING", "CANCELED"} <= await r.raw_states(op_id)


async def test_databricks_a_cancel_after_the_run_ended_leaves_its_success(
    pool: Any, tmp_path: Path
) -> None:
    """The run succeeded before our cancel arrived: the cancel answers {} and
    changes nothing; the run reads SUCCESS, its output collected, no cancel
    claimed."""
    fx = DatabricksFixture()
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit("slow"))
        await r.settle(op_id, {S.OBSERVING})
        job = fx.only()
        job["state"], job["result"], job["message"] = "TERMINATED", "SUCCESS", ""
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        (output,) = [json.loads(await r.result_bytes(op_id))]
        assert output["notebook_output"]["result"] == databricks_output("ingest")


async def test_databricks_a_lost_submit_is_sent_again_with_its_token_and_runs_once(
    pool: Any, tmp_path: Path
) -> None:
    """The submit's answer is lost; the same submit (the same idempotency_token)
    is answered with the run the first launched: one run, collected."""
    fx = DatabricksFixture(lose_first_create=True)
    async with databricks(pool, tmp_path, fx) as r:
        op_id = await r.submit(run_submit())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and len(fx.tokens) == 2 and len(set(fx.tokens)) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


# --- Cloudflare Stream -------------------------------------------------------------

CLOUDFLARE_ENV = {
    "CLOUDFLARE_API_TOKEN": CLOUDFLARE_TOKEN,
    "CLOUDFLARE_STREAM_WEBHOOK_SECRET": CLOUDFLARE_WEBHOOK_SECRET,
}


def copy(script: str | None = None) -> dict[str, Any]:
    meta = {"name": "launch-teaser.mp4"} | ({"script": script} if script else {})
    return {"url": "https://media.example.com/launch-teaser.mp4", "meta": meta}


def cloudflare(
    pool: Any, tmp_path: Path, fx: CloudflareStreamFixture, *, with_receiver: bool = False
) -> Any:
    table = described("cloudflare_stream")
    if not with_receiver:
        table.pop("webhooks")
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="cloudflare_stream",
        env=CLOUDFLARE_ENV,
        overrides=table,
        with_receiver=with_receiver,
    )


async def test_cloudflare_a_copied_video_ready_to_stream_is_kept(pool: Any, tmp_path: Path) -> None:
    """The copy carries our operation id as `creator`; downloading, queued,
    inprogress, ready; the ready video (uid, playback, duration) is the result."""
    fx = CloudflareStreamFixture()
    async with cloudflare(pool, tmp_path, fx) as r:
        op_id = await r.submit(copy())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.copies[0]["creator"] == op_id
        assert {"queued", "inprogress", "ready"} <= await r.raw_states(op_id)
        video = json.loads(await r.result_bytes(op_id))
        assert video["uid"] == fx.only()["id"] and video["readyToStream"] is True
        assert video["playback"]["hls"].endswith("/manifest/video.m3u8")


async def test_cloudflare_a_video_in_error_is_failed_with_its_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = CloudflareStreamFixture()
    async with cloudflare(pool, tmp_path, fx) as r:
        op_id = await r.submit(copy("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        code, text = CLOUDFLARE_FAILURE
        assert await reason(r, op_id) == text
        assert (await r.op(op_id)).last_error["code"] == code


async def test_cloudflare_a_cancel_deletes_the_video_and_its_404_confirms_it(
    pool: Any, tmp_path: Path
) -> None:
    """DELETE while the video is still processing; it then reads 404 (10003 Not
    Found): with deletes_job, that is the video cancelled by us."""
    fx = CloudflareStreamFixture()
    async with cloudflare(pool, tmp_path, fx) as r:
        op_id = await r.submit(copy("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "inprogress")]


async def test_cloudflare_a_cancel_never_deletes_a_ready_video(pool: Any, tmp_path: Path) -> None:
    """The video became ready before our DELETE would go: read first, nothing
    deleted, the video kept as the result."""
    fx = CloudflareStreamFixture()
    async with cloudflare(pool, tmp_path, fx) as r:
        op_id = await r.submit(copy("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.deleted == []
        assert json.loads(await r.result_bytes(op_id))["readyToStream"] is True


async def test_cloudflare_a_lost_copy_is_found_by_its_creator(pool: Any, tmp_path: Path) -> None:
    """No idempotency: the copy whose answer was lost is never sent again; the
    video list filtered by creator (our operation id) names it, and it is adopted."""
    fx = CloudflareStreamFixture(lose_first_create=True)
    async with cloudflare(pool, tmp_path, fx) as r:
        op_id = await r.submit(copy())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and op_id in fx.list_reads
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_cloudflare_a_signed_webhook_wakes_the_video_and_forgeries_are_refused(
    pool: Any, tmp_path: Path
) -> None:
    """`Webhook-Signature: time=…,sig1=…` over "time.body": a delivery signed so is
    stored, matched by the video's creator (our operation id), and wakes the read
    long before the backstop; one under another secret, or five minutes stale (a
    replay), is refused and stores nothing."""
    fx = CloudflareStreamFixture()
    async with cloudflare(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(copy("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        uid = fx.only()["id"]
        fx.finish(uid)
        assert await fx.deliver(r.hook_url, uid, secret="another-secret") == 401
        assert await fx.deliver(r.hook_url, uid, at=int(time.time()) - 600) == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, uid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT operation_id, remote_job_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'cloudflare_stream'"
        )
        assert [tuple(e) for e in events] == [(op_id, uid, "ready")]


# --- Snowflake SQL API -------------------------------------------------------------


def statement(script: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "statement": "SELECT day, COUNT(*) FROM sales.public.orders GROUP BY day ORDER BY day",
        "timeout": 600,
        "database": "SALES",
        "schema": "PUBLIC",
        "warehouse": "REPORTING_WH",
        "role": "ANALYST",
    }
    if script:
        body["parameters"] = {"query_tag": script}
    return body


@contextlib.asynccontextmanager
async def snowflake(
    pool: Any, tmp_path: Path, fx: SnowflakeFixture, max_pages: int | None = None
) -> AsyncIterator[PresetRig]:
    jwt_file = tmp_path / "snowflake.jwt"
    jwt_file.write_text(SNOWFLAKE_JWT + "\n")
    table = described("snowflake_sql")
    table["auth"] = {**table["auth"], "secret_file": str(jwt_file)}
    if max_pages is not None:
        pages = table["result"]["pages"] | {"max_pages": max_pages}
        table["result"] = table["result"] | {"pages": pages}
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="snowflake_sql",
        env={"SNOWFLAKE_TOKEN_TYPE": "KEYPAIR_JWT"},
        overrides=table,
    ) as r:
        yield r


async def test_snowflake_a_statement_is_read_202_then_200_its_rows_kept(
    pool: Any, tmp_path: Path
) -> None:
    """Submitted with async=true and our requestId (a UUID); 202 code 333334 while
    it runs, then 200 with the result set: its rows kept, counted against numRows."""
    fx = SnowflakeFixture()
    async with snowflake(pool, tmp_path, fx) as r:
        op_id = await r.submit(statement())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        ((request_id, retry),) = fx.submits
        assert request_id is not None and str(uuid.UUID(request_id)) == request_id
        assert retry is None  # "set to true only when retrying the request"
        assert {"333334", "090001"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id))["data"] == SNOWFLAKE_ROWS
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == len(SNOWFLAKE_ROWS), summary


async def test_snowflake_a_422_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = SnowflakeFixture()
    async with snowflake(pool, tmp_path, fx) as r:
        op_id = await r.submit(statement("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == SNOWFLAKE_FAILURE
        assert (await r.op(op_id)).last_error["code"] == "002003"


async def test_snowflake_a_cancelled_statements_422_000604_is_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """After POST .../cancel the statement answers 422 too, code 000604 "SQL
    execution canceled": cancelled (status.cancelled_error_codes), never failed."""
    fx = SnowflakeFixture()
    async with snowflake(pool, tmp_path, fx) as r:
        op_id = await r.submit(statement("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "running")]
        assert "failed" not in await r.history(op_id)


async def test_snowflake_a_lost_submit_is_resubmitted_with_its_request_id_and_runs_once(
    pool: Any, tmp_path: Path
) -> None:
    """The submit's answer is lost; the same request (the same requestId), now with
    retry=true (create.resend_query: the first went without), is answered with the
    statement already running: one statement."""
    fx = SnowflakeFixture(lose_first_create=True)
    async with snowflake(pool, tmp_path, fx) as r:
        op_id = await r.submit(statement())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and [retry for _, retry in fx.submits] == [None, "true"]
        assert len({request_id for request_id, _ in fx.submits}) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_snowflake_a_result_of_several_partitions_is_read_partition_by_partition(
    pool: Any, tmp_path: Path
) -> None:
    """A result cut into two partitions: the first (?partition=0) lists them in
    partitionInfo, the second carries its data alone; both are read by number and
    kept as one, every row of numRows there. Before, no description could ask for
    a partition by number: only the first was read, and the result refused."""
    fx = SnowflakeFixture()
    fx.partitions = 2
    async with snowflake(pool, tmp_path, fx) as r:
        op_id = await r.submit(statement())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        # the status reads name no partition; the result's fetches each name theirs
        assert [p for p in fx.partition_reads if p is not None] == ["0", "1"]
        kept = json.loads(await r.result_bytes(op_id))
        assert [row for part in kept for row in part["data"]] == SNOWFLAKE_ROWS
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == len(SNOWFLAKE_ROWS), summary


async def test_snowflake_more_partitions_than_max_pages_are_refused_at_the_first(
    pool: Any, tmp_path: Path
) -> None:
    """The first partition names three, `max_pages` allows two: refused there, no
    other partition fetched. Before, partitions were fetched up to the limit and
    the result refused only then: work and bytes for a result that could never be
    kept whole."""
    fx = SnowflakeFixture()
    fx.partitions = len(SNOWFLAKE_ROWS)
    async with snowflake(pool, tmp_path, fx, max_pages=2) as r:
        op_id = await r.submit(statement())
        assert await r.settle(op_id, ENDS) is not S.SUCCEEDED, await r.history(op_id)
        assert [p for p in fx.partition_reads if p is not None] == ["0"]
        esc = await r.escalation(op_id)
        said = str(esc["reason"]) if esc else str(await r.history(op_id))
        assert "names 3 pages, more than 2 (result.pages.max_pages)" in said, said


# --- Shopify bulk operations -------------------------------------------------------

SHOPIFY_ENV = {
    "SHOPIFY_ACCESS_TOKEN": SHOPIFY_TOKEN,
    "SHOPIFY_WEBHOOK_SECRET": SHOPIFY_WEBHOOK_SECRET,
}
RUN_QUERY = (
    "mutation($q: String!) { bulkOperationRunQuery(query: $q) {"
    " bulkOperation { id status } userErrors { field message code } } }"
)


def bulk_query(script: str | None = None) -> dict[str, Any]:
    q = "{ products { edges { node { id title variants { edges { node { id sku } } } } } } }"
    variables = {"q": q} | ({"script": script} if script else {})
    return {"query": RUN_QUERY, "variables": variables}


@contextlib.asynccontextmanager
async def shopify(
    pool: Any, tmp_path: Path, fx: ShopifyBulkFixture, *, with_receiver: bool = False
) -> AsyncIterator[PresetRig]:
    """The description as written, with Google Cloud Storage's signed links on
    `localhost` beside it (result.allowed_hosts, as an operator names it)."""
    table = described("shopify_bulk", result={"allowed_hosts": ["localhost"]})
    if not with_receiver:
        table.pop("webhooks")
    async with serve_app(fx.storage()) as storage_url:
        fx.storage_url = storage_url.replace("127.0.0.1", "localhost")
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="shopify_bulk",
            env=SHOPIFY_ENV,
            overrides=table,
            with_receiver=with_receiver,
        ) as r:
            yield r


def lines_of(kept: bytes) -> list[Any]:
    return [json.loads(line) for line in kept.splitlines()]


async def test_shopify_a_bulk_query_is_collected_from_its_signed_link(
    pool: Any, tmp_path: Path
) -> None:
    """CREATED, RUNNING, COMPLETED read by POSTing node(id:); the JSONL at the
    signed link is fetched without our access token, its lines counted against
    objectCount, nested objects (__parentId) included."""
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"RUNNING", "COMPLETED"} <= await r.raw_states(op_id)
        assert lines_of(await r.result_bytes(op_id)) == SHOPIFY_LINES
        (headers,) = fx.storage_headers
        assert "x-shopify-access-token" not in headers
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == len(SHOPIFY_LINES), summary


async def test_shopify_a_query_that_matched_nothing_is_an_empty_success(
    pool: Any, tmp_path: Path
) -> None:
    """COMPLETED with url null and objectCount "0": nothing to fetch, an empty
    result kept (result.empty_without_url), never result_unavailable."""
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query("empty"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == b""
        assert fx.storage_headers == []


async def test_shopify_a_failed_operation_is_failed_with_its_error_code(
    pool: Any, tmp_path: Path
) -> None:
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).last_error["code"] == "ACCESS_DENIED"


async def test_shopify_a_cancel_goes_canceling_then_canceled(pool: Any, tmp_path: Path) -> None:
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "RUNNING")]
        assert "CANCELED" in await r.raw_states(op_id)


async def test_shopify_a_cancel_of_a_completed_operation_is_refused_and_its_file_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The operation completed before our cancel: Shopify answers 200 with a
    userError ("cannot be canceled when it is completed") and the operation
    COMPLETED. Nothing is cancelled; the file is collected."""
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "COMPLETED")]
        assert "cancelled" not in await r.history(op_id)
        assert lines_of(await r.result_bytes(op_id)) == SHOPIFY_LINES


@pytest.mark.parametrize("refusal", ["THROTTLED", "OPERATION_IN_PROGRESS"])
async def test_shopify_a_throttled_or_busy_create_made_nothing_and_is_sent_again(
    pool: Any, tmp_path: Path, refusal: str
) -> None:
    """A 200 carrying errors THROTTLED, or userErrors OPERATION_IN_PROGRESS (the
    shop's one bulk query is busy), created nothing (create.not_created_codes):
    the same create goes again, one operation made, no human asked."""
    fx = ShopifyBulkFixture(refuse_first=refusal)
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.refused == [refusal] and fx.posts == 2 and fx.creates == 1
        assert "create_unknown" not in await r.history(op_id)


async def test_shopify_throttled_status_reads_are_read_past(pool: Any, tmp_path: Path) -> None:
    """Status reads answered 200 with errors THROTTLED name no state: read past,
    never counted toward a human, the operation collected."""
    fx = ShopifyBulkFixture()
    fx.throttled_reads = 4
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.throttled_reads == 0


async def test_shopify_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    """No idempotency and no lookup (currentBulkOperation names no reference of
    ours): a create whose answer was lost is never sent again."""
    fx = ShopifyBulkFixture(lose_first_create=True)
    async with shopify(pool, tmp_path, fx) as r:
        op_id = await r.submit(bulk_query())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_shopify_the_signed_finish_webhook_wakes_the_operation(
    pool: Any, tmp_path: Path
) -> None:
    """bulk_operations/finish, X-Shopify-Hmac-Sha256 over the raw body: stored
    matched by admin_graphql_api_id and wakes the read; one signed with another
    secret is refused and stores nothing."""
    fx = ShopifyBulkFixture()
    async with shopify(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(bulk_query("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        oid = fx.only()["id"]
        fx.finish(oid)
        assert await fx.deliver(r.hook_url, oid, secret="shpss_another") == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, oid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT operation_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'shopify_bulk'"
        )
        assert [tuple(e) for e in events] == [(op_id, "completed")]
