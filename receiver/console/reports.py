"""Webhooks per provider, the providers' guarantees, the audit log's checkpoint."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from receiver.console.base import Console
from receiver.console.render import page
from receiver.console.sessions import Session
from receiver.metrics import REFUSAL_REASONS, UNKNOWN_PROVIDER
from shared.db.queries import q
from shared.providers.guarantees import describe_guarantees

# Stored deliveries listed under the totals.
LATEST_DELIVERIES = 20


def _process_refusals(request: Request, names: list[str]) -> list[dict[str, Any]] | None:
    """This receiver process's refusal counters (by provider and reason), or None.

    Refusals are not stored in the database, only counted in each process's
    metrics (and logged): these are the counts of the process serving the page.
    """
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is None:
        return None
    rows = []
    for provider in [*names, UNKNOWN_PROVIDER]:
        for reason in sorted(REFUSAL_REASONS):
            value = metrics.registry.get_sample_value(
                "jobwarden_webhook_events_rejected_total", {"provider": provider, "reason": reason}
            )
            if value:
                rows.append({"provider": provider, "reason": reason, "count": int(value)})
    return rows


def _process_counts(request: Request, provider: str) -> dict[str, int] | None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is None:
        return None
    counts = {}
    for label, name in (
        ("received", "jobwarden_webhook_requests_received_total"),
        ("verified", "jobwarden_webhook_events_verified_total"),
        ("duplicate", "jobwarden_webhook_events_duplicate_total"),
    ):
        value = metrics.registry.get_sample_value(name, {"provider": provider})
        counts[label] = int(value or 0)
    return counts


async def webhooks(console: Console, request: Request, session: Session) -> Response:
    async with console.connection() as conn:
        totals = await conn.fetch(q("console_webhook_totals"))
        latest = await conn.fetch(q("console_webhook_latest"), LATEST_DELIVERIES)
    configured = sorted(n for n, d in console.settings.providers.items() if d.webhooks is not None)
    stored = {row["provider"]: row for row in totals}
    providers = [
        {"name": name, "stored": stored.get(name), "process": _process_counts(request, name)}
        for name in sorted(set(configured) | set(stored))
    ]
    return page(
        request,
        "webhooks.html",
        {
            "session": session,
            "providers": providers,
            "latest": latest,
            "refusals": _process_refusals(request, configured),
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
        latest = await conn.fetchrow(q("log_latest_checkpoint"))
        pending = await conn.fetchrow(q("log_pending"))
    return page(request, "audit.html", {"session": session, "latest": latest, "pending": pending})
