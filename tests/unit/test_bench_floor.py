"""The benchmarks' floor handler does the checks it claims (bench/floor.py).

The README compares the receiver with this floor as "the least a durable
receiver does": if the floor skipped its signature or replay check it would
be a ceiling nothing real could reach. Each case is an ASGI call, as uvicorn
makes one.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import MutableMapping
from typing import Any

import pytest

from bench import floor
from shared.signatures import sign_standard_webhooks

SECRET = "whsec_" + base64.b64encode(b"floor-test-signing-key-32-bytes!").decode()
OTHER = "whsec_" + base64.b64encode(b"not-the-floor-test-signing-key-!").decode()
BODY = b'{"type":"job.succeeded","job_id":"j1"}'
NOW = 1_800_000_000  # the handler's clock in every case


def _deliver(headers: dict[str, str], body: bytes = BODY) -> tuple[int, list[tuple[str, bytes]]]:
    stored: list[tuple[str, bytes]] = []

    async def store(event_id: str, payload: bytes) -> None:
        stored.append((event_id, payload))

    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/sim",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }

    async def call() -> None:
        await floor.delivery_handler(SECRET, store, lambda: NOW)(scope, receive, send)

    asyncio.run(call())
    [status] = statuses
    return status, stored


def _signed(event_id: str, stamp: int, secret: str = SECRET, body: bytes = BODY) -> dict[str, str]:
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign_standard_webhooks(secret, event_id, stamp, body),
    }


def test_an_authentic_delivery_is_stored_then_answered() -> None:
    assert _deliver(_signed("evt_1", NOW)) == (204, [("evt_1", BODY)])


def test_one_good_signature_among_several_is_enough() -> None:
    headers = _signed("evt_2", NOW)
    headers["webhook-signature"] = "v1,AAAA " + headers["webhook-signature"]
    assert _deliver(headers)[0] == 204


@pytest.mark.parametrize(
    "headers, body",
    [
        (_signed("evt_3", NOW, OTHER), BODY),  # forged
        (_signed("evt_4", NOW), BODY + b" "),  # body changed after signing
        (_signed("evt_5", NOW - 301), BODY),  # outside the replay window
        (_signed("evt_6", NOW + 301), BODY),  # from the future
        ({"webhook-id": "evt_7", "webhook-timestamp": "x", "webhook-signature": "v1,AA"}, BODY),
        ({}, BODY),
    ],
    ids=["forged", "tampered", "stale", "future", "malformed", "unsigned"],
)
def test_anything_else_is_refused_and_not_stored(headers: dict[str, str], body: bytes) -> None:
    assert _deliver(headers, body) == (401, [])
