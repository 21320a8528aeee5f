"""Matching a verified event by the reference it carries: operation id, client reference, job id.

The provider here echoes the agent's request metadata, so its events may name
the operation by the agent's client reference (`/metadata/ref`) and nothing
else of ours; `/operation` carries our operation id when the sender has it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any

import pytest

from shared import ledger
from shared.logs import JsonFormatter
from tests.integration.test_receiver_support import (
    SECRET,
    describe,
    event_body,
    running_receiver,
    settings_for,
    standard_headers,
    stored_events,
    webhook_observations,
)
from tests.support import submit

# An op_ id no operation has (ULID alphabet, 26 characters).
UNKNOWN_OPERATION = "op_01J00000000000000000000000"


def _settings(
    provider_names: tuple[str, ...] = ("sim",), operation_key: str = "operation_id"
) -> Any:
    tables = "\n".join(
        f"""
        [providers.{name}]
        preset = "simulator"
        [providers.{name}.webhooks]
        secrets_env = "S"
        {operation_key} = "/operation"
        client_reference = "/metadata/ref"
        """
        for name in provider_names
    )
    return settings_for(describe(tables, {"S": SECRET}))


def _event(
    msg_id: str,
    *,
    ref: str | None = None,
    job_id: str | None = None,
    operation: str | None = None,
    state: str = "succeeded",
) -> tuple[bytes, dict[str, str]]:
    extra: dict[str, Any] = {}
    if ref is not None:
        extra["metadata"] = {"ref": ref}
    if operation is not None:
        extra["operation"] = operation
    body = event_body(job_id, state, **extra)
    return body, standard_headers(body, msg_id)


async def _operation(
    db: Any, ref: str, *, who: str = "agent:test", job_id: str | None = None
) -> str:
    op_id = await submit(db, ref=ref, who=who)
    if job_id is not None:
        await ledger.record_remote_job(db, op_id, job_id, create_mode="async")
    return op_id


async def _attached(db: Any, event_id: str) -> str | None:
    operation_id: str | None = await db.fetchval(
        "SELECT operation_id FROM webhook_events WHERE event_id = $1", event_id
    )
    return operation_id


async def test_an_event_naming_only_the_client_reference_attaches_and_wakes_the_operation(
    db: Any, pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    op_id = await _operation(db, "invoice-42")  # no job id yet: the create is in flight
    await db.execute("UPDATE operations SET next_poll_at = NULL WHERE operation_id = $1", op_id)
    wakeups: asyncio.Queue[str] = asyncio.Queue()
    await db.add_listener("jobwarden_wakeup", lambda *args: wakeups.put_nowait(args[3]))
    caplog.set_level(logging.INFO)
    async with running_receiver(pool, _settings()) as rx:
        resp = await rx.post(*_event("msg_ref", ref="invoice-42"))
    assert resp.json() == {"status": "stored", "matched": True}
    assert await asyncio.wait_for(wakeups.get(), 5) == op_id
    [event] = await stored_events(db)
    assert (event["operation_id"], event["client_reference"]) == (op_id, "invoice-42")
    assert event["remote_job_id"] is None and event["attached_at"] is not None
    [obs] = await webhook_observations(db, op_id)
    assert obs["remote_state"] == "succeeded"
    assert await db.fetchval(
        "SELECT count(*) = 1 FROM operation_wakes WHERE operation_id = $1", op_id
    )
    formatter = JsonFormatter()
    [line] = [
        json.loads(formatter.format(r))
        for r in caplog.records
        if r.getMessage() == "webhook stored"
    ]
    assert (line["operation_id"], line["matched_by"]) == (op_id, "client_reference")


async def test_the_client_reference_is_trusted_before_the_job_id(db: Any, pool: Any) -> None:
    agreeing = await _operation(db, "invoice-42", job_id="job_1")
    unknown_job = await _operation(db, "invoice-43")  # its job id is not on record yet
    await _operation(db, "invoice-44", job_id="job_2")
    async with running_receiver(pool, _settings()) as rx:
        await rx.post(*_event("msg_agreeing", ref="invoice-42", job_id="job_1"))
        await rx.post(*_event("msg_first", ref="invoice-43", job_id="job_2"))
    assert await _attached(db, "msg_agreeing") == agreeing
    assert await _attached(db, "msg_first") == unknown_job


async def test_a_client_reference_two_agents_share_names_neither_operation(
    db: Any, pool: Any
) -> None:
    first = await _operation(db, "shared-ref", who="agent:a", job_id="job_a")
    second = await _operation(db, "shared-ref", who="agent:b", job_id="job_b")
    third = await _operation(db, "other-ref", who="agent:a")
    async with running_receiver(pool, _settings()) as rx:
        alone = await rx.post(*_event("msg_alone", ref="shared-ref"))
        with_job = await rx.post(*_event("msg_job", ref="shared-ref", job_id="job_b"))
        # Still ambiguous when only one candidate's job id agrees with the event.
        unknown_job = await rx.post(*_event("msg_unknown", ref="shared-ref", job_id="job_c"))
    assert alone.json() == unknown_job.json() == {"status": "stored", "matched": False}
    assert with_job.json() == {"status": "stored", "matched": True}
    assert await _attached(db, "msg_alone") is None
    assert await _attached(db, "msg_job") == second  # by the job id it carries
    assert await _attached(db, "msg_unknown") is None
    assert await webhook_observations(db, first) == []
    assert len(await webhook_observations(db, second)) == 1
    assert await webhook_observations(db, third) == []
    stored = {e["event_id"]: e["client_reference"] for e in await stored_events(db)}
    assert stored == dict.fromkeys(("msg_alone", "msg_job", "msg_unknown"), "shared-ref")


async def test_an_ambiguous_client_reference_attaches_by_its_job_id_once_recorded(
    db: Any, pool: Any
) -> None:
    await _operation(db, "shared-ref", who="agent:a")
    second = await _operation(db, "shared-ref", who="agent:b")
    async with running_receiver(pool, _settings()) as rx:
        resp = await rx.post(*_event("msg_early", ref="shared-ref", job_id="job_b"))
    assert resp.json() == {"status": "stored", "matched": False}
    await ledger.record_remote_job(db, second, "job_b", create_mode="async")
    assert await _attached(db, "msg_early") == second
    assert len(await webhook_observations(db, second)) == 1


async def test_a_client_reference_contradicting_the_known_job_id_does_not_match(
    db: Any, pool: Any
) -> None:
    op_id = await _operation(db, "invoice-42", job_id="job_a")
    async with running_receiver(pool, _settings()) as rx:
        resp = await rx.post(*_event("msg_other_job", ref="invoice-42", job_id="job_b"))
    assert resp.json() == {"status": "stored", "matched": False}
    assert await webhook_observations(db, op_id) == []
    # The job id it carries decides once an operation records it.
    later = await _operation(db, "another-ref", job_id="job_b")
    assert await _attached(db, "msg_other_job") == later


async def test_the_operation_id_is_trusted_before_the_client_reference(db: Any, pool: Any) -> None:
    named = await _operation(db, "ref-one")
    referenced = await _operation(db, "ref-two")
    async with running_receiver(pool, _settings()) as rx:
        await rx.post(*_event("msg_op", ref="ref-two", operation=named))
        # An operation id that names nothing falls back to the client reference.
        await rx.post(*_event("msg_unknown_op", ref="ref-two", operation=UNKNOWN_OPERATION))
    assert await _attached(db, "msg_op") == named
    assert await _attached(db, "msg_unknown_op") == referenced


@pytest.mark.parametrize("key", ["operation_id", "operation_ref"])
async def test_operation_id_and_its_former_name_operation_ref_both_match(
    db: Any, pool: Any, key: str
) -> None:
    op_id = await _operation(db, "invoice-42")
    async with running_receiver(pool, _settings(operation_key=key)) as rx:
        resp = await rx.post(*_event("msg_op", operation=op_id))
    assert resp.json() == {"status": "stored", "matched": True}
    [event] = await stored_events(db)
    assert (event["operation_id"], event["operation_ref"]) == (op_id, op_id)


async def test_a_client_reference_never_matches_another_providers_operation(
    db: Any, pool: Any
) -> None:
    op_id = await _operation(db, "invoice-42")  # provider "sim"
    async with running_receiver(pool, _settings(("sim", "other"))) as rx:
        resp = await rx.post(*_event("msg_elsewhere", ref="invoice-42"), provider="other")
    assert resp.json() == {"status": "stored", "matched": False}
    assert await webhook_observations(db, op_id) == []


async def test_references_postgres_cannot_hold_never_fail_the_delivery(db: Any, pool: Any) -> None:
    op_id = await _operation(db, "invoice-42", job_id="job_1")
    async with running_receiver(pool, _settings()) as rx:
        unreadable = await rx.post(
            *_event("msg_odd", ref="invoice-42\u0000", job_id="job\ud800", state="run\u0000")
        )
        partly = await rx.post(
            *_event("msg_partly", ref="invoice\ud800", job_id="job_1", operation="op_\u0000")
        )
    assert unreadable.status_code == partly.status_code == 200
    assert unreadable.json() == {"status": "stored", "matched": False}
    assert partly.json() == {"status": "stored", "matched": True}
    odd, part = await stored_events(db)
    assert (odd["client_reference"], odd["remote_job_id"], odd["operation_id"]) == (
        None,
        None,
        None,
    )
    assert odd["payload"]["metadata"]["ref"] == "invoice-42\ufffd"
    assert (part["client_reference"], part["operation_ref"], part["operation_id"]) == (
        None,
        None,
        op_id,
    )


async def test_an_event_id_postgres_cannot_hold_is_stored_as_its_hash(db: Any, pool: Any) -> None:
    toml = """
    [providers.sim]
    preset = "simulator"
    [providers.sim.webhooks]
    scheme = "github"
    secrets_env = "S"
    event_id = "/id"
    """
    body = json.dumps({"id": "evt_\u0000", "job_id": "job_1", "state": "running"}).encode()
    signature = hmac.new(b"github-secret", body, hashlib.sha256).hexdigest()
    headers = {"content-type": "application/json", "x-hub-signature-256": f"sha256={signature}"}
    settings = settings_for(describe(toml, {"S": "github-secret"}))
    async with running_receiver(pool, settings) as rx:
        first = await rx.post(body, headers)
        again = await rx.post(body, headers)
    assert first.json() == {"status": "stored", "matched": False}
    assert again.json() == {"status": "duplicate"}
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:")
