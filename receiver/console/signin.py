"""Sign-in with an operator token (POSTed, never in a URL) and sign-out."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from receiver.api.auth import MAX_TOKEN_LENGTH
from receiver.console import sessions
from receiver.console.base import PREFIX, Console, Refused, read_form, same_origin
from receiver.console.render import page, with_headers
from receiver.console.sessions import Session
from shared.ledger import tokens

# How long the sign-in form stays usable: an hour to find and paste a token.
SIGNIN_FORM_SECONDS = 3600
_WHY = {
    "expired": "Your session expired or ended: sign in again.",
    "signed_out": "Signed out.",
}


def _form(
    request: Request, *, secret: str, error: str | None = None, status: int = 200
) -> Response:
    why = request.query_params.get("why")
    response = page(
        request,
        "signin.html",
        {"csrf": sessions.signin_csrf_for(secret), "error": error, "notice": _WHY.get(why or "")},
        status=status,
    )
    sessions.set_cookie(response, request, sessions.SIGNIN_COOKIE, secret, SIGNIN_FORM_SECONDS)
    return response


async def signin_form(console: Console, request: Request) -> Response:
    session = await console.session(request)
    if session is not None:
        return with_headers(RedirectResponse(f"{PREFIX}/inbox", status_code=303))
    return _form(request, secret=sessions.new_secret())


async def signin(console: Console, request: Request) -> Response:
    if not same_origin(request):
        raise Refused(403, "Refused: this form was sent from another site.")
    form = await read_form(request)
    pre = request.cookies.get(sessions.SIGNIN_COOKIE)
    if not pre or not sessions.csrf_matches(sessions.signin_csrf_for(pre), form.get("csrf")):
        raise Refused(
            403, "Refused: the sign-in form's CSRF token is missing or wrong. Reload the page."
        )
    token = form.get("token", "").strip()
    if not token or len(token) > MAX_TOKEN_LENGTH:
        return _form(request, secret=pre, error="Paste an operator token.", status=401)
    async with console.connection() as conn:
        found = await tokens.authenticate(conn, token)
        if found is None:
            return _form(
                request,
                secret=pre,
                error="That token is not valid (unknown or revoked).",
                status=401,
            )
        if found.scope != "operator":
            return _form(
                request,
                secret=pre,
                error=(
                    "That is an agent token: the console needs an operator token "
                    "(jobwarden tokens create NAME --operator)."
                ),
                status=403,
            )
        opened = await sessions.open_session(conn, found.token_id)
    if opened is None:  # revoked between the two statements
        return _form(request, secret=pre, error="That token was just revoked.", status=401)
    secret, _ = opened
    response = with_headers(RedirectResponse(f"{PREFIX}/inbox", status_code=303))
    sessions.set_cookie(response, request, sessions.COOKIE, secret, sessions.ABSOLUTE_SECONDS)
    sessions.clear_cookie(response, request, sessions.SIGNIN_COOKIE)
    return response


async def signout(console: Console, request: Request, session: Session) -> Response:
    async with console.connection() as conn:
        await sessions.end_session(conn, session.secret)
    response = with_headers(RedirectResponse(f"{PREFIX}/signin?why=signed_out", status_code=303))
    sessions.clear_cookie(response, request, sessions.COOKIE)
    return response
