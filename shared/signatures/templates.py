"""Signed-content templates: which request parts a sender's signature covers, in what order.

A template such as `{timestamp}.{body}` or `v0:{timestamp}:{body}` names the
bytes a sender feeds to its MAC or signature. Placeholders are replaced by the
raw value (the body byte for byte, header values as UTF-8); everything else,
other braces included, is literal, so a sender's separators are copied as is.

`{body}` is mandatory: a signature that does not cover the body proves nothing
about it. `{method}` and `{url}` are only known when the caller of `verify`
passes them (see `dispatch.verify`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

PLACEHOLDERS: frozenset[str] = frozenset({"id", "timestamp", "body", "method", "url"})
# What generic_hmac understood before {method} and {url} existed: there, those
# two stay literal text so an existing configuration signs the same bytes.
LEGACY_PLACEHOLDERS: frozenset[str] = frozenset({"id", "timestamp", "body"})
MAX_TEMPLATE_CHARS = 256

_PLACEHOLDER = re.compile(r"\{([a-z]+)\}")


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text on even indexes, placeholder names on odd ones."""

    parts: tuple[str, ...]
    names: frozenset[str]

    def uses(self, name: str) -> bool:
        return name in self.names

    def render(self, values: Mapping[str, bytes | str | None]) -> bytes:
        """The signed bytes; every placeholder used must have a value."""
        chunks: list[bytes] = []
        for index, part in enumerate(self.parts):
            if index % 2 == 0:
                chunks.append(part.encode())
                continue
            value = values[part]
            if value is None:
                raise ValueError(f"template placeholder {{{part}}} has no value")
            # surrogatepass: a header mapping from any source must not be able
            # to turn verification into an encoding crash.
            chunks.append(
                value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
            )
        return b"".join(chunks)


def parse_template(
    scheme: str, key: str, text: str, placeholders: Collection[str] = PLACEHOLDERS
) -> Template:
    """A validated template, or ValueError naming the option `key`."""
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ValueError(
            f"{scheme}: option {key!r} must be at most {MAX_TEMPLATE_CHARS} characters"
        )
    parts: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) not in placeholders:
            continue  # not ours: literal text
        parts.extend((text[position : match.start()], match.group(1)))
        position = match.end()
    parts.append(text[position:])
    template = Template(tuple(parts), frozenset(parts[1::2]))
    if not template.uses("body"):
        raise ValueError(f"{scheme}: option {key!r} must contain {{body}}")
    return template
