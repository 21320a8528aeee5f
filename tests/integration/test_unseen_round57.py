"""Apify actor runs, Black Forest Labs (FLUX) generations, Mindee's async
predictions and Perplexity's async chat completions, described in TOML as a new
user would (tests/fixtures_providers/unseen/: apify, bfl, mindee,
perplexity_async) and driven through the real reconciler against fakes on
loopback (tests/fixtures_providers/unseen_round57.py): success with the result
collected, failure with its reason, cancel (or its absence), a lost create answer,
and each API's own edge: Apify's TIMED-OUT and ABORTED, its abort of an ended run
and its dataset paged by offset; BFL's per-request polling_url, its moderation
and its signed sample link that expires; Mindee's 302 on completion; Perplexity's
failure told by error_message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, cancelled_with_no_endpoint, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round57 import (
    AP_FAILURE,
    AP_HOOK_TOKEN,
    AP_ITEMS,
    AP_TIMED_OUT,
    AP_TOKEN,
    BFL_KEY,
    BFL_MODERATION,
    MI_FAILURE,
    MI_KEY,
    MI_PREDICTION,
    PNG,
    PX_ANSWER,
    PX_FAILURE,
    PX_KEY,
    ApifyFixture,
    BflFixture,
    MindeeFixture,
    PerplexityFixture,
)
from tests.integration.test_page_origins import _self_signed

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
    """The described provider; its webhooks only with the receiver (without one,
    polling is the slow backstop a webhook-driven description sets)."""
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


# --- Apify -------------------------------------------------------------------------

AP_ENV = {"APIFY_TOKEN": AP_TOKEN, "APIFY_WEBHOOK_TOKEN": AP_HOOK_TOKEN}


def actor_input(script: str | None = None) -> dict[str, Any]:
    return {"startUrls": [{"url": "https://example.com"}], "maxCrawlPages": 5} | (
        {"script": script} if script else {}
    )


def apify(pool: Any, tmp_path: Path, fx: ApifyFixture, **over: Any) -> Any:
    return rig(pool, tmp_path, fx, "apify", AP_ENV, **over)


async def test_apify_the_actors_webhook_wakes_the_run_and_a_wrong_token_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The actor's webhook integration posts the run to the receiver, its token in
    the header its headers template names; the run, named by eventData.actorRunId,
    is read at once and its items collected."""
    fx = ApifyFixture()
    async with rig(pool, tmp_path, fx, "apify", AP_ENV, with_receiver=True) as r:
        op_id = await r.submit(actor_input("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.finish(rid)
        assert await fx.deliver(r.hook_url, rid, token="another") == 401
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, rid)]
        assert json.loads(await r.result_bytes(op_id)) == AP_ITEMS


async def test_apify_a_run_succeeds_and_its_dataset_is_read_page_by_page(
    pool: Any, tmp_path: Path
) -> None:
    """Two items a page (limit=2): offsets 0, 2, 4, the total header ends it."""
    fx = ApifyFixture()
    pages = {
        "offset_param": "offset",
        "page_size": 2,
        "page_size_param": "limit",
        "total": "header:X-Apify-Pagination-Total",
    }
    async with apify(pool, tmp_path, fx, result={"pages": pages}) as r:
        op_id = await r.submit(actor_input())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"RUNNING", "SUCCEEDED"} <= await r.raw_states(op_id)
        assert [o for o, _ in fx.item_reads] == ["0", "2", "4"], fx.item_reads
        # the pages, each the list itself, kept as one list of the items (before,
        # as a list of pages, [[...], [...], [...]], unlike a result of one page)
        assert json.loads(await r.result_bytes(op_id)) == AP_ITEMS
        assert {lim for _, lim in fx.item_reads} == {"2"}


async def test_apify_a_status_message_is_no_error_while_the_run_goes_well(
    pool: Any, tmp_path: Path
) -> None:
    """statusMessage is on every read ("Crawling: 2 of 5 pages", "Finished! Total 5
    requests: ..."): read as the error only when the run failed or was aborted
    (status.error_only_when_failed). Before, each was kept as the operation's last
    error, an agent reading a running or succeeded run's progress as what went
    wrong."""
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "RUNNING"
        before = fx.reads
        while fx.reads == before:
            await r.reconciler.run_once()
        assert (await r.op(op_id)).last_error is None
        fx.finish(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).last_error is None
        errors = await r.pool.fetch(
            "SELECT error FROM observations WHERE operation_id = $1 AND error IS NOT NULL",
            op_id,
        )
        assert errors == []


async def test_apify_a_failed_run_is_failed_with_its_status_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == AP_FAILURE


async def test_apify_a_run_past_its_timeout_goes_through_timing_out_to_failed(
    pool: Any, tmp_path: Path
) -> None:
    """TIMING-OUT is still running; TIMED-OUT ends it failed, the message saying so."""
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("timeout"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert {"TIMING-OUT", "TIMED-OUT"} <= await r.raw_states(op_id)
        assert await reason(r, op_id) == AP_TIMED_OUT


async def test_apify_an_abort_is_cancelled_and_the_items_written_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("slow"))
        await r.settle(op_id, {S.OBSERVING})
        job = fx.only()
        job["state"], job["items"] = "RUNNING", AP_ITEMS[:2]
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c for c in fx.cancels] == [(fx.only()["id"], "RUNNING")]
        assert "ABORTED" in await r.raw_states(op_id)
        kept = await r.pool.fetchrow(
            "SELECT items_total, storage_ref FROM results WHERE operation_id = $1 AND valid",
            op_id,
        )
        assert kept is not None and kept["items_total"] == 2, kept


async def test_apify_an_abort_of_a_run_that_ended_is_no_cancel(pool: Any, tmp_path: Path) -> None:
    """The abort of an ended run "does nothing", answering 200 and the run as it
    is (SUCCEEDED): the run's items are collected, no cancel claimed."""
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == AP_ITEMS


async def test_apify_a_run_aborted_elsewhere_is_cancelled_saying_no_cancel_was_asked(
    pool: Any, tmp_path: Path
) -> None:
    fx = ApifyFixture()
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "ABORTED"
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == []
        cause = await r.pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'cancelled'", op_id
        )
        assert "no cancellation was asked of jobwarden" in cause, cause


async def test_apify_a_lost_create_goes_to_a_human_never_run_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = ApifyFixture(lose_first_create=True)
    async with apify(pool, tmp_path, fx) as r:
        op_id = await r.submit(actor_input())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Black Forest Labs -------------------------------------------------------------

BFL_ENV = {"BFL_API_KEY": BFL_KEY}


def generation(script: str | None = None) -> dict[str, Any]:
    prompt = "A futuristic city skyline at sunset with flying cars"
    return {"prompt": prompt, "width": 1024, "height": 768} | ({"script": script} if script else {})


@contextlib.asynccontextmanager
async def bfl(pool: Any, tmp_path: Path, fx: BflFixture) -> AsyncIterator[PresetRig]:
    """With the delivery CDN (signed links) on `localhost`, allowed by the operator."""
    async with serve_app(fx.storage()) as storage_url:
        fx.url = storage_url.replace("127.0.0.1", "localhost")
        async with rig(
            pool, tmp_path, fx, "bfl", BFL_ENV, result={"allowed_hosts": ["localhost"]}
        ) as r:
            yield r


async def test_bfl_a_generation_is_read_at_its_polling_url_and_its_image_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = BflFixture()
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        job = fx.only()
        assert op.remote_job_id == job["id"]
        reads = [c["url"] for c in await r.calls(op_id, "status")]
        assert reads and all(u.endswith(f"/v1/get_result?id={job['id']}") for u in reads), reads
        assert await r.result_bytes(op_id) == PNG
        assert fx.auth == [None] and fx.storage_keys == [None]  # the link alone


async def test_bfl_a_polling_url_on_another_cluster_is_read_there_with_the_key(
    pool: Any, tmp_path: Path
) -> None:
    """The global endpoint answers a polling_url on the cluster that took the
    request (api.us1.bfl.ai: here an https server of its own), named in
    auth.extra_hosts: every read goes there, the key with it; the sample's signed
    link (the delivery CDN) is fetched without it."""
    context = _self_signed(tmp_path)
    fx = BflFixture()
    server = await asyncio.start_server(fx.cluster, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    fx.cluster_url = f"https://localhost:{port}"
    try:
        async with serve_app(fx.storage()) as storage_url:
            fx.url = storage_url.replace("127.0.0.1", "localhost")
            table = described(
                "bfl",
                auth={"extra_hosts": [f"localhost:{port}"]},
                result={"allowed_hosts": ["localhost"]},
            )
            async with preset_rig(
                pool,
                tmp_path,
                fx.app(),
                preset=None,
                name="bfl",
                env=BFL_ENV,
                overrides=table,
                authorities=str(tmp_path / "cert.pem"),
            ) as r:
                op_id = await r.submit(generation())
                assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
                reads = [c["url"] for c in await r.calls(op_id, "status")]
                assert await r.result_bytes(op_id) == PNG
    finally:
        server.close()
        await server.wait_closed()
    assert reads and all(u.startswith(fx.cluster_url) for u in reads), reads
    assert fx.cluster_keys and set(fx.cluster_keys) == {BFL_KEY}
    assert fx.auth == [None] and fx.storage_keys == [None]


async def test_bfl_a_moderated_generation_is_failed_with_its_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = BflFixture()
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation("moderated"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "Content Moderated" in await r.raw_states(op_id)
        assert await reason(r, op_id) == BFL_MODERATION[0]


async def test_bfl_an_errored_generation_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = BflFixture()
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Internal generation error"


async def test_bfl_an_expired_sample_link_is_read_anew(pool: Any, tmp_path: Path) -> None:
    """The first signed link answers 403 (past its ten minutes): the status is read
    again for a fresh one, and the image kept."""
    fx = BflFixture()
    fx.expire_first = True
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == PNG
        assert fx.signed >= 2


async def test_bfl_a_cancel_sends_nothing_and_the_image_is_still_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = BflFixture()
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation("slow"))
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        fx.only()["state"] = "Ready"
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []
        assert await r.result_bytes(op_id) == PNG


async def test_bfl_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = BflFixture(lose_first_create=True)
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_bfl_a_request_it_no_longer_knows_goes_to_a_human_naming_it(
    pool: Any, tmp_path: Path
) -> None:
    """An id it does not know reads 200 {"status": "Task not found"} (a request
    expired, or never issued), a word left out of the state map: never a success
    nor a job running on forever; after ten such reads a human is told, the word
    named."""
    fx = BflFixture()
    async with bfl(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert "'Task not found'" in await reason(r, op_id)


# --- Mindee ------------------------------------------------------------------------

MI_ENV = {"MINDEE_API_KEY": MI_KEY}
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def invoice() -> dict[str, Any]:
    return {
        "document": {
            "content_base64": base64.b64encode(PDF).decode(),
            "filename": "invoice.pdf",
            "content_type": "application/pdf",
        }
    }


def mindee(pool: Any, tmp_path: Path, fx: MindeeFixture) -> Any:
    return rig(pool, tmp_path, fx, "mindee", MI_ENV)


async def test_mindee_the_302_on_completion_is_a_success_and_its_document_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = MindeeFixture()
    async with mindee(pool, tmp_path, fx) as r:
        op_id = await r.submit(invoice())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.uploads == [("invoice.pdf", PDF)]
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"waiting", "processing"} & await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["document"]["inference"]["prediction"] == MI_PREDICTION
        assert fx.document_reads == 1


async def test_mindee_a_failed_job_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = MindeeFixture()
    fx.script = "fail"
    async with mindee(pool, tmp_path, fx) as r:
        op_id = await r.submit(invoice())
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == MI_FAILURE
        assert (await r.op(op_id)).last_error["code"] == "FileProtected"


async def test_mindee_a_cancel_sends_nothing_and_the_deadline_tells_a_human(
    pool: Any, tmp_path: Path
) -> None:
    fx = MindeeFixture()
    fx.script = "slow"
    async with mindee(pool, tmp_path, fx) as r:
        op_id = await r.submit(invoice())
        await r.settle(op_id, {S.OBSERVING})
        await cancelled_with_no_endpoint(r, op_id)


async def test_mindee_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = MindeeFixture(lose_first_create=True)
    async with mindee(pool, tmp_path, fx) as r:
        op_id = await r.submit(invoice())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Perplexity --------------------------------------------------------------------

PX_ENV = {"PERPLEXITY_API_KEY": PX_KEY}


def research(script: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": "sonar-deep-research",
        "messages": [{"role": "user", "content": "Compare solid-state battery makers."}],
        "reasoning_effort": "medium",
    }
    if script:
        request["script"] = script
    return {"request": request}


def perplexity(pool: Any, tmp_path: Path, fx: PerplexityFixture) -> Any:
    return rig(pool, tmp_path, fx, "perplexity_async", PX_ENV)


async def test_perplexity_a_completed_request_keeps_its_response(pool: Any, tmp_path: Path) -> None:
    fx = PerplexityFixture()
    async with perplexity(pool, tmp_path, fx) as r:
        op_id = await r.submit(research())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert {"IN_PROGRESS", "COMPLETED"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["choices"][0]["message"]["content"] == PX_ANSWER


async def test_perplexity_a_failed_request_is_failed_with_its_error_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = PerplexityFixture()
    async with perplexity(pool, tmp_path, fx) as r:
        op_id = await r.submit(research("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == PX_FAILURE


async def test_perplexity_a_cancel_sends_nothing_and_the_answer_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = PerplexityFixture()
    async with perplexity(pool, tmp_path, fx) as r:
        op_id = await r.submit(research("slow"))
        await r.settle(op_id, {S.OBSERVING})
        assert await r.cancel(op_id) is S.CANCEL_REQUESTED
        fx.only()["state"] = "COMPLETED"
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.calls(op_id, "cancel") == []


async def test_perplexity_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = PerplexityFixture(lose_first_create=True)
    async with perplexity(pool, tmp_path, fx) as r:
        op_id = await r.submit(research())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
