"""Stability AI's async results, Rev.ai's transcription jobs, Mathpix's PDF
conversions and CloudConvert's jobs, described in TOML as a new user would from
README.md (tests/fixtures_providers/unseen/stability.toml, revai.toml, mathpix.toml,
cloudconvert.toml) and driven through the real reconciler (and receiver) against
fakes on loopback (tests/fixtures_providers/unseen_round47.py): success with the
result stored, failure with its reason, a lost create answer, a slow job read on
its backoff, and webhooks where the provider sends them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.harness import TestClock
from shared.ledger import audit
from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_media import MP4
from tests.fixtures_providers.unseen_round47 import (
    CC_FAILURE,
    CLOUDCONVERT_KEY,
    CLOUDCONVERT_SECRET,
    MATHPIX_APP_ID,
    MATHPIX_ERROR,
    MATHPIX_KEY,
    MMD,
    PDF,
    REVAI_FAILURE,
    REVAI_KEY,
    REVAI_TOKEN,
    STABILITY_KEY,
    TRANSCRIPT,
    TRANSCRIPT_TYPE,
    CloudConvertFixture,
    MathpixFixture,
    RevAiFixture,
    StabilityFixture,
)

S = LocalState
# Backoff as a deployment would have it (README's defaults), on a clock the test moves.
REAL_BACKOFF = {"backoff_base": 2.0, "backoff_factor": 2.0, "backoff_cap": 60.0}


async def status_reads(r: PresetRig, op_id: str) -> int:
    return len(await r.calls(op_id, "status"))


async def wait_after_last_read(r: PresetRig, op_id: str) -> float:
    """Seconds from the row's last write to its next read (test_poll_schedule's measure)."""
    return float(
        await r.pool.fetchval(
            "SELECT extract(epoch FROM next_poll_at - updated_at) FROM operations"
            " WHERE operation_id = $1",
            op_id,
        )
    )


async def reads_follow_the_backoff(r: PresetRig, clock: TestClock, op_id: str) -> None:
    """A job that runs on: no read before its appointment, one at it, and the wait
    growing (2 s, 4 s, 8 s ... with jitter), never a busy loop."""
    await r.reconciler.run_once()  # the create
    assert await r.state(op_id) is S.ACCEPTED, await r.history(op_id)
    waits = []
    for _ in range(6):
        before = await status_reads(r, op_id)
        await r.reconciler.run_once()  # not due yet: nothing is read
        assert await status_reads(r, op_id) == before
        assert await clock.to_appointment(r.pool, op_id)
        await r.reconciler.run_once()
        assert await status_reads(r, op_id) == before + 1
        waits.append(await wait_after_last_read(r, op_id))
    assert await r.state(op_id) is S.OBSERVING, await r.history(op_id)
    # each drawn between half its ceiling and the ceiling (README): neighbours may
    # cross, the growth is what counts (the sixth's ceiling is 60 s, the first's 4)
    assert min(waits) >= REAL_BACKOFF["backoff_base"] / 2, waits
    assert waits[-1] > 2 * waits[0], waits
    assert waits[-1] <= REAL_BACKOFF["backoff_cap"] * 2, waits


# --- Stability AI ------------------------------------------------------------------

STABILITY_ENV = {"STABILITY_API_KEY": STABILITY_KEY}
IMAGE = {
    "image": {
        "content_base64": base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode(),
        "filename": "cat.png",
        "content_type": "image/png",
    },
    "seed": 0,
    "motion_bucket_id": 127,
}


def stability(pool: Any, tmp_path: Path, fx: StabilityFixture, **kwargs: Any) -> Any:
    over = kwargs.pop("over", {})
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="stability",
        env=STABILITY_ENV,
        overrides=described("stability", **over),
        **kwargs,
    )


async def test_stability_a_generation_runs_and_its_video_is_stored(
    pool: Any, tmp_path: Path
) -> None:
    """202 while it runs, then the 200 that carries the video: that read decides,
    and the video is stored, its bytes as sent. The description
    writes no Accept (Stability's default is the video): before, our status reads
    asked for `application/json`, Stability answered the JSON form (no
    `finish-reason` header), and the job read as running until its deadline."""
    fx = StabilityFixture()
    async with stability(pool, tmp_path, fx) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4
        assert fx.images == [("cat.png", "image/png", b"\x89PNG\r\n\x1a\n fake")]
        assert fx.only()["input"]["motion_bucket_id"] == "127"
        # the video was asked for (no JSON Accept) and the collection's final read
        # is the result: no fetch of its own downloads it again
        assert set(fx.accepts) == {"*/*"}
        assert await r.calls(op_id, "result") == []
        assert "SUCCESS" in await r.raw_states(op_id)


async def test_stability_a_content_filtered_generation_fails(pool: Any, tmp_path: Path) -> None:
    """`finish-reason: CONTENT_FILTERED` on the 200: failed, the filtered video not
    stored as the result."""
    fx = StabilityFixture()
    async with stability(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "filtered"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).result_id is None
        assert "CONTENT_FILTERED" in await r.raw_states(op_id)


# Stability's results as JSON, a user's other choice: `Accept: application/json` on
# every call; the state at /finish_reason, the body the result (the video base64
# inside it, stored as the JSON here; `result.base64` keeps the video decoded, below).
AS_JSON: dict[str, dict[str, Any]] = {
    "headers": {"Accept": "application/json"},
    "status": {"state": "/finish_reason"},
    "result": {
        "format": "json",
        "expect": {"content_types": ["application/json"], "required_fields": ["/video"]},
    },
}


async def test_stability_results_asked_for_as_json_are_stored_as_json(
    pool: Any, tmp_path: Path
) -> None:
    fx = StabilityFixture()
    async with stability(pool, tmp_path, fx, over=AS_JSON) as r:
        ok = await r.submit(IMAGE)
        filtered = await r.submit({**IMAGE, "script": "filtered"})
        assert await r.settle(ok, ENDS) is S.SUCCEEDED, await r.history(ok)
        assert await r.settle(filtered, ENDS) is S.FAILED, await r.history(filtered)
        kept = json.loads(await r.result_bytes(ok))
        assert base64.b64decode(kept["video"]) == MP4
        assert kept["finish_reason"] == "SUCCESS"
        assert set(fx.accepts) == {"application/json"}


async def test_stability_a_json_result_keeps_the_video_decoded(pool: Any, tmp_path: Path) -> None:
    """What a user of `Accept: application/json` wants: the MP4 stored, not the JSON
    around its base64 (`result.base64`): the result row, its file and the summary
    all name the decoded video (its sha256, size and type)."""
    fx = StabilityFixture()
    over = {
        **AS_JSON,
        "result": {"base64": "/video", "expect": {"content_types": ["video/mp4"]}},
    }
    async with stability(pool, tmp_path, fx, over=over) as r:
        op_id = await r.submit(IMAGE)
        filtered = await r.submit({**IMAGE, "script": "filtered"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.settle(filtered, ENDS) is S.FAILED, await r.history(filtered)
        assert await r.result_bytes(op_id) == MP4
        assert set(fx.accepts) == {"application/json"}
        row = await r.pool.fetchrow(
            "SELECT r.valid, r.sha256, r.size_bytes, r.content_type FROM results r"
            " JOIN operations o ON o.result_id = r.result_id WHERE o.operation_id = $1",
            op_id,
        )
        digest = hashlib.sha256(MP4).hexdigest()
        assert dict(row) == {
            "valid": True,
            "sha256": digest,
            "size_bytes": len(MP4),
            "content_type": "video/mp4",
        }
        summary = (await r.op(op_id)).result_summary
        assert (summary["sha256"], summary["size_bytes"]) == (digest, len(MP4))
        async with r.pool.acquire() as conn:  # the evidence as recorded still verifies
            assert (await audit.verify(conn, op_id))[1] == []


async def test_stability_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    fx = StabilityFixture(lose_first_create=True)
    async with stability(pool, tmp_path, fx) as r:
        op_id = await r.submit(IMAGE)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
        reason = (await r.escalation(op_id))["reason"]
        assert "cannot deduplicate creates and offers no lookup" in reason, reason


async def test_stability_a_generation_that_expired_unread_is_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """Results are kept 24 hours; a read after that answers 404: the operation stops
    for a human, saying the job does not exist; never succeeded, never a second
    create."""
    fx = StabilityFixture()
    async with stability(pool, tmp_path, fx) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.expired.add(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "does not exist" in reason, reason
        assert fx.creates == 1
        assert (await r.op(op_id)).result_id is None


async def test_stability_a_slow_generation_is_read_on_its_backoff(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = StabilityFixture()
    async with stability(pool, tmp_path, fx, clock=clock, over={"limits": REAL_BACKOFF}) as r:
        op_id = await r.submit({**IMAGE, "script": "slow"}, result_deadline_s=3600.0)
        await reads_follow_the_backoff(r, clock, op_id)
        fx.finish(fx.only()["id"])
        assert await clock.to_appointment(r.pool, op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MP4


# --- Rev.ai ------------------------------------------------------------------------

REVAI_ENV = {"REVAI_ACCESS_TOKEN": REVAI_KEY, "REVAI_CALLBACK_TOKEN": REVAI_TOKEN}
MEDIA = {"media_url": "https://www.rev.ai/FTC_Sample_1.mp3"}


def revai(
    pool: Any, tmp_path: Path, fx: RevAiFixture, *, with_receiver: bool = False, **kwargs: Any
) -> Any:
    """Rev.ai as described. Without a receiver (no callbacks come) the webhooks table
    is left out, as a user without one would (reads follow the backoff)."""
    table = described("revai", **kwargs.pop("over", {}))
    if not with_receiver:
        del table["webhooks"]
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="revai",
        env=REVAI_ENV,
        overrides=table,
        with_receiver=with_receiver,
        **kwargs,
    )


async def test_revai_a_job_is_transcribed_and_its_transcript_stored(
    pool: Any, tmp_path: Path
) -> None:
    """The transcript is asked for as Rev's JSON (its vendor media type, which a
    `+json` type is; `result.headers`) and stored as sent, the job calls still
    asking for JSON; our operation id rides in `metadata`. Before, no key sent a
    header with the result's fetch alone: the transcript's Accept went on every
    call (`headers`)."""
    fx = RevAiFixture()
    async with revai(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT
        assert fx.transcript_accepts == [TRANSCRIPT_TYPE]
        assert set(fx.job_accepts) == {"application/json"}
        assert fx.only()["input"]["metadata"] == op_id
        assert "callback_url" not in fx.only()["input"]  # no receiver: none asked for
        assert {"in_progress", "transcribed"} <= await r.raw_states(op_id)


async def test_revai_a_failed_job_fails_with_its_failure_and_detail(
    pool: Any, tmp_path: Path
) -> None:
    fx = RevAiFixture()
    async with revai(pool, tmp_path, fx) as r:
        op_id = await r.submit({**MEDIA, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert REVAI_FAILURE["failure"] in error, error
        assert REVAI_FAILURE["failure_detail"] in error, error
        assert fx.transcript_accepts == []


async def test_revai_a_create_refused_with_a_problem_document_fails_with_its_title(
    pool: Any, tmp_path: Path
) -> None:
    """400 `application/problem+json` (RFC 7807): nothing was created, the operation
    fails with Rev.ai's title, sent once."""
    fx = RevAiFixture()
    async with revai(pool, tmp_path, fx) as r:
        op_id = await r.submit({"language": "en"})
        end = await r.settle(op_id, ENDS)
        error = json.dumps((await r.op(op_id)).last_error)
        assert end is S.FAILED, (end, await r.history(op_id), error)
        assert "Your request parameters didn't validate" in error, error
        assert fx.creates == 0


async def test_revai_a_lost_create_is_found_by_its_metadata_not_sent_again(
    pool: Any, tmp_path: Path
) -> None:
    """The job list shows each job's `metadata`: the lost create's job is found there
    among others' (made without metadata) and adopted; one job, transcribed."""
    fx = RevAiFixture(others=3, lose_first_create=True)
    async with revai(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.lists, "the list was read"
        ours = [j for j in fx.jobs.values() if (j["input"] or {}).get("metadata") == op_id]
        assert (await r.op(op_id)).remote_job_id == ours[0]["id"]
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT


async def test_revai_the_list_is_paged_by_its_last_jobs_id_to_find_ours(
    pool: Any, tmp_path: Path
) -> None:
    """Five jobs made elsewhere after ours, two a page: ours is on the third page,
    reached by `starting_after` the last id of each page (a bare array's `/-1/id`)."""
    fx = RevAiFixture(others=1, lose_first_create=True)
    fx.others_after = 5
    lookup = {"page_size": 2}
    async with revai(pool, tmp_path, fx, over={"lookup": lookup}) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        pages = fx.lists[:3]
        assert [p.get("starting_after") for p in pages] == [None, "0ther00005", "0ther00003"]
        assert {p["limit"] for p in pages} == {"2"}


async def test_revai_a_create_that_never_arrived_is_sent_again_once_the_list_proves_it(
    pool: Any, tmp_path: Path
) -> None:
    """No answer, and no job made: the list, read to its end (an empty page after
    the last), holds no job with our metadata, so the create goes again: one job."""
    fx = RevAiFixture(drop_first_create=True)
    async with revai(pool, tmp_path, fx) as r:
        op_id = await r.submit(MEDIA)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (fx.create_calls, fx.creates) == (2, 1)
        assert fx.lists
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT


async def test_revai_a_slow_job_is_read_on_its_backoff(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = RevAiFixture()
    async with revai(pool, tmp_path, fx, clock=clock, over={"limits": REAL_BACKOFF}) as r:
        op_id = await r.submit({**MEDIA, "script": "slow"}, result_deadline_s=3600.0)
        await reads_follow_the_backoff(r, clock, op_id)


async def test_revai_its_callback_with_our_token_wakes_the_operation_and_a_wrong_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The create asks for the callback (`callback_url`, our token in its query);
    Rev.ai POSTs {"job": ...} unsigned to it: with our token it wakes the operation
    long before the 30 s backstop read; to the URL without the token it is refused."""
    fx = RevAiFixture()
    async with revai(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**MEDIA, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        job = fx.only()
        assert job["input"]["callback_url"] == f"{r.hook_url}?token={REVAI_TOKEN}"
        fx.finish(job["id"])
        assert await fx.call_back(job["id"], url=r.hook_url) == 400  # no token at all
        assert await fx.call_back(job["id"], url=f"{r.hook_url}?token=x{REVAI_TOKEN}") == 401
        assert await fx.call_back(job["id"]) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == TRANSCRIPT
        # the token is never on record: not with the create, not with the callbacks
        tables = ("provider_calls", "webhook_events", "operations", "history", "observations")
        for table in tables:
            rows = await r.pool.fetch(f"SELECT t::text FROM {table} t")
            assert not [row for row in rows if REVAI_TOKEN in row[0]], table


# --- Mathpix -----------------------------------------------------------------------

MATHPIX_ENV = {"MATHPIX_APP_KEY": MATHPIX_KEY}
PDF_REQUEST = {"url": "https://cdn.mathpix.com/examples/cs229-notes1.pdf"}


def mathpix(pool: Any, tmp_path: Path, fx: MathpixFixture, **kwargs: Any) -> Any:
    over = kwargs.pop("over", {})
    table = described("mathpix", **over)
    table["headers"] = {"app_id": MATHPIX_APP_ID}
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mathpix",
        env=MATHPIX_ENV,
        overrides=table,
        **kwargs,
    )


async def test_mathpix_a_pdf_is_converted_and_its_markdown_stored(
    pool: Any, tmp_path: Path
) -> None:
    fx = MathpixFixture()
    async with mathpix(pool, tmp_path, fx) as r:
        op_id = await r.submit(PDF_REQUEST)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.result_bytes(op_id)).decode() == MMD
        # the key travels in a header of Mathpix's own name: never on record
        for table in ("provider_calls", "observations", "history", "operations"):
            rows = await r.pool.fetch(f"SELECT t::text FROM {table} t")
            assert not [row for row in rows if MATHPIX_KEY in row[0]], table
        assert {"received", "loaded", "split", "completed"} & await r.raw_states(op_id) >= {
            "split",
            "completed",
        }
        assert fx.results == 1


async def test_mathpix_pages_done_are_the_progress(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """`num_pages_completed` of `num_pages` while split: the operation's progress."""
    fx = MathpixFixture()
    async with mathpix(pool, tmp_path, fx, clock=clock) as r:
        op_id = await r.submit({**PDF_REQUEST, "script": "crawl"})
        query = (
            "SELECT progress_completed, progress_total FROM observations"
            " WHERE operation_id = $1 AND progress_total IS NOT NULL"
            " ORDER BY observation_id DESC LIMIT 1"
        )
        row = None
        await r.reconciler.run_once()  # the create
        for _ in range(5):  # the fake splits on its second read
            assert await clock.to_appointment(r.pool, op_id)
            await r.reconciler.run_once()
            row = await r.pool.fetchrow(query, op_id)
            if row is not None:
                break
        assert row is not None, await r.history(op_id)
        assert row["progress_total"] == MathpixFixture.PAGES
        assert 1 <= row["progress_completed"] < MathpixFixture.PAGES


async def test_mathpix_a_pdf_in_error_fails_with_its_reason(pool: Any, tmp_path: Path) -> None:
    fx = MathpixFixture()
    async with mathpix(pool, tmp_path, fx) as r:
        op_id = await r.submit({**PDF_REQUEST, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert MATHPIX_ERROR["error"] in error, error
        assert fx.results == 0


async def test_mathpix_a_lost_create_is_never_sent_again(pool: Any, tmp_path: Path) -> None:
    fx = MathpixFixture(lose_first_create=True)
    async with mathpix(pool, tmp_path, fx) as r:
        op_id = await r.submit(PDF_REQUEST)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_mathpix_a_slow_pdf_is_read_on_its_backoff(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = MathpixFixture()
    async with mathpix(pool, tmp_path, fx, clock=clock, over={"limits": REAL_BACKOFF}) as r:
        op_id = await r.submit({**PDF_REQUEST, "script": "slow"}, result_deadline_s=3600.0)
        await reads_follow_the_backoff(r, clock, op_id)


# --- CloudConvert ------------------------------------------------------------------

CLOUDCONVERT_ENV = {
    "CLOUDCONVERT_API_KEY": CLOUDCONVERT_KEY,
    "CLOUDCONVERT_WEBHOOK_SECRET": CLOUDCONVERT_SECRET,
}
GRAPH = {
    "tasks": {
        "import-1": {"operation": "import/url", "url": "https://example.com/report.docx"},
        "convert-1": {"operation": "convert", "input": "import-1", "output_format": "pdf"},
        "export-1": {"operation": "export/url", "input": "convert-1"},
    }
}


@contextlib.asynccontextmanager
async def cloudconvert(
    pool: Any, tmp_path: Path, fx: CloudConvertFixture, *, with_receiver: bool = False, **kw: Any
) -> AsyncIterator[PresetRig]:
    """The rig, with CloudConvert's storage (another origin) served beside it. Without
    a receiver the webhooks table is left out (reads follow the backoff)."""
    async with serve_app(fx.storage()) as storage_url:
        fx.storage_url = storage_url
        table = described("cloudconvert", **kw.pop("over", {}))
        if not with_receiver:
            del table["webhooks"]
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="cloudconvert",
            env=CLOUDCONVERT_ENV,
            overrides=table,
            with_receiver=with_receiver,
            **kw,
        ) as r:
            yield r


async def test_cloudconvert_a_job_finishes_and_its_export_is_kept_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(GRAPH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == PDF
        assert fx.storage_auth == [None]
        assert fx.only()["input"]["tag"] == op_id
        assert {"waiting", "processing", "finished"} <= await r.raw_states(op_id)


async def test_cloudconvert_a_failed_job_fails_with_its_conversions_error(
    pool: Any, tmp_path: Path
) -> None:
    """The export task reads INPUT_TASK_FAILED too and stands first in the list: the
    reason is the convert task's own."""
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit({**GRAPH, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        error = json.dumps((await r.op(op_id)).last_error)
        assert CC_FAILURE["message"] in error, error
        assert CC_FAILURE["code"] in error, error
        assert "INPUT_TASK_FAILED" not in error, error
        assert fx.storage_auth == []


async def test_cloudconvert_an_export_of_several_files_is_never_stored_as_its_first(
    pool: Any, tmp_path: Path
) -> None:
    """The export task names its files as objects ({"filename", "size", "url"}):
    `files/[*]/url` names every file's URL. A PDF made PNG pages exports three: a
    binary result is one file, so the result is refused, saying so, for a human.
    Before, no path could name them all (`[*]` was refused at load), and the
    description's `files/0/url` stored page 1 as the whole result, a success."""
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit({**GRAPH, "script": "pages"})
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "a binary result is one file, and the status named 3" in reason, reason
        assert (await r.op(op_id)).result_id is None


async def test_cloudconvert_a_lost_create_is_found_by_its_tag_not_sent_again(
    pool: Any, tmp_path: Path
) -> None:
    fx = CloudConvertFixture(lose_first_create=True)
    async with cloudconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(GRAPH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert {"filter[tag]": op_id}.items() <= fx.list_queries[0].items()
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert await r.result_bytes(op_id) == PDF


async def test_cloudconvert_a_slow_job_is_read_on_its_backoff(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx, clock=clock, over={"limits": REAL_BACKOFF}) as r:
        op_id = await r.submit({**GRAPH, "script": "slow"}, result_deadline_s=3600.0)
        await reads_follow_the_backoff(r, clock, op_id)


async def test_cloudconvert_a_signed_webhook_wakes_the_operation_and_a_tampered_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """job.finished, signed as CloudConvert's docs say (hex HMAC-SHA256 of the raw
    body, the signing secret the key, in `CloudConvert-Signature`), reaches the real
    receiver over a socket, verifies, and wakes the operation long before the 30 s
    backstop; a body changed after signing, or one signed with another secret, is
    refused and moves nothing."""
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**GRAPH, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        jid = fx.only()["id"]
        fx.finish(jid)
        assert await fx.deliver(r.hook_url, jid, tamper=True) == 401
        assert await fx.deliver(r.hook_url, jid, secret="another-secret") == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, jid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == PDF
        event = await r.pool.fetchrow(
            "SELECT operation_id FROM webhook_events WHERE provider = 'cloudconvert'"
        )
        assert event["operation_id"] == op_id


async def test_cloudconvert_a_signed_job_failed_event_wakes_a_read_that_fails_it(
    pool: Any, tmp_path: Path
) -> None:
    """job.failed only wakes the operation; our own read decides: failed, with the
    convert task's error."""
    fx = CloudConvertFixture()
    async with cloudconvert(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({**GRAPH, "script": "slow"})
        await r.settle(op_id, {S.ACCEPTED})
        jid = fx.only()["id"]
        fx.jobs[jid]["status"] = "error"
        assert await fx.deliver(r.hook_url, jid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.FAILED, await r.history(op_id)
        assert CC_FAILURE["message"] in json.dumps((await r.op(op_id)).last_error)
