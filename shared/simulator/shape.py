"""How the simulated provider's API looks on the wire: paths, field, state and header names.

Real providers describe the same job in their own words: `id` or `job_id`,
`status: "COMPLETED"` or `state: "succeeded"`, an idempotency key in a header
or in the body. The simulator computes every body in its canonical shape
(`payloads`) and an `ApiShape` translates at the edge, outbound and inbound,
so tests can describe the same scripted jobs through differently-shaped
provider TOML and exercise the generic description path, not only the preset.

A shape file (TOML, `jobwarden simulator --shape FILE`)::

    jobs_path = "/api/v2/exports"          # collection; a job is {jobs_path}/{id}
    cancel_method = "DELETE"               # POST {job}/cancel (default) or DELETE {job}
    idempotency_header = "X-Acme-Idempotency-Key"   # or:
    idempotency_field = "request_token"    # a body field (dotted path); "" = none
    request_id_header = "Acme-Request-Id"
    lookup_param = "reference"             # GET {jobs_path}?reference=...
    csv_delimiter = ";"
    result_format = "csv"                  # json, csv or binary, unless a job's params say
    [fields]                               # canonical dotted path -> the provider's
    job_id = "id"
    "progress.completed" = "stats.rows_done"
    [states]                               # canonical state -> the provider's word
    succeeded = "COMPLETED"
    [csv_columns]                          # canonical column -> the provider's header
    status = "outcome"
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from shared.simulator.scripts import ResultShape
from shared.simulator.state import JobState

CANONICAL_JOBS_PATH = "/v1/jobs"
CSV_COLUMNS = ("index", "output", "status", "message")
CANCEL_METHODS = frozenset({"POST", "DELETE"})
# A webhook's `type` is "job.<state>" in the canonical shape.
EVENT_TYPE_PREFIX = "job."

_KEYS = frozenset(
    {
        "jobs_path",
        "cancel_method",
        "idempotency_header",
        "idempotency_field",
        "request_id_header",
        "lookup_param",
        "csv_delimiter",
        "result_format",
        "fields",
        "states",
        "csv_columns",
    }
)


class ShapeError(ValueError):
    """A shape that cannot describe a coherent API (refused at start-up)."""


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token
_PATH = re.compile(r"/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]")
_TABLES = frozenset({"fields", "states", "csv_columns"})


def _check_type(key: str, value: Any) -> None:
    """Each key's TOML type, so a wrong one is a clear error, never a crash later."""
    if key in _TABLES:
        if not isinstance(value, dict):
            raise ShapeError(f"[{key}] must be a table")
        for name, word in value.items():
            if not isinstance(word, str) or not word:
                raise ShapeError(f"[{key}] {name}: expected a non-empty string")
    elif not isinstance(value, str):
        raise ShapeError(f"{key}: expected a string, got {type(value).__name__}")


def _nested(paths: list[tuple[str, ...]]) -> list[str]:
    """The paths one of which is a proper prefix of another (the moves would collide)."""
    found = set()
    for a in paths:
        for b in paths:
            if a != b and b[: len(a)] == a:
                found.update({".".join(a), ".".join(b)})
    return sorted(found)


def _split(path: str) -> tuple[str, ...]:
    parts = tuple(path.split("."))
    if not path or any(not part for part in parts):
        raise ShapeError(f"field path {path!r} must be dotted names, e.g. 'stats.rows_done'")
    return parts


def _pop(body: dict[str, Any], parts: tuple[str, ...]) -> tuple[bool, Any]:
    """Take the value at `parts` out, and any object that leaves empty."""
    trail: list[dict[str, Any]] = []
    node: Any = body
    for part in parts[:-1]:
        trail.append(node)
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or parts[-1] not in node:
        return False, None
    value = node.pop(parts[-1])
    for parent, part in zip(reversed(trail), reversed(parts[:-1]), strict=True):
        if parent[part]:
            break
        del parent[part]
    return True, value


def _get(body: Any, parts: tuple[str, ...]) -> tuple[bool, Any]:
    node = body
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _put(body: dict[str, Any], parts: tuple[str, ...], value: Any) -> None:
    node = body
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


def _move(body: dict[str, Any], moves: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]) -> None:
    """Move every mapped value at once, so a -> b and b -> a swap rather than collide."""
    taken = [(dst, *_pop(body, src)) for src, dst in moves]
    for dst, found, value in taken:
        if found:
            _put(body, dst, value)


@dataclass(frozen=True)
class ApiShape:
    """The default is the canonical API the `simulator` preset describes."""

    jobs_path: str = CANONICAL_JOBS_PATH
    cancel_method: str = "POST"
    idempotency_header: str | None = "Idempotency-Key"
    idempotency_field: str | None = None
    request_id_header: str = "X-Request-Id"
    lookup_param: str = "client_reference"
    csv_delimiter: str = ","
    # The result format of a job whose params name none (an API serves one kind).
    result_format: str = "json"
    fields: Mapping[str, str] = field(default_factory=dict)
    states: Mapping[str, str] = field(default_factory=dict)
    csv_columns: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.jobs_path.startswith("/") or self.jobs_path.endswith("/"):
            raise ShapeError(f"jobs_path {self.jobs_path!r} must start, not end, with '/'")
        if self.cancel_method not in CANCEL_METHODS:
            raise ShapeError(f"cancel_method must be one of {sorted(CANCEL_METHODS)}")
        if self.idempotency_header and self.idempotency_field:
            raise ShapeError("idempotency travels in a header or a body field, not both")
        if self.result_format not in {shape.value for shape in ResultShape}:
            known = ", ".join(shape.value for shape in ResultShape)
            raise ShapeError(f"result_format must be one of: {known}")
        if len(self.csv_delimiter) != 1:
            raise ShapeError("csv_delimiter must be one character")
        self._check_names()
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))
        object.__setattr__(self, "states", MappingProxyType(dict(self.states)))
        object.__setattr__(self, "csv_columns", MappingProxyType(dict(self.csv_columns)))

    def _check_names(self) -> None:
        sources = [_split(src) for src in self.fields]
        targets = [_split(dst) for dst in self.fields.values()]
        if len(set(targets)) != len(targets):
            raise ShapeError("two [fields] map onto the same provider field")
        for group, name in ((sources, "sources"), (targets, "targets")):
            nested = _nested(group)
            if nested:
                raise ShapeError(f"[fields] {name} {nested} nest inside one another")
        for header in (self.request_id_header, self.idempotency_header):
            if header is not None and not _TOKEN.fullmatch(header):
                raise ShapeError(f"header name {header!r} is not an HTTP token")
        if not _PATH.fullmatch(self.jobs_path):
            raise ShapeError(f"jobs_path {self.jobs_path!r}: letters, digits and -._~/ only")
        if self.idempotency_field is not None:
            _split(self.idempotency_field)
        if self.csv_delimiter in ('"', "\r", "\n"):
            raise ShapeError("csv_delimiter cannot be a quote or a line break")
        if len({self.column(c) for c in CSV_COLUMNS}) != len(CSV_COLUMNS):
            raise ShapeError("[csv_columns] gives two columns one name")
        unknown = set(self.states) - {s.value for s in JobState}
        if unknown:
            known = ", ".join(s.value for s in JobState)
            raise ShapeError(f"[states] has unknown states {sorted(unknown)}; known: {known}")
        words = [self.state(s.value) for s in JobState]
        if len(set(words)) != len(words) or "" in words:
            raise ShapeError("[states]: each state needs a word of its own (non-empty)")
        bad_columns = set(self.csv_columns) - set(CSV_COLUMNS)
        if bad_columns:
            raise ShapeError(f"[csv_columns] knows only {', '.join(CSV_COLUMNS)}")

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any]) -> ApiShape:
        """A shape from a parsed TOML table; unknown keys are refused, like typos."""
        unknown = set(table) - _KEYS
        if unknown:
            known = sorted({*_KEYS, "webhooks"})
            raise ShapeError(f"unknown shape keys {sorted(unknown)}; known: {known}")
        for key, value in table.items():
            _check_type(key, value)
        values = dict(table)
        for key in ("idempotency_header", "idempotency_field"):
            if values.get(key) == "":
                values[key] = None
        if "idempotency_field" in values and "idempotency_header" not in values:
            values["idempotency_header"] = None
        try:
            return cls(**values)
        except TypeError as exc:
            raise ShapeError(f"shape: {exc}") from None

    @property
    def default_params(self) -> dict[str, Any]:
        """Job params a create that names none gets from this API's kind."""
        if self.result_format == ResultShape.JSON.value:
            return {}
        return {"result_format": self.result_format}

    # -- outbound ----------------------------------------------------------

    @property
    def _moves(self) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
        return tuple((_split(src), _split(dst)) for src, dst in self.fields.items())

    def state(self, canonical: str) -> str:
        return self.states.get(canonical, canonical)

    def out(self, body: Any) -> Any:
        """A canonical body (status, create answer, webhook, error) in this shape."""
        if not isinstance(body, dict) or (not self.fields and not self.states):
            return body
        shaped = json.loads(json.dumps(body))  # a deep copy: callers keep theirs
        if isinstance(shaped.get("state"), str):
            shaped["state"] = self.state(shaped["state"])
        kind = shaped.get("type")
        if isinstance(kind, str) and kind.startswith(EVENT_TYPE_PREFIX):
            shaped["type"] = EVENT_TYPE_PREFIX + self.state(kind[len(EVENT_TYPE_PREFIX) :])
        _move(shaped, self._moves)
        return shaped

    def column(self, canonical: str) -> str:
        return self.csv_columns.get(canonical, canonical)

    def job_url(self, job_id: str) -> str:
        return f"{self.jobs_path}/{job_id}"

    # -- inbound -----------------------------------------------------------

    def into(self, body: Any) -> Any:
        """A create body sent in this shape, back in canonical names."""
        if not isinstance(body, dict) or not self.fields:
            return body
        canonical = json.loads(json.dumps(body))  # the request's cached body stays as sent
        _move(canonical, tuple((dst, src) for src, dst in self._moves))
        return canonical

    def idempotency_key(self, headers: Mapping[str, str], body: Any) -> str | None:
        """The key the client sent, wherever this shape carries it (None: none sent).

        A non-string key in the body is no key, as a provider that validates
        its body would have refused it; the simulator keeps the job running.
        """
        if self.idempotency_header:
            return headers.get(self.idempotency_header)
        if self.idempotency_field and isinstance(body, dict):
            found, value = _get(body, _split(self.idempotency_field))
            return value if found and isinstance(value, str) else None
        return None
