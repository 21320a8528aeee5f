"""`audit verify --operation` on a live operation: its chain read as of one moment.

The chain head and the history were read by two statements outside any
transaction: a transition committed between them (the reconciler moving the
operation on) made the history one row longer than the head, and the check
reported "newest history rows are missing", a broken chain, on an intact
database.
"""

from __future__ import annotations

from typing import Any

from shared.db.queries import q
from shared.ledger import audit
from shared.ledger import operations as ledger
from shared.ledger.states import LocalState as S
from tests.support import submit


class _MovedOnAfterTheHead:
    """The verifier's connection; another session moves the operation on right
    after the chain head is read (as the reconciler may at any moment)."""

    def __init__(self, conn: Any, pool: Any, operation_id: str) -> None:
        self._conn, self._pool, self._operation_id = conn, pool, operation_id
        self.moved = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def fetch(self, query: str, *args: Any) -> Any:
        rows = await self._conn.fetch(query, *args)
        if query == q("chain_heads") and not self.moved:
            self.moved = True
            async with self._pool.acquire() as other:
                await ledger.transition(
                    other,
                    self._operation_id,
                    S.CREATE_PENDING,
                    S.CREATE_UNKNOWN,
                    actor="reconciler",
                    cause="the create's answer was lost",
                )
        return rows


async def test_one_operation_moved_on_while_verified_is_no_break(pool: Any) -> None:
    async with pool.acquire() as conn:
        op_id = await submit(conn)
        racing = _MovedOnAfterTheHead(conn, pool, op_id)
        checked, breaks = await audit.verify(racing, op_id)
    assert racing.moved
    assert (checked, breaks) == (1, [])
    async with pool.acquire() as conn:  # and the move itself verifies
        assert await audit.verify(conn, op_id) == (1, [])
