"""A credential that cannot leak through a repr, a log line or an error message.

Provider credentials come from the environment or from files named in the
config (SPEC §2: they never reach agents or the database). Wrapping them in
`Secret` means a description, a request object or a traceback can be printed
without thinking: only `reveal()` gives the value back, and only the code that
writes the Authorization header should call it.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from pathlib import Path

_MASK = "Secret('***')"


class SecretError(LookupError):
    """A secret could not be loaded; the message names its source, never its value."""


class Secret:
    """Holds one credential string; prints as `Secret('***')`."""

    __slots__ = ("_source", "_value")

    def __init__(self, value: str, source: str = "inline") -> None:
        if not value:
            raise SecretError(f"secret from {source} is empty")
        self._value = value
        self._source = source

    @classmethod
    def from_env(cls, name: str, env: Mapping[str, str] | None = None) -> Secret:
        """Read the variable `name`; `env` defaults to the process environment."""
        environ = os.environ if env is None else env
        value = environ.get(name)
        if value is None:
            raise SecretError(f"environment variable {name} is not set")
        if not value.strip():
            raise SecretError(f"environment variable {name} is empty")
        return cls(value, source=f"env:{name}")

    @classmethod
    def from_file(cls, path: str | Path) -> Secret:
        """Read a secret file (e.g. a systemd credential or a Kubernetes secret mount).

        Trailing newlines are dropped because editors and `echo` add them, and a
        credential never legitimately ends with one.
        """
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SecretError(f"secret file {file} does not exist") from None
        except OSError as exc:
            raise SecretError(f"secret file {file} cannot be read ({exc.strerror})") from None
        value = text.rstrip("\r\n")
        if not value.strip():
            raise SecretError(f"secret file {file} is empty")
        return cls(value, source=f"file:{file}")

    @property
    def source(self) -> str:
        """Where the value came from (`env:NAME`, `file:/path`): safe to show operators."""
        return self._source

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, for static shared-secret headers."""
        return hmac.compare_digest(self._value.encode(), candidate.encode())

    def __repr__(self) -> str:
        return _MASK

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        # Hash the source, not the value: equal secrets from different sources
        # collide harmlessly, and no value-derived number is ever exposed.
        return hash(("Secret", self._source))

    def __reduce__(self) -> str:
        # Refuse pickling: a pickled Secret would carry the value in clear to
        # wherever the pickle goes (a queue, a cache, a crash dump).
        raise TypeError("Secret objects cannot be pickled")
