"""One reconciler process's work loop, in `run_once()` form.

`run_once` claims a batch of due operations (leases with fencing), runs the
step each one's state calls for, and gives each row back with its next
appointment. It returns counts, so tests drive it directly without timing.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta

from reconciler.context import Context
from reconciler.step import NOW, Delay, Step
from reconciler.steps.cancel import step_cancel
from reconciler.steps.collect import step_collect
from reconciler.steps.create import CROSS_CHECK, step_create, step_cross_check
from reconciler.steps.poll import step_poll
from shared.db.errors import db_error_context
from shared.ledger import Operation, leases
from shared.ledger.errors import LeaseLost, StaleTransition
from shared.ledger.states import POLLED, LocalState
from shared.telemetry import spans

S = LocalState
log = logging.getLogger("jobwarden.reconciler")

# A step that leaves the operation ready for the next one (remote success ->
# collect, a retried create -> its cross-check) goes on under the same lease,
# up to this many times.
MAX_CHAINED_STEPS = 4
# After an unexpected error, wait this long before trying the operation again.
ERROR_RETRY_SECONDS = 30.0
# Missing provider config may be a deploy in progress: look again later.
UNKNOWN_PROVIDER_RETRY_SECONDS = 60.0

# How many times one run_once tops its batch up before returning to the scheduler.
# Each return drains the batch and claims afresh with nothing in flight: at 4
# refills that idle gap cost 2-3 % of status reads/s (alternating A/B, one-off);
# at 24 it comes once per 5,000 reads.
REFILLS = 24
# While a batch that was not full drains, rows that fall due (a new submission,
# a wake-up) are claimed every sweep_interval rather than after the batch's
# slowest call: a create hanging 10 s held every new operation back 10 s, and
# the daemon's ticks were skipped meanwhile. For as long as a step is in
# flight: a result download outlives its lease (it renews it while it keeps
# its pace, up to about 15 minutes), and late claims bounded to one lease
# let it hold every other operation of every provider back meanwhile.

StepFn = Callable[[Step], Awaitable[Delay]]


def step_for(op: Operation) -> StepFn | None:
    """The step the row calls for: a pending recovery point first, then its state's."""
    state = op.state
    if op.follow_up == CROSS_CHECK:
        return step_cross_check
    if state in (S.CREATE_PENDING, S.CREATE_UNKNOWN):
        return step_create
    if state is S.CANCEL_REQUESTED:
        return step_create if op.remote_job_id is None else step_cancel
    if state in POLLED:
        return step_poll
    if state is S.RESULT_COLLECTING:
        return step_collect
    return None  # terminal, or waiting for an operator


class Reconciler:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # Cleared on shutdown: batches in progress finish, no new rows are claimed.
        self.claiming = True

    def stop_claiming(self) -> None:
        self.claiming = False

    async def claim(self, limit: int) -> list[leases.Claimed]:
        settings = self.ctx.settings
        return await leases.claim(self.ctx.pool, settings.worker_id, limit, settings.lease_seconds)

    async def run_once(self, limit: int | None = None) -> Counter[str]:
        """Claim and process due operations; returns counts by outcome.

        A full batch is topped up while it drains (when a quarter is left), so
        the provider's concurrency slots never sit idle waiting for the slowest
        call of a batch; one call handles at most REFILLS + 1 batches, so it
        stays bounded. A batch that was not full ends it once drained: nothing
        more was due, though what falls due meanwhile is claimed every
        sweep_interval (LATE_CLAIMS).
        Finished steps are collected through a queue (O(1) each) rather than
        `asyncio.wait`, which re-registers a callback on every pending task
        each time one finishes.
        """
        size = limit or self.ctx.settings.claim_batch
        finished: asyncio.Queue[asyncio.Task[str]] = asyncio.Queue()
        running: set[asyncio.Task[str]] = set()  # the loop keeps only weak references
        counts: Counter[str] = Counter()

        def done(task: asyncio.Task[str]) -> None:
            running.discard(task)
            finished.put_nowait(task)

        async def claim_and_start(want: int) -> int:
            if not self.claiming:
                return 0
            # the leases end no earlier than this + lease_seconds
            started = self.ctx.clock.monotonic()
            now_before = self.ctx.clock.now()
            batch = await self.claim(want)
            counts["claimed"] += len(batch)
            lease_until = started + self.ctx.settings.lease_seconds
            for claimed in batch:
                # measured from before the claim: our "now" is never behind the database's
                offset = claimed.db_now - now_before
                task = asyncio.ensure_future(
                    self.process(
                        claimed.op, lease_until, read_marked=claimed.read_marked, db_offset=offset
                    )
                )
                running.add(task)
                task.add_done_callback(done)
            return len(batch)

        pending = await claim_and_start(size)
        refills = REFILLS if pending == size else 0
        try:
            while pending:
                if refills or pending >= size:
                    task = await finished.get()
                else:
                    try:
                        task = await asyncio.wait_for(
                            finished.get(), self.ctx.settings.sweep_interval
                        )
                    except TimeoutError:
                        pending += await self._claim_more(claim_and_start, size - pending)
                        continue
                pending -= 1
                counts[task.result()] += 1
                if refills and pending <= size // 4:
                    refills -= 1
                    want = size - pending
                    more = await self._claim_more(claim_and_start, want)
                    pending += more
                    if more < want:
                        refills = 0  # nothing more is due (or we are stopping, or it failed)
        except BaseException:
            # Cancelled (shutdown past its grace) or failed: no step may outlive
            # this call, or it would keep acting on leases about to be released.
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        return counts

    async def _claim_more(self, claim: Callable[[int], Awaitable[int]], want: int) -> int:
        """A claim while steps are in flight (a top-up or a late claim, see
        run_once); a failure is logged and claims nothing.

        Its error must not reach run_once's handler, which cancels every step
        in flight: a pool timeout or a terminated connection would have cut a
        create off mid-request (its outcome then unknown) and left the batch's
        leases to lapse.
        """
        try:
            return await claim(want)
        except Exception:
            log.warning("a claim failed; the next one or the next sweep retries", exc_info=True)
            return 0

    async def process(
        self,
        op: Operation,
        lease_until: float | None = None,
        *,
        read_marked: bool = False,
        db_offset: timedelta = timedelta(0),
    ) -> str:
        """Run the steps `op`'s state calls for, under the lease claimed with it.

        `lease_until` is when that lease ends on the clock's monotonic reading
        (see Step.lease_until); None derives it from the row. `read_marked`:
        the claim marked this row's status read (see leases.Claimed).
        """
        fence = op.lease_fence
        adapter = self.ctx.adapter(op.provider)
        if adapter is None:
            log.error(
                "no provider configured",
                extra={"ctx": {"operation_id": op.operation_id, "provider": op.provider}},
            )
            # the claimed read was never sent: nobody here can build it
            return await _handed_back(
                op,
                leases.release(
                    self.ctx.pool,
                    op.operation_id,
                    fence,
                    UNKNOWN_PROVIDER_RETRY_SECONDS,
                    read_not_sent=read_marked,
                ),
                "unknown_provider",
            )
        step = Step(
            self.ctx,
            op,
            adapter,
            fence,
            lease_until=lease_until,
            read_marked=read_marked,
            db_offset=db_offset,
        )
        delay: Delay = None
        try:
            for _ in range(MAX_CHAINED_STEPS):
                fn = step_for(step.op)
                if fn is None:
                    delay = None
                    break
                with spans.step(fn.__name__, step.op):  # a no-op unless tracing is on
                    delay = await fn(step)
                if delay != NOW or step.released:
                    break
        except LeaseLost:
            log.warning(
                "lease lost; leaving the operation to its new owner",
                extra={"ctx": {"operation_id": op.operation_id, "trace_id": op.trace_id}},
            )
            return "lease_lost"
        except StaleTransition:
            # Someone else (an agent's cancel, an operator) moved it: look again now.
            delay = NOW
        except Exception as exc:
            log.exception(
                "step failed",
                extra={
                    "ctx": {
                        "operation_id": op.operation_id,
                        "trace_id": op.trace_id,
                        "state": step.op.state.value,
                        **db_error_context(exc),
                    }
                },
            )
            # Whether the marked read left is unknown here: the mark stays, and
            # the next claim records the read as maybe sent. A wait the provider
            # imposed (a Retry-After this step learned, perhaps in the very
            # answer whose record failed) still holds: no sooner than that.
            step.read_marked = False
            return await _handed_back(
                op, step.release(step.until_allowed(ERROR_RETRY_SECONDS)), "error"
            )
        if not step.released:
            return await _handed_back(op, step.release(delay), step.op.state.value)
        return step.op.state.value

    async def release_all(self) -> int:
        return await leases.release_all(self.ctx.pool, self.ctx.settings.worker_id)


async def _handed_back(op: Operation, release: Awaitable[object], outcome: str) -> str:
    """`outcome` once the lease is handed back; "release_failed" if the database refused.

    A lease that cannot be handed back lapses by itself (the claim pushed the
    row's appointment to the lease's end), so a failed release loses nothing.
    Raising it instead would end `run_once`, which cancels every other step of
    the batch mid-call: one dropped connection would abandon creates in flight.
    """
    try:
        await release
    except Exception as exc:
        log.warning(
            "lease not handed back; it lapses by itself",
            extra={
                "ctx": {
                    "operation_id": op.operation_id,
                    "trace_id": op.trace_id,
                    **db_error_context(exc),
                }
            },
        )
        return "release_failed"
    return outcome
