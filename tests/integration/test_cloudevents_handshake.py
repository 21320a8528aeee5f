"""CloudEvents' abuse-protection handshake (`[webhooks] allowed_origins`).

Azure Event Grid (CloudEvents 1.0 schema) and Azure Web PubSub deliver
nothing to an endpoint until it answers an OPTIONS carrying
`WebHook-Request-Origin` with `WebHook-Allowed-Origin`. Before
`allowed_origins` the receiver refused every OPTIONS (405), so such a
subscription could not be made. Each case here is a real request to the
receiver on a loopback socket.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from shared.providers.errors import ConfigError
from shared.providers.guarantees import describe_guarantees
from tests.integration.test_more_official_signers import _receiver
from tests.integration.test_receiver_support import (
    describe,
    stored_events,
)

KEY = "eg-callback-key-0123456789abcdef"
GRID = """
[providers.grid]
preset = "simulator"
[providers.grid.webhooks]
scheme = "static_header"
secrets_env = "EG_KEY"
events = ""
job_id = "/subject"
allowed_origins = ORIGINS
[providers.grid.webhooks.options]
query = "key"
"""
REFUSED = {"error": "origin_not_allowed"}


def _grid(origins: str = '["eventgrid.azure.net"]') -> dict[str, Any]:
    return describe(GRID.replace("ORIGINS", origins), {"EG_KEY": KEY})


async def _options(rx: Any, headers: list[tuple[str, str]]) -> httpx.Response:
    response: httpx.Response = await rx.client.request(
        "OPTIONS", f"/webhooks/grid?key={KEY}", headers=headers
    )
    return response


async def test_event_grids_handshake_is_answered_and_its_events_then_stored(
    db: Any, pool: Any
) -> None:
    async with _receiver(pool, _grid()) as rx:
        handshake = await _options(
            rx,
            [
                ("WebHook-Request-Origin", "EventGrid.Azure.NET"),
                ("WebHook-Request-Callback", "https://rp-eastus2.eventgrid.azure.net/cb"),
                ("WebHook-Request-Rate", "120"),
            ],
        )
        body = json.dumps(
            [{"specversion": "1.0", "id": "ce-1", "type": "x", "source": "/s", "subject": "j-1"}]
        ).encode()
        posted = await rx.post(
            body, {"content-type": "application/cloudevents-batch+json"}, "grid", f"?key={KEY}"
        )
        answered = rx.metric(
            "jobwarden_webhook_events_rejected_total",
            {"provider": "grid", "reason": "origin_not_allowed"},
        )
    assert handshake.status_code == 200
    assert handshake.headers["webhook-allowed-origin"] == "eventgrid.azure.net"
    assert handshake.headers["webhook-allowed-rate"] == "*"
    assert handshake.content == b""
    assert (posted.status_code, posted.json()["new"]) == (200, 1)
    assert [e["remote_job_id"] for e in await stored_events(db)] == ["j-1"]
    assert answered == 0


@pytest.mark.parametrize(
    "headers",
    [
        [("WebHook-Request-Origin", "attacker.example.test")],
        [],
        [("WebHook-Request-Origin", "eventgrid.azure.net")] * 2,
        [("WebHook-Request-Origin", "eventgrid.azure.net.attacker.test")],
    ],
    ids=["another_origin", "no_origin", "two_origins", "suffixed"],
)
async def test_a_handshake_from_an_origin_not_listed_is_refused(
    db: Any, pool: Any, headers: list[tuple[str, str]]
) -> None:
    async with _receiver(pool, _grid()) as rx:
        refused = await _options(rx, headers)
        counted = rx.metric(
            "jobwarden_webhook_events_rejected_total",
            {"provider": "grid", "reason": "origin_not_allowed"},
        )
    assert (refused.status_code, refused.json()) == (403, REFUSED)
    assert "webhook-allowed-origin" not in refused.headers
    assert counted == 1
    assert await stored_events(db) == []


async def test_any_origin_when_told_so_and_none_without_the_key(pool: Any) -> None:
    async with _receiver(pool, _grid('["*"]')) as rx:
        anyone = await _options(rx, [("WebHook-Request-Origin", "pubsub.webpubsub.azure.com")])
    async with _receiver(
        pool, describe(GRID.replace("allowed_origins = ORIGINS\n", ""), {"EG_KEY": KEY})
    ) as rx:
        without = await _options(rx, [("WebHook-Request-Origin", "eventgrid.azure.net")])
    assert (anyone.status_code, anyone.headers["webhook-allowed-origin"]) == (200, "*")
    assert (without.status_code, without.headers["allow"]) == (405, "POST")


@pytest.mark.parametrize("origins", ['["https://eventgrid.azure.net"]', '["a b"]', '[""]', '"x"'])
def test_an_origin_that_is_no_host_name_is_refused_at_load(origins: str) -> None:
    with pytest.raises(ConfigError, match="allowed_origins"):
        _grid(origins)


def test_providers_check_names_the_origins_answered() -> None:
    [line] = [
        why for name, _, why in describe_guarantees(_grid()["grid"]) if name == "webhooks signed"
    ]
    assert "answers the CloudEvents OPTIONS handshake of eventgrid.azure.net" in line
