"""Validation helpers for per-scheme options, shared by `check_options`.

Errors name the offending key and the allowed values so a config file can be
fixed from the message alone. Option values are configuration, not secrets,
so quoting them is fine.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

# RFC 9110 field-name token characters.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def reject_unknown(scheme: str, options: Mapping[str, object], allowed: Collection[str]) -> None:
    """Refuse keys the scheme does not read, so a typo cannot silently disable a check."""
    for key in options:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ValueError(f"{scheme}: unknown option {key!r} (allowed options: {known})")


def optional_str(scheme: str, options: Mapping[str, object], key: str) -> str | None:
    """A string option, or None when absent."""
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{scheme}: option {key!r} must be a string")
    return value


def choice(
    scheme: str, options: Mapping[str, object], key: str, allowed: Collection[str], default: str
) -> str:
    """A string option restricted to `allowed`."""
    value = optional_str(scheme, options, key)
    if value is None:
        return default
    if value not in allowed:
        raise ValueError(f"{scheme}: option {key!r} must be one of {', '.join(sorted(allowed))}")
    return value


def header_name(
    scheme: str, options: Mapping[str, object], key: str, *, required: bool
) -> str | None:
    """A header-name option, checked to be a valid HTTP field name."""
    value = optional_str(scheme, options, key)
    if value is None:
        if required:
            raise ValueError(f"{scheme}: option {key!r} is required (an HTTP header name)")
        return None
    if _HEADER_NAME.fullmatch(value) is None:
        raise ValueError(f"{scheme}: option {key!r} must be a valid HTTP header name")
    return value
