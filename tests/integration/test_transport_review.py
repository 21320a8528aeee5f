"""Provider answers that misuse HTTP: each is a failed (or refused) call, never a stall,
a flood of memory, another operation's answer, or a step that raises for ever.

The providers here are raw asyncio servers writing exact bytes (no HTTP
framework would send these answers); the reconciler is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.calls import send
from reconciler.lanes import Lane
from reconciler.worker import Reconciler
from shared import ledger
from shared.ledger import RequestSpec
from shared.providers import HttpRequest
from tests.harness import reconciler_context, run_until, sim_providers

MIB = 1024 * 1024
TRACE = "0" * 31 + "1"

# A handler writes the answer to one request; True keeps the connection open.
Handler = Callable[[str, str, asyncio.StreamWriter], Awaitable[bool]]


def plain(status: int, body: Mapping[str, Any] | bytes, **headers: str) -> bytes:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(content)}"]
    head += ["Content-Type: application/json", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + content


class RawProvider:
    """An HTTP/1.1 server whose answers are the bytes its handler writes."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[tuple[str, str]] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.url = ""

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, target, _ = head[0].split(" ", 2)
                fields = dict(line.split(":", 1) for line in head[1:] if ":" in line)
                length = int({k.lower(): v for k, v in fields.items()}.get("content-length", 0))
                if length:
                    await reader.readexactly(length)
                self.seen.append((method, target))
                keep = await self.handler(method, target, writer)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self.tasks.discard(task)


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[RawProvider]:
    provider = RawProvider(handler)
    server = await asyncio.start_server(provider.connection, "127.0.0.1", 0)
    provider.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield provider
    finally:
        server.close()
        for task in list(provider.tasks):
            task.cancel()
        await asyncio.gather(*provider.tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def reconciler(
    pool: Any, tmp_path: Path, providers: dict[str, Any], **settings: Any
) -> AsyncIterator[Reconciler]:
    async with reconciler_context(pool, tmp_path, providers, **settings) as ctx:
        yield Reconciler(ctx)


async def submit(pool: Any, provider: str, result_deadline_s: float = 600.0) -> str:
    sub = await ledger.submit_operation(
        pool,
        provider=provider,
        kind="export",
        request=RequestSpec("POST", "/v1/jobs", {"input": 1}),
        requested_by="agent:test",
        create_deadline_s=600.0,
        result_deadline_s=result_deadline_s,
    )
    return sub.operation_id


async def state(pool: Any, op_id: str) -> str:
    return (await ledger.load_operation(pool, op_id)).state.value


async def calls(pool: Any, op_id: str, kind: str) -> list[Any]:
    return await pool.fetch(
        "SELECT error_category, status_code, response_size FROM provider_calls "
        "WHERE operation_id = $1 AND call_kind = $2 ORDER BY call_id",
        op_id,
        kind,
    )


def finished_job(result_url: str = "/r/j1") -> Handler:
    """The start of every provider below: a create, then a status that says succeeded."""

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if method == "POST":
            w.write(plain(202, {"job_id": "j1", "state": "queued"}))
        else:
            w.write(plain(200, {"job_id": "j1", "state": "succeeded", "result_url": result_url}))
        return True

    return handler


# ------------------------------------------------------------------ 1: no download for ever


async def _trickle(w: asyncio.StreamWriter) -> None:
    w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    w.write(b"Transfer-Encoding: chunked\r\n\r\n")
    while True:  # a byte every 0.4 s: each read is within request_timeout (1 s)
        w.write(b"1\r\n \r\n")
        await w.drain()
        await asyncio.sleep(0.4)


async def _continue(w: asyncio.StreamWriter) -> None:
    while True:  # informational heads for ever: no status line, no body
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await w.drain()
        await asyncio.sleep(0.4)


@pytest.mark.parametrize("stall", [_trickle, _continue], ids=["trickle", "continue"])
async def test_a_stalling_result_download_fails_as_a_timeout_while_others_proceed(
    pool: Any, tmp_path: Path, stall: Callable[[asyncio.StreamWriter], Awaitable[None]]
) -> None:
    status = finished_job()

    async def bad(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if target.startswith("/r/"):
            await stall(w)
        return await status(method, target, w)

    async def good(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        body = {"job_id": "g1", "state": "queued" if method == "POST" else "running"}
        w.write(plain(202 if method == "POST" else 200, body))
        return True

    async with serve(bad) as bp, serve(good) as gp:
        providers = {**sim_providers(bp.url, name="bad"), **sim_providers(gp.url, name="good")}
        async with reconciler(pool, tmp_path, providers, lease_seconds=2.0) as rec:
            bad_op = await submit(pool, "bad")

            async def fetching() -> bool:
                return any(t.startswith("/r/") for _, t in bp.seen)

            await run_until(rec, fetching, timeout=20.0)
            good_op = await submit(pool, "good")

            async def good_created() -> bool:
                return await state(pool, good_op) != "create_pending"

            await run_until(rec, good_created, timeout=20.0)  # while the bad provider still stalls

            async def bad_ended() -> bool:
                return await state(pool, bad_op) not in ("observing", "result_collecting")

            await run_until(rec, bad_ended, timeout=60.0)
            assert await state(pool, bad_op) == "result_unavailable"
            fetches = await calls(pool, bad_op, "result")
            assert fetches and {c["error_category"] for c in fetches} == {"timeout"}


# ------------------------------------------------------------------ 2: bounded reads


async def test_a_result_past_max_bytes_is_read_no_further(pool: Any, tmp_path: Path) -> None:
    sent = {"bytes": 0}
    status = finished_job()

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if not target.startswith("/r/"):
            return await status(method, target, w)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        w.write(b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % MIB + b" " * MIB + b"\r\n"
        for _ in range(256):  # 256 MiB offered
            w.write(chunk)
            await w.drain()
            sent["bytes"] += MIB
        w.write(b"0\r\n\r\n")
        return True

    async with serve(handler) as p:
        expect = {"max_bytes": MIB, "checksum": "none", "content_types": ["application/json"]}
        providers = sim_providers(p.url, name="p", overrides={"result": {"expect": expect}})
        async with reconciler(pool, tmp_path, providers, lease_seconds=30.0) as rec:
            op_id = await submit(pool, "p")
            await run_until(rec, lambda: _ended_collecting(pool, op_id), timeout=30.0)
            assert await state(pool, op_id) == "result_validation_failed"
            cause = await pool.fetchval(
                "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
            )
            assert "larger than max_bytes" in cause
            stored = await pool.fetchval(
                "SELECT max(response_size) FROM provider_calls WHERE operation_id = $1", op_id
            )
            assert stored <= MIB + 1  # the bytes read: max_bytes + 1 at most
            assert sent["bytes"] < 64 * MIB  # the provider could not push the rest


async def _ended_collecting(pool: Any, op_id: str) -> bool:
    return await state(pool, op_id) not in (
        "create_pending",
        "accepted",
        "observing",
        "result_collecting",
    )


async def test_a_tiny_compressed_status_answer_cannot_inflate_past_the_cap(
    pool: Any, tmp_path: Path
) -> None:
    inner = b'{"job_id":"j1","state":"running","pad":"' + b"0" * (64 * MIB) + b'"}'
    twice = gzip.compress(gzip.compress(inner, 9), 9)
    del inner
    assert len(twice) < 64 * 1024

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if method == "POST":
            w.write(plain(202, {"job_id": "j1", "state": "queued"}))
        else:
            w.write(plain(200, twice, **{"Content-Encoding": "gzip, gzip"}))
        return True

    async with serve(handler) as p, reconciler(pool, tmp_path, sim_providers(p.url)) as rec:
        op_id = await submit(pool, "sim")

        async def read_once() -> bool:
            return bool(await calls(pool, op_id, "status"))

        await run_until(rec, read_once, timeout=20.0)
        [read] = (await calls(pool, op_id, "status"))[:1]
        assert read["error_category"] == "protocol"  # a failed read, not 64 MiB in memory
        assert read["response_size"] is None
        assert await state(pool, op_id) in ("accepted", "observing")


async def test_a_compressed_answer_within_the_cap_is_still_read() -> None:
    body = json.dumps({"job_id": "jA", "state": "running", "pad": "x" * 100_000}).encode()

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        w.write(plain(200, gzip.compress(body), **{"Content-Encoding": "gzip"}))
        return True

    async with serve(handler) as p, Lane() as lane:
        sent = await send(lane, HttpRequest("status", "GET", f"{p.url}/v1/jobs/jA", {}), TRACE)
        assert sent.response is not None and sent.response.body == body


# ------------------------------------------------------------------ 3: keep-alive desync


async def test_bytes_after_an_answer_never_become_the_next_calls_answer() -> None:
    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if target == "/v1/jobs/jA":  # op A's answer, then one nobody asked for
            w.write(
                plain(200, {"job_id": "jA", "state": "running"})
                + plain(202, {"job_id": "stale", "state": "queued"})
            )
        elif method == "POST":
            w.write(plain(202, {"job_id": "jB", "state": "queued"}))
        return True

    async with serve(handler) as p, Lane() as lane:
        a = await send(lane, HttpRequest("status", "GET", f"{p.url}/v1/jobs/jA", {}), TRACE)
        b = await send(lane, HttpRequest("create", "POST", f"{p.url}/v1/jobs", {}, json={}), TRACE)
        assert a.response is not None and json.loads(a.response.body)["job_id"] == "jA"
        assert b.response is not None and json.loads(b.response.body)["job_id"] == "jB"
        assert p.seen == [("GET", "/v1/jobs/jA"), ("POST", "/v1/jobs")]


async def test_a_short_content_length_does_not_fail_the_next_call() -> None:
    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if target == "/v1/jobs/jA":
            body = json.dumps({"job_id": "jA", "state": "running"}).encode()
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (len(body) - 2) + body)
        else:
            w.write(plain(202, {"job_id": "jB", "state": "queued"}))
        return True

    async with serve(handler) as p, Lane() as lane:
        await send(lane, HttpRequest("status", "GET", f"{p.url}/v1/jobs/jA", {}), TRACE)
        b = await send(lane, HttpRequest("create", "POST", f"{p.url}/v1/jobs", {}, json={}), TRACE)
        assert b.error_category is None, b.error_category
        assert b.response is not None and json.loads(b.response.body)["job_id"] == "jB"


# ------------------------------------------------------------------ 4: URLs httpx refuses

BAD_URLS = [
    "http://1.2.3.999/r",
    "http://127.0.0.1:99999/r",
    "http://files.example:abc/r",
    "http://" + "a" * 70000 + ".example/r",
]


@pytest.mark.parametrize("url", BAD_URLS, ids=["ipv4", "port-range", "port-text", "long"])
async def test_a_result_url_httpx_refuses_is_a_failed_fetch(
    pool: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    caplog.set_level(logging.WARNING, "jobwarden.reconciler")
    async with (
        serve(finished_job(url)) as p,
        reconciler(pool, tmp_path, sim_providers(p.url)) as rec,
    ):
        op_id = await submit(pool, "sim")
        await run_until(rec, lambda: _ended_collecting(pool, op_id), timeout=30.0)
        assert await state(pool, op_id) == "result_unavailable"
        assert not [r for r in caplog.records if r.getMessage() == "step failed"]


@pytest.mark.parametrize("url", BAD_URLS, ids=["ipv4", "port-range", "port-text", "long"])
@pytest.mark.parametrize("action", ["status", "create", "result"])
async def test_sending_to_a_url_httpx_refuses_is_a_category_not_an_exception(
    url: str, action: str
) -> None:
    """Whatever the build lets through, `send` answers with a category (it never raises)."""
    async with Lane() as lane:
        sent = await send(lane, HttpRequest(action, "GET", url, {}, timeout=2.0), TRACE)
    assert sent.response is None
    # an invalid URL never leaves; a port the socket layer refuses: "connect" for a
    # create (its request never began to leave), "other" otherwise
    assert sent.error_category in (("connect",) if action == "create" else ("connect", "other"))


async def test_a_status_url_httpx_refuses_still_meets_its_deadline(
    pool: Any, tmp_path: Path, clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "jobwarden.reconciler")

    async def handler(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        body = {"job_id": "j1", "state": "queued", "status_url": "http://1.2.3.999/v1/jobs/j1"}
        w.write(plain(202, body))
        return True

    async with serve(handler) as p:
        providers = sim_providers(p.url, name="p", overrides={"status": {"use_status_url": True}})
        async with reconciler(pool, tmp_path, providers, clock=clock) as rec:
            op_id = await submit(pool, "p", result_deadline_s=60.0)
            for _ in range(10):  # 10 x 31 s: well past the 60 s result deadline
                await rec.run_once()
                await clock.advance(31.0)
            assert await state(pool, op_id) not in ("accepted", "observing")
            assert not [r for r in caplog.records if r.getMessage() == "step failed"]


async def test_a_long_download_at_a_good_pace_holds_no_other_operation_back(
    pool: Any, tmp_path: Path
) -> None:
    """Late claims lasted one lease per run_once, while a download that keeps its pace
    outlives its lease (it renews it): every other operation then waited for the
    download's end. Here one runs past two leases; an operation submitted after the
    first lease must be created by the same run_once, meanwhile."""
    status = finished_job()
    chunks = asyncio.Queue[int]()
    release = asyncio.Event()
    # the download's pace is the fault: real seconds, as the lease it outlives is real
    lease, every = 2.0, 0.25

    async def paced(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if not target.startswith("/r/"):
            return await status(method, target, w)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        w.write(b"Transfer-Encoding: chunked\r\n\r\n1\r\n[\r\n")
        sent = 0
        while not release.is_set():  # 80 KiB every `every` s: well above the 64 KiB/s floor
            w.write(b"%x\r\n" % (80 * 1024) + b" " * (80 * 1024) + b"\r\n")
            await w.drain()
            sent += 1
            chunks.put_nowait(sent)
            await asyncio.sleep(every)
        w.write(b"1\r\n]\r\n0\r\n\r\n")
        return True

    created = asyncio.Event()

    async def good(method: str, target: str, w: asyncio.StreamWriter) -> bool:
        if method == "POST":
            created.set()
        body = {"job_id": "g1", "state": "queued" if method == "POST" else "running"}
        w.write(plain(202 if method == "POST" else 200, body))
        return True

    async with serve(paced) as bp, serve(good) as gp:
        providers = {**sim_providers(bp.url, name="bad"), **sim_providers(gp.url, name="good")}
        async with reconciler(pool, tmp_path, providers, lease_seconds=lease) as rec:
            await submit(pool, "bad")

            async def sweeps() -> None:  # as the daemon: run_once back to back
                while not release.is_set():
                    await rec.run_once()

            sweeping = asyncio.create_task(sweeps())
            try:
                while await chunks.get() < 1.5 * lease / every:  # counted by the server
                    pass
                await submit(pool, "good")
                await asyncio.wait_for(created.wait(), 10.0)
                assert any(t.startswith("/r/") for _, t in bp.seen) and not release.is_set()
            finally:
                release.set()
            await asyncio.wait_for(sweeping, 30.0)
