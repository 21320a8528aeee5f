"""Shared helpers for the receiver tests (this module holds no tests).

A receiver under test is the real app (`receiver.app.build_app`) with its
lifespan running (so the group-commit writer is live) and an httpx client on
its ASGI interface; `now` is fixed so replay windows are deterministic.
"""

from __future__ import annotations

import base64
import json
import tomllib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
from starlette.applications import Starlette

from receiver.app import build_app
from shared.providers import ProviderDescription, parse_providers
from shared.settings import Settings
from shared.signatures import sign_standard_webhooks

SECRET = "whsec_" + base64.b64encode(b"receiver-test-signing-key-32byte").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"receiver-test-previous-key-32byt").decode()
WRONG_SECRET = "whsec_" + base64.b64encode(b"an-attacker-guess-at-the-key-32b").decode()
NOW = 1_800_000_000  # the receiver's fixed clock (unix seconds)
PROVIDER = "sim"  # tests.support.submit creates operations for this provider
JSON_HEADERS = {"content-type": "application/json"}


def sim_description(secrets: str = SECRET) -> ProviderDescription:
    """The simulator preset; `secrets` may hold several (rotation), comma-separated."""
    names = [f"JW_TEST_SECRET_{i}" for i, _ in enumerate(secrets.split(","))]
    env = dict(zip(names, secrets.split(","), strict=True))
    table = {"preset": "simulator", "webhooks": {"secrets_env": names}}
    return parse_providers({"providers": {PROVIDER: table}}, "test", env)[PROVIDER]


def describe(toml_text: str, env: Mapping[str, str]) -> dict[str, ProviderDescription]:
    """Provider descriptions from a small TOML document (`[providers.<name>]` tables)."""
    return parse_providers(tomllib.loads(toml_text), "test.toml", env)


def settings_for(
    providers: Mapping[str, ProviderDescription] | None = None, **overrides: Any
) -> Settings:
    base = Settings(
        providers=dict(providers) if providers is not None else {PROVIDER: sim_description()}
    )
    return replace(base, **overrides)


@dataclass
class Running:
    app: Starlette
    client: httpx.AsyncClient

    def metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        value = self.app.state.metrics.registry.get_sample_value(name, dict(labels or {}))
        return 0.0 if value is None else float(value)

    async def post(
        self, body: bytes, headers: Mapping[str, str], provider: str = PROVIDER, query: str = ""
    ) -> httpx.Response:
        return await self.client.post(
            f"/webhooks/{provider}{query}", content=body, headers=dict(headers)
        )


@asynccontextmanager
async def running_receiver(
    pool: Any,
    settings: Settings | None = None,
    *,
    now: Callable[[], float] = lambda: float(NOW),
    writer_pool: Any = None,
) -> AsyncIterator[Running]:
    app = build_app(settings or settings_for(), pool, now=now, writer_pool=writer_pool)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://receiver.test"
        ) as client:
            yield Running(app, client)


def event_body(job_id: str | None = "job_1", state: str = "succeeded", **extra: Any) -> bytes:
    document: dict[str, Any] = {"type": f"job.{state}", "state": state, **extra}
    if job_id is not None:
        document["job_id"] = job_id
    return json.dumps(document).encode()


def standard_headers(
    body: bytes,
    msg_id: str = "msg_1",
    *,
    timestamp: int = NOW,
    secret: str = SECRET,
    signature: str | None = None,
) -> dict[str, str]:
    """Headers of a Standard Webhooks delivery, signed with `secret` unless given."""
    return {
        **JSON_HEADERS,
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature or sign_standard_webhooks(secret, msg_id, timestamp, body),
    }


def delivery(
    job_id: str | None = "job_1", msg_id: str = "msg_1", state: str = "succeeded"
) -> tuple[bytes, dict[str, str]]:
    body = event_body(job_id, state)
    return body, standard_headers(body, msg_id)


async def stored_events(db: Any) -> list[Any]:
    return list(await db.fetch("SELECT * FROM webhook_events ORDER BY webhook_event_id"))


async def webhook_observations(db: Any, operation_id: str) -> list[Any]:
    return list(
        await db.fetch(
            "SELECT * FROM observations WHERE operation_id = $1 AND source = 'webhook'"
            " ORDER BY observation_id",
            operation_id,
        )
    )
