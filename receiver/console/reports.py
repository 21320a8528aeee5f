"""Webhooks per provider, the providers' guarantees, the audit log's checkpoint and last check."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from receiver.console.base import Console
from receiver.console.render import page
from receiver.console.sessions import Session
from shared.db.queries import q
from shared.ledger.receipts import UsableCheckpoint, shown_checkpoint
from shared.providers.guarantees import describe_guarantees

# Stored deliveries, and refused ones, listed under the totals.
LATEST_DELIVERIES = 20
LATEST_REFUSALS = 20


async def _flush_own_refusals(request: Request) -> None:
    """Add this process's pending refusals first, so the page is current for them.

    Other receiver processes add theirs every few seconds (FLUSH_SECONDS).
    """
    recorder = getattr(request.app.state, "refusals", None)
    if recorder is not None:
        await recorder.flush()


async def webhooks(console: Console, request: Request, session: Session) -> Response:
    await _flush_own_refusals(request)
    async with console.connection() as conn:
        totals = await conn.fetch(q("console_webhook_totals"))
        latest = await conn.fetch(q("console_webhook_latest"), LATEST_DELIVERIES)
        refusals = await conn.fetch(q("console_webhook_refusals"))
        latest_refusals = await conn.fetch(q("console_webhook_latest_refusals"), LATEST_REFUSALS)
    configured = sorted(n for n, d in console.settings.providers.items() if d.webhooks is not None)
    stored = {row["provider"]: row for row in totals}
    refused: dict[str, int] = {}
    for row in refusals:
        refused[row["provider"]] = refused.get(row["provider"], 0) + row["refusals"]
    providers = [
        {"name": name, "stored": stored.get(name), "refused": refused.get(name, 0)}
        for name in sorted(set(configured) | set(stored) | set(refused))
    ]
    return page(
        request,
        "webhooks.html",
        {
            "session": session,
            "providers": providers,
            "latest": latest,
            "refusals": refusals,
            "latest_refusals": latest_refusals,
        },
    )


async def providers(console: Console, request: Request, session: Session) -> Response:
    reports = [
        {"name": name, "guarantees": describe_guarantees(desc)}
        for name, desc in sorted(console.settings.providers.items())
    ]
    return page(request, "providers.html", {"session": session, "reports": reports})


async def audit(console: Console, request: Request, session: Session) -> Response:
    async with console.connection() as conn:
        shown = await shown_checkpoint(conn)
        pending = await conn.fetchrow(q("log_pending"))
        verified = await conn.fetchrow(q("console_last_verification"))
    latest = shown if isinstance(shown, UsableCheckpoint) else None
    problem = None if shown is None or latest is not None else str(shown)
    return page(
        request,
        "audit.html",
        {
            "session": session,
            "latest": latest,
            "problem": problem,
            "pending": pending,
            "verified": verified,
        },
    )
