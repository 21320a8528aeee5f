"""`result.source = "webhook"`: a result that comes in a delivery alone.

Baseten's async inference keeps no output: `GET /async_request/{id}` says
SUCCEEDED and the output is POSTed to the webhook alone. Before, no description
could take it, and such an operation succeeded without its output. The
collection itself is in test_unseen_round55b.py; here, what the load takes and
what `providers check` says.
"""

from __future__ import annotations

from typing import Any

from shared.providers.description import ResultSource
from shared.providers.guarantees import describe_guarantees
from tests.unit.test_providers_loader import acme, config_error, load

WEBHOOKS = {
    "scheme": "hmac",
    "options": {
        "signature_header": "X-BASETEN-SIGNATURE",
        "format": "kv",
        "signature_key": "v1",
        "signed_content": "{body}",
    },
    "secrets_env": "HOOK_SECRET",
    "job_id": "/request_id",
}
ENV = {"HOOK_SECRET": "whsec_test"}


def described(**result: Any) -> dict[str, Any]:
    table = acme(result=None, webhooks=WEBHOOKS)
    table["result"] = {"source": "webhook", "inline": "/data", **result}
    return table


def test_a_result_in_a_delivery_loads_and_is_said_so() -> None:
    desc = load(described(), ENV)
    assert desc.result.source is ResultSource.WEBHOOK
    assert desc.result.inline is not None and desc.result.inline.text == "/data"
    (_, _, hooks) = describe_guarantees(desc)[-2]
    assert "; the result is read from a delivery (result.source = webhook)" in hooks
    (_, holds, why) = describe_guarantees(desc)[-1]
    assert not holds
    assert "it comes in a signed delivery alone (result.source = webhook, at '/data')" in why


def test_it_needs_webhooks() -> None:
    table = described()
    del table["webhooks"]
    assert config_error(table, ENV) == (
        "config.toml: providers.acme.result.source: 'webhook' needs [webhooks]"
        " (the deliveries the result comes in)"
    )


def test_it_needs_where_in_the_delivery() -> None:
    table = described()
    del table["result"]["inline"]
    assert config_error(table, ENV) == (
        "config.toml: providers.acme.result.inline: required with source = webhook"
        " (where in the delivery)"
    )


def test_a_fetch_or_a_result_that_is_not_json_is_refused() -> None:
    message = config_error(described(path="/v1/jobs/{job_id}/output"), ENV)
    assert message == (
        "config.toml: providers.acme.result.path: nothing is fetched with source = webhook"
    )
    message = config_error(described(format="text"), ENV)
    assert message == (
        "config.toml: providers.acme.result.format: only json with source = webhook"
        " (a delivery is JSON)"
    )


def test_a_header_or_query_path_is_refused() -> None:
    """A delivery's headers and query are not stored: nothing read at such a path
    could be a result (the operation waited, then result_unavailable)."""
    for inline in ("header:x-output", "query:output"):
        message = config_error(described(inline=inline), ENV)
        assert message is not None and "result.inline" in message, inline


def test_a_scheme_that_does_not_sign_the_body_is_refused() -> None:
    """A static token (or a JWT naming the endpoint alone) authenticates the
    sender, not the body: whoever holds the token, or replays a delivery with
    another body, would write the result, which no read of ours confirms (a
    state is; an output is not)."""
    table = acme(
        result=None,
        webhooks={
            "scheme": "static_header",
            "options": {"header": "X-Token"},
            "secrets_env": "HOOK_SECRET",
            "job_id": "/id",
        },
    )
    table["result"] = {"source": "webhook", "inline": "/data"}
    message = config_error(table, ENV)
    assert "result.source" in message and "signs the body" in message, message
