"""GET /v1/operations/{id}/result: the stored result file, served to agents.

A binary result (a video) reached an agent only as `result_ref`, a path on the
reconciler's host (a known gap). Served here over real HTTP (uvicorn on
loopback) by the API as `jobwarden_receiver`, from this host's results_dir.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared import ledger
from shared.ledger import evidence
from shared.ledger.states import Evidence
from shared.ledger.states import LocalState as S
from shared.result_store import ResultStore
from shared.serve import serve_app
from tests.integration.agent_support import make_token, receiver_pool, sim_settings
from tests.support import drive as advance
from tests.support import submit

VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4096  # 1 MiB and a bit


async def _succeeded_with_file(db: Any, results: Path, content: bytes, who: str) -> str:
    op_id = await submit(db, who=who)
    await advance(db, op_id, S.RESULT_COLLECTING)
    digest, ref = ResultStore(results).put(content)
    result_id = await evidence.record_result(
        db,
        evidence.ResultRecord(
            op_id,
            True,
            content_type="video/mp4",
            size_bytes=len(content),
            sha256=digest,
            storage_ref=ref,
        ),
    )
    await ledger.attach_result(db, op_id, result_id, result_ref=ref, summary=None, fence=None)
    await ledger.transition(
        db,
        op_id,
        S.RESULT_COLLECTING,
        S.SUCCEEDED,
        actor="reconciler:test",
        cause="result verified",
        evidence=(Evidence.RESULT, result_id),
    )
    return op_id


class Served:
    def __init__(self, url: str, alice: str, bob: str) -> None:
        self.url, self.alice, self.bob = url, alice, bob

    async def get(self, op_id: str, token: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url) as client:
            return await client.get(
                f"/v1/operations/{op_id}/result", headers={"Authorization": f"Bearer {token}"}
            )


@pytest_asyncio.fixture
async def served(db: Any, db_url: str, tmp_path: Path) -> AsyncIterator[Served]:
    settings = replace(sim_settings(), results_dir=tmp_path / "results")
    async with (
        receiver_pool(db_url) as pool,
        serve_app(Starlette(routes=OperationsApi(settings, pool).routes())) as url,
    ):
        yield Served(url, await make_token(db, "alice"), await make_token(db, "bob"))


async def test_an_agent_downloads_its_result_file_byte_for_byte_with_its_digest(
    served: Served, db: Any, tmp_path: Path
) -> None:
    op_id = await _succeeded_with_file(db, tmp_path / "results", VIDEO, "agent:alice")
    answer = await served.get(op_id, served.alice)
    assert answer.status_code == 200
    assert answer.content == VIDEO
    assert answer.headers["content-type"] == "video/mp4"
    digest = base64.b64encode(hashlib.sha256(VIDEO).digest()).decode()
    assert answer.headers["repr-digest"] == f"sha-256=:{digest}:"
    assert int(answer.headers["content-length"]) == len(VIDEO)
    # another agent's token sees nothing of it
    other = await served.get(op_id, served.bob)
    assert other.status_code == 404


async def test_a_result_file_damaged_since_it_was_stored_is_never_sent_whole(
    served: Served, db: Any, tmp_path: Path
) -> None:
    op_id = await _succeeded_with_file(db, tmp_path / "results", VIDEO, "agent:alice")
    stored = ResultStore(tmp_path / "results").path_for(hashlib.sha256(VIDEO).hexdigest())
    damaged = bytearray(VIDEO)
    damaged[-1] ^= 0xFF
    stored.write_bytes(bytes(damaged))
    with pytest.raises(httpx.RemoteProtocolError):
        await served.get(op_id, served.alice)  # cut short of its Content-Length


async def test_no_file_and_a_file_elsewhere_are_told_apart(
    served: Served, db: Any, tmp_path: Path
) -> None:
    running = await submit(db, who="agent:alice")
    answer = await served.get(running, served.alice)
    assert (answer.status_code, answer.json()["type"].rsplit(":", 1)[-1]) == (404, "no-result-file")
    # stored on the reconciler's host, not in this receiver's results_dir
    elsewhere = await _succeeded_with_file(db, tmp_path / "elsewhere", b"video", "agent:alice")
    answer = await served.get(elsewhere, served.alice)
    assert answer.status_code == 404
    assert answer.json()["type"].rsplit(":", 1)[-1] == "result-not-on-this-host"
