"""The provider description's newest keys, fuzzed: `[webhooks] challenge`
(a name or a table), `options.kv_separator`, the twilio and mailgun schemes,
and `set_body` literals that are nested tables and lists holding placeholders.

Properties, over generated input (hypothesis, derandomized):

- `parse_providers` loads the description or raises `ConfigError` whose
  message names the key at fault; nothing else is raised;
- a `set_body` literal that loaded builds a create
  (`adapter_for(desc).build_create`) or raises `RequestBuildError`, nothing else.

JW_FUZZ_EXAMPLES raises the example count (e.g. 5000 for a long run).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.providers import ConfigError, adapter_for, parse_providers
from shared.providers.errors import RequestBuildError
from tests.unit.test_providers_loader import acme

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 200
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WHSEC = "whsec-FUZZ2-0123456789abcdef0123456789"
ENV = {"FUZZ_WH": WHSEC}

_TEXTS = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "zoom",
            "slack",
            "ZOOM",
            "/event",
            "/payload/plainToken",
            "/challenge",
            "/type",
            "url_verification",
            "endpoint.url_validation",
            "header:X-Challenge",
            "query:token",
            "[",
            "/a/[k=v]",
            ",",
            ";",
            ", ",
            "{job_id}",
            "{webhook_url}",
            "{+webhook_url}",
            "{webhook_secret}",
            "{operation_id}",
            "{idempotency_token}",
            "{client_reference}",
            "{result_deadline_seconds}",
            "{trace_id}",
            "{jobid}",
            "{nope}",
            "{",
            "}",
            "{{job_id}}",
            "x {webhook_url} y",
            "a\x00b",
            "\ud800",
        ]
    ),
    st.text(max_size=8),
)
_SCALARS = st.one_of(
    _TEXTS,
    st.integers(-(2**70), 2**70),
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
    max_leaves=8,
)
_CHALLENGE = st.one_of(
    _VALUES,
    st.sampled_from(["zoom", "slack"]),
    st.fixed_dictionaries(
        {"answer": st.one_of(st.sampled_from(["zoom", "slack"]), _VALUES)},
        optional={"when": _VALUES, "equals": _VALUES, "token": _VALUES, "extra": _VALUES},
    ),
)
_SCHEMES = st.one_of(
    st.sampled_from(["twilio", "mailgun", "slack", "hmac"]),
    st.sampled_from(["hmac", "generic_hmac", "static_header", "stripe", "zoom", "nope"]),
)
_OPTIONS = st.one_of(
    st.just({}),
    # Paddle's, under scheme hmac, its separator and keys fuzzed
    st.fixed_dictionaries(
        {
            "signature_header": st.just("Paddle-Signature"),
            "format": st.sampled_from(["kv", "hex", "versioned"]),
            "kv_separator": st.one_of(st.sampled_from([",", ";", ";;", "", " ;", "="]), _VALUES),
            "signed_content": st.sampled_from(["{timestamp}:{body}", "{body}"]),
        },
        optional={
            "timestamp_key": st.one_of(st.sampled_from(["ts", "t", ";", ",", "="]), _VALUES),
            "signature_key": st.one_of(st.sampled_from(["h1", "v1", ";", ""]), _VALUES),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "kv_separator": st.one_of(st.sampled_from([",", ";"]), _VALUES),
            "signature_header": st.one_of(st.just("X-Sig"), _VALUES),
            "id_header": _VALUES,
            "header": st.one_of(st.just("X-Token"), _VALUES),
            "timestamp_key": _VALUES,
            "key_encoding": st.one_of(st.sampled_from(["raw", "hex", "base64"]), _VALUES),
            "query": _VALUES,
        },
    ),
    _VALUES,
)


_PADDLE = _OPTIONS.filter(lambda o: isinstance(o, dict) and "kv_separator" in o and len(o) > 1)
# (scheme, options): mostly a pair that fits, so the challenge is reached
_PAIRS = st.one_of(
    st.tuples(st.sampled_from(["twilio", "mailgun", "slack"]), st.just({})),
    st.tuples(
        st.just("twilio"),
        st.fixed_dictionaries({}, optional={"signature_header": _TEXTS, "id_header": _TEXTS}),
    ),
    st.tuples(st.just("hmac"), _PADDLE),
    st.tuples(_SCHEMES, _OPTIONS),
)


@FUZZ
@given(pair=_PAIRS, challenge=st.one_of(st.none(), _CHALLENGE))
def test_webhooks_with_new_keys_load_or_are_a_config_error(
    pair: tuple[str, Any], challenge: Any
) -> None:
    scheme, options = pair
    webhooks: dict[str, Any] = {
        "scheme": scheme,
        "options": options,
        "secrets_env": "FUZZ_WH",
        "job_id": "/id",
    }
    if challenge is not None:
        webhooks["challenge"] = challenge
    try:
        parse_providers({"providers": {"fuzz": acme(webhooks=webhooks)}}, "fuzz.toml", ENV)
    except ConfigError as exc:
        message = str(exc)
        assert WHSEC not in message
        assert message.startswith("fuzz.toml: providers.fuzz.webhooks"), message


_PLACEHOLDER_STRINGS = st.sampled_from(
    [
        "{webhook_url}",
        "{+webhook_url}",
        "{webhook_url}?token={webhook_secret}",
        "{client_reference}",
        "{operation_id}",
        "{idempotency_token}",
        "{result_deadline_seconds}",
        "{trace_id}",
        "{job_id}",
        "{jobid}",
        "{x}",
        "plain",
        "",
    ]
)
_LITERALS = st.recursive(
    st.one_of(_PLACEHOLDER_STRINGS, _SCALARS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_TEXTS, inner, min_size=1, max_size=3)
    ),
    max_leaves=10,
)
_FIELDS = st.sampled_from(["options", "config.notify", "a.b.c", "list", "callbacks", "x"])
_CONTEXTS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            name: st.one_of(st.none(), st.text(max_size=6))
            for name in (
                "webhook_url",
                "webhook_secret",
                "operation_id",
                "result_deadline_seconds",
                "trace_id",
            )
        },
    ),
)


@FUZZ
@given(
    fields=st.dictionaries(_FIELDS, _LITERALS, min_size=1, max_size=3),
    body=st.one_of(st.none(), st.dictionaries(st.text(max_size=4), _VALUES, max_size=3)),
    context=_CONTEXTS,
    client_reference=st.text(max_size=8),
)
def test_a_set_body_literal_loads_and_builds_or_fails_cleanly(
    fields: dict[str, Any], body: Any, context: Any, client_reference: str
) -> None:
    table = acme(create={"set_body": fields})
    try:
        desc = parse_providers({"providers": {"fuzz": table}}, "fuzz.toml", ENV)["fuzz"]
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml: providers.fuzz.create.set_body"), str(exc)
        return
    with contextlib.suppress(RequestBuildError):
        adapter_for(desc).build_create(
            body=body if body is not None else {},
            idempotency_token="idem-1",
            client_reference=client_reference,
            context=context,
        )
