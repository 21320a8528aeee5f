"""`result.base64` through the real reconciler, in two more shapes than Stability's
(test_unseen_round47): OpenAI's images answer, synchronous, the image at
`data[0].b64_json`; and a job whose status names a JSON file holding the audio
as `audio_base64` beside its alignment (ElevenLabs' "with timestamps" shape),
fetched by URL. The decoded bytes are the stored result, named by their digest;
a field that holds no bytes is a result_validation_failed, nothing stored."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared.ledger import audit
from shared.ledger.states import LocalState
from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.described import ENDS
from tests.fixtures_providers.rig import PresetRig, preset_rig

S = LocalState
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
# ElevenLabs' audio, a small MP3 frame's worth: its size is max_bytes below
AUDIO = b"ID3\x04\x00" + bytes(range(256)) * 12
LIMIT = len(AUDIO)


class Fakes:
    """OpenAI's `POST /v1/images/generations` (200 {"created", "data": [{"b64_json",
    "revised_prompt"}]}, synchronous), and a job API whose finished status names
    a result file `{"audio_base64", "alignment"}` on the same host."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/images/generations", self.images, methods=["POST"]),
                Route("/v1/speech", self.speech, methods=["POST"]),
                Route("/v1/speech/{jid}", self.status, methods=["GET"]),
                Route("/files/{jid}.json", self.file, methods=["GET"]),
            ]
        )

    async def images(self, request: Request) -> Response:
        body = await read_json(request)
        b64 = base64.b64encode(PNG).decode()
        if body.get("prompt") == "wrapped":  # MIME's line breaks: not base64 text
            b64 = base64.encodebytes(PNG).decode()
        data = [{"b64_json": b64, "revised_prompt": "a cat, photographed"}]
        return json_response({"created": 1713833628, "data": data})

    async def speech(self, request: Request) -> Response:
        body = await read_json(request)
        jid = f"sp_{len(self.jobs) + 1}"
        self.jobs[jid] = {"audio": AUDIO + b"!" * int(body.get("over", 0))}
        return json_response({"id": jid}, 202)

    async def status(self, request: Request) -> Response:
        jid = request.path_params["jid"]
        url = f"{str(request.base_url).rstrip('/')}/files/{jid}.json"
        return json_response({"id": jid, "status": "done", "result_url": url})

    async def file(self, request: Request) -> Response:
        audio = self.jobs[request.path_params["jid"]]["audio"]
        alignment = {"characters": list("hello"), "character_start_times_seconds": [0.0] * 5}
        body = {"audio_base64": base64.b64encode(audio).decode(), "alignment": alignment}
        return json_response(body)


IMAGES = {
    "create": {
        "path": "/v1/images/generations",
        "idempotency": "none",
        "job_id": "/id",
        "sync_result_statuses": [200],
        "sync_result": "",
    },
    "status": {
        "path": "/v1/images/{job_id}",
        "state": "/status",
        "state_map": {"done": "succeeded"},
    },
    "result": {
        "source": "inline",
        "inline": "",
        "format": "binary",
        "base64": "/data/0/b64_json",
        "expect": {"content_types": ["image/png"]},
    },
}

SPEECH = {
    "create": {"path": "/v1/speech", "idempotency": "none", "job_id": "/id"},
    "status": {
        "path": "/v1/speech/{job_id}",
        "state": "/status",
        "state_map": {"done": "succeeded"},
        "result_url": "/result_url",
    },
    "result": {
        "source": "url",
        "format": "binary",
        "base64": "/audio_base64",
        "expect": {"content_types": ["audio/mpeg"], "max_bytes": LIMIT},
    },
}


def rig(pool: Any, tmp_path: Path, table: dict[str, Any]) -> Any:
    return preset_rig(
        pool, tmp_path, Fakes().app(), preset=None, name="b64", env={}, overrides=table
    )


async def stored(r: PresetRig, op_id: str) -> dict[str, Any]:
    row = await r.pool.fetchrow(
        "SELECT r.valid, r.sha256, r.size_bytes, r.content_type, r.storage_ref, r.reason"
        " FROM results r WHERE r.operation_id = $1",
        op_id,
    )
    return dict(row)


async def test_openai_images_answer_is_kept_as_the_png(pool: Any, tmp_path: Path) -> None:
    async with rig(pool, tmp_path, IMAGES) as r:
        op_id = await r.submit({"model": "gpt-image-1", "prompt": "a cat"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert await r.result_bytes(op_id) == PNG
        row = await stored(r, op_id)
        digest = hashlib.sha256(PNG).hexdigest()
        assert (row["valid"], row["sha256"], row["size_bytes"], row["content_type"]) == (
            True,
            digest,
            len(PNG),
            "image/png",
        )
        assert row["storage_ref"].endswith(digest)  # the file is named by the same digest
        async with r.pool.acquire() as conn:
            assert (await audit.verify(conn, op_id))[1] == []


async def test_openai_images_wrapped_base64_is_invalid_and_not_stored(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, IMAGES) as r:
        op_id = await r.submit({"model": "gpt-image-1", "prompt": "wrapped"})
        assert await r.settle(op_id, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(op_id)
        row = await stored(r, op_id)
        assert row["valid"] is False and row["storage_ref"] is None
        assert (
            "base64 field '/data/0/b64_json' is not valid base64: invalid base64 character"
            in (row["reason"])
        )
        assert (await r.op(op_id)).result_id is None


async def test_a_result_file_of_max_bytes_decoded_is_read_whole_one_more_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    """The JSON holding `max_bytes` of audio is a third larger than max_bytes: it is
    read whole (the download is bounded by the encoded size, not cut at max_bytes,
    which left invalid JSON), and a byte more of audio is refused by its size."""
    async with rig(pool, tmp_path, SPEECH) as r:
        fits = await r.submit({"text": "hello"})
        over = await r.submit({"text": "hello", "over": 1})
        assert await r.settle(fits, ENDS) is S.SUCCEEDED, await r.history(fits)
        assert await r.result_bytes(fits) == AUDIO
        row = await stored(r, fits)
        assert (row["sha256"], row["size_bytes"], row["content_type"]) == (
            hashlib.sha256(AUDIO).hexdigest(),
            LIMIT,
            "audio/mpeg",
        )
        assert await r.settle(over, ENDS) is S.RESULT_VALIDATION_FAILED, await r.history(over)
        refused = await stored(r, over)
        assert refused["valid"] is False and refused["storage_ref"] is None
        said = f"result larger than max_bytes ({LIMIT + 1} > {LIMIT} bytes)"
        assert refused["reason"] == said, refused["reason"]
