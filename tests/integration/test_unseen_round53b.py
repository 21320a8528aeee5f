"""Mailchimp's batch operations, HubSpot's CRM imports, Salesforce's Bulk API 2.0
ingest, Mistral's batch jobs and Zamzar's conversions, described in TOML as a new
user would (tests/fixtures_providers/unseen/mailchimp_batches.toml,
hubspot_imports.toml, salesforce_ingest.toml, mistral_batch.toml, zamzar.toml) and
driven through the real reconciler against fakes on loopback
(tests/fixtures_providers/unseen_round53b.py): success with the result collected and
validated, failure with its reason, cancel (confirmed, or refused as the API
documents), a lost create answer, and each API's own edge: Mailchimp's .tar.gz
archive, HubSpot's DONE with errors paged by `after`, Salesforce's one-request
multipart create and its CSV results paged by Sforce-Locator, Mistral's
TIMEOUT_EXCEEDED with partial output, Zamzar's 307 to storage without our key.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_round53b import (
    HUBSPOT_ROWS,
    HUBSPOT_TOKEN,
    MAILCHIMP_BASIC,
    MISTRAL_FAILURE,
    MISTRAL_KEY,
    MISTRAL_REQUEST_ERROR,
    PNG,
    SALESFORCE_FAILURE,
    SALESFORCE_TOKEN,
    SF_CSV,
    SF_RECORD_ERROR,
    ZAMZAR_BASIC,
    ZAMZAR_FAILURE,
    HubSpotFixture,
    MailchimpFixture,
    MistralFixture,
    SalesforceFixture,
    ZamzarFixture,
    mistral_lines,
)

S = LocalState


def rig(pool: Any, tmp_path: Path, app: Any, name: str, env: dict[str, str], **kwargs: Any) -> Any:
    """Provider `name` as described in unseen/<name>.toml, served by `app`, without
    its webhooks (no receiver here: the status is polled)."""
    table = described(name, **kwargs)
    table.pop("webhooks", None)
    return preset_rig(pool, tmp_path, app, preset=None, name=name, env=env, overrides=table)


def file_part(data: bytes, filename: str, content_type: str) -> dict[str, str]:
    return {
        "content_base64": base64.b64encode(data).decode(),
        "filename": filename,
        "content_type": content_type,
    }


@contextlib.asynccontextmanager
async def with_storage(
    pool: Any, tmp_path: Path, fx: Any, name: str, env: dict[str, str]
) -> AsyncIterator[Any]:
    """The rig, with the provider's object store (S3's signed links) on `localhost`
    beside it, another server the operator allows in result.allowed_hosts."""
    async with serve_app(fx.storage()) as storage_url:
        fx.url = storage_url.replace("127.0.0.1", "localhost")
        allowed = {"allowed_hosts": ["localhost"]}
        async with rig(pool, tmp_path, fx.app(), name, env, result=allowed) as r:
            yield r


# --- Mailchimp ---------------------------------------------------------------------

HOOK_TOKEN = "mc-hook-7f3a9c2e5b1d4e6f8a0b2c4d"
MAILCHIMP_ENV = {
    "MAILCHIMP_BASIC_CREDENTIALS": MAILCHIMP_BASIC,
    "MAILCHIMP_WEBHOOK_TOKEN": HOOK_TOKEN,
}
OPERATIONS = {
    "operations": [
        {
            "method": "POST",
            "path": "/lists/9e67587f52/members",
            "operation_id": f"op-{n}",
            "body": json.dumps({"email_address": f"m{n}@example.com", "status": "subscribed"}),
        }
        for n in range(3)
    ]
}


def mailchimp(pool: Any, tmp_path: Path, fx: MailchimpFixture) -> Any:
    return with_storage(pool, tmp_path, fx, "mailchimp_batches", MAILCHIMP_ENV)


def archive_answers(data: bytes) -> list[dict[str, Any]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        (member,) = tar.getmembers()
        extracted = tar.extractfile(member)
        assert extracted is not None
        return list(json.loads(extracted.read()))


async def test_mailchimp_a_finished_batch_keeps_its_archive_unread(
    pool: Any, tmp_path: Path
) -> None:
    """pending, preprocessing, started, finalizing, finished: the .tar.gz at
    response_body_url (S3, another server) is fetched without our key and kept
    byte for byte (format = binary: size and type are all that is checked; the
    archive's JSON files are not read, so item counts come from the status)."""
    fx = MailchimpFixture()
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit(OPERATIONS)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert {"preprocessing", "started", "finalizing", "finished"} <= await r.raw_states(op_id)
        kept = await r.result_bytes(op_id)
        assert [a["status_code"] for a in archive_answers(kept)] == [200, 200, 200]
        assert fx.auth == [None]
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_failed"]) == (3, 0), summary


async def test_mailchimp_a_batch_with_an_errored_operation_is_partial(
    pool: Any, tmp_path: Path
) -> None:
    """ "finished" with errored_operations 1 of 3: partially succeeded by its counts,
    the archive (which holds the 400) kept."""
    fx = MailchimpFixture()
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit({**OPERATIONS, "script": "partial"})
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_succeeded"], summary["items_failed"]) == (2, 1), summary
        codes = [a["status_code"] for a in archive_answers(await r.result_bytes(op_id))]
        assert codes == [400, 200, 200]


async def test_mailchimp_a_batch_whose_every_operation_errored_is_failed(
    pool: Any, tmp_path: Path
) -> None:
    """ "finished" with every operation errored: failed, its reason saying so."""
    fx = MailchimpFixture()
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit({**OPERATIONS, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        said = await reason(r, op_id)
        assert "finished" in said, said


async def test_mailchimp_a_cancel_deletes_the_running_batch(pool: Any, tmp_path: Path) -> None:
    """DELETE 204 stops the batch; it then reads 404: with deletes_job, cancelled."""
    fx = MailchimpFixture()
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit({**OPERATIONS, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_mailchimp_a_cancel_never_deletes_a_finished_batch(pool: Any, tmp_path: Path) -> None:
    """The batch finished before our DELETE would go: read first, no DELETE sent
    ("the results of any completed operations will not be available after this
    call"), the archive kept as the result."""
    fx = MailchimpFixture()
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit({**OPERATIONS, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [] and fx.deleted == []
        assert len(archive_answers(await r.result_bytes(op_id))) == 3


async def test_mailchimp_a_form_encoded_batch_webhook_is_read(pool: Any, tmp_path: Path) -> None:
    """Mailchimp's batch webhook posts form fields (data[id], data[status]), signed by
    nothing, to a URL carrying our token: read as its fields, matched to the batch
    by data[id], stored with its state. One without the token is refused and
    stores nothing. Before, every static_header delivery that was a form was
    refused 415 unread: Mailchimp's batch webhooks could not be received."""
    fx = MailchimpFixture()
    async with serve_app(fx.storage()) as storage_url:
        fx.url = storage_url.replace("127.0.0.1", "localhost")
        table = described("mailchimp_batches", result={"allowed_hosts": ["localhost"]})
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="mailchimp_batches",
            env=MAILCHIMP_ENV,
            overrides=table,
            with_receiver=True,
        ) as r:
            op_id = await r.submit({**OPERATIONS, "script": "slow"})
            await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
            bid = fx.only()["id"]
            fx.finish(bid)
            assert await fx.deliver(r.hook_url, bid) == 400  # no token: missing_header
            assert await r.pool.fetchval("SELECT count(*) FROM webhook_events") == 0
            assert await fx.deliver(f"{r.hook_url}?token={HOOK_TOKEN}", bid) == 200
            assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
            events = await r.pool.fetch(
                "SELECT operation_id, remote_state_raw FROM webhook_events"
                " WHERE provider = 'mailchimp_batches'"
            )
            assert [(e["operation_id"], e["remote_state_raw"]) for e in events] == [
                (op_id, "finished")
            ]


async def test_mailchimp_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = MailchimpFixture(lose_first_create=True)
    async with mailchimp(pool, tmp_path, fx) as r:
        op_id = await r.submit(OPERATIONS)
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- HubSpot -----------------------------------------------------------------------

HUBSPOT_ENV = {"HUBSPOT_ACCESS_TOKEN": HUBSPOT_TOKEN}


def hubspot_import(script: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {
        "files": [
            {
                "fileName": "contacts.csv",
                "fileFormat": "CSV",
                "fileImportPage": {"hasHeader": True, "columnMappings": []},
            }
        ]
    }
    if script:
        request["script"] = script
    csv = ("\n".join(HUBSPOT_ROWS) + "\n").encode()
    return {"importRequest": request, "files": file_part(csv, "contacts.csv", "text/csv")}


def hubspot(pool: Any, tmp_path: Path, fx: HubSpotFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "hubspot_imports", HUBSPOT_ENV)


async def test_hubspot_an_import_done_without_errors_is_collected(
    pool: Any, tmp_path: Path
) -> None:
    """The multipart create carries importRequest (named after our operation) and the
    CSV; STARTED, PROCESSING, DONE; its (empty) error list is the result."""
    fx = HubSpotFixture()
    async with hubspot(pool, tmp_path, fx) as r:
        op_id = await r.submit(hubspot_import())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (upload,) = fx.uploads
        assert upload["importRequest"]["name"] == op_id
        assert upload["file"].splitlines() == HUBSPOT_ROWS
        assert {"PROCESSING", "DONE"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id))["results"] == []


async def test_hubspot_done_with_errors_is_completed_with_its_errors(
    pool: Any, tmp_path: Path
) -> None:
    """DONE while two rows of three failed (TOTAL_ROWS 3, UNIQUE_OBJECTS_WRITTEN 1):
    the errors, one a page behind the `after` cursor, are all read and recorded as
    the failed items beside the row written. The result is the error list
    (`result.failures_only`): before, its items all "failed" made the import a
    failed job (and with the status's counters, a result "cut short")."""
    fx = HubSpotFixture()
    async with hubspot(pool, tmp_path, fx) as r:
        op_id = await r.submit(hubspot_import("partial"))
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, await r.history(op_id)
        assert fx.error_reads == [None, "1"]
        assert "DONE" in await r.raw_states(op_id)
        summary = (await r.op(op_id)).result_summary
        counts = (summary["items_total"], summary["items_succeeded"], summary["items_failed"])
        assert counts == (3, 1, 2), summary
        assert summary["failed_items_recorded"] == 2, summary
        failed = await r.pool.fetch(
            "SELECT item_key, code, message FROM agent_failed_items WHERE operation_id = $1"
            " ORDER BY item_key",
            op_id,
        )
        assert [(f["code"], f["message"]) for f in failed] == [(None, "INVALID_EMAIL")] * 2


async def test_hubspot_a_failed_import_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = HubSpotFixture()
    async with hubspot(pool, tmp_path, fx) as r:
        op_id = await r.submit(hubspot_import("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "FAILED" in await reason(r, op_id)


async def test_hubspot_a_cancel_is_confirmed_by_canceled(pool: Any, tmp_path: Path) -> None:
    fx = HubSpotFixture()
    async with hubspot(pool, tmp_path, fx) as r:
        op_id = await r.submit(hubspot_import("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert "CANCELED" in await r.raw_states(op_id)


async def test_hubspot_a_lost_create_is_found_by_its_import_name(pool: Any, tmp_path: Path) -> None:
    fx = HubSpotFixture(lose_first_create=True)
    async with hubspot(pool, tmp_path, fx) as r:
        op_id = await r.submit(hubspot_import())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads >= 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


# --- Salesforce Bulk API 2.0 ingest ------------------------------------------------

SALESFORCE_ENV = {"SALESFORCE_ACCESS_TOKEN": SALESFORCE_TOKEN}


def ingest(script: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {"object": "Contact", "operation": "insert", "lineEnding": "LF"}
    if script:
        job["script"] = script
    return {"job": job, "content": file_part(SF_CSV.encode(), "content", "text/csv")}


def salesforce(pool: Any, tmp_path: Path, fx: SalesforceFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "salesforce_ingest", SALESFORCE_ENV)


async def test_salesforce_a_multipart_ingest_is_collected_page_by_page(
    pool: Any, tmp_path: Path
) -> None:
    """One multipart request (the `job` JSON part, the `content` CSV) creates the job
    UploadComplete; InProgress, JobComplete; the successful results are read two
    rows a page by Sforce-Locator until "null", and kept whole."""
    fx = SalesforceFixture()
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        (upload,) = fx.uploads
        assert upload["job"]["object"] == "Contact" and upload["content"] == SF_CSV
        assert fx.result_reads == [
            ("successfulResults", None),
            ("successfulResults", "2"),
            ("failedResults", None),  # none failed: its header row only
        ]
        kept = (await r.result_bytes(op_id)).decode().splitlines()
        assert kept[0].startswith("sf__Id,sf__Created") and len(kept) == 5, kept
        assert (await r.op(op_id)).result_summary["items_succeeded"] == 4


async def test_salesforce_a_job_with_failed_records_is_partial(pool: Any, tmp_path: Path) -> None:
    """JobComplete with numberRecordsFailed 1 of 5: the four successful rows are the
    result; the failed one is counted from the status and read from failedResults/
    (`[result.errors] path`, CSV, paged by Sforce-Locator), its sf__Error its
    failure. Before, the status naming no errors URL, the failed record was only a
    count: why it failed stayed at Salesforce."""
    fx = SalesforceFixture()
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("partial"))
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_failed"]) == (5, 1), summary
        assert summary["failed_items_recorded"] == 1, summary
        assert ("failedResults", None) in fx.result_reads, fx.result_reads
        failed = await r.pool.fetch(
            "SELECT item_key, code, message FROM agent_failed_items WHERE operation_id = $1",
            op_id,
        )
        assert [(f["code"], f["message"]) for f in failed] == [(None, SF_RECORD_ERROR)]


async def test_salesforce_an_unreadable_failure_list_keeps_the_result(
    pool: Any, tmp_path: Path
) -> None:
    """failedResults/ answers 200 with an HTML page (a proxy's, a maintenance page):
    the failures cannot be read, but the result can. It is stored and the job ends
    on the status's counts, the failure list's reading stopped and logged. Before,
    the list's ValueError escaped the step: "step failed" at every attempt, the
    result fetched again and never stored, until the deadline."""
    fx = SalesforceFixture()
    fx.garbled_failures = True
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("partial"))
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, await r.history(op_id)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_failed"]) == (5, 1), summary
        assert summary["failed_items_recorded"] == 0, summary
        assert fx.result_reads.count(("failedResults", None)) == 1, fx.result_reads


async def test_salesforce_failed_records_are_read_page_by_page(pool: Any, tmp_path: Path) -> None:
    """Three failed records, one a page: failedResults/ is read by its Sforce-Locator
    until "null", every failure recorded."""
    fx = SalesforceFixture()
    fx.page_size = 1
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("partial"))
        await r.settle(op_id, {S.OBSERVING})
        job = fx.only()
        job["failed"] = job["rows"][:3]
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        reads = [loc for kind, loc in fx.result_reads if kind == "failedResults"]
        assert reads == [None, "1", "2"], fx.result_reads
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_failed"], summary["failed_items_recorded"]) == (3, 3), summary


async def test_salesforce_failed_records_are_kept_bounded(pool: Any, tmp_path: Path) -> None:
    """150 failed records, 60 a page: the first 100 are kept (MAX_FAILED_ITEMS, as a
    CSV result's failed rows) and the third page is not read; the count stays the
    status's 150."""
    fx = SalesforceFixture()
    fx.page_size = 60
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("partial"))
        await r.settle(op_id, {S.OBSERVING})
        job = fx.only()
        job["failed"] = [f"Row{n}," for n in range(150)]
        job["rows"] = job["rows"] + job["failed"]
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        reads = [loc for kind, loc in fx.result_reads if kind == "failedResults"]
        assert reads == [None, "60"], fx.result_reads
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_failed"], summary["failed_items_recorded"]) == (150, 100), summary


async def test_salesforce_a_failed_job_is_failed_with_its_error_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = SalesforceFixture()
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == SALESFORCE_FAILURE


async def test_salesforce_an_abort_is_confirmed(pool: Any, tmp_path: Path) -> None:
    """PATCH {"state": "Aborted"}: the job answers Aborted, cancelled."""
    fx = SalesforceFixture()
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_salesforce_an_abort_of_a_completed_job_is_refused_and_its_result_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The job completed before our PATCH: 400 INVALIDJOB "Aborting already Completed
    Job not allowed". No cancel is claimed: the job is read, JobComplete, and its
    results are collected."""
    fx = SalesforceFixture()
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "JobComplete"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "JobComplete")]
        assert "cancelled" not in await r.history(op_id)
        assert (await r.op(op_id)).result_summary["items_succeeded"] == 4


async def test_salesforce_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = SalesforceFixture(lose_first_create=True)
    async with salesforce(pool, tmp_path, fx) as r:
        op_id = await r.submit(ingest())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1


# --- Mistral batch -----------------------------------------------------------------

MISTRAL_ENV = {"MISTRAL_API_KEY": MISTRAL_KEY}
BATCH = {
    "input_files": ["6b79b8ae-5d3c-4c3a-9a0e-1f1d7c7a0f00"],
    "model": "mistral-small-latest",
    "endpoint": "/v1/chat/completions",
}


def mistral(pool: Any, tmp_path: Path, fx: MistralFixture) -> Any:
    return rig(pool, tmp_path, fx.app(), "mistral_batch", MISTRAL_ENV)


async def test_mistral_a_batch_is_collected_from_its_output_file(pool: Any, tmp_path: Path) -> None:
    fx = MistralFixture()
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["input"]["metadata"]["jobwarden_operation"] == op_id
        assert await r.result_bytes(op_id) == mistral_lines(job["id"], 4)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (4, 4), summary


async def test_mistral_a_failed_request_is_read_from_the_error_file(
    pool: Any, tmp_path: Path
) -> None:
    """SUCCESS with one request of four failed: output_file and error_file are read,
    the failed request recorded by its custom_id and Mistral's message."""
    fx = MistralFixture()
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "partial"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        jid = fx.only()["id"]
        assert fx.file_reads == [f"out-{jid[-4:]}", f"err-{jid[-4:]}"]
        summary = (await r.op(op_id)).result_summary
        counts = (summary["items_total"], summary["items_succeeded"], summary["items_failed"])
        assert counts == (4, 3, 1), summary
        failed = await r.pool.fetch(
            "SELECT item_key, message FROM agent_failed_items WHERE operation_id = $1", op_id
        )
        assert [(f["item_key"], f["message"]) for f in failed] == [
            ("request-3", MISTRAL_REQUEST_ERROR)
        ]


async def test_mistral_timeout_exceeded_keeps_the_partial_output(pool: Any, tmp_path: Path) -> None:
    """TIMEOUT_EXCEEDED with two of four requests done: partially succeeded, the two
    answers in output_file collected, never a job read as running for ever."""
    fx = MistralFixture()
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "timeout"})
        end = await r.settle(op_id, ENDS)
        assert end is S.SUCCEEDED, await r.history(op_id)
        assert "TIMEOUT_EXCEEDED" in await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == mistral_lines(fx.only()["id"], 2)
        summary = (await r.op(op_id)).result_summary
        assert (summary["items_total"], summary["items_succeeded"]) == (4, 2), summary


async def test_mistral_a_failed_batch_is_failed_with_its_error(pool: Any, tmp_path: Path) -> None:
    fx = MistralFixture()
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "fail"})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == MISTRAL_FAILURE


async def test_mistral_a_cancel_is_requested_then_confirmed(pool: Any, tmp_path: Path) -> None:
    """The cancel answers CANCELLATION_REQUESTED (still running); the next read
    CANCELLED, naming the output of the two requests done before it stopped: kept
    as the cancelled job's partial output."""
    fx = MistralFixture()
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit({**BATCH, "script": "slow"})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert len(fx.cancels) == 1
        assert "CANCELLED" in await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == mistral_lines(fx.only()["id"], 2)
        summary = (await r.op(op_id)).result_summary
        assert summary["partial"] and summary["items_succeeded"] == 2, summary


async def test_mistral_a_lost_create_is_found_by_its_metadata(pool: Any, tmp_path: Path) -> None:
    fx = MistralFixture(lose_first_create=True)
    async with mistral(pool, tmp_path, fx) as r:
        op_id = await r.submit(BATCH)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1 and fx.list_reads >= 1


# --- Zamzar ------------------------------------------------------------------------

ZAMZAR_ENV = {"ZAMZAR_BASIC_CREDENTIALS": ZAMZAR_BASIC}


def conversion(script: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "source_file": file_part(b"%PDF-1.7\n%%EOF\n", "portrait.pdf", "application/pdf"),
        "target_format": "png",
    }
    if script:
        body["script"] = script
    return body


def zamzar(pool: Any, tmp_path: Path, fx: ZamzarFixture) -> Any:
    return with_storage(pool, tmp_path, fx, "zamzar", ZAMZAR_ENV)


async def test_zamzar_the_converted_file_is_fetched_past_the_redirect_without_our_key(
    pool: Any, tmp_path: Path
) -> None:
    """/v1/files/{id}/content answers 307 to a signed storage URL: followed, our
    basic credential dropped there (S3 would refuse two auth mechanisms), the PNG
    kept."""
    fx = ZamzarFixture()
    async with zamzar(pool, tmp_path, fx) as r:
        op_id = await r.submit(conversion())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.uploads[0]["name"] == "portrait.pdf"
        assert {"converting", "successful"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == PNG
        assert fx.auth == [None]
        assert len(fx.content_reads) == 1


async def test_zamzar_a_failed_job_is_failed_with_its_message(pool: Any, tmp_path: Path) -> None:
    fx = ZamzarFixture()
    async with zamzar(pool, tmp_path, fx) as r:
        op_id = await r.submit(conversion("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == ZAMZAR_FAILURE


async def test_zamzar_a_cancel_is_confirmed(pool: Any, tmp_path: Path) -> None:
    fx = ZamzarFixture()
    async with zamzar(pool, tmp_path, fx) as r:
        op_id = await r.submit(conversion("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]


async def test_zamzar_a_cancel_of_a_finished_job_is_refused_and_its_file_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The conversion finished before our DELETE: 422, nothing cancelled. No cancel
    is claimed: the job is read, successful, and its file collected."""
    fx = ZamzarFixture()
    async with zamzar(pool, tmp_path, fx) as r:
        op_id = await r.submit(conversion("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.only()["state"] = "successful"
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == [(fx.only()["id"], "successful")]
        assert "cancelled" not in await r.history(op_id)
        assert await r.result_bytes(op_id) == PNG


async def test_zamzar_a_lost_create_goes_to_a_human(pool: Any, tmp_path: Path) -> None:
    fx = ZamzarFixture(lose_first_create=True)
    async with zamzar(pool, tmp_path, fx) as r:
        op_id = await r.submit(conversion())
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1
