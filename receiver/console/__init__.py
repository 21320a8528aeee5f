"""The operator console: server-rendered pages under /console, for operator tokens.

Mounted by `receiver.api.api_routes` beside the agent API, sharing its pool and
its NOTIFY hub for sessions and pages. Operator decisions are recorded on a
login of the console's own in jobwarden_operator (JW_CONSOLE_DATABASE_URL),
since the receiver's role may not decide (base.Console.deciding). Pages are
Jinja2 templates (autoescaped) with one small static script for live updates;
no build step.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from receiver.api.waiting import TransitionHub
from receiver.console import inbox, operations, reports, signin, timeline
from receiver.console.base import PREFIX, Console, public, signed_in
from receiver.console.render import STATIC, with_headers
from shared.settings import Settings

__all__ = ["PREFIX", "console_routes"]


async def _home(request: Request) -> Response:
    return with_headers(RedirectResponse(f"{PREFIX}/inbox", status_code=303))


async def _static(request: Request) -> Response:
    found = STATIC.get(str(request.path_params["name"]))
    if found is None:
        return with_headers(Response("not found", status_code=404, media_type="text/plain"))
    body, media_type = found
    response = with_headers(Response(body, media_type=media_type))
    response.headers["Cache-Control"] = "no-cache"
    return response


def console_routes(settings: Settings, pool: Any, hub: TransitionHub) -> list[BaseRoute]:
    """`/console/…`, for the receiver app (beside the agent API's routes)."""
    c = Console(settings, pool, hub)
    routes: list[BaseRoute] = [
        Route("/", _home, methods=["GET"]),
        Route("/static/{name}", _static, methods=["GET"]),
        Route("/signin", public(c, signin.signin_form, "signin"), methods=["GET"]),
        Route("/signin", public(c, signin.signin, "signin"), methods=["POST"]),
        Route("/signout", signed_in(c, signin.signout, "signout"), methods=["POST"]),
        Route("/inbox", signed_in(c, inbox.inbox, "inbox"), methods=["GET"]),
        Route("/operations", signed_in(c, operations.operations, "operations"), methods=["GET"]),
        Route("/stream", signed_in(c, operations.stream, "stream"), methods=["GET"]),
        Route(
            "/operations/{operation_id}",
            signed_in(c, timeline.timeline, "timeline"),
            methods=["GET"],
        ),
        Route(
            "/operations/{operation_id}/{action}",
            signed_in(c, timeline.act, "action"),
            methods=["POST"],
        ),
        Route("/webhooks", signed_in(c, reports.webhooks, "webhooks"), methods=["GET"]),
        Route("/providers", signed_in(c, reports.providers, "providers"), methods=["GET"]),
        Route("/audit", signed_in(c, reports.audit, "audit"), methods=["GET"]),
    ]
    return [Mount(PREFIX, routes=routes)]
