"""Case-insensitive, ambiguity-aware access to request headers."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import SignatureError


class HeaderView:
    """Headers looked up by lowercased name, as HTTP defines them.

    Callers may pass any mapping (a plain dict in tests, a framework's header
    object in the receiver). A plain dict can hold both `Webhook-Id` and
    `webhook-id` with different values; picking one silently would let an
    attacker choose which one a proxy and we each see, so such a header is
    treated as malformed. Empty values count as absent, as in the reference
    Standard Webhooks library.
    """

    __slots__ = ("_ambiguous", "_values")

    def __init__(self, headers: Mapping[str, str]) -> None:
        values: dict[str, str] = {}
        ambiguous: set[str] = set()
        for name, value in headers.items():
            key = name.lower()
            stripped = value.strip()
            if key in values and values[key] != stripped:
                ambiguous.add(key)
            values[key] = stripped
        self._values = values
        self._ambiguous = frozenset(ambiguous)

    def get(self, name: str) -> str | None:
        """The header's value, or None when absent or empty."""
        key = name.lower()
        if key in self._ambiguous:
            raise SignatureError("malformed_header")
        return self._values.get(key) or None

    def require(self, name: str) -> str:
        """The header's value; a missing header fails verification."""
        value = self.get(name)
        if value is None:
            raise SignatureError("missing_header")
        return value

    def __repr__(self) -> str:
        # Names only: values include signatures and, for static_header, the secret.
        return f"HeaderView({sorted(self._values)})"
