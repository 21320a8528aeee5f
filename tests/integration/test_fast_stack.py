"""`jobwarden receiver` and the benchmark's servers serve on httptools and uvloop.

Real processes and sockets: the receiver is started as an operator starts it,
and what is checked is the startup line naming the parser uvicorn loaded and
the loop it runs on, then a request served over that stack.
"""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import httpx
from starlette.types import Receive, Scope, Send

from bench.harness import ReadySocket, child_env, free_port, spawn, stop, write_config
from bench.stack import read_stack, record_stack
from shared import serve
from shared.serve import Stack, serve_app

FAST = Stack("httptools", "uvloop")


def _serving_line(log: Path) -> dict[str, object]:
    for line in log.read_text().splitlines():
        if line.startswith("{") and json.loads(line).get("msg", "").startswith("serving HTTP"):
            doc: dict[str, object] = json.loads(line)
            return doc
    raise AssertionError(f"no 'serving HTTP' startup line in {log}:\n{log.read_text()}")


async def test_jobwarden_receiver_serves_with_httptools_on_uvloop(
    db_url: str, tmp_path: Path
) -> None:
    port = free_port()
    config = write_config(tmp_path / "jobwarden.toml", "http://127.0.0.1:9", {})
    ready = ReadySocket(tmp_path / "notify")
    env = child_env(
        DATABASE_URL=db_url,
        JW_CONFIG=str(config),
        JW_LOG_LEVEL="INFO",
        NOTIFY_SOCKET=str(ready.path),
    )
    proc: subprocess.Popen[bytes] = spawn(
        ["receiver", "--port", str(port)], tmp_path / "receiver.log", env
    )
    try:
        await ready.wait_ready(proc, "jobwarden receiver")
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
    finally:
        stop(proc)
        ready.close()
    line = _serving_line(tmp_path / "receiver.log")
    assert (line["http"], line["loop"], line["port"]) == ("httptools", "uvloop", port)


def test_a_served_app_runs_on_the_stack_it_reports(tmp_path: Path) -> None:
    """The bench's stack report (record_stack) is what the server actually ran."""
    loops: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        loops.append(serve.loop_name())
        await send({"type": "http.response.start", "status": 204})
        await send({"type": "http.response.body"})

    async def serve_one_request() -> int:
        async with serve_app(app) as url, httpx.AsyncClient(trust_env=False) as client:
            return (await client.get(url)).status_code

    serving = logging.getLogger("shared.serve")
    handlers, level = list(serving.handlers), serving.level
    record_stack(tmp_path / "stack.json")
    try:
        assert serve.run(serve_one_request()) == 204
    finally:  # the bench's handler belongs to a server process, not to this test run
        serving.handlers[:] = handlers
        serving.setLevel(level)
    assert loops == ["uvloop"]
    assert read_stack(tmp_path / "stack.json") == FAST
