"""A lease the database will not take back: that step gives up, its batch goes on.

The database refuses one operation's release (a trigger of this test's own
database, a real error from a real server). Before, the error left
`Reconciler.process`, ended `run_once`, and `run_once` cancelled every other
step of the batch mid-call: one dropped connection abandoned creates in flight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.harness import TestClock
from shared.ledger.states import LocalState
from tests.harness import rig

S = LocalState

# Refuses the UPDATE that hands one operation's lease back, whichever statement does it.
REFUSE_RELEASE = """
CREATE FUNCTION test_refuse_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'this test refuses the release of %', OLD.operation_id;
END $$;
CREATE TRIGGER test_refuse_release BEFORE UPDATE ON operations FOR EACH ROW
    WHEN (OLD.operation_id = '{op}' AND OLD.lease_owner IS NOT NULL
          AND NEW.lease_owner IS NULL)
    EXECUTE FUNCTION test_refuse_release();
"""


async def test_a_refused_release_spares_the_rest_of_the_batch(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    async with rig(pool, tmp_path, clock=clock, lease_seconds=5.0) as r:
        refused = await r.submit("success", duration=60)
        others = [await r.submit("success", duration=60) for _ in range(3)]
        await pool.execute(REFUSE_RELEASE.format(op=refused))

        counts = await r.reconciler.run_once()  # raised the refusal before

        assert counts["release_failed"] == 1, counts
        for op in others:  # their creates went out, were answered and recorded
            assert await r.state(op) in {S.ACCEPTED, S.OBSERVING}
        unanswered = await pool.fetchval(
            "SELECT count(*) FROM provider_calls WHERE finished_at IS NULL AND operation_id <> $1",
            refused,
        )
        assert unanswered == 0
        # the refused lease is still held, and lapses by itself
        assert await pool.fetchval(
            "SELECT lease_owner FROM operations WHERE operation_id = $1", refused
        )
        await pool.execute("DROP TRIGGER test_refuse_release ON operations")
        await clock.advance(5.1)
        await r.settle(refused, {S.ACCEPTED, S.OBSERVING})
        stats = await r.stats()
        # four operations, four jobs: a create sent again after the lapse was the same one
        assert stats["jobs_total"] == 4, stats
        assert all(n >= 1 for n in stats["creates_per_token"].values()), stats


# Refuses the record of one operation's rate-limited read (its 429 answer), whichever
# statement writes it: the read left and was answered, its record did not land.
REFUSE_RATE_LIMITED_RECORD = """
CREATE FUNCTION test_refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'this test refuses the record of a 429';
END $$;
CREATE TRIGGER test_refuse_record BEFORE INSERT OR UPDATE ON provider_calls FOR EACH ROW
    WHEN (NEW.operation_id = '{op}' AND NEW.status_code = 429)
    EXECUTE FUNCTION test_refuse_record();
"""


async def test_a_retry_after_learned_before_a_failed_record_still_holds(
    pool: Any, tmp_path: Path, clock: TestClock
) -> None:
    """The step that learned "Retry-After: 120" gives the row back no sooner than that,
    though the answer carrying it could not be recorded (before: the error's 30 s)."""
    async with rig(pool, tmp_path, clock=clock) as r:
        op = await r.submit(
            "rate_limited", duration=60, limited_reads=1, retry_after=120, result_deadline_s=600
        )
        await pool.execute(REFUSE_RATE_LIMITED_RECORD.format(op=op))

        async def answered_and_handed_back() -> bool:
            reads = sum((await r.stats())["status_calls_per_job"].values())
            free = await pool.fetchval(
                "SELECT lease_owner IS NULL FROM operations WHERE operation_id = $1", op
            )
            return bool(reads and free)

        await r.run_until(answered_and_handed_back)
        stats = await r.stats()
        assert sum(stats["status_calls_per_job"].values()) == 1, stats  # the 429, once
        wait = await pool.fetchval(
            "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
            " WHERE operation_id = $1",
            op,
        )
        assert wait > 100, wait
