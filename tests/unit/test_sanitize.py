"""Redaction before anything is stored: URLs inside bodies and URL-valued headers."""

from __future__ import annotations

import base64
import json
from typing import Any

from shared.redaction import (
    EXCERPT_BYTES,
    REDACTED,
    looks_like_jwt,
    sanitize_headers,
    sanitize_text_urls,
    sanitize_url,
    stored_excerpt,
)

SIGNED = "https://bucket.s3.amazonaws.com/out/r.jsonl?X-Amz-Expires=600&X-Amz-Signature=abc123"


def b64url(document: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


# A signed download grant as Runway's output links carry it (`?_jwt=eyJ...`).
JWT = (
    b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + b64url({"key": "out/task_1.mp4", "exp": 1767225600})
    + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
)
JWT_SIGNATURE = JWT.rsplit(".", 1)[1]
# The same grant encrypted (a JWE, direct encryption: its key segment empty).
JWE = (
    b64url({"alg": "dir", "enc": "A256GCM"})
    + "..48V1_ALb6US04U3b.5eym8TW_c8SuK0ltJ3rp.XFBoMYUZodetZdvTiFvSkQ"
)


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


def test_a_parameter_named_for_a_jwt_is_redacted_in_urls_and_in_bodies() -> None:
    url = f"https://cdn.example/out.mp4?_jwt={JWT}&v=2"
    assert sanitize_url(url) == f"https://cdn.example/out.mp4?_jwt={REDACTED}&v=2"
    body = f'{{"output": ["{url}"]}}'
    assert sanitize_text_urls(body) == (
        f'{{"output": ["https://cdn.example/out.mp4?_jwt={REDACTED}&v=2"]}}'
    )
    # by its name alone, whatever the value looks like
    assert (
        sanitize_url("https://cdn.example/f?jwt=opaque") == f"https://cdn.example/f?jwt={REDACTED}"
    )


def test_a_jwt_is_redacted_whatever_its_parameter_is_called() -> None:
    url = f"https://cdn.example/out.mp4?grant={JWT}&page=2"
    assert sanitize_url(url) == f"https://cdn.example/out.mp4?grant={REDACTED}&page=2"
    text = sanitize_text_urls(f"see https://cdn.example/out.mp4?page=2&t={JWT} now")
    assert text == f"see https://cdn.example/out.mp4?page=2&t={REDACTED} now"
    assert JWT_SIGNATURE not in stored_excerpt(f'{{"u": "/r?x={JWT}"}}'.encode())
    # an unsecured JWT (alg "none") has an empty signature: still a bearer grant
    unsecured = b64url({"alg": "none"}) + "." + b64url({"sub": "a"}) + "."
    assert sanitize_url(f"https://x.example/r?t={unsecured}") == f"https://x.example/r?t={REDACTED}"


def test_dotted_values_that_are_not_jwts_are_kept() -> None:
    kept = [
        "1.2.3",
        "report.final.csv",
        "eyJ.not.base64json",  # the right start, a header that is not JSON
        b64url({"typ": "JWT"}) + ".e30.sig",  # JSON, but no "alg": not a JOSE header
        b64url(["alg"]) + ".e30.sig",  # JSON, not an object
        b64url({"alg": "HS256"}) + ".e30.sig.extra",  # four segments
        b64url({"alg": "HS256"}) + ".e30.si+g",  # not base64url
    ]
    for value in kept:
        assert not looks_like_jwt(value), value
        assert sanitize_url(f"https://x.example/r?v={value}&w=1").endswith(f"?v={value}&w=1")
    assert looks_like_jwt(JWT)
    assert looks_like_jwt(JWE)
    url = f"https://cdn.example/out.mp4?grant={JWE}&page=2"
    assert sanitize_url(url) == f"https://cdn.example/out.mp4?grant={REDACTED}&page=2"
    assert not looks_like_jwt("a.b.c.d.e")  # five segments, no JOSE header
    assert not looks_like_jwt(JWE + ".more")  # six segments: neither form
    # a first segment no JOSE header would need is not decoded at all
    assert not looks_like_jwt("ey" + "A" * 5000 + ".e30.sig")


def test_a_header_named_for_a_jwt_is_redacted() -> None:
    headers = sanitize_headers({"Cf-Access-Jwt-Assertion": JWT, "X-Request-Id": "r1"})
    assert headers == {"Cf-Access-Jwt-Assertion": REDACTED, "X-Request-Id": "r1"}
