"""An answer's body is read within its `Reading`: decoded a bounded step at a time."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest

from reconciler.calls import answer_reading
from reconciler.lanes import (
    ANSWER,
    MAX_ANSWER_BYTES,
    BodyTooLarge,
    Reading,
    _body,
    _decode,
    _layers,
    download,
)
from tests.harness import sim_providers

MIB = 1024 * 1024


class Chunks(httpx.AsyncByteStream):
    """A response stream that hands out fixed chunks, counting what was taken."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = list(chunks)
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.taken += 1
            yield chunk


def response(chunks: Sequence[bytes], coding: str | None = None) -> httpx.Response:
    headers = [("Content-Encoding", coding)] if coding else []
    return httpx.Response(200, headers=headers, stream=Chunks(chunks))


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


def deflate(data: bytes, *, raw: bool) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


BODY = os.urandom(200_000) + b"a" * 3_000_000 + os.urandom(50_000)


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", lambda b: deflate(b, raw=False)),
        ("deflate", lambda b: deflate(b, raw=True)),
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
        ("deflate, gzip", lambda b: gzip.compress(deflate(b, raw=True))),
        ("identity, gzip", gzip.compress),
    ],
)
@pytest.mark.parametrize("chunk", [1, 7, 65_536])
async def test_a_coded_body_decodes_as_a_whole_decode_would(
    coding: str, encode: object, chunk: int
) -> None:
    assert callable(encode)
    body = BODY if chunk > 1 else BODY[:300_000]  # byte by byte: a shorter body
    wire = encode(body)
    got = await _body(response(split(wire, chunk), coding), Reading(keep=8 * MIB), None)
    assert got == body


async def test_a_stacked_bomb_stops_one_step_past_the_cap() -> None:
    inner = b"0" * (256 * MIB)
    bomb = gzip.compress(gzip.compress(inner, 9), 9)
    del inner
    layers = _layers("gzip, gzip")
    out = _decode(layers, bomb, 1000)
    assert len(out) == 1001  # one more than the room: "too large", no further


async def test_an_answer_past_its_cap_is_refused_without_reading_on() -> None:
    chunks = [b"x" * 1000] * 50
    resp = response(chunks)
    with pytest.raises(BodyTooLarge):
        await _body(resp, Reading(keep=4_500), None)
    stream = resp.stream
    assert isinstance(stream, Chunks) and stream.taken == 5  # 5000 > 4500: no sixth read


async def test_a_download_past_max_bytes_keeps_max_bytes_plus_one() -> None:
    chunks = [b"y" * 1000] * 50
    resp = response(chunks)
    got = await _body(resp, download(4_500, 1.0, 2.0), None)
    assert got == b"y" * 4_501
    stream = resp.stream
    assert isinstance(stream, Chunks) and stream.taken == 5


async def test_the_pace_sees_the_bytes_on_the_wire() -> None:
    wire = gzip.compress(b"z" * 100_000)
    seen: list[int] = []
    got = await _body(response(split(wire, 50), "gzip"), download(MIB, 1.0, 2.0), seen.append)
    assert got == b"z" * 100_000
    assert seen[-1] == len(wire) and seen == sorted(seen)


async def test_an_undecodable_body_is_an_httpx_decoding_error() -> None:
    with pytest.raises(httpx.DecodingError):
        await _body(response([b"not gzip at all"], "gzip"), Reading(), None)


async def test_a_plain_small_body_is_returned_as_it_came() -> None:
    chunk = b'{"state":"running"}'
    got = await _body(response([chunk]), Reading(), None)
    assert got is chunk  # one chunk: no join, no copy


def test_only_an_answer_that_may_carry_the_result_may_be_larger() -> None:
    plain = sim_providers("http://sim.example")["sim"]
    inline = sim_providers(
        "http://sim.example",
        overrides={
            "result": {"source": "inline", "inline": "/result", "expect": {"checksum": "none"}}
        },
    )["sim"]
    assert answer_reading(plain, "status") is ANSWER
    assert answer_reading(inline, "cancel") is ANSWER
    carrying = answer_reading(inline, "status")
    assert carrying.keep == MAX_ANSWER_BYTES + inline.result.expect.max_bytes
    assert not carrying.cut and carrying.min_rate is None


# A second reading (a review of the digest change): a body that decodes to only a
# part of the document must never pass as the whole, since a digest over the bytes
# as sent then matches all the same.


@pytest.mark.parametrize("chunk", [1, 5, 65_536])
async def test_a_gzip_body_of_several_members_decodes_whole(chunk: int) -> None:
    first, second = os.urandom(40_000), b"b" * 500_000
    wire = gzip.compress(first) + gzip.compress(second)  # `cat a.gz b.gz`, RFC 1952 2.2
    if chunk == 1:
        first, second = first[:3_000], b"b" * 9_000
        wire = gzip.compress(first) + gzip.compress(second)
    got = await _body(response(split(wire, chunk), "gzip"), Reading(keep=8 * MIB), None)
    assert got == first + second


@pytest.mark.parametrize("coding", ["gzip", "deflate", "gzip, gzip"])
@pytest.mark.parametrize("cut", [1, 9, 500])
async def test_a_coded_body_cut_short_is_a_decoding_error(coding: str, cut: int) -> None:
    body = os.urandom(3_000) + b"c" * 50_000
    wire = {
        "gzip": gzip.compress(body),
        "deflate": deflate(body, raw=False),
        "gzip, gzip": gzip.compress(gzip.compress(body)),
    }[coding]
    with pytest.raises(httpx.DecodingError, match="ends before its stream does"):
        await _body(response(split(wire[:-cut], 4_096), coding), Reading(keep=8 * MIB), None)


async def test_bytes_after_a_deflate_stream_are_a_decoding_error() -> None:
    wire = deflate(b"d" * 10_000, raw=True) + b"trailing"
    with pytest.raises(httpx.DecodingError, match="after the end"):
        await _body(response([wire], "deflate"), Reading(), None)


async def test_garbage_after_a_gzip_member_is_a_decoding_error() -> None:
    wire = gzip.compress(b"e" * 10_000) + b"not a member"
    with pytest.raises(httpx.DecodingError):
        await _body(response([wire], "gzip"), Reading(), None)


async def test_an_empty_body_announced_as_gzip_is_empty() -> None:
    """A 204 or a HEAD-like answer with the header and no bytes: nothing to decode."""
    assert await _body(response([b""], "gzip"), Reading(), None) == b""


async def test_a_download_cut_at_its_size_is_not_a_decoding_error() -> None:
    """Past max_bytes the download stops mid-stream: "too large" says it, not the coding."""
    wire = gzip.compress(b"f" * 100_000)
    got = await _body(response(split(wire, 1_000), "gzip"), download(4_500, 1.0, 2.0), None)
    assert got == b"f" * 4_501
