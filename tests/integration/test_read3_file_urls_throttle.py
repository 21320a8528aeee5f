"""Second reading of c45bb52 (`source = "files"` without a path: the ids are file
URLs, each judged alone by `_refused_part`): a file its host throttles (429, or a
503) is fetched again at the next attempt, and the result is every file, never
ended by the throttle nor stored short of a file. Runway described as in
tests/fixtures_providers/unseen/runway.toml, its outputs made text so that two
files are one result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from shared.ledger.states import LocalState as S
from tests.fixtures_providers.unseen_media import RunwayFixture
from tests.integration.test_unseen_fal_runway import ENDS, IMAGE, runway


class ThrottlingCdn(RunwayFixture):
    """Text outputs; the second file answers `code` `times` times first."""

    def __init__(self, code: int, times: int = 1) -> None:
        super().__init__()
        self.code, self.times = code, times

    async def output(self, request: Request) -> Response:
        self.cdn_auth.append(request.headers.get("authorization"))
        name = request.path_params["name"]
        if name.endswith("_1.mp4") and self.times:
            self.times -= 1
            return Response(b"slow down", self.code, headers={"Retry-After": "0"})
        return Response(f"{name}\n".encode(), media_type="text/plain")


TEXT = {"result": {"format": "text", "expect": {"content_types": ["text/plain"]}}}


@pytest.mark.parametrize("code", [429, 503])
async def test_a_throttled_file_is_fetched_again_and_the_result_holds_every_file(
    pool: Any, tmp_path: Path, code: int
) -> None:
    fx = ThrottlingCdn(code)
    async with runway(pool, tmp_path, fx, **TEXT) as r:
        op_id = await r.submit({**IMAGE, "script": "two"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        tid = fx.only()["id"]
        assert await r.result_bytes(op_id) == f"{tid}.mp4\n{tid}_1.mp4\n".encode()
        assert fx.times == 0  # the throttle was met, and waited out
        assert set(fx.cdn_auth) == {None}
