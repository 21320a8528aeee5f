"""What every console page shares: the database, the session, forms, CSRF, failures.

A handler gets the console and the request; `page_route` wraps it so that a
page is only served to a signed-in operator (else: to the sign-in page), a
POST only with the session's CSRF token, and every failure becomes a page
with words, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from receiver.api.waiting import TransitionHub
from receiver.console import sessions
from receiver.console.render import page, with_headers
from receiver.console.sessions import Session
from shared.db import pooled
from shared.db.connect import create_pool
from shared.db.errors import DATABASE_DOWN
from shared.settings import Settings

log = logging.getLogger(__name__)

PREFIX = "/console"
# A console form is a token, a reason and a few choices: far below this.
MAX_FORM_BYTES = 16 * 1024
# What a lost or unreachable database looks like from here (as in the API).


CSRF_REFUSED = "Refused: the form's CSRF token is missing or wrong. Reload the page and try again."
# The console's own login (JW_CONSOLE_DATABASE_URL) records decisions only: a
# few operators acting by hand, one connection each, rarely at once.
DECISIONS_POOL_MAX_SIZE = 2
# The database refused the role an action ran as: the receiver's (no console
# login set) or a console login outside jobwarden_operator. Nothing was
# recorded (the ledger's transaction rolled back); the fix is the deployment's.
RECEIVER_MAY_NOT_DECIDE = (
    "This receiver cannot record operator decisions: its database role "
    "(jobwarden_receiver) may not, by design. Nothing was recorded. To act from the "
    "console, set JW_CONSOLE_DATABASE_URL to a database login in the jobwarden_operator "
    "role and restart the receiver; meanwhile the jobwarden CLI (resolve, reconcile, "
    "cancel) records the same decisions."
)
CONSOLE_LOGIN_MAY_NOT_DECIDE = (
    "The console's database login (JW_CONSOLE_DATABASE_URL) may not record operator "
    "decisions. Nothing was recorded. It must name a login in the jobwarden_operator role "
    "(deploy/sql/create_login_roles.sql)."
)
CONSOLE_LOGIN_REFUSED = (
    "The database refused the console's login (JW_CONSOLE_DATABASE_URL). Nothing was "
    "recorded. Check that it names an existing login in the jobwarden_operator role, "
    "with its password, and this database."
)
SESSION_ENDED = "Your console session has expired or ended: sign in again."
DECISION_OUTCOME_UNKNOWN = (
    "The connection to the database was lost while your action was being recorded: it "
    "may have been recorded. Open the operation's page again and look at its timeline "
    "before acting again."
)
Endpoint = Callable[[Request], Awaitable[Response]]


class Refused(Exception):
    """A request refused with a page: status and words for the operator."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# Every console with a pool of its own, so that the receiver can close them
# (`close_decision_pools`) when it stops; weak, so a dropped console goes.
_CONSOLES: weakref.WeakSet[Console] = weakref.WeakSet()


@dataclass(eq=False)
class Console:
    settings: Settings
    pool: Any  # the receiver's: sessions and pages
    hub: TransitionHub
    # Operator decisions, when settings.console_database_url names the console's
    # own login (a role in jobwarden_operator): opened on the first action.
    _decisions_pool: Any = field(default=None, init=False, repr=False)
    _decisions_lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        try:
            conn = await self.pool.acquire(timeout=self.settings.db_acquire_timeout)
        except DATABASE_DOWN:
            raise Refused(503, "The database is busy or unavailable; retry shortly.") from None
        try:
            yield conn
        finally:
            await pooled.release(self.pool, conn)

    @contextlib.asynccontextmanager
    async def deciding(self) -> AsyncIterator[Any]:
        """A connection to record an operator's decision on.

        The console's own login's pool if JW_CONSOLE_DATABASE_URL is set, else
        the receiver's: enough where the receiver logs in as the owner (`make
        run`, the demo), refused where it logs in as jobwarden_receiver. A
        privilege the database refuses becomes a page that says what to set;
        the ledger's transaction has rolled back by then.
        """
        own_login = bool(self.settings.console_database_url)
        pool = await self._pool_for_decisions() if own_login else self.pool
        try:
            conn = await pool.acquire(timeout=self.settings.db_acquire_timeout)
        except DATABASE_DOWN:
            raise Refused(503, "The database is busy or unavailable; retry shortly.") from None
        except asyncpg.PostgresError as exc:  # the login itself refused: role, password, database
            if not own_login:
                raise
            log.warning("the console's database login was refused (%s)", type(exc).__name__)
            raise Refused(503, CONSOLE_LOGIN_REFUSED) from None
        try:
            yield conn
        except asyncpg.InsufficientPrivilegeError as exc:
            # The server's words name a table or column, never a credential.
            log.warning(
                "a console action was refused by the database (%s): %s",
                "JW_CONSOLE_DATABASE_URL's login" if own_login else "the receiver's role",
                exc,
            )
            message = CONSOLE_LOGIN_MAY_NOT_DECIDE if own_login else RECEIVER_MAY_NOT_DECIDE
            raise Refused(503, message) from None
        except DATABASE_DOWN:
            # Lost at the COMMIT, the server has committed and only its answer is
            # gone: "retry shortly" let the operator believe nothing was done.
            log.warning("the connection was lost during a console action", exc_info=True)
            raise Refused(503, DECISION_OUTCOME_UNKNOWN) from None
        finally:
            await pooled.release(pool, conn)

    async def _pool_for_decisions(self) -> Any:
        async with self._decisions_lock:
            if self._decisions_pool is None:
                # min_size=0: nothing connects until an operator acts, and a
                # wrong URL is reported on the page of that action.
                self._decisions_pool = await create_pool(
                    self.settings.console_database_url,
                    min_size=0,
                    max_size=DECISIONS_POOL_MAX_SIZE,
                )
                _CONSOLES.add(self)
            return self._decisions_pool

    async def close(self) -> None:
        """Close the console's own pool, if it opened one (the receiver's is the caller's)."""
        async with self._decisions_lock:
            pool, self._decisions_pool = self._decisions_pool, None
            _CONSOLES.discard(self)
        if pool is not None:
            await pool.close()

    async def session(self, request: Request) -> Session | None:
        async with self.connection() as conn:
            return await sessions.current(conn, request)


async def close_decision_pools(pool: Any) -> None:
    """Close the pools that consoles over the receiver's `pool` opened for decisions.

    For the receiver's shutdown (receiver/main.py), after its requests have finished.
    """
    for console in [c for c in _CONSOLES if c.pool is pool]:
        await console.close()


Handler = Callable[[Console, Request, Session], Awaitable[Response]]
PublicHandler = Callable[[Console, Request], Awaitable[Response]]


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form, bounded; the last value of a repeated field wins."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "The form is too large.")
    if not body:
        return {}  # and so no CSRF token: refused as such by the caller
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise Refused(415, "The console accepts its own forms only.")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "The form is not UTF-8.") from None
    return dict(urllib.parse.parse_qsl(text, keep_blank_values=True))


def same_origin(request: Request) -> bool:
    """Whether the browser says the request came from this site (or says nothing).

    A defence in depth beside the CSRF token and the SameSite=Strict cookie.
    Sec-Fetch-Site first: browsers send it even under `Referrer-Policy:
    no-referrer`, which turns the Origin of a form POST into "null" (so a null
    Origin proves nothing either way and is left to the token).
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    return origin == f"{request.url.scheme}://{request.url.netloc}"


def signin_redirect(request: Request, reason: str | None = None) -> Response:
    target = f"{PREFIX}/signin" + (f"?why={reason}" if reason else "")
    return with_headers(RedirectResponse(target, status_code=303))


def error_page(request: Request, status: int, message: str, session: Session | None) -> Response:
    return page(
        request,
        "error.html",
        {"status": status, "error": message, "session": session},
        status=status,
    )


def guarded(console: Console, handler: Endpoint, name: str) -> Endpoint:
    """Every failure is a page with words: a refusal, a database outage, a crash."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return error_page(request, refused.status, refused.message, None)
        except DATABASE_DOWN:
            log.warning("database unavailable during console %s", name, exc_info=True)
            return error_page(request, 503, "The database is unavailable; retry shortly.", None)
        except Exception:
            log.exception("unexpected error in console %s %s", request.method, name)
            return error_page(request, 500, "Unexpected server error; it was logged.", None)

    return endpoint


def signed_in(
    console: Console, handler: Handler, name: str
) -> Callable[[Request], Awaitable[Response]]:
    """Serve `handler` to a signed-in operator; a POST also needs the session's CSRF token."""

    async def endpoint(request: Request) -> Response:
        if request.method == "POST" and not same_origin(request):
            raise Refused(403, "Refused: this form was sent from another site.")
        session = await console.session(request)
        if session is None:
            if request.method == "POST":
                raise Refused(403, SESSION_ENDED)
            return signin_redirect(
                request, "expired" if request.cookies.get(sessions.COOKIE) else None
            )
        if request.method == "POST":
            form = await read_form(request)
            if not sessions.csrf_matches(session.csrf, form.get("csrf")):
                raise Refused(403, CSRF_REFUSED)
            request.state.form = form
        try:
            return await handler(console, request, session)
        except Refused as refused:
            return error_page(request, refused.status, refused.message, session)

    return guarded(console, endpoint, name)


def public(
    console: Console, handler: PublicHandler, name: str
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handler(console, request)

    return guarded(console, endpoint, name)
