"""Bad input gets a clear error and loses nothing: the provider layer, fuzzed.

Three properties, each over generated input (hypothesis, derandomized so a
failure replays and CI cannot flake), then one regression test per defect the
fuzzing found:

- a provider description, however mangled, loads or raises `ConfigError`,
  whose message never quotes a secret;
- `extract` never raises, whatever the document and the (valid) path;
- status, create, cancel, lookup and result answers of any code, headers and
  body never raise, and a status read takes a state only when the answer names
  one (in the body, or by an HTTP code the description maps).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.jsonread import LongInt
from shared.providers import ConfigError, load_preset, load_providers, parse_providers
from shared.providers.config import _read_preset, preset_names
from shared.providers.description import ProviderDescription
from shared.providers.errors import WebhookParseError
from shared.providers.messages import HttpResponse
from shared.providers.paths import PathSyntaxError, extract, parse_path
from shared.providers.responses import (
    inline_result,
    parse_cancel,
    parse_create,
    parse_lookup,
    parse_status,
    parse_webhook,
    result_failure,
)
from shared.providers.results import validate_result
from shared.settings import load_settings
from tests.unit.test_providers_loader import acme, config_error

FUZZ = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SECRET = "sk-live-FUZZ-DO-NOT-PRINT-0042"
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
# Every variable a preset names, so each loads with its credentials.
ENV = {
    **{
        name: SECRET
        for name in (
            "JW_SIM_API_KEY",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "REPLICATE_API_TOKEN",
            "ASSEMBLYAI_API_KEY",
            "AZURE_ACCESS_TOKEN",
            "GOOGLE_ACCESS_TOKEN",
            "FUZZ_KEY",
        )
    },
    "JW_SIM_WEBHOOK_SECRET": WHSEC,
    "OPENAI_WEBHOOK_SECRET": WHSEC,
    "REPLICATE_WEBHOOK_SECRET": WHSEC,
    "ASSEMBLYAI_WEBHOOK_TOKEN": SECRET,
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
}
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
PRESETS = {name: _read_preset(name, None)[1] for name in preset_names()}
DESCRIPTIONS = {name: load_preset(name, ENV) for name in preset_names()}


# --------------------------------------------------------------------- descriptions

# Text a description's values are made of: paths (selectors, negative
# indexes), templates, state names, header and parameter names, and the
# characters that broke parsers before (a superscript digit, NUL).
_TEXTS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "/",
            "/data/-1/id",
            "/data/[kind=x]/id",
            "data[kind=x].id",
            "[",
            "[=]",
            "/[a]",
            "/~3",
            "header:",
            "header:Operation-Location",
            "query:token",
            "a..b",
            "/v1/{job_id}",
            "/v1/{+job_id}",
            "{webhook_url}",
            "{jobid}",
            "{",
            "²",
            "٢٠٢",
            "-1",
            "9" * 30,
            "running",
            "succeeded",
            "total",
            "short",
            "application/xml",
            "token",
            "FUZZ_KEY",
            "a\x00b",
        ]
    ),
    st.text(max_size=10),
)
_SCALARS = st.one_of(
    _TEXTS,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.booleans(),
    st.datetimes(),
    st.dates(),
    st.times(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_TEXTS, inner, max_size=3)
    ),
    max_leaves=6,
)


def _key_paths(table: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found = set()
    for key, value in table.items():
        found.add((*prefix, key))
        if isinstance(value, dict):
            found |= _key_paths(value, (*prefix, key))
    return found


# Every key a preset sets, and the tables and keys the brief names besides.
_KEYS = sorted(
    set().union(*(_key_paths(table) for table in PRESETS.values()))
    | {
        ("result", "pages"),
        ("result", "pages", "next_page_url"),
        ("result", "pages", "next_page_token"),
        ("result", "pages", "offset_param"),
        ("result", "pages", "page_size"),
        ("result", "pages", "last_page"),
        ("result", "pages", "total"),
        ("webhooks", "options"),
        ("webhooks", "options", "query"),
        ("webhooks", "scheme"),
        ("webhooks", "secrets_file"),
        ("status", "state_from_http_status"),
        ("status", "body"),
        ("cancel", "body"),
        ("create", "set_body", "field"),
        ("create", "set_headers"),
        ("create", "not_created_codes"),
        ("auth", "secret_file"),
        ("limits", "backoff_base"),
        ("plugin",),
    }
)


def _set(table: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        child = table.get(key)
        if not isinstance(child, dict):
            child = table[key] = {}
        table = child
    table[keys[-1]] = value


@FUZZ
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    changes=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUES), min_size=1, max_size=3),
    on_top=st.booleans(),
)
def test_a_mangled_description_loads_or_is_a_config_error_quoting_no_secret(
    preset: str, changes: list[tuple[tuple[str, ...], Any]], on_top: bool
) -> None:
    # on top of the preset (merged), or the preset's own table edited
    table = {"preset": preset} if on_top else copy.deepcopy(PRESETS[preset])
    for keys, value in changes:
        _set(table, keys, value)
    try:
        parse_providers({"providers": {"fuzz": table}}, "fuzz.toml", ENV)
    except ConfigError as exc:
        assert SECRET not in str(exc) and WHSEC not in str(exc)


# --------------------------------------------------------------------- extract

_PATH_PIECES = st.sampled_from(
    ["/", ".", "[", "]", "=", "~0", "~1", "~2", "-", "0", "1", "a", "k", "v", "x", ":", "²"]
)
_PATHS = st.lists(_PATH_PIECES, max_size=10).map("".join)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=3),
    st.sampled_from(["v", "1", "-1", "true"]),
    st.just(LongInt("1" * 5000)),
)
_DOCUMENTS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "k", "x", "0", "-1", "[k=v]", "a.b"]), inner),
    ),
    max_leaves=20,
)


@FUZZ
@given(text=_PATHS, document=_DOCUMENTS)
def test_extract_never_raises(text: str, document: Any) -> None:
    try:
        path = parse_path(text)
    except PathSyntaxError:
        return
    extract(path, document, {"k": "v"}, {"k": "v"})


@pytest.mark.parametrize("path", ["/" + "1" * 5000, "/-" + "1" * 5000, "a." + "9" * 5000])
def test_an_index_longer_than_int_reads_is_past_the_end(path: str) -> None:
    """int() refuses more than 4,300 digits: a ValueError out of extract, at run time."""
    assert extract(parse_path(path), {"a": [1, 2]}) is None
    assert extract(parse_path(path), [1, 2]) is None


# --------------------------------------------------------------------- answers

_MEMBERS = st.sampled_from(
    [
        "state",
        "status",
        "done",
        "error",
        "code",
        "message",
        "id",
        "name",
        "job_id",
        "items",
        "data",
        "counts",
        "request_counts",
        "processing_status",
        "output",
        "response",
        "next_page_token",
        "has_more",
        "output_file_id",
        "results_url",
        "errors",
    ]
)
_ANSWER_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),
    st.sampled_from(
        [
            *("running", "succeeded", "failed", "queued", "in_progress", "completed", "ended"),
            *("canceled", "expired", "processing", "error", "Succeeded", "0", "1", "../x"),
        ]
    ),
    st.text(max_size=6),
)
_ANSWER_DOCUMENTS = st.recursive(
    _ANSWER_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_MEMBERS, inner, max_size=5)
    ),
    max_leaves=25,
)
_HEADERS = st.dictionaries(
    st.sampled_from(
        [
            *("Retry-After", "Content-Type", "X-Request-Id", "Operation-Location", "Location"),
            *("x-ratelimit-remaining", "Content-Digest", "Content-MD5"),
        ]
    ),
    st.one_of(
        st.text(max_size=12),
        st.sampled_from(["0", "-1", "1e308", "nan", "Fri, 31 Dec 9999 23:59:59 GMT"]),
    ),
    max_size=4,
)


def _encoded(document: Any) -> bytes:
    return json.dumps(document).encode()


_BODIES = st.one_of(
    _ANSWER_DOCUMENTS.map(_encoded),
    st.binary(max_size=30),
    st.sampled_from([b"", b"NaN", b"[" * 5000, b"1" * 5000, b"<html>502</html>"]),
)
_ANSWERS = st.builds(
    lambda code, headers, body: HttpResponse(code, headers, body, url="https://api.test/x"),
    st.one_of(st.sampled_from([200, 201, 202, 204, 400, 404, 409, 429, 500]), st.integers(0, 999)),
    _HEADERS,
    _BODIES,
)


def _names_a_state(desc: ProviderDescription, resp: HttpResponse) -> bool:
    """Whether the answer names a state: an HTTP code mapped to one, or the
    body's value at `status.state` (or its `done`, an AIP-151 operation)."""
    spec = desc.status
    if resp.status_code in spec.state_from_http_status:
        return True
    body = resp.json_body
    if spec.state is not None:
        return extract(spec.state, body, resp.headers) is not None
    return spec.done is not None and isinstance(body, dict)


@FUZZ
@given(name=st.sampled_from(sorted(DESCRIPTIONS)), resp=_ANSWERS)
def test_any_answer_is_read_without_raising_and_no_state_is_invented(
    name: str, resp: HttpResponse
) -> None:
    desc = DESCRIPTIONS[name]
    status = parse_status(desc, resp, NOW)
    if status.remote_state is not None:
        assert _names_a_state(desc, resp), (status.remote_state, status.raw_state)
    parse_create(desc, resp, None, NOW)
    parse_cancel(desc, resp, NOW)
    if desc.lookup.supported:
        parse_lookup(desc, resp, "ref")
    result_failure(desc, resp)
    inline_result(desc, resp)
    validate_result(desc, resp, status)
    if desc.webhooks is not None:
        with contextlib.suppress(WebhookParseError):  # unmatchable: the one refusal
            parse_webhook(desc, resp.body, resp.headers, {"token": "x"})


@pytest.mark.parametrize("body", [b"<html>Bad gateway</html>", b"", b"null", b"[]", b'"x"'])
def test_an_operation_answer_that_is_no_object_names_no_state(body: bytes) -> None:
    """AIP-151 leaves `done` out while running, so an absent `done` reads as
    running: in an operation's JSON object. A proxy's page is no operation;
    read as running it hid the stateless-read escalation for good."""
    fact = parse_status(DESCRIPTIONS["google_lro"], HttpResponse(200, {}, body), NOW)
    assert fact.remote_state is None and fact.raw_state is None
    assert fact.problem == "status body is not a JSON object"


def test_an_operation_object_without_done_still_reads_as_running() -> None:
    body = b'{"name": "operations/1"}'
    fact = parse_status(DESCRIPTIONS["google_lro"], HttpResponse(200, {}, body), NOW)
    assert fact.remote_state is not None and fact.raw_state == "done=false"


# --------------------------------------------------------------------- config regressions


@pytest.mark.parametrize("code", ["²⁰²", "٢٠٢", "20²"])
def test_a_status_code_key_in_other_digits_is_a_config_error(code: str) -> None:
    """`"²".isdigit()` is true and `int("²")` raises: a ValueError traceback."""
    problem = config_error(acme(status={"state_from_http_status": {code: "running"}}))
    assert f"state_from_http_status.{code}: not an HTTP status code" in problem


@pytest.mark.parametrize("section", ["auth", "webhooks"])
def test_a_secret_file_that_is_not_utf8_is_a_config_error_quoting_none_of_it(
    tmp_path: Path, section: str
) -> None:
    key = tmp_path / "key.bin"
    key.write_bytes(b"\xffsk-binary\xfe")
    problem = config_error(_with_secret_file(section, str(key)))
    assert f"{key} is not UTF-8 text" in problem
    # the decoder's own message named a byte of the secret and where it was
    assert "0xff" not in problem and "position" not in problem


@pytest.mark.parametrize("section", ["auth", "webhooks"])
def test_a_secret_file_name_with_nul_is_a_config_error(section: str) -> None:
    problem = config_error(_with_secret_file(section, "/run/keys/a\x00b"))
    assert "holds a NUL character" in problem


def test_a_secret_file_too_big_to_be_one_is_refused_unread(tmp_path: Path) -> None:
    """/dev/zero, or a log named by mistake: not read whole into memory."""
    big = tmp_path / "big"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    assert "not a secret" in config_error(_with_secret_file("auth", str(big)))


def test_a_secret_file_keeps_its_line_ends_as_a_text_read_did(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    key.write_bytes(b"line1\r\nline2\r\n")
    # a webhook's key (a PEM): an [auth] credential with a line break is refused
    desc = parse_providers(
        {"providers": {"acme": _with_secret_file("webhooks", str(key))}}, "c.toml", {}
    )["acme"]
    assert desc.webhooks is not None
    assert [s.reveal() for s in desc.webhooks.secrets] == ["line1\nline2"]


def _with_secret_file(section: str, name: str) -> dict[str, Any]:
    if section == "auth":
        return acme(auth={"secret_file": name})
    webhooks = {"scheme": "static_header", "options": {"header": "X-Token"}, "job_id": "/id"}
    return acme(webhooks={**webhooks, "secrets_file": name})


@pytest.mark.parametrize(
    "literal",
    [
        datetime.datetime(2026, 1, 1, 12, 0),  # TOML's local date-time
        datetime.date(2026, 1, 1),
        datetime.time(12, 0),
        math.nan,
        math.inf,
        {"nested": [1, math.inf]},
        [{"at": datetime.date(2026, 1, 1)}],
    ],
)
def test_a_set_body_literal_that_is_no_json_is_a_config_error(literal: Any) -> None:
    """It loaded, then every create failed to encode and was filed as never sent."""
    problem = config_error(acme(create={"set_body": {"metadata.at": literal}}))
    assert "create.set_body.metadata.at" in problem and "not a JSON" in problem


def test_set_body_json_literals_still_load() -> None:
    literal = {"n": 1, "f": 2.5, "ok": True, "list": ["a", 2], "big": 2**70}
    table = acme(create={"set_body": {"options": literal}})
    desc = parse_providers({"providers": {"acme": table}}, "c.toml", {})["acme"]
    [field] = desc.create.set_body
    assert field.literal == literal


def test_toml_nested_deeper_than_the_reader_recurses_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_text("[providers.acme]\nbase_url = " + "[" * 5000)
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_settings(config, {})
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_providers(config, {})


def test_a_config_file_not_utf8_is_a_config_error_from_load_providers(tmp_path: Path) -> None:
    config = tmp_path / "latin1.toml"
    config.write_bytes(b'[providers.acme]\ndescription = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_providers(config, {})


@pytest.mark.parametrize("value", ["inf", "-inf", "1e400", "2.7"])
def test_an_integer_setting_that_is_no_whole_number_is_a_config_error(
    tmp_path: Path, value: str
) -> None:
    """int(inf) raised OverflowError, which the conversion did not expect; 2.7
    was taken as 2."""
    config = tmp_path / "jobwarden.toml"
    config.write_text(f"[jobwarden]\nclaim_batch = {value}\n")
    with pytest.raises(ConfigError, match="claim_batch: expected a whole number"):
        load_settings(config, {})


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_duration_setting_that_is_not_finite_is_a_config_error(
    tmp_path: Path, value: str
) -> None:
    """Every comparison with NaN is false: lease_seconds = nan passed the check that
    a call fits in a lease, and every claim then asked PostgreSQL for a NaN lease."""
    config = tmp_path / "jobwarden.toml"
    config.write_text(f"[jobwarden]\nlease_seconds = {value}\n")
    with pytest.raises(ConfigError, match="lease_seconds: expected a finite number"):
        load_settings(config, {})
    with pytest.raises(ConfigError, match="lease_seconds: expected a finite number"):
        load_settings(None, {"JW_LEASE_SECONDS": value})


def test_a_whole_number_written_as_a_float_is_still_a_count(tmp_path: Path) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text("[jobwarden]\nclaim_batch = 50.0\nlease_seconds = 30\n")
    settings = load_settings(config, {})
    assert settings.claim_batch == 50 and settings.lease_seconds == 30.0
