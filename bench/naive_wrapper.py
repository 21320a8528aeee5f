"""The naive tool wrapper of seed 003, as the baseline jobwarden is compared with.

Seed 003 ("Agents IA et Appels API Asynchrones") recommends putting the wait in
the tool wrapper instead of the model's loop:

    delay = job.get("poll_after_seconds", 5)
    while waited < max_wait:
        time.sleep(delay); waited += delay
        status = client.get(f"/v1/jobs/{job_id}").json()
        if status.get("done"): ...return
        delay = min(int(delay * 1.5), 60)

This is that loop, asynchronous and time-scaled: the schedule is computed in
the seed's own seconds (5, 7, 10, 15, 22, 33, 49, 60, 60, ...; `int()`
truncation included) and every sleep is divided by `time_scale`, so a
benchmark can replay minutes of it in seconds. Nothing about the job is
stored anywhere: that is the point of the comparison. The simulator has no
`done` field, so "done" is its state being terminal; its result sits behind
`result_url`, so a successful job costs one more GET (counted).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

# The seed's numbers, in its own (unscaled) seconds.
INITIAL_DELAY = 5
GROWTH = 1.5
CAP = 60
MAX_WAIT = 600
# The simulator's own vocabulary for a job that will not change again.
TERMINAL = frozenset({"succeeded", "partially_succeeded", "failed", "cancelled"})


@dataclass
class NaiveOutcome:
    """What one wrapper call saw: its verdict, its calls and when it learned the end."""

    status: str  # succeeded | failed | timed_out
    job_id: str
    calls: int = 0
    status_reads: int = 0
    detected_at: float | None = None  # unix time the terminal status arrived
    result: Any = None
    delays: list[int] = field(default_factory=list)


def next_delay(delay: int) -> int:
    """The seed's growth rule, kept exact (integer truncation and cap)."""
    return min(int(delay * GROWTH), CAP)


async def start_and_await(
    client: httpx.AsyncClient,
    base_url: str,
    body: dict[str, Any],
    *,
    time_scale: float = 1.0,
    max_wait: int = MAX_WAIT,
) -> NaiveOutcome:
    """Create the job, then poll with the seed's backoff until it ends or max_wait passes.

    `time_scale` > 1 compresses time: a seed delay of 5 s sleeps 5/time_scale s.
    """
    created = await client.post(f"{base_url}/v1/jobs", json=body)
    created.raise_for_status()
    job = created.json()
    outcome = NaiveOutcome(status="timed_out", job_id=job["job_id"], calls=1)
    delay = int(job.get("poll_after_seconds") or INITIAL_DELAY)
    waited = 0
    while waited < max_wait:
        outcome.delays.append(delay)
        await asyncio.sleep(delay / time_scale)
        waited += delay
        resp = await client.get(f"{base_url}/v1/jobs/{outcome.job_id}")
        outcome.calls += 1
        outcome.status_reads += 1
        status = resp.json()
        if status.get("state") in TERMINAL:
            outcome.detected_at = time.time()
            return await _finish(client, base_url, status, outcome)
        delay = next_delay(delay)
    return outcome


async def _finish(
    client: httpx.AsyncClient, base_url: str, status: dict[str, Any], outcome: NaiveOutcome
) -> NaiveOutcome:
    if status["state"] in ("succeeded", "partially_succeeded") and status.get("result_url"):
        result = await client.get(f"{base_url}{status['result_url']}")
        outcome.calls += 1
        outcome.result = result.json()
        outcome.status = "succeeded"
    else:
        outcome.status = "failed"
    return outcome
