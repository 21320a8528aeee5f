"""The receiver's direct webhook dispatch matches exactly the paths its routes match."""

from __future__ import annotations

import random

import pytest
from starlette.routing import Match, Route

from receiver.app import webhook_provider


async def _endpoint(scope: object, receive: object, send: object) -> None:
    """Never called: the routes are only matched."""


class _Asgi:
    __call__ = staticmethod(_endpoint)


ROUTES = (Route("/webhooks/{provider}", _Asgi()), Route("/webhooks/{provider}/", _Asgi()))
PIECES = ("/", "//", "webhooks", "webhook", "sim", "a", ".", "..", "%2F", "\n", " ", "é", "")


def _route_provider(path: str) -> str | None:
    """What Starlette's two webhook routes make of `path`."""
    for route in ROUTES:
        match, child = route.matches({"type": "http", "path": path, "method": "POST"})
        if match is Match.FULL:
            return str(child["path_params"]["provider"])
    return None


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/webhooks/sim", "sim"),
        ("/webhooks/sim/", "sim"),
        ("/webhooks/", None),
        ("/webhooks//", None),
        ("/webhooks", None),
        ("/webhooks/sim//", None),
        ("/webhooks/a/b", None),
        ("/webhooksx/sim", None),
        ("/api/webhooks/sim", None),
        ("/webhooks/sim\n", "sim\n"),
        ("/webhooks/sim/\n", "sim"),
    ],
)
def test_known_paths(path: str, provider: str | None) -> None:
    assert webhook_provider(path) == provider == _route_provider(path)


def test_random_paths_agree_with_the_routes() -> None:
    rng = random.Random(20261203)
    agreed = 0
    for _ in range(20_000):
        path = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        if rng.random() < 0.7:
            path = "/webhooks/" + path
        assert webhook_provider(path) == _route_provider(path), repr(path)
        agreed += webhook_provider(path) is not None
    assert agreed > 1_000  # the generator reaches the routes, not only other paths
