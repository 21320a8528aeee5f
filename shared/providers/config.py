"""Load provider descriptions from TOML, checking every key at start-up.

A config file holds ``[providers.<name>]`` tables (other top-level tables
belong to other parts of the config and are ignored here). A provider may
start from a built-in preset (``preset = "simulator"``): the preset's TOML is
deep-merged with the provider's table, key by key, tables recursively, lists
and scalars replaced whole.

Every problem raises `ConfigError` with ``<file>: providers.<name>.<key>:
<problem>`` — unknown keys included (with a "did you mean" hint), because a
typo in `idempotency_header` would otherwise silently create duplicate jobs.
Messages name environment variables and files, never secret values.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from shared import signatures
from shared.ledger.states import RemoteState
from shared.providers import sigv4
from shared.providers.adapter import PluginError, ProviderAdapter, resolve_plugin
from shared.providers.description import (
    HTTP_METHODS,
    MAX_DEADLINE_SECONDS,
    AuthHeader,
    AuthSpec,
    BodyEncoding,
    BodyField,
    CancelSpec,
    Checksum,
    ChecksumAlgorithm,
    ChecksumEncoding,
    ChecksumOptions,
    CreateSpec,
    CsvColumn,
    CsvOptions,
    ErrorsSpec,
    FormNesting,
    GetAnswer,
    GetChallenge,
    Idempotency,
    LastPage,
    Limits,
    LookupKind,
    LookupSpec,
    ProviderDescription,
    ResultExpect,
    ResultFailed,
    ResultFormat,
    ResultPages,
    ResultSource,
    ResultSpec,
    SigV4,
    StatusSpec,
    TokenFormat,
    WebhookChallenge,
    WebhookScheme,
    WebhookSpec,
)
from shared.providers.errors import ConfigError
from shared.providers.paths import (
    PathSource,
    PathSyntaxError,
    ValuePath,
    parse_path,
    writable_keys,
)
from shared.providers.requests import host_entry
from shared.providers.templates import Template, TemplateError, parse_template, query_param_of
from shared.providers.timing import MAX_HONOURED_DELAY
from shared.providers.values import raw_text
from shared.redaction import is_sensitive_header
from shared.secret import FollowedSecret, Secret, SecretError
from shared.signatures.challenges import ChallengeAnswer

E = TypeVar("E", bound=StrEnum)

_MISSING: Any = object()
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
# Names that label something else: "unknown" is the receiver's label (metrics,
# the refusal tally) for deliveries to no configured provider, so a provider
# by that name would have its refusals merged with theirs.
RESERVED_NAMES = frozenset({"unknown"})
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_STATUS_CODE = re.compile(r"[0-9]{3}")
# application/json, a structured +json type (application/vnd.api+json), or the AWS
# JSON protocols' own names for JSON (application/x-amz-json-1.0 and -1.1: Textract,
# DynamoDB, Transcribe refuse a request under any other), with parameters
_JSON_MEDIA_TYPE = re.compile(
    r"^\s*application/(([a-z0-9.\-]+\+)?json|x-amz-json-1\.[01])\s*(;.*)?$", re.IGNORECASE
)

BODY = frozenset({PathSource.BODY})
RESPONSE = frozenset({PathSource.BODY, PathSource.HEADER})
WEBHOOK = frozenset({PathSource.BODY, PathSource.HEADER, PathSource.QUERY})

# Headers that commonly carry a provider's request id, checked in this order.
DEFAULT_REQUEST_ID_HEADERS = (
    "X-Request-Id",
    "Request-Id",
    "x-ms-request-id",
    "apim-request-id",
    "x-goog-request-id",
    "x-amzn-requestid",
)
# Names a reader of the design notes may reach for, and where they live here.
_MOVED = {
    "jsonl_id_field": "result.item_id",
    "jsonl_error_path": "result.item_error",
    "items": "result.items (the item list of the result document)",
    "url": "status.result_url / status.errors_url (where the URL is in the status)",
    "page_token": "page_token_param",
    "progress": "progress_completed / progress_total / progress_percent / progress_fraction",
    "counts": "counts_total / counts_succeeded / counts_failed",
}
# Values our create templates may use (set_body / set_headers).
CREATE_VALUES = frozenset(
    {
        "client_reference",
        "operation_id",
        "idempotency_token",
        "webhook_url",
        "webhook_secret",
        "result_deadline_seconds",
        "trace_id",
    }
)
# Upper bounds of numbers in a description: a delay (backoff, timeout, backstop)
# of more than a day, as timing.MAX_HONOURED_DELAY; a deadline as an agent's
# (MAX_DEADLINE_SECONDS); any other number finite and no bigger than this.
MAX_DELAY_SECONDS = MAX_HONOURED_DELAY
MAX_BACKOFF_FACTOR = 10.0
MAX_NUMBER = 1e15
# Values a cancel or status body may use: they know their job and nothing else.
CANCEL_VALUES = frozenset({"job_id"})
# What a lookup's body may name: what its path may.
LOOKUP_VALUES = frozenset({"client_reference", "idempotency_token"})
# A result bigger than this is refused unless the description says otherwise:
# results are stored durably and small ones inline, so unbounded is not an option.
DEFAULT_MAX_RESULT_BYTES = 50 * 1024 * 1024
# The largest result.expect.max_bytes (1 EiB, no limit a result reaches): max_bytes
# + 1, and its base64 size, is what a decompression is asked for at most (zlib's
# max_length, a C size), and TOML's largest integer, written for "no limit",
# raised OverflowError out of the collection at the first gzip file.
MAX_RESULT_BYTES = 2**60
# A query parameter name, not a credential.
DEFAULT_PAGE_TOKEN_PARAM = "page_token"  # noqa: S105
DEFAULT_LOOKUP_PAGES = 10  # scanning deeper than this rarely finds a job created minutes ago
# A paged result with more pages than this is not collected (the description
# may raise it): every page is a call on record.
DEFAULT_RESULT_PAGES = 1000
MAX_RESULT_PAGES = 100_000
# The largest page an offset-paged result may ask for (`result.pages.page_size`).
MAX_RESULT_PAGE_SIZE = 1_000_000


# --------------------------------------------------------------------- public API


def load_providers(
    path: Path, env: Mapping[str, str] = os.environ, *, credentials: bool = True
) -> dict[str, ProviderDescription]:
    """All `[providers.<name>]` of a TOML config file, validated.

    `credentials=False`: for a process that never calls a provider (the
    receiver), an `[auth]` secret that is not set leaves the provider without
    auth instead of refusing the config, so that process need not hold any
    provider's API key (its description is otherwise the same).
    """
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{source}: TOML nested too deeply to be read") from None
    return parse_providers(data, source, env, credentials=credentials)


def parse_providers(
    data: Mapping[str, Any],
    source: str,
    env: Mapping[str, str] = os.environ,
    *,
    credentials: bool = True,
) -> dict[str, ProviderDescription]:
    """Validate the `providers` table of an already-parsed config document."""
    providers = data.get("providers", {})
    if not isinstance(providers, Mapping):
        raise ConfigError(f"{source}: providers: must be a table")
    result: dict[str, ProviderDescription] = {}
    for name, table in providers.items():
        if not _NAME.match(name):
            raise ConfigError(
                f"{source}: providers.{name}: provider names use lower-case letters, "
                "digits, '-' and '_'"
            )
        if name in RESERVED_NAMES:
            raise ConfigError(
                f"{source}: providers.{name}: the name {name!r} is reserved (the receiver "
                "labels deliveries to no configured provider with it); choose another"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: providers.{name}: must be a table")
        result[name] = _load_one(name, table, source, env, credentials)
    return result


def load_preset(name: str, env: Mapping[str, str] = os.environ) -> ProviderDescription:
    """A built-in preset as is (its name is the provider name)."""
    source, data = _read_preset(name, None)
    ctx = _Ctx(source=source, root="", env=env, override=None, preset=None)
    return _provider(name, data, ctx)


def advisories(desc: ProviderDescription) -> list[str]:
    """Choices that load fine but check less than they seem to (`providers check` warns).

    Without `expect.item_count` a result is only held to the status counts'
    floor (no fewer items than announced); with it, to the exact numbers.
    """
    status, result = desc.status, desc.result
    expect = result.expect
    counted = status.counts_total or status.counts_succeeded or status.counts_failed
    has_items = result.format in (ResultFormat.CSV, ResultFormat.JSONL) or (
        result.format is ResultFormat.JSON and result.items is not None
    )
    found = []
    if (
        counted
        and has_items
        and result.source is not ResultSource.NONE
        and expect.item_count is None
        and not expect.item_count_from_status
    ):
        found.append(
            "status.counts_* are read but result.expect.item_count is not set: the result "
            "is only checked to hold no fewer items than the counts announce (set item_count = "
            '"from_status_counts" to hold it to the exact numbers)'
        )
    errors = [p.text for p in (status.error, status.error_code, status.error_message) if p]
    if errors and not _can_read_failed(desc):
        found.append(
            f"status reads an error ({', '.join(errors)}) but nothing read can say the job "
            "failed (no state maps to failed, no done, no counts decide the outcome): a "
            "job read with an error is a success; set status.error_means_failed = true if "
            "the error means the job failed (or [result.failed], if its result's answer says)"
        )
    get = desc.webhooks.get_challenge if desc.webhooks is not None else None
    if get is not None and get.verify_param is not None and get.verify_token is None:
        found.append(
            "webhooks.get_challenge asks for a verify token that is not set (optional = "
            "true): every GET check is refused (bad_verify_token), so the sender cannot "
            "subscribe; set verify_token_env or verify_token_file's secret"
        )
    lookup = desc.lookup
    scanned = lookup.supported and lookup.kind is LookupKind.LIST and not lookup.filtered
    if scanned and not lookup.paged:
        found.append(
            "lookup describes no paging (next_page_token, next_page_url, page_param or "
            "offset_param) "
            "and its request does not name our reference: only the first page is read, "
            "so a job beyond it is missed and its absence is weak (a lost create may be "
            "sent again)"
        )
    return found


def _can_read_failed(desc: ProviderDescription) -> bool:
    """Can anything the description reads tell a failed job from a finished one?
    (A plugin may read it its own way.)"""
    status = desc.status
    states = {*status.state_map.values(), *status.state_from_http_status.values()}
    return (
        desc.plugin_class is not None
        or RemoteState.FAILED in states
        or status.done is not None
        or status.outcome_from_counts
        or status.error_means_failed
        or desc.result.failed is not None
    )


def preset_names() -> list[str]:
    folder = resources.files("shared.providers").joinpath("presets")
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


# --------------------------------------------------------------------- merging


def _load_one(
    name: str, table: Mapping[str, Any], source: str, env: Mapping[str, str], credentials: bool
) -> ProviderDescription:
    root = f"providers.{name}"
    preset = table.get("preset")
    if preset is None:
        ctx = _Ctx(source, root, env, None, None, credentials)
        return _provider(name, table, ctx)
    if not isinstance(preset, str):
        raise ConfigError(f"{source}: {root}.preset: must be a string")
    _, base = _read_preset(preset, f"{source}: {root}.preset")
    merged = deep_merge(_credential_source_replaced(base, table), table)
    ctx = _Ctx(source, root, env, table, preset, credentials)
    return _provider(name, merged, ctx)


def _read_preset(name: str, where: str | None) -> tuple[str, dict[str, Any]]:
    available = preset_names()
    if name not in available:
        prefix = where or f"preset {name}"
        raise ConfigError(f"{prefix}: unknown preset '{name}' (available: {', '.join(available)})")
    resource = resources.files("shared.providers").joinpath("presets", f"{name}.toml")
    source = f"presets/{name}.toml"
    try:
        data = tomllib.loads(resource.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    if "preset" in data:
        raise ConfigError(f"{source}: preset: presets cannot build on other presets")
    return source, data


# [auth] takes its credential from one source: a variable or a file.
_AUTH_SOURCES = ("secret_env", "secret_file")


def _credential_source_replaced(
    base: Mapping[str, Any], override: Mapping[str, Any]
) -> Mapping[str, Any]:
    """The preset without its [auth] credential source when the config names one.

    Presets name their credential by variable (`secret_env`). A config that
    keeps it in a file instead (`secret_file`, as the google_lro and
    azure_async docs advise for a short-lived token a timer refreshes) had
    both after the key-by-key merge, refused as "set secret_env or
    secret_file, not both", and no key can unset the preset's. The source the
    config names replaces the preset's; the rest of [auth] still merges.
    """
    auth, mine = base.get("auth"), override.get("auth")
    if not isinstance(auth, Mapping) or not isinstance(mine, Mapping):
        return base
    if not any(key in mine for key in _AUTH_SOURCES):
        return base
    kept = {key: value for key, value in auth.items() if key not in _AUTH_SOURCES}
    return {**base, "auth": kept}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` on top of `base`: tables merged recursively, everything else replaced."""
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


# --------------------------------------------------------------------- table reader


@dataclass(frozen=True)
class _Ctx:
    source: str
    root: str
    env: Mapping[str, str]
    override: Mapping[str, Any] | None
    preset: str | None
    # False: this process never calls providers (see load_providers)
    credentials: bool = True

    def error(self, rel: tuple[str, ...], problem: str, present: bool) -> ConfigError:
        key = ".".join(((self.root,) if self.root else ()) + rel)
        suffix = ""
        if present and self.preset and self.override is not None and not _has(self.override, rel):
            suffix = f" (value from preset '{self.preset}')"
        return ConfigError(f"{self.source}: {key}: {problem}{suffix}")


def _has(data: Mapping[str, Any], rel: tuple[str, ...]) -> bool:
    node: Any = data
    for key in rel:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


class _Table:
    """Typed, tracked access to one TOML table; `finish()` rejects unknown keys."""

    def __init__(self, ctx: _Ctx, rel: tuple[str, ...], data: Mapping[str, Any]) -> None:
        self.ctx = ctx
        self.rel = rel
        self.data = data
        self.known: set[str] = set()

    def error(self, key: str | None, problem: str) -> ConfigError:
        rel = self.rel + ((key,) if key else ())
        present = key is not None and key in self.data
        if key is not None and not present and problem.startswith("required"):
            # "state: required" while the table holds "stat": say so.
            close = difflib.get_close_matches(key, [k for k in self.data if k != key], 1, 0.75)
            if close:
                problem += f" (is '{close[0]}' a typo?)"
        return self.ctx.error(rel, problem, present)

    def has(self, key: str) -> bool:
        self.known.add(key)
        return key in self.data

    def from_preset(self, key: str) -> bool:
        """The key's value was inherited from a preset, not written by the user."""
        ctx = self.ctx
        return (
            key in self.data
            and ctx.preset is not None
            and ctx.override is not None
            and not _has(ctx.override, (*self.rel, key))
        )

    def raw(self, key: str) -> Any:
        self.known.add(key)
        return self.data.get(key, _MISSING)

    # scalars ---------------------------------------------------------------

    def opt_str(self, key: str, default: str | None = None) -> str | None:
        value = self.raw(key)
        if value is _MISSING:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, "must be a non-empty string")
        return value

    def req_str(self, key: str) -> str:
        value = self.opt_str(key)
        if value is None:
            raise self.error(key, "required")
        return value

    def str_or(self, key: str, default: str) -> str:
        value = self.opt_str(key)
        return default if value is None else value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be true or false")
        return value

    def opt_int(self, key: str, minimum: int = 1, maximum: int | None = None) -> int | None:
        value = self.raw(key)
        if value is _MISSING:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "must be an integer")
        if value < minimum:
            raise self.error(key, f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum}")
        return value

    def int_or(self, key: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
        value = self.opt_int(key, minimum, maximum)
        return default if value is None else value

    def number(
        self, key: str, default: float, minimum: float = 0.0, maximum: float = MAX_NUMBER
    ) -> float:
        value = self.raw(key)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, "must be a number")
        if not math.isfinite(value):  # TOML spells inf and nan
            raise self.error(key, "must be a finite number")
        if value <= minimum:
            raise self.error(key, f"must be greater than {minimum:g}")
        if value > maximum:
            raise self.error(key, f"must be at most {maximum:.15g}")
        return float(value)

    def opt_number(self, key: str, maximum: float = MAX_NUMBER) -> float | None:
        if not self.has(key):
            return None
        return self.number(key, 0.0, maximum=maximum)

    def choice(self, key: str, enum: type[E], default: E | None) -> E:
        value = self.raw(key)
        if value is _MISSING:
            if default is None:
                raise self.error(key, "required (one of " + _choices(enum) + ")")
            return default
        try:
            return enum(value)
        except ValueError:
            raise self.error(key, f"'{value}' is not one of {_choices(enum)}") from None

    def method(self, key: str, default: str) -> str:
        value = self.str_or(key, default).upper()
        if value not in HTTP_METHODS:
            raise self.error(key, f"'{value}' is not one of {', '.join(HTTP_METHODS)}")
        return value

    # structured ------------------------------------------------------------

    def path(
        self, key: str, sources: frozenset[PathSource], default: str | None = None
    ) -> ValuePath | None:
        text = self.opt_str_allow_empty(key, default)
        return None if text is None else self.parse_path_value(key, text, sources)

    def req_path(self, key: str, sources: frozenset[PathSource]) -> ValuePath:
        found = self.path(key, sources)
        if found is None:
            raise self.error(key, "required")
        return found

    def paths(
        self, key: str, sources: frozenset[PathSource], *, each: bool = False
    ) -> tuple[ValuePath, ...]:
        """`each`: a path may read every element of a list (``[*]``)."""
        value = self.raw(key)
        if value is _MISSING:
            return ()
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise self.error(key, "must be a path or a list of paths")
        return tuple(self.parse_path_value(key, text, sources, each=each) for text in texts)

    def opt_str_allow_empty(self, key: str, default: str | None) -> str | None:
        value = self.raw(key)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise self.error(key, "must be a string")
        return value

    def parse_path_value(
        self, key: str, text: str, sources: frozenset[PathSource], *, each: bool = False
    ) -> ValuePath:
        try:
            parsed = parse_path(text, each=each)
        except PathSyntaxError as exc:
            raise self.error(key, f"bad path {exc}") from None
        if parsed.source not in sources:
            allowed = ", ".join(sorted(s.value for s in sources))
            raise self.error(key, f"'{text}' reads the {parsed.source.value}; allowed: {allowed}")
        return parsed

    def template(
        self, key: str, allowed: Iterable[str], url_path: bool = True, required: bool = False
    ) -> Template | None:
        text = self.opt_str(key)
        if text is None:
            if required:
                raise self.error(key, "required")
            return None
        if url_path and not text.startswith("/"):
            raise self.error(key, f"'{text}' must start with '/'")
        try:
            return parse_template(text, allowed)
        except TemplateError as exc:
            raise self.error(key, str(exc)) from None

    def strings(self, key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.raw(key)
        if value is _MISSING:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "must be a list of non-empty strings")
        return tuple(value)

    def scalars(self, key: str, default: Iterable[str] = ()) -> frozenset[str]:
        """A list of strings/numbers compared as text (error codes, success markers)."""
        value = self.raw(key)
        if value is _MISSING:
            return frozenset(default)
        if not isinstance(value, list) or not all(isinstance(v, str | int | bool) for v in value):
            raise self.error(key, "must be a list of strings or integers")
        return frozenset(raw_text(v) or "" for v in value)

    def statuses(self, key: str, default: Iterable[int]) -> frozenset[int]:
        value = self.raw(key)
        if value is _MISSING:
            return frozenset(default)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599 for v in value
        ):
            raise self.error(key, "must be a list of HTTP status codes (100-599)")
        return frozenset(value)

    def success_statuses(self, key: str, default: Iterable[int]) -> frozenset[int]:
        """Codes that accept a request: only a 2xx is read as an answer (a 303's
        Location is not followed), so a 3xx here would loop until a deadline."""
        codes = self.statuses(key, default)
        if any(not 200 <= code < 300 for code in codes):
            raise self.error(key, "only 2xx codes accept a request (a redirect is not followed)")
        return codes

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.raw(key)
        if value is _MISSING:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a table")
        return dict(value)

    def sub(self, key: str, required: bool = False) -> _Table | None:
        value = self.raw(key)
        if value is _MISSING:
            if required:
                raise self.error(key, "required")
            return None
        if not isinstance(value, Mapping):
            raise self.error(key, "must be a table")
        return _Table(self.ctx, (*self.rel, key), value)

    def req_sub(self, key: str) -> _Table:
        table = self.sub(key, required=True)
        assert table is not None
        return table

    def finish(self) -> None:
        for key in sorted(self.data):
            if key not in self.known:
                hint = difflib.get_close_matches(key, sorted(self.known), n=1, cutoff=0.6)
                if key in _MOVED:
                    advice = f" (this format calls it {_MOVED[key]})"
                elif hint:
                    advice = f" (did you mean '{hint[0]}'?)"
                else:
                    advice = ""
                raise self.error(key, f"unknown key{advice}")


def _choices(enum: type[StrEnum]) -> str:
    return ", ".join(member.value for member in enum)


# --------------------------------------------------------------------- sections


def _provider(name: str, data: Mapping[str, Any], ctx: _Ctx) -> ProviderDescription:
    top = _Table(ctx, (), data)
    top.raw("preset")
    description = top.str_or("description", "")
    base_url = _base_url(top)
    plugin_spec = top.opt_str("plugin")
    plugin_options = top.mapping("plugin_options")
    plugin_class = _plugin(top, plugin_spec, plugin_options)
    auth = _auth(top.sub("auth"))
    headers = _static_headers(top)
    request_ids = top.strings("request_id_headers", DEFAULT_REQUEST_ID_HEADERS)
    limits = _limits(top.sub("limits"))
    if "status" not in top.data:
        # "required" alone sent the user of a callback-only API (Deepgram's
        # pre-recorded `callback`) looking for a key to fill, not a design to know
        raise top.error(
            "status",
            "required: an operation moves only on our own read of the job's status "
            "(a webhook is a hint, never the verdict), so describe the call that reads "
            "one job: a path naming {job_id}, or use_status_url; an API that only calls "
            "back, with no such read, cannot be tracked",
        )
    status_table = top.req_sub("status")
    status = _status(status_table)
    create = _create(top.req_sub("create"), status, plugin_class is not None)
    _check_status_url(status_table, status, create)
    cancel = _cancel(top.sub("cancel"), create)
    result = _result(top.req_sub("result"), status)
    own_lookup = plugin_class is not None and (
        plugin_class.build_lookup is not ProviderAdapter.build_lookup
    )
    lookup = _lookup(top.sub("lookup"), create, own_lookup)
    if create.already_exists_codes and not lookup.supported:
        raise top.error(
            "create.already_exists_codes",
            "needs a [lookup]: the job that exists is found by the id we chose (a get at "
            "a path naming {idempotency_token}, or a list matching it)",
        )
    _check_lookup_reads(top, status, lookup, plugin_class is not None)
    _check_plugin_hooks(top, plugin_spec, plugin_class, result, lookup)
    webhooks = _webhooks(top.sub("webhooks"), status)
    if result.source is ResultSource.WEBHOOK and webhooks is None:
        raise top.error(
            "result.source",
            "'webhook' needs [webhooks] (the deliveries the result comes in)",
        )
    if result.source is ResultSource.WEBHOOK and webhooks is not None:
        _check_result_signed(top, webhooks)
    top.finish()
    return ProviderDescription(
        name=name,
        source=ctx.source,
        base_url=base_url,
        create=create,
        status=status,
        cancel=cancel,
        result=result,
        lookup=lookup,
        limits=limits,
        description=description,
        preset=ctx.preset,
        auth=auth,
        headers=headers,
        request_id_headers=request_ids,
        webhooks=webhooks,
        plugin=plugin_spec,
        plugin_class=plugin_class,
        plugin_options=plugin_options,
    )


def _check_plugin_hooks(
    top: _Table,
    spec: str | None,
    plugin_class: type[ProviderAdapter] | None,
    result: ResultSpec,
    lookup: LookupSpec,
) -> None:
    """A plugin's hook written before the paging mode its description turns on.

    Those modes pass their hook one argument more (`page_url`, `page_token`);
    a hook without it raised TypeError at the first page, every time the
    operation was claimed, as an unexpected error retried for ever. Refused
    here, naming the parameter to add.
    """
    if plugin_class is None:
        return
    pages = result.pages
    needs: list[tuple[str, str, tuple[str, ...], int]] = []
    if pages is not None and pages.next_page_url is not None:
        needs.append(("result.pages.next_page_url", "build_result_page", ("page_url",), 3))
    if pages is not None and pages.offset_param is not None:
        needs.append(("result.pages.offset_param", "result_next_page", ("page_token",), 2))
    if pages is not None and pages.page_param is not None:
        needs.append(("result.pages.page_param", "result_next_page", ("page_token",), 2))
    if lookup.numbered:
        needs.append(("lookup", "parse_lookup", ("page_token",), 3))
    if lookup.supported:  # every lookup is built with our token and a page token
        needs.append(("lookup", "build_lookup", ("idempotency_token", "page_token"), 3))
    for key, hook, parameters, arguments in needs:
        written = getattr(plugin_class, hook)
        if written is getattr(ProviderAdapter, hook):
            continue
        try:
            inspect.signature(written).bind(None, *([None] * arguments))
        except (TypeError, ValueError):
            named = " and ".join(parameters)
            add = ", ".join(f"{name}: str | None = None" for name in parameters)
            plural = "s" if len(parameters) > 1 else ""
            raise top.error(
                "plugin",
                f"'{spec}' overrides {hook} without the {named} parameter{plural} that "
                f"{key} passes it (add `{add}`)",
            ) from None


def _base_url(top: _Table) -> str:
    url = top.req_str("base_url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise top.error("base_url", f"'{url}' is not an absolute http(s) URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise top.error("base_url", "must not carry a query, fragment or credentials")
    return url.rstrip("/")


def _plugin(
    top: _Table, spec: str | None, options: Mapping[str, Any]
) -> type[ProviderAdapter] | None:
    if spec is None:
        if options:
            raise top.error("plugin_options", "set without a plugin")
        return None
    try:
        cls = resolve_plugin(spec)
    except PluginError as exc:
        raise top.error("plugin", str(exc)) from None
    try:
        cls.check_options(options)
    except ValueError as exc:
        key, _, problem = str(exc).partition(": ")
        raise top.error(f"plugin_options.{key}", problem or str(exc)) from None
    return cls


_AWS_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# The standard variables of AWS's tools, when no credentials_file is named.
_AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _auth(table: _Table | None) -> AuthSpec | None:
    if table is None:
        return None
    scheme = table.str_or("scheme", "static")
    if scheme == "aws_sigv4":
        return _aws_auth(table)
    if scheme != "static":
        raise table.error("scheme", f"'{scheme}': static (a header) or aws_sigv4")
    header = table.str_or("header", "Authorization")
    if not _TOKEN.match(header):
        raise table.error("header", "must be an HTTP header name")
    template = _auth_value(table, "Bearer {secret}")
    optional = table.boolean("optional", False)
    extra_hosts = _host_entries(table, "extra_hosts")
    secret = _secret(table, "secret_env", "secret_file", optional or not table.ctx.credentials)
    also = _auth_also(table, header, optional)
    table.finish()
    if secret is None or also is None:
        return None
    _check_secret(table, secret, _header_safe, ("secret_env", "secret_file"))
    return AuthSpec(
        header=header, value=template, secret=secret, extra_hosts=extra_hosts, also=also
    )


def _auth_value(table: _Table, default: str) -> Template:
    value = table.opt_str("value")
    if value is not None and "{secret}" not in value:
        # Never echo the value: a missing placeholder usually means the
        # credential itself was pasted here.
        raise table.error("value", "must contain {secret} (never put the credential in the config)")
    return parse_template(value or default, {"secret"})


def _auth_also(table: _Table, main: str, optional: bool) -> tuple[AuthHeader, ...] | None:
    """`[auth.also.<Header>]`: further credential headers sent with the main one
    (Adobe PDF Services' `x-api-key` client id beside its bearer token); None when
    one's optional secret is unset (no credential is then sent at all). Every entry
    is checked all the same: a mistake in one after an unset secret is said now,
    not when the reconciler first starts with the credentials."""
    also = table.sub("also")
    if also is None:
        return ()
    found: list[AuthHeader] = []
    unset = False
    for name in sorted(also.data):
        if not _TOKEN.match(name):
            raise also.error(name, "must be an HTTP header name")
        if name.lower() == main.lower():
            raise also.error(name, f"is auth.header ({main}) already")
        entry = also.req_sub(name)
        template = _auth_value(entry, "{secret}")
        secret = _secret(entry, "secret_env", "secret_file", optional or not table.ctx.credentials)
        entry.finish()
        if secret is None:
            unset = True
            continue
        _check_secret(entry, secret, _header_safe, ("secret_env", "secret_file"))
        found.append(AuthHeader(header=name, value=template, secret=secret))
    also.finish()
    return None if unset else tuple(found)


def _check_secret(
    table: _Table, secret: Secret, check: Callable[[str], None], keys: tuple[str, str]
) -> None:
    """`check` (raising ValueError) on a secret's value now and, for a followed file,
    on every value it is rotated to. Its problem names the key the secret came
    from (`keys`: the env one, the file one) and its source, never the value:
    the checks never quote it."""
    try:
        check(secret.reveal())
    except ValueError as exc:
        key = keys[0] if secret.source.startswith("env:") else keys[1]
        raise table.error(key, f"{secret.source.partition(':')[2]}: {exc}") from None
    if isinstance(secret, FollowedSecret):  # a rotated file must pass the same check
        secret.checked_by(check)


def _aws_auth(table: _Table) -> AuthSpec | None:
    """`scheme = "aws_sigv4"`: every call signed (shared/providers/sigv4.py) with
    credentials from `credentials_file` (the credential_process JSON, followed
    as it changes: STS credentials last an hour) or AWS's standard variables."""
    for key in ("header", "value", "secret_env", "secret_file"):
        if table.has(key):
            raise table.error(key, "not used with scheme = aws_sigv4 (it signs every call)")
    names = {}
    for key in ("region", "service"):
        name = table.req_str(key)
        if not _AWS_NAME.match(name):
            raise table.error(key, f"'{name}' is not an AWS {key} name (e.g. us-east-1, bedrock)")
        names[key] = name
    optional = table.boolean("optional", False) or not table.ctx.credentials
    extra_hosts = _host_entries(table, "extra_hosts")
    file_name = table.opt_str("credentials_file")
    table.finish()
    try:
        credentials = _aws_credentials(table, file_name)
    except (SecretError, sigv4.CredentialsError) as exc:
        if optional:
            return None
        raise table.error("credentials_file" if file_name else "scheme", str(exc)) from None
    return AuthSpec(
        header="Authorization",
        value=parse_template("{secret}", {"secret"}),
        secret=credentials,
        extra_hosts=extra_hosts,
        sigv4=SigV4(region=names["region"], service=names["service"]),
    )


def _aws_credentials(table: _Table, file_name: str | None) -> Secret:
    """The credentials as credential_process JSON, in a Secret (never printed)."""
    if file_name:
        followed = FollowedSecret(Path(file_name))
        try:
            sigv4.parse_credentials(followed.reveal())
        except sigv4.CredentialsError as exc:
            raise sigv4.CredentialsError(f"{file_name}: {exc}") from None
        followed.checked_by(sigv4.parse_credentials)
        return followed
    env = table.ctx.env
    key_id, secret, token = (env.get(name) for name in _AWS_ENV)
    if not key_id or not secret:
        raise SecretError(
            "credentials_file is not set, and neither are AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY"
        )
    document = {"AccessKeyId": key_id, "SecretAccessKey": secret}
    if token:
        document["SessionToken"] = token
    text = json.dumps(document)
    try:
        sigv4.parse_credentials(text)
    except sigv4.CredentialsError as exc:
        raise SecretError(f"the AWS_* variables: {exc}") from None
    return Secret(text, source="env:AWS_ACCESS_KEY_ID")


def _header_safe(value: str) -> None:
    """A credential a header can carry (it is never quoted: the message names none of it)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("the credential holds a line break or another control character")
    if any(ord(c) > 0xFF for c in value):
        raise ValueError("the credential holds a character no HTTP header can carry")


def _secret(table: _Table, env_key: str, file_key: str, optional: bool) -> Secret | None:
    env_name = table.opt_str(env_key)
    file_name = table.opt_str(file_key)
    if env_name and file_name:
        raise table.error(file_key, f"set {env_key} or {file_key}, not both")
    if not env_name and not file_name:
        raise table.error(env_key, f"required ({env_key} or {file_key})")
    try:
        if env_name:
            return Secret.from_env(env_name, table.ctx.env)
        return FollowedSecret(Path(file_name or ""))
    except SecretError as exc:
        if optional:
            return None
        raise table.error(env_key if env_name else file_key, str(exc)) from None


def _check_content_type(table: _Table, key: str, name: str, value: str) -> None:
    """Bodies are sent as JSON, or as the form `create.encoding` names, whose
    Content-Type the encoder writes: a header calling them anything else
    (a form, XML) would send JSON under a false name."""
    if name.lower() == "content-type" and not _JSON_MEDIA_TYPE.match(value):
        raise table.error(
            key,
            f"'{value}': bodies are sent as JSON (a JSON media type only); for a form "
            'create set create.encoding = "form" or "multipart", which sets its own',
        )


def _static_headers(top: _Table) -> dict[str, str]:
    headers = top.mapping("headers")
    for name, value in headers.items():
        if not _TOKEN.match(name):
            raise top.error(f"headers.{name}", "not a valid HTTP header name")
        if not isinstance(value, str):
            raise top.error(f"headers.{name}", "must be a string")
        _check_content_type(top, f"headers.{name}", name, value)
        if is_sensitive_header(name):
            raise top.error(
                f"headers.{name}",
                "looks like a credential: use [auth] with secret_env or secret_file (a "
                f"second credential header: [auth.also.{name}])",
            )
    return headers


def _limits(table: _Table | None) -> Limits:
    if table is None:
        return Limits()
    d = Limits()

    # Bounded as an agent's own values are: a default deadline of 1e12 s was
    # stored, then could not be read back, and failed every claim that met it.
    def delay(key: str, default: float) -> float:
        return table.number(key, default, maximum=MAX_DELAY_SECONDS)

    def deadline(key: str, default: float) -> float:
        return table.number(key, default, maximum=MAX_DEADLINE_SECONDS)

    limits = Limits(
        backoff_base=delay("backoff_base", d.backoff_base),
        backoff_factor=table.number("backoff_factor", d.backoff_factor, maximum=MAX_BACKOFF_FACTOR),
        backoff_cap=delay("backoff_cap", d.backoff_cap),
        max_concurrency=table.int_or("max_concurrency", d.max_concurrency),
        request_timeout=delay("request_timeout", d.request_timeout),
        create_deadline_seconds=deadline("create_deadline_seconds", d.create_deadline_seconds),
        result_deadline_seconds=deadline("result_deadline_seconds", d.result_deadline_seconds),
        cancel_deadline_seconds=deadline("cancel_deadline_seconds", d.cancel_deadline_seconds),
        webhook_backstop_poll_seconds=delay(
            "webhook_backstop_poll_seconds", d.webhook_backstop_poll_seconds
        ),
        default_poll_after_seconds=table.opt_number(
            "default_poll_after_seconds", maximum=MAX_DELAY_SECONDS
        ),
        result_retry_seconds=deadline("result_retry_seconds", d.result_retry_seconds),
    )
    if limits.backoff_factor < 1:
        raise table.error("backoff_factor", "must be at least 1 (the delay never shrinks)")
    if limits.backoff_cap < limits.backoff_base:
        raise table.error("backoff_cap", "must be at least backoff_base")
    table.finish()
    return limits


def _state_map(table: _Table, key: str) -> dict[str, RemoteState]:
    mapping: dict[str, RemoteState] = {}
    for raw, value in table.mapping(key).items():
        try:
            mapping[raw] = RemoteState(value)
        except ValueError:
            raise table.error(
                f"{key}.{raw}", f"'{value}' is not one of {_choices(RemoteState)}"
            ) from None
    return mapping


def _job_path(table: _Table, *, required: bool, body: Any = None) -> Template | None:
    """A path that acts on one job: without {job_id} every operation would read
    (or cancel) the same resource, unless the request's `body` names the job
    (a GraphQL endpoint: one path, the job in the query's variables)."""
    path = table.template("path", {"job_id"}, required=required)
    if path is not None and "job_id" not in path.names and not _names_job(body):
        raise table.error(
            "path",
            f"'{path.text}' must name the job: {{job_id}} or {{+job_id}} "
            "(or the body must, for a GraphQL endpoint)",
        )
    return path


def _names_placeholder(text: str, allowed: frozenset[str]) -> bool:
    return any(f"{{{name}}}" in text or f"{{+{name}}}" in text for name in allowed)


def _names_job(value: Any) -> bool:
    """Does a templated JSON body (`_json_body`) name the job somewhere?"""
    if isinstance(value, Template):
        return "job_id" in value.names
    if isinstance(value, Mapping):
        return any(_names_job(item) for item in value.values())
    if isinstance(value, list):
        return any(_names_job(item) for item in value)
    return False


def _not_found_statuses(table: _Table, by_code: Mapping[int, RemoteState]) -> frozenset[int]:
    """Codes meaning "no such job" (404, 410 by default), less any that
    `state_from_http_status` maps: a 404 mapped to cancelled (a provider whose
    cancel deletes the job) was read as a miss all the same."""
    explicit = table.raw("not_found_statuses") is not _MISSING
    codes = table.statuses("not_found_statuses", (404, 410))
    both = sorted(codes & by_code.keys())
    if explicit and both:
        raise table.error(
            "not_found_statuses",
            f"{both} also mapped by state_from_http_status: one meaning per code",
        )
    return codes - by_code.keys()


def _status(table: _Table) -> StatusSpec:
    by_code = _http_state_map(table)
    body = _json_body(table, "body", CANCEL_VALUES)
    path = _job_path(table, required=False, body=body)
    use_status_url = table.boolean("use_status_url", False)
    if path is None and not use_status_url:
        raise table.error("path", "required (or use_status_url = true)")
    # a list: the first path holding a state is read (Databricks' result_state,
    # which a run names once it ended, else its life_cycle_state)
    states = table.paths("state", RESPONSE)
    state = states[0] if states else None
    done = table.path("done", RESPONSE)
    state_map = _state_map(table, "state_map")
    if state is not None and done is not None:
        raise table.error("done", "set either state (with state_map) or done, not both")
    if state is None and done is None:
        raise table.error("state", "required (or done, for AIP-151 operations)")
    if state is not None and not state_map:
        raise table.error("state_map", "required with state")
    error = table.path("error", RESPONSE)
    # lists, as `state`: the first path holding a value is read (Elasticsearch's
    # task `error`, else the first of a reindex's `response.failures`)
    error_codes = table.paths("error_code", RESPONSE)
    if not error_codes and done is not None:
        error_codes = (parse_path("/error/code"),)
    error_code = error_codes[0] if error_codes else None
    error_messages = table.paths("error_message", RESPONSE)
    error_message = error_messages[0] if error_messages else None
    counts = {
        k: table.paths(f"counts_{k}", RESPONSE)
        for k in ("total", "succeeded", "failed", "cancelled")
    }
    outcome_from_counts = table.boolean("outcome_from_counts", False)
    outcome_states = table.strings("outcome_from_counts_states") or None
    if outcome_from_counts and not counts["failed"] and not counts["total"]:
        raise table.error("outcome_from_counts", "needs counts_failed or counts_total")
    if outcome_from_counts and not counts["succeeded"] and not counts["total"]:
        raise table.error("outcome_from_counts", "needs counts_succeeded or counts_total")
    for raw in outcome_states or ():
        if raw not in state_map:
            raise table.error("outcome_from_counts_states", f"'{raw}' is not in state_map")
    spec = StatusSpec(
        method=table.method("method", "GET"),
        path=path,
        use_status_url=use_status_url,
        state=state,
        state_also=states[1:],
        state_map=state_map,
        done=done,
        error=error,
        error_code=error_code,
        error_message=error_message,
        error_code_also=error_codes[1:],
        error_message_also=error_messages[1:],
        cancelled_error_codes=_cancelled_error_codes(table, done, error, error_code),
        progress_completed=table.path("progress_completed", RESPONSE),
        progress_total=table.path("progress_total", RESPONSE),
        progress_percent=table.path("progress_percent", RESPONSE),
        progress_fraction=table.path("progress_fraction", RESPONSE),
        updated_at=table.path("updated_at", RESPONSE),
        poll_after_seconds=table.path("poll_after_seconds", RESPONSE),
        result_url=table.path("result_url", RESPONSE),
        errors_url=table.path("errors_url", RESPONSE),
        counts_total=counts["total"],
        counts_succeeded=counts["succeeded"],
        counts_failed=counts["failed"],
        counts_cancelled=counts["cancelled"],
        outcome_from_counts=outcome_from_counts,
        outcome_from_counts_states=frozenset(outcome_states) if outcome_states else None,
        not_found_statuses=_not_found_statuses(table, by_code),
        state_from_http_status=by_code,
        state_in_error_statuses=_state_in_error_statuses(table, by_code),
        body=body,
        estimated_end=table.path("estimated_end", RESPONSE),
        estimated_seconds_left=table.path("estimated_seconds_left", RESPONSE),
        throttle_codes=_codes_at_paths(table, "throttle_codes"),
        not_found_codes=_codes_at_paths(table, "not_found_codes"),
        error_means_failed=_error_means_failed(table, done, (error, error_code, error_message)),
        error_only_when_failed=_error_only_when_failed(table, (error, error_code, error_message)),
    )
    if spec.progress_percent is not None and spec.progress_fraction is not None:
        raise table.error(
            "progress_fraction", "progress_percent and progress_fraction exclude each other"
        )
    if spec.estimated_end is not None and spec.estimated_seconds_left is not None:
        raise table.error(
            "estimated_seconds_left", "estimated_end and estimated_seconds_left exclude each other"
        )
    if spec.body is not None and spec.method == "GET":
        raise table.error("body", 'a GET carries no body: set method = "POST" (GraphQL)')
    table.finish()
    return spec


def _cancelled_error_codes(
    table: _Table, done: ValuePath | None, error: ValuePath | None, error_code: ValuePath | None
) -> frozenset[str]:
    """`status.cancelled_error_codes`: the error codes of a failed read that mean the
    job was cancelled (AIP-151's 1, CANCELLED, by default with `done`; BigQuery's
    DONE with errorResult.reason "stopped", Snowflake's 422 code "000604").

    Without `done` none is assumed, and the key needs `error_code` or `error` (the
    error object, its `code` or `type` read) to find a code at: before, it was read
    with `done` alone, and ignored anywhere else without a word, so a cancelled job
    read as failed."""
    if done is not None:
        return table.scalars("cancelled_error_codes", {"1"})
    codes = table.scalars("cancelled_error_codes")
    if codes and error_code is None and error is None:
        raise table.error(
            "cancelled_error_codes", "needs error_code (where the code is) or error (its object)"
        )
    return codes


def _error_means_failed(
    table: _Table, done: ValuePath | None, paths: tuple[ValuePath | None, ...]
) -> bool:
    """`status.error_means_failed`: an error beside a success state is a failure.

    It needs a path to find the error at; with `done` (AIP-151) an error already
    means failed, so the key would say nothing there.
    """
    if not table.boolean("error_means_failed", False):
        return False
    if done is not None:
        raise table.error("error_means_failed", "with done, an error already means failed")
    if not any(paths):
        raise table.error(
            "error_means_failed", "needs error, error_code or error_message (where the error is)"
        )
    return True


def _error_only_when_failed(table: _Table, paths: tuple[ValuePath | None, ...]) -> bool:
    """`status.error_only_when_failed`: the error paths name the job's error only on
    a read that says it failed, was cancelled or partly succeeded (a status message every read
    carries: Apify's `statusMessage`, "Crawling: 2 of 5 pages" while it runs).

    It needs a path to read; `error_means_failed` reads an error beside a success,
    which this says is none, so the two exclude each other.
    """
    if not table.boolean("error_only_when_failed", False):
        return False
    if not any(paths):
        raise table.error(
            "error_only_when_failed",
            "needs error, error_code or error_message (where the error is)",
        )
    if table.boolean("error_means_failed", False):
        raise table.error(
            "error_only_when_failed",
            "excludes error_means_failed (an error beside a success would be read as none)",
        )
    return True


def _state_in_error_statuses(table: _Table, by_code: Mapping[int, RemoteState]) -> frozenset[int]:
    """`status.state_in_error_statuses`: error codes whose body is read for a state.
    Not a 2xx (always read), not a code with a meaning of its own already (mapped
    to a state, or "no such job"): one meaning per code."""
    key = "state_in_error_statuses"
    codes = table.statuses(key, ())
    if any(code < 400 for code in codes):
        raise table.error(key, "only 4xx/5xx codes: a 2xx body is always read")
    mapped = sorted(codes & by_code.keys())
    if mapped:
        raise table.error(key, f"{mapped} mapped by state_from_http_status: one meaning per code")
    missing = sorted(codes & _not_found_statuses(table, by_code))
    if missing:
        raise table.error(key, f"{missing} mean no such job (not_found_statuses)")
    return codes


def _http_state_map(table: _Table) -> dict[int, RemoteState]:
    """`{"202" = "running"}`: TOML keys are strings, so status codes arrive as text."""
    mapping: dict[int, RemoteState] = {}
    for code, state in _state_map(table, "state_from_http_status").items():
        # ASCII digits only: "²" passes str.isdigit and int() refuses it
        if not (_STATUS_CODE.fullmatch(code) and 100 <= int(code) <= 599):
            raise table.error(f"state_from_http_status.{code}", "not an HTTP status code")
        mapping[int(code)] = state
    return mapping


def _create(table: _Table, status: StatusSpec, has_plugin: bool) -> CreateSpec:
    idempotency = table.choice("idempotency", Idempotency, None)
    header_default = "Idempotency-Key" if idempotency is Idempotency.HEADER else None
    header = table.opt_str("idempotency_header", header_default)
    if header is not None and not _TOKEN.match(header):
        raise table.error("idempotency_header", "must be an HTTP header name")
    if idempotency in (Idempotency.BODY, Idempotency.NONE) and table.from_preset(
        "idempotency_header"
    ):
        header = None  # the user switched the preset's mode: its header no longer applies
    if header is not None and idempotency in (Idempotency.BODY, Idempotency.NONE):
        raise table.error("idempotency_header", f"not used with idempotency = {idempotency}")
    body_field = _written(table, "idempotency_body_field")
    if idempotency is not Idempotency.BODY and table.from_preset("idempotency_body_field"):
        body_field = None  # the user switched the preset's mode: its body field no longer applies
    if idempotency is Idempotency.BODY and body_field is None:
        raise table.error("idempotency_body_field", "required with idempotency = body")
    if idempotency is not Idempotency.BODY and body_field is not None:
        raise table.error("idempotency_body_field", "only used with idempotency = body")
    job_id = table.path("job_id", RESPONSE)
    if job_id is None and idempotency is not Idempotency.CLIENT_JOB_ID and not has_plugin:
        raise table.error("job_id", "required (where the job id is in the response)")
    sync_statuses = table.statuses("sync_result_statuses", ())
    sync_result = table.path("sync_result", RESPONSE)
    if sync_statuses and sync_result is None:
        raise table.error("sync_result", "required with sync_result_statuses")
    if sync_result is not None and not sync_statuses and table.path("state", RESPONSE) is None:
        raise table.error(
            "sync_result",
            "needs sync_result_statuses or create.state (what tells an answer that is the"
            " result from one that names a job)",
        )
    spec = CreateSpec(
        method=table.method("method", "POST"),
        path=_create_path(table),
        idempotency=idempotency,
        idempotency_header=header,
        idempotency_body_field=body_field,
        client_reference_field=_written(table, "client_reference_field"),
        set_body=_set_body(table),
        set_headers=_set_headers(table),
        job_id=job_id,
        state=table.path("state", RESPONSE),
        status_url=table.paths("status_url", RESPONSE),
        accepted_statuses=table.success_statuses("accepted_statuses", (200, 201, 202)),
        sync_result_statuses=sync_statuses,
        sync_result=sync_result,
        conflict_reject_codes=table.scalars("conflict_reject_codes"),
        error_code=_required(
            table.path("error_code", RESPONSE, "/error/code"), table, "error_code"
        ),
        error_message=_required(
            table.path("error_message", RESPONSE, "/error/message"), table, "error_message"
        ),
        idempotency_format=table.choice("idempotency_format", TokenFormat, TokenFormat.TOKEN),
        min_result_deadline_seconds=table.int_or("min_result_deadline_seconds", 1),
        not_created_statuses=_not_created_statuses(table),
        not_created_codes=_codes_at_paths(table, "not_created_codes"),
        encoding=table.choice("encoding", BodyEncoding, BodyEncoding.JSON),
        form_nesting=table.choice("form_nesting", FormNesting, FormNesting.NONE),
        poll_after_seconds=table.path("poll_after_seconds", RESPONSE),
        already_exists_codes=table.scalars("already_exists_codes"),
        resend_query=_resend_query(table),
        idempotency_window_seconds=table.opt_int("idempotency_window_seconds"),
    )
    if spec.idempotency_window_seconds is not None and idempotency is Idempotency.NONE:
        raise table.error(
            "idempotency_window_seconds", "needs a token to hold (idempotency is none)"
        )
    if spec.already_exists_codes and idempotency is not Idempotency.CLIENT_JOB_ID:
        raise table.error(
            "already_exists_codes",
            "only with idempotency = client_job_id (the id must be ours to prove the job ours)",
        )
    _check_exists_codes_apart(table, spec)
    if spec.form_nesting is not FormNesting.NONE and spec.encoding is not BodyEncoding.FORM:
        raise table.error(
            "form_nesting",
            f'only with encoding = "form" (a {spec.encoding} body carries objects as they are)',
        )
    if spec.encoding is not BodyEncoding.JSON:
        _check_form_create(table, spec)
    if spec.state is not None and not status.state_map:
        raise table.error("state", "needs status.state_map to be read")
    table.finish()
    return spec


def _check_exists_codes_apart(table: _Table, spec: CreateSpec) -> None:
    """A code cannot say both "the job with our id exists" and "nothing was
    created" (`conflict_reject_codes`, or `not_created_codes` at the error code's
    own path): one of the two would be silently ignored, and which one is a
    matter of the order the answer is read in, not of what the provider said."""
    for key, codes in (
        ("conflict_reject_codes", spec.conflict_reject_codes),
        *(
            ("not_created_codes", c)
            for p, c in spec.not_created_codes
            if (p.source, p.segments) == (spec.error_code.source, spec.error_code.segments)
        ),
    ):
        both = sorted(spec.already_exists_codes & codes)
        if both:
            raise table.error(
                "already_exists_codes",
                f"{', '.join(map(repr, both))} also in create.{key}: a code says the job "
                "exists or that nothing was created, not both",
            )


def _query_names(path: str | None) -> set[str]:
    """The query parameters a path template sets itself (`?name=...`): a paging or
    resend parameter of the same name would be sent twice."""
    query = urlsplit(path).query if path is not None else ""
    return {pair.partition("=")[0] for pair in query.split("&") if pair}


def _resend_query(table: _Table) -> tuple[tuple[str, str], ...]:
    """`create.resend_query`: query parameters only a create sent again carries
    (Snowflake's retry=true). Text values, names create.path's query does not set
    already (one of them would be sent twice, or the first attempt would carry it)."""
    found = table.mapping("resend_query")
    path = table.data.get("path")
    fixed = _query_names(path if isinstance(path, str) else None)
    params = []
    for name, value in found.items():
        if not name or not isinstance(value, str):
            raise table.error(f"resend_query.{name}", "must be a name and a text value")
        if name in fixed:
            raise table.error(
                f"resend_query.{name}", f"create.path already sets ?{name}=: the first would too"
            )
        params.append((name, value))
    return tuple(params)


def _check_form_create(table: _Table, spec: CreateSpec) -> None:
    """A form's fields are the body's top-level members, and its Content-Type
    (with a multipart boundary) is the encoder's to write.

    A multipart body sends an object member as a JSON part, so a path below the
    top level is written into that part (Speechmatics' `config.tracking.reference`);
    a URL-encoded form has only text fields, and refuses it."""
    written = [
        ("idempotency_body_field", spec.idempotency_body_field),
        ("client_reference_field", spec.client_reference_field),
        *((f"set_body.{field.path.text}", field.path) for field in spec.set_body),
    ]
    for key, path in written:
        if path is None:
            continue
        nested = len(writable_keys(path)) != 1
        flat = spec.form_nesting is FormNesting.NONE
        if nested and flat and spec.encoding is BodyEncoding.FORM:
            raise table.error(
                key,
                "a form body is one text field per top-level member: name one "
                '(encoding = "multipart" sends an object member as a JSON part; '
                'form_nesting = "brackets" writes it a[b]=v, as Stripe reads a form)',
            )
    for name, _template in spec.set_headers:
        if name.lower() == "content-type":
            raise table.error(
                f"set_headers.{name}", f"a {spec.encoding} body's Content-Type is set as it is sent"
            )


def _not_created_statuses(table: _Table) -> frozenset[int]:
    """`create.not_created_statuses`: refusals that prove no job exists."""
    return _refusal_statuses(table, "not_created_statuses", "that nothing was created")


def _resend_statuses(table: _Table) -> frozenset[int]:
    """`cancel.resend_statuses`: answers the provider documents as a cancel not
    taken (a rate limit's 429), so it is sent again."""
    return _refusal_statuses(table, "resend_statuses", "a cancel was not taken")


def _refusal_statuses(table: _Table, key: str, what: str) -> frozenset[int]:
    """Codes a description says are refusals that did nothing. Only an error answer
    can say so: a 2xx is an answer about the job or the cancel, and a 1xx/3xx no
    answer at all (a redirect is not followed)."""
    codes = table.statuses(key, ())
    if any(not 400 <= code <= 599 for code in codes):
        raise table.error(key, f"only 4xx/5xx codes can say {what}")
    return codes


def _codes_at_paths(table: _Table, key: str) -> tuple[tuple[ValuePath, frozenset[str]], ...]:
    """`[create.not_created_codes]` (`[status.throttle_codes]`,
    `[status.not_found_codes]`, `[cancel.refused_codes]`): a path of the answer,
    and the error codes found there that the provider documents as creating
    nothing (as a throttle, as a job gone, as a cancel not taken)."""
    found = []
    for text, codes in table.mapping(key).items():
        where = f"{key}.{text}"
        try:
            path = parse_path(text)
        except PathSyntaxError as exc:
            raise table.error(where, f"bad path {exc}") from None
        if path.source not in RESPONSE:
            raise table.error(where, "reads the answer's body or a header only")
        if isinstance(codes, list) and any(isinstance(c, bool) for c in codes):
            # an answer's boolean is read as JSON writes it: Baseten's {"canceled": false}
            raise table.error(where, 'a boolean is written as text here: ["false"], ["true"]')
        if (
            not isinstance(codes, list)
            or not codes
            or not all(isinstance(c, str | int) for c in codes)
        ):
            raise table.error(where, "must be a non-empty list of codes (strings or integers)")
        found.append((path, frozenset(str(c) for c in codes)))
    return tuple(found)


T = TypeVar("T")


def _create_path(table: _Table) -> Template:
    """create.path; `{webhook_url}` only as one query parameter's whole value.

    fal.ai's queue takes its callback only so (`?fal_webhook=<url>`): a create
    without a URL to give (no public_webhook_url) leaves that parameter out,
    which only a whole value allows. A secret never goes in a URL.
    """
    allowed = {"client_reference", "idempotency_token", "webhook_url"}
    path = _required(table.template("path", allowed, required=True), table, "path")
    if "webhook_url" in path.names and query_param_of(path, "webhook_url") is None:
        raise table.error(
            "path",
            "{webhook_url} must be a query parameter's whole value, once "
            "(`/fal-ai/flux/dev?fal_webhook={webhook_url}`)",
        )
    return path


def _required(value: T | None, table: _Table, key: str) -> T:
    if value is None:
        raise table.error(key, "required")
    return value


def _written(table: _Table, key: str) -> ValuePath | None:
    """A body path jobwarden writes into the create body (our token, our reference)."""
    path = table.path(key, BODY)
    if path is not None:
        _check_written(table, key, path)
    return path


def _check_written(table: _Table, key: str, path: ValuePath) -> None:
    """A written path names object members: a selector only reads (see paths.py)."""
    try:
        writable_keys(path)
    except PathSyntaxError as exc:
        raise table.error(key, str(exc)) from None


def _set_body(table: _Table) -> tuple[BodyField, ...]:
    """Fields written into every create body: strings are templates, other values literal."""
    entries = []
    for text, value in table.mapping("set_body").items():
        key = f"set_body.{text}"
        path = table.parse_path_value(key, text, BODY)
        _check_written(table, key, path)
        if not isinstance(value, str):
            _check_json_literal(table, key, value)
            # its strings naming our placeholders are templates too (a list of
            # callback objects: Speechmatics' notification_config = [{url, contents}])
            literal = _templated(table, key, value, CREATE_VALUES, lenient=True)
            entries.append(BodyField(path=path, template=None, literal=literal))
            continue
        try:
            entries.append(BodyField(path=path, template=parse_template(value, CREATE_VALUES)))
        except TemplateError as exc:
            raise table.error(key, str(exc)) from None
    return tuple(entries)


def _check_json_literal(table: _Table, where: str, value: Any) -> None:
    """A literal written into every create body must be JSON: a TOML date or time,
    or nan/inf, loads fine yet no create could then be sent (json refuses them),
    each failing as though it never left, until its deadline. Its strings that
    name placeholders of ours are templates (`_templated`), filled at each create."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _check_json_literal(table, f"{where}.{k}", v)
    elif isinstance(value, list):
        for n, v in enumerate(value):
            _check_json_literal(table, f"{where}[{n}]", v)
    elif isinstance(value, float) and not math.isfinite(value):
        raise table.error(where, f"{value} is not a JSON number")
    elif not isinstance(value, str | bool | int | float):
        raise table.error(where, f"{type(value).__name__} is not a JSON value")


def _set_headers(table: _Table) -> tuple[tuple[str, Template], ...]:
    entries = []
    for name, value in table.mapping("set_headers").items():
        key = f"set_headers.{name}"
        if not _TOKEN.match(name):
            raise table.error(key, "not a valid HTTP header name")
        if not isinstance(value, str):
            raise table.error(key, "must be a template string")
        _check_content_type(table, key, name, value)
        try:
            entries.append((name, parse_template(value, CREATE_VALUES)))
        except TemplateError as exc:
            raise table.error(key, str(exc)) from None
    return tuple(entries)


def _check_status_url(table: _Table, status: StatusSpec, create: CreateSpec) -> None:
    if status.use_status_url and not create.status_url:
        raise table.error("use_status_url", "needs create.status_url (where the URL is found)")


def _check_lookup_reads(top: _Table, status: StatusSpec, lookup: LookupSpec, plugin: bool) -> None:
    """A job a lookup finds is known by its id alone: a lookup names no status URL.
    Where status reads go only to the URL a create answer gives (`use_status_url`,
    no `status.path`), the job found after a lost create could never be read: the
    create was sent once, the job found, and the operation went to a human with "no
    status URL on record" (Azure AI Speech: `self` is the only name of a
    transcription). Refused here instead; a plugin may read it its own way."""
    if plugin or not lookup.supported or not status.use_status_url or status.path is not None:
        return
    if lookup.status_url is not None:  # the found job's URL is read with its id
        return
    raise top.error(
        "lookup",
        "a job the lookup finds is known by its id alone, and status reads go only to "
        "the status URL a create answer gives (status.use_status_url without "
        "status.path): the job found after a lost create could never be read; give "
        "status.path (naming {job_id}), or lookup.status_url (where the found job's "
        "status URL is), or leave [lookup] out (a lost create then goes to a human, "
        "never sent twice)",
    )


def _cancel(table: _Table | None, create: CreateSpec) -> CancelSpec:
    if table is None:
        return CancelSpec(
            supported=False,
            method="POST",
            path=None,
            idempotent=False,
            reason="no cancel endpoint is configured",
            accepted_statuses=frozenset(),
            state=None,
        )
    supported = table.boolean("supported", True)
    body = _json_body(table, "body", CANCEL_VALUES)
    use_status_url = table.boolean("use_status_url", False)
    if use_status_url and not create.status_url:
        raise table.error("use_status_url", "needs create.status_url (where the URL is found)")
    spec = CancelSpec(
        supported=supported,
        method=table.method("method", "POST"),
        path=_job_path(table, required=supported and not use_status_url, body=body),
        idempotent=table.boolean("idempotent", False),
        reason=table.str_or("reason", "the provider has no cancel endpoint"),
        accepted_statuses=table.success_statuses("accepted_statuses", (200, 201, 202, 204)),
        state=table.path("state", BODY),
        body=body,
        # a cancel that deletes the job deletes a finished one's result too: read
        # first, unless the description says its cancel spares a finished job
        read_first=table.boolean("read_first", table.boolean("deletes_job", False)),
        deletes_job=table.boolean("deletes_job", False),
        ends_failed=table.boolean("ends_failed", False),
        resend_statuses=_resend_statuses(table),
        use_status_url=use_status_url,
        refused_codes=_codes_at_paths(table, "refused_codes"),
    )
    if spec.body is not None and spec.method == "GET":
        raise table.error("body", "a GET carries no body: set method (POST, PATCH...)")
    if spec.deletes_job and not supported:
        raise table.error("deletes_job", "there is no cancel to delete the job")
    if spec.ends_failed and not supported:
        raise table.error("ends_failed", "there is no cancel to end the job")
    table.finish()
    return spec


def _json_body(table: _Table, key: str, allowed: frozenset[str]) -> Any:
    """A JSON object written as a TOML table, its strings parsed as templates.

    Checked here, so a cancel never leaves with a body that cannot be JSON
    (a TOML date) or a placeholder that has no value.
    """
    value = table.raw(key)
    if value is _MISSING:
        return None
    if not isinstance(value, Mapping):
        raise table.error(key, "must be a table (the JSON object sent)")
    return _templated(table, key, value, allowed)


# A whole string that is one placeholder: a typo'd one is refused, not sent as text.
_LONE_PLACEHOLDER = re.compile(r"\{\+?[A-Za-z_][A-Za-z0-9_]*\}")


# A placeholder of ours misspelt inside longer text ({jobid}, {jobId}, {job-id}):
# refused, where any other braces in such text are sent as written.
_MISSPELT_JOB_ID = re.compile(r"\{\+?job[_\-]?id\}", re.IGNORECASE)


def _templated(
    table: _Table, where: str, value: Any, allowed: frozenset[str], *, lenient: bool = False
) -> Any:
    """`value` with its strings that name a placeholder parsed as templates.

    `lenient` (a set_body literal, whose strings were always sent as written):
    only a string naming a placeholder of ours is a template; a lone `{x}` or a
    misspelt `{jobid}` stays text, where elsewhere they are refused as typos."""
    if isinstance(value, str):
        misspelt = [
            m for m in _MISSPELT_JOB_ID.findall(value) if m not in ("{job_id}", "{+job_id}")
        ]
        if misspelt and not lenient:
            raise table.error(where, f"{misspelt[0]} is no placeholder: did you mean {{job_id}}?")
        lone = not lenient and _LONE_PLACEHOLDER.fullmatch(value)
        if not _names_placeholder(value, allowed) and not lone:
            # No placeholder of ours: the text as written, braces and all (a
            # GraphQL query, which names the job in its variables instead).
            return value
        try:
            return parse_template(value, allowed)
        except TemplateError as exc:
            raise table.error(where, str(exc)) from None
    if isinstance(value, Mapping):
        return {
            k: _templated(table, f"{where}.{k}", v, allowed, lenient=lenient)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            _templated(table, f"{where}[{n}]", v, allowed, lenient=lenient)
            for n, v in enumerate(value)
        ]
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise table.error(where, f"{type(value).__name__} is not a JSON value")


# [result] keys that read JSON items: meaningless for csv, text and binary results.
_JSON_ITEM_KEYS = (
    "items",
    "item_id",
    "item_error",
    "item_success",
    "item_success_values",
    "item_code",
    "item_message",
)
_CSV_KEYS = (
    "header",
    "delimiter",
    "required_columns",
    "id_column",
    "failed_column",
    "failed_values",
    "error_column",
)


def _result(table: _Table, status: StatusSpec) -> ResultSpec:
    source = table.choice("source", ResultSource, None)
    if table.has("base64") and source not in _BASE64_SOURCES:  # before the others' rules
        raise table.error(
            "base64",
            f"only with source = path, url or inline (one JSON the field is read in), not {source}",
        )
    allowed = {"job_id", "file_id"} if source is ResultSource.FILES else {"job_id"}
    path = table.template("path", allowed)
    inline = table.path("inline", RESPONSE)
    file_ids = table.paths("file_ids", RESPONSE, each=True)
    if source is ResultSource.URL and status.result_url is None:
        raise table.error("source", "'url' needs status.result_url (where the URL is)")
    if source is ResultSource.PATH and path is None:
        raise table.error("path", "required with source = path")
    if source is ResultSource.FILES:
        # no path: each id is the file's URL (Runway's `output` list)
        if path is not None and "file_id" not in path.names:
            raise table.error("path", "with source = files, names {file_id}")
        if not file_ids:
            raise table.error("file_ids", "required with source = files")
    if source is ResultSource.INLINE and inline is None:
        raise table.error("inline", "required with source = inline ('' = the whole body)")
    if source is ResultSource.WEBHOOK:
        _check_webhook_result(table, inline)
    fmt = _result_format(table, source, table.has("base64"))
    if fmt is ResultFormat.BINARY and len(file_ids) > 1:
        raise table.error(
            "file_ids",
            "a binary result is one file: several laid end to end could not be told apart "
            "(name one, or use a plugin)",
        )
    expect = _expect(table.sub("expect"), status, source, fmt)
    errors = _errors(table.sub("errors"), status)
    items = table.path("items", BODY)
    method, body = _result_request(table, source)
    # with result.follow the pages are the document's, JSON whatever the result is
    paged = ResultFormat.JSON if table.has("follow") else fmt
    pages = _pages(table.sub("pages"), source, paged, items, path)
    if pages is not None and pages.page_token_body_field is not None and body is None:
        raise table.error(
            "pages.page_token_body_field", "needs result.body (the object the token is written in)"
        )
    if pages is not None and pages.page_token_body_field is not None:
        _check_token_slot(table, "pages.page_token_body_field", body, pages.page_token_body_field)
    spec = ResultSpec(
        source=source,
        path=path,
        inline=inline,
        file_ids=file_ids,
        side_effects=table.boolean("side_effects", False),
        format=fmt,
        items=items,
        item_id=table.path("item_id", BODY),
        item_error=table.path("item_error", BODY),
        item_success=table.path("item_success", BODY),
        item_success_values=table.scalars("item_success_values"),
        expect=expect,
        errors=errors,
        csv=_csv(table.sub("csv"), fmt),
        follow_redirects=table.boolean("follow_redirects", False),
        allowed_hosts=_allowed_hosts(table),
        pages=pages,
        failed=_failed(table.sub("failed"), source),
        empty_without_url=_empty_without_url(table, status, source, fmt, expect),
        empty_states=_empty_states(table, status, source, fmt, expect),
        partial_on_cancel=table.boolean("partial_on_cancel", False),
        method=method,
        body=body,
        headers=_static_headers(table),
        failures_only=_failures_only(table, fmt, items),
        empty_without_items=_empty_without_items(table, fmt, items),
        item_code=table.path("item_code", BODY),
        item_message=table.path("item_message", BODY),
    )
    _check_item_error_parts(table, spec)
    spec = _base64(table, spec)
    spec = _follow(table, spec)
    if spec.headers and source in (ResultSource.INLINE, ResultSource.NONE):
        raise table.error("headers", f"no result is fetched with source = {source.value}")
    if spec.partial_on_cancel and source is not ResultSource.PATH:
        raise table.error(
            "partial_on_cancel",
            "only with source = path (a link or file ids a cancelled job's status names "
            "are read as its partial output anyway)",
        )
    if spec.item_success is not None and not spec.item_success_values:
        raise table.error("item_success_values", "required with item_success")
    if spec.follow_redirects and source in (ResultSource.INLINE, ResultSource.NONE):
        raise table.error("follow_redirects", f"nothing is fetched with source = {source}")
    table.finish()
    return spec


def _check_result_signed(top: _Table, webhooks: WebhookSpec) -> None:
    """`result.source = webhook` takes the output from the body as delivered, which
    no read of ours confirms (a delivered state is read again; an output cannot
    be): a scheme that authenticates the sender but not the body (a static token,
    a JWT naming the endpoint alone) would let whoever holds the token, or
    replays a delivery with another body, write the result."""
    if not signatures.signs_body(webhooks.scheme.value, webhooks.options):
        raise top.error(
            "result.source",
            f"'webhook' needs a scheme that signs the body ({webhooks.scheme.value}, as "
            "configured, does not: whoever holds its token could write the result)",
        )


def _check_webhook_result(table: _Table, inline: ValuePath | None) -> None:
    """`source = webhook`: the result is JSON at `inline` in a delivery; nothing is
    fetched, so a key naming a fetch is refused, as is a result that is not JSON."""
    if inline is None:
        raise table.error("inline", "required with source = webhook (where in the delivery)")
    if inline.source is not PathSource.BODY:
        # a delivery's headers and query are not stored: read there, the result
        # was never found (the operation waited, then result_unavailable)
        raise table.error("inline", "a path in the delivery's body with source = webhook")
    for key in ("path", "file_ids", "method", "body", "pages", "headers", "follow"):
        if table.has(key):
            raise table.error(key, "nothing is fetched with source = webhook")
    if table.choice("format", ResultFormat, ResultFormat.JSON) is not ResultFormat.JSON:
        raise table.error("format", "only json with source = webhook (a delivery is JSON)")


def _check_item_error_parts(table: _Table, spec: ResultSpec) -> None:
    """`item_code` / `item_message` are read in failed items: refused where no item
    can be one (neither item_error, item_success nor failures_only)."""
    if spec.item_error or spec.item_success or spec.failures_only:
        return
    for key in ("item_code", "item_message"):
        if getattr(spec, key) is not None:
            raise table.error(
                key, "read in failed items: needs item_error, item_success or failures_only"
            )


def _failures_only(table: _Table, fmt: ResultFormat, items: ValuePath | None) -> bool:
    """`result.failures_only`: only where the result has items to count as failures."""
    if not table.boolean("failures_only", False):
        return False
    if fmt is ResultFormat.JSON and items is None:
        raise table.error("failures_only", "needs result.items (the list of failures)")
    if not fmt.is_json:
        raise table.error("failures_only", f"a {fmt} result has no items to count as failures")
    if table.has("item_success"):
        raise table.error("failures_only", "every item is a failure: item_success says nothing")
    return True


def _empty_without_items(table: _Table, fmt: ResultFormat, items: ValuePath | None) -> bool:
    """`result.empty_without_items`: a json document without its item list holds
    none. Only where such a list is named (`result.items`, not the whole page)."""
    if not table.boolean("empty_without_items", False):
        return False
    if fmt is not ResultFormat.JSON or items is None or not items.text.strip("/"):
        raise table.error(
            "empty_without_items", "only with format = json and result.items naming a member"
        )
    return True


# What a followed link's document comes from: a fetch (`result.follow`).
_FOLLOW_SOURCES = (ResultSource.PATH, ResultSource.URL, ResultSource.FILES)


def _follow(table: _Table, spec: ResultSpec) -> ResultSpec:
    """`result.follow`: the fetched answer is a JSON document naming the result's
    link (MiniMax's file record), and the result is what that link answers.

    Refused where it cannot mean that safely: nothing fetched (inline, none: a link
    in the status is status.result_url's), a base64 field (the fetched JSON would
    be the result and the document at once), a document paged by offset (counted
    in result.items, the followed result's), side effects (an expired link is
    mended by fetching the document again, which such a result forbids), and
    partial_on_cancel (a cancelled job's document is not followed)."""
    found = table.path("follow", BODY)
    compression = table.path("compression", BODY)
    if found is None:
        if compression is not None:
            raise table.error(
                "compression",
                "only with result.follow: it is read in the document naming the link "
                '(Amazon SP-API\'s "/compressionAlgorithm")',
            )
        return spec
    source = spec.source
    if source not in _FOLLOW_SOURCES:
        raise table.error(
            "follow",
            f"only with source = path, url or files (a fetched document holds the link), "
            f"not {source.value}: a link the status names is status.result_url",
        )
    clash = [
        (
            spec.base64 is not None,
            "base64",
            "the fetched JSON cannot be both the base64 result and the document naming its link",
        ),
        (
            spec.pages is not None and spec.pages.offset_param is not None,
            "pages.offset_param",
            "an offset counts result.items, which are the followed result's, not the "
            "document's (page the document by next_page_token or next_page_url)",
        ),
        (
            spec.side_effects,
            "side_effects",
            "an expired link is mended by fetching the document again, which a fetch "
            "with side effects forbids",
        ),
        (
            spec.partial_on_cancel,
            "partial_on_cancel",
            "a cancelled job's document is not followed to its output",
        ),
    ]
    for refused, key, why in clash:
        if refused:
            raise table.error("follow", f"not with result.{key}: {why}")
    return dataclasses.replace(spec, follow=found, compression=compression)


# Where a base64 result's JSON comes from: a fetch (path, url) or the inline value.
_BASE64_SOURCES = (ResultSource.PATH, ResultSource.URL, ResultSource.INLINE)


def _base64(table: _Table, spec: ResultSpec) -> ResultSpec:
    """`result.base64` and `result.base64_url`: the result is the decoded bytes of
    a base64 field of JSON (Stability's `{"video": ...}`), one file of one type."""
    found = table.path("base64", BODY)
    url = table.boolean("base64_url", False)
    if found is None:
        if url:
            raise table.error("base64_url", "only with result.base64 (the field it decodes)")
        return spec
    if spec.format is not ResultFormat.BINARY:
        raise table.error(
            "base64", f"the decoded bytes are a file: format = binary, not '{spec.format}'"
        )
    if spec.pages is not None:
        raise table.error("base64", "a base64 field is one file: not joined from pages")
    types = spec.expect.content_types
    if len(types) != 1 or types[0].endswith("/*"):
        raise table.error(
            "expect.content_types",
            "with result.base64, exactly one media type, no wildcard: the type the decoded "
            'bytes are stored as (e.g. ["video/mp4"]; the JSON around them is not checked by type)',
        )
    return dataclasses.replace(spec, base64=found, base64_url=url)


def _result_request(table: _Table, source: ResultSource | None) -> tuple[str, Any]:
    """`result.method` and `result.body`: a result read by a POST naming the job in
    its body (AWS's JSON protocol), for source = path only."""
    method = table.method("method", "GET")
    body = _json_body(table, "body", CANCEL_VALUES)
    if (method != "GET" or body is not None) and source is not ResultSource.PATH:
        raise table.error(
            "method" if method != "GET" else "body",
            f"only with source = path (a URL the provider gives is fetched with GET), not {source}",
        )
    if body is not None and method == "GET":
        raise table.error("body", "a GET sends no body: set result.method")
    return method, body


# Results that can be served in pages and joined into one document.
_PAGED_FORMATS = (ResultFormat.CSV, ResultFormat.JSON, ResultFormat.JSONL)
_PAGED_SOURCES = (ResultSource.URL, ResultSource.PATH)


def _pages(
    table: _Table | None,
    source: ResultSource | None,
    fmt: ResultFormat,
    items: ValuePath | None,
    path: Template | None,
) -> ResultPages | None:
    if table is None:
        return None
    if source not in _PAGED_SOURCES:
        raise table.error(None, f"pages are fetched only with source = url or path, not {source}")
    if fmt not in _PAGED_FORMATS:
        raise table.error(None, f"a {fmt} result cannot be joined from pages (csv, json, jsonl)")
    token = table.path("next_page_token", RESPONSE)
    url = table.path("next_page_url", RESPONSE)
    offset_param = table.opt_str("offset_param")
    page_param = table.opt_str("page_param")
    ways = [
        key
        for key, value in (
            ("next_page_token", token),
            ("next_page_url", url),
            ("offset_param", offset_param),
            ("page_param", page_param),
        )
        if value is not None
    ]
    if not ways:
        raise table.error(
            "next_page_token",
            "required, or next_page_url, or offset_param, or page_param: how a page leads "
            "to the next",
        )
    way = ways[0]
    if len(ways) > 1:
        raise table.error(
            ways[1],
            f"contradicts {way}: a page leads to the next by a token, by its URL, "
            "by an offset or by its number, never two",
        )
    named = token or url
    if named is not None and named.source is PathSource.BODY and fmt is not ResultFormat.JSON:
        raise table.error(way, f"a {fmt} page has no body path: use header:NAME")
    in_body = _written(table, "page_token_body_field")
    if in_body is not None and token is None:
        raise table.error("page_token_body_field", "only with next_page_token (the token written)")
    if in_body is not None and table.has("page_token_param"):
        raise table.error(
            "page_token_param", "contradicts page_token_body_field: the token goes in one place"
        )
    if token is None and table.has("page_token_param"):
        as_given = " (the next page's URL is fetched as given)" if url is not None else ""
        raise table.error(
            "page_token_param", f"names a cursor's parameter; with {way} there is none{as_given}"
        )
    if named is None and table.has("end_values"):
        raise table.error(
            "end_values",
            "only meaningful with next_page_token or next_page_url "
            "(an offset-paged result ends as last_page says, a numbered one at page_count)",
        )
    spec = ResultPages(
        next_page_token=token,
        page_token_param=table.str_or("page_token_param", DEFAULT_PAGE_TOKEN_PARAM),
        end_values=frozenset(table.strings("end_values")),
        max_pages=table.int_or(
            "max_pages", DEFAULT_RESULT_PAGES, minimum=2, maximum=MAX_RESULT_PAGES
        ),
        next_page_url=url,
        page_token_body_field=in_body,
    )
    if page_param is not None:
        spec = dataclasses.replace(spec, **_result_numbers(table, source, fmt, path, page_param))
    else:
        for key in _PAGE_NUMBER_ONLY:
            if table.has(key):
                raise table.error(key, "only meaningful with page_param")
    if offset_param is None:
        for key in _OFFSET_ONLY:
            if table.has(key):
                size = key.startswith("page_size")
                hint = " (a page size goes in result.path's query)" if size else ""
                raise table.error(
                    key,
                    f"only meaningful with offset_param; with {way} each page names the next{hint}",
                )
    else:
        spec = dataclasses.replace(
            spec, **_result_offsets(table, source, fmt, items, path, offset_param)
        )
    table.finish()
    return spec


# Keys of `[result.pages]` that only offset paging reads.
_OFFSET_ONLY = ("page_size", "page_size_param", "last_page", "total")
# ...and that only a result paged by number reads.
_PAGE_NUMBER_ONLY = ("first_page", "page_count")


def _result_numbers(
    table: _Table,
    source: ResultSource | None,
    fmt: ResultFormat,
    path: Template | None,
    page_param: str,
) -> dict[str, Any]:
    """The keys of `[result.pages]` paged by number (Snowflake's `?partition=N`).

    The first page is asked for by its number too (a default page is a guess), so
    `first_page` is required, as a numbered `[lookup]`'s; the count of pages is
    read on it (later pages may carry the data alone)."""
    first = table.opt_int("first_page", minimum=0, maximum=1)
    if first is None:
        raise table.error("first_page", "required with page_param: 0 or 1 (a wrong guess skips)")
    count = table.path("page_count", RESPONSE)
    if count is None:
        raise table.error(
            "page_count",
            "required with page_param: where the first page says how many pages there are",
        )
    if count.source is PathSource.BODY and fmt is not ResultFormat.JSON:
        # never read as one JSON document: the count was never found, the first
        # page always the last (as offset paging's `total`)
        raise table.error("page_count", f"a {fmt} page has no body path: use header:NAME")
    if page_param in _query_names(
        path.text if path is not None and source is ResultSource.PATH else None
    ):
        raise table.error("page_param", f"result.path already sets ?{page_param}=: set it once")
    return {"page_param": page_param, "first_page": first, "page_count": count}


def _result_offsets(
    table: _Table,
    source: ResultSource | None,
    fmt: ResultFormat,
    items: ValuePath | None,
    path: Template | None,
    offset_param: str,
) -> dict[str, Any]:
    """The offset-paging keys of `[result.pages]`, with `[lookup]`'s rules.

    Each page's items are counted to know the next offset (and a short page),
    so a json page needs `result.items`; an empty page always ends the result.
    """
    if fmt is ResultFormat.JSON and items is None:
        raise table.error(
            "offset_param",
            'needs result.items to count a json page\'s items ("" when the page is the list)',
        )
    page_size = table.opt_int("page_size", maximum=MAX_RESULT_PAGE_SIZE)
    page_size_param = table.str_or("page_size_param", "page_size")
    if table.has("page_size_param") and page_size is None:
        raise table.error("page_size_param", "meaningless without page_size")
    if page_size is not None and page_size_param == offset_param:
        raise table.error(
            "page_size_param", "is offset_param too: each needs a query parameter of its own"
        )
    params = [offset_param] + ([page_size_param] if page_size is not None else [])
    fixed = _query_names(path.text if path is not None and source is ResultSource.PATH else None)
    clash = [p for p in params if p in fixed]
    if clash:
        raise table.error(
            "offset_param" if clash[0] == offset_param else "page_size_param",
            f"result.path already sets ?{clash[0]}=: set it in one place",
        )
    total = table.path("total", RESPONSE)
    if total is not None and total.source is PathSource.BODY and fmt is not ResultFormat.JSON:
        raise table.error("total", f"a {fmt} page has no body path: use header:NAME")
    last_page = table.choice("last_page", LastPage, LastPage.TOTAL if total else LastPage.EMPTY)
    _check_last_page(table, last_page, total, page_size)
    return {
        "offset_param": offset_param,
        "page_size": page_size,
        "page_size_param": page_size_param,
        "last_page": last_page,
        "total": total,
    }


def _empty_without_url(
    table: _Table, status: StatusSpec, source: ResultSource, fmt: ResultFormat, expect: ResultExpect
) -> bool:
    """`result.empty_without_url`: no URL and counts of 0 is an empty result.

    Only where an empty document is one (not JSON), and where nothing would
    be checked that only a fetch carries (a required checksum).
    """
    if not table.boolean("empty_without_url", False):
        return False
    if source is not ResultSource.URL:
        raise table.error("empty_without_url", f"only with source = url, not {source}")
    if not status.counts_total:
        raise table.error(
            "empty_without_url", "needs status.counts_total (the count that says it is empty)"
        )
    _refuse_unemptiable(table, "empty_without_url", fmt, expect)
    return True


def _empty_states(
    table: _Table, status: StatusSpec, source: ResultSource, fmt: ResultFormat, expect: ResultExpect
) -> frozenset[str]:
    """`result.empty_states`: raw states that end a job well with nothing to collect
    (Intercom's export `no_data`): an empty result, never fetched. Each a state the
    map reads as succeeded; only where an empty document is one and a fetch would be
    made at all."""
    key = "empty_states"
    states = frozenset(table.strings(key))
    if not states:
        return states
    if source not in _FETCHED_SOURCES:
        raise table.error(key, f"only where the result is fetched (url, path, files), not {source}")
    for raw in sorted(states):
        if status.state_map.get(raw) is not RemoteState.SUCCEEDED:
            raise table.error(key, f"'{raw}' is not a state status.state_map reads as succeeded")
    _refuse_unemptiable(table, key, fmt, expect)
    return states


def _refuse_unemptiable(table: _Table, key: str, fmt: ResultFormat, expect: ResultExpect) -> None:
    """An empty result is stored only where an empty document is one (not JSON, a
    CSV without a header row) and nothing only a fetch carries is required (a
    checksum)."""
    if fmt is ResultFormat.JSON:
        raise table.error(key, "an empty document is no JSON: jsonl, csv, text")
    csv_options = table.data.get("csv")
    header = csv_options.get("header", True) if isinstance(csv_options, Mapping) else True
    if fmt is ResultFormat.CSV and header is not False:
        raise table.error(key, "an empty CSV has no header row: set result.csv.header = false")
    if expect.checksum is not Checksum.NONE and expect.checksum_options.required:
        raise table.error(key, "an empty result has no checksum (set checksum.required = false)")


# Sources whose result is fetched by a call of its own, whose answer can fail.
_FETCHED_SOURCES = (ResultSource.URL, ResultSource.PATH, ResultSource.FILES)


def _failed(table: _Table | None, source: ResultSource | None) -> ResultFailed | None:
    """`[result.failed]`: the result fetch's answers that say the job failed.

    Only an error answer can: a 2xx is the result, and 429 asks us to wait,
    which says nothing about the job.
    """
    if table is None:
        return None
    if source not in _FETCHED_SOURCES:
        raise table.error(None, f"nothing is fetched with source = {source}")
    statuses = table.statuses("statuses", ())
    if not statuses:
        raise table.error("statuses", "required: the answers that mean the job failed")
    if any(not 400 <= code <= 599 or code in _NEVER_A_VERDICT for code in statuses):
        raise table.error(
            "statuses",
            "only 4xx/5xx codes other than 429, 502, 503 and 504 (a wait or a gateway's "
            "answer, never the job's) can say so",
        )
    spec = ResultFailed(
        statuses=statuses,
        error=table.path("error", RESPONSE),
        error_code=table.path("error_code", RESPONSE),
        error_message=table.path("error_message", RESPONSE),
    )
    if any(code >= 500 for code in statuses) and not spec.markers:
        raise table.error(
            "statuses",
            "a 5xx is the job's verdict only when it carries the provider's error: name "
            "where (error, error_code or error_message), or a proxy's 500 would fail the job",
        )
    table.finish()
    return spec


# Answers that are back-pressure or a gateway's, whatever a provider's job did.
_NEVER_A_VERDICT = frozenset({429, 502, 503, 504})


def _allowed_hosts(table: _Table) -> tuple[str, ...]:
    """result.allowed_hosts, each a bare host (`api.internal`, `10.0.0.5`, `::1`) or
    one on a port of its own (`files.internal:9000`, `[::1]:8443`)."""
    return _host_entries(table, "allowed_hosts")


def _host_entries(table: _Table, key: str) -> tuple[str, ...]:
    """A list of hosts the operator names (`requests.host_entry`), each checked."""
    hosts: list[str] = []
    for entry in table.strings(key):
        try:
            hosts.append(host_entry(entry))
        except ValueError as exc:
            shown = entry if len(entry) <= 100 else entry[:100] + "..."
            raise table.error(key, f"{shown!r}: {exc}") from None
    return tuple(hosts)


def _result_format(table: _Table, source: ResultSource, base64: bool = False) -> ResultFormat:
    fmt = table.choice("format", ResultFormat, ResultFormat.JSON)
    if fmt.is_json:
        return fmt
    if source is ResultSource.NONE:
        raise table.error("format", f"'{fmt}' with source = none: there is no result document")
    if fmt is ResultFormat.BINARY and source is ResultSource.INLINE and not base64:
        raise table.error(
            "format",
            "'binary' with source = inline: a JSON response cannot carry raw bytes "
            "(base64 text it can: result.base64)",
        )
    for key in _JSON_ITEM_KEYS:
        if key in table.data:
            hint = " (csv rows are items: see result.csv)" if fmt is ResultFormat.CSV else ""
            raise table.error(key, f"only with format = json or jsonl, not '{fmt}'{hint}")
    for key in _CSV_KEYS:
        if key in table.data:
            where = "in the [result.csv] table" if fmt is ResultFormat.CSV else "format = csv"
            raise table.error(key, f"a CSV option: it belongs {where}")
    return fmt


def _csv(table: _Table | None, fmt: ResultFormat) -> CsvOptions | None:
    if fmt is not ResultFormat.CSV:
        if table is not None:
            raise table.error(None, f"only with format = csv, not '{fmt}'")
        return None
    if table is None:
        return CsvOptions()
    header = table.boolean("header", True)
    delimiter = table.raw("delimiter")  # a tab is a fine delimiter: not str_or (strips)
    if delimiter is _MISSING:
        delimiter = ","
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
        raise table.error("delimiter", "must be one character, not a quote or a line break")
    required = table.strings("required_columns")
    if required and not header:
        raise table.error("required_columns", "needs header = true (columns are found by name)")
    failed_values = table.scalars("failed_values")
    options = CsvOptions(
        header=header,
        delimiter=delimiter,
        required_columns=required,
        id_column=_csv_column(table, "id_column", header),
        failed_column=_csv_column(table, "failed_column", header),
        failed_values=failed_values,
        error_column=_csv_column(table, "error_column", header),
    )
    if failed_values and options.failed_column is None:
        raise table.error("failed_values", "needs failed_column (the column they are read from)")
    if options.error_column is not None and options.failed_column is None:
        raise table.error("error_column", "needs failed_column (which rows failed)")
    table.finish()
    return options


def _csv_column(table: _Table, key: str, header: bool) -> CsvColumn | None:
    value = table.raw(key)
    if value is _MISSING:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise table.error(key, "must be a column name or a 0-based column index")
    if isinstance(value, int):
        if value < 0:
            raise table.error(key, "a column index must be at least 0")
        return value
    if not value:
        raise table.error(key, "must be a non-empty column name")
    if not header:
        raise table.error(key, f"'{value}' names a column, but header = false: use its index")
    return value


def _expect(
    table: _Table | None, status: StatusSpec, source: ResultSource, fmt: ResultFormat
) -> ResultExpect:
    if table is None:
        return ResultExpect((), (), DEFAULT_MAX_RESULT_BYTES, Checksum.NONE, False, None)
    content_types = tuple(t.lower() for t in table.strings("content_types"))
    for media in content_types:
        if "/" not in media or ";" in media:
            raise table.error("content_types", f"'{media}' is not a bare media type")
    checksum, options = _checksum(table)
    if checksum is not Checksum.NONE and source is ResultSource.INLINE:
        raise table.error("checksum", "inline results carry no digest header")
    count_text = table.opt_str("item_count")
    from_status = count_text == "from_status_counts"
    if from_status and not (status.counts_total or status.counts_succeeded):
        raise table.error("item_count", "'from_status_counts' needs status.counts_* paths")
    if count_text is not None and fmt in (ResultFormat.TEXT, ResultFormat.BINARY):
        raise table.error("item_count", f"a {fmt} result has no items to count")
    count_path = None
    if count_text is not None and not from_status:
        if not fmt.is_json:
            raise table.error(
                "item_count", f"a path reads JSON; with format = {fmt} use 'from_status_counts'"
            )
        count_path = table.parse_path_value("item_count", count_text, BODY)
    required_fields = table.paths("required_fields", BODY)
    if required_fields and not fmt.is_json:
        hint = " (use result.csv.required_columns)" if fmt is ResultFormat.CSV else ""
        raise table.error("required_fields", f"reads JSON fields, not a {fmt} result{hint}")
    spec = ResultExpect(
        content_types=content_types,
        required_fields=required_fields,
        max_bytes=table.int_or("max_bytes", DEFAULT_MAX_RESULT_BYTES, maximum=MAX_RESULT_BYTES),
        checksum=checksum,
        item_count_from_status=from_status,
        item_count=count_path,
        checksum_options=options,
    )
    table.finish()
    return spec


_CHECKSUM_ONLY = {"header": Checksum.HEADER, "field": Checksum.STATUS}


def _checksum(expect: _Table) -> tuple[Checksum, ChecksumOptions]:
    """`checksum = "content-digest"` (shorthand, required) or a table of options."""
    if not isinstance(expect.data.get("checksum"), Mapping):
        kind = expect.choice("checksum", Checksum, Checksum.NONE)
        if kind in (Checksum.HEADER, Checksum.STATUS):
            raise expect.error(
                "checksum", f"'{kind}' needs a table: {{ source = \"{kind}\", ... }}"
            )
        return kind, ChecksumOptions()
    table = expect.req_sub("checksum")
    source = table.choice("source", Checksum, None)
    for key, needs in _CHECKSUM_ONLY.items():
        if key in table.data and source is not needs:
            raise table.error(key, f"only with source = {needs}")
    header = table.opt_str("header")
    if source is Checksum.HEADER:
        if header is None:
            raise table.error("header", "required with source = header")
        if not _TOKEN.match(header):
            raise table.error("header", f"'{header}' is not a valid header name")
    field = table.path("field", RESPONSE)
    if source is Checksum.STATUS and field is None:
        raise table.error("field", "required with source = status (e.g. '/output_sha256')")
    explicit = source in (Checksum.HEADER, Checksum.STATUS)
    algorithm: ChecksumAlgorithm | None = None
    if table.has("algorithm") or explicit:
        algorithm = table.choice("algorithm", ChecksumAlgorithm, None)
    if algorithm is ChecksumAlgorithm.MD5 and source is Checksum.CONTENT_DIGEST:
        raise table.error("algorithm", "Content-Digest (RFC 9530) carries sha256 or sha512")
    if table.has("encoding") and not explicit:
        raise table.error("encoding", f"{source} has its own encoding (base64)")
    encoding = table.choice("encoding", ChecksumEncoding, ChecksumEncoding.HEX)
    required = table.boolean("required", True)
    if source is Checksum.NONE and len(table.data) > 1:
        extra = sorted(k for k in table.data if k != "source")[0]
        raise table.error(extra, "meaningless with source = none")
    table.finish()
    options = ChecksumOptions(
        algorithm=algorithm,
        encoding=encoding,
        header=header,
        status_field=field,
        required=required,
    )
    return source, options


def _errors(table: _Table | None, status: StatusSpec) -> ErrorsSpec | None:
    """`[result.errors]`: where the failed items' list is (the status's URL, or
    `path`) and how its pages read (JSON items, or CSV rows by column)."""
    if table is None:
        return None
    path = _job_path(table, required=False)
    if status.errors_url is None and path is None:
        raise table.error(
            None,
            "needs status.errors_url or a path with {job_id} (where the errors list is)",
        )
    fmt = table.choice("format", ResultFormat, ResultFormat.JSON)
    if fmt not in (ResultFormat.JSON, ResultFormat.CSV):
        raise table.error("format", f"'{fmt}': an errors list is read as json or csv")
    paging = {
        "next_page_token": table.path("next_page_token", RESPONSE),
        "page_token_param": table.str_or("page_token_param", DEFAULT_PAGE_TOKEN_PARAM),
        "page_size": table.opt_int("page_size"),
        "page_size_param": table.str_or("page_size_param", "page_size"),
        "end_values": frozenset(table.strings("end_values")),
    }
    if paging["end_values"] and paging["next_page_token"] is None:
        raise table.error("end_values", "needs next_page_token (the values it may hold)")
    spec = (
        _csv_errors(table, path, paging)
        if fmt is ResultFormat.CSV
        else _json_errors(table, path, paging)
    )
    table.finish()
    return spec


def _json_errors(table: _Table, path: Template | None, paging: dict[str, Any]) -> ErrorsSpec:
    return ErrorsSpec(
        items=table.req_path("items", BODY),
        item_index=table.path("item_index", BODY, "/index"),
        item_id=table.path("item_id", BODY),
        item_code=table.path("item_code", BODY, "/code"),
        item_message=table.path("item_message", BODY, "/message"),
        path=path,
        **paging,
    )


def _csv_errors(table: _Table, path: Template | None, paging: dict[str, Any]) -> ErrorsSpec:
    """CSV rows, each a failed item: its columns are named, as [result.csv]'s are;
    JSON paths into an item would address nothing."""
    for key in ("items", "item_index", "item_code"):
        if table.has(key):
            raise table.error(key, "only with format = json (csv rows are the items)")
    message = _csv_column(table, "item_message", header=True)
    if message is None:
        raise table.error("item_message", "required with format = csv (the column of the error)")
    return ErrorsSpec(
        items=None,
        item_index=None,
        item_id=None,
        item_code=None,
        item_message=None,
        path=path,
        format=ResultFormat.CSV,
        id_column=_csv_column(table, "item_id", header=True),
        message_column=message,
        **paging,
    )


def _lookup(table: _Table | None, create: CreateSpec, own_build: bool = False) -> LookupSpec:
    """`[lookup]`; `own_build`: a plugin builds its requests (it may name our
    reference where no key can, a header), so a direct read naming none is its own."""
    unsupported = "the provider offers no way to find a job by our reference"
    if table is None:
        return LookupSpec(
            supported=False,
            reason=unsupported,
            kind=LookupKind.LIST,
            method="GET",
            path=None,
            query_param=None,
            list=None,
            match=None,
            job_id=None,
            next_page_token=None,
            has_more=None,
            page_token_param=DEFAULT_PAGE_TOKEN_PARAM,
            max_pages=DEFAULT_LOOKUP_PAGES,
            not_found_means_absent=False,
        )
    supported = table.boolean("supported", True)
    kind = table.choice("kind", LookupKind, LookupKind.LIST)
    listed = kind is LookupKind.LIST
    default_job_id = create.job_id.text if create.job_id is not None else None
    if listed and create.job_id is not None and create.job_id.source is not PathSource.BODY:
        default_job_id = None
    spec = LookupSpec(
        supported=supported,
        reason=table.str_or("reason", unsupported),
        kind=kind,
        method=table.method("method", "GET"),
        path=table.template("path", {"client_reference", "idempotency_token"}, required=supported),
        query_param=table.opt_str("query_param"),
        list=table.path("list", BODY),
        match=table.path("match", BODY),
        job_id=table.path("job_id", BODY if listed else RESPONSE, default_job_id),
        next_page_token=table.path("next_page_token", RESPONSE),
        has_more=table.path("has_more", BODY),
        page_token_param=table.str_or("page_token_param", DEFAULT_PAGE_TOKEN_PARAM),
        max_pages=table.int_or("max_pages", DEFAULT_LOOKUP_PAGES),
        not_found_means_absent=table.boolean("not_found_means_absent", False),
        status_url=table.path("status_url", BODY if listed else RESPONSE),
        next_page_url=table.path("next_page_url", RESPONSE),
        body=_json_body(table, "body", LOOKUP_VALUES),
    )
    if spec.body is not None and spec.method == "GET":
        raise table.error("body", "a GET carries no body: set method (POST)")
    spec = dataclasses.replace(spec, page_token_body_field=_lookup_token_in_body(table, spec))
    _check_next_page_url(table, spec)
    spec = dataclasses.replace(spec, **_lookup_paging(table, spec))
    if supported and listed:
        for key in ("list", "match", "job_id"):
            if getattr(spec, key) is None:
                raise table.error(key, "required with kind = list")
    if supported and not listed and spec.job_id is None:
        raise table.error("job_id", "required with kind = get")
    if supported and not listed and not spec.filtered and not own_build:
        # A direct read that names nothing of ours answers whatever is there (a
        # fixed resource, the latest job): adopted as our job, it may be another's
        # (Fivetran's connector, read at a fixed path after a sync named no job).
        raise table.error(
            "path",
            "a kind = get lookup must name our reference ({client_reference} or "
            "{idempotency_token} in its path or body, or query_param): a read naming "
            "neither answers a job that may not be ours, and it would be adopted",
        )
    if listed and spec.not_found_means_absent:
        raise table.error("not_found_means_absent", "only meaningful with kind = get")
    table.finish()
    return spec


def _lookup_token_in_body(table: _Table, spec: LookupSpec) -> ValuePath | None:
    """`lookup.page_token_body_field`: the cursor written into the lookup's body
    (a POST list whose token travels there), so a token, a body and no parameter."""
    in_body = _written(table, "page_token_body_field")
    if in_body is None:
        return None
    if spec.next_page_token is None:
        raise table.error("page_token_body_field", "only with next_page_token (the token written)")
    if spec.body is None:
        raise table.error("page_token_body_field", "needs body (the object it is written in)")
    if table.has("page_token_param"):
        raise table.error(
            "page_token_param", "contradicts page_token_body_field: the token goes in one place"
        )
    _check_token_slot(table, "page_token_body_field", spec.body, in_body)
    return in_body


def _check_token_slot(table: _Table, key: str, body: Any, path: ValuePath) -> None:
    """A page token's body path (`page_token_body_field`) through members `body`
    holds as objects, or absent (then made). Written through a value that is no
    object (a string, a list), the token raised at the second page's build, each
    time the operation was claimed: a lost create past the first page never found,
    a paged result never collected. Refused here."""
    node: Any = body
    for name in writable_keys(path)[:-1]:
        node = node.get(name) if isinstance(node, Mapping) else None
        if node is None:
            return
        if not isinstance(node, Mapping):
            raise table.error(
                key, f"'{path.text}': body's '{name}' holds no object to write the token in"
            )


def _check_next_page_url(table: _Table, spec: LookupSpec) -> None:
    """`lookup.next_page_url`: the next page's whole URL is the cursor, so no token
    and no parameter to send one in beside it."""
    if spec.next_page_url is None:
        return
    if spec.kind is not LookupKind.LIST:
        raise table.error("next_page_url", "only meaningful with kind = list")
    if spec.next_page_token is not None:
        raise table.error(
            "next_page_url",
            "contradicts next_page_token: the next page is named by a URL or by a token",
        )
    if table.has("page_token_param"):
        raise table.error(
            "page_token_param", "names a cursor's parameter; next_page_url is the whole URL"
        )


# Keys that only numbered paging (page_param or offset_param) reads.
_NUMBERED_ONLY = ("first_page", "last_page", "total")


def _lookup_paging(table: _Table, spec: LookupSpec) -> dict[str, Any]:
    """The numbered-paging keys of [lookup], refused when they contradict each other.

    A contradiction refused here would otherwise be a lookup that reads the
    wrong pages, and an absence it never proved is a second paid job.
    """
    page_param = table.opt_str("page_param")
    offset_param = table.opt_str("offset_param")
    page_size = table.opt_int("page_size", maximum=10_000)
    page_size_param = table.str_or("page_size_param", "page_size")
    if table.has("page_size_param") and page_size is None:
        raise table.error("page_size_param", "meaningless without page_size")
    if page_param is None and offset_param is None:
        for key in _NUMBERED_ONLY:
            if table.has(key):
                raise table.error(key, "only meaningful with page_param or offset_param")
        return {"page_size": page_size, "page_size_param": page_size_param}
    numbered = "page_param" if page_param is not None else "offset_param"
    _refuse_mixed_paging(table, spec, numbered, offset_param if page_param else None)
    params = [p for p in (page_param, offset_param, spec.query_param) if p is not None]
    if page_size is not None:
        params.append(page_size_param)
    _refuse_shared_params(table, spec, numbered, params)
    total = table.path("total", RESPONSE)
    last_page = table.choice("last_page", LastPage, LastPage.TOTAL if total else LastPage.EMPTY)
    _check_last_page(table, last_page, total, page_size)
    return {
        "page_param": page_param,
        "offset_param": offset_param,
        "first_page": _first_page(table, page_param),
        "page_size": page_size,
        "page_size_param": page_size_param,
        "last_page": last_page,
        "total": total,
    }


def _refuse_mixed_paging(
    table: _Table, spec: LookupSpec, numbered: str, offset_param: str | None
) -> None:
    """One way to the next page: a cursor, a page number or an offset, never two."""
    if spec.kind is not LookupKind.LIST:
        raise table.error(numbered, "only meaningful with kind = list")
    if offset_param is not None:
        raise table.error(
            "offset_param", "contradicts page_param: a list pages by number or by offset"
        )
    if spec.next_page_token is not None or spec.next_page_url is not None:
        cursor = "next_page_token" if spec.next_page_token is not None else "next_page_url"
        raise table.error(numbered, f"contradicts {cursor}: a list pages by cursor or by number")
    if spec.has_more is not None:
        raise table.error(
            "has_more", f"only meaningful with next_page_token (with {numbered}, see last_page)"
        )
    if table.has("page_token_param"):
        raise table.error(
            "page_token_param",
            f"names a cursor's parameter; with {numbered} there is no cursor",
        )


def _refuse_shared_params(
    table: _Table, spec: LookupSpec, numbered: str, params: list[str]
) -> None:
    """Each paging value needs a query parameter of its own, not one the path sets."""
    if len(set(params)) < len(params):
        raise table.error(numbered, "names a query parameter another lookup key already uses")
    fixed = _query_names(spec.path.text if spec.path is not None else None)
    clash = sorted(fixed & set(params))
    if clash:
        raise table.error(
            numbered, f"path already sets ?{clash[0]}=: each page would send it twice"
        )


def _check_last_page(
    table: _Table, last_page: LastPage, total: ValuePath | None, page_size: int | None
) -> None:
    if last_page is LastPage.TOTAL and total is None:
        raise table.error("total", 'required with last_page = "total" (the list\'s item count)')
    if last_page is not LastPage.TOTAL and total is not None:
        raise table.error("total", f'contradicts last_page = "{last_page}"; set one of them')
    if last_page is LastPage.SHORT and page_size is None:
        raise table.error(
            "page_size", 'required with last_page = "short" (a page shorter than it is the last)'
        )


def _first_page(table: _Table, page_param: str | None) -> int:
    """The number of the first page: required, since a wrong guess skips page 0 or 1."""
    if page_param is None:
        if table.has("first_page"):
            raise table.error("first_page", "only meaningful with page_param (offsets start at 0)")
        return 0
    first = table.opt_int("first_page", minimum=0, maximum=1)
    if first is None:
        raise table.error(
            "first_page", "required with page_param (0 or 1: the number of the first page)"
        )
    return first


def _webhooks(table: _Table | None, status: StatusSpec) -> WebhookSpec | None:
    if table is None:
        return None
    if not table.boolean("supported", True):
        # A preset's webhooks turned off (Groq's batches under openai_batch: Groq
        # sends none): its other keys are not read, so none of them can take a
        # secret meant for another provider, or be refused for a missing one.
        return None
    scheme = table.choice("scheme", WebhookScheme, None)
    optional = table.boolean("optional", False)
    options = table.mapping("options")
    try:
        signatures.check_options(scheme.value, options)
    except ValueError as exc:
        raise table.error("options", str(exc)) from None
    secrets = _webhook_secrets(table, optional)
    usable = functools.partial(signatures.check_secret, scheme.value, options=options)
    for secret in secrets:
        _check_secret(table, secret, usable, ("secrets_env", "secrets_file"))
    operation_id = _webhook_operation_id(table)
    client_reference = table.path("client_reference", WEBHOOK)
    job_id = table.path("job_id", WEBHOOK)
    if operation_id is None and client_reference is None and job_id is None:
        raise table.error(
            "job_id",
            "required (or operation_id, or client_reference): a webhook must name the "
            "operation or job it is about",
        )
    state_map = {**status.state_map, **_state_map(table, "state_map")}
    spec = WebhookSpec(
        scheme=scheme,
        options=options,
        secrets=secrets,
        # at most a day: a replay window past the dedupe rows' retention would let
        # a captured delivery be replayed once its row is purged
        tolerance_seconds=table.int_or("tolerance_seconds", 300, maximum=86400),
        event_id=table.path("event_id", WEBHOOK),
        job_id=job_id,
        state=table.path("state", WEBHOOK),
        state_map=state_map,
        operation_ref=operation_id,
        thin=table.boolean("thin", False),
        client_reference=client_reference,
        challenge=_challenge(table, scheme, options),
        get_challenge=_get_challenge(table, optional),
        events=_events_path(table),
        allowed_origins=_allowed_origins(table),
    )
    if spec.events is None and (
        spec.challenge is not None and spec.challenge.answer is ChallengeAnswer.EVENT_GRID
    ):
        raise table.error(
            "challenge",
            '"event_grid" is answered in a batch: Event Grid posts a list; set events = ""',
        )
    _no_path_reads_the_token(table, spec)
    table.finish()
    return spec if secrets else None


# Where each sender's challenge is, as it documents it: (when, equals, token).
_CHALLENGES = {
    ChallengeAnswer.ZOOM: ("/event", "endpoint.url_validation", "/payload/plainToken"),
    ChallengeAnswer.SLACK: ("/type", "url_verification", "/challenge"),
    # read in the batch's one element (`events`): Event Grid posts a list
    ChallengeAnswer.EVENT_GRID: (
        "/eventType",
        "Microsoft.EventGrid.SubscriptionValidationEvent",
        "/data/validationCode",
    ),
}
# Schemes whose secret is the text the sender shares, the key Zoom's answer is an
# HMAC under (`hmac` only with key_encoding raw; a public key is no HMAC key).
_TEXT_SECRETS = frozenset(
    {
        WebhookScheme.SLACK,
        WebhookScheme.STRIPE,
        WebhookScheme.GITHUB,
        WebhookScheme.SHOPIFY,
        WebhookScheme.GENERIC_HMAC,
        WebhookScheme.STATIC_HEADER,
        WebhookScheme.TWILIO,
        WebhookScheme.MAILGUN,
    }
)


def _challenge(
    table: _Table, scheme: WebhookScheme, options: Mapping[str, Any]
) -> WebhookChallenge | None:
    """`challenge = "zoom"` (or "slack"), or a table naming `answer` with `when`,
    `equals` and `token` where the sender puts them elsewhere."""
    if not table.has("challenge"):
        return None
    sub = table.sub("challenge") if not isinstance(table.raw("challenge"), str) else None
    answer = (sub or table).choice("answer" if sub else "challenge", ChallengeAnswer, None)
    when, equals, token = _CHALLENGES[answer]
    when_path: ValuePath | None = parse_path(when)
    token_path: ValuePath | None = parse_path(token)
    if sub is not None:
        when_path = sub.path("when", BODY, when)
        equals = sub.str_or("equals", equals)
        token_path = sub.path("token", BODY, token)
        sub.finish()
    assert when_path is not None and token_path is not None
    text_secret = scheme in _TEXT_SECRETS or (
        scheme is WebhookScheme.HMAC and options.get("key_encoding", "raw") == "raw"
    )
    if answer is ChallengeAnswer.ZOOM and scheme is WebhookScheme.MAILGUN:
        # Mailgun signs a timestamp and a token, not the body: a signature copied
        # onto a challenge whose plainToken is a later timestamp and token verifies,
        # and its answer, an HMAC under the same key, is Mailgun's signature of them
        raise table.error(
            "challenge",
            '"zoom" under scheme "mailgun" would sign for anyone: Mailgun\'s signature '
            "does not cover the body, so a copied one would carry any plainToken, and "
            "the answer is an HMAC under Mailgun's key (a valid signature)",
        )
    if answer is ChallengeAnswer.ZOOM and not text_secret:
        raise table.error(
            "challenge",
            f'"zoom" answers with an HMAC under the secret\'s text; scheme "{scheme}" '
            "holds no such secret (a public key, or an encoded one)",
        )
    return WebhookChallenge(answer, when_path, equals, token_path)


# A query parameter's name as senders spell theirs (`challenge`, `hub.challenge`).
_QUERY_PARAM = re.compile(r"[A-Za-z0-9._~-]{1,64}")


def _get_challenge(table: _Table, optional: bool) -> GetChallenge | None:
    """`get_challenge = "challenge"`: the query parameter of an unsigned GET whose
    value is echoed (Dropbox checks an endpoint so before it delivers). A table
    also names the parameter carrying the token the sender was given
    (`verify_token`, with `verify_token_env` or `verify_token_file`: Meta's and
    Strava's `hub.verify_token`) and how the value is given back (`answer`)."""
    if not table.has("get_challenge"):
        return None
    raw = table.raw("get_challenge")
    if isinstance(raw, str):
        return GetChallenge(_query_param(table, "get_challenge"))
    if not isinstance(raw, Mapping):
        raise table.error(
            "get_challenge", "must be a query parameter's name, or a table with param"
        )
    sub = table.sub("get_challenge")
    if sub is None:  # present, so never: `has` said so
        return None
    param = _query_param(sub, "param", required=True)
    verify_param = _query_param(sub, "verify_token") if sub.has("verify_token") else None
    answer = sub.choice("answer", GetAnswer, GetAnswer.TEXT)
    method = _challenge_method(sub)
    token: Secret | None = None
    if verify_param is not None:
        if verify_param == param:
            raise sub.error("verify_token", "must differ from param")
        token = _secret(sub, "verify_token_env", "verify_token_file", optional)
        if token is None:
            # optional webhooks whose token is not set: kept, so that every GET
            # check is refused (bad_verify_token) and `providers check` says why
            sub.finish()  # every key read (answer too): only an unknown one is refused
            return GetChallenge(param, verify_param, None, answer, method)
        _check_verify_token(sub, token)
    elif sub.has("verify_token_env") or sub.has("verify_token_file"):
        raise sub.error("verify_token", "required with verify_token_env or verify_token_file")
    sub.finish()
    return GetChallenge(param, verify_param, token, answer, method)


def _challenge_method(table: _Table) -> str:
    """`method = "POST"`: the check comes as a POST carrying the parameter
    (Microsoft Graph's and Azure AI Speech's `?validationToken=`); "GET" by default."""
    method = table.opt_str("method")
    if method is None:
        return "GET"
    if method not in ("GET", "POST"):
        raise table.error("method", 'must be "GET" or "POST"')
    return method


def _query_param(table: _Table, key: str, required: bool = False) -> str:
    name = table.req_str(key) if required else table.opt_str(key)
    if name is None or _QUERY_PARAM.fullmatch(name) is None:
        raise table.error(
            key, "must be a query parameter's name: letters, digits, '.', '_', '~', '-'"
        )
    return name


def _check_verify_token(table: _Table, token: Secret) -> None:
    """The token is compared with a query parameter's decoded value: text a URL can
    carry, never empty (an empty one would match a GET that names none)."""
    _check_secret(table, token, _usable_verify_token, ("verify_token_env", "verify_token_file"))


def _usable_verify_token(value: str) -> None:
    """Raises ValueError saying why `value` cannot be a GET challenge's verify token."""
    if not 1 <= len(value) <= 256:
        raise ValueError("the verify token must be 1 to 256 characters")
    if not value.isprintable():
        raise ValueError("the verify token holds a line break or another unprintable character")


def _no_path_reads_the_token(table: _Table, spec: WebhookSpec) -> None:
    """A `query:` path naming the token's own parameter would store the token as the
    event's job id, reference or event id."""
    token = spec.options["query"] if spec.token_in_url else None
    paths = {
        "event_id": spec.event_id,
        "job_id": spec.job_id,
        "state": spec.state,
        "operation_id": spec.operation_ref,
        "client_reference": spec.client_reference,
    }
    for key, path in paths.items():
        if token and path is not None and path.source is PathSource.QUERY and path.name == token:
            raise table.error(key, f"reads query parameter {token!r}, the token: it is no id")


# A sender's origin as CloudEvents' WebHook-Request-Origin names it: a DNS name
# (Event Grid's "eventgrid.azure.net"), perhaps with a port.
_ORIGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?")


def _allowed_origins(table: _Table) -> tuple[str, ...]:
    """`allowed_origins`: the senders whose CloudEvents OPTIONS handshake is answered,
    as host names (compared without case), or "*" for any."""
    origins = table.strings("allowed_origins")
    for origin in origins:
        if origin != "*" and not _ORIGIN.fullmatch(origin):
            raise table.error(
                "allowed_origins",
                f"{origin[:64]!r} is no host name (as WebHook-Request-Origin names a sender, "
                'e.g. eventgrid.azure.net) nor "*"',
            )
    return tuple(origin.lower() for origin in origins)


def _events_path(table: _Table) -> ValuePath | None:
    """`events`: where a batch delivery's list of events is, a plain body path.

    A selector or ``[*]`` would pick one element or read through them all:
    the path names the list itself. `"/"` is refused with the spelling the
    writer most likely meant: as a JSON pointer it names an object's member
    called "", not the body.
    """
    path = table.path("events", BODY)
    if path is None:
        return None
    if path.text == "/":
        raise table.error(
            "events", '\'/\' names an object\'s member ""; the body itself is "" (a JSON pointer)'
        )
    if not all(isinstance(segment, str) for segment in path.segments):
        raise table.error(
            "events", f"'{path.text}' must name the list of events itself: no selector, no [*]"
        )
    return path


def _webhook_operation_id(table: _Table) -> ValuePath | None:
    """`operation_id`, or `operation_ref` (its former name): one of them, not both.

    When one of the two comes from a preset and the other from the user, the
    user's overrides the preset's, as any key would.
    """
    new, old = table.has("operation_id"), table.has("operation_ref")
    if new and old:
        if table.from_preset("operation_id") and not table.from_preset("operation_ref"):
            return table.path("operation_ref", WEBHOOK)
        if table.from_preset("operation_ref") and not table.from_preset("operation_id"):
            return table.path("operation_id", WEBHOOK)
        raise table.error(
            "operation_ref",
            "operation_ref is the former name of operation_id: set one of them, not both",
        )
    return table.path("operation_ref" if old else "operation_id", WEBHOOK)


def _webhook_secrets(table: _Table, optional: bool) -> tuple[Secret, ...]:
    env_names = _str_or_list(table, "secrets_env")
    files = _str_or_list(table, "secrets_file")
    if not env_names and not files:
        raise table.error("secrets_env", "required (or secrets_file): webhooks are verified")
    loaded: list[Secret] = []
    missing: list[tuple[str, str]] = []
    sources = [("secrets_env", n) for n in env_names] + [("secrets_file", f) for f in files]
    for key, name in sources:
        try:
            if key == "secrets_env":
                loaded.append(Secret.from_env(name, table.ctx.env))
            else:
                loaded.append(FollowedSecret(Path(name)))
        except SecretError as exc:
            missing.append((key, str(exc)))
    if missing and not (optional and not loaded):
        key, problem = missing[0]
        raise table.error(key, problem)
    return tuple(loaded)


def _str_or_list(table: _Table, key: str) -> tuple[str, ...]:
    value = table.raw(key)
    if value is _MISSING:
        return ()
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise table.error(key, "must be a name or a list of names")
