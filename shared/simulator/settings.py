"""Server-wide knobs of the simulated provider."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shared import signatures
from shared.simulator.shape import ApiShape, ShapeError

# Delays before each webhook redelivery. Real providers back off over minutes;
# the simulator keeps it short so tests observe retries in about a second.
DEFAULT_WEBHOOK_BACKOFF: tuple[float, ...] = (0.1, 0.3, 0.9)

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class SimulatorSettings:
    """How the whole simulated provider behaves (per-job behaviour comes from scripts).

    `time_scale` stretches every simulated job timing (duration, cancel delay,
    result TTL): the demo slows jobs down so a human can watch them, tests keep 1.
    """

    time_scale: float = 1.0
    webhook_url: str | None = None
    # repr=False: the signing secret must never appear in logs or reprs.
    webhook_secret: str | None = field(default=None, repr=False)
    honour_idempotency: bool = True
    status_latency: float = 0.0
    webhook_backoff: tuple[float, ...] = DEFAULT_WEBHOOK_BACKOFF
    # How webhooks are signed: Standard Webhooks by default, or any HMAC
    # scheme of shared.signatures with its options, so tests can describe the
    # same jobs through differently-shaped provider configs.
    webhook_scheme: str = "standard_webhooks"
    webhook_options: Mapping[str, object] = field(default_factory=dict)
    # Paths, field, state and header names on the wire (the canonical API by default).
    shape: ApiShape = field(default_factory=ApiShape)

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise ValueError("time_scale must be positive")
        if self.status_latency < 0:
            raise ValueError("status_latency must not be negative")
        secret = self.webhook_secret
        standard = self.webhook_scheme == "standard_webhooks"
        if standard and secret is not None and not secret.startswith("whsec_"):
            raise ValueError("webhook_secret must be a Standard Webhooks 'whsec_' secret")
        if self.webhook_scheme == "static_header":
            raise ValueError("webhook_scheme must sign (static_header signs nothing)")
        signatures.check_options(self.webhook_scheme, self.webhook_options)

    def with_shape_file(self, path: Path) -> SimulatorSettings:
        """These settings dressed as the API a shape file describes (see `read_shape_file`)."""
        return replace(self, **read_shape_file(path))

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, shape_file: Path | None = None
    ) -> SimulatorSettings:
        """Read JW_SIM_* variables, so the secret can stay out of command lines.

        `shape_file` is applied before the settings are checked: a secret fit
        for the shape's signing scheme is refused by no other scheme.
        """
        env = os.environ if environ is None else environ
        dressed = read_shape_file(shape_file) if shape_file is not None else {}
        return cls(
            **dressed,
            time_scale=float(env.get("JW_SIM_TIME_SCALE", "1.0")),
            webhook_url=env.get("JW_SIM_WEBHOOK_URL") or None,
            webhook_secret=env.get("JW_SIM_WEBHOOK_SECRET") or None,
            honour_idempotency=env.get("JW_SIM_HONOUR_IDEMPOTENCY", "true").lower() in _TRUE,
            status_latency=float(env.get("JW_SIM_STATUS_LATENCY", "0")),
        )


def read_shape_file(path: Path) -> dict[str, Any]:
    """The settings a shape file gives: `shape`, and how that API signs.

    Its optional [webhooks] table (scheme, [webhooks.options]) sets
    `webhook_scheme` and `webhook_options`; the rest is an `ApiShape`.
    Raises ShapeError with a message fit to print.
    """
    try:
        table = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ShapeError(f"{path}: {exc}") from None
    hooks = table.pop("webhooks", None)
    try:
        settings: dict[str, Any] = {"shape": ApiShape.from_mapping(table)}
    except ShapeError as exc:
        raise ShapeError(f"{path}: {exc}") from None
    if hooks is None:
        return settings
    if not isinstance(hooks, dict):
        raise ShapeError(f"{path}: [webhooks] must be a table")
    scheme, options = hooks.get("scheme"), hooks.get("options", {})
    if set(hooks) - {"scheme", "options"} or not isinstance(scheme, str):
        raise ShapeError(f"{path}: [webhooks] takes scheme and [webhooks.options]")
    if not isinstance(options, dict):
        raise ShapeError(f"{path}: [webhooks.options] must be a table")
    return {**settings, "webhook_scheme": scheme, "webhook_options": options}
