"""Creatomate renders, OpenAI fine-tuning jobs, Klaviyo bulk profile imports and
Intercom content data exports, described in TOML as a new user would
(tests/fixtures_providers/unseen/: creatomate, openai_fine_tuning, klaviyo_imports,
intercom_exports) and driven through the real reconciler against fakes on loopback
(tests/fixtures_providers/unseen_round57f.py): success with the result collected,
failure with its reason, cancel (or its absence), a lost create answer, and each
API's own edge: Creatomate's create answering an array of renders, its output URL
named before the file exists, on a CDN that gets no credential.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from shared.serve import serve_app
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import PresetRig, preset_rig
from tests.fixtures_providers.unseen_round57f import (
    CM_FAILURE,
    CM_KEY,
    CM_TEMPLATE,
    CM_VIDEO,
    CreatomateFixture,
)

S = LocalState


def rig(
    pool: Any, tmp_path: Path, app: Any, name: str, env: dict[str, str], **over: Any
) -> contextlib.AbstractAsyncContextManager[PresetRig]:
    """The described provider (webhooks left out: polled)."""
    table = described(name, **over)
    table.pop("webhooks", None)
    return preset_rig(pool, tmp_path, app, preset=None, name=name, env=env, overrides=table)


# --- Creatomate --------------------------------------------------------------------

CM_ENV = {"CREATOMATE_API_KEY": CM_KEY}
PROMO = {"template_id": CM_TEMPLATE, "modifications": {"Title": "Winter sale"}}


@contextlib.asynccontextmanager
async def creatomate(pool: Any, tmp_path: Path, fx: CreatomateFixture) -> AsyncIterator[Any]:
    """The API and its CDN, another server (another port) beside it."""
    async with serve_app(fx.cdn()) as cdn_url:
        fx.cdn_url = cdn_url
        async with rig(pool, tmp_path, fx.app(), "creatomate", CM_ENV) as r:
            yield r


async def test_creatomate_the_render_named_in_the_array_is_followed_and_its_mp4_kept(
    pool: Any, tmp_path: Path
) -> None:
    """The create answers 202 with an array of renders: the job is its one
    element's id (`/0/id`). The output URL, named from the first answer on, is
    fetched only once the render succeeded (the CDN never answered 404), and the
    API key never goes to the CDN."""
    fx = CreatomateFixture()
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert (await r.op(op_id)).remote_job_id == job["id"]
        assert job["metadata"] == op_id
        assert {"waiting", "transcribing", "rendering", "succeeded"} <= await r.raw_states(op_id)
        assert await r.result_bytes(op_id) == CM_VIDEO
        assert fx.cdn_misses == 0
        assert fx.cdn_auth == [None]
        assert (await r.op(op_id)).last_error is None


async def test_creatomate_a_failed_render_is_failed_with_its_error_message(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    fx.script = "fail"
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == CM_FAILURE
        assert fx.cdn_auth == []
        assert (await r.op(op_id)).result_id is None


async def test_creatomate_a_refused_create_is_failed_with_its_hint(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit({"modifications": {"Title": "no template"}})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == "Either template_id or source must be provided."
        assert fx.jobs == {}


async def test_creatomate_a_cancel_sends_nothing_and_the_deadline_tells_a_human(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture()
    fx.script = "slow"
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id, cancel_deadline_s=0.5)
        assert await r.settle(op_id, ENDS) is S.CANCELLATION_UNCONFIRMED, await r.history(op_id)
        said = (await r.escalation(op_id))["reason"]
        assert "no cancel endpoint" in said and "no cancel was sent" in said, said
        assert await r.calls(op_id, "cancel") == []


async def test_creatomate_a_lost_create_goes_to_a_human_never_rendered_twice(
    pool: Any, tmp_path: Path
) -> None:
    fx = CreatomateFixture(lose_first_create=True)
    async with creatomate(pool, tmp_path, fx) as r:
        op_id = await r.submit(dict(PROMO))
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        assert fx.creates == 1 and len(fx.jobs) == 1
        assert (await r.op(op_id)).remote_job_id is None
