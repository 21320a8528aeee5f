"""The webhook endpoint's pure parts and the signature header parsers, fuzzed.

Headers and bodies are the sender's to choose, and only some senders are
who they say. Properties, each over generated input (hypothesis,
derandomized so a failure replays and CI cannot flake):

- a signature header, in every format, is read or refused as
  `malformed_header`; a header lookup answers, or refuses as
  `malformed_header` / `missing_header`; a timestamp is read as the one
  spelling of its number or refused as `malformed_header`, and the replay
  window only ever says stale or future. Nothing else is ever raised (the
  documented reasons: README "Webhooks (the receiver)");
- `verify`, for every preset scheme, answers with a documented reason for
  random header sets;
- an authentic body, whatever its bytes, is read as a JSON object or as
  nothing (`_parse_json`), and what is stored for it (`storable_payload`) is
  JSON PostgreSQL's jsonb takes, equal in content to what was sent, or the
  body kept exactly (`unstorable_payload`);
- the dedupe key is never longer than the column, and never text PostgreSQL
  cannot hold.

JW_FUZZ_EXAMPLES raises the example count (e.g. 5000 for a long run).
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from receiver.webhooks.endpoint import (
    _RISKY_ESCAPE,
    MAX_EVENT_ID_CHARS,
    _parse_json,
    dedupe_id,
    storable_payload,
)
from receiver.webhooks.ingest import UNSTORABLE_MARKER
from shared import jsonread
from shared.providers import parse_providers
from shared.signatures import SignatureError, Verified, verify
from shared.signatures.errors import REASONS
from shared.signatures.formats import HeaderFormat, parse_signature_header
from shared.signatures.headers import MAX_HEADER_CHARS, HeaderView
from shared.signatures.timestamps import check_freshness, parse_unix_seconds
from shared.text import holds_exactly

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 300
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# What a header parser may answer besides a reading: README's 400 reasons.
HEADER_REASONS = {"malformed_header", "missing_header"}

# ------------------------------------------------------------------ header text

# Pieces the formats are made of, and the characters that broke parsers before.
_PIECES = [
    "t=",
    "v1=",
    "v1,",
    "v1a,",
    "v0=",
    "sha256=",
    "sha1=",
    ",",
    " ",
    "  ",
    "=",
    "==",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x1c",
    "\x85",
    "\u2028",
    "\u3000",
    "\xa0",
    "1700000000",
    "0",
    "00",
    "-1",
    "+1",
    "1_000",
    "9" * 16,
    "\u0661\u0662",
    "\xb2",
    "\u00e9",
    "\ud800",
    "\udfff",
    "\x00",
    "\ufeff",
    "+/",
    "-_",
    "00ff",
    "aGVsbG8=",
    "aGVsbG8",
    "AAAA",
]
_HEADER_TEXT = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(_PIECES), max_size=30).map("".join),
    st.lists(
        st.one_of(
            st.sampled_from(_PIECES),
            st.binary(min_size=1, max_size=40).map(lambda b: b.hex()),
            st.binary(min_size=1, max_size=70).map(lambda b: base64.b64encode(b).decode()),
        ),
        max_size=40,
    ).map("".join),
    st.sampled_from(["x", "0", ",", " ", "v1,"]).flatmap(
        lambda unit: st.sampled_from([1, 16, 17, 4095, 4096, 4097, 9000]).map(lambda n: unit * n)
    ),
)
_FORMATS = st.one_of(
    st.builds(
        HeaderFormat,
        kind=st.just("kv"),
        encoding=st.sampled_from(["hex", "base64"]),
        timestamp_key=st.sampled_from([None, "t", "ts"]),
    ),
    st.builds(HeaderFormat, kind=st.just("versioned"), encoding=st.just("base64")),
    st.builds(
        HeaderFormat,
        kind=st.sampled_from(["hex", "base64"]),
        encoding=st.sampled_from(["hex", "base64"]),
        prefix=st.sampled_from(["", "sha256=", "v0=", "v1,"]),
        foreign_is_malformed=st.booleans(),
    ),
)
_LABELS = st.sets(st.sampled_from(["v1", "v1a", "v0", "t", "", "sha256"]), max_size=3)


@FUZZ
@given(fmt=_FORMATS, header=_HEADER_TEXT, labels=_LABELS)
def test_a_signature_header_is_read_or_malformed(
    fmt: HeaderFormat, header: str, labels: set[str]
) -> None:
    try:
        read = parse_signature_header(fmt, header, labels)
    except SignatureError as exc:
        assert exc.reason == "malformed_header"
        return
    for label, value in read.entries:
        assert isinstance(value, bytes) and value  # no real signature is zero bytes
        assert label in labels or (label == "" and fmt.kind in ("hex", "base64"))
    if fmt.kind == "kv" and fmt.timestamp_key is not None:
        assert isinstance(read.timestamp, str)


_NAMES = st.sampled_from(
    ["webhook-id", "Webhook-Id", "WEBHOOK-ID", "svix-id", "x-sig", "X-Sig", "", "\u00e9"]
)


@FUZZ
@given(
    headers=st.dictionaries(_NAMES, _HEADER_TEXT, max_size=6),
    names=st.lists(_NAMES, min_size=1, max_size=3),
)
def test_a_header_lookup_answers_or_refuses_with_a_header_reason(
    headers: dict[str, str], names: list[str]
) -> None:
    view = HeaderView(headers)
    for lookup in (view.get_any, view.require_any, lambda n: view.get(n[0])):
        try:
            value = lookup(names)
        except SignatureError as exc:
            assert exc.reason in HEADER_REASONS
            continue
        assert value is None or (isinstance(value, str) and 0 < len(value) <= MAX_HEADER_CHARS)
    # The view's text never holds a value: it can end up in a traceback.
    for value in headers.values():
        if len(value.strip()) > 3:
            assert value.strip() not in repr(view)


@FUZZ
@given(value=st.one_of(_HEADER_TEXT, st.integers(min_value=-5, max_value=10**17).map(str)))
def test_a_timestamp_is_one_spelling_of_its_number_or_malformed(value: str) -> None:
    try:
        seconds = parse_unix_seconds(value)
    except SignatureError as exc:
        assert exc.reason == "malformed_header"
        return
    assert str(seconds) == value  # one spelling per signed value
    assert 0 <= seconds < 10**15


@FUZZ
@given(
    timestamp=st.integers(min_value=0, max_value=10**15 - 1),
    now=st.floats(min_value=0, max_value=1e15, allow_nan=False),
    tolerance=st.integers(min_value=0, max_value=10**6),
)
def test_the_replay_window_says_stale_or_future_only(
    timestamp: int, now: float, tolerance: int
) -> None:
    try:
        check_freshness(timestamp, now, tolerance)
    except SignatureError as exc:
        assert exc.reason in {"stale_timestamp", "future_timestamp"}
        return
    assert now - tolerance <= timestamp <= now + tolerance


# -------------------------------------------------- verify, every preset scheme

_SECRET = "whsec_" + base64.b64encode(b"fuzz-secret-32-bytes-long-000000").decode()
_CONFIGS: list[tuple[str, dict[str, object], list[str]]] = [
    ("standard_webhooks", {}, [_SECRET]),
    ("stripe", {}, ["whsec_text_key"]),
    ("github", {}, ["s"]),
    ("slack", {}, ["s"]),
    ("shopify", {}, ["s"]),
    ("static_header", {"header": "X-Token"}, ["tok"]),
    (
        "generic_hmac",
        {
            "signature_header": "X-Signature",
            "signed_content": "{timestamp}:{id}:{body}",
            "timestamp_header": "X-Timestamp",
            "id_header": "X-Event-Id",
        },
        ["s"],
    ),
]
_ALL_NAMES = st.sampled_from(
    [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-id",
        "svix-timestamp",
        "svix-signature",
        "Stripe-Signature",
        "X-Hub-Signature-256",
        "X-Slack-Signature",
        "X-Slack-Request-Timestamp",
        "X-Shopify-Hmac-Sha256",
        "X-Token",
        "X-Signature",
        "X-Timestamp",
        "X-Event-Id",
    ]
).flatmap(lambda name: st.sampled_from([name, name.lower(), name.upper()]))


@FUZZ
@given(
    config=st.sampled_from(_CONFIGS),
    headers=st.dictionaries(_ALL_NAMES, _HEADER_TEXT, max_size=8),
    body=st.binary(max_size=64),
    now=st.sampled_from([0.0, 1_700_000_000.0, 1e15]),
)
def test_verify_answers_with_a_documented_reason(
    config: tuple[str, dict[str, object], list[str]],
    headers: dict[str, str],
    body: bytes,
    now: float,
) -> None:
    scheme, options, secrets = config
    try:
        verify(scheme, options, headers, body, secrets, now, method="POST", url="https://x.test/")
    except SignatureError as exc:
        # no_secret / bad_options are our configuration, never a request's doing
        assert exc.reason in REASONS - {"no_secret", "bad_options"}
        return
    # Random headers verify only where the secret itself is the header's value.
    assert scheme == "static_header" and headers, headers


# ----------------------------------------------------------------------- bodies

_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_DOCUMENTS = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
# JSON text fragments that bent readers before: constants JSON does not have,
# numbers past every range, escapes jsonb refuses, duplicate keys, BOMs.
_FRAGMENTS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e200000",
    "0." + "1" * 1200,
    "9" * 5000,
    "-0",
    "1E+2",
    '"\\u0000"',
    '"\\ud800"',
    '"\\udfff"',
    '"\\ud800\\udc00"',
    '"\\\\ud800"',
    '"\\\\\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\uDBFF\\uDFFF"',
    '"\\u00"',
    '"\\x41"',
    '"\x00"',
    '"\x1f"',
    '"\ud800"',
    "true",
    "null",
    "[]",
    "{}",
    '{"a":1,"a":2}',
    '{"id":"x","id":"y"}',
    '{"job_id":1e400}',
    '{"id":1.0}',
    '{"id":' + "7" * 5000 + "}",
]


def _object_text(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{json.dumps(key)}:{value}" for key, value in pairs) + "}"


_JSONISH = st.one_of(
    _DOCUMENTS.map(lambda d: json.dumps(d)),
    _DOCUMENTS.map(lambda d: json.dumps(d, ensure_ascii=False)),
    st.lists(
        st.tuples(
            st.sampled_from(["id", "job_id", "event_id", "state", "a", "a", ""]),
            st.sampled_from(_FRAGMENTS),
        ),
        max_size=6,
    ).map(_object_text),
    st.lists(st.sampled_from([*_FRAGMENTS, "{", "}", "[", "]", ",", ":", '"k"']), max_size=30).map(
        "".join
    ),
    st.integers(min_value=1, max_value=3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.integers(min_value=1, max_value=3000).map(lambda n: "[" * n + "]" * n),
)
_ENCODINGS = st.sampled_from(
    [
        ("utf-8", b""),
        ("utf-8", b"\xef\xbb\xbf"),
        ("utf-16", b""),
        ("utf-16-le", b""),
        ("utf-16-be", b""),
        ("utf-32", b""),
        ("utf-32-le", b""),
        ("latin-1", b""),
    ]
)


def _encoded(text: str, encoding: tuple[str, bytes]) -> bytes:
    name, prefix = encoding
    return prefix + text.encode(name, "surrogatepass" if name.startswith("utf") else "replace")


BODIES = st.one_of(
    st.binary(max_size=200),
    st.builds(_encoded, _JSONISH, _ENCODINGS),
)


def _long_int(text: str) -> Any:
    return jsonread.int_or_long(text)


def _holds_exactly_everywhere(value: Any) -> bool:
    """No NUL and no lone surrogate in any string or key: what jsonb takes.

    A loop, not recursion: a stored document may be nested past Python's stack.
    """
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str) and not holds_exactly(item):
            return False
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
    return True  # a number out of range is the database's to judge (storable_payload)


@FUZZ
@given(body=BODIES)
def test_an_authentic_body_is_stored_as_jsonb_takes_it_or_kept_exactly(body: bytes) -> None:
    document = _parse_json(body)
    assert document is None or isinstance(document, dict)
    if document is None:
        return  # stored as unstorable_payload(body), unit-tested in test_webhook_storable
    payload = storable_payload(body, document)
    assert isinstance(payload, str)
    payload.encode("utf-8")  # no lone surrogate in the text itself
    assert "\x00" not in payload
    try:
        stored = json.loads(payload, parse_int=_long_int, parse_constant=_refuse)
    except RecursionError:  # deeper than this reader goes: no escape jsonb refuses
        assert _RISKY_ESCAPE.search(payload.encode("utf-8")) is None
        return
    if isinstance(stored, dict) and stored.get("jobwarden") == UNSTORABLE_MARKER:
        assert base64.b64decode(stored["body_base64"]) == body
        return
    assert _holds_exactly_everywhere(stored)
    assert isinstance(stored, dict) and stored.keys() <= _scrubbed_keys(document)


def _scrubbed_keys(document: dict[str, Any]) -> set[str]:
    return {k if holds_exactly(k) else _scrub(k) for k in document}


def _scrub(text: str) -> str:
    return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text)


def _refuse(name: str) -> Any:
    raise AssertionError(f"stored payload holds {name}")


_IDS = st.one_of(st.none(), st.text(max_size=20), st.text(min_size=490, max_size=600))


@FUZZ
@given(
    body=BODIES,
    scheme=st.sampled_from(["stripe", "slack", "github", "standard_webhooks"]),
    signed_id=_IDS,
    id_signed=st.booleans(),
)
def test_the_dedupe_key_fits_the_column_whatever_the_body_and_id(
    body: bytes, scheme: str, signed_id: str | None, id_signed: bool
) -> None:
    spec = _webhook_spec(scheme)
    document = _parse_json(body) or {}
    verified = Verified(scheme, signed_id, id_signed, None)
    key = dedupe_id(spec, verified, document, body)
    assert 0 < len(key) <= MAX_EVENT_ID_CHARS
    assert holds_exactly(key)


_SPECS: dict[str, Any] = {}


def _webhook_spec(scheme: str) -> Any:
    if scheme not in _SPECS:
        table = {
            "base_url": "https://provider.example.test",
            "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
            "status": {
                "path": "/jobs/{job_id}",
                "state": "/status",
                "state_map": {"done": "succeeded"},
            },
            "result": {"source": "none"},
            "webhooks": {"scheme": scheme, "secrets_env": "S", "job_id": "/job_id"},
        }
        env = {"S": _SECRET if scheme == "standard_webhooks" else "s"}
        described = parse_providers({"providers": {"p": table}}, "test", env)["p"]
        _SPECS[scheme] = described.webhooks
    return _SPECS[scheme]
