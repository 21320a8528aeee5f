"""One operation: its timeline, deliveries, result and failed items, receipt status, actions."""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from receiver.console import actions, sessions
from receiver.console.base import PREFIX, SESSION_ENDED, Console, Refused
from receiver.console.inbox import next_moves
from receiver.console.render import page, with_headers
from receiver.console.sessions import Session
from receiver.moves import traced_moves
from shared.db.queries import q
from shared.ids import is_operation_id
from shared.ledger.receipts import UsableCheckpoint, shown_checkpoint
from shared.ledger.states import LocalState

ITEMS_PAGE_SIZE = 50
# An operation read for weeks can hold thousands of calls and observations:
# the page shows the newest entries (the CLI's `show` prints every one).
TIMELINE_ENTRIES = 500
DELIVERIES_SHOWN = 100
_ITEM_KEY = re.compile(r"^.{1,500}$", re.S)
# What a redirect after an action may say: a fixed vocabulary, so a URL can
# never carry words of its own into the page.
NOTICES = {
    "resolved": "Decision recorded; the operation moved.",
    "reconciled": "Decision recorded; the reconciler will read the remote status now.",
    "read": "The reconciler will read the remote status now.",
    "cancel": "Cancellation requested; NOT confirmed until the provider reports it.",
    "abandoned": "Abandoned: the create request had not been sent, no job exists.",
    "cancel_intent": "Cancel intent recorded; the operation waits for an operator.",
}


def operation_id_of(request: Request) -> str:
    operation_id = str(request.path_params["operation_id"])
    if not is_operation_id(operation_id):
        raise Refused(404, "Not an operation id.")
    return operation_id


async def _receipt(conn: Any, operation_id: str) -> dict[str, Any]:
    shown = await shown_checkpoint(conn)
    if not isinstance(shown, UsableCheckpoint):
        problem = None if shown is None else str(shown)
        return {"checkpoint": None, "problem": problem, "kinds": [], "rows": 0, "covered": 0}
    kinds = await conn.fetch(q("console_receipt_status"), operation_id, shown.size)
    return {
        "checkpoint": shown,
        "problem": None,
        "kinds": kinds,
        "rows": sum(k["rows"] for k in kinds),
        "covered": sum(k["covered"] for k in kinds),
    }


async def render(
    console: Console,
    request: Request,
    session: Session,
    operation_id: str,
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    items_after = request.query_params.get("items_after") or None
    if items_after is not None and not _ITEM_KEY.match(items_after):
        raise Refused(400, "items_after: not an item key.")
    async with console.connection() as conn:
        op = await conn.fetchrow(q("console_operation"), operation_id)
        if op is None:
            raise Refused(404, f"No operation {operation_id}.")
        # One more than shown: whether there were more is then known, not guessed.
        timeline = await conn.fetch(q("operator_timeline"), operation_id, TIMELINE_ENTRIES + 1)
        deliveries = await conn.fetch(
            q("console_webhook_deliveries"), operation_id, DELIVERIES_SHOWN + 1
        )
        results = await conn.fetch(q("console_result"), operation_id)
        items = await conn.fetch(
            q("api_failed_items"), operation_id, items_after, ITEMS_PAGE_SIZE + 1
        )
        escalation = await conn.fetchrow(q("console_escalation"), operation_id)
        receipt = await _receipt(conn, operation_id)
    notice = NOTICES.get(request.query_params.get("done", ""))
    more_items = len(items) > ITEMS_PAGE_SIZE
    items = items[:ITEMS_PAGE_SIZE]
    state = LocalState(op["state"])
    return page(
        request,
        "timeline.html",
        {
            "session": session,
            "op": op,
            "timeline": timeline[-TIMELINE_ENTRIES:],
            "timeline_cut": len(timeline) > TIMELINE_ENTRIES,
            "deliveries": deliveries[:DELIVERIES_SHOWN],
            "deliveries_cut": len(deliveries) > DELIVERIES_SHOWN,
            "results": results,
            "items": items,
            "items_next": items[-1]["item_key"] if more_items and items else None,
            "escalation": escalation,
            "receipt": receipt,
            "moves": next_moves(state, op["remote_job_id"]),
            "notice": notice,
            "error": error,
            "live": operation_id,
        },
        status=status,
    )


async def timeline(console: Console, request: Request, session: Session) -> Response:
    return await render(console, request, session, operation_id_of(request))


async def act(console: Console, request: Request, session: Session) -> Response:
    """POST …/{operation_id}/{action}: resolve, reconcile or cancel, then back to the timeline."""
    operation_id = operation_id_of(request)
    action = str(request.path_params["action"])
    form: dict[str, str] = request.state.form
    if action not in ("resolve", "reconcile", "cancel"):
        raise Refused(404, "No such action.")
    try:
        reason = actions.reason_of(form.get("reason"))
        # On the console's own database login when one is set (Console.deciding).
        async with (
            console.deciding() as conn,
            traced_moves(conn, operation_id, f"operator {action}", session.actor),
            conn.transaction(),
        ):
            # The session was checked as the request began; its token may have been
            # revoked since. Held now, no decision commits after a revocation.
            if not await sessions.hold(conn, session):
                raise Refused(403, SESSION_ENDED)
            done = await _decide(console, conn, operation_id, action, form, session, reason)
    except actions.ActionRefused as refused:
        return await render(console, request, session, operation_id, error=str(refused), status=409)
    target = f"{PREFIX}/operations/{operation_id}?done={done.notice}"
    return with_headers(RedirectResponse(target, status_code=303))


async def _decide(
    console: Console,
    conn: Any,
    operation_id: str,
    action: str,
    form: dict[str, str],
    session: Session,
    reason: str,
) -> actions.Done:
    """The action itself, inside the transaction that holds the session."""
    await actions.check_seen(conn, operation_id, form.get("seen"))
    if action == "resolve":
        return await actions.resolve(
            conn,
            operation_id,
            form.get("target", ""),
            actor=session.actor,
            reason=reason,
            cancel_deadline_s=console.settings.cancel_deadline_for(
                (await actions.load(conn, operation_id)).provider
            ),
            extend_s=actions.extension_of(form.get("extend_hours")),
        )
    if action == "reconcile":
        return await actions.reconcile(
            conn,
            operation_id,
            actor=session.actor,
            reason=reason,
            extend_s=actions.extension_of(form.get("extend_hours")),
        )
    return await actions.cancel(
        conn,
        operation_id,
        actor=session.actor,
        reason=reason,
        cancel_deadline_s=console.settings.cancel_deadline_for(
            (await actions.load(conn, operation_id)).provider
        ),
    )
