"""The failure modes a simulated job can be scripted to exhibit, and their tuning.

Each script is one way a real provider misbehaves (see SPEC §5 and the seed
article); `params` in the create body tune the timings. Params are validated
strictly so a typo in a test ("duraton") fails loudly instead of silently
running with the default.

Scripts and params for faults a provider commits against its own promises:

- `retry_spawns_duplicate`: the first create's answer is lost and the retry is
  deduplicated (it gets the original job) yet a twin job also starts, so a
  consumer must find and deal with work nobody asked for.
- `odd_facts` with `odd`: status bodies carry values the published schema
  allows but naive parsers choke on (counts over the total, negative or 2**70
  counts, a 10**12 s poll hint, nulls, NUL and lone surrogates in the state).
- `partial_on_cancel`: a cancelled job still offers the items finished before
  the cancel, as OpenAI batches do, so "cancelled" is not "nothing to fetch".
- `create_retry_after` (create_5xx only): the create 503 carries Retry-After,
  so a client that retries a create too early can be caught doing it.
- `accept_retry_after`: the 202 that accepts the job carries Retry-After, an
  Azure-style "read the status after this long" (not back-pressure), so a
  client that reads the job sooner (a webhook woke it, say) is caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class Script(StrEnum):
    SUCCESS = "success"
    SLOW = "slow"
    LATE_FAILURE = "late_failure"
    NEVER_FINISHES = "never_finishes"
    PARTIAL = "partial"
    DUPLICATE_WEBHOOK = "duplicate_webhook"
    OUT_OF_ORDER_WEBHOOKS = "out_of_order_webhooks"
    WEBHOOK_BEFORE_CREATE_RESPONSE = "webhook_before_create_response"
    LOST_CREATE_RESPONSE = "lost_create_response"
    CREATE_5XX = "create_5xx"
    RATE_LIMITED = "rate_limited"
    CANCEL_RACE = "cancel_race"
    CANCEL_UNCONFIRMED = "cancel_unconfirmed"
    CANCELLABLE = "cancellable"
    EXPIRING_RESULT = "expiring_result"
    INVALID_RESULT = "invalid_result"
    CHECKSUM_MISMATCH = "checksum_mismatch"
    TOKEN_CONFLICT = "token_conflict"  # noqa: S105 (a script name, not a secret)
    NO_IDEMPOTENCY = "no_idempotency"
    REJECT = "reject"
    SYNC = "sync"
    RETRY_SPAWNS_DUPLICATE = "retry_spawns_duplicate"
    ODD_FACTS = "odd_facts"


class ResultShape(StrEnum):
    """How the result document is served: JSON items, CSV rows (failed rows marked), or bytes."""

    JSON = "json"
    CSV = "csv"
    BINARY = "binary"


class Odd(StrEnum):
    """Which schema-legal oddity an odd_facts job reports in its status body."""

    COMPLETED_EXCEEDS_TOTAL = "completed_exceeds_total"
    NEGATIVE_COUNTS = "negative_counts"
    HUGE_COUNTS = "huge_counts"
    HUGE_POLL_AFTER = "huge_poll_after"
    NULL_PROGRESS = "null_progress"
    NUL_STATE = "nul_state"


# Scripts whose first create response never reaches the client.
LOSES_FIRST_RESPONSE = frozenset(
    {Script.LOST_CREATE_RESPONSE, Script.TOKEN_CONFLICT, Script.RETRY_SPAWNS_DUPLICATE}
)


class ParamError(ValueError):
    """The create body asked for a script or params the simulator cannot honour."""


@dataclass(frozen=True)
class JobParams:
    """Validated tuning of one job; durations are already multiplied by time_scale."""

    duration: float = 1.0
    min_polls: int = 0
    total: int = 10
    failed: int = 0
    poll_after_seconds: int | None = None
    hang_seconds: float = 30.0
    limited_reads: int = 0
    retry_after: int = 1
    retry_after_date: bool = False
    status_code: int = 429
    cancel_delay: float = 0.2
    result_ttl: float = 0.5
    create_retry_after: int | None = None
    accept_retry_after: int | None = None
    partial_on_cancel: bool = False
    odd: Odd | None = None
    result_format: ResultShape = ResultShape.JSON


# Per-script departures from the JobParams defaults, applied before the
# caller's params so the caller can still override them.
_SCRIPT_DEFAULTS: dict[Script, dict[str, Any]] = {
    # Long enough that a poller must back off; poll_after tells it by how much.
    Script.SLOW: {"duration": 30.0, "poll_after_seconds": 5},
    # 498 of 500 succeeded: the seed's example of a batch that must not be
    # reported as a plain success.
    Script.PARTIAL: {"total": 500, "failed": 2},
    Script.RATE_LIMITED: {"limited_reads": 2},
}

# The job must already be finished when its webhooks go out, before the
# create response, whatever the caller asked for.
_SCRIPT_FORCED: dict[Script, dict[str, Any]] = {
    Script.WEBHOOK_BEFORE_CREATE_RESPONSE: {"duration": 0.0, "min_polls": 0},
    Script.SYNC: {"duration": 0.0, "min_polls": 0},
}

_FLOATS = frozenset({"duration", "hang_seconds", "cancel_delay", "result_ttl"})
_INTS = frozenset(
    {
        "min_polls",
        "total",
        "failed",
        "poll_after_seconds",
        "limited_reads",
        "retry_after",
        "status_code",
        "create_retry_after",
        "accept_retry_after",
    }
)
_BOOLS = frozenset({"retry_after_date", "partial_on_cancel"})
# String params and the values each accepts (any other is a 422, like a typo).
_STRINGS: dict[str, type[StrEnum]] = {"odd": Odd, "result_format": ResultShape}
# Params only one script reads: refused elsewhere, since there they would
# silently do nothing, the very mistake strict validation exists to catch.
_SCRIPT_ONLY: dict[str, Script] = {
    "odd": Script.ODD_FACTS,
    "create_retry_after": Script.CREATE_5XX,
}
# Params a script cannot run without: it has no sensible default to fall back on.
_SCRIPT_REQUIRES: dict[Script, str] = {Script.ODD_FACTS: "odd"}
# Simulated-world timings stretched by time_scale; hang_seconds is not, because
# it plays against the *client's* timeout, which the demo does not stretch.
_SCALED = ("duration", "cancel_delay", "result_ttl")
_BACKPRESSURE_CODES = frozenset({429, 503})


def parse_script(raw: object) -> Script:
    if raw is None:
        return Script.SUCCESS
    if not isinstance(raw, str):
        raise ParamError("'script' must be a string")
    try:
        return Script(raw)
    except ValueError:
        raise ParamError(f"unknown script {raw!r}") from None


def _check_choice(name: str, value: object) -> StrEnum:
    choices = _STRINGS[name]
    allowed = ", ".join(choice.value for choice in choices)
    if not isinstance(value, str):
        raise ParamError(f"param {name!r} must be a string, one of: {allowed}")
    try:
        return choices(value)
    except ValueError:
        raise ParamError(f"param {name!r} must be one of: {allowed}") from None


def _check_value(name: str, value: object) -> float | int | bool | StrEnum:
    if name in _STRINGS:
        return _check_choice(name, value)
    if name in _BOOLS:
        if not isinstance(value, bool):
            raise ParamError(f"param {name!r} must be a boolean")
        return value
    # bool is an int subclass; `true` as a duration is a mistake, not 1 second.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParamError(f"param {name!r} must be a number")
    if name in _INTS and not isinstance(value, int):
        raise ParamError(f"param {name!r} must be an integer")
    if value < 0:
        raise ParamError(f"param {name!r} must not be negative")
    return float(value) if name in _FLOATS else value


def _check_script_fit(script: Script, raw: Mapping[str, object]) -> None:
    """Refuse params this script ignores, and demand the ones it cannot do without."""
    for name, owner in _SCRIPT_ONLY.items():
        if name in raw and script is not owner:
            raise ParamError(f"param {name!r} only applies to script {owner.value!r}")
    required = _SCRIPT_REQUIRES.get(script)
    if required is not None and required not in raw:
        raise ParamError(f"script {script.value!r} needs param {required!r}")


def parse_params(script: Script, raw: object, time_scale: float) -> JobParams:
    """Merge script defaults with the caller's params, validate, and scale timings."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ParamError("'params' must be an object")
    unknown = sorted(set(raw) - _FLOATS - _INTS - _BOOLS - set(_STRINGS))
    if unknown:
        raise ParamError(f"unknown params: {', '.join(map(str, unknown))}")
    _check_script_fit(script, raw)
    values: dict[str, Any] = dict(_SCRIPT_DEFAULTS.get(script, {}))
    values.update({name: _check_value(name, value) for name, value in raw.items()})
    values.update(_SCRIPT_FORCED.get(script, {}))
    params = JobParams(**values)
    if params.failed > params.total:
        raise ParamError("param 'failed' must not exceed 'total'")
    if params.status_code not in _BACKPRESSURE_CODES:
        raise ParamError("param 'status_code' must be 429 or 503")
    if script is Script.INVALID_RESULT and params.result_format is ResultShape.BINARY:
        # bytes with no structure cannot be invalid; checksum_mismatch is the fault there
        raise ParamError("script 'invalid_result' needs a json or csv result_format")
    scaled = {name: getattr(params, name) * time_scale for name in _SCALED}
    return replace(params, **scaled)
