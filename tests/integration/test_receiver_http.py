"""The receiver over a real uvicorn socket: webhooks, health, readiness, metrics, drain."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from receiver.app import build_app
from receiver.webhooks.ingest import Event, IngestUnavailable
from shared.db.connect import create_pool
from shared.serve import serve_app
from tests.integration.test_receiver_support import (
    NOW,
    PROVIDER,
    delivery,
    running_receiver,
    settings_for,
    stored_events,
)

# Bound on waiting for a condition the test set up; generous for a loaded CI box.
WAIT_SECONDS = 5.0


async def _until(condition: Any) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        while not condition():
            await asyncio.sleep(0.001)


async def test_webhook_over_a_real_socket_is_stored_after_commit(db: Any, pool: Any) -> None:
    app = build_app(settings_for(), pool, now=lambda: float(NOW))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        body, headers = delivery("job_1", "msg_socket")
        resp = await client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
        # The answer came after the commit: the row is visible to anyone now.
        [event] = await stored_events(db)
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        metrics = await client.get("/metrics")
    assert resp.status_code == 200 and resp.json() == {"status": "stored", "matched": False}
    assert resp.headers["content-type"] == "application/json"
    assert event["event_id"] == "msg_socket" and event["payload"]["job_id"] == "job_1"
    assert health.json() == {"status": "ok"}
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'jobwarden_webhook_events_verified_total{provider="sim"} 1.0' in metrics.text


async def test_get_on_the_webhook_path_is_405(db: Any, pool: Any) -> None:
    async with running_receiver(pool) as rx:
        resp = await rx.client.get(f"/webhooks/{PROVIDER}")
    assert resp.status_code == 405


async def test_an_exception_escaping_the_endpoint_is_a_500_and_the_next_delivery_is_served(
    db: Any, pool: Any
) -> None:
    """Webhook deliveries skip Starlette's error middleware; the server answers a bug's
    exception with a 500 just the same, and the receiver goes on."""
    app = build_app(settings_for(), pool, now=lambda: float(NOW))
    ingestor = app.state.ingestor
    submit = ingestor.submit

    async def broken(event: Event) -> Any:
        raise RuntimeError("a bug")

    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        ingestor.submit = broken
        body, headers = delivery("job_1", "msg_bug")
        failed = await client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
        ingestor.submit = submit
        retried = await client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
    assert failed.status_code == 500
    assert retried.status_code == 200 and retried.json()["status"] == "stored"
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_bug"]


async def test_deliveries_under_a_root_path_take_the_full_stack(db: Any, pool: Any) -> None:
    app = build_app(settings_for(), pool, now=lambda: float(NOW))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, root_path="/rx")
        async with httpx.AsyncClient(transport=transport, base_url="http://rx") as client:
            body, headers = delivery("job_1", "msg_root")
            stored = await client.post(f"/rx/webhooks/{PROVIDER}/", content=body, headers=headers)
            unknown = await client.post("/rx/webhooks/nobody", content=body, headers=headers)
    assert stored.status_code == 200 and stored.json()["status"] == "stored"
    assert unknown.status_code == 404 and unknown.json() == {"error": "not_found"}
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_root"]


async def test_middleware_added_to_the_app_sees_webhook_deliveries(db: Any, pool: Any) -> None:
    seen: list[str] = []

    class Recorder:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(scope["path"])
            await self.app(scope, receive, send)

    app = build_app(settings_for(), pool, now=lambda: float(NOW))
    app.add_middleware(Recorder)
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        body, headers = delivery("job_1", "msg_mw")
        resp = await client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
    assert resp.status_code == 200 and resp.json()["status"] == "stored"
    assert seen == [f"/webhooks/{PROVIDER}"]


async def test_an_exception_handler_added_to_the_app_sees_a_bug_in_a_delivery(
    db: Any, pool: Any
) -> None:
    """An operator's 500 handler lives in the error middleware: with one installed,
    deliveries take the full stack again and the handler answers."""
    from starlette.responses import JSONResponse

    handled: list[str] = []

    async def on_error(request: Any, exc: Exception) -> JSONResponse:
        handled.append(type(exc).__name__)
        return JSONResponse({"error": "handled"}, status_code=500)

    app = build_app(settings_for(), pool, now=lambda: float(NOW))
    app.add_exception_handler(Exception, on_error)

    async def broken(event: Event) -> Any:
        raise RuntimeError("a bug")

    app.state.ingestor.submit = broken
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as client:
        body, headers = delivery("job_1", "msg_handled")
        resp = await client.post(f"/webhooks/{PROVIDER}", content=body, headers=headers)
    assert (resp.status_code, resp.json()) == (500, {"error": "handled"})
    assert handled == ["RuntimeError"]


async def test_readyz_reports_pending_migrations(db: Any, pool: Any) -> None:
    await db.execute(
        "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)"
    )
    async with running_receiver(pool) as rx:
        ready = await rx.client.get("/readyz")
        health = await rx.client.get("/healthz")
    assert ready.status_code == 503 and ready.json() == {
        "status": "not_ready",
        "reason": "migrations_pending",
    }
    assert health.status_code == 200


async def test_readyz_stays_ready_on_a_schema_a_newer_jobwarden_migrated(
    db: Any, pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A rolling upgrade migrates first: a receiver of the older version keeps taking
    webhooks (its load balancer must not drop it), and says it is behind."""
    await db.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (999, '999_later.sql', 'x')"
    )
    async with running_receiver(pool) as rx:
        first = await rx.client.get("/readyz")
        second = await rx.client.get("/readyz")
    assert (first.status_code, second.status_code) == (200, 200)
    said = [r.getMessage() for r in caplog.records if "newer jobwarden" in r.getMessage()]
    assert said == ["the database was migrated by a newer jobwarden: upgrade this receiver"]


async def test_shutdown_commits_queued_events_before_stopping(db: Any, db_url: str) -> None:
    pool = await create_pool(db_url, min_size=1, max_size=1)
    app = build_app(settings_for(db_acquire_timeout=WAIT_SECONDS), pool, now=lambda: float(NOW))
    ingestor = app.state.ingestor
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://rx") as client:
                held = await pool.acquire()  # the writer cannot commit until we let go
                posts = [
                    asyncio.create_task(client.post(f"/webhooks/{PROVIDER}", content=b, headers=h))
                    for b, h in (delivery(f"job_{i}", f"msg_{i}") for i in range(20))
                ]
                await _until(lambda: ingestor.queued == 20)
                closing = asyncio.create_task(ingestor.close())
                await _until(lambda: not ingestor.accepting)
                late_body, late_headers = delivery("job_late", "msg_late")
                late = await client.post(
                    f"/webhooks/{PROVIDER}", content=late_body, headers=late_headers
                )
                ready = await client.get("/readyz")
                await pool.release(held)
                answers = await asyncio.gather(*posts)
                await closing
    finally:
        await pool.close()
    assert [r.json()["status"] for r in answers] == ["stored"] * 20
    assert late.status_code == 503 and ready.json()["reason"] == "not_accepting"
    assert len(await stored_events(db)) == 20


async def test_submit_after_close_is_refused_not_lost(db: Any, pool: Any) -> None:
    async with running_receiver(pool) as rx:
        ingestor = rx.app.state.ingestor
        await ingestor.close()
        event = Event(PROVIDER, "late", "standard_webhooks", True, None, None, None, None, "{}")
        try:
            await ingestor.submit(event)
        except IngestUnavailable:
            refused = True
        else:
            refused = False
    assert refused
    assert await stored_events(db) == []
