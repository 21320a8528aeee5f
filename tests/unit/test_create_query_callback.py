"""A callback URL asked for in the create's query string (fal.ai's `?fal_webhook=`).

fal's queue takes the webhook only as a query parameter of the submit; create.path
refused `{webhook_url}` ("unknown placeholder"), so a new user could write our
receiver's URL out by hand at best, sent whether or not a receiver runs. Now a
query parameter whose whole value is `{webhook_url}` carries it, percent-encoded,
and is left out of the URL when this reconciler knows no public_webhook_url (as a
body field naming it is).
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.requests import build_create

HOOK = "https://jobwarden.example.com/webhooks/fal"


def fal(path: str) -> Any:
    table = {
        "base_url": "https://queue.fal.run",
        "create": {"path": path, "idempotency": "none", "job_id": "/request_id"},
        "status": {
            "path": "/fal-ai/flux/requests/{job_id}/status",
            "state": "/status",
            "state_map": {"IN_QUEUE": "pending", "COMPLETED": "succeeded"},
        },
        "result": {"source": "path", "path": "/fal-ai/flux/requests/{job_id}"},
    }
    return parse_providers({"providers": {"fal": table}}, "config.toml", {})["fal"]


def url(path: str, hook: str | None) -> str:
    req = build_create(
        fal(path),
        body={"prompt": "a cat"},
        idempotency_token="tok",
        client_reference="op_1",
        context={"webhook_url": hook},
    )
    return req.url


def test_the_callback_url_travels_percent_encoded_in_its_query_parameter() -> None:
    desc = fal("/fal-ai/flux/dev?fal_webhook={webhook_url}")
    assert desc.create.asks_callback
    assert url("/fal-ai/flux/dev?fal_webhook={webhook_url}", HOOK) == (
        "https://queue.fal.run/fal-ai/flux/dev"
        "?fal_webhook=https%3A%2F%2Fjobwarden.example.com%2Fwebhooks%2Ffal"
    )


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("/fal-ai/flux/dev?fal_webhook={webhook_url}", "/fal-ai/flux/dev"),
        ("/x?a=1&hook={webhook_url}&b=2", "/x?a=1&b=2"),
        ("/x?hook={webhook_url}&b=2", "/x?b=2"),
        ("/x?a=1&hook={webhook_url}", "/x?a=1"),
    ],
)
def test_without_a_public_url_the_parameter_is_left_out(path: str, sent: str) -> None:
    assert url(path, None) == "https://queue.fal.run" + sent


@pytest.mark.parametrize(
    "path",
    [
        "/v1/{webhook_url}/jobs",  # not in the query
        "/x?hook=pre{webhook_url}",  # not a parameter's whole value
        "/x?hook={webhook_url}{webhook_url}",
    ],
)
def test_webhook_url_elsewhere_in_the_path_is_refused(path: str) -> None:
    with pytest.raises(ConfigError, match=r"providers\.fal\.create\.path: .*whole value"):
        fal(path)


def test_a_secret_never_goes_in_the_path() -> None:
    with pytest.raises(ConfigError, match=r"unknown placeholder \{webhook_secret\}"):
        fal("/x?token={webhook_secret}")
