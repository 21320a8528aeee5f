"""Result downloads that go wrong on the wire or at the storage behind the link, with
the real reconciler against a real loopback provider (the simulator preset's shape,
its result at a URL the status names, or at a path): a body cut short (Content-Length
not reached, a chunked body without its last chunk), a compression bomb, a pre-signed
link expired (S3's 403 AccessDenied, its and GCS's 400 ExpiredToken), a result that
changes between two fetches, and a 404 right after the job was read done (storage
not yet consistent). Whatever happens, no success is claimed on a bad or partial
result, the collection ends (bounded, on the test clock), and the operation says why.
(Redirect loops and non-http targets: test_provider_shapes.py; a body past max_bytes
sent without a length: test_transport_review.py; BOMs, JSONL lines, HTML for JSON:
the unit tests of shared/providers/results.py.)
"""

from __future__ import annotations

import contextlib
import gzip
import json
import tomllib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bench.harness import TestClock
from reconciler.steps.collect import MAX_RESULT_ATTEMPTS
from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.integration.test_url_review import rig, run

S = LocalState
RESULT = json.dumps({"job_id": "job-1", "items": [{"n": 1}, {"n": 2}]}).encode()
# the simulator preset's status counts: the result must hold its two items
COUNTS = {"total": 2, "succeeded": 2, "failed": 0}

# One answer to a result fetch: an ASGI exchange of its own.
Answer = Callable[[Send], Any]


def whole(body: bytes = RESULT, content_type: bytes = b"application/json", **more: bytes) -> Answer:
    """A complete answer: 200, its Content-Length, `body`."""

    async def answer(send: Send) -> None:
        headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
        headers += [(k.encode(), v) for k, v in more.items()]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return answer


def status_answer(code: int, body: bytes, content_type: bytes = b"application/xml") -> Answer:
    async def answer(send: Send) -> None:
        headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return answer


class CutShort(Exception):
    """The fixture's server drops the connection mid-body (uvicorn closes it)."""


def cut(*, chunked: bool) -> Answer:
    """Half the result, then the connection dropped: a Content-Length never reached,
    or a chunked body without its last (zero) chunk."""

    async def answer(send: Send) -> None:
        headers = [(b"content-type", b"application/json")]
        if not chunked:
            headers.append((b"content-length", b"%d" % len(RESULT)))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        half = RESULT[: len(RESULT) // 2]
        await send({"type": "http.response.body", "body": half, "more_body": True})
        raise CutShort

    return answer


@dataclass(frozen=True)
class _Asgi:
    """An ASGI callable Starlette routes to as an app (a bare function it would call
    with a Request): the answer is written frame by frame, cuts included."""

    app: Callable[[Scope, Receive, Send], Any]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@dataclass
class Storage:
    """The simulator preset's shape: a job done at once; its result link (fresh at each
    status read: `?v=N`) answered, fetch after fetch, by `answers` (the last repeats)."""

    answers: list[Answer]
    fetches: list[str] = field(default_factory=list)  # each fetch's query
    reads: int = 0

    def app(self) -> Starlette:
        async def create(_request: Request) -> JSONResponse:
            return JSONResponse({"job_id": "job-1", "state": "queued"}, status_code=202)

        async def status(request: Request) -> JSONResponse:
            self.reads += 1
            base = str(request.base_url).rstrip("/")
            return JSONResponse(
                {
                    "job_id": "job-1",
                    "state": "succeeded",
                    "result_url": f"{base}/results/job-1?v={self.reads}",
                    "counts": COUNTS,
                }
            )

        async def result(scope: Scope, _receive: Receive, send: Send) -> None:
            n = len(self.fetches)
            self.fetches.append(scope["query_string"].decode())
            await self.answers[min(n, len(self.answers) - 1)](send)

        return Starlette(
            routes=[
                Route("/v1/jobs", create, methods=["POST"]),
                Route("/v1/jobs/{job_id}", status, methods=["GET"]),
                Route("/results/{job_id}", _Asgi(result)),
            ]
        )


def video() -> dict[str, Any]:
    """The simulator preset's description (no webhooks), its result a binary file
    (an MP4) at the link the status names: a whole description, for `items` and the
    JSON checks cannot be left out of the preset's by an override."""
    preset = resources.files("shared.providers").joinpath("presets", "simulator.toml")
    described = tomllib.loads(preset.read_text())
    for key in ("base_url", "limits", "webhooks"):
        described.pop(key)
    expect = {"content_types": ["video/mp4"], "checksum": "none"}
    described["result"] = {"source": "url", "format": "binary", "expect": expect}
    return described


def described_rig(
    pool: Any, tmp_path: Path, storage: Storage, clock: TestClock, described: dict[str, Any]
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    app = storage.app()
    return preset_rig(
        pool, tmp_path, app, preset=None, name="video", env={}, overrides=described, clock=clock
    )


async def collected(
    pool: Any,
    tmp_path: Path,
    clock: TestClock,
    storage: Storage,
    overrides: Any = None,
    *,
    described: dict[str, Any] | None = None,
) -> tuple[LocalState, str, bytes | None, list[Any]]:
    """Submit, run a few claims' worth of the test clock; the end state, its reason,
    the valid result's bytes (None: none stored) and the result fetches on record.
    The simulator preset with `overrides`, or the whole description `described`."""
    app = storage.app()
    if described is None:
        chosen = rig(pool, tmp_path, app, clock, overrides)
    else:
        chosen = described_rig(pool, tmp_path, storage, clock, described)
    async with chosen as r:
        op_id = await r.submit({})
        state = await run(r, op_id, clock)
        valid = await pool.fetchval(
            "SELECT count(*) FROM results WHERE operation_id = $1 AND valid", op_id
        )
        stored = await r.result_bytes(op_id) if valid else None
        reason = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
        )
        fetches = await r.calls(op_id, "result")
    return state, reason, stored, fetches


# ------------------------------------------------------------------ cut short


@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
async def test_a_download_cut_mid_body_is_fetched_again(
    pool: Any, tmp_path: Path, clock: TestClock, chunked: bool
) -> None:
    """The connection drops mid-body: the half is never taken for the result; the next
    attempt's fetch gets it whole."""
    storage = Storage([cut(chunked=chunked), whole()])
    state, reason, stored, fetches = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.SUCCEEDED, RESULT), reason
    assert [f["status_code"] for f in fetches] == [None, 200]
    assert fetches[0]["error_category"] is not None


@pytest.mark.parametrize("chunked", [False, True], ids=["content_length", "chunked"])
async def test_a_download_cut_every_time_is_result_unavailable_never_a_success(
    pool: Any, tmp_path: Path, clock: TestClock, chunked: bool
) -> None:
    storage = Storage([cut(chunked=chunked)])
    state, reason, stored, fetches = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.RESULT_UNAVAILABLE, None), reason
    assert "kept failing" in reason, reason
    assert 6 <= len(fetches) <= 7  # bounded: the collection's attempts, not for ever


# ------------------------------------------------------------------ too large


BOMB_DECODED = 64 * 1024 * 1024  # 64 MiB of zeros: ~64 KiB gzipped


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compression_bomb_is_read_no_further_than_max_bytes(
    pool: Any, tmp_path: Path, clock: TestClock, coding: str
) -> None:
    zeros = b"\0" * BOMB_DECODED
    body = gzip.compress(zeros, mtime=0) if coding == "gzip" else zlib.compress(zeros)
    assert len(body) < 256 * 1024
    storage = Storage([whole(body, **{"content-encoding": coding.encode()})])
    limits = {"result": {"expect": {"max_bytes": 1024 * 1024}}}
    state, reason, stored, _ = await collected(pool, tmp_path, clock, storage, limits)
    assert (state, stored) == (S.RESULT_VALIDATION_FAILED, None), reason
    assert "larger than max_bytes" in reason, reason


@pytest.mark.parametrize("coding", [b"x-gzip", b"X-GZIP"])
async def test_a_result_sent_x_gzip_is_decoded_as_gzip(
    pool: Any, tmp_path: Path, clock: TestClock, coding: bytes
) -> None:
    """RFC 9110 8.4.1.3: "x-gzip" is gzip. Before, it was left undecoded, and a valid
    gzipped JSON result was result_validation_failed, "not valid JSON"."""
    storage = Storage([whole(gzip.compress(RESULT, mtime=0), **{"content-encoding": coding})])
    state, reason, stored, _ = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.SUCCEEDED, RESULT), reason


MP4 = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 64


@pytest.mark.parametrize("coding", [b"br", b"zstd", b"compress", b"gzip, br"])
async def test_a_result_in_a_coding_not_undone_is_never_stored_as_the_result(
    pool: Any, tmp_path: Path, clock: TestClock, coding: bytes
) -> None:
    """A CDN answers Brotli (or zstd) although identity was asked for: the bytes are
    still encoded. Before, a binary result passed, the encoded bytes stored as the
    video and the operation succeeded; now result_validation_failed, naming the
    coding."""
    encoded = b"\x1b\x4f\x00\xf8" + MP4[4:]  # not the MP4: what its encoding made of it
    if coding.startswith(b"gzip"):
        encoded = gzip.compress(encoded, mtime=0)
    answer = whole(encoded, b"video/mp4", **{"content-encoding": coding})
    state, reason, stored, _ = await collected(
        pool, tmp_path, clock, Storage([answer]), described=video()
    )
    assert (state, stored) == (S.RESULT_VALIDATION_FAILED, None), reason
    assert "Content-Encoding" in reason and "not undone" in reason, reason


async def test_a_json_result_in_brotli_is_refused_naming_the_coding(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    storage = Storage([whole(b"\x1b\x2e\x00\xf8 brotli", **{"content-encoding": b"br"})])
    state, reason, stored, _ = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.RESULT_VALIDATION_FAILED, None), reason
    assert "Content-Encoding br," in reason, reason


async def test_a_result_brotli_over_gzip_is_refused_naming_brotli_not_retried(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """`Content-Encoding: gzip, br` lists the codings in the order applied (RFC 9110
    8.4): gzip first, then Brotli, outermost. Gzip was undone whatever its place, so
    the Brotli bytes were fed to gunzip: a decoding error on every fetch, retried
    into result_unavailable "result fetch kept failing", never naming the cause.
    A coding under one that is not undone is left too: refused at once, naming br."""
    brotli_outside = b"\x1b\x4f\x00\xf8" + gzip.compress(MP4, mtime=0)
    answer = whole(brotli_outside, b"video/mp4", **{"content-encoding": b"gzip, br"})
    state, reason, stored, fetches = await collected(
        pool, tmp_path, clock, Storage([answer]), described=video()
    )
    assert (state, stored) == (S.RESULT_VALIDATION_FAILED, None), reason
    assert "Content-Encoding br," in reason, reason
    assert len(fetches) == 1, fetches


@pytest.mark.parametrize("coding", [b"identity", b"binary"])
async def test_a_binary_result_sent_as_it_is_is_stored(
    pool: Any, tmp_path: Path, clock: TestClock, coding: bytes
) -> None:
    """No coding, or a name that is none (a server's "binary"): the bytes as sent."""
    answer = whole(MP4, b"video/mp4", **{"content-encoding": coding})
    state, reason, stored, _ = await collected(
        pool, tmp_path, clock, Storage([answer]), described=video()
    )
    assert (state, stored) == (S.SUCCEEDED, MP4), reason


# ------------------------------------------------------------------ expired links

S3_EXPIRED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Request has expired</Message><Expires>2026-12-06T04:00:00Z</Expires></Error>"
)
S3_TOKEN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ExpiredToken</Code>'
    b"<Message>The provided token has expired.</Message></Error>"
)
GCS_EXPIRED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>ExpiredToken</Code>"
    b"<Message>Invalid argument.</Message><Details>The provided token has expired. "
    b"Request signature expired at: 2026-12-06T04:00:00+00:00</Details></Error>"
)
EXPIRED = {
    "s3_access_denied": status_answer(403, S3_EXPIRED),
    "s3_expired_token": status_answer(400, S3_TOKEN),
    "gcs_expired_token": status_answer(400, GCS_EXPIRED),
}


@pytest.mark.parametrize("how", EXPIRED)
async def test_an_expired_signed_link_is_fetched_again_from_a_fresh_read(
    pool: Any, tmp_path: Path, clock: TestClock, how: str
) -> None:
    storage = Storage([EXPIRED[how], whole()])
    state, reason, stored, _ = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.SUCCEEDED, RESULT), reason
    # the second fetch went to the link the fresh read named
    assert storage.fetches[0] != storage.fetches[1]


@pytest.mark.parametrize("how", EXPIRED)
async def test_a_link_expired_every_time_ends_naming_the_storages_code(
    pool: Any, tmp_path: Path, clock: TestClock, how: str
) -> None:
    storage = Storage([EXPIRED[how]])
    state, reason, stored, fetches = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.RESULT_UNAVAILABLE, None), reason
    assert ("AccessDenied" if how.endswith("denied") else "ExpiredToken") in reason, reason
    assert len(fetches) <= 7


# ------------------------------------------------------------------ consistency


async def test_a_result_changed_between_a_cut_fetch_and_its_retry_is_stored_as_fetched(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The first fetch is cut; the retry gets other bytes (the provider rewrote it):
    what is stored is one whole answer, never half of one and half of the other."""
    other = json.dumps({"job_id": "job-1", "items": [{"n": 3}, {"n": 4}]}).encode()
    storage = Storage([cut(chunked=False), whole(other)])
    state, reason, stored, _ = await collected(pool, tmp_path, clock, storage)
    assert (state, stored) == (S.SUCCEEDED, other), reason


NOT_YET = status_answer(404, b'{"error": "NoSuchKey"}', b"application/json")


# The result at a path of the provider's own (not a link the status names).
AT_A_PATH: dict[str, Any] = {"result": {"source": "path", "path": "/results/{job_id}"}}


@pytest.mark.parametrize("misses", [1, 2, 3])
@pytest.mark.parametrize("where", ["url", "path"])
async def test_a_result_not_there_yet_right_after_success_is_fetched_again(
    pool: Any, tmp_path: Path, clock: TestClock, misses: int, where: str
) -> None:
    """Storage behind the job is eventually consistent: 404 for a moment after the job
    is read done, then 200. Fetched again, with backoff, until it is there. Before,
    a result at a path was result_unavailable at the first 404, one at a link the
    status named at the second."""
    storage = Storage([*([NOT_YET] * misses), whole()])
    over = AT_A_PATH if where == "path" else None
    state, reason, stored, fetches = await collected(pool, tmp_path, clock, storage, over)
    assert (state, stored) == (S.SUCCEEDED, RESULT), reason
    assert [f["status_code"] for f in fetches] == [404] * misses + [200]


@pytest.mark.parametrize("where", ["url", "path"])
async def test_a_result_never_there_is_result_unavailable_after_bounded_fetches(
    pool: Any, tmp_path: Path, clock: TestClock, where: str
) -> None:
    storage = Storage([NOT_YET])
    over = AT_A_PATH if where == "path" else None
    state, reason, stored, fetches = await collected(pool, tmp_path, clock, storage, over)
    assert (state, stored) == (S.RESULT_UNAVAILABLE, None), reason
    assert "404" in reason and "NoSuchKey" in reason, reason
    assert len(fetches) == MAX_RESULT_ATTEMPTS  # bounded: one fetch an attempt
