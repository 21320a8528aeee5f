"""API shapes no preset has, described in TOML alone, end to end (real reconciler, real
HTTP fixtures on loopback, real database).

Each case is one a reviewer found mishandled by running a provider jobwarden
had never seen: a lookup paged by a response header read only page 1 and the
create ran twice; a job finished by 303 See Other ended in needs_attention;
a pre-signed result link read from a header was fetched as the call log
stores it, its signature redacted; a lookup paged by page number (Mistral's
batch jobs) read only page 0 and the create ran twice; a CSV result paged by a header was stored
as a success with half its rows; a cancel that needs a body went empty and its
400 was never surfaced; a result behind a redirect was declared unavailable; a
cancel that deletes a finished task (Runway's DELETE) was sent to one that had
just succeeded, destroying its result, and the operation said "cancelled".
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.harness import TestClock
from receiver.api.resources import operation_resource
from reconciler.steps.collect import MAX_RESULT_ATTEMPTS
from shared.ledger import audit, log, log_audit
from shared.ledger.states import LocalState
from shared.providers import HttpRequest, HttpResponse
from shared.providers.adapter import ProviderAdapter
from shared.serve import serve_app
from shared.signatures.signing import sign_standard_webhooks
from tests.fixtures_providers.rig import PresetRig, load, preset_rig
from tests.fixtures_providers.shapes import (
    BATCH_JOBS,
    BLOB_SIGNATURE,
    BULK_LOCATOR,
    BULK_ROWS,
    CRAWL_DOCUMENTS,
    DATASET_ITEMS,
    HEYGEN_VIDEO,
    LOGS_ZIP,
    OUTPUT_ROWS,
    PIPELINES,
    TASK_OUTPUT,
    VIDEO,
    BatchJobsFixture,
    BlobStore,
    BulkExportFixture,
    BulkQueryFixture,
    CancelledOutputFixture,
    CrawlFixture,
    DatasetFixture,
    DubbingFixture,
    GraphqlBulkFixture,
    OutputPaging,
    PipelinesFixture,
    QueueFixture,
    RequestReplyFixture,
    ResultsFixture,
    RunLogsFixture,
    TasksFixture,
    VideosFixture,
    apify_dataset,
    bulk_export,
    bulk_query,
    cancelled_output,
    crawl_documents,
    dub_audio,
    elevenlabs_dubbing,
    fal_queue,
    firecrawl_crawl,
    heygen_videos,
    request_reply,
    run_logs,
    runway_tasks,
    shopify_bulk,
    stability_results,
)

S = LocalState
GH_ENV = {"GH_TOKEN": "ghp_test"}
ENDS = {
    S.SUCCEEDED,
    S.FAILED,
    S.NEEDS_ATTENTION,
    S.RESULT_UNAVAILABLE,
    S.RESULT_VALIDATION_FAILED,
}


async def test_a_lookup_paged_by_a_header_reads_every_page_before_creating_again(
    pool: Any, tmp_path: Path
) -> None:
    """The lost create's pipeline is on page 2: proof of absence needs the last page."""
    fx = PipelinesFixture(lose_first_create=True)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="gitlab", env={}, overrides=PIPELINES
    ) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED
        assert fx.registry.calls["create"] == 1  # one pipeline: the lost one, found
        assert 2 in fx.pages
        op = await r.op(op_id)
        assert op.remote_job_id == "1001"
        assert "create_unknown" in await r.history(op_id)


# 150 jobs of others ahead of ours: at 100 a page, ours is on page 1 (from 0).
OTHERS = 150


async def test_a_lookup_paged_by_page_number_finds_the_lost_job_behind_150_others(
    pool: Any, tmp_path: Path
) -> None:
    """Mistral's batch jobs: page 0 holds only others; the lost job is adopted, not re-sent."""
    fx = BatchJobsFixture(others=OTHERS)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="mistral", env={}, overrides=BATCH_JOBS
    ) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1  # never re-sent
        assert fx.ours(op_id) == [(await r.op(op_id)).remote_job_id]
        assert "create_unknown" in await r.history(op_id)
        # found on page 1, the last one: the items read reach the list's total
        assert fx.pages[:2] == [0, 1] and 2 not in fx.pages
        lookups = await r.calls(op_id, "lookup")
        assert "page=1" in lookups[1]["url"] and "page_size=100" in lookups[1]["url"]


async def test_a_lookup_that_reads_every_page_without_our_job_sends_the_create_once_more(
    pool: Any, tmp_path: Path
) -> None:
    """The lost create made no job: absence is proven by the last page, so one re-send."""
    fx = BatchJobsFixture(others=OTHERS, keep_lost=False)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="mistral", env={}, overrides=BATCH_JOBS
    ) as r:
        op_id = await r.submit({"model": "mistral-small-latest"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 2  # the lost one, then once more
        assert fx.ours(op_id) == [(await r.op(op_id)).remote_job_id]
        # every scan, the re-send's cross-check too, read to the end (page 1 ends the total)
        assert fx.pages == [0, 1] * (len(fx.pages) // 2) and len(fx.pages) >= 4


async def test_a_lookup_stopped_by_its_page_limit_proves_no_absence_and_never_re_sends(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """350 others, 3 pages allowed: the unread end may hold the job; a human decides."""
    fx = BatchJobsFixture(others=350, keep_lost=False)
    limited = {**BATCH_JOBS, "lookup": {**BATCH_JOBS["lookup"], "max_pages": 3}}
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mistral",
        env={},
        overrides=limited,
        clock=clock,
    ) as r:
        op_id = await r.submit({"model": "mistral-small-latest"}, create_deadline_s=60.0)
        await r.settle(op_id, {S.CREATE_UNKNOWN})
        for _ in range(6):  # far past the settle window in which an empty list proves nothing
            await clock.advance(5.0)
            await r.reconciler.run_once()
        assert fx.creates == 1
        assert set(fx.pages) == {0, 1, 2} and len(fx.pages) >= 6  # scanned, never past page 2
        await clock.advance(60.0)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION
        escalation = await r.escalation(op_id)
        assert "lookup.max_pages = 3" in escalation["reason"], escalation["reason"]
        assert fx.creates == 1


async def _rendered(
    pool: Any, tmp_path: Path, done_by: Literal["303", "presigned"]
) -> tuple[RequestReplyFixture, list[Any]]:
    """One render job run to its end; the fixture and the status calls on record."""
    fx = RequestReplyFixture(done_by)
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="areply",
        env={},
        overrides=request_reply(done_by),
    ) as r:
        op_id = await r.submit({"scene": "x"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        return fx, await r.calls(op_id, "status")


async def test_a_job_done_by_303_see_other_is_collected_from_its_location(
    pool: Any, tmp_path: Path
) -> None:
    fx, reads = await _rendered(pool, tmp_path, "303")
    assert fx.result_queries == [""]
    assert reads[-1]["status_code"] == 303  # the read that decided is the one collected from


async def test_a_presigned_link_in_a_header_is_fetched_as_received_not_as_recorded(
    pool: Any, tmp_path: Path
) -> None:
    """The call log keeps the link's signature redacted; collecting from that record
    fetched a broken link (403) and gave up on a result that was there."""
    fx, reads = await _rendered(pool, tmp_path, "presigned")
    (query,) = fx.result_queries
    assert "X-Amz-Signature=c2lnbmF0dXJl" in query
    # what the log keeps of the deciding read is still redacted
    assert any("[redacted]" in c["response_headers"].get("location", "") for c in reads)


async def test_a_result_holding_fewer_items_than_the_status_counts_is_not_valid(
    pool: Any, tmp_path: Path
) -> None:
    """Page 1 of 2 (Sforce-Locator names page 2), numberRecordsProcessed = 6, no item_count:
    this was `succeeded` with items_total 6, items_succeeded 3."""
    fx = BulkQueryFixture()
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        assert fx.locators == [None]
        escalation = await r.escalation(op_id)
        assert "the status reports 6 items, the result accounts for 3" in escalation["reason"]
        assert (await r.op(op_id)).result_id is None


async def test_a_final_read_naming_no_state_is_read_again_not_escalated(
    pool: Any, tmp_path: Path
) -> None:
    """The result fetch answers 503, so the collection reads the status afresh, and
    that read is a 200 whose body names no state (GraphQL's `errors`): this went to
    needs_attention, "collecting a result, but the provider now reports None"."""
    fx = BulkQueryFixture(page_size=10, busy_results=1, error_reads_after_done=1)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.error_reads_served == 1
        assert "needs_attention" not in await r.history(op_id)


@pytest.mark.parametrize("counts", [True, False], ids=["with_counts", "without_counts"])
async def test_a_result_paged_by_a_header_is_collected_whole(
    pool: Any, tmp_path: Path, counts: bool
) -> None:
    """Salesforce's Sforce-Locator, `[result.pages]`: both pages fetched, one CSV stored.
    Without it the first page alone was the result: with the status's count a
    validation failure no fix could mend, without it a success with half the rows."""
    fx = BulkQueryFixture()
    described = bulk_query(paged=True, counts=counts)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.locators == [None, BULK_LOCATOR]
        op = await r.op(op_id)
        assert (op.result_summary["items_total"], op.result_summary["items_succeeded"]) == (6, 6)
        ref = await pool.fetchval(
            "SELECT storage_ref FROM results WHERE result_id = $1", op.result_id
        )
        stored = Path(ref.removeprefix("file:")).read_bytes()
        assert stored == ("Id,Name\n" + "".join(f"{row}\n" for row in BULK_ROWS)).encode()


async def test_a_page_that_fails_is_fetched_again_where_the_attempt_stopped(
    pool: Any, tmp_path: Path
) -> None:
    """Page 2 answers 503: no partial result is stored; the next attempt reads
    page 1 again, finds it the same bytes, and goes on from page 2 with the page 1
    kept (reconciler/page_memory.py). Before page memory, it read from page 1
    again and on."""
    fx = BulkQueryFixture(busy_later_pages=1)
    described = bulk_query(paged=True)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.locators == [None, BULK_LOCATOR, None, BULK_LOCATOR]
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (6, 6)


async def test_a_paged_result_past_max_bytes_is_not_fetched_further(
    pool: Any, tmp_path: Path
) -> None:
    """The size limit holds for the pages together, checked as they come: the
    pages after the one that crosses it are never fetched."""
    fx = BulkQueryFixture()
    described = bulk_query(paged=True, counts=False)
    described["result"]["expect"] = {"max_bytes": 40}  # page 1 alone is 46 bytes
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        end = await r.settle(op_id, ENDS)
        assert end is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        assert fx.locators == [None]


async def test_a_result_whose_pages_loop_is_not_collected(pool: Any, tmp_path: Path) -> None:
    fx = BulkQueryFixture(locator_loops=True)
    described = bulk_query(paged=True, counts=False)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=described
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        assert "pages loop" in (await r.escalation(op_id))["reason"]
        assert fx.locators == [None, BULK_LOCATOR]  # page 2 named itself: not fetched again


FC_ENV = {"FC_TOKEN": "fc-test"}


async def _stored(pool: Any, result_id: Any) -> bytes:
    ref = await pool.fetchval("SELECT storage_ref FROM results WHERE result_id = $1", result_id)
    return Path(ref.removeprefix("file:")).read_bytes()


async def test_a_crawl_paged_by_absolute_next_urls_is_collected_whole(
    pool: Any, tmp_path: Path
) -> None:
    """Firecrawl's crawl status names its next page's absolute URL in `next`
    (`.../v1/crawl/{id}?skip=10`): `next_page_url` fetches it as given, three pages,
    each a recorded call carrying our token. Before, only a token could be followed,
    and `next_page_token = "/next"` sent `?skip=http%3A...`: no crawl over one page
    could be collected."""
    fx = CrawlFixture()
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        stored = await _stored(pool, op.result_id)
    rid = op.remote_job_id
    assert [c["url"] for c in calls] == [
        f"{r.url}/v1/crawl/{rid}",
        f"{r.url}/v1/crawl/{rid}?skip=10",
        f"{r.url}/v1/crawl/{rid}?skip=20",
    ]
    assert fx.skips[-3:] == [None, "10", "20"] and all(fx.tokens)
    assert (op.result_summary["items_total"], op.result_summary["items_succeeded"]) == (25, 25)
    pages = json.loads(stored)
    assert [doc for page in pages for doc in page["data"]] == CRAWL_DOCUMENTS


async def test_a_crawl_page_refused_for_its_rate_goes_on_from_that_page(
    pool: Any, tmp_path: Path
) -> None:
    """Firecrawl answers 429 past its rate limit: the attempt stops there and the
    next goes on from the page refused, by the URL the last page read named,
    rather than from the first page again (page 1 alone is fetched again, to
    find the result unchanged)."""
    fx = CrawlFixture(limited_pages=2)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        stored = await _stored(pool, op.result_id)
    base = f"{r.url}/v1/crawl/{op.remote_job_id}"
    assert [(c["url"], c["status_code"]) for c in calls] == [
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),
        (f"{base}?skip=10", 200),
        (f"{base}?skip=20", 200),
    ]
    pages = json.loads(stored)
    assert [doc for page in pages for doc in page["data"]] == CRAWL_DOCUMENTS


async def test_a_page_that_fails_again_where_it_was_resumed_is_read_from_page_1_next(
    pool: Any, tmp_path: Path
) -> None:
    """A resumed page that keeps failing (a stale token answered 429 or 5xx, which
    page 1 would mend) is resumed three times, then the next attempt reads from
    page 1 (throttles come in bursts: one or two failures are no sign of it)."""
    fx = CrawlFixture(limited_pages=4)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
    base = f"{r.url}/v1/crawl/{op.remote_job_id}"
    assert [(c["url"], c["status_code"]) for c in calls] == [
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),  # page 1 the same: went on from page 2
        (f"{base}?skip=10", 429),  # resumed three times, no page read: forgotten
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),
        (f"{base}?skip=10", 200),
        (f"{base}?skip=20", 200),
    ]


async def test_an_unchanged_result_goes_on_from_the_page_refused_reading_page_1_alone_again(
    pool: Any, tmp_path: Path
) -> None:
    """Page 3 answers 429: the next attempt fetches page 1 again, finds the same
    bytes, and goes on with page 3; page 2 is not fetched a second time."""
    fx = CrawlFixture(limited_pages=1, limited_from=20)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        stored = await _stored(pool, op.result_id)
    base = f"{r.url}/v1/crawl/{op.remote_job_id}"
    assert [(c["url"], c["status_code"]) for c in calls] == [
        (base, 200),
        (f"{base}?skip=10", 200),
        (f"{base}?skip=20", 429),
        (base, 200),
        (f"{base}?skip=20", 200),
    ]
    assert [doc for page in json.loads(stored) for doc in page["data"]] == CRAWL_DOCUMENTS


async def test_a_result_rewritten_between_a_throttled_page_and_the_resume_is_read_whole_anew(
    pool: Any, tmp_path: Path
) -> None:
    """The crawl is run again between page 2's 429 and the next attempt (same
    count, new documents): page 1 fetched again differs, so the pages kept are
    dropped and the result is read from the new page 1. Before, the next attempt
    went on from page 2 and stored the old page 1 joined to the new pages 2 and 3,
    a success (the count, 25, matched)."""
    fx = CrawlFixture(limited_pages=1, rewrites=1)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        stored = await _stored(pool, op.result_id)
    # one version whole, the new one: never the old page 1 joined to new pages
    assert [doc for page in json.loads(stored) for doc in page["data"]] == crawl_documents(1)
    base = f"{r.url}/v1/crawl/{op.remote_job_id}"
    assert [(c["url"], c["status_code"]) for c in calls] == [
        (base, 200),
        (f"{base}?skip=10", 429),
        (base, 200),  # the new version's: read on from it
        (f"{base}?skip=10", 200),
        (f"{base}?skip=20", 200),
    ]


async def test_a_result_rewritten_at_every_resume_ends_unavailable_saying_it_kept_changing(
    pool: Any, tmp_path: Path
) -> None:
    """Each attempt meets a 429 on page 2 and the crawl is run again before the
    next: every resume finds page 1 changed and begins again, never one version
    whole. The collection's attempts bound it (MAX_RESULT_ATTEMPTS), and the
    reason says the result kept changing; nothing is stored."""
    fx = CrawlFixture(limited_pages=1000, rewrites=1000)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=firecrawl_crawl()
    ) as r:
        op_id = await r.submit({"url": "https://docs.example", "limit": 25})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        reason = (await r.escalation(op_id))["reason"]
    assert op.result_id is None
    assert "result fetch kept failing after 6 attempts" in reason, reason
    assert "the result kept changing: 5 attempt(s)" in reason, reason
    assert len(calls) == 2 * MAX_RESULT_ATTEMPTS  # page 1 and page 2's 429, each attempt


class _CrawlMirror:
    """Another origin serving the rest of a crawl: what it was asked, with which token."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/crawl/{cid}", self.page)])

    async def page(self, request: Request) -> Response:
        self.seen.append((str(request.url.query), request.headers.get("authorization")))
        body = {"status": "completed", "total": 25, "data": CRAWL_DOCUMENTS[10:]}
        return Response(json.dumps(body), media_type="application/json")


@pytest.mark.parametrize("allowed", ["", "bare", "port"], ids=["other_origin", "bare", "port"])
async def test_a_next_page_off_the_providers_origin_is_not_fetched(
    pool: Any, tmp_path: Path, allowed: str
) -> None:
    """Page 1's `next` names another origin (127.0.0.1 or localhost on another port):
    not fetched, the collection is result_unavailable saying where it pointed. A
    host named bare in result.allowed_hosts is that host on the default port, so
    another port of it is another origin, refused as another host is (before: fetched,
    a host being all that was compared); named with the mirror's port
    (`localhost:PORT`) it is fetched, without our token (not the base_url's origin)."""
    mirror = _CrawlMirror()
    async with serve_app(mirror.app()) as mirror_url:
        port = mirror_url.rpartition(":")[2]
        host = "localhost" if allowed else "127.0.0.1"
        fx = CrawlFixture(foreign_next=f"http://{host}:{port}/v1/crawl/x?skip=10")
        described = firecrawl_crawl()
        if allowed:
            entry = "localhost" if allowed == "bare" else f"localhost:{port}"
            described["result"]["allowed_hosts"] = [entry]
        async with preset_rig(
            pool, tmp_path, fx.app(), preset=None, name="fc", env=FC_ENV, overrides=described
        ) as r:
            op_id = await r.submit({"url": "https://docs.example"})
            end = await r.settle(op_id, ENDS)
            calls = await r.calls(op_id, "result")
            escalation = await r.escalation(op_id)
            op = await r.op(op_id)
    if allowed == "port":
        assert end is S.SUCCEEDED
        assert mirror.seen == [("skip=10", None)]
        assert op.result_summary["items_total"] == 25
        return
    assert end is S.RESULT_UNAVAILABLE
    assert mirror.seen == []
    assert len(calls) == 1  # page 1 only: the refused page never left
    reason = escalation["reason"]
    assert (
        f"cannot request page 2 of the result: the next page's URL is on http://{host}:{port},"
        f" not the provider's origin ({r.url})" in reason
    ), reason
    assert "name the host in result.allowed_hosts" in reason


async def test_a_dataset_paged_by_offset_ends_on_its_short_page(pool: Any, tmp_path: Path) -> None:
    """Apify's dataset items, `?offset=&limit=10`, 25 items: pages at 0, 10 and 20,
    the third holding 5 (`last_page = "short"`), joined into one list of the items."""
    fx = DatasetFixture()
    described = apify_dataset(last_page="short")
    async with shaped(pool, tmp_path, fx.app(), "apify", described) as r:
        op_id = await r.submit({"startUrls": [{"url": "https://shop.example"}]})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        calls = await r.calls(op_id, "result")
        stored = await _stored(pool, op.result_id)
    assert fx.pages == [(0, 10), (10, 10), (20, 10)]
    assert len(calls) == 3
    assert calls[0]["url"].endswith("/dataset/items?format=json&clean=true&offset=0&limit=10")
    assert op.result_summary["items_total"] == 25
    assert json.loads(stored) == DATASET_ITEMS


@pytest.mark.parametrize(
    ("pages", "fetched"),
    [
        ({"total": "header:X-Apify-Pagination-Total"}, [(0, 10), (10, 10)]),
        ({}, [(0, 10), (10, 10), (20, 10)]),  # last_page = "empty", the default
    ],
    ids=["total", "empty"],
)
async def test_a_dataset_paged_by_offset_ends_at_its_total_or_an_empty_page(
    pool: Any, tmp_path: Path, pages: dict[str, Any], fetched: list[tuple[int, int]]
) -> None:
    """20 items, 10 a page: the total in `X-Apify-Pagination-Total` ends the paging
    after page 2 (no page past the end is asked for); without it, the empty page 3."""
    fx = DatasetFixture(items=20)
    async with shaped(pool, tmp_path, fx.app(), "apify", apify_dataset(**pages)) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
    assert fx.pages == fetched
    assert op.result_summary["items_total"] == 20


async def test_a_final_read_naming_an_unmapped_state_goes_to_a_human_naming_it(
    pool: Any, tmp_path: Path
) -> None:
    """Only an answer naming no state is read again: a state the description does
    not map (a new one at the provider) is a human's, and the cause names it."""
    fx = BulkQueryFixture(page_size=10, busy_results=1, odd_state_after_done="Archived")
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "collecting a result, but the provider now reports 'Archived'" in reason


async def test_a_result_whose_rows_match_the_status_counts_still_succeeds(
    pool: Any, tmp_path: Path
) -> None:
    fx = BulkQueryFixture(page_size=10)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id, Name FROM Account"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (6, 6)


async def test_a_cancel_sends_the_body_its_description_gives(pool: Any, tmp_path: Path) -> None:
    fx = BulkQueryFixture(reads_to_finish=10_000)
    overrides = bulk_query(cancel_body={"state": "Aborted", "note": "job {job_id}"})
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=overrides
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
    (job,) = fx.registry.jobs.values()
    assert fx.cancel_bodies == [{"state": "Aborted", "note": f"job {job.job_id}"}]


async def test_a_refused_cancel_of_a_running_job_escalates_with_the_providers_answer(
    pool: Any, tmp_path: Path
) -> None:
    """PATCH without its body: 400 INVALIDJOB, the job runs on. The operation sat in
    cancel_requested, the 400 nowhere in its history, until the job ended."""
    fx = BulkQueryFixture(reads_to_finish=10_000)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        state = await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED, S.CANCELLED, *ENDS})
        assert state is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert fx.cancel_bodies == [None]  # sent once, and not again
        escalation = await r.escalation(op_id)
        reason = escalation["reason"]
        assert (
            "refused the cancel request: HTTP 400 (INVALIDJOB: Invalid job state: null)" in reason
        )
        assert "still shows 'InProgress'" in reason
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = $2",
            op_id,
            "cancellation_unconfirmed",
        )
        assert "HTTP 400" in cause


async def test_a_refusal_is_judged_on_a_read_after_it_never_an_older_one(
    pool: Any, tmp_path: Path
) -> None:
    """The reads after the refusal fail (503): the "running" on record predates the
    cancel and proves nothing, so no escalation yet (a reviewer's second read);
    the first read that answers after it decides."""
    fx = BulkQueryFixture(reads_to_finish=10_000, unreadable_after_cancel=3)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=bulk_query()
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        while not fx.unreadable_served.is_set():  # the daemon's sweeps, until the reads failed
            assert await r.state(op_id) is S.CANCEL_REQUESTED, await r.history(op_id)
            await r.reconciler.run_once()
        assert await r.state(op_id) is S.CANCEL_REQUESTED, await r.history(op_id)
        state = await r.settle(op_id, {S.CANCELLATION_UNCONFIRMED, S.CANCELLED, *ENDS})
        assert state is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)


async def test_a_cancel_refused_because_the_job_already_ended_is_no_escalation(
    pool: Any, tmp_path: Path
) -> None:
    """The common refusal ("already complete"): the read after it settles the operation."""
    fx = BulkQueryFixture(reads_to_finish=10_000, page_size=10, done_at_cancel=True)
    overrides = bulk_query(cancel_body={"state": "Aborted"})
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="sfbulk", env={}, overrides=overrides
    ) as r:
        op_id = await r.submit({"query": "SELECT Id FROM Account"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.SUCCEEDED, await r.history(op_id)
        assert "cancellation_unconfirmed" not in await r.history(op_id)


TASK = {"promptImage": "https://example.test/cat.png", "model": "gen4_turbo"}


async def _cause(pool: Any, op_id: str, state: str) -> str:
    cause = await pool.fetchval(
        "SELECT cause FROM history WHERE operation_id = $1 AND to_state = $2", op_id, state
    )
    return str(cause)


@contextlib.asynccontextmanager
async def observing_task(
    pool: Any, tmp_path: Path, fx: TasksFixture, **cancel: bool
) -> AsyncIterator[tuple[PresetRig, str]]:
    """A Runway-like task submitted through the real reconciler, observed running."""
    overrides = runway_tasks(**cancel)
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="runway", env={}, overrides=overrides
    ) as r:
        op_id = await r.submit(TASK)
        await r.settle(op_id, {S.OBSERVING})
        yield r, op_id


async def test_a_cancel_that_deletes_the_job_reads_first_unless_told_not_to(
    pool: Any, tmp_path: Path
) -> None:
    """`cancel.deletes_job` without `read_first` (Luma's DELETE, described as the
    README did): the generation had finished, its callback on record, and our
    DELETE destroyed the video while the agent was told "confirmed stopped". A
    cancel that deletes the job reads first unless `read_first = false` says so."""
    fx = TasksFixture()
    described = runway_tasks(read_first=False)
    described["cancel"]["deletes_job"] = True
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="luma", env={}, overrides=described
    ) as r:
        assert r.desc.cancel.read_first
        op_id = await r.submit(TASK)
        await r.settle(op_id, {S.OBSERVING})
        fx.finish()
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.SUCCEEDED, await r.history(op_id)
        assert fx.deleted == [] and await r.calls(op_id, "cancel") == []
    described["cancel"]["read_first"] = False
    assert load("luma", None, "http://x.test", {}, described)["luma"].cancel.read_first is False


async def test_a_destructive_cancel_is_not_sent_to_a_task_that_already_succeeded(
    pool: Any, tmp_path: Path
) -> None:
    """cancel.read_first: the read before the DELETE shows SUCCEEDED, so no DELETE
    goes, the output is collected, and the operation says what happened."""
    fx = TasksFixture()
    async with observing_task(pool, tmp_path, fx, read_first=True) as (r, op_id):
        fx.finish()
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.SUCCEEDED, await r.history(op_id)
        assert [m for m, _ in fx.requests].count("DELETE") == 0
        assert fx.deleted == []
        assert await r.calls(op_id, "cancel") == []
        history = await r.history(op_id)
        assert history[-3:] == ["cancel_requested", "result_collecting", "succeeded"]
        cause = await _cause(pool, op_id, "result_collecting")
        assert "remote SUCCEEDED" in cause and "no cancel request was sent" in cause
        result = await pool.fetchval(
            "SELECT r.inline FROM results r JOIN operations o ON o.result_id = r.result_id"
            " WHERE o.operation_id = $1",
            op_id,
        )
        assert TASK_OUTPUT[0] in str(result)


class _UnreadableOnce(TasksFixture):
    """A task server whose next status read fails with `code` (a body nobody can read)."""

    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code
        self.failing = 0

    async def status(self, request: Request) -> Response:
        if self.failing:
            self.failing -= 1
            return Response(status_code=self.code, content=b"upstream error")
        return await super().status(request)


@pytest.mark.parametrize("code", [500, 429, 200])
async def test_a_read_first_cancel_waits_for_a_read_that_shows_the_job_running(
    pool: Any, tmp_path: Path, code: int
) -> None:
    """A read that shows no state (an error, back-pressure, a body without one)
    proves nothing: the DELETE waits for the next read (a second reader found it
    sent after such a read, to a task that had succeeded)."""
    fx = _UnreadableOnce(code)
    async with observing_task(pool, tmp_path, fx, read_first=True) as (r, op_id):
        fx.finish()
        fx.failing = 1
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.SUCCEEDED, await r.history(op_id)
        assert fx.failing == 0 and fx.deleted == []
        assert await r.calls(op_id, "cancel") == []


async def test_a_destructive_cancel_of_a_running_task_is_read_first_then_sent(
    pool: Any, tmp_path: Path
) -> None:
    """Still running: the read, then the DELETE under the same lease; confirmed as before."""
    fx = TasksFixture()
    async with observing_task(pool, tmp_path, fx, read_first=True) as (r, op_id):
        seen = len(fx.requests)
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
        assert fx.requests[seen : seen + 3] == [
            ("GET", "RUNNING"),
            ("DELETE", "RUNNING"),
            ("GET", "CANCELLED"),
        ]
        assert fx.deleted == []
        (cancel,) = await r.calls(op_id, "cancel")
        before = [c for c in await r.calls(op_id, "status") if c["call_id"] < cancel["call_id"]]
        assert before[-1]["fence"] == cancel["fence"]  # the same lease
        assert before[-1]["status_code"] == 200
        observed = await pool.fetchval(
            "SELECT remote_state_raw FROM observations WHERE call_id = $1", before[-1]["call_id"]
        )
        assert observed == "RUNNING"  # the read before the cancel is evidence like any other
        assert await r.history(op_id) == [
            "create_pending",
            "accepted",
            "observing",
            "cancel_requested",
            "cancelling",
            "cancelled",
        ]


async def test_a_destructive_cancel_resent_after_an_uncertain_answer_is_read_first_again(
    pool: Any, tmp_path: Path
) -> None:
    """idempotent = true with read_first: a resend is a cancel too, so it waits for a
    fresh read showing the task still running."""
    fx = TasksFixture(busy_deletes=1)
    async with observing_task(pool, tmp_path, fx, read_first=True, idempotent=True) as (r, op_id):
        seen = len(fx.requests)
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
        assert fx.requests[seen : seen + 4] == [
            ("GET", "RUNNING"),
            ("DELETE", "RUNNING"),  # 503: outcome unknown
            ("GET", "RUNNING"),
            ("DELETE", "RUNNING"),
        ]
        assert len(await r.calls(op_id, "cancel")) == 2


@pytest.mark.parametrize("deleted_reads_as", ["404", "CANCELLED"])
async def test_a_task_that_ends_between_the_read_and_the_delete_is_reported_honestly(
    pool: Any, tmp_path: Path, deleted_reads_as: Literal["404", "CANCELLED"]
) -> None:
    """The window read_first narrows but cannot close: the task succeeds right after the
    read that let the DELETE go. The end said names our cancel as the possible cause."""
    fx = TasksFixture(deleted_reads_as=deleted_reads_as)
    async with observing_task(pool, tmp_path, fx, read_first=True) as (r, op_id):
        fx.end_after_next_read = True
        await r.cancel(op_id)
        state = await r.settle(op_id, {S.CANCELLED, *ENDS})
        (job,) = fx.registry.jobs.values()
        assert fx.deleted == [job.job_id]
        if deleted_reads_as == "404":
            assert state is S.NEEDS_ATTENTION, await r.history(op_id)
            cause = await _cause(pool, op_id, "needs_attention")
            assert f"job {job.job_id} does not exist" in cause
            assert "after our cancel request (DELETE /v1/tasks/{job_id}) was sent" in cause
        else:
            assert state is S.CANCELLED, await r.history(op_id)
            cause = await _cause(pool, op_id, "cancelled")
            assert "also deletes a job that had finished" in cause


async def test_without_read_first_the_cancel_goes_unread_and_a_miss_names_it(
    pool: Any, tmp_path: Path
) -> None:
    """The key is opt-in: without it the DELETE is sent at once, as before, and deletes
    the finished task; the human the 404s stop at is told our cancel was sent."""
    fx = TasksFixture()
    async with observing_task(pool, tmp_path, fx, read_first=False) as (r, op_id):
        seen = len(fx.requests)
        fx.finish()
        await r.cancel(op_id)
        state = await r.settle(op_id, {S.CANCELLED, *ENDS})
        assert state is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.requests[seen] == ("DELETE", "SUCCEEDED")  # no read before it
        (job,) = fx.registry.jobs.values()
        assert fx.deleted == [job.job_id]
        cause = await _cause(pool, op_id, "needs_attention")
        assert "after our cancel request (DELETE /v1/tasks/{job_id}) was sent" in cause


async def test_a_result_behind_redirects_is_followed_without_our_token_off_origin(
    pool: Any, tmp_path: Path
) -> None:
    """logs -> 302 logs/archive (same origin, token kept) -> 302 signed blob elsewhere
    (token dropped); every hop is a recorded call, the signed link redacted in the log."""
    blobs = BlobStore()
    async with serve_app(blobs.app()) as blob_url:
        fx = RunLogsFixture(blob_url)
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="ghruns",
            env=GH_ENV,
            overrides=run_logs(follow_redirects=True),
        ) as r:
            op_id = await r.submit({"ref": "main"})
            assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
            op = await r.op(op_id)
            calls = await r.calls(op_id, "result")
    rid = op.remote_job_id
    assert fx.seen == [
        (f"/runs/{rid}/logs", "Bearer ghp_test"),
        (f"/runs/{rid}/logs/archive", "Bearer ghp_test"),
    ]
    assert blobs.seen == [(f"/blob/{rid}.zip", None)]
    assert [c["status_code"] for c in calls] == [302, 302, 200]
    final_url = calls[-1]["url"]
    assert final_url.startswith(f"{blob_url}/blob/{rid}.zip?")
    assert BLOB_SIGNATURE not in final_url
    assert op.result_summary["size_bytes"] == len(LOGS_ZIP)


async def test_a_redirect_not_followed_is_said_so_not_called_unavailable(
    pool: Any, tmp_path: Path
) -> None:
    fx = RunLogsFixture("http://127.0.0.1:9")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="ghruns",
        env=GH_ENV,
        overrides=run_logs(follow_redirects=False),
    ) as r:
        op_id = await r.submit({"ref": "main"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert reason == (
            "result fetch answered HTTP 302: redirect not followed (set result.follow_redirects)"
        )
        assert len(fx.seen) == 1


async def test_a_redirect_loop_or_a_non_http_target_is_not_followed(
    pool: Any, tmp_path: Path
) -> None:
    for redirect, why, hops in (
        ("loop", "more than 5 redirects", 6),
        ("ftp", "not an http(s) URL (ftp scheme)", 1),
    ):
        fx = RunLogsFixture("http://127.0.0.1:9", redirect=redirect)  # type: ignore[arg-type]
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            # one provider each: both fixtures number their runs from 0001
            name=f"ghruns_{redirect}",
            env=GH_ENV,
            overrides=run_logs(follow_redirects=True),
        ) as r:
            op_id = await r.submit({"ref": "main"})
            assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
            assert why in (await r.escalation(op_id))["reason"]
            assert len(fx.seen) == hops


def shaped(
    pool: Any, tmp_path: Path, app: Any, name: str, described: dict[str, Any], **kwargs: Any
) -> Any:
    """`preset_rig` for a provider described in full by the test (no preset, no secret)."""
    return preset_rig(
        pool, tmp_path, app, preset=None, name=name, env={}, overrides=described, **kwargs
    )


FAL_FAILED = {
    "statuses": [422, 500],
    "error_code": "header:X-Fal-Error-Type",
    "error_message": "/detail",
}


@pytest.mark.parametrize(
    ("outcome", "code", "message"),
    [
        ("422", "failed", '{"detail":[{"loc":["body","prompt"],"msg":"field required"'),
        ("500", "runner_server_error", "CUDA out of memory"),
    ],
)
async def test_a_failure_told_only_by_the_result_answer_is_failed_with_its_error(
    pool: Any, tmp_path: Path, outcome: str, code: str | None, message: str
) -> None:
    """fal.ai's queue reads COMPLETED of a failed job too; its response URL answers
    the runner's 422 or 500. With `[result.failed]` that answer is the verdict: the
    operation is failed, its error shown to the agent, at the first fetch (a 500
    listed is not retried). Before, a 422 was result_unavailable at once and a 500
    was retried six times into result_unavailable, both for a human, without the
    error."""
    fx = QueueFixture()
    async with shaped(pool, tmp_path, fx.app(), "fal", fal_queue(failed=FAL_FAILED)) as r:
        op_id = await r.submit({"prompt": "a cat", "outcome": outcome})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert fx.responses == 1
        (fetch,) = await r.calls(op_id, "result")
        assert fetch["status_code"] == int(outcome)
        moved = await pool.fetchrow(
            "SELECT h.from_state, h.evidence_kind, o.source, o.call_id, o.remote_state"
            " FROM history h JOIN observations o ON o.observation_id = h.evidence_id"
            " WHERE h.operation_id = $1 AND h.to_state = 'failed'",
            op_id,
        )
        assert dict(moved) == {
            "from_state": "result_collecting",
            "evidence_kind": "observation",
            "source": "result",
            "call_id": fetch["call_id"],
            "remote_state": "failed",
        }
        seen = await pool.fetchrow(
            "SELECT state, outcome, error FROM agent_operations WHERE operation_id = $1", op_id
        )
        assert (seen["state"], seen["outcome"]) == ("failed", "failed")
        error = seen["error"]
        assert error["code"] == code
        assert error["message"].startswith(message), error
        assert (
            await pool.fetchval("SELECT count(*) FROM escalations WHERE operation_id = $1", op_id)
            == 0
        )
        # the new kind of observation is evidence like any other: logged, and verified
        async with pool.acquire() as conn:
            await log.sequence_all(conn)
            assert await audit.verify(conn, op_id) == (1, [])
            report = await log_audit.verify_log(conn, None, settle_seconds=0)
        assert report.problems == [] and report.pending == 0
        assert report.rows_checked["observation"] >= 2


@pytest.mark.parametrize(
    ("failed", "outcome", "end", "fetches"),
    [
        (None, "422", S.RESULT_UNAVAILABLE, 1),
        (None, "500", S.RESULT_UNAVAILABLE, 6),
        (FAL_FAILED, "ok", S.SUCCEEDED, 1),
        ({"statuses": [422]}, "500", S.RESULT_UNAVAILABLE, 6),
    ],
    ids=["422_not_listed", "500_not_listed", "success", "500_retried"],
)
async def test_a_result_answer_not_listed_in_result_failed_is_judged_as_before(
    pool: Any,
    tmp_path: Path,
    failed: dict[str, Any] | None,
    outcome: str,
    end: LocalState,
    fetches: int,
) -> None:
    """Only the answers `[result.failed]` lists are a verdict: without the table a
    failed job's 4xx is "result unavailable" (a human decides), an unlisted 5xx is
    retried to its limit, and a success is collected whatever the table says."""
    fx = QueueFixture()
    async with shaped(pool, tmp_path, fx.app(), "fal", fal_queue(failed=failed)) as r:
        op_id = await r.submit({"prompt": "a cat", "outcome": outcome})
        assert await r.settle(op_id, ENDS) is end, await r.history(op_id)
        assert "failed" not in await r.history(op_id)
        assert fx.responses == fetches


@pytest.mark.parametrize(
    ("matches", "empty_without_url", "end"),
    [(0, True, S.SUCCEEDED), (2, True, S.SUCCEEDED), (0, False, S.RESULT_UNAVAILABLE)],
    ids=["empty", "two_lines", "empty_not_described"],
)
async def test_an_export_that_found_nothing_is_an_empty_result_not_an_unavailable_one(
    pool: Any, tmp_path: Path, matches: int, empty_without_url: bool, end: LocalState
) -> None:
    """Shopify's bulk operation that matched nothing ends COMPLETED with `url: null`
    and `objectCount: "0"`: with `result.empty_without_url` that is an empty result,
    stored and verified (sha256 of no bytes), fetched from nowhere; it went to
    result_unavailable ("the final status gave no result URL") for a human."""
    fx = BulkExportFixture()
    async with shaped(
        pool, tmp_path, fx.app(), "shopify", bulk_export(empty_without_url=empty_without_url)
    ) as r:
        op_id = await r.submit(
            {"query": "{ products { edges { node { id } } } }", "matches": matches}
        )
        assert await r.settle(op_id, ENDS) is end, await r.history(op_id)
        assert fx.files == (1 if matches else 0)
        if end is not S.SUCCEEDED:
            return
        op = await r.op(op_id)
        assert op.result_summary["items_total"] == matches
        assert op.result_summary["items_succeeded"] == matches
        stored = await pool.fetchrow(
            "SELECT sha256, size_bytes, call_id, valid FROM results WHERE result_id = $1",
            op.result_id,
        )
        if matches == 0:
            assert dict(stored) == {
                "sha256": hashlib.sha256(b"").hexdigest(),
                "size_bytes": 0,
                "call_id": None,
                "valid": True,
            }


async def _collect_through_an_outage(
    r: PresetRig, fx: QueueFixture, clock: TestClock, op_id: str, fetches: int
) -> None:
    """Drive the collection until the response URL has answered 503 `fetches` times,
    the test's clock moved past each retry's backoff."""
    fx.busy = True
    for _ in range(50 * fetches):
        if fx.responses >= fetches:
            return
        await r.reconciler.run_once()
        await clock.advance(1.0)  # past the rig's capped backoff
    raise AssertionError(f"{fx.responses} fetches, wanted {fetches}: {await r.history(op_id)}")


async def test_a_result_store_outage_longer_than_six_tries_is_ridden_out(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The response URL answers 503 for nine fetches, then the result: collected.
    The six tries, about a minute with the default backoff, once sent such an outage
    to a human (result_unavailable); the hour of `limits.result_retry_seconds` has not
    passed, so the fetches go on."""
    fx = QueueFixture()
    described = {**fal_queue(), "limits": {"result_retry_seconds": 3600}}
    async with shaped(pool, tmp_path, fx.app(), "fal", described, clock=clock) as r:
        op_id = await r.submit({"prompt": "a cat"})
        await _collect_through_an_outage(r, fx, clock, op_id, fetches=9)
        assert await r.state(op_id) is S.RESULT_COLLECTING
        fx.busy = False
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "result_unavailable" not in await r.history(op_id)


async def test_a_result_store_down_past_result_retry_seconds_is_result_unavailable(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """Still 503 once `limits.result_retry_seconds` has passed since the collection
    began: the next failure gives up, result_unavailable, for a human."""
    fx = QueueFixture()
    described = {**fal_queue(), "limits": {"result_retry_seconds": 3600}}
    async with shaped(pool, tmp_path, fx.app(), "fal", described, clock=clock) as r:
        op_id = await r.submit({"prompt": "a cat"})
        await _collect_through_an_outage(r, fx, clock, op_id, fetches=7)
        assert await r.state(op_id) is S.RESULT_COLLECTING
        await clock.advance(3600.0)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        escalation = await r.escalation(op_id)
        assert "result fetch kept failing after" in escalation["reason"], escalation["reason"]


@pytest.mark.parametrize("chunk_delay", [0.0, 0.1], ids=["fast", "slower_than_a_call"])
async def test_a_status_url_that_answers_with_a_large_result_is_read_whole(
    pool: Any, tmp_path: Path, chunk_delay: float
) -> None:
    """Stability's result URL is also its status URL: 202 while running, then 200 with
    the video. A 9 MiB video made every read of the finished job fail as `protocol`
    (past the 8 MiB any answer is read up to), and the job was read as running until
    its deadline, `result_timed_out`. A status read at the result's URL is now read up
    to the result's max_bytes, bounded by its pace as a download is (streamed over
    longer than the rig's request_timeout, 0.5 s, it timed out): the job succeeds,
    its video stored byte for byte."""
    fx = ResultsFixture(chunk_delay=chunk_delay)
    async with shaped(pool, tmp_path, fx.app(), "stability", stability_results()) as r:
        op_id = await r.submit({"image": "https://example.com/cat.png"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        statuses = await r.calls(op_id, "status")
        assert [c["status_code"] for c in statuses] == [202, 200, 200]
        assert all(c["error_category"] is None for c in statuses)
        op = await r.op(op_id)
        stored = Path(op.result_ref.removeprefix("file:")).read_bytes()
        assert stored == VIDEO
        # the collection's final read is the result (same URL, same headers): the
        # video is not downloaded a third time by a fetch of its own
        assert await r.calls(op_id, "result") == []
        assert fx.reads == 3
        final_read = statuses[-1]
        assert final_read["response_sha256"] == hashlib.sha256(VIDEO).hexdigest()


async def test_a_create_sent_as_multipart_carries_the_agents_image_as_a_file(
    pool: Any, tmp_path: Path
) -> None:
    """Stability's generations take multipart/form-data (an `image` file beside its
    options) and refuse JSON: described before with a plugin only (a known gap).
    `create.encoding = "multipart"`: the agent's body names the file in base64,
    the provider receives its bytes, and a retried create would send the same."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    fx = ResultsFixture(multipart=True)
    described = stability_results()
    described["create"]["encoding"] = "multipart"
    described["create"]["set_body"] = {"/client_ref": "{client_reference}"}
    async with shaped(pool, tmp_path, fx.app(), "stability", described) as r:
        image = {
            "content_base64": base64.b64encode(png).decode(),
            "filename": "cat.png",
            "content_type": "image/png",
        }
        op_id = await r.submit({"image": image, "seed": 7, "cfg_scale": 1.8})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        [create] = await r.calls(op_id, "create")
        recorded = create["request_headers"]
    assert fx.images == [("cat.png", "image/png", png)]
    assert fx.registry.only().request == {"seed": "7", "cfg_scale": "1.8", "client_ref": op_id}
    assert recorded["Content-Type"].startswith("multipart/form-data; boundary=jobwarden-")


async def test_an_expired_result_link_is_fetched_again_from_a_fresh_status_read(
    pool: Any, tmp_path: Path
) -> None:
    """HeyGen's video_url is pre-signed and expires. The collection's final read (read
    3: the deciding read's link is stored redacted) names a link refused (403) when
    fetched. The status is read once more, its fresh link fetched: the video is
    collected. Before, the 403 was result_unavailable at once, for a human whose only
    fix was to ask for that read."""
    fx = VideosFixture(first_valid_read=4)
    async with shaped(pool, tmp_path, fx.app(), "heygen", heygen_videos()) as r:
        op_id = await r.submit({"video_inputs": []})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.fetches == [(3, 403), (4, 200)]
        op = await r.op(op_id)
        assert Path(op.result_ref.removeprefix("file:")).read_bytes() == HEYGEN_VIDEO


async def test_a_result_link_refused_again_after_a_fresh_read_is_result_unavailable(
    pool: Any, tmp_path: Path
) -> None:
    """Refused by a freshly minted link too: one retry only, then result_unavailable."""
    fx = VideosFixture(first_valid_read=100)
    async with shaped(pool, tmp_path, fx.app(), "heygen", heygen_videos()) as r:
        op_id = await r.submit({"video_inputs": []})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        assert fx.fetches == [(3, 403), (4, 403)]


async def test_a_delivery_before_the_job_is_found_is_read_at_once_after_the_lookup(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost; the pipeline's success webhook arrives and is matched
    by our operation id while no job id is known; the lookup then finds the pipeline.
    The delivery's wake-up was spent on the lookup, so the job was first read at the
    webhook backstop (300 s by default; 30 s here, past this test's wait). It is now
    read at once: a delivery already on record is news the acceptance must not sit on."""
    # ours unlisted until the delivery is in: a lookup finding the pipeline first
    # moved the operation on before the test saw create_unknown (under load)
    fx = PipelinesFixture(lose_first_create=True, unlisted=True)
    secret = "whsec_" + "cGlwZWxpbmUtaG9vay1zZWNyZXQ="
    described = {
        **PIPELINES,
        "webhooks": {
            "scheme": "standard_webhooks",
            "secrets_env": "GITLAB_HOOK_SECRET",
            "job_id": "/id",
            "state": "/status",
            "operation_id": "/name",
        },
    }
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="gitlab",
        env={"GITLAB_HOOK_SECRET": secret},
        overrides=described,
        with_receiver=True,
    ) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, {S.CREATE_UNKNOWN}) is S.CREATE_UNKNOWN
        (lost,) = [p for p in fx.pipelines.values() if p["name"] == op_id]
        body = json.dumps({"id": lost["id"], "name": op_id, "status": "success"}).encode()
        now = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": "msg_pipeline_1",
            "webhook-timestamp": str(now),
            "webhook-signature": sign_standard_webhooks(secret, "msg_pipeline_1", now, body),
        }
        async with httpx.AsyncClient() as client:
            answer = await client.post(r.hook_url, content=body, headers=headers)
        assert answer.json() == {"status": "stored", "matched": True}
        lost["status"] = "success"
        assert await r.state(op_id) is S.CREATE_UNKNOWN  # no job id known yet
        fx.list_ours()
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.registry.calls["create"] == 1


@pytest.mark.parametrize("looping", [False, True], ids=["two_pages", "pages_loop"])
async def test_a_cancelled_jobs_partial_output_is_kept_whole_or_not_at_all(
    pool: Any, tmp_path: Path, looping: bool
) -> None:
    """A cancelled job's output, paged (`[result.pages]`): every page is fetched and the
    output kept whole. Only page 1 was fetched, and 3 of the 6 rows were kept as the
    partial output an agent reads (an outside crash-point sweep). Pages that loop:
    nothing is kept, and the job still ends cancelled."""
    fx = CancelledOutputFixture(looping=looping)
    async with shaped(pool, tmp_path, fx.app(), "pager", cancelled_output()) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
        kept = await pool.fetchrow(
            "SELECT items_total, storage_ref FROM results WHERE operation_id = $1 AND valid",
            op_id,
        )
        if looping:
            assert kept is None
            assert fx.cursors[:2] == [None, "c1"]
            return
        assert fx.cursors == [None, "c1"]
        assert kept["items_total"] == 6
        stored = Path(kept["storage_ref"].removeprefix("file:")).read_text()
        assert stored == "Id,Name\n" + "".join(f"{row}\n" for row in OUTPUT_ROWS)
        # the agent is shown it, as partial (migration 036): it was told there was none
        seen = await pool.fetchrow(
            "SELECT result_ref, message FROM operations_overview WHERE operation_id = $1",
            op_id,
        )
        assert seen["result_ref"] == kept["storage_ref"]
        assert seen["message"].startswith(
            "Cancelled: the provider confirmed the job stopped. What it had produced was "
            "kept (6 items): result_ref and result hold that partial output"
        ), seen["message"]
        row = await pool.fetchrow(
            "SELECT * FROM operations_overview WHERE operation_id = $1", op_id
        )
        resource = operation_resource(row)  # what GET /v1/operations/{id} answers
        assert "response" not in resource and resource["error"] is not None
        assert resource["partial_output"]["result_ref"] == kept["storage_ref"]
        assert resource["partial_output"]["summary"]["total"] == 6


class PagingPluginOfOld(ProviderAdapter):
    """A plugin's paging hooks as written before next_page_url and offset paging,
    one argument fewer than today's."""

    def build_result_page(self, first: HttpRequest, page_token: str) -> HttpRequest:  # type: ignore[override]
        return super().build_result_page(first, page_token)

    def result_next_page(self, resp: HttpResponse) -> str | None:  # type: ignore[override]
        return super().result_next_page(resp)


async def test_a_plugins_paging_hooks_of_old_still_page(pool: Any, tmp_path: Path) -> None:
    """Pages read by a token go through a plugin's hooks with their old signatures."""
    fx = CancelledOutputFixture()
    described = {**cancelled_output(), "plugin": f"{__name__}:PagingPluginOfOld"}
    async with shaped(pool, tmp_path, fx.app(), "pager", described) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
    assert fx.cursors == [None, "c1"]


async def test_a_cancelled_jobs_output_at_its_result_path_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    """An Apify run aborted keeps the dataset items it wrote, read at the run's own
    result path (`result.source = "path"`), which no status names: it was never
    fetched, and the agent was told there is no result. Only where the description
    says so (`result.partial_on_cancel`): elsewhere a cancelled job's path holds
    nothing, or no output (the job resource itself), and is not read."""
    for kept_there in (True, False):
        fx = CancelledOutputFixture()
        described = cancelled_output(on_path=True)
        described["result"]["partial_on_cancel"] = kept_there
        # a provider each: both fixtures name their first job job-1
        name = "apify" if kept_there else "elsewhere"
        async with shaped(pool, tmp_path, fx.app(), name, described) as r:
            op_id = await r.submit({})
            assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
            await r.cancel(op_id)
            end = await r.settle(op_id, {S.CANCELLED, *ENDS})
            assert end is S.CANCELLED, await r.history(op_id)
            kept = await pool.fetchrow(
                "SELECT items_total FROM results WHERE operation_id = $1 AND valid", op_id
            )
        if kept_there:
            assert fx.cursors == [None, "c1"]
            assert kept is not None and kept["items_total"] == 6, kept
        else:
            assert fx.cursors == [] and kept is None


@pytest.mark.parametrize(
    ("paging", "asked"), [("url", [None, "1"]), ("offset", ["0", "3", "6"])], ids=["url", "offset"]
)
async def test_a_cancelled_jobs_partial_output_follows_next_urls_and_offsets(
    pool: Any, tmp_path: Path, paging: OutputPaging, asked: list[str | None]
) -> None:
    """The partial output of a cancelled job follows its pages as a result does: by
    the relative URL a page names (resolved against that page's URL), or by offset
    to the empty page; kept whole."""
    fx = CancelledOutputFixture(paging=paging)
    async with shaped(pool, tmp_path, fx.app(), "pager", cancelled_output(paging)) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
        kept = await pool.fetchrow(
            "SELECT items_total, storage_ref FROM results WHERE operation_id = $1 AND valid",
            op_id,
        )
    assert fx.cursors == asked
    assert kept["items_total"] == 6
    stored = Path(kept["storage_ref"].removeprefix("file:")).read_text()
    assert stored == "Id,Name\n" + "".join(f"{row}\n" for row in OUTPUT_ROWS)


async def test_a_deadline_met_by_a_failing_read_names_the_answer_not_just_no_state(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The result deadline passes while the task's reads answer 500: the escalation says
    "no state (HTTP 500)", where it said "still shows 'no state'" of an HTTP error."""
    fx = _UnreadableOnce(500)
    async with shaped(
        pool, tmp_path, fx.app(), "runway", runway_tasks(read_first=False), clock=clock
    ) as r:
        op_id = await r.submit({}, result_deadline_s=60)
        assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
        fx.failing = 1_000
        await clock.advance(61.0)
        assert await r.settle(op_id, {S.RESULT_TIMED_OUT}) is S.RESULT_TIMED_OUT
        reason = (await r.escalation(op_id))["reason"]
        assert "still shows no state (HTTP 500)" in reason, reason


async def test_status_answers_naming_no_state_ten_times_in_a_row_go_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """A description reading the state in the wrong place (`/state` where fal.ai says
    `/status`): every read is a 200 naming no state, and the agent was told "running"
    until the result deadline (a day by default). After ten in a row, a human is told
    what the answers lacked."""
    fx = QueueFixture()
    described = fal_queue()
    described["status"] = {**described["status"], "state": "/state"}
    async with shaped(pool, tmp_path, fx.app(), "fal", described) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert reason.startswith(
            "the last 10 status reads answered HTTP 200 with no state at /state"
        ), reason
        assert len(await r.calls(op_id, "status")) == 10


async def test_a_few_answers_naming_no_state_between_real_ones_are_read_past(
    pool: Any, tmp_path: Path
) -> None:
    """Nine throttles carried in a 200 body, then the job's state: nothing escalates."""
    fx = QueueFixture()
    fx.blank_reads = 9
    async with shaped(pool, tmp_path, fx.app(), "fal", fal_queue()) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.blank_reads == 0


@pytest.mark.parametrize("matches", [2, 0])
async def test_a_graphql_status_read_posts_its_query_with_the_job_in_its_variables(
    pool: Any, tmp_path: Path, matches: int
) -> None:
    """Shopify's bulk operations in TOML alone: `status.method = "POST"` with
    `status.body` (the node query, the job id in its variables). Without a status
    body only a plugin could read a GraphQL job. Two throttles carried in a 200
    (`errors` only) are read past; an export that found nothing is an empty result."""
    fx = GraphqlBulkFixture(throttled_reads=2)
    async with shaped(pool, tmp_path, fx.app(), "shopify", shopify_bulk()) as r:
        mutation = f'mutation {{ bulkOperationRunQuery(query: "matches:{matches} ") {{ }} }}'
        op_id = await r.submit({"query": mutation})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job_id = (await r.op(op_id)).remote_job_id
        assert job_id == "gid://shopify/BulkOperation/0001"
        assert set(fx.reads) == {job_id} and len(fx.reads) >= 4
        reads = await r.calls(op_id, "status")
        assert {c["method"] for c in reads} == {"POST"}
        assert (await r.op(op_id)).result_summary["items_total"] == matches


async def test_a_graphql_cancel_and_the_read_that_confirms_it(pool: Any, tmp_path: Path) -> None:
    """The cancel mutation, then node reads until CANCELED: cancelled, confirmed by a read."""
    fx = GraphqlBulkFixture()
    async with shaped(pool, tmp_path, fx.app(), "shopify", shopify_bulk()) as r:
        op_id = await r.submit({"query": "bulkOperationRunQuery matches:1 "})
        fx.registry.count("create")
        assert await r.settle(op_id, {S.OBSERVING, *ENDS}) is S.OBSERVING
        fx.registry.only().extra["status"] = "RUNNING"  # it does not finish on its own
        await r.cancel(op_id)
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is S.CANCELLED, await r.history(op_id)
        assert len(await r.calls(op_id, "cancel")) == 1


async def test_a_proxys_500_without_the_providers_error_is_no_verdict(
    pool: Any, tmp_path: Path
) -> None:
    """`[result.failed]` lists 500 with where fal's error is: an HTML 500 from a proxy
    on the way carries neither the header nor `/detail`, so it is retried like any
    5xx, and the next fetch collects the result. It failed the job for good."""
    fx = QueueFixture()
    fx.proxy_errors = 1
    async with shaped(pool, tmp_path, fx.app(), "fal", fal_queue(failed=FAL_FAILED)) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.responses == 2


async def test_an_expired_link_is_refreshed_before_a_listed_4xx_is_taken_as_a_failure(
    pool: Any, tmp_path: Path
) -> None:
    """HeyGen's expired link answers 403, which `[result.failed]` also lists: at the
    first fetch the link is refreshed by a fresh read first; the video is collected.
    The 403 failed the job at once."""
    fx = VideosFixture(first_valid_read=4)
    described = heygen_videos()
    described["result"] = {**described["result"], "failed": {"statuses": [403, 404]}}
    async with shaped(pool, tmp_path, fx.app(), "heygen", described) as r:
        op_id = await r.submit({"video_inputs": []})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.fetches == [(3, 403), (4, 200)]


async def test_a_result_store_down_past_the_result_deadline_stops_before_the_budget(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The agent's result deadline (2 minutes) comes before the hour of retries: the
    collection stops there, result_unavailable. It went on past the deadline."""
    fx = QueueFixture()
    described = {**fal_queue(), "limits": {"result_retry_seconds": 3600}}
    async with shaped(pool, tmp_path, fx.app(), "fal", described, clock=clock) as r:
        op_id = await r.submit({"prompt": "a cat"}, result_deadline_s=120)
        await _collect_through_an_outage(r, fx, clock, op_id, fetches=7)
        assert await r.state(op_id) is S.RESULT_COLLECTING
        await clock.advance(120.0)
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)


async def test_a_file_id_path_naming_a_list_fetches_each_file(pool: Any, tmp_path: Path) -> None:
    """ElevenLabs names a dub's languages as a list (`file_ids = "/target_languages"`):
    each names a file. The list was read as no id at all, and every dub ended
    result_unavailable, "the final status named no result files"."""
    fx = DubbingFixture()
    async with shaped(pool, tmp_path, fx.app(), "elevenlabs", elevenlabs_dubbing()) as r:
        op_id = await r.submit({"source_url": "https://example.com/a.mp4", "target_langs": ["es"]})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.audio_fetches == ["es"]
        op = await r.op(op_id)
        assert Path(op.result_ref.removeprefix("file:")).read_bytes() == dub_audio("es")


async def test_several_binary_files_are_not_stored_glued_into_one(
    pool: Any, tmp_path: Path
) -> None:
    """Two languages, two audio files, one binary result: laid end to end they were
    stored and reported a success no one could split again. Now the result is refused,
    saying why, and a human decides."""
    fx = DubbingFixture()
    async with shaped(pool, tmp_path, fx.app(), "elevenlabs", elevenlabs_dubbing()) as r:
        body = {"source_url": "https://example.com/a.mp4", "target_langs": ["es", "fr"]}
        op_id = await r.submit(body)
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "a binary result is one file, and the status named 2" in reason, reason
        assert (await r.op(op_id)).result_ref is None


async def test_an_uncertain_create_sent_to_a_human_says_what_the_create_got(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """fal.ai cannot deduplicate and offers no lookup; a 429 it does not document as
    creating nothing goes to a human. The reason said only "an uncertain create";
    it now says the create got HTTP 429 and until when it was asked to wait."""
    fx = QueueFixture()
    fx.throttled_submits = 1
    async with shaped(pool, tmp_path, fx.app(), "fal", fal_queue(), clock=clock) as r:
        op_id = await r.submit({"prompt": "a cat"}, create_deadline_s=300)
        assert await r.settle(op_id, {S.CREATE_UNKNOWN}) is S.CREATE_UNKNOWN
        await clock.advance(31.0)  # past the 429's Retry-After
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "; the last create got HTTP 429, asking to wait until 20" in reason, reason


@pytest.mark.parametrize("deletes_job", [True, False])
async def test_a_job_gone_after_our_accepted_deleting_cancel_is_cancelled(
    pool: Any, tmp_path: Path, deletes_job: bool
) -> None:
    """Luma's only cancel deletes the generation, running or not; the next read is a
    404. With `cancel.deletes_job` that is the job cancelled, by us: `cancelled`.
    Without it, a human is asked (a job gone, our cancel named as the likely cause)."""
    fx = TasksFixture()
    fx.deletes_running = True
    described = runway_tasks(read_first=True)
    described["cancel"] = {**described["cancel"], "deletes_job": deletes_job}
    async with shaped(pool, tmp_path, fx.app(), "luma", described) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, {S.OBSERVING}) is S.OBSERVING
        await r.cancel(op_id)
        end = S.CANCELLED if deletes_job else S.NEEDS_ATTENTION
        assert await r.settle(op_id, {S.CANCELLED, *ENDS}) is end, await r.history(op_id)
        assert [m for m, _ in fx.requests].count("DELETE") == 1
        if deletes_job:
            assert "cancellation_unconfirmed" not in await r.history(op_id)
            seen = await pool.fetchrow(
                "SELECT outcome, done FROM agent_operations WHERE operation_id = $1", op_id
            )
            assert (seen["outcome"], seen["done"]) == ("cancelled", True)


async def test_a_compressed_result_at_the_status_url_is_fetched_and_its_digest_checked(
    pool: Any, tmp_path: Path
) -> None:
    """The video sent gzipped, its Content-Digest over the bytes as sent: the final
    read keeps no digest of those bytes (a download does), so it is not reused as
    the result; the result is fetched and verified. Reused, it failed its digest."""
    fx = ResultsFixture(gzipped=True)
    described = stability_results()
    described["result"] = {
        **described["result"],
        "expect": {"content_types": ["video/mp4"], "checksum": "content-digest"},
    }
    async with shaped(pool, tmp_path, fx.app(), "stability", described) as r:
        op_id = await r.submit({"image": "https://example.com/cat.png"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert len(await r.calls(op_id, "result")) == 1
        op = await r.op(op_id)
        assert Path(op.result_ref.removeprefix("file:")).read_bytes() == VIDEO


@pytest.mark.parametrize(
    ("languages", "end", "said"),
    [
        ([f"l{n:03d}" for n in range(101)], S.RESULT_VALIDATION_FAILED, "names 101 result files"),
        (["es", {"code": "fr"}], S.RESULT_UNAVAILABLE, "named no result files"),
        (["es", None], S.RESULT_UNAVAILABLE, "named no result files"),
    ],
    ids=["too_many", "an_object", "a_null"],
)
async def test_a_list_of_file_ids_is_bounded_and_whole_or_names_nothing(
    pool: Any, tmp_path: Path, languages: list[Any], end: LocalState, said: str
) -> None:
    """A status listing 101 files is refused before any is fetched (the list was
    unbounded: every file fetched and held); a list with an item naming no id names
    none (the usable ones were fetched and stored as the whole result)."""
    fx = DubbingFixture()
    described = elevenlabs_dubbing()
    described["result"] = {**described["result"], "format": "jsonl"}
    async with shaped(pool, tmp_path, fx.app(), "elevenlabs", described) as r:
        op_id = await r.submit(
            {"source_url": "https://example.com/a.mp4", "target_langs": languages}
        )
        assert await r.settle(op_id, ENDS) is end, await r.history(op_id)
        assert said in (await r.escalation(op_id))["reason"]
        assert fx.audio_fetches == []


async def test_graphql_throttles_do_not_count_toward_answers_naming_no_state(
    pool: Any, tmp_path: Path
) -> None:
    """Nine THROTTLED reads, then one answer naming no state: one such answer, not
    ten. The count of answers naming no state counted the throttles before it
    (they are 200s without a state too) and sent the job to a human."""
    fx = GraphqlBulkFixture(throttled_reads=9, stateless_reads=1)
    async with shaped(pool, tmp_path, fx.app(), "shopify", shopify_bulk()) as r:
        op_id = await r.submit({"query": "bulkOperationRunQuery matches:2 "})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "needs_attention" not in await r.history(op_id)
        assert fx.stateless_reads == 0
        categories = [c["error_category"] for c in await r.calls(op_id, "status")]
        assert categories[:10] == ["request_failed"] * 9 + [None], categories


async def test_graphql_throttles_in_a_row_are_not_a_misdescribed_provider(
    pool: Any, tmp_path: Path
) -> None:
    """Ten THROTTLED answers (200, `errors` only) in a row: failed requests, not answers
    naming no state; the job is read on and collected, no human asked."""
    fx = GraphqlBulkFixture(throttled_reads=12)
    async with shaped(pool, tmp_path, fx.app(), "shopify", shopify_bulk()) as r:
        op_id = await r.submit({"query": "bulkOperationRunQuery matches:2 "})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "needs_attention" not in await r.history(op_id)
