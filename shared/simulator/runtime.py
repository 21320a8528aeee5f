"""The simulated provider's moving parts: the job store, the clock and webhooks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from shared.simulator.clock import Clock
from shared.simulator.settings import SimulatorSettings
from shared.simulator.state import Job, JobStore
from shared.simulator.webhooks import WebhookSender, running_delivery, terminal_deliveries

# How often the ticker looks for jobs that finished with nobody polling, so
# webhooks fire on their own. 50 ms keeps webhook latency well under test timeouts.
TICK_SECONDS = 0.05


class Simulation:
    """`clock` (default: the real one) is what every job fact is derived from."""

    def __init__(self, settings: SimulatorSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.store = JobStore(clock)
        self.webhooks = WebhookSender(settings, self.store)

    def now(self) -> float:
        return self.store.now()

    def wall(self) -> float:
        return self.store.wall()

    def webhook_url(self, job: Job) -> str | None:
        return job.webhook_url or self.settings.webhook_url

    def touch(self, job: Job) -> None:
        """Bring `job` up to date and announce its end exactly once."""
        job.settle(self.now())
        if job.final_state is None or job.notified:
            return
        job.notified = True
        url = self.webhook_url(job)
        if url is not None:
            self.webhooks.dispatch(url, terminal_deliveries(job))

    def sweep(self) -> None:
        for job in self.store.unannounced():
            self.touch(job)

    async def announce_before_response(self, job: Job, wait_seconds: float) -> None:
        """Deliver "running" and the terminal webhook, waiting at most `wait_seconds`.

        Marks the job announced first, so the ticker cannot send a second
        terminal webhook while we wait.
        """
        job.settle(self.now())
        job.notified = True
        url = self.webhook_url(job)
        if url is None:
            return
        task = self.webhooks.dispatch(url, [running_delivery(job), *terminal_deliveries(job)])
        # asyncio.wait does not cancel on timeout: late deliveries still go out.
        await asyncio.wait({task}, timeout=wait_seconds)

    def reset(self) -> None:
        self.webhooks.cancel_pending()
        self.store.reset()

    async def tick_forever(self) -> None:
        while True:
            self.sweep()
            await asyncio.sleep(TICK_SECONDS)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.webhooks.start()
        ticker = asyncio.create_task(self.tick_forever())
        try:
            yield
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            await self.webhooks.aclose()
