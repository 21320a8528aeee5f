"""Settings of the daemons: environment variables over a TOML file over defaults.

The file (`JW_CONFIG`, default `jobwarden.toml` if present) has a
`[jobwarden]` table for these settings and `[providers.<name>]` tables for the
provider descriptions (shared/providers). Every key is listed, with its
environment variable and default, in the README's configuration reference.
Errors name the file and the key.
"""

from __future__ import annotations

import math
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from shared.providers import ConfigError, ProviderDescription, parse_providers


@dataclass(frozen=True)
class Settings:
    # where results are stored (content-addressed files)
    results_dir: Path = Path("var/results")
    # reconciler
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    claim_batch: int = 200  # rows per claim: one round trip amortized over many polls
    lease_seconds: float = 60.0  # > request timeout + DB time, so a live worker keeps its lease
    sweep_interval: float = 0.5  # idle sweep period; NOTIFY wakes the daemon sooner
    max_in_flight: int = 64  # concurrent provider calls per reconciler process, all providers
    shutdown_grace: float = 20.0  # SIGTERM: finish in-flight calls for this long, then release
    # started on a database not yet migrated: wait this long for `jobwarden migrate`,
    # then exit 2; under the unit's TimeoutStartSec (60 s), so systemd starts it
    # again without reaching its start limit (reconciler/daemon.py `_migrated`)
    migration_wait: float = 45.0
    # PEM file of certificate authorities provider calls trust besides certifi's
    # (a provider behind a private authority); empty: certifi's only
    provider_ca_file: str = ""
    # receiver
    receiver_host: str = "127.0.0.1"
    receiver_port: int = 8080
    max_body_bytes: int = 1024 * 1024
    webhook_retention_days: int = 14  # providers retry for up to 3 days; keep dedupe rows longer
    db_acquire_timeout: float = 2.0  # then answer 503 so the provider retries
    # Our receiver as providers reach it, e.g. https://hooks.example.com/webhooks/{provider};
    # given to providers that take a per-job webhook URL.
    public_webhook_url: str = ""
    # evidence log: how often the reconciler sequences it (a checkpoint, when a
    # signing key is set, at most once a minute: reconciler/sequencer.py
    # CHECKPOINT_MIN_SECONDS), and where checkpoints are written
    log_interval: float = 5.0
    log_checkpoint_dir: Path = Path("var/checkpoints")
    # the sequencer child's watchdog: one silent this long (no batch or pass
    # done) is killed and started again; one batch must fit in it
    log_watchdog_seconds: float = 120.0
    # the Ed25519 signer key (C2SP note format) as a file; JW_LOG_SIGNING_KEY
    # gives it inline. Never stored in the database.
    log_signing_key_file: str = ""
    # the public keys (.pub) of signing keys rotated out: a published checkpoint
    # one of them signed is still opened, and the new key's first checkpoint
    # held to it (README "Key rotation"). Comma-separated in the environment.
    log_previous_key_files: tuple[str, ...] = ()
    # Host names /mcp answers for beyond loopback, receiver_host and the host of
    # public_webhook_url (comma-separated): the Host and Origin checks against
    # DNS rebinding refuse every other (421 / 403). Behind a proxy: its public name.
    mcp_allowed_hosts: str = ""
    # the operator console's own database login, a role in jobwarden_operator,
    # on which it records operator decisions (empty: the receiver's login, which
    # may not). It carries a password: JW_CONSOLE_DATABASE_URL only, like
    # DATABASE_URL, never the file, and never in a repr.
    console_database_url: str = field(default="", repr=False)
    config_path: Path | None = None

    providers: Mapping[str, ProviderDescription] = field(default_factory=dict)

    def cancel_deadline_for(self, provider: str) -> float | None:
        """How long a cancel of its jobs may stay unconfirmed (None: provider unknown)."""
        desc = self.providers.get(provider)
        return desc.limits.cancel_deadline_seconds if desc else None


_ENV = {
    "results_dir": "JW_RESULTS_DIR",
    "worker_id": "JW_WORKER_ID",
    "claim_batch": "JW_CLAIM_BATCH",
    "lease_seconds": "JW_LEASE_SECONDS",
    "sweep_interval": "JW_SWEEP_INTERVAL",
    "max_in_flight": "JW_MAX_IN_FLIGHT",
    "shutdown_grace": "JW_SHUTDOWN_GRACE",
    "migration_wait": "JW_MIGRATION_WAIT",
    "provider_ca_file": "JW_PROVIDER_CA_FILE",
    "receiver_host": "JW_RECEIVER_HOST",
    "receiver_port": "JW_RECEIVER_PORT",
    "max_body_bytes": "JW_MAX_BODY_BYTES",
    "webhook_retention_days": "JW_WEBHOOK_RETENTION_DAYS",
    "db_acquire_timeout": "JW_DB_ACQUIRE_TIMEOUT",
    "public_webhook_url": "JW_PUBLIC_WEBHOOK_URL",
    "log_interval": "JW_LOG_INTERVAL",
    "log_checkpoint_dir": "JW_LOG_CHECKPOINT_DIR",
    "log_watchdog_seconds": "JW_LOG_WATCHDOG_SECONDS",
    "log_signing_key_file": "JW_LOG_SIGNING_KEY_FILE",
    "log_previous_key_files": "JW_LOG_PREVIOUS_KEY_FILES",
    "mcp_allowed_hosts": "JW_MCP_ALLOWED_HOSTS",
}
# The values each numeric setting may take, both ends included, and why a
# value outside would be wrong (a lease of 0, a port past 65535, a negative
# body limit all loaded and failed later, or silently misbehaved).
_RANGES: dict[str, tuple[float, float, str]] = {
    "claim_batch": (1, 10_000, "rows per claim"),
    "lease_seconds": (1, 86_400, "a lease must outlast a call, and a crashed worker's must end"),
    "sweep_interval": (0.001, 3600, "seconds between idle sweeps"),
    "max_in_flight": (1, 10_000, "provider calls at once"),
    "shutdown_grace": (0, 3600, "seconds"),
    "migration_wait": (0, 3600, "seconds"),
    "receiver_port": (0, 65_535, "a TCP port (0: any free one)"),
    "max_body_bytes": (1, 1 << 30, "bytes of a webhook body"),
    "webhook_retention_days": (
        1,
        3650,
        "providers redeliver for days: a shorter dedupe lets a redelivery in as new",
    ),
    "db_acquire_timeout": (0.001, 600, "seconds"),
    "log_interval": (0.001, 86_400, "seconds"),
    "log_watchdog_seconds": (0.001, 86_400, "seconds"),
}
# Settings that carry a secret: from the environment only (not the TOML file).
_ENV_ONLY = {"console_database_url": "JW_CONSOLE_DATABASE_URL"}


def _convert(source: str, key: str, raw: Any, kind: type) -> Any:
    try:
        if kind is Path:
            return Path(str(raw))
        # 2.7 is no count (int() would make it 2); nan and inf are no duration:
        # every comparison with NaN is false, so no later range check catches it
        if kind is int and not isinstance(raw, bool) and not _fraction(raw):
            return int(raw)
        if kind is float and not isinstance(raw, bool) and math.isfinite(float(raw)):
            return float(raw)
        if kind is str:
            return str(raw)
        if kind is tuple:
            return _file_names(raw)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        pass
    expected = _EXPECTED.get(kind, kind.__name__)
    raise ConfigError(f"{source}: {key}: expected {expected}, got {raw!r}")


_EXPECTED = {
    int: "a whole number",
    float: "a finite number",
    tuple: 'a list of file names (["a.pub", "b.pub"]; comma-separated in the environment)',
}


def _file_names(raw: Any) -> tuple[str, ...]:
    """A list of files: a TOML array of names, or a comma-separated string (the
    environment's form, in which the sequencer child is handed them on, so a
    name may hold no comma). Blanks between commas are skipped; an empty or
    blank name in an array is a mistake."""
    if isinstance(raw, str):
        return tuple(name.strip() for name in raw.split(",") if name.strip())
    if not isinstance(raw, list):
        raise TypeError("not a list")
    if not all(isinstance(name, str) and name.strip() and "," not in name for name in raw):
        raise ValueError("not file names")
    return tuple(raw)


def _fraction(raw: Any) -> bool:
    return isinstance(raw, float) and not raw.is_integer()


def _read_config(path: Path) -> dict[str, Any]:
    """The TOML document at `path`; anything that stops it being read is a
    ConfigError (one line, exit 2), never a traceback: an operator who made the
    file readable by root only, or pointed JW_CONFIG at a folder, is told so."""
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except PermissionError:
        raise ConfigError(
            f"{path}: permission denied (the user running jobwarden must be able to read it)"
        ) from None
    except OSError as exc:  # a folder, an I/O error: what the system said
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{path}: TOML nested too deeply to be read") from None


def load_settings(
    path: Path | None = None, env: Mapping[str, str] | None = None, *, credentials: bool = True
) -> Settings:
    """The settings and providers, environment over file.

    `credentials=False` for a process that never calls a provider (the
    receiver): provider API keys it is not given leave those providers
    without auth rather than refusing the config (parse_providers).
    """
    env = os.environ if env is None else env
    if path is None and env.get("JW_CONFIG"):
        path = Path(env["JW_CONFIG"])
    if path is None and Path("jobwarden.toml").exists():
        path = Path("jobwarden.toml")
    table: dict[str, Any] = {}
    providers: Mapping[str, ProviderDescription] = {}
    if path is not None:
        document = _read_config(path)
        table = dict(document.get("jobwarden", {}))
        unknown = set(document) - {"jobwarden", "providers"}
        if unknown:
            raise ConfigError(f"{path}: unknown top-level table(s): {', '.join(sorted(unknown))}")
        if "providers" in document:
            # the document already read: the file is read and parsed once
            providers = parse_providers(document, str(path), env, credentials=credentials)
    values: dict[str, Any] = {"config_path": path, "providers": providers}
    kinds = {f.name: f.type for f in fields(Settings)}
    types = {"Path": Path, "int": int, "float": float, "str": str, "tuple[str, ...]": tuple}
    for key in list(table):
        if key in _ENV_ONLY:
            raise ConfigError(
                f"{path}: jobwarden.{key}: it carries a password; set {_ENV_ONLY[key]} in the"
                " environment instead"
            )
        if key not in _ENV:
            raise ConfigError(f"{path}: jobwarden.{key}: unknown setting")
    for key, var in _ENV_ONLY.items():
        if env.get(var):
            values[key] = env[var]
    for key, var in _ENV.items():
        kind = types[str(kinds[key])]
        if var in env:
            where = f"environment {var}"
            values[key] = _in_range(where, key, _convert(where, key, env[var], kind))
        elif key in table:
            where = f"{path}: jobwarden"
            values[key] = _in_range(where, key, _convert(where, key, table[key], kind))
    return Settings(**values)


def _in_range(source: str, key: str, value: Any) -> Any:
    if key not in _RANGES:
        return value
    low, high, what = _RANGES[key]
    if not low <= value <= high:
        raise ConfigError(
            f"{source}: {key}: {_number(value)} is not between {_number(low)} and "
            f"{_number(high)} ({what})"
        )
    return value


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_reconciler_settings(settings: Settings) -> None:
    """What only the reconciler needs: every provider call must fit in a lease.

    A worker renews its lease before a call the lease would not outlast; if
    the call's timeout alone is longer than a lease, no renewal can help.
    """
    if not 0 <= settings.migration_wait <= 3600:
        raise ConfigError(
            f"{settings.config_path}: migration_wait ({settings.migration_wait:g} s,"
            " JW_MIGRATION_WAIT) must be between 0 and 3600"
        )
    if not settings.log_interval > 0:
        raise ConfigError(
            f"{settings.config_path}: log_interval ({settings.log_interval:g} s, JW_LOG_INTERVAL)"
            " must be positive"
        )
    if not settings.log_watchdog_seconds > settings.log_interval:
        raise ConfigError(
            f"{settings.config_path}: log_watchdog_seconds ({settings.log_watchdog_seconds:g} s,"
            " JW_LOG_WATCHDOG_SECONDS) must be longer than log_interval"
            f" ({settings.log_interval:g} s): a child is silent between passes"
        )
    for name, desc in settings.providers.items():
        timeout = desc.limits.request_timeout
        if timeout >= settings.lease_seconds:
            raise ConfigError(
                f"{settings.config_path}: providers.{name}.limits.request_timeout ({timeout:g} s)"
                f" must be shorter than lease_seconds ({settings.lease_seconds:g} s,"
                " JW_LEASE_SECONDS): a call must fit in the lease that fences it"
            )
