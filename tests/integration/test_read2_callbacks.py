"""Second reading of 6df14a9/9207f22: a create naming no `{webhook_url}` of ours
(the provider calls back as its own settings say) records nothing, and its
reads follow the configuration: the webhook backstop while `[webhooks]` is
described, whether or not this reconciler knows a public URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.worker import Reconciler
from shared.ledger.states import LocalState
from shared.serve import serve_app
from shared.simulator import SimulatorSettings, build_app
from tests.harness import Rig, reconciler_context, sim_providers
from tests.integration.test_reader3_callbacks import BACKSTOP, HOOKS, _sent, _wait

S = LocalState
# the simulator's create, spelled out without its `webhook_url` body field
CREATE = {
    "method": "POST",
    "path": "/v1/jobs",
    "idempotency": "header",
    "idempotency_header": "Idempotency-Key",
    "client_reference_field": "client_reference",
    "job_id": "/job_id",
    "state": "/state",
    "status_url": "/status_url",
    "accepted_statuses": [202],
    "sync_result_statuses": [200],
    "sync_result": "/result",
    "conflict_reject_codes": ["idempotency_key_reused"],
}


async def test_a_create_naming_no_callback_url_of_ours_reads_at_the_backstop(
    pool: Any, tmp_path: Path
) -> None:
    async with serve_app(build_app(SimulatorSettings())) as sim_url:
        providers = sim_providers(
            sim_url, webhooks=True, overrides=BACKSTOP, replace_tables={"create": CREATE}
        )
        assert not providers["sim"].create.asks_callback
        for url in (None, HOOKS):
            async with reconciler_context(pool, tmp_path, providers, webhook_url=url) as ctx:
                r = Rig(pool, sim_url, Reconciler(ctx), ctx)
                op_id = await r.submit("success", duration=30.0)
                await r.reconciler.run_once()
            assert await r.state(op_id) is S.ACCEPTED
            assert await _sent(pool, op_id) is None  # nothing of ours named: no record
            assert await _wait(pool, op_id) > 30, url  # the backstop (60 s here), not the backoff
