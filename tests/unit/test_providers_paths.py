"""Value paths, templates, header sanitizing and the Secret wrapper."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import redaction
from shared.providers import ConfigError, Headers, parse_providers, sanitize_headers, sanitize_url
from shared.providers.paths import (
    Each,
    PathSource,
    PathSyntaxError,
    ValuePath,
    _each,
    _step,
    extract,
    parse_path,
    set_value,
)
from shared.providers.templates import TemplateError, parse_template
from shared.secret import Secret, SecretError

DOC = {"a": {"b": [{"c": 1}, {"c": 2}]}, "x/y": {"~t": "tilde"}, "n": None}


def test_json_pointer() -> None:
    assert extract(parse_path("/a/b/1/c"), DOC) == 2
    assert extract(parse_path("/x~1y/~0t"), DOC) == "tilde"


def test_empty_pointer_is_the_whole_document() -> None:
    assert extract(parse_path(""), DOC) is DOC


def test_dotted_path() -> None:
    assert extract(parse_path("a.b.0.c"), DOC) == 1


def test_missing_and_null_are_none() -> None:
    assert extract(parse_path("/a/b/5/c"), DOC) is None
    assert extract(parse_path("a.zz"), DOC) is None
    assert extract(parse_path("/n/deeper"), DOC) is None
    assert extract(parse_path("/a/b/c"), DOC) is None  # non-index on a list


def test_header_path_is_case_insensitive() -> None:
    path = parse_path("header:Operation-Location")
    assert path.source is PathSource.HEADER
    assert extract(path, None, {"operation-location": "https://x/ops/1"}) == "https://x/ops/1"
    assert extract(path, None, Headers({"OPERATION-LOCATION": "u"})) == "u"
    assert extract(path, None, {}) is None


def test_query_path() -> None:
    path = parse_path("query:op")
    assert extract(path, None, None, {"op": "op_1"}) == "op_1"
    assert extract(path, None, None, None) is None


@pytest.mark.parametrize(
    "text", ["a..b", ".a", "a.", "/a/~3", "header:", "header:Bad Name", "query:", "body:a", "a b"]
)
def test_bad_paths_are_refused(text: str) -> None:
    with pytest.raises(PathSyntaxError):
        parse_path(text)


def test_set_value_creates_intermediate_objects() -> None:
    body: dict[str, object] = {"metadata": {"team": "x"}}
    set_value(body, parse_path("metadata.jobwarden_operation_id"), "op_1")
    assert body == {"metadata": {"team": "x", "jobwarden_operation_id": "op_1"}}


def test_set_value_refuses_to_overwrite_a_scalar() -> None:
    with pytest.raises(PathSyntaxError):
        set_value({"metadata": "flat"}, parse_path("metadata.op"), "op_1")


def test_templates_check_placeholders() -> None:
    assert parse_template("/v1/{+job_id}:cancel", {"job_id"}).names == {"job_id"}
    with pytest.raises(TemplateError):
        parse_template("/v1/{name}", {"job_id"})
    with pytest.raises(TemplateError):
        parse_template("/v1/{job_id", {"job_id"})


def test_headers_mapping_joins_repeats_and_ignores_case() -> None:
    headers = Headers([("Via", "a"), ("via", "b"), ("X-Request-Id", "r1")])
    assert headers["VIA"] == "a, b"
    assert "x-request-id" in headers
    assert len(headers) == 2
    assert dict(headers.items()) == {"Via": "a, b", "X-Request-Id": "r1"}  # names as received
    assert ("via", "a, b") in headers.items()  # a Mapping's items view: any case
    assert headers.get("VIA") == "a, b"
    assert headers.get("absent") is None and headers.get("absent", "d") == "d"


def test_a_name_redacted_for_one_call_is_not_redacted_for_the_next() -> None:
    """The per-name rule is cached; the names a call adds are part of its key."""
    assert sanitize_headers({"X-Custom": "v"}, {"x-custom"}) == {"X-Custom": "[redacted]"}
    assert sanitize_headers({"X-Custom": "v"}) == {"X-Custom": "v"}
    assert sanitize_headers({"X-Custom": "v"}, frozenset({"X-CUSTOM"})) == {
        "X-Custom": "[redacted]"
    }


# --------------------------------------------------------------------- sanitize


def test_sanitize_headers_redacts_credentials_only() -> None:
    headers = {
        "Authorization": "Bearer sk-1",
        "Cookie": "s=1",
        "X-Api-Key": "k",
        "x-goog-api-key": "k",
        "X-Amz-Security-Token": "t",
        "webhook-signature": "v1,abc",
        "X-Client-Secret": "s",
        "Proxy-Authorization": "Basic x",
        "Idempotency-Key": "idem_1",
        "Content-Type": "application/json",
        "traceparent": "00-1-2-01",
    }
    clean = sanitize_headers(headers)
    redacted = {name for name, value in clean.items() if value == "[redacted]"}
    assert redacted == {
        "Authorization",
        "Cookie",
        "X-Api-Key",
        "x-goog-api-key",
        "X-Amz-Security-Token",
        "webhook-signature",
        "X-Client-Secret",
        "Proxy-Authorization",
    }
    assert clean["Idempotency-Key"] == "idem_1"
    assert clean["traceparent"] == "00-1-2-01"
    assert headers["Authorization"] == "Bearer sk-1"  # a copy, not in place


def test_sanitize_headers_extra_names() -> None:
    assert sanitize_headers({"X-Pass": "p"}, extra=["x-pass"]) == {"X-Pass": "[redacted]"}


def test_sanitize_url_redacts_signed_query_values_and_userinfo() -> None:
    url = "https://user:pw@bucket.test/r.json?X-Amz-Signature=abc&sig=def&page=2"
    clean = sanitize_url(url)
    assert "abc" not in clean and "def" not in clean and "pw" not in clean
    assert clean.startswith("https://bucket.test/r.json?")
    assert "page=2" in clean


def test_sanitize_url_drops_the_fragment_no_request_carries() -> None:
    url = "https://results.test/r.json?page=2#access_token=tok-1&state=x"
    assert sanitize_url(url) == "https://results.test/r.json?page=2"
    assert sanitize_url("https://results.test/r.json#access_token=tok-1") == (
        "https://results.test/r.json"
    )


def test_a_url_given_back_as_is_is_what_the_full_rewrite_gives() -> None:
    # sanitize_url skips urlsplit/urlunsplit for plain URLs: for every URL it
    # skips them on, their round trip must change nothing.
    rng = random.Random(1203)
    pieces = [
        "http",
        "HTTPS",
        "h2",
        "://",
        ":/",
        "/",
        "//",
        "?",
        "#",
        "@",
        "[",
        "]",
        " ",
        "\t",
        "\n",
        "\x00",
        "é",
        ":",
        "8080",
        "host",
        "127.0.0.1",
        "v1",
        "jobs",
        "%20",
        ";",
        "=",
        "&",
        "key",
        "-",
        "_",
        ".",
        "~",
        "+",
        "a",
        "B",
    ]
    skipped = 0
    for _ in range(20000):
        url = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        if rng.random() < 0.5:
            url = rng.choice(["http://", "https://", "sftp://"]) + url
        try:
            rewritten = urlunsplit(urlsplit(url))
        except ValueError:
            rewritten = None  # urlsplit refuses it: the full path must still run
        if redaction._plain(url):
            skipped += 1
            assert rewritten == url
            assert sanitize_url(url) == url
    assert skipped > 500


# --------------------------------------------------------------------- Secret

VALUE = "sk-very-secret-value"


def test_secret_never_prints_its_value() -> None:
    secret = Secret(VALUE)
    assert repr(secret) == "Secret('***')"
    assert str(secret) == "Secret('***')"
    assert f"{secret}" == "Secret('***')"
    assert VALUE not in repr([secret, {"k": secret}])
    assert secret.reveal() == VALUE


def test_secret_from_env() -> None:
    secret = Secret.from_env("MY_KEY", {"MY_KEY": VALUE})
    assert secret.reveal() == VALUE and secret.source == "env:MY_KEY"


def test_secret_from_env_missing_names_the_variable() -> None:
    with pytest.raises(SecretError, match="environment variable MY_KEY is not set"):
        Secret.from_env("MY_KEY", {})


def test_secret_from_file_strips_newline(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text(VALUE + "\n")
    assert Secret.from_file(path).reveal() == VALUE


def test_secret_from_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("\n")
    with pytest.raises(SecretError, match="is empty"):
        Secret.from_file(path)


def test_secret_compares_in_constant_time_and_refuses_pickling() -> None:
    import pickle

    assert Secret(VALUE).matches(VALUE)
    assert not Secret(VALUE).matches(VALUE + "x")
    with pytest.raises(TypeError):
        pickle.dumps(Secret(VALUE))


def test_secret_value_never_in_config_errors(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(VALUE)
    table = {
        "base_url": "https://api.example.test",
        "auth": {"secret_file": str(key_file)},
        "create": {"path": "/v1/jobs", "idempotency": "header"},  # job_id missing
        "status": {"path": "/v1/jobs/{job_id}", "state": "/s", "state_map": {"x": "running"}},
        "result": {"source": "none"},
    }
    with pytest.raises(ConfigError) as caught:
        parse_providers({"providers": {"p": table}}, "c.toml", {"K": VALUE})
    assert "create.job_id" in str(caught.value)
    assert VALUE not in str(caught.value)
    assert VALUE not in repr(caught.value)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/data/-1/id", "ftjob-3"),  # OpenAI's lists: the next page's cursor is the last id
        ("data.-2.id", "ftjob-2"),
        ("/data/-4/id", None),
        ("/data/3/id", None),
        ("/data/²/id", None),  # a digit to str.isdigit, not to int(): no index at all
        ("/data/+1/id", None),
    ],
)
def test_a_list_index_counts_from_either_end(path: str, expected: str | None) -> None:
    page = {"data": [{"id": f"ftjob-{n}"} for n in (1, 2, 3)], "has_more": True}
    assert extract(parse_path(path), page) == expected


def _stepwise(path: ValuePath, body: Any) -> Any:
    """`extract` of a body path as one `_step` a segment: the reading its inlined
    dictionary step must keep."""
    node = body
    for segment in path.segments:
        if type(segment) is Each:
            return _each(node, path.segments)
        node = _step(node, segment)
        if node is None:
            return None
    return node


_KEYS = st.sampled_from(["a", "b", "kind", "0", "1", "-1", "c d", "é"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3))
_BODIES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)
_PATHS = st.lists(
    st.one_of(_KEYS, st.just("[kind=x]"), st.just("[*]")), min_size=0, max_size=4
).map(lambda parts: "/" + "/".join(parts) if parts else "")


@settings(max_examples=400, deadline=None)
@given(body=_BODIES, text=_PATHS)
def test_extract_reads_as_one_step_a_segment(body: Any, text: str) -> None:
    try:
        path = parse_path(text, each=True)
    except PathSyntaxError:
        return
    assert extract(path, body) == _stepwise(path, body)
