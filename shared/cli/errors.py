"""How a command fails: one line saying what, one saying how to fix it; JSON under `--json`.

A traceback is for a bug. A database that is not there, a schema not
migrated or an operation that does not exist is the operator's to fix, so it
is said in their words, and under `--json` as a document a script can read
(on stdout, where the script reads the answer it expected).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

from shared.db.errors import DatabaseProblem, query_problem
from shared.db.migrate import MigrationError
from shared.providers import ConfigError

# What a terminal would act on rather than show: C0 and C1 controls (ESC
# starts colour, cursor and OSC 8 hyperlink sequences; CR and LF forge lines),
# the line and paragraph separators, and the bidi controls that reorder what
# is shown (Trojan Source). Stored text from agents and providers may hold any.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`value` as text a terminal shows as it is: every control, separator and
    bidi character written as an escape (\\x1b, \\u202e), so a stored kind,
    reference, reason or provider message cannot move the cursor, colour the
    screen, link elsewhere or fake a line. Print it as rich `Text`, or through
    `rich.markup.escape` where markup is used, so `[bold]` stays literal too."""
    return _UNSHOWABLE.sub(_escaped, str(value))


# Exit statuses: 1 the command was refused or could not run, 2 it was asked wrongly
# (argparse's own status for usage errors).
REFUSED = 1
USAGE = 2


class CommandError(Exception):
    """A refusal to print for the operator (exit status 1 or 2)."""

    def __init__(
        self, message: str, status: int = REFUSED, *, code: str | None = None, hint: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or ("usage" if status == USAGE else "refused")
        self.hint = hint


@dataclass(frozen=True)
class Failure:
    """What to tell the operator: a stable code for scripts, the message, the fix."""

    code: str
    message: str
    hint: str
    status: int


def failure_of(exc: BaseException) -> Failure | None:
    """The operator's account of `exc`, or None when it is a bug (keep the traceback)."""
    if isinstance(exc, CommandError):
        return Failure(exc.code, str(exc), exc.hint, exc.status)
    problem = exc if isinstance(exc, DatabaseProblem) else query_problem(exc)
    if problem is not None:
        return Failure(problem.code, problem.message, problem.hint, REFUSED)
    if isinstance(exc, ConfigError):
        return Failure("config_error", f"configuration error: {exc}", "", USAGE)
    if isinstance(exc, MigrationError):
        return Failure("migration_refused", f"migrate: {exc}", "", REFUSED)
    return None


def report(failure: Failure, *, as_json: bool) -> int:
    """Print `failure` (stderr, or a JSON document on stdout under --json); its exit status."""
    if as_json:
        body = {"code": failure.code, "message": failure.message, "hint": failure.hint or None}
        print(json.dumps({"error": body}, ensure_ascii=False), flush=True)
    else:
        # escaped: a message may quote what the operator pasted (an id holding an
        # escape sequence cleared their screen), a hint what a database said
        print(f"jobwarden: {printable(failure.message)}", file=sys.stderr)
        if failure.hint:
            print(f"hint: {printable(failure.hint)}", file=sys.stderr)
    return failure.status
