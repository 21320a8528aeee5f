"""A result made of several files the final status names by URL (`result.source =
"files"` with no `result.path`): an export whose finished job lists its shards as
signed links on a storage host (another host name, another port), each fetched
through the real reconciler as a result URL is, and joined into one document as
files mode joins its files.

Before, `source = "url"` fetched only the first URL (`status.result_url =
"/files/0"`), `source = "files"` needed a path template and `inline` kept only
links that expire.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reconciler.steps.collect import MAX_RESULT_ATTEMPTS
from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.common import json_response
from tests.fixtures_providers.rig import PresetRig, preset_rig

S = LocalState
ENDS = {
    S.SUCCEEDED,
    S.FAILED,
    S.NEEDS_ATTENTION,
    S.RESULT_UNAVAILABLE,
    S.RESULT_VALIDATION_FAILED,
}
KEY = "export-key"
SHARDS = {
    "part-0.jsonl": b'{"id": 1, "ok": true}\n{"id": 2, "ok": true}\n',
    "part-1.jsonl": b'{"id": 3, "ok": true}\n',
}
EXPIRED = b"<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"


class Export:
    """The export API (the rig's app) and its storage host (`cdn`), as seen by each."""

    def __init__(self, files: list[str]) -> None:
        self.files = files  # the URLs a finished job names
        self.reads = 0
        self.api_auth: list[str | None] = []
        self.cdn_auth: list[str | None] = []
        self.cdn_fetches: list[str] = []
        self.expired: set[str] = set()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/exports", self.create, methods=["POST"]),
                Route("/v1/exports/{eid}", self.status, methods=["GET"]),
            ]
        )

    def cdn(self) -> Starlette:
        return Starlette(routes=[Route("/shards/{name}", self.shard, methods=["GET"])])

    async def create(self, request: Request) -> Response:
        self.api_auth.append(request.headers.get("authorization"))
        return json_response({"id": "exp_1"})

    async def status(self, request: Request) -> Response:
        self.api_auth.append(request.headers.get("authorization"))
        self.reads += 1
        if self.reads < 2:
            return json_response({"id": "exp_1", "status": "running"})
        return json_response({"id": "exp_1", "status": "done", "files": self.files})

    async def shard(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        name = request.path_params["name"]
        self.cdn_fetches.append(name)
        if name in self.expired:
            return Response(EXPIRED, 403, media_type="application/xml")
        if name not in SHARDS:
            return Response(b"not found", 404)
        return Response(SHARDS[name], media_type="application/x-ndjson")


def described(**result: Any) -> dict[str, Any]:
    """The export as a user describes it; its storage host is `localhost`, which an
    operator names in allowed_hosts (a loopback name is refused otherwise)."""
    return {
        "auth": {"header": "Authorization", "value": "Bearer {secret}", "secret_env": "EXPORT_KEY"},
        "create": {
            "path": "/v1/exports",
            "idempotency": "none",
            "job_id": "/id",
            "accepted_statuses": [200],
        },
        "status": {
            "path": "/v1/exports/{job_id}",
            "state": "/status",
            "state_map": {"running": "running", "done": "succeeded", "failed": "failed"},
        },
        "result": {
            "source": "files",
            "file_ids": "/files",
            "format": "jsonl",
            "allowed_hosts": ["localhost"],
            **result,
        },
    }


@contextlib.asynccontextmanager
async def export_rig(
    pool: Any, tmp_path: Path, names: list[str], **result: Any
) -> AsyncIterator[tuple[PresetRig, Export]]:
    """The rig, with the storage host on `localhost` beside it; `names`: the shards
    the finished job names (a full URL is kept as given)."""
    fx = Export([])
    async with serve_app(fx.cdn()) as cdn_url:
        cdn = cdn_url.replace("127.0.0.1", "localhost")
        fx.files = [n if "://" in n else f"{cdn}/shards/{n}?sig=abc&exp=1767225600" for n in names]
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="export",
            env={"EXPORT_KEY": KEY},
            overrides=described(**result),
        ) as r:
            yield r, fx


async def test_every_file_named_by_url_is_fetched_and_stored_whole(
    pool: Any, tmp_path: Path
) -> None:
    """Two shards on another host: both fetched, joined in the order named (JSONL
    lines follow each other, as files mode joins), counted, stored; the API got
    our key on every call, the storage host never."""
    async with export_rig(pool, tmp_path, ["part-0.jsonl", "part-1.jsonl"]) as (r, fx):
        op_id = await r.submit({"table": "orders"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == SHARDS["part-0.jsonl"] + SHARDS["part-1.jsonl"]
        assert (await r.op(op_id)).result_summary["items_total"] == 3
        assert fx.cdn_fetches == ["part-0.jsonl", "part-1.jsonl"]
        assert fx.cdn_auth == [None, None]
        assert set(fx.api_auth) == {f"Bearer {KEY}"}
        fetched = [c["url"] for c in await r.calls(op_id, "result")]
        assert [u.split("?")[0].rsplit("/", 1)[1] for u in fetched] == list(SHARDS)
        assert all(u.startswith("http://localhost:") for u in fetched), fetched


async def test_one_expired_file_is_result_unavailable_never_a_success(
    pool: Any, tmp_path: Path
) -> None:
    """The second shard's link expired (403): the status is read again once for
    fresh links, the shard is still refused, and the result is result_unavailable
    with the storage host's answer. The first shard alone is never the result."""
    async with export_rig(pool, tmp_path, ["part-0.jsonl", "part-1.jsonl"]) as (r, fx):
        fx.expired.add("part-1.jsonl")
        op_id = await r.submit({"table": "orders"})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "HTTP 403" in reason, reason
        op = await r.op(op_id)
        assert op.result_id is None
        assert (
            await r.pool.fetchval(
                "SELECT count(*) FROM results WHERE operation_id = $1 AND valid", op_id
            )
            == 0
        )
        assert fx.cdn_fetches == ["part-0.jsonl", "part-1.jsonl"] * 2
        assert fx.cdn_auth == [None] * 4


async def test_a_file_url_on_an_internal_address_is_never_fetched(
    pool: Any, tmp_path: Path
) -> None:
    """A file URL the status names is checked as a result URL is: the cloud
    metadata service is refused before anything is sent."""
    names = ["part-0.jsonl", "http://169.254.169.254/latest/meta-data/iam"]
    async with export_rig(pool, tmp_path, names) as (r, fx):
        op_id = await r.submit({"table": "orders"})
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        reason = (await r.escalation(op_id))["reason"]
        assert "169.254.169.254" in reason and "link-local" in reason, reason
        assert fx.cdn_fetches == []
        assert await r.calls(op_id, "result") == []


async def test_a_file_url_path_template_still_names_its_id(pool: Any, tmp_path: Path) -> None:
    """With a path, file ids are ids (files mode as before): the shard names are
    ids fetched at the path on the API's own host, with our key."""
    api_files = {"path": "/v1/exports/{job_id}/files/{file_id}"}
    async with export_rig(pool, tmp_path, [], **api_files) as (r, fx):
        fx.files = ["f1"]
        op_id = await r.submit({"table": "orders"})
        # the API has no such route: a 404 from the provider's own host, fetched
        # again on the backoff (a result not there yet) until the attempts run out
        assert await r.settle(op_id, ENDS) is S.RESULT_UNAVAILABLE, await r.history(op_id)
        calls = await r.calls(op_id, "result")
        assert len(calls) == MAX_RESULT_ATTEMPTS
        assert {(c["url"], c["status_code"]) for c in calls} == {
            (f"{r.url}/v1/exports/exp_1/files/f1", 404)
        }
        assert fx.cdn_fetches == []
