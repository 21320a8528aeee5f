"""Meta's asynchronous insights report runs, Amazon SP-API's reports, Elasticsearch's
reindex tasks, Stripe's report runs and Jenkins' builds, described in TOML as a new
user would (tests/fixtures_providers/unseen/: meta_insights, amazon_sp_reports,
elasticsearch_tasks, stripe_reports, jenkins) and driven through the real reconciler
(and receiver) against fakes on loopback (tests/fixtures_providers/unseen_round55.py):
success with the result collected, failure with its reason, cancel where the API
has one, a lost create, and each API's own edge: Meta's rows behind absolute
`paging.next` links carrying the access token, and its throttles told by a code in a
400; Amazon's result two hops away (report, document, pre-signed file), gzipped when
the document says so, its cancel taken only while IN_QUEUE; Elasticsearch's task
told by a boolean, ended by an `error` or by a reindex's `failures`, its cancel read
at `response.canceled`; Stripe's form create with its parameters in brackets, its
idempotency key answered 409 while the first request is in progress, and its signed
events; Jenkins, which cannot be described (unseen/jenkins.toml says which keys are
missing).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round55 import (
    ES_API_KEY,
    ES_DOCS,
    ES_ERROR,
    ES_FAILURE,
    JENKINS_BASIC,
    META_ROWS,
    META_TOKEN,
    SP_TOKEN,
    SP_TSV,
    STRIPE_CSV,
    STRIPE_FAIL,
    STRIPE_FAILURE,
    STRIPE_KEY,
    STRIPE_SLOW,
    STRIPE_WEBHOOK_SECRET,
    AmazonReportsFixture,
    ElasticsearchFixture,
    JenkinsFixture,
    MetaInsightsFixture,
    StripeReportsFixture,
)

S = LocalState


async def recorded_calls(r: Any, op_id: str) -> str:
    """Every call on record for the operation, as stored, in one text."""
    rows = await r.pool.fetch(
        "SELECT * FROM provider_calls WHERE operation_id = $1 ORDER BY call_id", op_id
    )
    return json.dumps([dict(row) for row in rows], default=str)


# --- Meta Marketing API ------------------------------------------------------------


def insights(script: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "level": "campaign",
        "fields": "campaign_name,impressions,spend",
        "date_preset": "last_30d",
    }
    if script:
        body["filtering"] = [{"field": "campaign.name", "operator": "CONTAIN", "value": script}]
    return body


def meta(pool: Any, tmp_path: Path, fx: MetaInsightsFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="meta_insights",
        env={"META_ACCESS_TOKEN": META_TOKEN},
        overrides=described("meta_insights"),
    )


async def test_meta_a_report_run_is_collected_page_by_page(pool: Any, tmp_path: Path) -> None:
    """Job Not Started, Job Running, Job Completed; the rows read behind each page's
    absolute `paging.next` (its access_token never kept on record), all five."""
    fx = MetaInsightsFixture()
    async with meta(pool, tmp_path, fx) as r:
        op_id = await r.submit(insights())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert {"Job Running", "Job Completed"} <= await r.raw_states(op_id)
        assert fx.page_reads == [None, "MjQZD2", "MjQZD4"]
        kept = json.loads(await r.result_bytes(op_id))
        rows = [row for page in kept for row in page["data"]]
        assert [row["campaign_name"] for row in rows] == [m["campaign_name"] for m in META_ROWS]
        assert META_TOKEN not in await recorded_calls(r, op_id)
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == len(META_ROWS), summary


async def test_meta_a_failed_run_is_failed_saying_meta_gave_no_reason(
    pool: Any, tmp_path: Path
) -> None:
    """ "Job Failed" is all a report run says (the AdReportRun has no error field):
    failed, the reason saying so in Meta's own word, no rows asked for."""
    fx = MetaInsightsFixture()
    async with meta(pool, tmp_path, fx) as r:
        op_id = await r.submit(insights("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "Job Failed" in await r.raw_states(op_id)
        assert fx.page_reads == []
        said = await reason(r, op_id)
        assert "'Job Failed'" in said and "no reason" in said, said


async def test_meta_throttled_creates_and_reads_are_back_pressure(
    pool: Any, tmp_path: Path
) -> None:
    """400 code 80000 (the ad account's insights quota) made nothing: the create
    goes again, one report run; reads so refused are read past."""
    fx = MetaInsightsFixture()
    fx.throttle_creates, fx.throttle_reads = 1, 3
    async with meta(pool, tmp_path, fx) as r:
        op_id = await r.submit(insights())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.throttle_creates == 0 and fx.throttle_reads == 0
        assert "create_unknown" not in await r.history(op_id)


async def test_meta_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    """No idempotency, no reference of ours on a report run, no documented list of
    them: a create whose answer was lost is never sent again."""
    fx = MetaInsightsFixture(lose_first_create=True)
    async with meta(pool, tmp_path, fx) as r:
        op_id = await r.submit(insights())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Amazon SP-API reports ---------------------------------------------------------


def report(script: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "reportType": "GET_MERCHANT_LISTINGS_ALL_DATA",
        "marketplaceIds": ["ATVPDKIKX0DER"],
    }
    if script:
        body["reportOptions"] = {"script": script}
    return body


@contextlib.asynccontextmanager
async def amazon(pool: Any, tmp_path: Path, fx: AmazonReportsFixture) -> AsyncIterator[PresetRig]:
    """The description as written, its LWA token in a file, S3's pre-signed links on
    `localhost` (result.allowed_hosts, as an operator names it)."""
    token_file = tmp_path / "sp_api_lwa_token"
    token_file.write_text(SP_TOKEN + "\n")
    table = described("amazon_sp_reports", result={"allowed_hosts": ["localhost"]})
    table["auth"] = {**table["auth"], "secret_file": str(token_file)}
    async with serve_app(fx.storage()) as storage_url:
        fx.url = storage_url.replace("127.0.0.1", "localhost")
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="amazon_sp_reports",
            env={},
            overrides=table,
        ) as r:
            yield r


async def test_amazon_a_report_is_collected_through_its_document(pool: Any, tmp_path: Path) -> None:
    """IN_QUEUE, IN_PROGRESS, DONE naming a reportDocumentId; the document names
    the pre-signed link, read without the access token: the TSV kept as sent."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert {"IN_PROGRESS", "DONE"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == SP_TSV
        (headers,) = fx.storage_headers
        assert "x-amz-access-token" not in headers and "authorization" not in headers


async def test_amazon_a_gzipped_document_is_kept_decompressed(pool: Any, tmp_path: Path) -> None:
    """The document says compressionAlgorithm GZIP and S3 serves the gzip file with
    no Content-Encoding: the TSV is kept decompressed (result.compression). Before,
    the gzip bytes were judged as the text report: result_validation_failed, "not
    valid UTF-8"."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report("gzip"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        ((stored, _type),) = fx.objects.values()
        assert gzip.decompress(stored) == SP_TSV  # kept compressed at the store
        assert await r.result_bytes(op_id) == SP_TSV


async def test_amazon_a_throttled_create_made_nothing_and_is_sent_again(
    pool: Any, tmp_path: Path
) -> None:
    """429 QuotaExceeded rejects the request (create.not_created_statuses): the same
    create goes again, one report made, no human asked."""
    fx = AmazonReportsFixture()
    fx.throttled_creates = 2
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.throttled_creates == 0 and fx.creates == 1
        assert "create_unknown" not in await r.history(op_id)


async def test_amazon_a_fatal_report_is_failed(pool: Any, tmp_path: Path) -> None:
    """FATAL is failed. Its reason is in the error document its reportDocumentId
    names, which no description reads on a failure: the reason says FATAL alone
    (left so: see the round's report), and that document is never taken for a
    result."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "'FATAL'" in await reason(r, op_id)
        assert fx.documents == []


async def test_amazon_a_queued_report_is_cancelled(pool: Any, tmp_path: Path) -> None:
    """DELETE while IN_QUEUE answers 200 with no body; the report reads CANCELLED."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report("queued"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "IN_QUEUE")]


async def test_amazon_a_cancel_refused_in_progress_leaves_the_report_to_complete(
    pool: Any, tmp_path: Path
) -> None:
    """ "Only reports with processingStatus=IN_QUEUE can be cancelled": a DELETE of
    one IN_PROGRESS is refused 400; the report completes and is collected, no
    cancel claimed."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report("slow"))
        await r.settle(op_id, {S.OBSERVING})
        assert fx.only()["state"] == "IN_PROGRESS"
        await r.cancel(op_id)
        fx.only()["script"] = None  # it completes at the next read
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "IN_PROGRESS")]
        assert "cancelled" not in await r.history(op_id)
        assert await r.result_bytes(op_id) == SP_TSV


async def test_amazon_a_report_amazon_cancelled_for_want_of_data_reads_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """Amazon cancels a report with no data on its own: CANCELLED, mapped as
    documented, the transition saying no cancel was asked of jobwarden (before,
    "remote CANCELLED" alone, read as an agent's cancel)."""
    fx = AmazonReportsFixture()
    async with amazon(pool, tmp_path, fx) as r:
        op_id = await r.submit(report("nodata"))
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert "cancel_requested" not in await r.history(op_id) and fx.cancels == []
        cause = await r.pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'cancelled'", op_id
        )
        assert "no cancellation was asked of jobwarden and none was sent" in cause, cause


# --- Elasticsearch -----------------------------------------------------------------


def reindex(script: str = "2025") -> dict[str, Any]:
    return {"source": {"index": f"orders-{script}"}, "dest": {"index": f"orders-{script}-v2"}}


def elastic(pool: Any, tmp_path: Path, fx: ElasticsearchFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="elasticsearch_tasks",
        env={"ELASTICSEARCH_API_KEY": ES_API_KEY},
        overrides=described("elasticsearch_tasks"),
    )


async def test_elasticsearch_a_reindex_task_is_collected(pool: Any, tmp_path: Path) -> None:
    """The task "node:id" (its colon sent escaped, which Elasticsearch reads back)
    is read `completed` false, then true with its `response`, kept; X-Opaque-Id
    names our operation in the task for whoever reads GET _tasks."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        task = fx.only()["id"]
        assert (await r.op(op_id)).remote_job_id == task
        assert fx.opaque_ids == [op_id]
        assert fx.task_paths[0] == "/_tasks/" + task.replace(":", "%3A")
        assert {"false", "true"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["created"] == ES_DOCS and kept["failures"] == []


async def test_elasticsearch_a_task_ended_by_an_error_is_failed(pool: Any, tmp_path: Path) -> None:
    """`completed` true with `error`: failed (error_means_failed), its reason kept."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == ES_ERROR
        assert (await r.op(op_id)).last_error["code"] == "cluster_block_exception"


async def test_elasticsearch_a_reindex_aborted_on_its_failures_is_failed(
    pool: Any, tmp_path: Path
) -> None:
    """`completed` true, no `error`, `response.failures` non-empty: the reindex
    aborted on them. Failed with the first failure's cause (error_code and
    error_message each listing a second path); before, one path each, it read as a
    success."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex("failures"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == ES_FAILURE
        assert (await r.op(op_id)).last_error["code"] == "mapper_parsing_exception"


async def test_elasticsearch_a_cancelled_reindex_is_cancelled(pool: Any, tmp_path: Path) -> None:
    """_cancel, then the task completes with response.canceled "by user request":
    cancelled, read at the first of the state's paths."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "running")]
        assert "by user request" in await r.raw_states(op_id)


async def test_elasticsearch_a_cancel_after_the_task_completed_leaves_its_success(
    pool: Any, tmp_path: Path
) -> None:
    """The reindex completed before our cancel: _cancel answers 404 "is not found";
    the task reads completed, its response collected, no cancel claimed."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "done"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "done")]
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id))["created"] == ES_DOCS


async def test_elasticsearch_a_missing_index_is_refused_at_create(
    pool: Any, tmp_path: Path
) -> None:
    """A 404 index_not_found_exception to the create made no task: failed with
    Elasticsearch's reason, no task read."""
    fx = ElasticsearchFixture()
    async with elastic(pool, tmp_path, fx) as r:
        op_id = await r.submit(reindex("missing"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "no such index [orders-missing]"
        assert (await r.op(op_id)).last_error["code"] == "index_not_found_exception"
        assert fx.jobs == {} and fx.reads == 0


# --- Stripe report runs ------------------------------------------------------------


def report_run(start: int = 1764547200, *, nested: bool = True) -> dict[str, Any]:
    params = {"interval_start": start, "interval_end": 1765152000, "timezone": "Etc/UTC"}
    if nested:
        return {"report_type": "balance.summary.1", "parameters": params}
    return {"report_type": "balance.summary.1"} | {f"parameters[{k}]": v for k, v in params.items()}


@contextlib.asynccontextmanager
async def stripe(
    pool: Any, tmp_path: Path, fx: StripeReportsFixture, *, with_receiver: bool = False
) -> AsyncIterator[PresetRig]:
    table = described("stripe_reports")
    if not with_receiver:
        table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="stripe_reports",
        env={"STRIPE_SECRET_KEY": STRIPE_KEY, "STRIPE_WEBHOOK_SECRET": STRIPE_WEBHOOK_SECRET},
        overrides=table,
        with_receiver=with_receiver,
    ) as r:
        yield r


async def test_stripe_a_report_run_is_collected_its_parameters_in_brackets(
    pool: Any, tmp_path: Path
) -> None:
    """The agent writes the run as Stripe's docs show it, `parameters` an object:
    sent as parameters[interval_start]=... (create.form_nesting = "brackets") with
    our Idempotency-Key; pending, then succeeded, its CSV File read with our key.
    Before, a form refused the object: never sent, a human asked."""
    fx = StripeReportsFixture()
    async with stripe(pool, tmp_path, fx) as r:
        op_id = await r.submit(report_run())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (form,) = fx.forms
        assert ("parameters[interval_start]", "1764547200") in form
        assert ("report_type", "balance.summary.1") in form
        assert fx.keys == [(await r.op(op_id)).idempotency_token]
        assert {"pending", "succeeded"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == STRIPE_CSV
        assert fx.file_auth == [f"Bearer {STRIPE_KEY}"]


async def test_stripe_bracketed_names_the_agent_wrote_go_as_written(
    pool: Any, tmp_path: Path
) -> None:
    fx = StripeReportsFixture()
    async with stripe(pool, tmp_path, fx) as r:
        op_id = await r.submit(report_run(nested=False))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert ("parameters[interval_start]", "1764547200") in fx.forms[0]


async def test_stripe_a_failed_run_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    """status failed, `error` a message string: its reason."""
    fx = StripeReportsFixture()
    async with stripe(pool, tmp_path, fx) as r:
        op_id = await r.submit(report_run(STRIPE_FAIL))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == STRIPE_FAILURE


async def test_stripe_a_lost_create_is_sent_again_with_its_key(pool: Any, tmp_path: Path) -> None:
    """The create's answer is lost; the same create (the same Idempotency-Key) is
    answered 409 idempotency_key_in_use while the first is still in progress, then
    with the first's answer: one run, collected."""
    fx = StripeReportsFixture(lose_first_create=True)
    async with stripe(pool, tmp_path, fx) as r:
        op_id = await r.submit(report_run())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and len(set(fx.keys)) == 1 and fx.in_use >= 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_stripe_a_signed_event_wakes_the_run(pool: Any, tmp_path: Path) -> None:
    """reporting.report_run.succeeded, `Stripe-Signature: t=,v1=` over "t.body":
    stored by the run's id and wakes the read long before the backstop; one under
    another secret, or ten minutes stale, is refused and stores nothing."""
    fx = StripeReportsFixture()
    async with stripe(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(report_run(STRIPE_SLOW))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.finish(rid)
        assert await fx.deliver(r.hook_url, rid, secret="whsec_another") == 401
        assert await fx.deliver(r.hook_url, rid, at=int(time.time()) - 600) == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT remote_job_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'stripe_reports'"
        )
        assert [tuple(e) for e in events] == [(rid, "succeeded")]


# --- Jenkins -----------------------------------------------------------------------


async def test_jenkins_cannot_be_described_the_location_read_as_given_is_a_404(
    pool: Any, tmp_path: Path
) -> None:
    """Not describable (unseen/jenkins.toml says which keys are missing): the queue
    item is read at its Location plus "api/json", which no key writes. The
    next-simplest description reads the Location as given, which Jenkins answers 404:
    the build was queued, and the operation stops for a human saying the job was
    not found, never a state guessed."""
    fx = JenkinsFixture()
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="jenkins",
        env={"JENKINS_BASIC_CREDENTIALS": JENKINS_BASIC},
        overrides=described("jenkins"),
    ) as r:
        op_id = await r.submit({"BRANCH": "main", "SCRIPT": "ok"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert "404" in await reason(r, op_id)
        assert fx.creates == 1 and fx.bare_reads >= 1 and fx.queue_reads == []
        assert "observing" not in await r.history(op_id)
