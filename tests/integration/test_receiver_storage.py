"""Verified events: deduplicated, matched to operations, stored durably, never state-changing."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from receiver.webhooks import ingest
from receiver.webhooks.ingest import Event, Ingestor, IngestRejected, Outcome
from shared import ledger
from shared.db.connect import create_pool
from shared.ledger import webhooks as ledger_webhooks
from shared.ledger.states import LocalState
from shared.logs import JsonFormatter
from tests.integration.test_receiver_support import (
    PROVIDER,
    SECRET,
    delivery,
    describe,
    event_body,
    running_receiver,
    settings_for,
    sim_description,
    standard_headers,
    stored_events,
    webhook_observations,
)
from tests.support import drive, submit


async def _operation_with_job(db: Any, job_id: str) -> str:
    op_id = await submit(db)
    await ledger.record_remote_job(db, op_id, job_id, create_mode="async")
    return op_id


async def _state(db: Any, op_id: str) -> tuple[str, int]:
    row = await db.fetchrow(
        "SELECT state::text, history_seq FROM operations WHERE operation_id = $1", op_id
    )
    return row["state"], row["history_seq"]


async def test_event_for_a_known_job_is_an_observation_and_wakes_the_reconciler(
    db: Any, pool: Any
) -> None:
    op_id = await _operation_with_job(db, "job_1")
    await db.execute("UPDATE operations SET next_poll_at = NULL WHERE operation_id = $1", op_id)
    before = await _state(db, op_id)
    wakeups: asyncio.Queue[str] = asyncio.Queue()
    await db.add_listener("jobwarden_wakeup", lambda *args: wakeups.put_nowait(args[3]))
    body, headers = delivery("job_1", "msg_1", "succeeded")
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, headers)
        assert (
            rx.metric(
                "jobwarden_webhook_events_stored_total", {"provider": PROVIDER, "matched": "true"}
            )
            == 1
        )
    assert resp.status_code == 200 and resp.json() == {"status": "stored", "matched": True}
    assert await asyncio.wait_for(wakeups.get(), 5) == op_id
    [event] = await stored_events(db)
    assert (event["operation_id"], event["remote_state"]) == (op_id, "succeeded")
    assert event["attached_at"] is not None
    [obs] = await webhook_observations(db, op_id)
    assert (obs["webhook_event_id"], obs["remote_state"]) == (
        event["webhook_event_id"],
        "succeeded",
    )
    assert await db.fetchval(
        "SELECT count(*) = 1 FROM operation_wakes WHERE operation_id = $1", op_id
    )
    # Evidence only: the webhook never moves the operation itself.
    assert await _state(db, op_id) == before


WAKES = "SELECT count(*) FROM operation_wakes WHERE operation_id = $1"


@pytest.mark.parametrize(("said", "state"), [("queued", "pending"), ("running", "running")])
async def test_news_that_the_job_runs_is_an_observation_that_wakes_nothing(
    db: Any, pool: Any, said: str, state: str
) -> None:
    """A provider reporting progress (a page crawled, a log line) would get a
    status read per event: news that the job is pending or running decides
    nothing for an operation that holds its job id."""
    op_id = await _operation_with_job(db, "job_1")
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery("job_1", "msg_run", said))
    assert resp.json() == {"status": "stored", "matched": True}
    [obs] = await webhook_observations(db, op_id)
    assert obs["remote_state"] == state
    assert await db.fetchval(WAKES, op_id) == 0


async def test_an_event_naming_a_state_we_do_not_map_wakes_the_operation(
    db: Any, pool: Any
) -> None:
    """It may be an end the description does not know: read the job."""
    op_id = await _operation_with_job(db, "job_1")
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery("job_1", "msg_odd", "archived"))
    assert resp.json() == {"status": "stored", "matched": True}
    [obs] = await webhook_observations(db, op_id)
    assert (obs["remote_state"], obs["remote_state_raw"]) == (None, "archived")
    assert await db.fetchval(WAKES, op_id) == 1


async def test_one_batch_wakes_the_ends_and_the_operations_without_their_job_id(
    db: Any,
) -> None:
    """The batch statement itself: a running job that holds its id is not woken;
    an end is, and so is news of any kind for an operation whose create answer
    is not on record (the wake makes the create step look for the job now)."""
    running = await _operation_with_job(db, "job_run")
    ended = await _operation_with_job(db, "job_end")
    unanswered = await submit(db)  # no job id: matched by our operation id
    events = [
        ("evt_run", "job_run", None, "running"),
        ("evt_end", "job_end", None, "succeeded"),
        ("evt_new", "job_new", unanswered, "running"),
    ]
    columns = {
        "provider": [PROVIDER] * 3,
        "event_id": [e[0] for e in events],
        "scheme": ["standard"] * 3,
        "id_signed": [True] * 3,
        "remote_job_id": [e[1] for e in events],
        "operation_ref": [e[2] for e in events],
        "client_reference": [None] * 3,
        "remote_state": [e[3] for e in events],
        "remote_state_raw": [e[3] for e in events],
        "payload": ["{}"] * 3,
        "extra": [0] * 3,
    }
    rows = await ledger_webhooks.store_events(db, columns)
    assert [r["operation_id"] for r in rows] == [running, ended, unanswered]
    assert {r["woken"] for r in rows} == {2}
    assert [await db.fetchval(WAKES, op) for op in (running, ended, unanswered)] == [0, 1, 1]
    for op in (running, ended, unanswered):
        assert len(await webhook_observations(db, op)) == 1


async def test_duplicate_event_is_acknowledged_and_never_reprocessed(db: Any, pool: Any) -> None:
    op_id = await _operation_with_job(db, "job_1")
    body, headers = delivery("job_1", "msg_1")
    async with running_receiver(pool) as rx:
        first = await rx.post(body, headers)
        second = await rx.post(body, headers)
        third = await rx.post(body, headers)
        assert rx.metric("jobwarden_webhook_events_duplicate_total", {"provider": PROVIDER}) == 2
    assert first.json() == {"status": "stored", "matched": True}
    assert second.json() == third.json() == {"status": "duplicate"}
    [event] = await stored_events(db)
    assert event["duplicate_deliveries"] == 2
    assert len(await webhook_observations(db, op_id)) == 1


async def test_same_content_under_a_new_signed_id_is_a_new_event(db: Any, pool: Any) -> None:
    op_id = await _operation_with_job(db, "job_1")
    body = event_body("job_1")
    async with running_receiver(pool) as rx:
        await rx.post(body, standard_headers(body, "msg_1"))
        resp = await rx.post(body, standard_headers(body, "msg_2"))
    assert resp.json() == {"status": "stored", "matched": True}
    assert len(await webhook_observations(db, op_id)) == 2


async def test_concurrent_identical_deliveries_store_exactly_one(db: Any, pool: Any) -> None:
    op_id = await _operation_with_job(db, "job_1")
    body, headers = delivery("job_1", "msg_burst")
    deliveries = 25
    async with running_receiver(pool) as rx:
        answers = await asyncio.gather(*(rx.post(body, headers) for _ in range(deliveries)))
    statuses = sorted(r.json()["status"] for r in answers)
    assert statuses == ["duplicate"] * (deliveries - 1) + ["stored"]
    [event] = await stored_events(db)
    assert event["duplicate_deliveries"] == deliveries - 1
    assert len(await webhook_observations(db, op_id)) == 1


async def test_several_writers_in_one_process_still_store_each_event_once(
    db: Any, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "WRITERS", 3)
    op_id = await _operation_with_job(db, "job_1")
    same = delivery("job_1", "msg_same")
    others = [delivery("job_1", f"msg_{i}") for i in range(30)]
    async with running_receiver(pool) as rx:
        assert rx.app.state.ingestor.writers == 3
        answers = await asyncio.gather(
            *(rx.post(*d) for pair in zip([same] * 30, others, strict=True) for d in pair)
        )
    statuses = [r.json()["status"] for r in answers]
    assert statuses.count("stored") == 31 and statuses.count("duplicate") == 29
    assert len(await stored_events(db)) == 31
    assert len(await webhook_observations(db, op_id)) == 31


async def test_two_receivers_sharing_the_database_store_each_event_once(
    db: Any, db_url: str
) -> None:
    op_id = await _operation_with_job(db, "job_1")
    body, headers = delivery("job_1", "msg_lb")
    first_pool = await create_pool(db_url, max_size=2)
    second_pool = await create_pool(db_url, max_size=2)
    try:
        async with running_receiver(first_pool) as a, running_receiver(second_pool) as b:
            answers = await asyncio.gather(
                *(rx.post(body, headers) for _ in range(10) for rx in (a, b))
            )
    finally:
        await first_pool.close()
        await second_pool.close()
    assert [r.json()["status"] for r in answers].count("stored") == 1
    [event] = await stored_events(db)
    assert event["duplicate_deliveries"] == 19
    assert len(await webhook_observations(db, op_id)) == 1


async def test_event_before_the_job_id_is_kept_and_attached_when_it_is_recorded(
    db: Any, pool: Any
) -> None:
    op_id = await submit(db)
    body, headers = delivery("job_early", "msg_early", "running")
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, headers)
    assert resp.json() == {"status": "stored", "matched": False}
    [event] = await stored_events(db)
    assert event["operation_id"] is None and event["remote_job_id"] == "job_early"
    assert await webhook_observations(db, op_id) == []

    wakes = "SELECT count(*) FROM operation_wakes WHERE operation_id = $1"
    assert await db.fetchval(wakes, op_id) == 0
    await ledger.record_remote_job(db, op_id, "job_early", create_mode="async")

    [event] = await stored_events(db)
    assert event["operation_id"] == op_id and event["attached_at"] is not None
    [obs] = await webhook_observations(db, op_id)
    assert (obs["webhook_event_id"], obs["remote_state"]) == (event["webhook_event_id"], "running")
    # the attachment wakes the operation (migration 022): with webhooks there is
    # no read at acceptance, and this event would otherwise wait for the backstop
    assert await db.fetchval(wakes, op_id) == 1


async def test_out_of_order_events_are_recorded_and_never_move_the_state(
    db: Any, pool: Any
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, LocalState.OBSERVING)
    job_id = (await ledger.load_operation(db, op_id)).remote_job_id
    before = await _state(db, op_id)
    remote_before = await db.fetchval(
        "SELECT remote_state::text FROM operations WHERE operation_id = $1", op_id
    )
    async with running_receiver(pool) as rx:
        done = await rx.post(*delivery(job_id, "msg_done", "succeeded"))
        late = await rx.post(*delivery(job_id, "msg_late", "running"))
    assert done.json()["matched"] and late.json()["matched"]
    assert [o["remote_state"] for o in await webhook_observations(db, op_id)] == [
        "succeeded",
        "running",
    ]
    assert await _state(db, op_id) == before == ("observing", before[1])
    assert (
        await db.fetchval(
            "SELECT remote_state::text FROM operations WHERE operation_id = $1", op_id
        )
        == remote_before
    )


async def test_event_for_a_finished_operation_is_kept_as_evidence_only(db: Any, pool: Any) -> None:
    op_id = await submit(db)
    await drive(db, op_id, LocalState.SUCCEEDED)
    job_id = (await ledger.load_operation(db, op_id)).remote_job_id
    before = await _state(db, op_id)
    async with running_receiver(pool) as rx:
        resp = await rx.post(*delivery(job_id, "msg_after", "failed"))
    assert resp.json() == {"status": "stored", "matched": True}
    assert await _state(db, op_id) == before == ("succeeded", before[1])
    assert not await db.fetchval(
        "SELECT count(*) = 1 FROM operation_wakes WHERE operation_id = $1", op_id
    )
    assert [o["remote_state"] for o in await webhook_observations(db, op_id)] == ["failed"]


def _sim_with_operation_ref() -> dict[str, Any]:
    toml = """
    [providers.sim]
    preset = "simulator"
    [providers.sim.webhooks]
    secrets_env = "S"
    operation_ref = "query:op"
    """
    return describe(toml, {"S": SECRET})


async def test_operation_reference_matches_before_the_job_id_is_known(db: Any, pool: Any) -> None:
    op_id = await submit(db)
    async with running_receiver(pool, settings_for(_sim_with_operation_ref())) as rx:
        resp = await rx.post(*delivery("job_new", "msg_ref"), query=f"?op={op_id}")
    assert resp.json() == {"status": "stored", "matched": True}
    [event] = await stored_events(db)
    assert (event["operation_id"], event["operation_ref"]) == (op_id, op_id)
    assert len(await webhook_observations(db, op_id)) == 1


async def test_operation_reference_contradicting_the_job_id_does_not_match(
    db: Any, pool: Any
) -> None:
    op_id = await _operation_with_job(db, "job_a")
    async with running_receiver(pool, settings_for(_sim_with_operation_ref())) as rx:
        resp = await rx.post(*delivery("job_b", "msg_ref"), query=f"?op={op_id}")
    assert resp.json() == {"status": "stored", "matched": False}
    assert await webhook_observations(db, op_id) == []


async def test_event_from_another_provider_never_matches_our_job(db: Any, pool: Any) -> None:
    op_id = await _operation_with_job(db, "job_1")  # provider "sim"
    providers = {"other": sim_description(), PROVIDER: sim_description()}
    async with running_receiver(pool, settings_for(providers)) as rx:
        resp = await rx.post(*delivery("job_1", "msg_other"), provider="other")
    assert resp.json() == {"status": "stored", "matched": False}
    assert await webhook_observations(db, op_id) == []


async def test_payload_postgres_cannot_hold_is_stored_scrubbed(db: Any, pool: Any) -> None:
    body = b'{"job_id": "job_1", "state": "running", "note": "a\\u0000b", "odd": "\\ud800"}'
    async with running_receiver(pool) as rx:
        resp = await rx.post(body, standard_headers(body))
    assert resp.status_code == 200
    [event] = await stored_events(db)
    payload = event["payload"]
    assert (payload["note"], payload["odd"], payload["job_id"]) == ("a\ufffdb", "\ufffd", "job_1")


async def test_overlong_signed_event_id_is_stored_as_its_hash(db: Any, pool: Any) -> None:
    long_id = "msg_" + "x" * 600
    body = event_body("job_1")
    async with running_receiver(pool) as rx:
        first = await rx.post(body, standard_headers(body, long_id))
        again = await rx.post(body, standard_headers(body, long_id))
    assert first.json()["status"] == "stored" and again.json() == {"status": "duplicate"}
    [event] = await stored_events(db)
    assert event["event_id"].startswith("sha256:") and len(event["event_id"]) == 71


async def test_event_the_database_refuses_fails_alone(db: Any, pool: Any) -> None:
    def event(event_id: str, state: str | None) -> Event:
        payload = '{"job_id": "job_1"}'
        return Event(
            PROVIDER, event_id, "standard_webhooks", True, "job_1", None, state, None, payload
        )

    async with running_receiver(pool) as rx:
        ingestor: Ingestor = rx.app.state.ingestor
        good, bad = await asyncio.gather(
            ingestor.submit(event("good", None)),
            # not the payload (a refused payload is stored in base64): a state
            # the database's enum refuses
            ingestor.submit(event("bad", "not_a_state")),
            return_exceptions=True,
        )
        assert rx.metric("jobwarden_webhook_db_errors_total", {"kind": "row_rejected"}) >= 1
    assert isinstance(good, Outcome) and good.status == "stored"
    assert isinstance(bad, IngestRejected)
    assert [e["event_id"] for e in await stored_events(db)] == ["good"]


async def test_logs_carry_ids_and_never_a_secret_or_signature(
    db: Any, pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    op_id = await _operation_with_job(db, "job_1")
    trace_id = await db.fetchval("SELECT trace_id FROM operations WHERE operation_id = $1", op_id)
    body, headers = delivery("job_1", "msg_logged")
    caplog.set_level(logging.DEBUG)
    async with running_receiver(pool) as rx:
        await rx.post(body, headers)
        await rx.post(body, {**headers, "webhook-signature": "v1," + "B" * 43 + "="})
    formatter = JsonFormatter()
    lines = [
        json.loads(formatter.format(r)) for r in caplog.records if r.name.startswith("receiver")
    ]
    [stored] = [line for line in lines if line["msg"] == "webhook stored"]
    assert stored["provider"] == PROVIDER and stored["event_id"] == "msg_logged"
    assert (stored["operation_id"], stored["trace_id"]) == (op_id, trace_id)
    text = "\n".join(formatter.format(r) for r in caplog.records)
    for secret_part in (
        SECRET,
        SECRET.removeprefix("whsec_"),
        headers["webhook-signature"],
        "B" * 43,
    ):
        assert secret_part not in text
    assert body.decode() not in text


async def test_metrics_endpoint_exposes_the_counters(db: Any, pool: Any) -> None:
    async with running_receiver(pool) as rx:
        await rx.post(*delivery("job_1", "msg_m"))
        await rx.post(*delivery("job_1", "msg_m"))
        text = (await rx.client.get("/metrics")).text
    for line in (
        'jobwarden_webhook_requests_received_total{provider="sim"} 2.0',
        'jobwarden_webhook_events_verified_total{provider="sim"} 2.0',
        'jobwarden_webhook_events_duplicate_total{provider="sim"} 1.0',
        'jobwarden_webhook_events_stored_total{matched="false",provider="sim"} 1.0',
        "jobwarden_webhook_request_duration_seconds_count 2.0",
    ):
        assert line in text
    assert "jobwarden_webhook_db_errors_total" in text
