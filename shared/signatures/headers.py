"""Case-insensitive, ambiguity-aware, size-bounded access to request headers."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from .errors import SignatureError

# No header a verifier reads is legitimately this long: 16 Ed25519 signatures
# in base64 with their versions take about 1.5 KiB. The bound keeps an
# attacker's oversized header from costing more than a length check.
MAX_HEADER_CHARS = 4096


class HeaderView:
    """Headers looked up by lowercased name, as HTTP defines them.

    Callers may pass any mapping (a plain dict in tests, a framework's header
    object in the receiver). A plain dict can hold both `Webhook-Id` and
    `webhook-id` with different values; picking one silently would let an
    attacker choose which one a proxy and we each see, so such a header is
    treated as malformed. Empty values count as absent, as in the reference
    Standard Webhooks library.
    """

    __slots__ = ("_values",)

    # Each kept name maps to its stripped value, or to None when its values
    # disagree (ambiguous): one dictionary read answers both questions.
    _values: dict[str, str | None]

    def __init__(self, headers: Mapping[str, str]) -> None:
        values: dict[str, str | None] = {}
        for name, value in headers.items():
            key = name.lower()
            stripped = value.strip()
            if values.setdefault(key, stripped) != stripped:
                values[key] = None
        self._values = values

    @classmethod
    def from_raw(
        cls, raw: Sequence[tuple[bytes, bytes]], keep: Collection[bytes] | None = None
    ) -> HeaderView:
        """The view of an ASGI scope's header list, read as the server's framework
        reads it (Latin-1), without building the framework's header object first.

        `keep`: the lowercase names of the only headers its reader looks up
        (the rest are left out, unread); None keeps every header.
        """
        values: dict[str, str | None] = {}
        for name, value in raw:
            if keep is not None and name.lower() not in keep:
                continue
            key = name.decode("latin-1").lower()
            stripped = value.decode("latin-1").strip()
            if values.setdefault(key, stripped) != stripped:
                values[key] = None
        view = cls.__new__(cls)
        view._values = values
        return view

    def get(self, name: str) -> str | None:
        """The header's value, or None when absent or empty."""
        return self.get_any_key((name.lower(),))

    def require(self, name: str) -> str:
        """The header's value; a missing header fails verification."""
        return self.require_any_key((name.lower(),))

    def get_any(self, names: Sequence[str]) -> str | None:
        """The value under any of several alias names (`webhook-id` / `svix-id`).

        Aliases that disagree are malformed for the same reason as two
        spellings of one name: which one we and a proxy read must not be the
        attacker's choice.
        """
        return self.get_any_key([name.lower() for name in names])

    def require_any(self, names: Sequence[str]) -> str:
        """Like `get_any`, but none of the aliases present fails verification."""
        return self.require_any_key([name.lower() for name in names])

    def get_any_key(self, keys: Sequence[str]) -> str | None:
        """`get_any` for names already lowercased, as a compiled envelope holds them.

        One loop over dictionary reads, no call per alias: it runs for every
        header of every delivery.
        """
        values = self._values
        found: str | None = None
        for key in keys:
            value = values.get(key, "")
            if not value:
                if value is None:  # two different values under one name
                    raise SignatureError("malformed_header")
                continue  # absent or empty
            if len(value) > MAX_HEADER_CHARS or (found is not None and value != found):
                raise SignatureError("malformed_header")
            found = value
        return found

    def require_any_key(self, keys: Sequence[str]) -> str:
        """Like `get_any_key`, but none of the aliases present fails verification."""
        value = self.get_any_key(keys)
        if value is None:
            raise SignatureError("missing_header")
        return value

    def require_each_key(self, keys: Sequence[str]) -> list[str]:
        """The value of each present header among `keys`, for headers that each carry
        a signature of their own (Box's primary and secondary, signed with two
        keys): unlike aliases they may differ. None present fails verification."""
        values = self._values
        found: list[str] = []
        for key in keys:
            value = values.get(key, "")
            if value is None or len(value) > MAX_HEADER_CHARS:
                raise SignatureError("malformed_header")
            if value:
                found.append(value)
        if not found:
            raise SignatureError("missing_header")
        return found

    def __repr__(self) -> str:
        # Names only: values include signatures and, for static_header, the secret.
        return f"HeaderView({sorted(self._values)})"
