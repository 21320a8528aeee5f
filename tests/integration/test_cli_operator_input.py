"""Operator commands given text the database cannot hold, or durations no clock reaches.

Each case is refused in words (exit 2, a usage error) with nothing recorded:
before, each was a traceback from deep in the database driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shared import ledger
from shared.ledger.states import LocalState
from tests.integration.test_cli_operator import environment, escalate, run  # noqa: F401

S = LocalState
ROOT = Path(__file__).resolve().parents[2]

# Bytes that are not UTF-8 in a command line (a Latin-1 terminal's "café")
# reach Python as an unpaired surrogate; NUL reaches a command given its
# arguments in-process (a script, the console's shared code).
NOT_UTF8 = "caf\udce9 done"
NUL = "stop\x00now"

Argv = Callable[[str], list[str]]
CASES: dict[str, Argv] = {
    "resolve reason not utf-8": lambda o: [
        "resolve", o, "--decision", "failed", "--reason", NOT_UTF8,
    ],
    "resolve reason with NUL": lambda o: ["resolve", o, "--decision", "failed", "--reason", NUL],
    "resolve as not utf-8": lambda o: [
        "resolve", o, "--decision", "failed", "--reason", "vendor says so", "--as", NOT_UTF8,
    ],
    "resolve id not utf-8": lambda o: [
        "resolve", o + "\udcff", "--decision", "failed", "--reason", "vendor says so",
    ],
    "reconcile reason with NUL": lambda o: ["reconcile", o, "--reason", NUL],
    "cancel reason not utf-8": lambda o: ["cancel", o, "--reason", NOT_UTF8],
    "cancel id with NUL": lambda o: ["cancel", o + "\x00", "--reason", "stop it"],
    "show id not utf-8": lambda o: ["show", o + "\udcff"],
}  # fmt: skip


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
async def test_text_postgresql_cannot_hold_is_a_usage_error_and_nothing_is_recorded(
    db: Any, capsys: pytest.CaptureFixture[str], argv: Argv
) -> None:
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    history = await db.fetchval("SELECT count(*) FROM history WHERE operation_id = $1", op_id)
    with pytest.raises(SystemExit) as exited:
        await run(*argv(op_id))
    assert exited.value.code == 2
    assert "NUL or bytes that are not UTF-8" in capsys.readouterr().err
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert (
        await db.fetchval("SELECT count(*) FROM history WHERE operation_id = $1", op_id) == history
    )
    state = await db.fetchval("SELECT state::text FROM operations WHERE operation_id = $1", op_id)
    assert state == "result_timed_out"


async def test_a_latin1_reason_from_a_real_command_line_is_refused_in_words(
    db: Any, db_url: str, tmp_path: Path
) -> None:
    """As an operator's shell passes it: raw bytes in argv, not UTF-8."""
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    done = subprocess.run(
        [sys.executable, "-m", "shared.cli", "resolve", op_id, "--decision", "failed",
         "--reason", b"caf\xe9 confirmed it failed"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": db_url},
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    stderr = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 2, stderr
    assert "Traceback" not in stderr and "NUL or bytes that are not UTF-8" in stderr
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


# 10^14 days is past the last timestamp PostgreSQL holds (294276 AD); 400 nines
# is a float infinity.
BEYOND = ["99999999999999d", "9" * 400]
DURATIONS: dict[str, Argv] = {
    "reconcile --extend-deadline": lambda d: ["reconcile", "OP", "--extend-deadline", d],
    "list --older-than": lambda d: ["list", "--older-than", d],
    "submit --result-deadline": lambda d: [
        "submit", "--provider", "sim", "--kind", "export", "--result-deadline", d,
    ],
}  # fmt: skip


@pytest.mark.parametrize("duration", BEYOND, ids=["1e14 days", "infinite"])
@pytest.mark.parametrize("argv", DURATIONS.values(), ids=DURATIONS.keys())
async def test_a_duration_past_any_clock_is_a_usage_error_and_nothing_is_recorded(
    db: Any, capsys: pytest.CaptureFixture[str], argv: Argv, duration: str
) -> None:
    """Each was a DatetimeFieldOverflowError traceback (or an infinite interval)."""
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    operations = await db.fetchval("SELECT count(*) FROM operations")
    with pytest.raises(SystemExit) as exited:
        await run(*[op_id if a == "OP" else a for a in argv(duration)])
    assert exited.value.code == 2
    assert "longer than 100 years" in capsys.readouterr().err
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert await db.fetchval("SELECT count(*) FROM operations") == operations
    state = await db.fetchval("SELECT state::text FROM operations WHERE operation_id = $1", op_id)
    assert state == "result_timed_out"


async def test_a_refusal_echoes_no_terminal_control_the_operator_pasted(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """An id pasted with an escape sequence (clear the screen) or a bidi override was
    written back raw in 'no operation ...': the terminal acted on it. Now escaped."""
    pasted = "op_\x1b[2J\x1b]8;;https://evil.example\x07\u202eexample"
    assert await run("show", pasted) == 1
    assert await run("resolve", pasted, "--decision", "failed", "--reason", "vendor") == 1
    err = capsys.readouterr().err
    assert not any(c in err for c in ("\x1b", "\x07", "\u202e")), repr(err)
    assert (
        err.count("no operation op_\\x1b[2J\\x1b]8;;https://evil.example\\x07\\u202eexample") == 2
    )


REASONS: dict[str, Argv] = {
    "resolve, blank": lambda o: ["resolve", o, "--decision", "failed", "--reason", "   "],
    "resolve, 2 characters": lambda o: ["resolve", o, "--decision", "failed", "--reason", " ok "],
    "reconcile, 2 characters": lambda o: ["reconcile", o, "--reason", "ok"],
    "cancel, blank": lambda o: ["cancel", o, "--reason", " \t "],
}


@pytest.mark.parametrize("argv", REASONS.values(), ids=REASONS.keys())
async def test_a_reason_of_under_3_characters_is_a_usage_error_in_words(
    db: Any, capsys: pytest.CaptureFixture[str], argv: Argv
) -> None:
    """Three spaces passed the decisions.reason CHECK (length >= 3): a decision with
    no reason was recorded (the console strips and refuses it); two characters were
    'the database refused the move (constraint decisions_reason_check)', exit 1."""
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    with pytest.raises(SystemExit) as exited:
        await run(*argv(op_id))
    assert exited.value.code == 2
    assert "a reason of at least 3 characters" in capsys.readouterr().err
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0
    assert (
        await db.fetchval(
            "SELECT cancel_requested_at FROM operations WHERE operation_id = $1", op_id
        )
        is None
    )


OTHER_COMMANDS = {
    "tokens revoke": ["tokens", "revoke", "tok_\udcff"],
    "list --provider": ["list", "--provider", "sim\x00"],
    "submit --kind": ["submit", "--provider", "sim", "--kind", NOT_UTF8],
    "submit --ref": ["submit", "--provider", "sim", "--kind", "export", "--ref", NUL],
    "submit --approval-ref": [
        "submit", "--provider", "sim", "--kind", "export", "--approval-ref", NOT_UTF8,
    ],
    "submit --target": ["submit", "--provider", "sim", "--kind", "export", "--target", NOT_UTF8],
    "submit --body": ["submit", "--provider", "sim", "--kind", "export", "--body", '"\udcff"'],
}  # fmt: skip


@pytest.mark.parametrize("argv", OTHER_COMMANDS.values(), ids=OTHER_COMMANDS.keys())
async def test_the_other_commands_refuse_such_text_too(
    db: Any, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Each was a DataError, CharacterNotInRepertoireError or UnicodeEncodeError traceback."""
    with pytest.raises(SystemExit) as exited:
        await run(*argv)
    assert exited.value.code == 2
    assert "NUL or bytes that are not UTF-8" in capsys.readouterr().err
    assert await db.fetchval("SELECT count(*) FROM operations") == 0


@pytest.mark.parametrize(
    "body",
    ["@missing.json", "@latin1.json", '{"a": "\\ud800"}'],
    ids=["missing", "latin-1", "lone"],
)
async def test_a_body_that_cannot_be_read_or_stored_is_a_usage_error(
    db: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str
) -> None:
    """Each was a traceback: FileNotFoundError, UnicodeDecodeError, UnicodeEncodeError."""
    (tmp_path / "latin1.json").write_bytes(b'{"city": "Montr\xe9al"}')
    assert await run("submit", "--provider", "sim", "--kind", "export", "--body", body) == 2
    assert "--body" in capsys.readouterr().err
    assert await db.fetchval("SELECT count(*) FROM operations") == 0


@pytest.mark.parametrize("command", ["show", "cancel", "resolve", "reconcile"])
async def test_a_10_kb_id_is_refused_in_one_short_line_with_no_query(
    db: Any, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A 10 KB paste was echoed whole ('no operation xxxx…' 10,000 characters long)
    after a lookup; an id not shaped like one is now refused as such, cut short."""
    extra = {
        "cancel": ["--reason", "stop it"],
        "resolve": ["--decision", "failed", "--reason", "vendor says"],
        "reconcile": [],
        "show": [],
    }[command]
    assert await run(command, "op_" + "x" * 10_000, *extra, "--json") == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "not_found" and "not an operation id" in error["message"]
    assert len(error["message"]) < 300
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_a_second_cancel_of_a_stopped_operation_says_the_first_intent_stands(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operation in needs_attention keeps the first cancel intent (the ledger's
    request_cancel is idempotent there): the second operator was told 'intent
    recorded', their name and reason recorded nowhere."""
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    assert await run("cancel", op_id, "--reason", "dana: not needed") == 0
    assert "intent recorded" in capsys.readouterr().out
    assert await run("cancel", op_id, "--reason", "erin: stop it", "--as", "erin", "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["state"] == "needs_attention"
    assert "not recorded" in answer["message"] and "operator:dana" in answer["message"]
    assert "resolve" in answer["message"]
    row = await db.fetchrow(
        "SELECT cancel_requested_by, cancel_reason FROM operations WHERE operation_id = $1", op_id
    )
    assert tuple(row) == ("operator:dana", "dana: not needed")


async def test_whether_a_cancel_intent_was_recorded_is_the_statements_own_answer(
    db: Any,
) -> None:
    """`ledger.cancel_intent` says whether this request's intent is the one on record,
    from its own UPDATE: the CLI and the console used to judge it by reading the row
    after the commit, where a second session of the same operator (the same actor)
    recording its intent a moment earlier made a kept intent look like this one."""
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    first = await ledger.cancel_intent(
        db, op_id, requested_by="operator:dana", reason="from the first window"
    )
    second = await ledger.cancel_intent(
        db, op_id, requested_by="operator:dana", reason="from the second window"
    )
    assert (first.state, first.recorded) == (S.NEEDS_ATTENTION, True)
    assert (second.state, second.recorded) == (S.NEEDS_ATTENTION, False)
    reason = await db.fetchval(
        "SELECT cancel_reason FROM operations WHERE operation_id = $1", op_id
    )
    assert reason == "from the first window"
