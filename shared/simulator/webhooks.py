"""Outbound Standard Webhooks deliveries, including the scripted misbehaviours.

Deliveries for one job go out sequentially in one task, so "terminal, then a
stale running" really reaches the receiver in that order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from shared.signatures import sign_headers, sign_standard_webhooks
from shared.simulator.payloads import dumps, webhook_event
from shared.simulator.scripts import Script
from shared.simulator.settings import SimulatorSettings
from shared.simulator.state import QUEUED_FRACTION, Job, JobState, JobStore, new_id

logger = logging.getLogger(__name__)

# Per-attempt timeout: a loopback receiver answers in milliseconds; a stuck one
# must not stall the job's remaining deliveries for long.
ATTEMPT_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Delivery:
    """One webhook message; its id stays the same across redeliveries."""

    event_id: str
    body: bytes


def terminal_deliveries(job: Job) -> list[Delivery]:
    """The messages announcing the end of `job`, shaped by its script."""
    if job.final_state is None or job.finished_at is None:
        raise ValueError(f"job {job.job_id} is not terminal")
    final = _event(job, job.final_state, job.finished_at)
    if job.script is Script.DUPLICATE_WEBHOOK:
        # Same message redelivered, then the same news under a new id: the
        # receiver must dedupe by id *and* treat the observation idempotently.
        return [final, final, _event(job, job.final_state, job.finished_at)]
    if job.script is Script.OUT_OF_ORDER_WEBHOOKS:
        return [final, running_delivery(job)]
    return [final]


def running_delivery(job: Job) -> Delivery:
    started = job.created_at + QUEUED_FRACTION * job.params.duration
    return _event(job, JobState.RUNNING, started)


def _event(job: Job, state: JobState, occurred_at: float) -> Delivery:
    event_id = new_id("evt")
    return Delivery(event_id, webhook_event(job, state, occurred_at, event_id))


class WebhookSender:
    def __init__(self, settings: SimulatorSettings, store: JobStore) -> None:
        self._settings = settings
        self._store = store
        self._tasks: set[asyncio.Task[None]] = set()
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=ATTEMPT_TIMEOUT_SECONDS)

    async def aclose(self) -> None:
        self.cancel_pending()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def cancel_pending(self) -> None:
        for task in self._tasks:
            task.cancel()

    def dispatch(self, url: str, deliveries: Sequence[Delivery]) -> asyncio.Task[None]:
        """Send `deliveries` in order in the background, in the provider's shape."""
        shaped = [self._shaped(delivery) for delivery in deliveries]
        task = asyncio.create_task(self._deliver_all(url, shaped))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _shaped(self, delivery: Delivery) -> Delivery:
        shape = self._settings.shape
        if not shape.fields and not shape.states:
            return delivery
        return Delivery(delivery.event_id, dumps(shape.out(json.loads(delivery.body))))

    async def _deliver_all(self, url: str, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            await self._deliver(url, delivery)

    async def _deliver(self, url: str, delivery: Delivery) -> bool:
        if self._client is None:
            raise RuntimeError("WebhookSender.start() was not awaited")
        delays = (0.0, *self._settings.webhook_backoff)
        for attempt, delay in enumerate(delays, start=1):
            if delay:
                await asyncio.sleep(delay)
            self._store.stats.webhook_attempts += 1
            try:
                response = await self._client.post(
                    url, content=delivery.body, headers=self._headers(delivery, url)
                )
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                logger.info("webhook %s attempt %d failed: %s", delivery.event_id, attempt, exc)
                continue
            if response.is_success:
                self._store.stats.webhooks_sent += 1
                return True
            logger.info(
                "webhook %s attempt %d answered %d",
                delivery.event_id,
                attempt,
                response.status_code,
            )
        self._store.stats.webhooks_failed += 1
        logger.warning("webhook %s abandoned after %d attempts", delivery.event_id, len(delays))
        return False

    def _headers(self, delivery: Delivery, url: str) -> dict[str, str]:
        # The timestamp is per attempt (Standard Webhooks): the id is what stays stable.
        # Real time, not the injected clock: the receiver checks it against its
        # own clock to refuse replays, so it describes the delivery, not the job.
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "user-agent": "jobwarden-simulator",
            "webhook-id": delivery.event_id,
            "webhook-timestamp": str(timestamp),
        }
        secret = self._settings.webhook_secret
        if secret is None:
            return headers
        scheme = self._settings.webhook_scheme
        if scheme == "standard_webhooks" and not self._settings.webhook_options:
            headers["webhook-signature"] = sign_standard_webhooks(
                secret, delivery.event_id, timestamp, delivery.body
            )
            return headers
        # another sender's shape: its own headers only, as that sender would send them
        del headers["webhook-id"], headers["webhook-timestamp"]
        signed = sign_headers(
            scheme,
            self._settings.webhook_options,
            secret,
            delivery.body,
            timestamp=timestamp,
            event_id=delivery.event_id,
            method="POST",
            url=url,
        )
        headers.update({name.lower(): value for name, value in signed.items()})
        return headers
