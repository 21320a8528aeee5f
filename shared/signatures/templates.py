"""Signed-content templates: which request parts a sender's signature covers, in what order.

A template such as `{timestamp}.{body}` or `v0:{timestamp}:{body}` names the
bytes a sender feeds to its MAC or signature. Placeholders are replaced by the
raw value (the body byte for byte, header values as UTF-8); everything else,
other braces included, is literal, so a sender's separators are copied as is.

`{body}` is mandatory: a signature that does not cover the body proves nothing
about it. `{body_sha256}` (the hex SHA-256 of the body, lower case) may stand in
for it, for a sender that signs the body's digest (fal.ai: "{request id}\n{user
id}\n{timestamp}\n{hex sha256}"): a digest binds the body as the body does.
`{method}` and `{url}` are only known when the caller of `verify` passes them
(see `dispatch.verify`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

PLACEHOLDERS: frozenset[str] = frozenset(
    {"id", "timestamp", "body", "body_sha256", "method", "url"}
)
# What covers the body: one of these must be in every template.
BODY_PLACEHOLDERS: frozenset[str] = frozenset({"body", "body_sha256"})
# What generic_hmac understood before {method} and {url} existed: there, those
# two stay literal text so an existing configuration signs the same bytes.
LEGACY_PLACEHOLDERS: frozenset[str] = frozenset({"id", "timestamp", "body"})
MAX_TEMPLATE_CHARS = 256

# Lower-case words, `_` within: a name not among a template's placeholders
# (`{Body}`, or `{body_sha256}` in generic_hmac) stays literal text.
_PLACEHOLDER = re.compile(r"\{([a-z]+(?:_[a-z0-9]+)*)\}")


# The order of `Template.render_request`'s arguments, which its steps index.
_REQUEST_PARTS: tuple[str, ...] = ("body", "timestamp", "id", "method", "url")


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text on even indexes, placeholder names on odd ones."""

    parts: tuple[str, ...]
    names: frozenset[str]
    # `parts` as `render` walks them: literals encoded once, names as they are.
    _steps: tuple[bytes | str, ...] = field(init=False, repr=False, compare=False)
    # `parts` as `render_request` walks them: literals encoded once, empty ones
    # (around a leading or trailing placeholder) dropped, names as indexes
    # into its arguments, so a delivery builds no dictionary of values. None
    # when a name is not one of those arguments.
    _request_steps: tuple[bytes | int, ...] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        steps = tuple(p if i % 2 else p.encode() for i, p in enumerate(self.parts))
        object.__setattr__(self, "_steps", steps)
        request_steps: tuple[bytes | int, ...] | None = None
        if self.names <= frozenset(_REQUEST_PARTS):
            request_steps = tuple(
                step if isinstance(step, bytes) else _REQUEST_PARTS.index(step)
                for step in steps
                if step
            )
        object.__setattr__(self, "_request_steps", request_steps)

    def uses(self, name: str) -> bool:
        return name in self.names

    def render(self, values: Mapping[str, bytes | str | None]) -> bytes:
        """The signed bytes; every placeholder used must have a value."""
        chunks: list[bytes] = []
        for step in self._steps:
            if isinstance(step, bytes):
                chunks.append(step)
                continue
            if step == "body_sha256":
                digest = hashlib.sha256(_encoded("body", values["body"])).hexdigest()
                chunks.append(digest.encode())
                continue
            chunks.append(_encoded(step, values[step]))
        return b"".join(chunks)

    def render_request(
        self,
        body: bytes,
        timestamp: str | None,
        event_id: str | None,
        method: str | None,
        url: str | None,
    ) -> bytes:
        """`render` of a request's parts, as a verifier has them: the same bytes, cheaper."""
        values = (body, timestamp, event_id, method, url)
        steps = self._request_steps
        if steps is None:
            return self.render(dict(zip(_REQUEST_PARTS, values, strict=True)))
        chunks: list[bytes] = []
        for step in steps:  # `_encoded` inlined: this runs for every delivery
            if isinstance(step, bytes):
                chunks.append(step)
                continue
            value = values[step]
            if isinstance(value, bytes):
                chunks.append(value)
            elif value is None:
                raise ValueError(f"template placeholder {{{_REQUEST_PARTS[step]}}} has no value")
            else:
                chunks.append(value.encode("utf-8", "surrogatepass"))  # see `_encoded`
        return b"".join(chunks)


def _encoded(name: str, value: bytes | str | None) -> bytes:
    if value is None:
        raise ValueError(f"template placeholder {{{name}}} has no value")
    if isinstance(value, bytes):
        return value
    # surrogatepass: a header mapping from any source must not be able to
    # turn verification into an encoding crash.
    return value.encode("utf-8", "surrogatepass")


def parse_template(
    scheme: str, key: str, text: str, placeholders: Collection[str] = PLACEHOLDERS
) -> Template:
    """A validated template, or ValueError naming the option `key`."""
    if len(text) > MAX_TEMPLATE_CHARS:
        raise ValueError(
            f"{scheme}: option {key!r} must be at most {MAX_TEMPLATE_CHARS} characters"
        )
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{scheme}: option {key!r} must be valid Unicode text") from None
    parts: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) not in placeholders:
            continue  # not ours: literal text
        parts.extend((text[position : match.start()], match.group(1)))
        position = match.end()
    parts.append(text[position:])
    template = Template(tuple(parts), frozenset(parts[1::2]))
    if not template.names & BODY_PLACEHOLDERS:
        also = " (or {body_sha256})" if "body_sha256" in placeholders else ""
        raise ValueError(f"{scheme}: option {key!r} must contain {{body}}{also}")
    return template
