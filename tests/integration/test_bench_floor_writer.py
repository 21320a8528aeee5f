"""The benchmarks' floor writer commits every event once and never leaves one waiting.

bench/floor.py's group commit stands for "the least a durable receiver
does" in the README's figures: an event answered must be a committed row,
and a writer that fails must fail its requests rather than hang them (a hung
request is a wrk timeout with no cause shown).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from bench import floor


async def test_every_event_is_committed_once_and_answered_after(db_url: str, db: Any) -> None:
    writer = floor.GroupCommit("floor_test_events")
    await writer.start(db_url)
    try:
        await asyncio.gather(*(writer.store(f"e{i % 50}", b"{}") for i in range(100)))
        rows = await db.fetchval("SELECT count(*) FROM floor_test_events")
    finally:
        await writer.stop()
    assert rows == 50


async def test_a_writer_that_fails_fails_its_requests(db_url: str, db: Any) -> None:
    writer = floor.GroupCommit("floor_test_broken")
    await writer.start(db_url)
    await db.execute("DROP TABLE floor_test_broken")  # its prepared INSERT now fails
    try:
        with pytest.raises(asyncpg.PostgresError):
            await asyncio.wait_for(writer.store("e1", b"{}"), timeout=10)
    finally:
        await writer.stop()
    with pytest.raises(RuntimeError, match="not running"):
        await writer.store("e2", b"{}")
