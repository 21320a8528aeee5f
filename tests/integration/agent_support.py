"""Helpers shared by the agent-layer tests: results with counts, tokens, the API app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette

from receiver.api import api_routes
from shared import ledger
from shared.db.connect import create_pool
from shared.ledger import evidence, tokens
from shared.ledger.states import Evidence, LocalState
from shared.ledger.tokens import mint_token
from shared.providers import load_preset
from shared.settings import Settings
from tests.support import drive, observe

S = LocalState


def sim_settings() -> Settings:
    return Settings(providers={"sim": load_preset("simulator", env={})})


def api_app(settings: Settings, pool: Any) -> Starlette:
    return Starlette(routes=api_routes(settings, pool))


@asynccontextmanager
async def receiver_pool(db_url: str) -> AsyncIterator[Any]:
    """A pool whose sessions run as jobwarden_receiver: the API's real privileges."""
    pool = await create_pool(
        db_url, min_size=1, max_size=8, server_settings={"role": "jobwarden_receiver"}
    )
    try:
        yield pool
    finally:
        await pool.close()


# Moving an operation from wherever it is to a state, with real evidence.
advance = drive


async def make_token(db: Any, name: str, scope: str = "agent") -> str:
    minted = mint_token()
    await tokens.create_token(
        db,
        minted,
        caller=name,
        scope="operator" if scope == "operator" else "agent",
        created_by="test",
    )
    return minted.secret


async def finish_with_result(
    db: Any,
    op_id: str,
    *,
    total: int | None = None,
    failed_items: Sequence[tuple[str, str | None, str | None]] = (),
    failed: int | None = None,
    inline: Any = None,
    actor: str = "reconciler:test",
) -> None:
    """Drive an operation to succeeded with a verified result carrying counts."""
    await advance(db, op_id, S.RESULT_COLLECTING)
    n_failed = failed if failed is not None else len(failed_items)
    result_id = await evidence.record_result(
        db,
        evidence.ResultRecord(
            op_id,
            True,
            sha256="1" * 64,
            inline=inline if inline is not None else {"rows": total},
            storage_ref="file:/results/x",
            items_total=total,
            items_succeeded=None if total is None else total - n_failed,
            items_failed=None if total is None else n_failed,
            failed_items=failed_items,
        ),
    )
    await ledger.attach_result(
        db, op_id, result_id, result_ref="file:/results/x", summary=None, fence=None
    )
    await ledger.transition(
        db,
        op_id,
        S.RESULT_COLLECTING,
        S.SUCCEEDED,
        actor=actor,
        cause="result verified",
        evidence=(Evidence.RESULT, result_id),
    )


async def fail_remotely(db: Any, op_id: str, code: str, message: str) -> None:
    """observing -> failed on a recorded 'failed' status read carrying an error."""
    await advance(db, op_id, S.OBSERVING)
    obs = await observe(db, op_id, "failed", error=(code, message))
    await ledger.transition(
        db,
        op_id,
        S.OBSERVING,
        S.FAILED,
        actor="reconciler:test",
        cause="remote failed",
        evidence=(Evidence.OBSERVATION, obs),
    )
