"""The inbox: every operation that waits for a human, why, since when, what can be done."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from receiver.console import actions
from receiver.console.base import Console
from receiver.console.render import page
from receiver.console.sessions import Session
from shared.db.queries import q
from shared.ledger.states import CANCELLABLE, TERMINAL, LocalState


def why(row: Any) -> str:
    error = row["error"] if isinstance(row["error"], dict) else {}
    return str(row["escalation_reason"] or error.get("message") or row["message"] or "-")


def next_moves(state: LocalState, remote_job_id: str | None) -> dict[str, Any]:
    """The buttons an operation in `state` gets: resolutions, reconcile, cancel."""
    return {
        "resolutions": [s.value for s in actions.moves(state)],
        "reconcile": state not in TERMINAL,
        "resume_to": (t.value if (t := actions.RESUME_TO.get(state)) else None),
        "extendable": actions.RESUME_TO.get(state) is LocalState.OBSERVING,
        "cancel": state in CANCELLABLE,
        "has_job": remote_job_id is not None,
    }


async def inbox(console: Console, request: Request, session: Session) -> Response:
    async with console.connection() as conn:
        rows = await conn.fetch(q("operator_inbox"))
        now = await conn.fetchval(q("clock_now"))
    items = [
        {
            "row": row,
            "why": why(row),
            "since_seconds": (now - row["since"]).total_seconds() if row["since"] else None,
            "moves": next_moves(LocalState(row["state"]), row["remote_job_id"]),
        }
        for row in rows
    ]
    return page(request, "inbox.html", {"session": session, "items": items, "live": "*"})
