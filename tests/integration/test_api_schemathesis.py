"""Schemathesis against the real agent API on a real PostgreSQL, in-process (ASGI).

Bounded so that `make test` keeps it: a few examples per operation, positive
and negative, with every conformance check of schemathesis that the document
states (status codes, content types, response headers and schemas, negative
data rejected, auth not ignored, missing required headers). A 5xx fails it
(`not_a_server_error` is among the default checks).

The app's pool is created by its lifespan, inside the event loop schemathesis
runs ASGI apps in (one thread for the whole process), and closed at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.python import asgi
from starlette.applications import Starlette

from receiver.api.openapi import openapi_document
from receiver.api.operations import OperationsApi
from shared.db.connect import create_pool
from tests.integration.agent_support import make_token, sim_settings

# Examples per operation and mode: 11 operations x 2 modes x this, at ~10 ms a
# call, stays well under a minute on a 2-core machine.
MAX_EXAMPLES = 25

pytestmark = pytest.mark.slow


def _app(db_url: str) -> Starlette:
    """The API on a pool that lives and dies with the app's own event loop."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pool = await create_pool(
            db_url, min_size=1, max_size=4, server_settings={"role": "jobwarden_receiver"}
        )
        app.router.routes.extend(OperationsApi(sim_settings(), pool).routes())
        try:
            yield
        finally:
            await pool.close()

    return Starlette(lifespan=lifespan)


@pytest_asyncio.fixture
async def token(db: Any) -> str:
    return await make_token(db, "fuzzer")


@pytest.fixture
def app(db_url: str) -> Iterator[Starlette]:
    """The app of one test; its lifespan (and pool) is stopped when the test ends."""
    try:
        yield _app(db_url)
    finally:
        asgi.shutdown_lifespans()


# The document the app serves, loaded eagerly: schemathesis' fixture-based lazy
# loader reads pytest internals that pytest 9 renamed.
# The providers' descriptions, not only their names: the document then states
# each one's create call and body, which the API holds a submission to.
schema = schemathesis.openapi.from_dict(openapi_document(sim_settings().providers))
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=MAX_EXAMPLES,
    deterministic=True,
    database="none",
)


@schema.parametrize()
# One app (and database) per operation, shared by its examples on purpose.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_the_api_conforms_to_its_document(case: Any, app: Starlette, token: str) -> None:
    # The document was loaded without an app (the app needs this test's
    # database); the operation and the checks' probes both send through it.
    case.operation.app = case.operation.schema.app = app
    if not case.meta.generation.mode.is_negative and case.query:
        # A page token is valid only if this server issued it, which no schema can
        # say: a random one is rightly a 400. Negative cases still send them.
        case.query.pop("page_token", None)
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"})
