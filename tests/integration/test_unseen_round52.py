"""Together AI's batches, Firecrawl's crawls and DeepL's document translation,
described in TOML as a new user would from README.md
(tests/fixtures_providers/unseen/together.toml, firecrawl.toml, deepl.toml) and
driven through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round52.py): a create, a lost create answer, a
running job, success with the result collected and validated, failure with its
reason, cancel, throttling (429 with Retry-After), and Firecrawl's signed
webhooks. DeepL's description cannot be written (its status and its one-shot
download need the upload's `document_key`, which nothing carries from the create
to a read) and is refused at load, naming the key and the placeholder.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from shared.ledger import audit
from shared.ledger.states import LocalState
from shared.providers.errors import ConfigError
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, load, preset_rig
from tests.fixtures_providers.unseen_round52 import (
    CRAWL_PAGES,
    FIRECRAWL_KEY,
    FIRECRAWL_SECRET,
    TOGETHER_ERRORS,
    TOGETHER_FAILURE,
    TOGETHER_KEY,
    TOGETHER_OUTPUT,
    FirecrawlFixture,
    TogetherFixture,
)

S = LocalState


def _lines(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


async def failed_items(r: PresetRig, op_id: str) -> list[tuple[str, str | None, str | None]]:
    rows = await r.pool.fetch(
        "SELECT f.item_key, f.code, f.message FROM result_item_failures f"
        " JOIN results s ON s.result_id = f.result_id WHERE s.operation_id = $1"
        " ORDER BY f.item_key",
        op_id,
    )
    return [(row["item_key"], row["code"], row["message"]) for row in rows]


async def verified(r: PresetRig, op_id: str) -> None:
    async with r.pool.acquire() as conn:  # the evidence as recorded still verifies
        assert (await audit.verify(conn, op_id))[1] == []


# --- Together AI -------------------------------------------------------------------

TOGETHER_ENV = {"TOGETHER_API_KEY": TOGETHER_KEY}
BATCH = {"input_file_id": "file-input123abc456def", "endpoint": "/v1/chat/completions"}


def together(pool: Any, tmp_path: Path, fx: TogetherFixture, **over: Any) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="together",
        env=TOGETHER_ENV,
        overrides=described("together", **over),
    )


async def test_together_a_batch_runs_and_its_output_is_collected(pool: Any, tmp_path: Path) -> None:
    """201 {"job": ...} read at /job/id; VALIDATING, IN_PROGRESS (its progress
    kept), COMPLETED: the output file fetched once, every line kept."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT
        assert fx.creates == 1
        (batch,) = fx.jobs.values()
        assert (await r.op(op_id)).remote_job_id == batch["id"]
        assert fx.file_reads == {batch["extra"]["output_file_id"]: 1}
        assert {"VALIDATING", "IN_PROGRESS", "COMPLETED"} <= await r.raw_states(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_succeeded"], summary["items_failed"]) == (3, 0)
        assert await r.pool.fetchval(
            "SELECT max(progress_percent) FROM observations WHERE operation_id = $1", op_id
        ) == pytest.approx(100.0)
        await verified(r, op_id)


async def test_together_a_batch_with_failed_requests_keeps_both_files(
    pool: Any, tmp_path: Path
) -> None:
    """COMPLETED with some requests failed: the output and the error file are kept
    as one result, the failed request recorded by its custom_id with its error."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "mixed"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT[:2] + TOGETHER_ERRORS
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_succeeded"], summary["items_failed"]) == (2, 1)
        ((key, _, message),) = await failed_items(r, op_id)
        assert key == "request-4"
        assert "max_tokens" in (message or ""), message


async def test_together_a_batch_whose_every_request_failed_is_failed(
    pool: Any, tmp_path: Path
) -> None:
    """COMPLETED, but every request failed: no output file, an error file alone.
    Before, the error file was stored as the result and the operation ended
    `succeeded` with 0 items succeeded, the agent told its batch worked. It is
    failed, as OpenAI's all-failed batch is (README: "none is failed"), the reason
    naming the first failure, the failures kept as the evidence."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "allfail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        op = await r.op(op_id)
        assert "result_collecting" in await r.history(op_id)
        message = op.last_error["message"]
        assert message.startswith("every item failed (1 of 1); the first, request-4: "), message
        assert "max_tokens" in message, message
        assert [key for key, _, _ in await failed_items(r, op_id)] == ["request-4"]
        row = await r.pool.fetchrow(
            "SELECT result_ref, errors_ref FROM agent_operations WHERE operation_id = $1", op_id
        )
        assert row["result_ref"] is None and row["errors_ref"] is not None, dict(row)
        await verified(r, op_id)


async def test_together_a_failed_batch_fails_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).last_error["message"] == TOGETHER_FAILURE
        assert fx.file_reads == {}


async def test_together_a_cancel_keeps_the_requests_done(pool: Any, tmp_path: Path) -> None:
    """POST /cancel while the batch runs: CANCELLED read back, and the requests done
    before it (still in the output file) kept as the partial output."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        (batch,) = fx.jobs.values()
        assert [bid for bid, _ in fx.cancels] == [batch["id"]]
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT[:1]
        assert (await r.op(op_id)).result_summary["partial"] is True


async def test_together_a_cancel_refused_after_completion_collects_the_output(
    pool: Any, tmp_path: Path
) -> None:
    """The batch completes between our last read and our cancel: Together answers
    400. No cancel is claimed; the output is collected."""
    fx = TogetherFixture()
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        (batch,) = fx.jobs.values()
        fx.finish(batch["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(batch["id"], "COMPLETED")]
        assert "cancelled" not in await r.history(op_id)
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT


async def test_together_a_throttled_cancel_is_not_resent_and_the_human_is_told_so(
    pool: Any, tmp_path: Path
) -> None:
    """The cancel answered 429: Together's POST /cancel is not declared safe to
    resend, so it is not sent again; the batch runs on, and at the cancel deadline
    a human gets it. Before, the reason read "without a remote confirmation", as if
    the provider had taken the cancel and not yet confirmed it; it says the
    cancel was not accepted and not sent again, and never claims a cancel."""
    fx = TogetherFixture()
    fx.throttled_cancels = 1
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=1.0)
        end = await r.settle(op_id, ENDS)
        assert end is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert len(fx.cancels) == 1 and fx.only()["state"] == "IN_PROGRESS"
        reason = (await r.escalation(op_id))["reason"]
        assert "our cancel request was not accepted" in reason, reason
        assert "not sent again (cancel.idempotent is false" in reason, reason
        assert "cancel.resend_statuses" in reason, reason  # the key that would resend it


async def test_together_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    fx = TogetherFixture(lose_first_create=True)
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "cannot deduplicate creates and offers no lookup" in reason, reason


async def test_together_a_throttled_create_is_not_sent_blind_again(
    pool: Any, tmp_path: Path
) -> None:
    """Together's docs say of a 429 only "Reduce request frequency", not that
    nothing was made: without `not_created_statuses` the create is not resent
    (it might run the batch twice), and the human is told which key would."""
    fx = TogetherFixture()
    fx.throttled_creates = 1
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert len(await r.calls(op_id, "create")) == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "HTTP 429" in reason and "not_created_statuses" in reason, reason


async def test_together_throttled_reads_wait_for_retry_after(pool: Any, tmp_path: Path) -> None:
    """Two reads answered 429 with `Retry-After: 1`: the read after each waits that
    second out, then the batch is collected."""
    fx = TogetherFixture()
    fx.throttled_reads = 2
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        calls = await r.calls(op_id, "status")
        assert [c["status_code"] for c in calls[:3]] == [429, 429, 200]
        for throttled, after in itertools.pairwise(calls[:3]):
            gap = (after["started_at"] - throttled["finished_at"]).total_seconds()
            assert gap >= 0.95, gap
        assert fx.creates == 1


async def test_together_a_throttled_file_download_is_waited_out(pool: Any, tmp_path: Path) -> None:
    """The output file's content answered 429 twice: retried as back-pressure, then
    both files kept whole, once."""
    fx = TogetherFixture()
    fx.throttled_files = 2
    async with together(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "mixed"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT[:2] + TOGETHER_ERRORS
        assert [c["status_code"] for c in await r.calls(op_id, "result")] == [429, 429, 200, 200]
        assert (
            await r.pool.fetchval("SELECT count(*) FROM results WHERE operation_id = $1", op_id)
            == 1
        )


async def test_a_one_shot_download_throttled_is_fetched_again_once(
    pool: Any, tmp_path: Path
) -> None:
    """A result whose download consumes it (`result.side_effects`: DeepL's document,
    "removed from the server once it was downloaded", whose download answers 429
    "Too many requests. Please wait and resend your request"), here Together's
    output file so marked. The first download answered 429: nothing was served,
    so nothing consumed. Before, that 429 counted as a fetch that may have consumed
    it, and the operation ended `result_unavailable` with the document still
    waiting, never fetched. It is fetched after its Retry-After, once."""
    fx = TogetherFixture()
    fx.throttled_files = 1
    one_shot = {"side_effects": True, "file_ids": ["/output_file_id"]}
    async with together(pool, tmp_path, fx, result=one_shot) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert _lines(await r.result_bytes(op_id)) == TOGETHER_OUTPUT
        assert [c["status_code"] for c in await r.calls(op_id, "result")] == [429, 200]


# --- Firecrawl ---------------------------------------------------------------------

FIRECRAWL_ENV = {"FIRECRAWL_API_KEY": FIRECRAWL_KEY, "FIRECRAWL_WEBHOOK_SECRET": FIRECRAWL_SECRET}
CRAWL = {"url": "https://example.com", "limit": 5}


def firecrawl(
    pool: Any, tmp_path: Path, fx: FirecrawlFixture, *, with_receiver: bool = False, **over: Any
) -> Any:
    """Firecrawl as described. Without a receiver (no deliveries come) the webhooks
    table is left out, as a user without one would, so reads follow the backoff."""
    table = described("firecrawl", **over)
    if not with_receiver:
        del table["webhooks"]
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="firecrawl",
        env=FIRECRAWL_ENV,
        overrides=table,
        with_receiver=with_receiver,
    )


def crawled(raw: bytes) -> list[dict[str, Any]]:
    """The pages of a stored crawl (its status pages, joined)."""
    return [doc for page in json.loads(raw) for doc in page["data"]]


async def test_firecrawl_a_crawl_is_collected_whole(pool: Any, tmp_path: Path) -> None:
    """Five pages served two a status page, each naming the next by its absolute
    URL: every page read, all five kept, in order."""
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit(CRAWL)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert crawled(await r.result_bytes(op_id)) == CRAWL_PAGES
        assert len(await r.calls(op_id, "result")) == 3
        assert (await r.op(op_id)).result_summary["items_total"] == len(CRAWL_PAGES)
        assert fx.creates == 1 and len(fx.keys) == 1


async def test_firecrawl_without_a_public_url_a_crawl_asks_for_no_webhook(
    pool: Any, tmp_path: Path
) -> None:
    """No receiver, no public_webhook_url: the webhook table is left out whole, and
    Firecrawl (which refuses a webhook object without its url) takes the crawl."""
    fx = FirecrawlFixture()
    table = described("firecrawl")
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="firecrawl", env=FIRECRAWL_ENV, overrides=table
    ) as r:
        op_id = await r.submit(CRAWL)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "webhook" not in fx.only()["input"]
        assert fx.webhooks == []


async def test_firecrawl_a_failed_crawl_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit({**CRAWL, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failed" in await r.raw_states(op_id)
        assert (await r.op(op_id)).result_id is None


async def test_firecrawl_a_cancel_deletes_the_crawl_and_reads_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit({**CRAWL, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "scraping")]
        assert "cancelled" in await r.raw_states(op_id)


async def test_firecrawl_a_cancel_refused_already_completed_collects_the_pages(
    pool: Any, tmp_path: Path
) -> None:
    """The crawl completes between our last read and our DELETE: Firecrawl answers
    409 "Crawl is already completed". No cancel is claimed; the pages are
    collected (the agent's cancel answered by `succeeded`)."""
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit({**CRAWL, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "completed")]
        assert "cancelled" not in await r.history(op_id)
        assert crawled(await r.result_bytes(op_id)) == CRAWL_PAGES


async def test_firecrawl_a_lost_create_is_resent_with_its_key_and_never_doubled(
    pool: Any, tmp_path: Path
) -> None:
    """The first create's answer is lost (the crawl was made); the resend carries
    the same UUID key and Firecrawl answers 409 "Idempotency key already used",
    naming no crawl. One crawl, and a human told the token is spent on a job we
    cannot see, never a failure claimed for a crawl that runs."""
    fx = FirecrawlFixture(lose_first_create=True)
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit(CRAWL)
        end = await r.settle(op_id, ENDS)
        assert end is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        assert len(fx.keys) == 1 and fx.keys[0] is not None
        creates = await r.calls(op_id, "create")
        assert [c["status_code"] for c in creates] == [None, 409]
        assert len({c["request_headers"].get("x-idempotency-key") for c in creates}) == 1


async def test_firecrawl_throttled_reads_wait_for_retry_after(pool: Any, tmp_path: Path) -> None:
    fx = FirecrawlFixture()
    fx.throttled_reads = 2
    async with firecrawl(pool, tmp_path, fx) as r:
        op_id = await r.submit(CRAWL)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        calls = await r.calls(op_id, "status")
        assert [c["status_code"] for c in calls[:3]] == [429, 429, 200]
        gap = (calls[2]["started_at"] - calls[1]["finished_at"]).total_seconds()
        assert gap >= 0.95, gap
        assert crawled(await r.result_bytes(op_id)) == CRAWL_PAGES


async def test_firecrawl_signed_webhooks_wake_the_crawl_and_a_forged_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The create asks for the webhook, our operation id in its metadata; each
    delivery signed as Firecrawl signs it (`X-Firecrawl-Signature: sha256=<hex>`,
    the body's HMAC-SHA256) reaches the real receiver and is matched by that
    metadata; one signed with another secret is refused and stores nothing.
    crawl.completed wakes the read long before the backstop; our read decides and
    the pages are collected."""
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**CRAWL, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        cid = fx.only()["id"]
        assert fx.webhooks == [{"url": r.hook_url, "metadata": {"operation_id": op_id}}]
        assert await fx.deliver(r.hook_url, cid, "crawl.completed", secret="another") == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, cid, "crawl.started") == 200
        assert await fx.deliver(r.hook_url, cid, "crawl.page") == 200
        fx.finish(cid)
        assert await fx.deliver(r.hook_url, cid, "crawl.completed") == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert crawled(await r.result_bytes(op_id)) == CRAWL_PAGES
        events = await r.pool.fetch(
            "SELECT operation_id, remote_state_raw FROM webhook_events"
            " WHERE provider = 'firecrawl' ORDER BY webhook_event_id"
        )
        assert [(e["operation_id"], e["remote_state_raw"]) for e in events] == [
            (op_id, "crawl.started"),
            (op_id, "crawl.page"),
            (op_id, "crawl.completed"),
        ]


async def test_firecrawl_a_crawl_failed_event_wakes_a_read_that_fails_it(
    pool: Any, tmp_path: Path
) -> None:
    """crawl.failed ("when crawl fails or is cancelled") only wakes the operation;
    our own read decides: failed."""
    fx = FirecrawlFixture()
    async with firecrawl(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**CRAWL, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        cid = fx.only()["id"]
        fx.jobs[cid]["state"] = "failed"
        assert await fx.deliver(r.hook_url, cid, "crawl.failed", error="crawl timed out") == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.FAILED, await r.history(op_id)


# --- DeepL -------------------------------------------------------------------------


def test_deepl_a_status_needing_the_uploads_key_is_refused_at_load() -> None:
    """DeepL answers an upload {"document_id", "document_key"}, and both the status
    read and the one-shot download are POSTs whose body carries that key. Nothing
    carries a value from the create's answer to a later call (a status or result
    body's strings fill `{job_id}` alone): the description is refused at load,
    naming the key and the placeholder, never accepted to send `{document_key}` as
    written (a 403 at every read, then a download lost)."""
    with pytest.raises(ConfigError) as info:
        load("deepl", None, "https://api.deepl.com", {"DEEPL_AUTH_KEY": "k"}, described("deepl"))
    message = str(info.value)
    assert "providers.deepl.status.body.document_key" in message, message
    assert "unknown placeholder {document_key}" in message and "job_id" in message, message
