"""`run_receiver` as systemd runs it: READY=1 once listening, STOPPING=1 when draining."""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from receiver.main import run_receiver
from tests.integration.test_receiver_support import (
    PROVIDER,
    delivery,
    settings_for,
    standard_headers,
    stored_events,
)

WAIT_SECONDS = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _next_message(sock: socket.socket) -> str:
    data = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 1024), WAIT_SECONDS)
    return data.decode()


async def test_service_announces_ready_serves_and_announces_stopping(
    db: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    port = _free_port()
    now = int(time.time())  # the service checks signatures against the real clock
    settings = replace(settings_for(), receiver_port=port)
    service = asyncio.create_task(run_receiver(settings, db_url))
    try:
        assert await _next_message(notify) == "READY=1"
        body, _ = delivery("job_1", "msg_service")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            resp = await client.post(
                f"/webhooks/{PROVIDER}",
                content=body,
                headers=standard_headers(body, "msg_service", timestamp=now),
            )
        assert resp.json() == {"status": "stored", "matched": False}
    finally:
        service.cancel()
        await asyncio.gather(service, return_exceptions=True)
    assert await _next_message(notify) == "STOPPING=1"
    notify.close()
    assert [e["event_id"] for e in await stored_events(db)] == ["msg_service"]


async def test_the_receiver_process_freezes_start_up_once_started(
    db: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With settle_heap (`jobwarden receiver`), what start-up made leaves the collector's
    walks by the time systemd hears READY=1; without it (a receiver inside a test or the
    demo) nothing is frozen."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "notify"))
    gc.unfreeze()
    try:
        for settle_heap in (False, True):
            settings = replace(settings_for(), receiver_port=_free_port())
            service = asyncio.create_task(run_receiver(settings, db_url, settle_heap=settle_heap))
            try:
                assert await _next_message(notify) == "READY=1"
                assert (gc.get_freeze_count() > 0) is settle_heap
            finally:
                service.cancel()
                await asyncio.gather(service, return_exceptions=True)
            assert await _next_message(notify) == "STOPPING=1"
    finally:
        gc.unfreeze()  # the rest of this test process collects as usual
        notify.close()
