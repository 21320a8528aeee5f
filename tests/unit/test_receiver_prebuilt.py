"""What the receiver works out once per provider answers as the per-delivery way did.

The webhook endpoint builds each provider's signature check at start-up
(`signatures.verifier`), reads the headers the check needs straight from the
ASGI scope (`HeaderView.from_raw`), hands its own dedupe key to the event's
reading (`webhook_fact(event_id=…)`) and times answers in a lock-free
histogram (`receiver.metrics._Timings`). Each is held here to the way it
replaced, over generated input (hypothesis, derandomized):

- the view of the raw header list is the view of the framework's headers,
  and the Content-Type and Content-Length read while screening them are
  what the framework's `Headers.get` reads;
- the prebuilt check, on that view (holding only the headers it reads,
  where its scheme says which: `check_reads_only`), gives the outcome `verify` gives (the
  same `Verified`, or the same refusal reason) for signed, tampered and
  random requests of every scheme family;
- a configuration the check cannot be built from fails each delivery with
  the reason `verify` gives; a plugin's own verifier is never replaced;
- the histogram's exposition is prometheus_client's `Histogram`'s;
- a reading handed the key differs from one without it in the key alone.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from starlette.datastructures import Headers
from starlette.types import Message

from receiver.metrics import LATENCY_BUCKETS, ReceiverMetrics, _Timings
from receiver.webhooks.endpoint import WebhookEndpoint, _Refusal, _screen_headers, request_check
from receiver.webhooks.ingest import Event, Outcome
from shared import secret as secret_module
from shared.providers import ProviderAdapter, parse_providers
from shared.providers.responses import webhook_fact
from shared.signatures import (
    SignatureError,
    Verified,
    check_reads_only,
    sign_headers,
    verifier,
    verify,
)
from shared.signatures.headers import HeaderView

FUZZ = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
NOW = 1_700_000_000
URL = "https://hooks.example.test/webhooks/p"
_WHSEC = "whsec_" + base64.b64encode(b"prebuilt-secret-32-bytes-long-00").decode()
_GENERIC: dict[str, object] = {
    "signature_header": "X-Signature",
    "signed_content": "{timestamp}:{id}:{method}:{url}:{body}",
    "timestamp_header": "X-Timestamp",
    "id_header": "X-Event-Id",
}
# (scheme, options, secrets the receiver holds, the secret the sender signs with)
CONFIGS: list[tuple[str, dict[str, object], list[str], str | None]] = [
    ("standard_webhooks", {}, [_WHSEC], _WHSEC),
    ("standard_webhooks", {}, ["whsec_" + base64.b64encode(b"x" * 32).decode(), _WHSEC], _WHSEC),
    ("stripe", {}, ["whsec_text_key"], "whsec_text_key"),
    ("github", {}, ["s"], "s"),
    ("slack", {}, ["s"], "s"),
    ("shopify", {}, ["s"], "s"),
    ("generic_hmac", _GENERIC, ["s"], "s"),
    ("static_header", {"header": "X-Token"}, ["tok"], None),
]
NAMES = [
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "stripe-signature",
    "x-hub-signature-256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "x-shopify-hmac-sha256",
    "x-token",
    "x-signature",
    "x-timestamp",
    "x-event-id",
    "content-type",
]
_VALUES = st.binary(max_size=40).map(lambda raw: raw.replace(b"\r", b"").replace(b"\n", b""))


def _raw(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """As an ASGI server hands headers over: lowercased names, Latin-1 bytes."""
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]


def _outcome(call: Any) -> Verified | str:
    try:
        result: Verified = call()
    except SignatureError as exc:
        return exc.reason
    return result


def _both(
    scheme: str,
    options: Mapping[str, object],
    secrets: Sequence[str],
    raw: list[tuple[bytes, bytes]],
    body: bytes,
    now: float,
) -> tuple[Verified | str, Verified | str]:
    """(the prebuilt check on the raw view, `verify` on the framework's headers)."""
    method, url = "POST", URL

    def prebuilt() -> Verified:
        check = verifier(scheme, options, secrets, 300)
        reads = check_reads_only(scheme, options)
        keep = None if reads is None else {name.encode() for name in reads}
        return check(HeaderView.from_raw(raw, keep), body, now, method, url)

    def per_delivery() -> Verified:
        return verify(
            scheme, options, Headers(raw=raw), body, secrets, now, 300, method=method, url=url
        )

    return _outcome(prebuilt), _outcome(per_delivery)


@FUZZ
@given(headers=st.lists(st.tuples(st.sampled_from(NAMES).map(str.encode), _VALUES), max_size=10))
def test_the_raw_view_is_the_view_of_the_frameworks_headers(
    headers: list[tuple[bytes, bytes]],
) -> None:
    raw = HeaderView.from_raw(headers)
    framework = HeaderView(Headers(raw=headers))
    for name in NAMES:
        assert _outcome(lambda n=name: raw.get(n)) == _outcome(lambda n=name: framework.get(n))
    assert repr(raw) == repr(framework)


@FUZZ
@given(
    config=st.sampled_from(CONFIGS),
    body=st.binary(max_size=48),
    drift=st.sampled_from([0, 299, 301, -301, 10**9]),
    cut=st.sampled_from([None, "body", "signature", "drop", "duplicate"]),
    event_id=st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12),
)
def test_the_prebuilt_check_answers_as_verify_on_signed_requests(
    config: tuple[str, dict[str, object], list[str], str | None],
    body: bytes,
    drift: int,
    cut: str | None,
    event_id: str,
) -> None:
    scheme, options, secrets, signer = config
    if signer is None:
        headers = {"X-Token": secrets[0]}
    else:
        headers = sign_headers(
            scheme,
            options,
            signer,
            body,
            timestamp=NOW,
            event_id=event_id,
            method="POST",
            url=URL,
        )
    raw = _raw(headers)
    if cut == "body":
        body += b" "
    elif cut == "signature":
        raw[0] = (raw[0][0], raw[0][1][:-2] + b"AA")
    elif cut == "drop":
        raw = raw[1:]
    elif cut == "duplicate":
        raw.append((raw[0][0], raw[0][1] + b"x"))
    prebuilt, per_delivery = _both(scheme, options, secrets, raw, body, NOW + drift)
    assert prebuilt == per_delivery
    if cut is None and drift in (0, 299):  # the honest delivery verifies both ways
        assert isinstance(prebuilt, Verified)


@FUZZ
@given(
    config=st.sampled_from(CONFIGS),
    headers=st.lists(st.tuples(st.sampled_from(NAMES).map(str.encode), _VALUES), max_size=8),
    body=st.binary(max_size=32),
)
def test_the_prebuilt_check_answers_as_verify_on_random_requests(
    config: tuple[str, dict[str, object], list[str], str | None],
    headers: list[tuple[bytes, bytes]],
    body: bytes,
) -> None:
    scheme, options, secrets, _ = config
    prebuilt, per_delivery = _both(scheme, options, secrets, headers, body, NOW)
    assert prebuilt == per_delivery


@pytest.mark.parametrize(
    ("scheme", "options", "secrets", "tolerance", "reason"),
    [
        ("standard_webhooks", {}, [" "], 300, "no_secret"),
        ("standard_webhooks", {}, [], 300, "no_secret"),
        ("github", {}, ["s"], -1, "bad_options"),
        ("generic_hmac", {"signed_content": "{body}"}, ["s"], 300, "bad_options"),
        ("static_header", {}, ["tok"], 300, "bad_options"),
    ],
)
def test_a_check_that_cannot_be_built_fails_as_verify_does(
    scheme: str, options: dict[str, object], secrets: list[str], tolerance: int, reason: str
) -> None:
    with pytest.raises(SignatureError) as built:
        verifier(scheme, options, secrets, tolerance)
    with pytest.raises(SignatureError) as called:
        verify(scheme, options, {}, b"{}", secrets, NOW, tolerance)
    assert built.value.reason == called.value.reason == reason


def _provider(scheme: str, secret: str = "s") -> Any:
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": "/jobs/{job_id}", "state": "/state", "state_map": {"done": "succeeded"}},
        "result": {"source": "none"},
        "webhooks": {
            "scheme": scheme,
            "secrets_env": "S",
            "job_id": "/job",
            "state": "/state",
            "state_map": {"done": "succeeded"},
        },
    }
    return parse_providers({"providers": {"p": table}}, "test.toml", {"S": secret})["p"]


def test_the_endpoint_builds_the_check_once_and_keeps_a_plugins_own() -> None:
    desc = _provider("github")
    check = request_check(ProviderAdapter(desc), desc.webhooks)
    assert check is not None
    body = b'{"job": "j1", "state": "done"}'
    headers = sign_headers("github", {}, "s", body, timestamp=NOW, event_id="e")
    verified = check(HeaderView.from_raw(_raw(headers)), body, NOW, "POST", None)
    assert verified.scheme == "github"

    class OwnVerifier(ProviderAdapter):
        def verify_webhook(self, *args: Any, **kwargs: Any) -> Verified:
            raise AssertionError("not called here")

    assert request_check(OwnVerifier(desc), desc.webhooks) is None


def test_a_configuration_the_check_cannot_be_built_from_fails_each_delivery() -> None:
    desc = _provider("github")
    spec = dataclasses.replace(desc.webhooks, tolerance_seconds=-1)
    check = request_check(ProviderAdapter(dataclasses.replace(desc, webhooks=spec)), spec)
    assert check is not None
    for _ in range(2):
        with pytest.raises(SignatureError) as refused:
            check(HeaderView.from_raw([]), b"{}", NOW, "POST", None)
        assert refused.value.reason == "bad_options"


@FUZZ
@given(
    values=st.lists(
        st.one_of(
            st.sampled_from([0.0, *LATENCY_BUCKETS, 5.000001, 60.0]),
            st.floats(min_value=0.0, max_value=10.0, allow_nan=False),
        ),
        max_size=200,
    )
)
def test_the_timings_are_exposed_as_a_histogram_is(values: list[float]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    name, doc = "jobwarden_webhook_request_duration_seconds", "Time to answer"
    timings = _Timings(name, doc, LATENCY_BUCKETS, ours)
    histogram = Histogram(name, doc, buckets=LATENCY_BUCKETS, registry=theirs)
    for value in values:
        timings.observe(value)
        histogram.observe(value)

    def exposed(registry: CollectorRegistry) -> str:
        text = generate_latest(registry).decode()
        assert re.search(rf"^{name}_created \d", text, re.MULTILINE)
        return re.sub(r"_created \S+", "_created T", text)

    assert exposed(ours) == exposed(theirs)


@pytest.mark.parametrize(
    "document",
    [
        {"job": "j1", "state": "done"},
        {"job": 12, "state": "odd"},
        {"job": "j\u00e9", "state": 3},
        {"job": "x" * 600, "state": "done\x00"},
    ],
)
def test_a_reading_handed_the_key_differs_in_the_key_alone(document: dict[str, Any]) -> None:
    desc = _provider("github")
    read = webhook_fact(desc, document, b"{}", {}, {})
    handed = webhook_fact(desc, document, b"{}", {}, {}, "our-key")
    assert handed.event_id == "our-key"
    assert handed == type(read)(**{**read.__dict__, "event_id": "our-key"})


def test_only_a_spec_schemes_check_names_the_headers_it_reads() -> None:
    names = {"webhook-id", "webhook-timestamp", "webhook-signature"}
    aliases = {"svix-id", "svix-timestamp", "svix-signature"}
    assert check_reads_only("standard_webhooks", {}) == frozenset(names | aliases)
    # Twilio's check also reads the content type: every header stays in its view
    assert check_reads_only("twilio", {}) is None
    assert check_reads_only("static_header", {"header": "X-Token"}) is None


@FUZZ
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from([b"content-type", b"content-length", b"content-encoding", b"x-a"]),
            st.sampled_from([b"application/json", b"12", b"", b" identity ", b"x"]),
        ),
        max_size=6,
    )
)
def test_the_screening_reads_the_content_headers_as_the_framework_does(
    headers: list[tuple[bytes, bytes]],
) -> None:
    try:
        content_type, content_length = _screen_headers(headers, None)
    except _Refusal as refusal:
        assert refusal.reason == "unsupported_encoding"
        return
    framework = Headers(raw=headers)
    assert (content_type, content_length) == (
        framework.get("content-type"),
        framework.get("content-length"),
    )


class _Writer:
    """The receiver's writer, settling every event at once as new and unmatched."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def submit(self, event: Event) -> Outcome:
        self.events.append(event)
        return Outcome("stored", len(self.events), None, None, None)


class _Refusals:
    def note(self, provider: str, reason: str, status: int) -> None:
        pass


def _deliver(endpoint: WebhookEndpoint, secret: str, event_id: str) -> int:
    """The status the endpoint answers a GitHub delivery signed with `secret`."""
    body = b'{"job": "j1", "state": "done"}'
    headers = sign_headers("github", {}, secret, body, timestamp=NOW, event_id=event_id)
    raw = [*_raw(headers), (b"content-type", b"application/json")]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/p",
        "path_params": {"provider": "p"},
        "headers": raw,
        "query_string": b"",
    }
    statuses: list[int] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    asyncio.run(endpoint(scope, receive, send))
    return statuses[0]


def test_a_secret_rotated_in_its_file_is_followed_by_the_prebuilt_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret from `secrets_file` is read again when its file changes (README
    "Rotate webhook secrets": no restart): the check built at start-up must
    verify with the new value, and no longer with the value it replaced, as
    each delivery did when it built its own check."""
    clock = [1000.0]
    monkeypatch.setattr(secret_module, "clock", lambda: clock[0])
    file = tmp_path / "hook.key"
    file.write_text("first-secret")
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/jobs", "idempotency": "none", "job_id": "/id"},
        "status": {"path": "/jobs/{job_id}", "state": "/state", "state_map": {"done": "succeeded"}},
        "result": {"source": "none"},
        "webhooks": {"scheme": "github", "secrets_file": str(file), "job_id": "/job"},
    }
    desc = parse_providers({"providers": {"p": table}}, "test.toml", {})["p"]
    writer = _Writer()
    endpoint = WebhookEndpoint(
        {"p": desc},
        writer,  # type: ignore[arg-type]
        ReceiverMetrics(["p"]),
        _Refusals(),  # type: ignore[arg-type]
        max_body_bytes=1 << 16,
        now=lambda: float(NOW),
    )
    assert _deliver(endpoint, "first-secret", "e1") == 200
    file.write_text("second-secret")  # a new version: another size and modification time
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    clock[0] += secret_module.RECHECK_SECONDS
    assert _deliver(endpoint, "second-secret", "e2") == 200
    assert _deliver(endpoint, "first-secret", "e3") == 401  # the replaced secret: a forgery
    assert len(writer.events) == 2


def test_the_check_is_of_the_adapters_own_description_as_verify_webhook_reads_it() -> None:
    """A plugin may make its own description and keep the base `verify_webhook`,
    which checks with that description's scheme and the endpoint's secrets: the
    check built once does the same."""
    github, slack = _provider("github"), _provider("slack")

    class OwnDescription(ProviderAdapter):
        def __init__(self, desc: Any) -> None:
            super().__init__(slack)

    adapter = OwnDescription(github)
    check = request_check(adapter, github.webhooks)
    assert check is not None
    body = b'{"job": "j1", "state": "done"}'
    for scheme in ("github", "slack"):
        headers = sign_headers(scheme, {}, "s", body, timestamp=NOW, event_id="e")
        raw = _raw(headers)
        per_delivery = _outcome(
            lambda h=headers: adapter.verify_webhook(h, body, ["s"], NOW, method="POST")
        )
        built = _outcome(lambda r=raw: check(HeaderView.from_raw(r), body, NOW, "POST", None))
        assert built == per_delivery
    assert isinstance(built, Verified) and built.scheme == "slack"
