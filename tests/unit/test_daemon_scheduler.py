"""The reconciler's scheduler runs a late job late, never skips it (a long-run review).

With APScheduler's default (a run more than a second late is missed), one
stall of the event loop skipped a systemd watchdog ping; two such stalls let
systemd kill a healthy reconciler. The loop is blocked here for real, past a
run's time and past the old one-second grace; the scheduler's own events say
whether that run was executed or missed.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobExecutionEvent

from reconciler.daemon import new_scheduler

INTERVAL_SECONDS = 1.5
# Blocked from just after a run: the next run falls due 1.5 s later and the
# loop is back 1.2 s after that (past the old default grace of 1 s), before
# the run after it is due: as a watchdog ping every 5 s meets a 2.5 s stall.
STALL_SECONDS = 2.7


async def test_a_run_due_during_a_stall_runs_once_the_loop_is_back() -> None:
    scheduler = new_scheduler()
    outcomes: asyncio.Queue[JobExecutionEvent] = asyncio.Queue()
    scheduler.add_listener(outcomes.put_nowait, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED)

    async def ping() -> None:
        pass

    scheduler.add_job(ping, "interval", seconds=INTERVAL_SECONDS, id="ping")
    scheduler.start()
    try:
        first = await asyncio.wait_for(outcomes.get(), 5.0)  # on time
        assert first.code == EVENT_JOB_EXECUTED
        time.sleep(STALL_SECONDS)  # the loop blocked, as a slow synchronous write blocks it
        after = await asyncio.wait_for(outcomes.get(), 5.0)
    finally:
        scheduler.shutdown(wait=False)
    due_in_stall = first.scheduled_run_time + timedelta(seconds=INTERVAL_SECONDS)
    assert (after.code, after.scheduled_run_time) == (EVENT_JOB_EXECUTED, due_in_stall)
