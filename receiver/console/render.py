"""Pages: Jinja2 templates (autoescaped), the console's security headers, static files."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

_HERE = Path(__file__).parent

# No inline script or style anywhere: what runs and styles comes from /console/static.
# form-action 'self' keeps a form from posting elsewhere even if markup were injected.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}

STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
STATIC: dict[str, tuple[bytes, str]] = {
    path.name: (path.read_bytes(), STATIC_TYPES[path.suffix])
    for path in sorted((_HERE / "static").iterdir())
    if path.suffix in STATIC_TYPES
}


def when(at: datetime | None) -> str:
    """UTC to the second: unambiguous when pasted into a ticket."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if at else "-"


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every value is escaped: ids, reasons, payloads come from outside
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["age"] = age
    return env


ENV = _environment()


def page(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
) -> HTMLResponse:
    body = ENV.get_template(template).render(
        {"path": request.url.path, "session": None, "notice": None, "error": None, **context}
    )
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)


def with_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
