"""Adobe Firefly's async image generation, Vercel deployments, Leonardo.ai generations
and Marketo's bulk lead extract, described in TOML as a new user would
(tests/fixtures_providers/unseen/: adobe_firefly, vercel_deployments, leonardo,
marketo_leads) and driven through the real reconciler (and receiver) against fakes
on loopback (tests/fixtures_providers/unseen_round57d.py): success with the result
collected, failure with its reason, cancel, a lost create answer, and each API's own
edge: Firefly's two credential headers, its job read at the answer's statusUrl and
its variations (one binary result holds one image); Vercel's deployment meta, its
list naming ids `uid`, and its webhooks signed with a hex HMAC-SHA1 of the body;
Leonardo's DELETE that removes a generation, read back as a 200 holding null, and its
bearer-token callback; Marketo's two-step create (create, then enqueue), which no
key describes, its errors in 200 answers (a throttle, or an expired token for a
human) and its `sha256:` file checksum.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round55b import DBX_TOKEN, DropboxFixture
from tests.fixtures_providers.unseen_round57d import (
    FF_CLIENT_ID,
    FF_ERROR,
    FF_FAILURE,
    FF_TOKEN,
    LEO_HOOK_TOKEN,
    LEO_KEY,
    MK_CSV,
    MK_EXPIRED,
    MK_FAILURE,
    MK_QUOTA,
    MK_TOKEN,
    VC_ERROR,
    VC_FAILURE,
    VC_TOKEN,
    VC_WEBHOOK_SECRET,
    FireflyFixture,
    LeonardoFixture,
    MarketoFixture,
    VercelFixture,
    _image,
    vercel_signature,
)

S = LocalState


# --- Adobe Firefly -----------------------------------------------------------------

FF_ENV = {"FIREFLY_ACCESS_TOKEN": FF_TOKEN, "FIREFLY_CLIENT_ID": FF_CLIENT_ID}


def generation(variations: int = 1) -> dict[str, Any]:
    return {
        "prompt": "a lighthouse at dusk, watercolor",
        "numVariations": variations,
        "size": {"width": 2048, "height": 2048},
        "contentClass": "art",
    }


def firefly(pool: Any, tmp_path: Path, fx: FireflyFixture) -> Any:
    table = described("adobe_firefly")
    # the fake serves statusUrl on the base URL's own origin
    table["auth"] = {k: v for k, v in table["auth"].items() if k != "extra_hosts"}
    return preset_rig(
        pool, tmp_path, fx.app(), preset=None, name="adobe_firefly", env=FF_ENV, overrides=table
    )


async def test_firefly_an_image_is_read_at_its_status_url_and_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = FireflyFixture()
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert fx.refused == 0  # both credential headers on every call
        op = await r.op(op_id)
        assert op.remote_job_id == job["id"]
        assert {"running", "succeeded"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == _image(job["images"][0])


async def test_firefly_a_failed_job_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = FireflyFixture()
    fx.script = "fail"
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == FF_FAILURE
        assert (await r.op(op_id)).last_error["code"] == FF_ERROR


async def test_firefly_a_cancel_is_put_to_the_jobs_cancel_url(pool: Any, tmp_path: Path) -> None:
    fx = FireflyFixture()
    fx.script = "slow"
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert "canceled" in await r.raw_states(op_id)


async def test_firefly_a_cancel_of_a_finished_job_is_refused_and_its_image_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = FireflyFixture()
    fx.script = "slow"
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert await r.result_bytes(op_id) == _image(fx.only()["images"][0])


async def test_firefly_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = FireflyFixture(lose_first_create=True)
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_firefly_variations_are_never_stored_as_the_first_image(
    pool: Any, tmp_path: Path
) -> None:
    """numVariations = 2: the status names two images; a binary result is one file,
    so the result is refused for a human, saying so, never stored as the first."""
    fx = FireflyFixture()
    async with firefly(pool, tmp_path, fx) as r:
        op_id = await r.submit(generation(variations=2))
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "a binary result is one file, and the status named 2" in said, said
        assert (await r.op(op_id)).result_id is None


# --- Vercel ------------------------------------------------------------------------

VC_ENV = {"VERCEL_TOKEN": VC_TOKEN, "VERCEL_WEBHOOK_SECRET": VC_WEBHOOK_SECRET}


def deployment() -> dict[str, Any]:
    return {
        "name": "acme-web",
        "target": "production",
        "gitSource": {"type": "github", "repoId": "123456789", "ref": "main"},
        "meta": {"team": "web"},
    }


@contextlib.asynccontextmanager
async def vercel(
    pool: Any, tmp_path: Path, fx: VercelFixture, *, with_receiver: bool = False
) -> AsyncIterator[PresetRig]:
    table = described("vercel_deployments")
    if not with_receiver:
        table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="vercel_deployments",
        env=VC_ENV,
        overrides=table,
        with_receiver=with_receiver,
    ) as r:
        yield r


async def test_vercel_a_deployment_is_read_to_ready_and_kept(pool: Any, tmp_path: Path) -> None:
    fx = VercelFixture()
    async with vercel(pool, tmp_path, fx) as r:
        op_id = await r.submit(deployment())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["body"]["meta"] == {"team": "web", "jobwarden_operation": op_id}
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert {"BUILDING", "READY"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["url"].endswith("-acme.vercel.app") and kept["readyState"] == "READY"


async def test_vercel_a_failed_build_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = VercelFixture()
    fx.script = "fail"
    async with vercel(pool, tmp_path, fx) as r:
        op_id = await r.submit(deployment())
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == VC_FAILURE
        assert (await r.op(op_id)).last_error["code"] == VC_ERROR


async def test_vercel_a_cancel_is_confirmed(pool: Any, tmp_path: Path) -> None:
    fx = VercelFixture()
    fx.script = "slow"
    async with vercel(pool, tmp_path, fx) as r:
        op_id = await r.submit(deployment())
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_vercel_a_cancel_of_a_ready_deployment_is_refused_and_it_is_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = VercelFixture()
    fx.script = "slow"
    async with vercel(pool, tmp_path, fx) as r:
        op_id = await r.submit(deployment())
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)


async def test_vercel_a_lost_create_is_found_by_its_meta_under_uid(
    pool: Any, tmp_path: Path
) -> None:
    """The list filters by meta (`meta-jobwarden_operation=<op>`) and names each
    deployment's id `uid`, not `id`: found, adopted, never deployed twice."""
    fx = VercelFixture(lose_first_create=True)
    async with vercel(pool, tmp_path, fx) as r:
        op_id = await r.submit(deployment())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.list_queries and f"meta-jobwarden_operation={op_id}" in fx.list_queries[0]
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_vercel_a_signed_webhook_wakes_the_deployment_and_forgeries_are_refused(
    pool: Any, tmp_path: Path
) -> None:
    """x-vercel-signature, computed here as Vercel's docs do (hex HMAC-SHA1 of the
    raw body): verified; another secret, a changed body, no header, or the SHA-256
    of it are refused, and only the authentic event is stored."""
    fx = VercelFixture()
    fx.script = "slow"
    async with vercel(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(deployment())
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        did = fx.only()["id"]
        fx.finish(did)
        body = fx.event(did, "deployment.succeeded")
        good = vercel_signature(VC_WEBHOOK_SECRET, body)
        assert len(good) == 40
        assert await fx.post(r.hook_url, body, vercel_signature("another", body)) == 401
        assert await fx.post(r.hook_url, body.replace(b"iad1", b"sfo1"), good) == 401
        assert await fx.post(r.hook_url, body, None) == 400
        sha256 = hmac.new(VC_WEBHOOK_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert await fx.post(r.hook_url, body, sha256) == 401
        assert await fx.post(r.hook_url, body, good) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, did)]


async def test_vercel_an_account_webhook_for_another_deployment_moves_nothing(
    pool: Any, tmp_path: Path
) -> None:
    """Vercel's webhooks are the account's: every project's deployments are sent.
    One made elsewhere is stored unattached, our running deployment left as read;
    ours failing, signed, wakes its read, which finds it ERROR."""
    fx = VercelFixture()
    fx.script = "slow"
    async with vercel(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(deployment())
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        other = fx.event("dpl_0therProject1", "deployment.succeeded")
        assert await fx.post(r.hook_url, other, vercel_signature(VC_WEBHOOK_SECRET, other)) == 200
        did = fx.only()["id"]
        fx.only()["state"] = "ERROR"
        mine = fx.event(did, "deployment.error")
        assert await fx.post(r.hook_url, mine, vercel_signature(VC_WEBHOOK_SECRET, mine)) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == VC_FAILURE
        rows = await r.pool.fetch(
            "SELECT operation_id, remote_job_id FROM webhook_events ORDER BY webhook_event_id"
        )
        assert [tuple(e) for e in rows] == [(None, "dpl_0therProject1"), (op_id, did)]


# --- Leonardo.ai -------------------------------------------------------------------

LEO_ENV = {
    "LEONARDO_API_KEY": LEO_KEY,
    "LEONARDO_WEBHOOK_AUTHORIZATION": f"Bearer {LEO_HOOK_TOKEN}",
}


def images(count: int = 1) -> dict[str, Any]:
    return {
        "prompt": "an isometric castle in the clouds",
        "modelId": "6b645e3a-d64f-4341-a6d8-7a3690fbf042",
        "num_images": count,
        "width": 1024,
        "height": 1024,
    }


@contextlib.asynccontextmanager
async def leonardo(
    pool: Any, tmp_path: Path, fx: LeonardoFixture, *, with_receiver: bool = False
) -> AsyncIterator[PresetRig]:
    table = described("leonardo")
    if not with_receiver:
        table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="leonardo",
        env=LEO_ENV,
        overrides=table,
        with_receiver=with_receiver,
    ) as r:
        yield r


async def test_leonardo_a_generation_is_read_and_its_image_kept(pool: Any, tmp_path: Path) -> None:
    fx = LeonardoFixture()
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]
        assert {"PENDING", "COMPLETE"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == _image("Leonardo_0.jpg")


async def test_leonardo_a_failed_generation_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = LeonardoFixture()
    fx.script = "fail"
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "FAILED" in await reason(r, op_id)


async def test_leonardo_a_deleted_generation_reads_null_and_is_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """No cancel: DELETE removes the generation (cancel.deletes_job), and a read of
    it after answers 200 {"generations_by_pk": null}, not a 404."""
    fx = LeonardoFixture()
    fx.script = "slow"
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        await r.settle(op_id, {S.OBSERVING})
        gid = fx.only()["id"]
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert fx.deleted == [gid]


async def test_leonardo_a_cancel_of_a_finished_generation_deletes_nothing(
    pool: Any, tmp_path: Path
) -> None:
    """DELETE would remove a finished generation's images too: read first
    (deletes_job turns read_first on), it is complete, no DELETE is sent, its image
    is collected."""
    fx = LeonardoFixture()
    fx.script = "slow"
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.deleted == [] and fx.cancels == []
        assert await r.result_bytes(op_id) == _image("Leonardo_0.jpg")


async def test_leonardo_a_generation_deleted_elsewhere_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """Deleted in Leonardo's app, not by us: its reads answer 200 null, "job not
    found" (status.not_found_codes), and a human is told it does not exist; no
    cancel is claimed."""
    fx = LeonardoFixture()
    fx.script = "slow"
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert await reason(r, op_id) == "HTTP 200, /generations_by_pk = null: job not found"
        said = (await r.escalation(op_id))["reason"]
        assert "does not exist" in said, said
        assert "cancelled" not in await r.history(op_id)


async def test_a_job_gone_by_a_4xx_code_goes_to_a_human_too(pool: Any, tmp_path: Path) -> None:
    """The same count for a code in a refused read: Dropbox's check_job_status
    answers 409 invalid_async_job_id for a job id expired (status.not_found_codes).
    Before, misses were counted by HTTP status alone (404, 410): such reads never
    added up, and the save was read again until its deadline."""
    fx = DropboxFixture()
    table = described(
        "dropbox_save_url", status={"not_found_codes": {"/error/.tag": ["invalid_async_job_id"]}}
    )
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="dropbox_save_url",
        env={"DROPBOX_ACCESS_TOKEN": DBX_TOKEN},
        overrides=table,
    ) as r:
        op_id = await r.submit({"path": "/Inbox/slow.pdf", "url": "https://files.example/a.pdf"})
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "does not exist" in said, said


async def test_leonardo_a_create_refused_is_failed_in_hasuras_words(
    pool: Any, tmp_path: Path
) -> None:
    """A refused create answers Hasura's {"error", "path", "code"}: failed, with
    that code and message (create.error_code, error_message), nothing made."""
    fx = LeonardoFixture()
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit({**images(), "prompt": ""})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert fx.jobs == {}
        op = await r.op(op_id)
        assert op.last_error["code"] == "validation-failed", op.last_error
        assert op.last_error["message"] == "prompt is required", op.last_error


async def test_leonardo_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = LeonardoFixture(lose_first_create=True)
    async with leonardo(pool, tmp_path, fx) as r:
        op_id = await r.submit(images())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


async def test_leonardo_the_bearer_callback_wakes_the_generation(pool: Any, tmp_path: Path) -> None:
    fx = LeonardoFixture()
    fx.script = "slow"
    async with leonardo(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit(images())
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        gid = fx.only()["id"]
        fx.finish(gid)
        assert await fx.deliver(r.hook_url, r.url, gid, token="guessed") == 401
        assert await fx.deliver(r.hook_url, r.url, gid) == 200
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, gid)]


# --- Marketo bulk lead extract -----------------------------------------------------

MK_ENV = {"MARKETO_ACCESS_TOKEN": MK_TOKEN}


def extract() -> dict[str, Any]:
    return {
        "fields": ["id", "firstName", "lastName", "email"],
        "format": "CSV",
        "filter": {
            "createdAt": {"startAt": "2026-11-01T00:00:00Z", "endAt": "2026-11-30T00:00:00Z"}
        },
    }


def marketo(pool: Any, tmp_path: Path, fx: MarketoFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="marketo_leads",
        env=MK_ENV,
        overrides=described("marketo_leads"),
    )


async def test_marketo_an_export_never_enqueued_goes_to_a_human_at_its_deadline(
    pool: Any, tmp_path: Path
) -> None:
    """The create makes an export that runs only once enqueue.json is called, a
    second call no key describes: it reads "Created" on every read. It is never
    shown as running or done; at its deadline it goes to a human, the reason
    naming what the export still shows."""
    fx = MarketoFixture()
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract(), result_deadline_s=2.0)
        assert await r.settle(op_id, ENDS) is S.RESULT_TIMED_OUT, await r.history(op_id)
        assert await r.raw_states(op_id) - {None} == {"Created"}
        assert "running" not in await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "'Created'" in said, said
        assert fx.files == 0


async def test_marketo_an_export_enqueued_by_hand_is_collected_by_its_checksum(
    pool: Any, tmp_path: Path
) -> None:
    """Once enqueued (by whoever was told), the export is read to Completed and its
    CSV kept, checked against fileChecksum, "sha256:<hex>" as Marketo writes it."""
    fx = MarketoFixture()
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.enqueue(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == MK_CSV
        assert (await r.op(op_id)).result_summary["items_total"] == 3


async def test_marketo_a_file_unlike_its_checksum_is_refused(pool: Any, tmp_path: Path) -> None:
    fx = MarketoFixture()
    fx.checksum = "sha256:" + "0" * 64
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.enqueue(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "mismatch" in said, said


async def test_marketo_a_failed_export_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = MarketoFixture()
    fx.script = "fail"
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.enqueue(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == MK_FAILURE


async def test_marketo_a_cancel_is_confirmed(pool: Any, tmp_path: Path) -> None:
    fx = MarketoFixture()
    fx.script = "slow"
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.enqueue(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_marketo_a_cancel_refused_in_a_200_is_a_refusal_and_the_file_kept(
    pool: Any, tmp_path: Path
) -> None:
    """A cancel of an export that completed is answered 200 {"success": false,
    "errors": [...]} (cancel.refused_codes: "/success" = ["false"]): not taken, no
    cancel claimed; the export read Completed is collected."""
    fx = MarketoFixture()
    fx.script = "slow"
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "Completed"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert [c[1] for c in fx.cancels] == ["Completed"]
        assert "cancelled" not in await r.history(op_id)
        assert await r.result_bytes(op_id) == MK_CSV


async def test_marketo_rate_limits_in_200_answers_are_waited_out(pool: Any, tmp_path: Path) -> None:
    """606 comes as a 200 {"success": false, "errors": [...]}: a create refused so
    (create.not_created_codes) is sent again, one export made; reads refused so are
    read again, never taken for a job without a state."""
    fx = MarketoFixture()
    fx.throttle_creates = 2
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        assert fx.creates == 1 and fx.throttled_creates == 2
        fx.throttle_reads = 12
        fx.enqueue(fx.only()["id"])
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.throttled_reads == 12
        assert await r.result_bytes(op_id) == MK_CSV


async def test_marketo_an_expired_token_in_200_answers_goes_to_a_human_saying_so(
    pool: Any, tmp_path: Path
) -> None:
    """Marketo's access tokens last an hour, and an expired one is answered 200
    {"success": false, "errors": [{"code": "602", ...}]}. The description names its
    throttles (status.throttle_codes: 606, 615), so another error in a 200 is no
    throttle: the reads count toward a human, told what Marketo said. Before, every
    200 carrying `errors` was taken for a throttle and read again, uncounted, until
    the result deadline (a day by default), the job said to be running."""
    fx = MarketoFixture()
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        await r.settle(op_id, {S.OBSERVING})
        fx.expired = True
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert MK_EXPIRED["message"] in said and "602" in said, said
        assert "the provider credential" in said, said


async def test_marketo_a_create_refused_for_the_daily_quota_goes_to_a_human_saying_so(
    pool: Any, tmp_path: Path
) -> None:
    """1029 "Export daily quota exceeded" comes as a 200 without an export: no job
    id, an error beside it. Not listed as "nothing created", it is an ambiguous
    create (no idempotency, no lookup): a human, told Marketo's words; never sent
    again."""
    fx = MarketoFixture()
    fx.quota_spent = True
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and fx.jobs == {}
        said = await reason(r, op_id)
        assert MK_QUOTA["message"] in said, said


async def test_marketo_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = MarketoFixture(lose_first_create=True)
    async with marketo(pool, tmp_path, fx) as r:
        op_id = await r.submit(extract())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
