"""Checksum sources: Content-Digest, legacy Digest, a named header, a status-body field."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from typing import Any

from shared.ledger.states import RemoteState
from shared.providers import (
    Counts,
    HttpResponse,
    StatusFact,
    parse_providers,
    parse_status,
    validate_result,
)
from shared.providers.checksums import decode_digest
from shared.providers.description import ChecksumAlgorithm, ChecksumEncoding, ProviderDescription
from tests.unit.result_fixtures import counts, ok, provider, provider_table

BODY = b"id,status\n1,ok\n"
SHA256_HEX = hashlib.sha256(BODY).hexdigest()


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def status_checksum(**options: Any) -> ProviderDescription:
    checksum = {"source": "status", "field": "/output_sha256", "algorithm": "sha256", **options}
    return provider(format="csv", expect={"checksum": checksum})


# --------------------------------------------------------------------- status body


def test_status_field_is_read_by_the_status_parser() -> None:
    desc = status_checksum()
    body = {"status": "done", "output_sha256": SHA256_HEX, "result_url": "https://x/r"}
    fact = parse_status(desc, HttpResponse(200, {}, json.dumps(body).encode()))
    assert fact.remote_state is RemoteState.SUCCEEDED
    assert fact.result_checksum == SHA256_HEX


def test_status_field_absent_when_not_configured() -> None:
    body = {"status": "done", "output_sha256": SHA256_HEX}
    fact = parse_status(provider(), HttpResponse(200, {}, json.dumps(body).encode()))
    assert fact.result_checksum is None


def test_status_field_can_be_a_status_response_header() -> None:
    desc = status_checksum(field="header:X-Output-Sha256")
    resp = HttpResponse(200, {"X-Output-Sha256": SHA256_HEX}, b'{"status": "done"}')
    assert parse_status(desc, resp).result_checksum == SHA256_HEX


def test_status_checksum_matches() -> None:
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, SHA256_HEX))
    assert check.ok, check.reason


def test_status_checksum_hex_is_case_insensitive() -> None:
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, SHA256_HEX.upper()))
    assert check.ok, check.reason


def test_status_checksum_mismatch_names_the_source() -> None:
    other = hashlib.sha256(b"other").hexdigest()
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, other))
    assert not check.ok and not check.unavailable
    assert check.reason == "status field /output_sha256 sha256 mismatch"


def test_status_checksum_malformed_is_a_failure() -> None:
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, SHA256_HEX[:-2]))
    assert check.reason.startswith("status field /output_sha256 is not a hex sha256 digest: ")


def test_status_checksum_missing_when_required() -> None:
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0))
    assert check.reason == "status field /output_sha256 missing from the status"
    assert validate_result(status_checksum(), ok(BODY), None).reason == check.reason


def test_status_checksum_missing_when_optional_is_a_note() -> None:
    check = validate_result(status_checksum(required=False), ok(BODY), counts(1, 1, 0))
    assert check.ok
    assert check.notes == (
        "checksum not checked: status field /output_sha256 missing from the status",
    )


def test_status_checksum_optional_still_fails_on_mismatch() -> None:
    other = hashlib.sha256(b"other").hexdigest()
    check = validate_result(status_checksum(required=False), ok(BODY), counts(1, 1, 0, other))
    assert not check.ok


def test_status_checksum_labelled_with_its_algorithm_is_that_digest() -> None:
    """Marketo's `"fileChecksum": "sha256:<hex>"`: the label names the digest.
    Before, it was malformed, and every such result refused."""
    for label in ("sha256:", "SHA256:", "sha-256:", "SHA-256: "):
        check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, label + SHA256_HEX))
        assert check.ok, (label, check.reason)
    other = "sha256:" + hashlib.sha256(b"other").hexdigest()
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, other))
    assert check.reason == "status field /output_sha256 sha256 mismatch"
    # another algorithm's label is no digest of this one
    md5 = "md5:" + hashlib.md5(BODY).hexdigest()
    check = validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, md5))
    assert check.reason.startswith("status field /output_sha256 is not a hex sha256 digest: ")
    sha512 = "sha512:" + SHA256_HEX
    assert not validate_result(status_checksum(), ok(BODY), counts(1, 1, 0, sha512)).ok


def test_status_checksum_sha512_base64() -> None:
    desc = status_checksum(algorithm="sha512", encoding="base64")
    good = b64(hashlib.sha512(BODY).digest())
    assert validate_result(desc, ok(BODY), counts(1, 1, 0, good)).ok
    short = b64(hashlib.sha256(BODY).digest())  # right encoding, wrong length
    assert not validate_result(desc, ok(BODY), counts(1, 1, 0, short)).ok


def test_status_checksum_md5_for_legacy_stores() -> None:
    desc = status_checksum(algorithm="md5")
    good = hashlib.md5(BODY).hexdigest()
    assert validate_result(desc, ok(BODY), counts(1, 1, 0, good)).ok


def test_status_checksum_covers_all_parts_in_order() -> None:
    desc = parse_providers(
        provider_table(
            {
                "source": "files",
                "path": "/v1/files/{file_id}",
                "file_ids": "/file_ids",
                "format": "text",
                "expect": {
                    "checksum": {"source": "status", "field": "/sha", "algorithm": "sha256"}
                },
            }
        ),
        "test.toml",
        {},
    )["p"]
    whole = hashlib.sha256(b"part one|part two").hexdigest()
    parts = [ok(b"part one|", "text/plain"), ok(b"part two", "text/plain")]
    assert validate_result(desc, parts, counts(1, 1, 0, whole)).ok
    assert not validate_result(desc, parts[::-1], counts(1, 1, 0, whole)).ok


# --------------------------------------------------------------------- named header


def header_checksum(**options: Any) -> ProviderDescription:
    checksum = {"source": "header", "header": "x-amz-checksum-sha256", "algorithm": "sha256"}
    return provider(format="binary", expect={"checksum": {**checksum, **options}})


def test_named_header_base64() -> None:
    desc = header_checksum(encoding="base64")
    good = b64(hashlib.sha256(BODY).digest())
    assert validate_result(desc, ok(BODY, **{"x-amz-checksum-sha256": good}), None).ok
    bad = b64(hashlib.sha256(b"x").digest())
    check = validate_result(desc, ok(BODY, **{"x-amz-checksum-sha256": bad}), None)
    assert check.reason == "header x-amz-checksum-sha256 sha256 mismatch"


def test_named_header_missing() -> None:
    check = validate_result(header_checksum(), ok(BODY), None)
    assert check.reason == "header x-amz-checksum-sha256 missing"


def test_named_header_per_part_names_the_part() -> None:
    desc = parse_providers(
        provider_table(
            {
                "source": "files",
                "path": "/v1/files/{file_id}",
                "file_ids": "/file_ids",
                "format": "text",  # binary: one file only
                "expect": {
                    "checksum": {"source": "header", "header": "X-Sha", "algorithm": "sha256"}
                },
            }
        ),
        "test.toml",
        {},
    )["p"]
    good = ok(b"a", **{"X-Sha": hashlib.sha256(b"a").hexdigest()})
    bad = ok(b"b", **{"X-Sha": hashlib.sha256(b"a").hexdigest()})
    assert validate_result(desc, [good, good], None).ok
    assert (
        validate_result(desc, [good, bad], None).reason == "header X-Sha sha256 mismatch (part 2)"
    )


def test_quoted_etag_md5() -> None:
    desc = header_checksum(header="ETag", algorithm="md5")
    etag = '"' + hashlib.md5(BODY).hexdigest() + '"'
    assert validate_result(desc, ok(BODY, ETag=etag), None).ok


# --------------------------------------------------------------------- digest headers


def test_content_digest_table_form_requires_sha512_when_asked() -> None:
    desc = provider(
        format="binary", expect={"checksum": {"source": "content-digest", "algorithm": "sha512"}}
    )
    only_256 = f"sha-256=:{b64(hashlib.sha256(BODY).digest())}:"
    check = validate_result(desc, ok(BODY, **{"Content-Digest": only_256}), None)
    assert check.reason == "Content-Digest missing or without sha-512"
    both = only_256 + f", sha-512=:{b64(hashlib.sha512(BODY).digest())}:"
    assert validate_result(desc, ok(BODY, **{"Content-Digest": both}), None).ok


def test_content_digest_optional_missing_is_a_note() -> None:
    desc = provider(
        format="binary", expect={"checksum": {"source": "content-digest", "required": False}}
    )
    check = validate_result(desc, ok(BODY), None)
    assert check.ok
    assert check.notes == ("checksum not checked: Content-Digest missing or without sha-256",)


def test_legacy_digest_md5_only_on_request() -> None:
    md5 = "MD5=" + b64(hashlib.md5(BODY).digest())
    plain = provider(format="binary", expect={"checksum": "digest"})
    assert not validate_result(plain, ok(BODY, Digest=md5), None).ok
    asked = provider(format="binary", expect={"checksum": {"source": "digest", "algorithm": "md5"}})
    assert validate_result(asked, ok(BODY, Digest=md5), None).ok
    wrong = "MD5=" + b64(hashlib.md5(b"x").digest())
    assert validate_result(asked, ok(BODY, Digest=wrong), None).reason == "Digest md5 mismatch"


def test_legacy_digest_sha256_base64() -> None:
    desc = provider(format="csv", expect={"checksum": "digest"})
    good = "SHA-256=" + b64(hashlib.sha256(BODY).digest())
    assert validate_result(desc, ok(BODY, Digest=good), None).ok


def test_checksum_is_checked_before_parsing() -> None:
    desc = status_checksum()
    body = b"id,status\n1\n"  # ragged, but the checksum is the first complaint
    check = validate_result(desc, ok(body), counts(1, 1, 0, SHA256_HEX))
    assert check.reason == "status field /output_sha256 sha256 mismatch"


def sent_gzipped(body: bytes, **headers: str) -> HttpResponse:
    """A part that came gzipped: `body` decoded, the digests of the bytes as sent beside it."""
    sent = gzip.compress(body, mtime=0)
    digests = {name: hashlib.new(name, sent).digest() for name in ("sha256", "sha512", "md5")}
    return HttpResponse(200, {"Content-Encoding": "gzip", **headers}, body, sent_digests=digests)


def test_digest_headers_cover_the_bytes_as_sent_or_the_decoded_body() -> None:
    sent = gzip.compress(BODY, mtime=0)
    for checksum, header, value in (
        ("content-digest", "Content-Digest", "sha-256=:{}:"),
        ("digest", "Digest", "SHA-256={}"),
    ):
        desc = provider(format="binary", expect={"checksum": checksum})
        for covered in (sent, BODY):
            claimed = value.format(b64(hashlib.sha256(covered).digest()))
            assert validate_result(desc, sent_gzipped(BODY, **{header: claimed}), None).ok
        wrong = value.format(b64(hashlib.sha256(b"x").digest()))
        check = validate_result(desc, sent_gzipped(BODY, **{header: wrong}), None)
        assert check.reason == f"{header} sha-256 mismatch"


def test_a_named_header_covers_the_bytes_as_sent_too() -> None:
    """Content-MD5 (RFC 1864) is over the body as sent, a content coding included."""
    desc = header_checksum(header="Content-MD5", algorithm="md5", encoding="base64")
    md5 = b64(hashlib.md5(gzip.compress(BODY, mtime=0)).digest())
    assert validate_result(desc, sent_gzipped(BODY, **{"Content-MD5": md5}), None).ok
    # the same digest on a part that came as it is covers nothing
    check = validate_result(desc, ok(BODY, **{"Content-MD5": md5}), None)
    assert check.reason == "header Content-MD5 md5 mismatch"


# --------------------------------------------------------------------- decoding


def test_decode_digest_is_exact() -> None:
    raw = hashlib.sha256(b"x").digest()
    hx = ChecksumEncoding.HEX
    assert decode_digest(ChecksumAlgorithm.SHA256, hx, raw.hex()) == raw
    assert decode_digest(ChecksumAlgorithm.SHA256, hx, " " + raw.hex() + " ") == raw
    assert (
        decode_digest(ChecksumAlgorithm.SHA256, hx, raw.hex()[:10] + " " + raw.hex()[10:]) is None
    )
    assert decode_digest(ChecksumAlgorithm.SHA256, hx, "zz" * 32) is None
    assert decode_digest(ChecksumAlgorithm.SHA512, hx, raw.hex()) is None
    bs = ChecksumEncoding.BASE64
    assert decode_digest(ChecksumAlgorithm.SHA256, bs, b64(raw)) == raw
    assert decode_digest(ChecksumAlgorithm.SHA256, bs, b64(raw).rstrip("=")) is None
    assert decode_digest(ChecksumAlgorithm.SHA256, bs, "not base64!") is None


def test_counts_helper_sanity() -> None:
    assert counts(1, 1, 0).counts == Counts(1, 1, 0)
    assert StatusFact(status_code=200).result_checksum is None
