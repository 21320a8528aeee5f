"""URL path templates (``/v1/jobs/{job_id}``) and value templates (``Bearer {secret}``).

Two placeholder forms, after RFC 6570:

- ``{name}``  the value is percent-encoded entirely, ``/`` included: a job id
  stays one path segment whatever it contains;
- ``{+name}`` reserved expansion: ``/`` is kept, for ids that are themselves
  paths (AIP-151 ``operations/123``); every segment is still encoded and
  ``.``/``..``/empty segments are refused, so the value cannot climb out of the
  path the template intends.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

from shared.providers.errors import UnsafeJobIdError

_PLACEHOLDER = re.compile(r"\{(\+?)([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateError(ValueError):
    """The template text itself is malformed or uses an unknown placeholder."""


@dataclass(frozen=True)
class Template:
    text: str
    names: frozenset[str]

    def __str__(self) -> str:
        return self.text


def parse_template(text: str, allowed: Iterable[str]) -> Template:
    """Parse and check placeholders against `allowed`; raises TemplateError."""
    allowed_set = frozenset(allowed)
    names = set()
    for match in _PLACEHOLDER.finditer(text):
        name = match.group(2)
        if name not in allowed_set:
            choices = ", ".join(sorted(allowed_set)) or "none"
            raise TemplateError(f"unknown placeholder {{{name}}} (allowed: {choices})")
        names.add(name)
    leftover = _PLACEHOLDER.sub("", text)
    if "{" in leftover or "}" in leftover:
        raise TemplateError("unbalanced or malformed '{...}' placeholder")
    return Template(text, frozenset(names))


def query_param_of(template: Template, name: str) -> re.Match[str] | None:
    """The query parameter whose whole value is `{name}` (`?fal_webhook={webhook_url}`),
    if `{name}` is used exactly so, once: what `without_query_param` can take out.

    Once in either form: a `{+name}` beside it put the value in the path too. In the
    query itself: after the first `?` (a later one is text of a value before it),
    before any `#` (a fragment never leaves the client: the create would be recorded
    as naming our callback URL, and never give it)."""
    used = [m for m in _PLACEHOLDER.finditer(template.text) if m.group(2) == name]
    path, mark, query = template.text.partition("?")
    found = re.search(r"(^|&)" + _whole_value(name), query) if mark else None
    if len(used) != 1 or found is None:
        return None
    # where it starts in the whole text: at its `&`, or at the `?` opening the query
    start = len(path) + found.start() + (1 if found.group(1) else 0)
    if "#" in template.text[:start]:
        return None
    return re.compile(r"([?&])" + _whole_value(name)).match(template.text, start)


def _whole_value(name: str) -> str:
    """A parameter's name, `=`, then `{name}` up to the parameter's end."""
    return r"[^=&?#{}]+=\{" + re.escape(name) + r"\}(&|$)"


def without_query_param(template: Template, name: str) -> Template:
    """`template` without the query parameter whose whole value is `{name}`: a
    create whose callback URL is unknown (no public_webhook_url) leaves out the
    parameter that would carry it, as a body field naming it is left out."""
    found = query_param_of(template, name)
    if found is None:
        raise TemplateError(f"{{{name}}} is not a query parameter's whole value")
    lead, tail = found.group(1), found.group(2)
    kept = ("?" if tail else "") if lead == "?" else tail
    text = template.text[: found.start()] + kept + template.text[found.end() :]
    return Template(text, template.names - {name})


# C0 controls and DEL: never in a legitimate path component.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_path_value(value: str, what: str = "id") -> None:
    """Refuse values that are never a legitimate path component (`what` names it).

    One regex search, not a generator a character: every status read's job id
    passes here."""
    if not value:
        raise UnsafeJobIdError(f"{what} is empty")
    if _CONTROL.search(value) is not None:
        raise UnsafeJobIdError(f"{what} contains a control character")


def fill_path(template: Template, values: Mapping[str, str]) -> str:
    """Substitute URL-encoded values; raises UnsafeJobIdError for dangerous ones."""

    def substitute(match: re.Match[str]) -> str:
        reserved, name = match.group(1), match.group(2)
        value = values.get(name)
        if value is None:
            raise UnsafeJobIdError(f"no value for {{{name}}}")
        check_path_value(value, name)
        if not reserved:
            if value in {".", ".."}:
                raise UnsafeJobIdError(f"{name} '{value}' is a relative path segment")
            return quote(value, safe="")
        segments = value.split("/")
        for segment in segments:
            if segment in {"", ".", ".."}:
                raise UnsafeJobIdError(f"{name} has an empty or relative path segment")
        return "/".join(quote(segment, safe="") for segment in segments)

    return _PLACEHOLDER.sub(substitute, template.text)


def fill_text(template: Template, values: Mapping[str, str | None]) -> str | None:
    """Substitute raw values (headers, body fields); None when a value is unknown."""
    missing = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal missing
        value = values.get(match.group(2))
        if value is None:
            missing = True
            return ""
        return value

    result = _PLACEHOLDER.sub(substitute, template.text)
    return None if missing else result
