"""A database that refuses new connections is a 503 with Retry-After, not a 500.

Before: DATABASE_DOWN held the errors of a lost or unreachable server only; a
dropped database (InvalidCatalogNameError) or a refused login raised at the
pool's acquire went to the catch-all and answered 500, with a traceback in
the log. A real PostgreSQL refuses the connections here, and the API is
served by uvicorn on loopback.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from starlette.applications import Starlette

from receiver.api.operations import OperationsApi
from shared.agents.mcp.http import DatabaseUnavailable, LedgerTokenVerifier
from shared.db.connect import create_pool, with_database
from shared.serve import serve_app
from tests.integration.agent_support import sim_settings


def _as_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    netloc = f"{user}@{parts.hostname}:{parts.port or 5432}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def refusing_url(db_url: str, how: str) -> str:
    missing = f"jw_review_{uuid.uuid4().hex[:12]}"
    if how == "database_missing":
        return with_database(db_url, missing)
    return _as_user(db_url, missing)  # no such login


@pytest.mark.parametrize("how", ["database_missing", "login_refused"])
async def test_a_refused_connection_is_503_with_retry_after_and_one_log_line(
    db_url: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    pool = await create_pool(refusing_url(db_url, how), min_size=0, max_size=1)
    try:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        caplog.set_level(logging.WARNING, logger="receiver.api.operations")
        async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.get(
                "/v1/operations", headers={"Authorization": "Bearer jw_anything"}
            )
    finally:
        await pool.close()
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"].isdigit()
    records = [r for r in caplog.records if r.name == "receiver.api.operations"]
    assert records, "the refusal is logged"
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in records)


@pytest.mark.parametrize("how", ["database_missing", "login_refused"])
async def test_the_mcp_token_check_says_unavailable_too(db_url: str, how: str) -> None:
    pool = await create_pool(refusing_url(db_url, how), min_size=0, max_size=1)
    try:
        verifier = LedgerTokenVerifier(pool, acquire_timeout=2.0)
        with pytest.raises(DatabaseUnavailable):
            await verifier.verify_token("jw_anything")
    finally:
        await pool.close()


async def test_a_working_database_is_untouched(db: Any, db_url: str) -> None:
    """The same route with a good pool: 401 for an unknown token (the DB was reached)."""
    pool = await create_pool(db_url, min_size=0, max_size=1)
    try:
        app = Starlette(routes=OperationsApi(sim_settings(), pool).routes())
        async with serve_app(app) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.get(
                "/v1/operations", headers={"Authorization": "Bearer jw_anything"}
            )
    finally:
        await pool.close()
    assert response.status_code == 401
