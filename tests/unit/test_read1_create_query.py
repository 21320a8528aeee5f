"""`{webhook_url}` in create.path, read a second time (commit eddc56b).

The rule README states: the callback URL goes in `create.path` only as one query
parameter's whole value; "anywhere else in the path, or with anything beside it in
the value, `{webhook_url}` is refused at load". Found: a `{+webhook_url}` beside it
(the URL put in the path as well; every create then unbuildable), a parameter after
a `#` (a fragment never leaves the client: the create recorded as naming our URL,
`operations.callback_url_sent`, and never giving it), after a second `?` (text of
the value before it) or in the path before the `?` all loaded.

Properties (hypothesis, derandomized) over generated paths, parameter first, middle
or last among others that carry our other placeholders, and hostile callback URLs:
the URL sent carries the callback URL, decoded, as that parameter's value and the
other parameters as without it; with no public URL the parameter alone is gone;
the recorded URL (`sanitized_url`) holds no secret.

JW_FUZZ_EXAMPLES raises the example count.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.providers import ConfigError, parse_providers
from shared.providers.requests import build_create

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 300
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SECRET = "whsec-READ1-0123456789abcdef0123456789"


def described(path: str) -> Any:
    table = {
        "base_url": "https://queue.fal.run",
        "create": {"path": path, "idempotency": "none", "job_id": "/request_id"},
        "status": {
            "path": "/r/{job_id}/status",
            "state": "/status",
            "state_map": {"IN_QUEUE": "pending", "COMPLETED": "succeeded"},
        },
        "result": {"source": "path", "path": "/r/{job_id}"},
        "webhooks": {
            "scheme": "hmac",
            "secrets_env": "READ1_WH",
            "options": {"signature_header": "X-Sig", "format": "hex"},
            "job_id": "/request_id",
        },
    }
    return parse_providers({"providers": {"fal": table}}, "config.toml", {"READ1_WH": SECRET})[
        "fal"
    ]


@pytest.mark.parametrize(
    "path",
    [
        "/x/{+webhook_url}?cb={webhook_url}",  # in the path too (reserved form)
        "/x?cb={webhook_url}&cb2={+webhook_url}",  # a second value, reserved form
        "/x#?cb={webhook_url}",  # in a fragment: never sent
        "/x?a=1#&cb={webhook_url}",  # likewise, after a query
        "/x?a=1?cb={webhook_url}",  # after a second `?`: the value of `a`
        "/x&cb={webhook_url}&?y=1",  # in the path, before the query
    ],
)
def test_webhook_url_anywhere_but_one_query_parameters_whole_value_is_refused(
    path: str,
) -> None:
    with pytest.raises(ConfigError, match=r"providers\.fal\.create\.path: .*whole value"):
        described(path)


_NAMES = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.~", min_size=1
)
_VALUES = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.~", max_size=6),
    st.sampled_from(["{client_reference}", "{idempotency_token}"]),
)
_HOOKS = st.one_of(
    st.sampled_from(
        [
            "https://hooks.example/webhooks/fal",
            "https://hooks.example/w?a=b&c=d#frag",
            "https://[::1]:8443/w/{x}?q=%41%zz+",
            "https://user:pw@hooks.example/w/ü/é?&&==",
            "https://hooks.example/w?fal_webhook=x&cb=y",
        ]
    ),
    # no control character: check_path_value refuses one in any value (DEL too)
    st.text(st.characters(min_codepoint=0x20, exclude_categories=["Cs", "Cc"]), min_size=1).map(
        lambda t: "https://hooks.example/" + t
    ),
)


@FUZZ
@given(
    segment=st.sampled_from(["/x", "/fal-ai/flux/dev", "/{client_reference}/run", "/"]),
    others=st.lists(st.tuples(_NAMES, _VALUES), max_size=3, unique_by=lambda p: p[0]),
    name=_NAMES,
    where=st.integers(0, 3),
    hook=_HOOKS,
)
def test_the_callback_parameter_carries_the_url_whole_and_leaves_the_rest_alone(
    segment: str, others: list[tuple[str, str]], name: str, where: int, hook: str
) -> None:
    others = [(n, v) for n, v in others if n != name]
    params = [*others]
    params.insert(min(where, len(params)), (name, "{webhook_url}"))
    path = segment + "?" + "&".join(f"{n}={v}" for n, v in params)
    desc = described(path)
    assert desc.create.asks_callback
    filled = {"{client_reference}": "op_1", "{idempotency_token}": "tok"}
    expected_others = [(n, filled.get(v, v)) for n, v in others]
    for given_hook in (hook, None):
        req = build_create(
            desc,
            body={"prompt": "a cat"},
            idempotency_token="tok",
            client_reference="op_1",
            context={"webhook_url": given_hook},
        )
        sent = urlsplit(req.url)
        assert sent.fragment == ""
        pairs = parse_qsl(sent.query, keep_blank_values=True, strict_parsing=False)
        carried = [v for n, v in pairs if n == name]
        assert carried == ([given_hook] if given_hook is not None else [])
        assert [p for p in pairs if p[0] != name] == expected_others
        if given_hook is not None:
            assert quote(given_hook, safe="") in req.url  # percent-encoded, as a value
        assert SECRET not in req.url and SECRET not in req.sanitized_url()
