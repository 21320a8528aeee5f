"""bench.receiver_write measures what its rows say they measure.

Its figures split PostgreSQL's work per webhook event into a batch's fixed
cost and each event's (README, issue 13). They mean something only if the
"matched" rows really write an observation and a wake-up per event, the "new"
rows none, the log-off row queues nothing for the evidence log while the
others queue every event, and the floor's row writes only its own table.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import receiver_write as rw
from bench.receiver import OPERATIONS, prepare_operations
from receiver.webhooks.ingest import create_writer_pool
from shared.db.connect import connect


def test_fit_recovers_a_line_and_its_intercept() -> None:
    points = [(n, 300.0 + 28.0 * n) for n in (1, 4, 16, 64, 256)]
    fixed, marginal = rw.fit(points)
    assert fixed == pytest.approx(300.0)
    assert marginal == pytest.approx(28.0)


def test_matched_batches_name_the_jobs_of_recorded_operations() -> None:
    batch = rw.columns(4, True, OPERATIONS - 2)
    jobs = ["job_bench_998", "job_bench_999", "job_bench_0", "job_bench_1"]
    assert batch["remote_job_id"] == jobs
    assert len(set(rw.columns(4, True, 0)["event_id"] + batch["event_id"])) == 8
    assert all(job.startswith("job_unknown_") for job in rw.columns(3, False, 0)["remote_job_id"])


async def test_each_row_writes_what_it_is_named_for(db_url: str, db: Any) -> None:
    await prepare_operations(db_url)
    writers = await create_writer_pool(db_url)
    admin = await connect(db_url)
    try:
        async with writers.acquire() as conn:
            best = await rw.measure_rows(conn, admin, (1, 4), rounds=1, events=8)
    finally:
        await admin.close()
        await writers.close()
    assert set(best) == {(row, n) for row in rw.ROWS for n in (1, 4)}
    assert all(cell.wall_us > 0 for cell in best.values())
    # warm-up: 5 matched batches a size through each write; then 20 batches a cell;
    # and after each switch of the log (off before the log-off row, on again
    # before the next size's floor row) one unmeasured batch of the receiver's
    per_row = rw.MIN_BATCHES * (1 + 4)
    warm = 5 * (1 + 4)
    replanned_off, replanned_on = 1 + 4, 4
    floor_rows = await db.fetchval("SELECT count(*) FROM bench_floor_events")
    assert floor_rows == warm + per_row
    events = await db.fetchval("SELECT count(*) FROM webhook_events")
    assert events == warm + 3 * per_row + replanned_off + replanned_on  # new, matched, log off
    observed = await db.fetchval("SELECT count(*) FROM observations WHERE source = 'webhook'")
    assert observed == warm + per_row  # the matched row and the matched warm-up only
    queued = await db.fetchval("SELECT count(*) FROM log_queue WHERE kind = 'webhook'")
    assert queued == events - per_row - replanned_off  # every event but the log-off ones
    assert (
        await db.fetchval(
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE '%\\_log\\_%' AND tgenabled = 'D'"
        )
        == 0
    )  # the log's triggers are on again
