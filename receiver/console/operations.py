"""The operations list (filters, keyset paging) and the live-update stream (SSE)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from receiver.api.waiting import ANY_OPERATION
from receiver.console import sessions
from receiver.console.base import Console, Refused
from receiver.console.render import SECURITY_HEADERS, page
from receiver.console.sessions import Session
from shared.db.queries import q
from shared.ids import is_operation_id
from shared.ledger.states import INBOX, TERMINAL, LocalState

PAGE_SIZE = 50
# Operations one page reads at most when walking one state whose filter is
# checked per row (the window of console_operations_in_states).
SCAN_ROWS = 10_000
OUTCOMES = (
    "none",
    "succeeded",
    "completed_with_errors",
    "failed",
    "cancelled",
    "timed_out",
    "needs_attention",
)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhd]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_KIND = re.compile(r"^[A-Za-z0-9._:/-]{1,100}$")
# The live stream sends a comment this often: idle proxies keep it open, a
# vanished browser is noticed, and the session is checked again.
KEEPALIVE_SECONDS = 15.0
# An age filter beyond a century is a typo; far beyond it PostgreSQL's
# timestamps overflow (a 500 where the operator deserves a 400).
MAX_AGE_SECONDS = 100 * 365 * 86400.0


S = LocalState
# The states each outcome comes from (the CASE of the agent views, migration
# 008): a filter on an outcome walks only these states' index ranges.
# `succeeded` and `completed_with_errors` share one state and differ by result.
_OUTCOME_STATES: dict[str, frozenset[LocalState]] = {
    "succeeded": frozenset({S.SUCCEEDED}),
    "completed_with_errors": frozenset({S.SUCCEEDED}),
    "failed": frozenset({S.FAILED}),
    "cancelled": TERMINAL - {S.SUCCEEDED, S.FAILED},
    "timed_out": frozenset({S.RESULT_TIMED_OUT}),
    "needs_attention": INBOX - TERMINAL - {S.RESULT_TIMED_OUT},
    "none": frozenset(LocalState) - TERMINAL - INBOX,
}


# Outcomes that share a state: told apart per row, not by the state index.
_SHARED_STATE_OUTCOMES = frozenset({"succeeded", "completed_with_errors"})


def outcome_states(outcome: str | None) -> list[str] | None:
    """The states an outcome can come from, sorted; None for no outcome filter."""
    if not outcome:
        return None
    return sorted(state.value for state in _OUTCOME_STATES[outcome])


def states_to_walk(state: str, outcome: str) -> list[str] | None:
    """The states a page reads (None: all, in creation order); [] when none can match."""
    wanted = outcome_states(outcome)
    if not state:
        return wanted
    return [state] if wanted is None or state in wanted else []


def duration(text: str, name: str) -> float | None:
    text = text.strip().lower()
    if not text:
        return None
    match = _DURATION.match(text)
    if not match:
        raise Refused(400, f"{name}: not a duration ({text[:20]!r}); e.g. 90s, 15m, 2h, 3d.")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_AGE_SECONDS:
        raise Refused(400, f"{name}: at most {MAX_AGE_SECONDS // 86400:.0f} days.")
    return seconds


@dataclass(frozen=True)
class Filters:
    state: str = ""
    provider: str = ""
    kind: str = ""
    outcome: str = ""
    older_than: str = ""
    newer_than: str = ""

    def query(self, **extra: str) -> str:
        from urllib.parse import urlencode

        pairs = {k: v for k, v in vars(self).items() if v} | {k: v for k, v in extra.items() if v}
        return urlencode(pairs)


def filters_of(request: Request) -> Filters:
    p = request.query_params
    f = Filters(
        state=p.get("state", ""),
        provider=p.get("provider", ""),
        kind=p.get("kind", "").strip(),
        outcome=p.get("outcome", ""),
        older_than=p.get("older_than", "").strip(),
        newer_than=p.get("newer_than", "").strip(),
    )
    if f.state and f.state not in {s.value for s in LocalState}:
        raise Refused(400, "state: not a state of the machine.")
    if f.outcome and f.outcome not in OUTCOMES:
        raise Refused(400, "outcome: not one of " + ", ".join(OUTCOMES) + ".")
    if f.kind and not _KIND.match(f.kind):
        raise Refused(400, "kind: letters, digits and . _ : / - only.")
    if len(f.provider) > 100:
        raise Refused(400, "provider: too long.")
    return f


async def operations(console: Console, request: Request, session: Session) -> Response:
    f = filters_of(request)
    after = request.query_params.get("after") or None
    if after is not None and not is_operation_id(after):
        raise Refused(400, "after: not an operation id.")
    states = states_to_walk(f.state, f.outcome)
    async with console.connection() as conn, conn.transaction(readonly=True):
        await conn.execute(q("console_custom_plans"))
        found = await operations_page(conn, f, states, after)
        seen = [r["provider"] for r in await conn.fetch(q("console_providers_seen"))]
    return page(
        request,
        "operations.html",
        {
            "session": session,
            "rows": found.rows,
            "filters": f,
            "states": [s.value for s in LocalState],
            "outcomes": OUTCOMES,
            "providers": sorted(set(console.settings.providers) | set(seen)),
            "next": f.query(after=found.next_after) if found.next_after else None,
            "searched_to": found.searched_to,
            "scan_rows": SCAN_ROWS,
            "first": f.query() if after else None,
            "live": "*",
        },
    )


@dataclass(frozen=True)
class Found:
    rows: list[Any]
    next_after: str | None = None
    # The walk stopped at SCAN_ROWS operations without a full page; it reached
    # operations created at this time, and the next page searches on from there.
    searched_to: datetime | None = None


async def operations_page(
    conn: Any, f: Filters, states: list[str] | None, after: str | None
) -> Found:
    """One page: the query that reads the fewest operations for these filters.

    No state and at most a provider: a walk of the creation index (or the
    provider's index, as planned). States with nothing checked per row: each
    state's index range, merged. Anything checked per row (a kind; a provider
    with states; succeeded / completed_with_errors, which share a state): a
    window of at most SCAN_ROWS operations, from which the page continues.
    """
    if states == []:
        return Found([])
    older, newer = duration(f.older_than, "older than"), duration(f.newer_than, "newer than")
    now = await conn.fetchval(q("clock_now"))  # once: every bound of the page agrees
    older_at = None if older is None else now - timedelta(seconds=older)
    newer_at = None if newer is None else now - timedelta(seconds=newer)
    bounds = (after, older_at, newer_at)
    per_row = bool(f.kind or (f.provider and states) or f.outcome in _SHARED_STATE_OUTCOMES)
    if per_row:
        rows = await conn.fetch(
            q("console_window"),
            states,
            *bounds,
            f.provider or None,
            f.kind or None,
            f.outcome or None,
            SCAN_ROWS,
            PAGE_SIZE + 1,
        )
        return _windowed(rows)
    if states is None:
        return _found(
            await conn.fetch(q("console_operations"), f.provider or None, *bounds, PAGE_SIZE + 1)
        )
    return _found(
        await conn.fetch(q("console_operations_in_states"), states, *bounds, PAGE_SIZE + 1)
    )


def _windowed(rows: list[Any]) -> Found:
    """A window's page: its matches, and where it ended if it read a full window."""
    hits = [r for r in rows if r["operation_id"] is not None]
    found = _found(hits)
    end = rows[0] if rows else None
    if found.next_after or end is None or end["window_end_id"] is None:
        return found
    return Found(found.rows, next_after=end["window_end_id"], searched_to=end["window_end_at"])


def _found(rows: list[Any]) -> Found:
    shown = rows[:PAGE_SIZE]
    more = len(rows) > PAGE_SIZE and bool(shown)
    return Found(shown, next_after=shown[-1]["operation_id"] if more else None)


async def stream(console: Console, request: Request, session: Session) -> Response:
    """`changed` whenever an operation (or the one named by `op`) moves; the page reloads."""
    key = request.query_params.get("op") or ANY_OPERATION
    if key != ANY_OPERATION and not is_operation_id(key):
        raise Refused(400, "op: not an operation id.")
    headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
    return StreamingResponse(
        _changes(console, request, key), media_type="text/event-stream", headers=headers
    )


async def _changes(console: Console, request: Request, key: str) -> AsyncIterator[str]:
    """The stream's events. The session is re-checked every KEEPALIVE_SECONDS of
    wall time, busy or not, and without refreshing it: an open tab neither keeps
    an unattended session alive nor outlives a revoked token."""
    loop = asyncio.get_running_loop()
    async with console.hub.subscribe(key) as sub:
        yield "event: ready\ndata: {}\n\n"
        check_at = loop.time() + KEEPALIVE_SECONDS
        while True:
            await console.hub.ensure_listening()
            if await sub.wait(max(0.0, check_at - loop.time())):
                yield "event: changed\ndata: {}\n\n"
            if loop.time() < check_at:
                continue
            async with console.connection() as conn:
                live = await sessions.still_live(conn, request)
            if not live:
                yield "event: signed_out\ndata: {}\n\n"
                return
            yield ": keep-alive\n\n"
            check_at = loop.time() + KEEPALIVE_SECONDS
