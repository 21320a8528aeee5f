"""Webhooks end to end: simulator -> receiver -> ledger -> reconciler's final read."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from reconciler.worker import Reconciler
from shared import ledger
from shared.ledger.states import LocalState
from shared.providers import ProviderAdapter
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.harness import Rig, reconciler_context, sim_providers, webhook_rig

S = LocalState


async def _events(pool: Any, op_id: str) -> list[Any]:
    return await pool.fetch(
        "SELECT event_id, remote_state::text AS remote_state, duplicate_deliveries"
        " FROM webhook_events WHERE operation_id = $1 ORDER BY webhook_event_id",
        op_id,
    )


async def test_webhook_triggers_an_immediate_final_read(pool: Any, tmp_path: Path) -> None:
    async with webhook_rig(pool, tmp_path) as r:
        op_id = await r.submit("success", duration=0.3)
        started = time.monotonic()
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10) is S.SUCCEEDED
        # the backstop poll is 30 s away: only the webhook can explain this speed
        assert time.monotonic() - started < 8
        assert [e["remote_state"] for e in await _events(pool, op_id)] == ["succeeded"]
        calls = await pool.fetch(
            "SELECT call_kind FROM provider_calls WHERE operation_id = $1 ORDER BY call_id", op_id
        )
        # no read at acceptance (the backstop's is 30 s away): the create, the
        # final read the webhook asked for, the result
        assert [c["call_kind"] for c in calls] == ["create", "status", "result"]


async def test_the_same_completion_webhook_twice_is_acted_on_once(
    pool: Any, tmp_path: Path
) -> None:
    async with webhook_rig(pool, tmp_path) as r:
        op_id = await r.submit("duplicate_webhook", duration=0.3)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10) is S.SUCCEEDED
        await r.run_until(lambda: True)  # let late deliveries arrive and be processed
        events = await _events(pool, op_id)
        assert len(events) == 2  # two distinct event ids; the repeated id stored once
        assert sum(e["duplicate_deliveries"] for e in events) >= 1
        history = await pool.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1", op_id
        )
        assert [h[0] for h in history].count("succeeded") == 1
        assert (
            await pool.fetchval("SELECT count(*) FROM results WHERE operation_id = $1", op_id) == 1
        )
        assert await ledger.claim_completion(pool, op_id, "next-step")
        assert not await ledger.claim_completion(pool, op_id, "next-step")


async def test_out_of_order_webhooks_never_move_the_state_backwards(
    pool: Any, tmp_path: Path
) -> None:
    async with webhook_rig(pool, tmp_path) as r:
        op_id = await r.submit("out_of_order_webhooks", duration=0.3)
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10) is S.SUCCEEDED

        async def stale_arrived() -> bool:
            return any(e["remote_state"] == "running" for e in await _events(pool, op_id))

        await r.run_until(stale_arrived, timeout=10)
        assert await r.state(op_id) is S.SUCCEEDED


async def test_webhook_before_the_create_response_is_kept_and_attached(
    pool: Any, tmp_path: Path
) -> None:
    async with webhook_rig(pool, tmp_path) as r:
        op_id = await r.submit("webhook_before_create_response")
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10) is S.SUCCEEDED
        events = await pool.fetch(
            "SELECT received_at, attached_at FROM webhook_events WHERE operation_id = $1", op_id
        )
        accepted_at = await pool.fetchval(
            "SELECT at FROM history WHERE operation_id = $1 AND to_state = 'accepted'", op_id
        )
        assert events and all(e["received_at"] < accepted_at for e in events)
        assert all(e["attached_at"] is not None for e in events)
        observed = await pool.fetchval(
            "SELECT count(*) FROM observations WHERE operation_id = $1 AND source = 'webhook'",
            op_id,
        )
        assert observed == len(events)


async def test_a_webhook_naming_only_the_client_reference_triggers_the_final_read(
    pool: Any, tmp_path: Path
) -> None:
    # The agent chose no reference of its own, so the operation's client
    # reference is its operation id, which the simulator echoes as
    # /client_reference. The job id is read from where the body has none.
    webhooks = {"job_id": "/not_in_the_body", "client_reference": "/client_reference"}
    async with webhook_rig(pool, tmp_path, webhooks=webhooks) as r:
        op_id = await r.submit("success", duration=0.3)
        started = time.monotonic()
        assert await r.settle(op_id, {S.SUCCEEDED}, timeout=10) is S.SUCCEEDED
        # the backstop poll is 30 s away: only the webhook can explain this speed
        assert time.monotonic() - started < 8
        events = await pool.fetch(
            "SELECT remote_job_id, operation_ref, client_reference FROM webhook_events"
            " WHERE operation_id = $1",
            op_id,
        )
        assert events
        assert all(
            (e["remote_job_id"], e["operation_ref"], e["client_reference"]) == (None, None, op_id)
            for e in events
        )


async def test_a_lost_create_answer_is_resent_on_the_backoff_not_the_backstop(
    pool: Any, tmp_path: Path
) -> None:
    """With webhooks configured every retry waited the status backstop (30 s in
    this rig, 300 s by default): a delivery announces a job's state, never that
    a create, cancel or fetch may be tried again."""
    async with webhook_rig(pool, tmp_path) as r:
        op_id = await r.submit("lost_create_response", duration=120.0)
        started = time.monotonic()
        assert await r.settle(op_id, {S.ACCEPTED, S.OBSERVING}, timeout=20) in {
            S.ACCEPTED,
            S.OBSERVING,
        }
        assert time.monotonic() - started < 20
        history = await pool.fetch(
            "SELECT to_state::text FROM history WHERE operation_id = $1 ORDER BY seq", op_id
        )
        assert "create_unknown" in [h[0] for h in history]  # the answer was lost, then resent
        stats = await r.stats()
        assert max(stats["creates_per_token"].values()) == 1  # the same token: one job


async def test_webhooks_whose_callback_url_no_create_carries_leave_reads_on_the_backoff(
    pool: Any, tmp_path: Path
) -> None:
    """[webhooks] described, but the reconciler knows no public_webhook_url: the
    create leaves `{webhook_url}` out, so no callback can come. The reads follow
    the backoff (seconds), not the backstop (here 300 s, the first read too), which
    had the operation read every five minutes, on a callback never announced."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(
            sim_url, webhooks=True, overrides={"limits": {"webhook_backstop_poll_seconds": 300.0}}
        )
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            assert not ctx.callbacks("sim") and providers["sim"].webhooks is not None
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()  # the create, and the first read's appointment
            wait = await pool.fetchval(
                "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
                " WHERE operation_id = $1",
                op_id,
            )
    assert await r.state(op_id) is S.ACCEPTED
    # the backoff's first step (FAST_LIMITS: a tenth of a second), not the backstop's
    assert wait is not None and float(wait) < 5, wait


class DoublingPlugin(ProviderAdapter):
    """A plugin that adjusts the built-in schedule (twice its wait), through super()."""

    def next_poll_delay(
        self,
        attempt: int,
        retry_after: float | None,
        poll_after: float | None,
        rng: random.Random,
    ) -> float:
        return 2 * super().next_poll_delay(attempt, retry_after, poll_after, rng)


async def test_a_plugins_schedule_through_super_knows_no_callback_can_come(
    pool: Any, tmp_path: Path
) -> None:
    """The same, for a plugin whose `next_poll_delay` calls super(): the built-in
    schedule it adjusts is the backoff's, not the backstop's (the adapter holds the
    reconciler's say, `Context.callbacks`)."""
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        overrides = {
            "limits": {"webhook_backstop_poll_seconds": 300.0},
            "plugin": f"{__name__}:DoublingPlugin",
        }
        providers = sim_providers(sim_url, webhooks=True, overrides=overrides)
        async with reconciler_context(pool, tmp_path, providers, webhook_url=None) as ctx:
            r = Rig(pool, sim_url, Reconciler(ctx), ctx)
            op_id = await r.submit("success", duration=30.0)
            await r.reconciler.run_once()
            wait = await pool.fetchval(
                "SELECT extract(epoch FROM next_poll_at - jw_now()) FROM operations"
                " WHERE operation_id = $1",
                op_id,
            )
    assert wait is not None and float(wait) < 5, wait
