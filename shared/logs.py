"""Structured JSON logs carrying trace and operation ids.

One JSON object per line on stderr, so journald / Docker / any shipper can
index `operation_id`, `trace_id`, `provider` and `event_id`. Callers pass
context with `extra={"ctx": {...}}`; values under keys that look like secrets
are dropped rather than trusted to callers' care.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

_SECRET_WORDS = ("secret", "password", "token", "signature", "authorization", "api_key", "cookie")


def _safe(ctx: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ctx.items() if not any(w in k.lower() for w in _SECRET_WORDS)}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        ctx = getattr(record, "ctx", None)
        if isinstance(ctx, dict):
            doc.update(_safe(ctx))
        if record.exc_info and record.exc_info[0] is not None:
            doc["exc_type"] = record.exc_info[0].__name__
        return json.dumps(doc, default=str)


def configure(level: str | None = None) -> None:
    """Install the JSON formatter on the root logger (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel((level or os.environ.get("JW_LOG_LEVEL", "INFO")).upper())
    for noisy in ("apscheduler", "httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
