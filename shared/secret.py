"""A credential that cannot leak through a repr, a log line or an error message.

Provider credentials come from the environment or from files named in the
config (SPEC §2: they never reach agents or the database). Wrapping them in
`Secret` means a description, a request object or a traceback can be printed
without thinking: only `reveal()` gives the value back, and only the code that
writes the Authorization header should call it.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

_MASK = "Secret('***')"
# A followed secret file is looked at (one stat) at most this often.
RECHECK_SECONDS = 1.0
# Far beyond any API key, token or PEM key; a file bigger than this (a log,
# /dev/zero) was named by mistake and is refused without being read whole.
MAX_SECRET_FILE_BYTES = 1024 * 1024
# Former values of a followed secret kept to be scrubbed from echoes (a job
# created before a rotation echoes the callback token it was given).
FORMER_VALUES_KEPT = 8
log = logging.getLogger("jobwarden.secrets")


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
        return cls(_read_secret_file(file), source=f"file:{file}")

    @property
    def source(self) -> str:
        """Where the value came from (`env:NAME`, `file:/path`): safe to show operators."""
        return self._source

    def reveal(self) -> str:
        return self._value

    def values_held(self) -> tuple[str, ...]:
        """Every value this secret has held in this process, the current first:
        what to scrub from a provider's echo, which may carry a value it was
        given before a rotation (never what to verify with)."""
        return (self.reveal(),)

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, for static shared-secret headers (with the
        value of the moment: a followed file's latest)."""
        return hmac.compare_digest(self.reveal().encode(), candidate.encode())

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


def _read_secret_file(file: Path) -> str:
    try:
        with open(file, "rb") as handle:
            data = handle.read(MAX_SECRET_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SecretError(f"secret file {file} does not exist") from None
    except OSError as exc:
        raise SecretError(f"secret file {file} cannot be read ({exc.strerror})") from None
    except ValueError:  # a NUL in the name: no file can have it
        raise SecretError(f"secret file name {str(file)!r} holds a NUL character") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        # /dev/zero, a log file: not a credential, and not to be read whole
        raise SecretError(
            f"secret file {file} is larger than {MAX_SECRET_FILE_BYTES} bytes: not a secret"
        )
    try:
        # line ends as a text-mode read gives them (a PEM key saved with CRLF)
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        # the decoder's own message quotes a byte of the file: of the secret
        raise SecretError(f"secret file {file} is not UTF-8 text") from None
    value = text.rstrip("\r\n")
    if not value.strip():
        raise SecretError(f"secret file {file} is empty")
    return value


def _stamp(file: Path) -> tuple[int, int, int, int] | None:
    """What tells one version of the file from the next: a rename (inode), a
    rewrite (modification time, size)."""
    try:
        st = os.stat(file)
    except (OSError, ValueError):  # ValueError: a NUL in the name (the read says so)
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class FollowedSecret(Secret):
    """A secret file read again whenever it changes: a short-lived token
    (an OAuth or Entra access token, `gcloud auth print-access-token`) that a
    timer rewrites is used without a restart.

    Looked at (one stat) at most every RECHECK_SECONDS, when the value is
    used. A new version that cannot be used (missing, empty, mid-write, or
    refused by `check`, e.g. a webhook secret its scheme cannot take) is not:
    the last good value stays, and a warning names the file and why, never
    the value (once a version). It is tried again at every look until it can
    be used or the file changes again: a permission mended by chown or chmod
    changes nothing the stamp holds.
    """

    __slots__ = ("_check", "_checked_at", "_file", "_former", "_refused", "_version")

    def __init__(self, file: Path) -> None:
        self._file = file.absolute()  # as named at load, whatever the cwd later
        self._check: Callable[[str], object] | None = None
        self._former: tuple[str, ...] = ()
        self._version = _stamp(self._file)
        self._refused: tuple[int, int, int, int] | None = None  # a version already warned of
        super().__init__(_read_secret_file(file), source=f"file:{file}")
        self._checked_at = clock()

    def checked_by(self, check: Callable[[str], object]) -> None:
        """What a new version must pass (raise ValueError to refuse) to be used;
        the value read at load is the caller's to check."""
        self._check = check

    def reveal(self) -> str:
        now = clock()
        if now - self._checked_at >= RECHECK_SECONDS:
            self._checked_at = now
            self._follow()
        return self._value

    def values_held(self) -> tuple[str, ...]:
        current = self.reveal()
        return (current, *(value for value in self._former if value != current))

    def _follow(self) -> None:
        version = _stamp(self._file)
        if version is None or version == self._version:
            return  # gone (mid-rename, or removed): the last value stays, quietly
        try:
            value = _read_secret_file(self._file)
            if _stamp(self._file) != version:
                # written on while read (a refresher writing in place): what was
                # read may be cut short; the next look reads the version it ends as
                return
            if self._check is not None:
                self._check(value)
        except (SecretError, ValueError) as exc:
            # Not taken, so tried again at the next look: the usual mend of
            # "cannot be read (Permission denied)" is a chown or chmod, which
            # leaves the stamp as it was (before, the version was marked seen
            # and the old value stayed until a restart). One warning a version.
            if version != self._refused:
                self._refused = version
                # the file and the reason only: a check's message never quotes the value
                log.warning(
                    "secret file changed but cannot be used; the previous value stays",
                    extra={"ctx": {"source": self._source, "reason": _reason(exc)}},
                )
            return
        self._version = version
        self._refused = None
        if value != self._value:
            self._former = (self._value, *self._former)[:FORMER_VALUES_KEPT]
            self._value = value
            log.info("secret file read again", extra={"ctx": {"source": self._source}})


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, SecretError) else f"refused: {exc}"


def clock() -> float:
    """When a followed secret was last looked at (tests move it)."""
    return time.monotonic()
