"""`result.compression`: the document `result.follow` reads names how the linked file
is compressed (Amazon SP-API's report document: `"compressionAlgorithm": "GZIP"`,
absent when it is not), and the file is judged and kept decompressed. Its store
(S3) serves it with no Content-Encoding, so no transport undoes it; before, the
gzip bytes were the result, "not valid UTF-8" for a text report. The end-to-end
collection is tests/integration/test_unseen_round55.py."""

from __future__ import annotations

import gzip
import hashlib
import json
from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.facts import ResultCheck
from shared.providers.messages import HttpResponse
from shared.providers.results import decompressed

TSV = b"item-name\tseller-sku\nSnowboard\tSB-1\n"


def load(**result: Any) -> Any:
    table = {
        "base_url": "https://sellingpartnerapi-na.amazon.test",
        "create": {"path": "/reports", "idempotency": "none", "job_id": "/reportId"},
        "status": {
            "path": "/reports/{job_id}",
            "state": "/processingStatus",
            "state_map": {"IN_PROGRESS": "running", "DONE": "succeeded"},
        },
        "result": {
            "source": "files",
            "file_ids": "/reportDocumentId",
            "path": "/documents/{file_id}",
            "follow": "/url",
            "compression": "/compressionAlgorithm",
            "format": "text",
        }
        | result,
    }
    return parse_providers({"providers": {"sp": table}}, "config.toml", {})["sp"]


def document(**named: Any) -> HttpResponse:
    body = {"reportDocumentId": "amzn1.spdoc.1", "url": "https://s3.test/doc"} | named
    return HttpResponse(200, {"content-type": "application/json"}, json.dumps(body).encode())


def file(data: bytes, status: int = 200) -> HttpResponse:
    return HttpResponse(status, {"content-type": "text/plain"}, data, url="https://s3.test/doc")


@pytest.mark.parametrize("algorithm", ["GZIP", "gzip"])
def test_a_file_its_document_calls_gzip_is_kept_decompressed(algorithm: str) -> None:
    packed = gzip.compress(TSV)
    opened = decompressed(load(), document(compressionAlgorithm=algorithm), file(packed))
    assert isinstance(opened, HttpResponse)
    assert opened.body == TSV
    # a digest header covers the bytes as sent: the compressed ones
    assert opened.sent_digests["sha256"] == hashlib.sha256(packed).digest()


def test_several_gzip_members_are_one_file() -> None:
    packed = gzip.compress(TSV[:10]) + gzip.compress(TSV[10:])
    opened = decompressed(load(), document(compressionAlgorithm="GZIP"), file(packed))
    assert isinstance(opened, HttpResponse) and opened.body == TSV


@pytest.mark.parametrize("named", [{}, {"compressionAlgorithm": None}])
def test_a_file_its_document_names_no_algorithm_is_as_sent(named: dict[str, Any]) -> None:
    answer = file(TSV)
    assert decompressed(load(), document(**named), answer) is answer


def test_a_refused_fetch_is_left_to_its_own_verdict() -> None:
    answer = file(b"<Error><Code>AccessDenied</Code></Error>", status=403)
    assert decompressed(load(), document(compressionAlgorithm="GZIP"), answer) is answer


def test_bytes_that_are_no_gzip_or_cut_short_are_invalid_never_kept() -> None:
    for data in (TSV, gzip.compress(TSV)[:-12]):
        check = decompressed(load(), document(compressionAlgorithm="GZIP"), file(data))
        assert isinstance(check, ResultCheck) and not check.ok
        assert "says the file is gzip (/compressionAlgorithm" in check.reason, check.reason


def test_another_algorithm_is_invalid_naming_it() -> None:
    check = decompressed(load(), document(compressionAlgorithm="ZSTD"), file(TSV))
    assert isinstance(check, ResultCheck) and not check.ok
    assert "compressed with ZSTD" in check.reason and "not undone" in check.reason


def test_a_bomb_stops_past_max_bytes() -> None:
    desc = load(expect={"max_bytes": 100_000})
    packed = gzip.compress(b"\0" * 10_000_000)  # about 10 KB as sent
    opened = decompressed(desc, document(compressionAlgorithm="GZIP"), file(packed))
    assert isinstance(opened, HttpResponse) and len(opened.body) == 100_001


def test_compression_is_refused_without_follow() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_providers(
            {
                "providers": {
                    "sp": {
                        "base_url": "https://sp.test",
                        "create": {"path": "/r", "idempotency": "none", "job_id": "/id"},
                        "status": {
                            "path": "/r/{job_id}",
                            "state": "/s",
                            "state_map": {"DONE": "succeeded"},
                            "result_url": "/url",
                        },
                        "result": {
                            "source": "url",
                            "compression": "/compressionAlgorithm",
                            "format": "text",
                        },
                    }
                }
            },
            "config.toml",
            {},
        )
    message = str(caught.value)
    assert message.startswith("config.toml: providers.sp.result.compression: only with"), message


def test_a_file_cut_at_max_bytes_is_too_large_not_said_to_be_no_gzip() -> None:
    """A download stops at max_bytes + 1 bytes as sent: a compressed file that size
    (incompressible content, gzip adds a little) ends its stream short because it
    was cut, not because it is no gzip. It is the file as sent, larger than
    max_bytes; before, "says the file is gzip, but it is not"."""
    desc = load(expect={"max_bytes": 1000})
    content = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(31))  # 992 bytes
    packed = gzip.compress(content)  # larger than the content: no redundancy to pack
    assert len(packed) > 1001
    cut = packed[:1001]
    opened = decompressed(desc, document(compressionAlgorithm="GZIP"), file(cut))
    assert isinstance(opened, HttpResponse), opened
    assert len(opened.body) > 1000


@pytest.mark.parametrize("padding", [b"\0", b"\0" * 512])
def test_zero_padding_after_a_member_is_no_data(padding: bytes) -> None:
    """gzip files may be padded with zero bytes (a block-sized write, a tape): gzip
    and Python's gzip module read past them, as here; before, the padding was a
    next member's bad header and the report 'not gzip'. Other trailing bytes are
    still refused."""
    packed = gzip.compress(TSV[:10]) + padding + gzip.compress(TSV[10:]) + padding
    opened = decompressed(load(), document(compressionAlgorithm="GZIP"), file(packed))
    assert isinstance(opened, HttpResponse) and opened.body == TSV
    check = decompressed(
        load(), document(compressionAlgorithm="GZIP"), file(gzip.compress(TSV) + b"junk")
    )
    assert isinstance(check, ResultCheck) and not check.ok


def test_an_empty_file_called_gzip_is_no_gzip_and_an_empty_stream_is_empty() -> None:
    """No bytes at all are no gzip stream (gzip -d: "unexpected end of file"; even
    an empty file packed is 20 bytes): an upload that never landed, never an empty
    result passed as the report. Before, it was read as an empty file."""
    check = decompressed(load(), document(compressionAlgorithm="GZIP"), file(b""))
    assert isinstance(check, ResultCheck) and not check.ok
    assert "says the file is gzip" in check.reason, check.reason
    opened = decompressed(load(), document(compressionAlgorithm="GZIP"), file(gzip.compress(b"")))
    assert isinstance(opened, HttpResponse) and opened.body == b""


def test_max_bytes_past_what_a_decompressor_can_be_told_is_refused_at_load() -> None:
    """max_bytes + 1 is the most a decompression is asked for (zlib's max_length, a C
    size): TOML's largest integer, written for "no limit", raised OverflowError out
    of the collection at the first gzip file. Refused at load now; the bound (1 EiB)
    is no limit any result reaches, and it decompresses."""
    with pytest.raises(ConfigError, match=r"result\.expect\.max_bytes: must be at most"):
        load(expect={"max_bytes": 2**63 - 1})
    desc = load(expect={"max_bytes": 2**60})
    opened = decompressed(desc, document(compressionAlgorithm="GZIP"), file(gzip.compress(TSV)))
    assert isinstance(opened, HttpResponse) and opened.body == TSV


def test_a_file_the_transport_decoded_already_is_as_it_came() -> None:
    """Served with `Content-Encoding: gzip`, the file reaches us decoded by the
    transport: its document's GZIP was undone once already. Before, undone again,
    it was "the file is gzip, but it is not"; a file packed twice (still gzip after
    the transport's decoding) is undone once more."""
    decoded = HttpResponse(
        200,
        {"content-type": "text/plain", "content-encoding": "gzip"},
        TSV,
        url="https://s3.test/doc",
    )
    opened = decompressed(load(), document(compressionAlgorithm="GZIP"), decoded)
    assert isinstance(opened, HttpResponse) and opened.body == TSV
    twice = HttpResponse(200, {"content-encoding": "gzip"}, gzip.compress(TSV))
    again = decompressed(load(), document(compressionAlgorithm="GZIP"), twice)
    assert isinstance(again, HttpResponse) and again.body == TSV
