"""Query parameters and headers of the agent API, declared once.

Each parameter is a small object that both parses a request and describes
itself to the OpenAPI document (`openapi.py` calls `.spec()`), so the limits
the server enforces and the limits the document states are the same numbers.

Parsing is strict and ASCII-only on purpose: `str.isdigit()` and `float()`
accept superscripts and Arabic-Indic digits, which `int()` then refuses (a 500
before) or which a client could never have meant. Every refusal is a 400
naming the parameter, and never repeats what was sent: a hostile value in an
error message ends up in logs and in a model's context.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from receiver.api.models import NO_NUL
from receiver.api.problems import invalid
from receiver.api.text import unstorable

# PostgreSQL's bigint: a sequence number past it cannot be a history row, and
# asyncpg refuses to encode it (a 500 before).
INT64_MAX = 2**63 - 1
_ASCII_INT = re.compile(r"[0-9]{1,19}")
# What a client's number formatting produces (30, 2.5, 5e-324), in ASCII.
_ASCII_NUMBER = re.compile(r"[0-9]{1,10}(\.[0-9]{1,17})?([eE][+-]?[0-9]{1,3})?")
# A page token is base64 of an operation id (30 characters) or a failed
# item's key (providers' custom ids are at most a few hundred): 4096 leaves
# room for 3 KiB keys and bounds what a forged token makes us decode.
MAX_PAGE_TOKEN = 4096


def _bad(name: str, expected: str) -> Exception:
    return invalid(f"{name} must be {expected}", status=400)


@dataclass(frozen=True)
class IntParam:
    """A positive integer with an inclusive range."""

    name: str
    low: int
    high: int
    default: int
    description: str
    location: str = "query"

    def parse_text(self, raw: str | None) -> int:
        if raw is None or raw == "":
            return self.default
        if not _ASCII_INT.fullmatch(raw) or not self.low <= int(raw) <= self.high:
            raise _bad(self.name, f"an integer from {self.low} to {self.high} (ASCII digits)")
        return int(raw)

    def parse(self, params: Mapping[str, str]) -> int:
        return self.parse_text(params.get(self.name))

    def spec(self) -> dict[str, Any]:
        schema = {
            "type": "integer",
            "minimum": self.low,
            "maximum": self.high,
            "default": self.default,
        }
        return _spec(self.name, self.location, schema, self.description)


@dataclass(frozen=True)
class NumberParam:
    """A number of seconds in (low, high], in ASCII decimal or exponent notation."""

    name: str
    low: float
    high: float
    default: float
    description: str

    def parse(self, params: Mapping[str, str]) -> float:
        raw = params.get(self.name)
        if raw is None or raw == "":
            return self.default
        if not _ASCII_NUMBER.fullmatch(raw) or not self.low < float(raw) <= self.high:
            raise _bad(self.name, f"a number in ({self.low:g}, {self.high:g}], like 30 or 2.5")
        return float(raw)

    def spec(self) -> dict[str, Any]:
        schema = {
            "type": "number",
            "exclusiveMinimum": self.low,
            "maximum": self.high,
            "default": self.default,
        }
        return _spec(self.name, "query", schema, self.description)


@dataclass(frozen=True)
class BoolParam:
    name: str
    description: str

    def parse(self, params: Mapping[str, str]) -> bool | None:
        raw = params.get(self.name)
        if raw is None or raw == "":
            return None
        lowered = raw.lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise _bad(self.name, "true or false")

    def spec(self) -> dict[str, Any]:
        return _spec(self.name, "query", {"type": "boolean"}, self.description)


@dataclass(frozen=True)
class TextParam:
    """Free text compared with a column: bounded, and storable by PostgreSQL."""

    name: str
    max_len: int
    description: str

    def parse(self, params: Mapping[str, str]) -> str | None:
        raw = params.get(self.name)
        if not raw:
            return None
        if len(raw) > self.max_len or unstorable(raw):
            raise _bad(self.name, f"text of 1 to {self.max_len} characters without U+0000")
        return raw

    def spec(self) -> dict[str, Any]:
        schema = {"type": "string", "maxLength": self.max_len, "pattern": NO_NUL}
        return _spec(self.name, "query", schema, self.description)


@dataclass(frozen=True)
class PageTokenParam:
    """The opaque cursor this server hands out as `next_page_token`."""

    name: str = "page_token"

    def parse(self, params: Mapping[str, str]) -> str | None:
        raw = params.get(self.name)
        if not raw:
            return None
        return decode_page_token(raw, self.name)

    def spec(self) -> dict[str, Any]:
        schema = {"type": "string", "maxLength": MAX_PAGE_TOKEN}
        description = "The `next_page_token` of the previous page; opaque."
        return _spec(self.name, "query", schema, description)


def _spec(name: str, location: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": location, "schema": schema, "description": description}


def encode_page_token(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")


def decode_page_token(raw: str, name: str = "page_token") -> str:
    """Page tokens are opaque to callers; a mangled or forged one is a 400, not a crash."""
    refusal = _bad(name, "a next_page_token this server issued")
    if len(raw) > MAX_PAGE_TOKEN:
        raise refusal
    try:
        decoded = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise refusal from None
    if not decoded or unstorable(decoded):
        raise refusal
    return decoded


def shown(value: str, limit: int = 40) -> str:
    """A caller's value safe to quote in an error: ASCII, escaped, short."""
    escaped = value.encode("ascii", "backslashreplace").decode("ascii")
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)
    return escaped if len(escaped) <= limit else escaped[:limit] + "..."


# ------------------------------------------------------------------ the API's parameters

PAGE_SIZE_DESCRIPTION = "How many to return at most."
LIST_PAGE_SIZE = IntParam("page_size", 1, 200, 50, PAGE_SIZE_DESCRIPTION)
ITEMS_PAGE_SIZE = IntParam("page_size", 1, 500, 50, PAGE_SIZE_DESCRIPTION)
PAGE_TOKEN = PageTokenParam()
PROVIDER = TextParam("provider", 63, "Only operations on this provider.")
DONE = BoolParam("done", "Only operations that are (true) or are not (false) done.")
FINAL = BoolParam("final", "Only operations whose outcome can (false) or cannot (true) change.")
MINE = BoolParam("mine", "Operator tokens: only the operations this token submitted.")
# A long-poll holds a connection and a task: five minutes bounds both, and is
# longer than any sensible tool call (the seed: two to ten minutes per call).
MAX_WAIT_SECONDS = 300.0
DEFAULT_WAIT_SECONDS = 30.0
# Long-polls one token may hold at once. Each holds a task and one of
# uvicorn's MAX_CONCURRENCY (1024) request slots for up to max_wait: an agent
# waits on one operation per tool call in flight, and 32 leaves room for one
# fanning out a batch while keeping any one token to ~3% of the server's slots
# (before the cap, one token's abandoned waits filled all of them).
MAX_WAITS_PER_CALLER = 32
# When a refused long-poll may try again: by then one of the caller's other
# waits has usually answered.
WAIT_RETRY_AFTER_SECONDS = 5
MAX_WAIT = NumberParam(
    "max_wait",
    0.0,
    MAX_WAIT_SECONDS,
    DEFAULT_WAIT_SECONDS,
    "Seconds to wait at most (a long-poll holds a connection: five minutes bounds it).",
)
AFTER = IntParam(
    "after",
    0,
    INT64_MAX,
    0,
    "Resume after this transition `seq` (the SSE `id`); Last-Event-ID wins when both are sent.",
)
LAST_EVENT_ID = IntParam(
    "Last-Event-ID",
    0,
    INT64_MAX,
    0,
    "Sent by an EventSource on reconnect: resume after this transition `seq`.",
    location="header",
)
