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
# A few aliases cover every real case (`webhook-id` / `svix-id`) while keeping
# a header lookup a handful of dictionary reads.
MAX_HEADER_ALIASES = 4


def reject_unknown(scheme: str, options: Mapping[str, object], allowed: Collection[str]) -> None:
    """Refuse keys the scheme does not read, so a typo cannot silently disable a check."""
    for key in options:
        if key not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise ValueError(f"{scheme}: unknown option {key!r} (allowed options: {known})")


def optional_str(
    scheme: str, options: Mapping[str, object], key: str, max_chars: int = 256
) -> str | None:
    """A string option, or None when absent; bounded so config cannot bloat every request."""
    value = options.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{scheme}: option {key!r} must be a string")
    if len(value) > max_chars:
        raise ValueError(f"{scheme}: option {key!r} must be at most {max_chars} characters")
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


def header_names(
    scheme: str, options: Mapping[str, object], key: str, *, required: bool
) -> tuple[str, ...] | None:
    """A header name or a list of alias names, each a valid HTTP field name.

    Aliases let one configuration read a sender under either of its brands
    (`webhook-signature` or `svix-signature`); they are looked up together and
    must agree when several are present.
    """
    value = options.get(key)
    if not isinstance(value, list):
        single = header_name(scheme, options, key, required=required)
        return None if single is None else (single,)
    if not 1 <= len(value) <= MAX_HEADER_ALIASES:
        raise ValueError(
            f"{scheme}: option {key!r} must list between 1 and {MAX_HEADER_ALIASES} header names"
        )
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValueError(f"{scheme}: option {key!r} must be a string or a list of strings")
        if _HEADER_NAME.fullmatch(item) is None or len(item) > 256:
            raise ValueError(f"{scheme}: option {key!r} must list valid HTTP header names")
        if item.lower() in (name.lower() for name in names):
            raise ValueError(f"{scheme}: option {key!r} lists a header name twice")
        names.append(item)
    return tuple(names)
