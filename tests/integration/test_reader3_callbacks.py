"""Whether a job can call back is the create's, not the reading reconciler's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.worker import Reconciler
from shared import ledger
from shared.ledger import RequestSpec, leases
from shared.ledger.states import LocalState
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.harness import Rig, reconciler_context, sim_providers

S = LocalState
HOOKS = "http://127.0.0.1:9/webhooks/{provider}"  # our receiver, as a create names it
BACKSTOP = {"limits": {"webhook_backstop_poll_seconds": 300.0}}


async def _sent(pool: Any, op_id: str) -> bool | None:
    sent: bool | None = await pool.fetchval(
        "SELECT callback_url_sent FROM operations WHERE operation_id = $1", op_id
    )
    return sent


async def _due_now(pool: Any, op_id: str) -> None:
    await pool.execute(
        "UPDATE operations SET next_poll_at = jw_now() WHERE operation_id = $1", op_id
    )


async def _wait(pool: Any, op_id: str) -> float:
    wait = await pool.fetchval(
        "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
        " WHERE operation_id = $1",
        op_id,
    )
    assert wait is not None
    return float(wait)


async def test_a_job_created_without_a_callback_url_stays_on_the_backoff(
    pool: Any, tmp_path: Path
) -> None:
    """Context.callbacks asked the reading reconciler's public_webhook_url, not
    whether the job's create carried {webhook_url}: a job created without one
    (before the URL was set, or by a reconciler without it) was read at the
    backstop's pace (60 s here, not the backoff's seconds) by one that has it,
    though no callback can come. The create's record decides now."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(sim_url, webhooks=True, overrides=BACKSTOP)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()  # created with no callback URL
        assert await r.state(op_id) is S.ACCEPTED
        assert await _wait(pool, op_id) < 5
        await pool.execute(
            "UPDATE operations SET next_poll_at = jw_now() WHERE operation_id = $1", op_id
        )
        # the URL is set now (a restart with public_webhook_url, or another worker)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=HOOKS) as ctx:
            await Reconciler(ctx).run_once()  # a read of a job that will never call back
    assert await r.state(op_id) is S.OBSERVING
    # the backoff's next step (FAST_LIMITS: seconds at most), not the backstop's pace
    wait = await _wait(pool, op_id)
    assert wait < 5, wait


async def test_a_job_created_with_a_callback_url_stays_on_the_backstop(
    pool: Any, tmp_path: Path
) -> None:
    """The converse: a job whose create named our callback URL, read by a
    reconciler that knows no public_webhook_url (restarted without it, another
    worker). The provider calls back where it was told, and the receiver is a
    process of its own: reads stay a backstop for a lost delivery."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(sim_url, webhooks=True, overrides=BACKSTOP)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=HOOKS) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()  # created with our callback URL
        assert await r.state(op_id) is S.ACCEPTED
        assert await _sent(pool, op_id) is True
        assert await _wait(pool, op_id) > 30  # the backstop's first read
        await _due_now(pool, op_id)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            assert not ctx.callbacks("sim")  # its own configuration says no callback
            await Reconciler(ctx).run_once()
    assert await r.state(op_id) is S.OBSERVING
    wait = await _wait(pool, op_id)
    assert wait > 30, wait  # the backstop's pace, not the backoff's seconds


async def test_an_operation_created_before_the_record_follows_the_configuration(
    pool: Any, tmp_path: Path
) -> None:
    """No record (created before migration 037): the reading reconciler's
    configuration decides, as it did."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(sim_url, webhooks=True, overrides=BACKSTOP)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()
        await pool.execute(
            "UPDATE operations SET callback_url_sent = NULL, next_poll_at = jw_now()"
            " WHERE operation_id = $1",
            op_id,
        )
        async with reconciler_context(pool, tmp_path, providers, webhook_url=HOOKS) as ctx:
            await Reconciler(ctx).run_once()
    assert await r.state(op_id) is S.OBSERVING
    wait = await _wait(pool, op_id)
    assert wait > 30, wait


async def test_a_plugins_schedule_through_super_follows_the_create(
    pool: Any, tmp_path: Path
) -> None:
    """A plugin's `next_poll_delay` calling super() gets the job's schedule, not
    the reading reconciler's: the adapter is shared by every job of its provider."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        plugin = {"plugin": "tests.integration.test_reconciler_webhooks:DoublingPlugin"}
        providers = sim_providers(sim_url, webhooks=True, overrides={**BACKSTOP, **plugin})
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()
        await _due_now(pool, op_id)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=HOOKS) as ctx:
            assert ctx.adapters["sim"].expects_callbacks  # the configuration's say
            await Reconciler(ctx).run_once()
            # and the adapter's own say is back once the job's schedule is set
            assert ctx.adapters["sim"].expects_callbacks
    assert await r.state(op_id) is S.OBSERVING
    wait = await _wait(pool, op_id)
    assert wait < 10, wait


async def test_a_lost_create_is_on_record_with_what_it_asked_for(pool: Any, tmp_path: Path) -> None:
    """Written with the attempt's count, before the request leaves: a create whose
    answer never came is on record with whether it named our callback URL."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(sim_url, webhooks=True, overrides=BACKSTOP)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=HOOKS) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("lost_create_response", duration=30.0)
            await r.reconciler.run_once()  # the answer is lost (a timeout)
    row = await pool.fetchrow(
        "SELECT state::text, create_attempts, callback_url_sent FROM operations"
        " WHERE operation_id = $1",
        op_id,
    )
    assert tuple(row) == ("create_unknown", 1, True)


async def test_a_callback_is_on_record_only_while_every_create_attempt_named_it(
    pool: Any,
) -> None:
    """The same token sent again: the job may be any attempt's, so the backstop
    stands only while all of them named our callback URL (reading on the backoff
    a job that also calls back costs reads; waiting for a callback that never
    comes costs the backstop's delay). An attempt that never left is uncounted,
    and the next first attempt says it afresh."""
    sub = await ledger.submit_operation(
        pool,
        provider="sim",
        kind="export",
        request=RequestSpec("POST", "/v1/jobs", {"script": "success"}),
        requested_by="agent:test",
    )
    op_id = sub.operation_id
    [claimed] = await leases.claim(pool, "w1", 1, 30.0)
    fence = claimed.op.lease_fence

    async def attempt(sent: bool | None) -> bool | None:
        async with pool.acquire() as conn, conn.transaction():
            count = await ledger.bump_create_attempt(
                conn, op_id, fence=fence, callback_url_sent=sent
            )
            assert count is not None
        return await _sent(pool, op_id)

    assert await attempt(True) is True
    await ledger.unbump_create_attempt(pool, op_id, fence=fence)  # it never left
    assert await attempt(False) is False  # a first attempt again: its own say
    assert await attempt(True) is False  # the job may be the first one's
    # a create naming no URL of ours (the description changed): not ours to say
    assert await attempt(None) is False
    await pool.execute("UPDATE operations SET create_attempts = 0 WHERE operation_id = $1", op_id)
    assert await attempt(None) is None
    assert await attempt(True) is None  # an attempt not on record may have named none
    assert await attempt(False) is False
