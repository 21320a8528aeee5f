"""`result.base64`: a result that is base64 text inside JSON (Stability's
{"video": ...}, OpenAI's data[0].b64_json), decoded strictly and kept as its bytes."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from shared.cli import providers as cli_providers
from shared.providers import HttpResponse, parse_providers, validate_inline_result, validate_result
from shared.providers.base64_field import Base64Error, decode_base64
from shared.providers.description import BASE64_ENVELOPE_BYTES, ProviderDescription
from shared.providers.errors import ConfigError
from shared.providers.results import inline_content, result_content
from tests.unit.result_fixtures import provider_table

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
PNG_B64 = base64.b64encode(PNG).decode()


def described(**result: Any) -> ProviderDescription:
    table = provider_table(
        {
            "source": "path",
            "path": "/v1/jobs/{job_id}/result",
            "format": "binary",
            "base64": "/data/0/b64_json",
            "expect": {"content_types": ["image/png"]},
            **result,
        }
    )
    return parse_providers(table, "test.toml", {})["p"]


def refused(**result: Any) -> str:
    with pytest.raises(ConfigError) as info:
        described(**result)
    return str(info.value)


def answer(document: Any, status: int = 200, **headers: str) -> HttpResponse:
    body = json.dumps(document).encode()
    return HttpResponse(status, {"Content-Type": "application/json", **headers}, body)


def images(b64: Any) -> dict[str, Any]:
    """OpenAI's images answer: {"created", "data": [{"b64_json", "revised_prompt"}]}."""
    return {"created": 1713833628, "data": [{"b64_json": b64, "revised_prompt": "a cat"}]}


# --- the decoder --------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"", b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar", PNG])
def test_what_an_encoder_writes_decodes_to_its_bytes(data: bytes) -> None:
    assert decode_base64(base64.b64encode(data).decode()) == data
    assert decode_base64(base64.urlsafe_b64encode(data).decode(), url=True) == data
    unpadded = base64.urlsafe_b64encode(data).decode().rstrip("=")
    assert decode_base64(unpadded, url=True) == data


@pytest.mark.parametrize(
    ("text", "url", "said"),
    [
        ("Zm9vYg", False, "length 6 is not a multiple of 4: padding missing"),
        ("Zm9v\nYmFy", False, "invalid base64 character '\\n' at offset 4 (whitespace"),
        ("Zm9v YmFy", False, "invalid base64 character ' ' at offset 4"),
        ("Pz8-", False, "'-' at offset 3 (the URL-safe alphabet: set result.base64_url"),
        ("Pz8/", True, "'/' at offset 3 (the standard alphabet"),
        ("Zm9v*mFy", False, "invalid base64 character '*' at offset 4"),
        ("Zm9vé", False, "invalid base64 character 'é' at offset 4"),
        ("Zm=9vYg=", False, "padding '=' inside the text (offset 2)"),
        ("Zg===", False, "3 padding characters"),
        ("Zm9vY", False, "5 characters cannot be base64"),
        ("Zm9vY", True, "5 characters cannot be base64"),
        ("Zh==", False, "the last character 'h' has non-zero unused bits"),
        ("Zm9=", False, "the last character '9' has non-zero unused bits"),
        ("Zm9vYh", True, "non-zero unused bits"),
    ],
)
def test_anything_else_is_refused_saying_where(text: str, url: bool, said: str) -> None:
    with pytest.raises(Base64Error) as info:
        decode_base64(text, url=url)
    assert said in info.value.reason


# --- a fetched answer ---------------------------------------------------------------


def test_the_decoded_bytes_are_the_result_named_by_their_digest_size_and_type() -> None:
    desc = described()
    resp = answer(images(PNG_B64))
    check = validate_result(desc, resp, None)
    assert check.ok, check.reason
    assert (check.sha256, check.size, check.content_type) == (
        hashlib.sha256(PNG).hexdigest(),
        len(PNG),
        "image/png",
    )
    assert check.part_sha256 == (hashlib.sha256(resp.body).hexdigest(),)  # the answer as fetched
    assert check.parsed is None  # a file, never kept inline
    assert result_content(desc.result, [resp.body]) == PNG


def test_a_valid_check_carries_the_bytes_it_decoded() -> None:
    """Collection stores them (reconciler/steps/collect.py) rather than parsing the
    JSON and decoding the field a second time; an invalid check carries none."""
    desc = described()
    assert validate_result(desc, answer(images(PNG_B64)), None).decoded == PNG
    assert validate_result(desc, answer(images("")), None).decoded is None
    value = {"audio_base64": PNG_B64}
    assert validate_inline_result(inline(), value, None).decoded == PNG
    assert validate_inline_result(inline(), {"audio_base64": 1}, None).decoded is None


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"data": []}, "missing base64 field '/data/0/b64_json'"),
        ({"data": [{"url": "https://x.test/a.png"}]}, "missing base64 field"),
        (images(None), "missing base64 field"),
        (images(123), "base64 field '/data/0/b64_json' is not a string but a number"),
        (images({"x": 1}), "is not a string but an object"),
        (images(""), "base64 field '/data/0/b64_json' is empty"),
        (images(PNG_B64[:-1]), "is not valid base64: length"),
        (images(PNG_B64.replace("A", "-", 1)), "is not valid base64: invalid base64 character '-'"),
        (images(base64.encodebytes(PNG).decode()), "invalid base64 character '\\n'"),
    ],
)
def test_a_field_that_holds_no_bytes_is_invalid_never_the_json(document: Any, said: str) -> None:
    resp = answer(document)
    check = validate_result(described(), resp, None)
    assert not check.ok and not check.unavailable
    assert said in check.reason, check.reason
    # what is recorded of a refusal is the answer as it came, never passed off as an image
    assert (check.sha256, check.content_type) == (
        hashlib.sha256(resp.body).hexdigest(),
        "application/json",
    )


def test_an_answer_that_is_not_json_is_invalid() -> None:
    resp = HttpResponse(200, {"Content-Type": "image/png"}, PNG)
    check = validate_result(described(), resp, None)
    assert not check.ok and "result is not valid JSON (result.base64" in check.reason


def test_max_bytes_is_the_decoded_size_and_the_text_is_bounded_before_decoding() -> None:
    limit = 30
    desc = described(expect={"content_types": ["image/png"], "max_bytes": limit})
    # 30 bytes, 40 characters of base64: an answer larger than max_bytes, still valid
    at_limit = answer(images(base64.b64encode(bytes(limit)).decode()))
    assert len(at_limit.body) > limit
    assert validate_result(desc, at_limit, None).ok
    # 31 bytes are 44 characters: refused by their count, before any decoding
    over = validate_result(desc, answer(images(base64.b64encode(bytes(limit + 1)).decode())), None)
    assert not over.ok
    assert "holds 44 characters: decoded, more than max_bytes (30 bytes)" in over.reason
    # 31 bytes fit the characters 32 bytes take, no more (padding): decoded, then refused
    tight = described(expect={"content_types": ["image/png"], "max_bytes": limit + 2})
    just = validate_result(tight, answer(images(base64.b64encode(bytes(limit + 3)).decode())), None)
    assert "holds 44 characters" not in just.reason and not just.ok


def test_an_answer_past_the_encoded_bound_is_refused_as_too_large() -> None:
    desc = described(expect={"content_types": ["image/png"], "max_bytes": 30})
    assert desc.result.fetched_max_bytes == 40 + BASE64_ENVELOPE_BYTES
    padded = {**images(base64.b64encode(bytes(3)).decode()), "pad": "x" * BASE64_ENVELOPE_BYTES}
    check = validate_result(desc, answer(padded), None)
    assert not check.ok
    assert "the JSON holding the base64 result is larger than max_bytes allows encoded" in (
        check.reason
    )


def test_the_answers_type_is_not_the_results_and_a_refused_fetch_is_unavailable() -> None:
    desc = described()
    # the JSON's own Content-Type is not checked against image/png
    plain = HttpResponse(200, {"Content-Type": "text/plain"}, answer(images(PNG_B64)).body)
    assert validate_result(desc, plain, None).ok
    gone = validate_result(desc, answer({"error": "expired"}, 404), None)
    assert gone.unavailable and "HTTP 404" in gone.reason


def test_a_checksum_covers_the_answer_as_sent() -> None:
    desc = described(expect={"content_types": ["image/png"], "checksum": "content-digest"})
    body = answer(images(PNG_B64)).body
    digest = "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"
    good = HttpResponse(200, {"Content-Type": "application/json", "Content-Digest": digest}, body)
    assert validate_result(desc, good, None).ok
    bad = HttpResponse(200, {"Content-Type": "application/json", "Content-Digest": digest}, b"{}")
    assert not validate_result(desc, bad, None).ok


def test_the_url_safe_alphabet_only_when_asked() -> None:
    urlsafe = base64.urlsafe_b64encode(PNG).decode().rstrip("=")
    assert "-" in urlsafe or "_" in urlsafe
    assert not validate_result(described(), answer(images(urlsafe)), None).ok
    check = validate_result(described(base64_url=True), answer(images(urlsafe)), None)
    assert check.ok and check.sha256 == hashlib.sha256(PNG).hexdigest()


# --- inside a response (source = inline, a synchronous create) -----------------------


def inline(**result: Any) -> ProviderDescription:
    table = provider_table(
        {
            "source": "inline",
            "inline": "/output",
            "format": "binary",
            "base64": "/audio_base64",
            "expect": {"content_types": ["audio/mpeg"]},
            **result,
        }
    )
    return parse_providers(table, "test.toml", {})["p"]


def test_an_inline_base64_field_is_kept_as_its_bytes() -> None:
    desc = inline()
    value = {"audio_base64": PNG_B64, "alignment": {"characters": ["a"]}}
    check = validate_inline_result(desc, value, None)
    assert check.ok, check.reason
    assert (check.sha256, check.size, check.content_type) == (
        hashlib.sha256(PNG).hexdigest(),
        len(PNG),
        "audio/mpeg",
    )
    assert check.parsed is None
    assert inline_content(desc.result, value) == PNG


def test_an_inline_value_without_its_bytes_is_invalid() -> None:
    desc = inline()
    check = validate_inline_result(desc, {"audio_base64": "%%%"}, None)
    assert not check.ok and not check.unavailable
    assert "inline result: base64 field '/audio_base64' is not valid base64" in check.reason
    nothing = validate_inline_result(desc, None, None)
    assert nothing.unavailable  # no result arrived at all: as for any inline result


# --- the description ------------------------------------------------------------------


def test_the_sources_without_one_json_are_refused() -> None:
    for source in ("none", "files"):
        said = refused(source=source, file_ids=["/files/0"])
        assert "result.base64: only with source = path, url or inline" in said, said


def test_a_path_syntax_error_is_named() -> None:
    said = refused(base64="data[0")
    assert "providers.p.result.base64: bad path 'data[0'" in said, said


@pytest.mark.parametrize(
    ("over", "said"),
    [
        ({"format": "json"}, "result.base64: the decoded bytes are a file: format = binary"),
        ({"expect": {}}, "result.expect.content_types: with result.base64, exactly one"),
        ({"expect": {"content_types": ["image/png", "image/jpeg"]}}, "exactly one media type"),
        ({"expect": {"content_types": ["image/*"]}}, "no wildcard"),
        ({"base64_url": "yes"}, "result.base64_url"),
    ],
)
def test_the_decoded_bytes_must_be_one_file_of_one_type(over: dict[str, Any], said: str) -> None:
    assert said in refused(**over)


def test_base64_url_alone_is_refused() -> None:
    table = provider_table({"source": "url", "base64_url": True})
    with pytest.raises(ConfigError, match=r"result\.base64_url: only with result\.base64"):
        parse_providers(table, "test.toml", {})


def test_binary_inline_still_needs_base64() -> None:
    table = provider_table({"source": "inline", "inline": "/output", "format": "binary"})
    with pytest.raises(ConfigError, match=r"cannot carry raw bytes \(base64 text it can"):
        parse_providers(table, "test.toml", {})


CHECKED = """
[providers.images]
base_url = "https://api.example.test"
[providers.images.create]
path = "/v1/images"
idempotency = "none"
job_id = "/id"
[providers.images.status]
path = "/v1/images/{job_id}"
state = "/status"
state_map = { done = "succeeded" }
[providers.images.result]
format = "binary"
base64 = "/data/0/b64_json"
expect = { content_types = ["image/png"] }
"""


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ('source = "path"\npath = "/v1/images/{job_id}"', None),
        ('source = "none"', "providers.images.result.base64: only with source = path"),
        (
            'source = "files"\nfile_ids = ["/files/0"]',
            "providers.images.result.base64: only with source = path",
        ),
        (
            'source = "path"\npath = "/v1/images/{job_id}"\nbase64 = "/data/[k=v"',
            "providers.images.result.base64: bad path '/data/[k=v'",
        ),
    ],
)
async def test_providers_check_validates_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, said: str | None
) -> None:
    text = CHECKED.replace('base64 = "/data/0/b64_json"\n', "") if "base64 =" in source else CHECKED
    config = tmp_path / "jobwarden.toml"
    config.write_text(
        text.replace("[providers.images.result]\n", f"[providers.images.result]\n{source}\n")
    )
    args = argparse.Namespace(
        json=False,
        config=str(config),
        **dict.fromkeys(("provider", "delivery", "at", "url", "result", "status")),
    )
    code = await cli_providers.cmd_check(args)
    out = capsys.readouterr()
    if said is None:
        assert code == 0, out.err
        assert "valid, 1 provider(s)" in out.out
    else:
        assert code == 1
        assert said in out.err, out.err
