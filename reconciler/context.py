"""What every reconciler step needs, built once per process.

Nothing here holds per-operation truth: an operation's whole truth is its row,
so a step can be killed at any line and redone by any worker. The one
per-operation thing kept (`pages`) is a cache whose loss costs calls, never
correctness.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.lanes import Lanes
from reconciler.page_memory import PageMemory
from reconciler.poll_writer import PollWriter
from shared.clock import SYSTEM_CLOCK, Clock
from shared.providers import ProviderAdapter, ProviderDescription, adapter_for
from shared.result_store import ResultStore
from shared.settings import Settings


@dataclass
class Context:
    pool: Any
    settings: Settings
    lanes: Lanes  # provider calls go out on these (a lane per concurrency slot)
    adapters: Mapping[str, ProviderAdapter]
    store: ResultStore
    # public URL template of our receiver, e.g. http://host:8080/webhooks/{provider}
    webhook_url: str | None = None
    rng: random.Random = field(default_factory=random.Random)
    # Tests pass a shifted clock (and shift jw_now() with it) instead of sleeping.
    clock: Clock = SYSTEM_CLOCK
    semaphores: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    # The database's URL, for a connection outside the pool (Step._keep_answer):
    # when a failover kills every pooled connection a step holds, no pooled one
    # is free. None: the pool's (a spare connection may still be there).
    database_url: str | None = None
    # Group commit for the status reads that decide nothing (poll_writer.py).
    polls: PollWriter = field(init=False)
    # A paged result's pages read by an attempt a throttle cut short (page_memory.py).
    pages: PageMemory = field(default_factory=PageMemory)

    def __post_init__(self) -> None:
        self.polls = PollWriter(self.pool)
        for name, adapter in self.adapters.items():
            adapter.callbacks = self.callbacks(name)  # a plugin's schedule asks it too

    def adapter(self, provider: str) -> ProviderAdapter | None:
        return self.adapters.get(provider)

    def semaphore(self, provider: str) -> asyncio.Semaphore:
        sem = self.semaphores.get(provider)
        if sem is None:
            adapter = self.adapters.get(provider)
            limit = adapter.desc.limits.max_concurrency if adapter else 1
            sem = self.semaphores[provider] = asyncio.Semaphore(limit)
        return sem

    def callbacks(self, provider: str) -> bool:
        """Will the provider's jobs call back, so that reads are a backstop? Not with
        no `[webhooks]`, nor where every create leaves its callback URL out (it names
        `{webhook_url}` and this reconciler knows no public_webhook_url): reads then
        follow the backoff, not the backstop's pace (300 s, the first read too)."""
        adapter = self.adapters.get(provider)
        if adapter is None or adapter.desc.webhooks is None:
            return False
        return bool(self.webhook_url) or not adapter.desc.create.asks_callback

    def webhook_url_for(self, provider: str) -> str | None:
        """Our receiver's URL for this provider, if it has webhooks configured."""
        adapter = self.adapters.get(provider)
        if not self.webhook_url or adapter is None or adapter.desc.webhooks is None:
            return None
        return self.webhook_url.replace("{provider}", provider)


def build_adapters(providers: Mapping[str, ProviderDescription]) -> dict[str, ProviderAdapter]:
    return {name: adapter_for(desc) for name, desc in providers.items()}
