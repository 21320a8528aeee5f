"""AWS Elemental MediaConvert's jobs, GitHub Actions' workflow_dispatch runs,
Zendesk's job statuses, Dropbox's save_url and Baseten's async inference,
described in TOML as a new user would (tests/fixtures_providers/unseen/:
mediaconvert, github_dispatch, zendesk_jobs, dropbox_save_url, baseten_async) and
driven through the real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round55b.py): success with the result collected,
failure with its reason, cancel where the API has one, a lost create answer, and
each API's own edge: MediaConvert's SigV4 REST JSON calls and its
clientRequestToken honoured one minute (create.idempotency_window_seconds: past
it, ListJobs by userMetadata, never a resend); GitHub's dispatch naming its run
only with return_run_details, its state in two fields (conclusion, then status),
its 409 to a cancel of a completed run and its X-Hub-Signature-256 workflow_run
deliveries; Zendesk's job status read inline, a refused user a failed item
counted against `total`; Dropbox's every-call POST, its status read by a body
naming the job and its save answered done at once (told by ".tag"); Baseten's
200 {"canceled": false} a refused cancel (cancel.refused_codes), its
`X-BASETEN-SIGNATURE: v1=` deliveries, and its output, delivered only to the
webhook, beyond any description (a known gap, kept as found).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.harness import TestClock
from shared.clock import SYSTEM_CLOCK, Clock
from shared.ledger.states import LocalState
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round55b import (
    BT_FAILURE,
    BT_KEY,
    BT_OUTPUT,
    BT_WEBHOOK_SECRET,
    DBX_TOKEN,
    GH_TOKEN,
    GH_WEBHOOK_SECRET,
    MC_FAILURE,
    MC_KEY_ID,
    MC_KEYS,
    ZD_BASIC,
    ZD_FAILURE,
    ZD_REFUSED,
    BasetenFixture,
    DropboxFixture,
    GitHubActionsFixture,
    MediaConvertFixture,
    ZendeskFixture,
    gh_artifacts,
    mc_outputs,
)
from tests.integration.test_unseen_round52b import until

S = LocalState


# --- MediaConvert ------------------------------------------------------------------

MC_ENV = {"AWS_ACCESS_KEY_ID": MC_KEY_ID, "AWS_SECRET_ACCESS_KEY": MC_KEYS[MC_KEY_ID]}


def transcode(script: str | None = None) -> dict[str, Any]:
    meta = {"title": "launch teaser"} | ({"script": script} if script else {})
    return {
        "role": "arn:aws:iam::123456789012:role/MediaConvert_Default_Role",
        "settings": {
            "inputs": [{"fileInput": "s3://media-in/teaser.mov"}],
            "outputGroups": [
                {
                    "outputGroupSettings": {
                        "type": "HLS_GROUP_SETTINGS",
                        "hlsGroupSettings": {"destination": "s3://media-out/"},
                    }
                }
            ],
        },
        "userMetadata": meta,
    }


def mediaconvert(pool: Any, tmp_path: Path, fx: MediaConvertFixture, **over: dict[str, Any]) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="mediaconvert",
        env=MC_ENV,
        overrides=described("mediaconvert", **over),
    )


async def test_mediaconvert_a_job_is_signed_read_and_its_outputs_kept(
    pool: Any, tmp_path: Path
) -> None:
    """Every call SigV4-signed (botocore verifies); SUBMITTED, PROGRESSING,
    COMPLETE; the job's outputGroupDetails kept as its result; our token in
    clientRequestToken, our operation id in userMetadata."""
    fx = MediaConvertFixture()
    async with mediaconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcode())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        job = fx.only()
        assert fx.refusals == []
        assert fx.tokens == [op.idempotency_token]
        assert job["body"]["userMetadata"]["jobwarden_operation"] == op_id
        assert op.remote_job_id == job["id"]
        assert {"PROGRESSING", "COMPLETE"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id)) == mc_outputs(job["id"])


async def test_mediaconvert_an_error_is_failed_with_its_message_and_code(
    pool: Any, tmp_path: Path
) -> None:
    fx = MediaConvertFixture()
    async with mediaconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcode("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == MC_FAILURE
        assert str((await r.op(op_id)).last_error["code"]) == "1010"


async def test_mediaconvert_a_cancel_is_confirmed(pool: Any, tmp_path: Path) -> None:
    fx = MediaConvertFixture()
    async with mediaconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcode("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert fx.refusals == []


async def test_mediaconvert_a_lost_create_is_resent_with_its_token_and_runs_once(
    pool: Any, tmp_path: Path
) -> None:
    """The create's answer is lost; the same create (the same clientRequestToken)
    answers the job the first made: one job, collected."""
    fx = MediaConvertFixture(lose_first_create=True)
    async with mediaconvert(pool, tmp_path, fx) as r:
        op_id = await r.submit(transcode())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and len(fx.tokens) == 2 and len(set(fx.tokens)) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_mediaconvert_a_lost_create_past_its_tokens_minute_is_looked_up_not_resent(
    pool: Any, tmp_path: Path
) -> None:
    """MediaConvert honours a clientRequestToken for a minute (here one second,
    the fake's too): the create's answer is lost and the minute has passed by
    the time a resend could arrive. The create is not sent again (it would run a
    second job); ListJobs finds ours by its userMetadata, adopted and collected.
    Before, the same token went again, and a second job ran."""
    fx = MediaConvertFixture(lose_first_create=True, token_window=1)
    async with mediaconvert(pool, tmp_path, fx, create={"idempotency_window_seconds": 1}) as r:
        op_id = await r.submit(transcode())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and len(fx.tokens) == 1, fx.tokens
        assert fx.list_reads >= 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_mediaconvert_past_the_minute_without_a_lookup_a_human_is_told_why(
    pool: Any, tmp_path: Path
) -> None:
    fx = MediaConvertFixture(lose_first_create=True, token_window=1)
    table = described("mediaconvert", create={"idempotency_window_seconds": 1})
    table.pop("lookup")
    async with preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="mediaconvert", env=MC_ENV, overrides=table
    ) as r:
        op_id = await r.submit(transcode())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and len(fx.tokens) == 1
        said = await reason(r, op_id)
        assert "honours our idempotency token only 1s after the first attempt" in said, said


# --- GitHub Actions ----------------------------------------------------------------

GH_ENV = {"GITHUB_TOKEN": GH_TOKEN, "GITHUB_WEBHOOK_SECRET": GH_WEBHOOK_SECRET}


def dispatch(script: str | None = None) -> dict[str, Any]:
    inputs = {"date": "2026-12-06"} | ({"script": script} if script else {})
    return {"ref": "main", "inputs": inputs}


@contextlib.asynccontextmanager
async def github(
    pool: Any,
    tmp_path: Path,
    fx: GitHubActionsFixture,
    *,
    with_receiver: bool = False,
    codes: bool = True,
) -> AsyncIterator[PresetRig]:
    table = described("github_dispatch")
    if not codes:
        table["create"].pop("not_created_codes")
    if not with_receiver:
        table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="github_dispatch",
        env=GH_ENV,
        overrides=table,
        with_receiver=with_receiver,
    ) as r:
        yield r


async def test_github_a_dispatched_run_is_read_and_its_artifacts_kept(
    pool: Any, tmp_path: Path
) -> None:
    """return_run_details: 200 with workflow_run_id (a number); queued,
    in_progress, then completed read at its conclusion success; the artifacts
    listed, counted against total_count."""
    fx = GitHubActionsFixture()
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (sent,) = fx.dispatches
        assert sent["return_run_details"] is True
        assert sent["inputs"]["jobwarden_operation"] == op_id
        rid = fx.only()["id"]
        assert (await r.op(op_id)).remote_job_id == str(rid)
        assert {"in_progress", "success"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["artifacts"] == gh_artifacts(rid)
        assert (await r.op(op_id)).result_summary["items_total"] == 2


async def test_github_a_rate_limited_dispatch_and_reads_are_back_pressure(
    pool: Any, tmp_path: Path
) -> None:
    """403 "API rate limit exceeded" with x-ratelimit-remaining: 0 (no
    Retry-After): the dispatch made nothing and goes again
    (create.not_created_codes on the header), and reads so answered are
    throttled ones (status.throttle_codes), never a refusal for a human."""
    fx = GitHubActionsFixture()
    fx.limited = 1
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch("slow"))
        await r.settle(op_id, {S.OBSERVING})
        assert fx.creates == 1 and fx.limited_answers == 1
        fx.limited = 3
        fx.finish(str(fx.only()["id"]))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.limited == 0 and fx.limited_answers == 4
        assert "create_unknown" not in await r.history(op_id)


async def test_github_a_dispatch_over_the_secondary_rate_limit_goes_again_after_it(
    pool: Any, tmp_path: Path
) -> None:
    """403 "You have exceeded a secondary rate limit..." with retry-after (its
    message carries a request id: no code to list): refused for now, nothing
    dispatched; the same dispatch goes after the wait, one run. Before, the
    operation ended failed, its workflow never run."""
    fx = GitHubActionsFixture()
    fx.secondary = 1
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.limited_answers == 1 and fx.creates == 1 and len(fx.dispatches) == 1
        assert "failed" not in await r.history(op_id)


async def test_github_secondary_limit_without_not_created_codes_is_no_doubt(
    pool: Any, tmp_path: Path
) -> None:
    """A description naming no not_created_codes: the 403 + retry-after made
    nothing all the same; the next tick must not read it as an attempt without a
    definitive answer (create_unknown, a human for a create that cannot be
    looked up). Before, it did."""
    fx = GitHubActionsFixture()
    fx.secondary = 1
    async with github(pool, tmp_path, fx, codes=False) as r:
        op_id = await r.submit(dispatch())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.limited_answers == 1 and len(fx.dispatches) == 1
        assert "create_unknown" not in await r.history(op_id)


async def test_github_a_failed_run_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = GitHubActionsFixture()
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failure" in await r.raw_states(op_id)
        assert fx.artifact_reads == 0


async def test_github_a_cancel_is_confirmed_by_the_conclusion(pool: Any, tmp_path: Path) -> None:
    fx = GitHubActionsFixture()
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.cancels == [(str(fx.only()["id"]), "in_progress")]


async def test_github_a_cancel_of_a_completed_run_is_refused_and_its_artifacts_kept(
    pool: Any, tmp_path: Path
) -> None:
    """409 "Cannot cancel a workflow run that is completed.": the run succeeded,
    collected, no cancel claimed."""
    fx = GitHubActionsFixture()
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(str(fx.only()["id"]))
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)


async def test_github_a_lost_dispatch_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    """No idempotency, no lookup: a dispatch whose answer was lost is never sent
    again (a second run of the workflow)."""
    fx = GitHubActionsFixture(lose_first_create=True)
    async with github(pool, tmp_path, fx) as r:
        op_id = await r.submit(dispatch())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_github_the_signed_workflow_run_webhook_wakes_the_run(
    pool: Any, tmp_path: Path
) -> None:
    fx = GitHubActionsFixture()
    async with github(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(dispatch("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = str(fx.only()["id"])
        fx.finish(rid)
        assert await fx.deliver(r.hook_url, rid, secret="another") == 401
        assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch(
            "SELECT operation_id, remote_job_id FROM webhook_events"
            " WHERE provider = 'github_dispatch'"
        )
        assert [tuple(e) for e in events] == [(op_id, rid)]


# --- Zendesk -----------------------------------------------------------------------

ZD_ENV = {"ZENDESK_BASIC": ZD_BASIC}


def users(first: str = "Roger", *, taken: bool = False) -> dict[str, Any]:
    made = [
        {"name": first, "email": "roger@acme.com"},
        {"name": "Woody", "email": "woody@acme.com"},
    ]
    if taken:
        made.append({"name": "Taken", "email": "taken@acme.com"})
    return {"users": made}


def zendesk(pool: Any, tmp_path: Path, fx: ZendeskFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="zendesk_jobs",
        env=ZD_ENV,
        overrides=described("zendesk_jobs"),
    )


async def test_zendesk_a_job_status_is_read_to_completed_and_its_results_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = ZendeskFixture()
    async with zendesk(pool, tmp_path, fx) as r:
        op_id = await r.submit(users())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert {"working", "completed"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert [u["status"] for u in kept["results"]] == ["Created", "Created"]
        summary = (await r.op(op_id)).result_summary
        assert summary["items_total"] == 2, summary


async def test_zendesk_a_user_refused_is_kept_as_a_failed_item_naming_it(
    pool: Any, tmp_path: Path
) -> None:
    """Three users, one refused ({"index": 2, "error": "UserCreateFailed",
    "details"}): the job completed, its results counted against `total` (all
    three, the refused one too) and the refused user recorded as a failed item
    with its error's code and details (result.item_code, item_message). Before,
    the count was held to the two made ("expected 3 items, got 2",
    result_validation_failed), an inline result's failed items were never
    recorded at all, and no key read the details beside the error's name."""
    fx = ZendeskFixture()
    async with zendesk(pool, tmp_path, fx) as r:
        op_id = await r.submit(users(taken=True))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        op = await r.op(op_id)
        summary = op.result_summary
        assert (summary["items_total"], summary["items_failed"]) == (3, 1), summary
        assert summary["failed_items_recorded"] == 1, summary
        failed = await r.pool.fetch(
            "SELECT item_key, code, message FROM result_item_failures WHERE result_id = $1",
            op.result_id,
        )
        assert [tuple(f) for f in failed] == [("2", "UserCreateFailed", ZD_REFUSED)]


async def test_zendesk_a_failed_job_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = ZendeskFixture()
    async with zendesk(pool, tmp_path, fx) as r:
        op_id = await r.submit(users("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == ZD_FAILURE


async def test_zendesk_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = ZendeskFixture(lose_first_create=True)
    async with zendesk(pool, tmp_path, fx) as r:
        op_id = await r.submit(users())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Dropbox -----------------------------------------------------------------------

DBX_ENV = {"DROPBOX_ACCESS_TOKEN": DBX_TOKEN}


def save(path: str = "/Inbox/report.pdf") -> dict[str, Any]:
    return {"path": path, "url": "https://files.example.com/report.pdf"}


def dropbox(pool: Any, tmp_path: Path, fx: DropboxFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="dropbox_save_url",
        env=DBX_ENV,
        overrides=described("dropbox_save_url"),
    )


async def test_dropbox_a_save_is_checked_by_posting_its_job_id(pool: Any, tmp_path: Path) -> None:
    fx = DropboxFixture()
    async with dropbox(pool, tmp_path, fx) as r:
        op_id = await r.submit(save())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"in_progress", "complete"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["path_display"] == "/Inbox/report.pdf"


async def test_dropbox_a_failed_download_is_failed_with_its_tag(pool: Any, tmp_path: Path) -> None:
    fx = DropboxFixture()
    async with dropbox(pool, tmp_path, fx) as r:
        op_id = await r.submit(save("/Inbox/fail.pdf"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert (await r.op(op_id)).last_error["code"] == "download_failed"


async def test_dropbox_a_save_complete_at_once_is_a_success(pool: Any, tmp_path: Path) -> None:
    """save_url may answer {".tag": "complete", ...metadata} at once, no job id."""
    fx = DropboxFixture()
    async with dropbox(pool, tmp_path, fx) as r:
        op_id = await r.submit(save("/Inbox/now.pdf"))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert json.loads(await r.result_bytes(op_id))["path_display"] == "/Inbox/now.pdf"


async def test_dropbox_a_lost_save_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = DropboxFixture(lose_first_create=True)
    async with dropbox(pool, tmp_path, fx) as r:
        op_id = await r.submit(save())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Baseten -----------------------------------------------------------------------

BT_ENV = {"BASETEN_API_KEY": BT_KEY, "BASETEN_WEBHOOK_SECRET": BT_WEBHOOK_SECRET}


def predict(script: str | None = None) -> dict[str, Any]:
    model_input = {"prompt": "Describe the image"} | ({"script": script} if script else {})
    return {"model_input": model_input}


def baseten(
    pool: Any,
    tmp_path: Path,
    fx: BasetenFixture,
    *,
    with_receiver: bool = True,
    clock: Clock = SYSTEM_CLOCK,
    **over: dict[str, Any],
) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="baseten_async",
        env=BT_ENV,
        overrides=described("baseten_async", **over),
        with_receiver=with_receiver,
        clock=clock,
    )


async def test_baseten_a_request_succeeds_and_its_webhook_is_stored(
    pool: Any, tmp_path: Path
) -> None:
    """The create asks for our webhook (webhook_endpoint); a delivery signed with
    another secret is refused; the signed one (`X-BASETEN-SIGNATURE: v1=<hex>`) is
    stored, matched by request_id, and wakes the read: SUCCEEDED, the model's
    output kept from the delivery's `data` (result.source = webhook). Before,
    Baseten's output (no read holds it) could not be described: the operation
    succeeded without it, the output only in the stored event."""
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        assert fx.webhooks == [r.hook_url]
        fx.jobs[rid]["state"] = "SUCCEEDED"
        assert await fx.deliver(r.hook_url, rid, secret="another") == 401
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == BT_OUTPUT


async def test_baseten_a_success_read_before_its_delivery_waits_for_it(
    pool: Any, tmp_path: Path
) -> None:
    """Our read says SUCCEEDED before the output's delivery came: the collection
    waits (read again at the backoff), and the delivery, when it comes, is the
    result."""
    fx = BasetenFixture()
    limits = {"webhook_backstop_poll_seconds": 0.2, "result_retry_seconds": 60}
    async with baseten(pool, tmp_path, fx, limits=limits) as r:
        op_id = await r.submit(predict())
        await r.settle(op_id, {S.RESULT_COLLECTING})
        rid = fx.only()["id"]
        assert fx.jobs[rid]["state"] == "SUCCEEDED"
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == BT_OUTPUT


async def test_baseten_an_output_behind_many_later_deliveries_is_still_found(
    pool: Any, tmp_path: Path
) -> None:
    """The output's delivery, then 25 later ones holding none (progress events, as
    another provider sends): the output is still the result. Before, only the 20
    newest deliveries were read, and the operation ended result_unavailable."""
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        assert await fx.deliver(r.hook_url, rid) == 200  # stored and attached on commit
        for n in range(25):
            event_id = await pool.fetchval(
                "INSERT INTO webhook_events (provider, event_id, signature_scheme, id_signed,"
                " remote_job_id, payload, operation_id, attached_at, received_at)"
                " SELECT 'baseten_async', $1, 'hmac', true, $2, $3::jsonb, $4, now(),"
                " max(received_at) + make_interval(secs => $5)"
                " FROM webhook_events WHERE operation_id = $4 RETURNING webhook_event_id",
                f"progress-{n}",
                rid,
                json.dumps({"request_id": rid, "status": "IN_PROGRESS"}),
                op_id,
                n + 1,
            )
            await pool.execute(
                "INSERT INTO observations (operation_id, source, webhook_event_id)"
                " VALUES ($1, 'webhook', $2)",
                op_id,
                event_id,
            )
        fx.jobs[rid]["state"] = "SUCCEEDED"
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == BT_OUTPUT


async def test_baseten_an_output_whose_link_was_stored_redacted_is_no_success(
    pool: Any, tmp_path: Path
) -> None:
    """An output holding a pre-signed link: the receiver stores the delivery with
    its credential-looking query values redacted, so the output as sent is kept
    nowhere. Never a success with a broken link: result_unavailable saying so.
    Before, the redacted copy was kept as the result, SUCCEEDED."""
    fx = BasetenFixture()
    link = "https://out.s3.amazonaws.com/cat.png?X-Amz-Expires=600&X-Amz-Signature=0a1b2c3d"
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.jobs[rid]["state"] = "SUCCEEDED"
        assert await fx.deliver(r.hook_url, rid, output={"image": link}) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.RESULT_UNAVAILABLE, await r.history(
            op_id
        )
        assert "redacted" in await reason(r, op_id)


async def test_baseten_a_delivery_for_another_job_is_never_this_ones_result(
    pool: Any, tmp_path: Path
) -> None:
    """A delivery attached while the operation had no job id yet (matched by our
    operation reference, as a description reading one matches it) names another
    job than the one recorded since: its output is that job's, never this one's
    (waited for, then result_unavailable). Before, it was this job's result."""
    fx = BasetenFixture()
    limits = {"webhook_backstop_poll_seconds": 0.2, "result_retry_seconds": 1}
    async with baseten(pool, tmp_path, fx, limits=limits) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        other = {"request_id": "b1a5e7e0-0000-4000-8000-999999999999", "data": {"x": 1}}
        event_id = await pool.fetchval(
            "INSERT INTO webhook_events (provider, event_id, signature_scheme, id_signed,"
            " remote_job_id, operation_ref, payload, operation_id, attached_at)"
            " VALUES ('baseten_async', 'early-other', 'hmac', false, $1, $2, $3::jsonb, $2,"
            " now()) RETURNING webhook_event_id",
            other["request_id"],
            op_id,
            json.dumps(other),
        )
        await pool.execute(
            "INSERT INTO observations (operation_id, source, webhook_event_id)"
            " VALUES ($1, 'webhook', $2)",
            op_id,
            event_id,
        )
        fx.jobs[rid]["state"] = "SUCCEEDED"
        assert await r.settle(op_id, ENDS, timeout=8) is S.RESULT_UNAVAILABLE, await r.history(
            op_id
        )


async def test_baseten_a_success_whose_delivery_never_came_is_result_unavailable(
    pool: Any, tmp_path: Path
) -> None:
    """No delivery holding the output by the end of the collection's retries: the
    result is unavailable, saying where it was looked for; never a success
    without it."""
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx, limits={"webhook_backstop_poll_seconds": 0.2}) as r:
        op_id = await r.submit(predict())
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        said = await reason(r, op_id)
        assert "none attached to this operation holds it at result.inline = /data" in said, said


async def test_baseten_a_failed_request_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        rid = fx.only()["id"]
        fx.jobs[rid]["state"] = "FAILED"
        assert await fx.deliver(r.hook_url, rid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == BT_FAILURE


async def test_baseten_a_queued_request_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        fx.only()["state"] = "QUEUED"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)


async def test_baseten_a_running_request_refuses_the_cancel_and_ends(
    pool: Any, tmp_path: Path
) -> None:
    """DELETE on a request IN_PROGRESS answers 200 {"canceled": false, "message":
    "Only QUEUED requests may be canceled..."} (cancel.refused_codes): a refused
    cancel, told to a human at once (cancellation_unconfirmed, naming it; the
    request still read, slowly, its end recorded as it is), never "cancelling"
    until the cancel deadline. Before, the 200 was a cancel taken: the operation
    sat in cancelling while the request ran on, the refusal unsaid."""
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx, with_receiver=False) as r:
        op_id = await r.submit(predict("slow"))
        await r.settle(op_id, {S.OBSERVING})
        job = fx.only()
        job["state"] = "IN_PROGRESS"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        assert fx.cancels == [(job["id"], "IN_PROGRESS")]
        assert "cancelling" not in await r.history(op_id)
        esc = await r.escalation(op_id)
        assert "HTTP 200 (/canceled = false)" in esc["reason"], esc["reason"]


async def test_baseten_a_refused_cancel_whose_deadline_passed_first_is_told_in_its_words(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The refusal above is told on the round after the cancel; a cancel deadline
    passed by then (a short one, or a crash between the two rounds) ends
    unconfirmed at the deadline, naming the refusal all the same. Before, its
    reason was "its answer is on record: an error, back-pressure or none", the
    provider's own words lost (found by the fault sweep's cancel_refused)."""
    fx = BasetenFixture()
    async with baseten(pool, tmp_path, fx, with_receiver=False, clock=clock) as r:
        op_id = await r.submit(predict("slow"))
        await until(r, clock, lambda: fx.reads > 0)
        job = fx.only()
        job["state"] = "IN_PROGRESS"
        await r.cancel(op_id, cancel_deadline_s=5)
        await until(r, clock, lambda: len(fx.cancels) == 1)
        assert await r.state(op_id) is S.CANCEL_REQUESTED, await r.history(op_id)
        await clock.advance(10)  # past the cancel deadline before the next round
        await r.reconciler.run_once()
        assert await r.state(op_id) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        esc = await r.escalation(op_id)
    assert esc["reason"].startswith(
        "cancel deadline passed and our cancel request was not accepted: the provider "
        "refused the cancel request: HTTP 200 (/canceled = false"
    ), esc["reason"]
    assert fx.cancels == [(job["id"], "IN_PROGRESS")]


async def test_baseten_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = BasetenFixture(lose_first_create=True)
    async with baseten(pool, tmp_path, fx) as r:
        op_id = await r.submit(predict())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
