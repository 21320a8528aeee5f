"""Callbacks that carry no signature: a token in the callback URL's query string.

Luma's generations (and Rev.ai's jobs) call back the URL given at creation and
sign nothing; the only secret they can carry is one in that URL. A user writes
`callback_url = "{webhook_url}?token={webhook_secret}"` and the `static_header`
scheme with `options = { query = "token" }`. The provider echoes the URL, token
and all, in every answer and in the callback's body: none of those copies may
reach the database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.ledger.states import LocalState as S
from tests.fixtures_providers.rig import preset_rig

TOKEN = "lumatok_3f9a1c7e5b2d4f6a8c0e1a3b5d7f9e2c"
ENV = {"LUMA_CALLBACK_TOKEN": TOKEN}


def luma(query: str = "token") -> dict[str, Any]:
    """The description a user writes for `GenerationsFixture`."""
    return {
        "create": {
            "path": "/generations",
            "idempotency": "none",
            "job_id": "/id",
            "state": "/state",
            "accepted_statuses": [201],
            "set_body": {"/callback_url": "{webhook_url}?" + query + "={webhook_secret}"},
        },
        "status": {
            "path": "/generations/{job_id}",
            "state": "/state",
            "state_map": {
                "queued": "pending",
                "dreaming": "running",
                "completed": "succeeded",
                "failed": "failed",
            },
        },
        "result": {"source": "inline", "inline": "/assets"},
        "webhooks": {
            "scheme": "static_header",
            "options": {"query": query},
            "secrets_env": "LUMA_CALLBACK_TOKEN",
            "job_id": "/id",
            "state": "/state",
        },
    }


class GenerationsFixture:
    """Luma-like generations that end when the test says; every answer echoes the
    create's body (`request`), callback URL included."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/generations", self.create, methods=["POST"]),
                Route("/generations/{gid}", self.status),
            ]
        )

    async def create(self, request: Request) -> Response:
        gid = f"gen_{len(self.jobs) + 1}"
        body = await request.json()
        self.jobs[gid] = {"id": gid, "state": "queued", "request": body, "assets": None}
        return JSONResponse(self.jobs[gid], status_code=201)

    async def status(self, request: Request) -> Response:
        job = self.jobs[request.path_params["gid"]]
        callback = job["request"].get("callback_url", "")
        # echoes no rule by name catches: percent-encoded, split into its parameters
        echoes = {"encoded": quote(callback, safe=""), "params": {"t": callback[-len(TOKEN) :]}}
        return JSONResponse({**job, "echo": echoes})

    def complete(self, gid: str) -> bytes:
        """The generation done; the callback's body, as Luma posts it."""
        self.jobs[gid].update(state="completed", assets={"video": f"https://cdn.test/{gid}.mp4"})
        return json.dumps(self.jobs[gid]).encode()


async def rows_holding(pool: Any, needle: str) -> list[str]:
    """Every table of the schema with a row whose text holds `needle` (a pg_dump's grep)."""
    tables = await pool.fetch(
        "SELECT quote_ident(table_name) AS t FROM information_schema.tables"
        " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    )
    found = []
    for row in tables:
        hit = await pool.fetchval(
            f"SELECT count(*) FROM {row['t']} AS r WHERE r::text LIKE '%' || $1 || '%'",
            needle,
        )
        if hit:
            found.append(row["t"])
    return found


async def test_a_callback_with_the_token_in_its_url_is_taken_and_the_token_never_stored(
    pool: Any, tmp_path: Path
) -> None:
    fx = GenerationsFixture()
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="luma",
        env=ENV,
        overrides=luma(),
        with_receiver=True,
    ) as r:
        op_id = await r.submit({"prompt": "a cat"})
        assert await r.settle(op_id, {S.ACCEPTED, S.OBSERVING}) in (S.ACCEPTED, S.OBSERVING)
        ((gid, job),) = fx.jobs.items()
        callback = job["request"]["callback_url"]
        assert callback == f"{r.hook_url}?token={TOKEN}"  # the provider was given the token
        body = fx.complete(gid)
        json_type = {"content-type": "application/json"}
        async with httpx.AsyncClient(headers=json_type) as http:
            forged = await http.post(f"{r.hook_url}?token=guess", content=body)
            bare = await http.post(r.hook_url, content=body)
            taken = await http.post(callback, content=body)
            again = await http.post(callback, content=body)
        assert (forged.status_code, bare.status_code) == (401, 400)
        assert (taken.status_code, taken.json()["status"]) == (200, "stored")
        assert again.json()["status"] == "duplicate"
        assert await r.settle(op_id, {S.SUCCEEDED}) is S.SUCCEEDED
        (event,) = await pool.fetch("SELECT * FROM webhook_events")
        assert event["operation_id"] == op_id and event["remote_job_id"] == gid
        # the body kept as sent but for the token (the callback URL it echoed)
        assert event["payload"]["request"]["callback_url"] == (f"{r.hook_url}?token=[redacted]")
        (create,) = await r.calls(op_id, "create")
        assert TOKEN not in json.dumps(dict(create), default=str)
        # each read's answer is kept without the token, however it was echoed
        reads = await r.calls(op_id, "status")
        assert reads and all('"t":"[redacted]"' in c["response_body"] for c in reads), reads
    assert await rows_holding(pool, TOKEN) == []
