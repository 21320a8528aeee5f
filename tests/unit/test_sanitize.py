"""Redaction before anything is stored: URLs inside bodies and URL-valued headers."""

from __future__ import annotations

from shared.redaction import (
    EXCERPT_BYTES,
    REDACTED,
    sanitize_headers,
    sanitize_text_urls,
    stored_excerpt,
)

SIGNED = "https://bucket.s3.amazonaws.com/out/r.jsonl?X-Amz-Expires=600&X-Amz-Signature=abc123"


def test_a_presigned_link_in_a_json_body_loses_its_signature_only() -> None:
    body = f'{{"status": "succeeded", "result_url": "{SIGNED}", "n": 3}}'
    text = sanitize_text_urls(body)
    assert "abc123" not in text
    assert "X-Amz-Expires=600" in text  # where and how long is kept: it is audit detail
    assert text.startswith('{"status": "succeeded", "result_url": "https://bucket.s3.amazonaws.com')
    assert text.endswith('", "n": 3}')


def test_text_without_query_strings_is_returned_as_is() -> None:
    body = '{"id": "job_1", "status_url": "https://api.example/v1/jobs/job_1"}'
    assert sanitize_text_urls(body) is body


def test_several_links_each_redacted() -> None:
    text = sanitize_text_urls(
        f"a {SIGNED} b https://x.example/f?sig=s3cr3t&page=2 c https://y.example/?q=1"
    )
    assert "abc123" not in text and "s3cr3t" not in text
    assert "page=2" in text and "https://y.example/?q=1" in text


def test_a_location_header_with_a_presigned_link_is_redacted() -> None:
    headers = sanitize_headers({"Location": SIGNED, "Content-Type": "application/json"})
    assert "abc123" not in headers["Location"]
    assert headers["Content-Type"] == "application/json"


def test_stored_excerpt_is_bounded_nul_free_and_redacted() -> None:
    body = (f'{{"u": "{SIGNED}", "x": "a\x00b"}}' + " " * EXCERPT_BYTES).encode()
    excerpt = stored_excerpt(body)
    assert len(excerpt) <= EXCERPT_BYTES
    assert "\x00" not in excerpt and "a\ufffdb" in excerpt
    assert f"X-Amz-Signature={REDACTED}" in excerpt and "abc123" not in excerpt


def test_json_escaped_and_relative_links_are_redacted_too() -> None:
    escaped = sanitize_text_urls('{"u": "https:\\/\\/b.example\\/r?a=1\\u0026sig=SECRET1"}')
    assert "SECRET1" not in escaped and escaped.startswith('{"u": "https:\\/\\/b.example')
    assert sanitize_headers({"Location": "/r?x=1&token=SECRET2"})["Location"] == (
        f"/r?x=1&token={REDACTED}"
    )


def test_only_the_secret_values_change() -> None:
    text = "see (https://x.example/f?q=x,y&sig=abc) or https://y.example/?y"
    assert sanitize_text_urls(text) == (
        f"see (https://x.example/f?q=x,y&sig={REDACTED}) or https://y.example/?y"
    )
