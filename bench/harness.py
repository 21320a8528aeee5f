"""What benchmarks, the chaos run and the test suite share: throwaway databases,
a clock tests can move, and the helpers around them.

The test clock shifts Python's clock (`shared.clock.ShiftedClock`) and the
database's `jw_now()` together, so a lease, a backoff or a deadline lapses
because a test said so, not because it slept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.clock import ShiftedClock
from shared.db.queries import sql_root

TEST_CLOCK_SQL = Path("testing") / "test_clock.sql"


async def install_test_clock(conn: Any) -> None:
    """Make `jw_now()` of this (migrated) database shiftable; see sql/testing/test_clock.sql."""
    await conn.execute((sql_root() / TEST_CLOCK_SQL).read_text("utf-8"))


class TestClock(ShiftedClock):
    """A clock a test moves forward, for Python and for one database at once."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, db: Any, offset: float = 0.0) -> None:
        super().__init__(offset)
        self._db = db  # a connection or pool of the database whose jw_now() it shifts

    async def advance(self, seconds: float) -> None:
        """Let `seconds` pass, everywhere at once."""
        self.shift(seconds)
        await self._db.execute(
            "UPDATE jw_test_clock SET shift = make_interval(secs => $1)", self.offset
        )
