"""Operator commands, run through their parser against a real database."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from shared import ledger
from shared.cli import operator as cli_operator
from shared.ledger import decisions, webhooks
from shared.ledger.states import LocalState
from shared.ledger.tokens import token_digest
from tests.integration.agent_support import finish_with_result
from tests.support import drive, submit

S = LocalState


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="jobwarden")
    cli_operator.register(root.add_subparsers(dest="command", required=True))
    return root


async def run(*argv: str) -> int:
    args = parser().parse_args(list(argv))
    status: int = await args.handler(args)
    return status


@pytest.fixture(autouse=True)
def environment(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "jobwarden.toml"
    config.write_text('[providers.sim]\npreset = "simulator"\n')
    monkeypatch.chdir(tmp_path)
    # as the operator role: the commands must work with its grants alone
    sep = "&" if "?" in db_url else "?"
    monkeypatch.setenv("DATABASE_URL", f"{db_url}{sep}role=jobwarden_operator")
    monkeypatch.setenv("JW_CONFIG", str(config))
    monkeypatch.setenv("USER", "dana")


def output(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


async def escalate(db: Any, state: LocalState, reason: str) -> str:
    op_id = await submit(db)
    await drive(db, op_id, state)
    op = await ledger.load_operation(db, op_id)
    await decisions.escalate(db, op, state, reason, seen=1)
    return op_id


# ------------------------------------------------------------------ help


@pytest.mark.parametrize(
    "command",
    ["submit", "list", "show", "cancel", "inbox", "resolve", "reconcile", "tokens", "mcp"],
)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([command, "--help"])
    assert exited.value.code == 0
    assert "usage: jobwarden " + command in capsys.readouterr().out


# ------------------------------------------------------------------ tokens


async def test_tokens_are_shown_once_and_stored_hashed(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run("tokens", "create", "report-bot", "--json") == 0
    created = output(capsys)
    assert created["scope"] == "agent" and created["token"].startswith("jw_")
    stored = await db.fetchrow("SELECT * FROM api_tokens WHERE token_id = $1", created["token_id"])
    assert stored["token_sha256"] == token_digest(created["token"])
    assert created["token"] not in json.dumps(dict(stored), default=str)
    assert await run("tokens", "list", "--json") == 0
    listed = output(capsys)
    assert [t["caller"] for t in listed] == ["report-bot"] and "token" not in listed[0]


async def test_operator_token_and_revocation(db: Any, capsys: pytest.CaptureFixture[str]) -> None:
    await run("tokens", "create", "ops", "--operator", "--json")
    token_id = output(capsys)["token_id"]
    assert await run("tokens", "revoke", token_id) == 0
    assert "revoked" in capsys.readouterr().out
    row = await db.fetchrow(
        "SELECT scope, revoked_at FROM api_tokens WHERE token_id = $1", token_id
    )
    assert row["scope"] == "operator" and row["revoked_at"] is not None
    assert await run("tokens", "revoke", "tok_0000000000000000") == 1


async def test_token_names_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("tokens", "create", "Not A Name") == 2
    assert "NAME must be" in capsys.readouterr().err


# ------------------------------------------------------------------ submit / list / show


async def test_submit_records_an_operation_once(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", "--provider", "sim", "--kind", "export", "--body", '{"m": 2}', "--ref", "r1"]
    assert await run(*argv, "--json") == 0
    first = output(capsys)
    assert first["created"] is True and first["state"] == "create_pending"
    assert first["requested_by"] == "operator:dana"
    assert await run(*argv) == 0
    assert "already recorded as" in capsys.readouterr().out
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [("--method", "DELETE", "POST"), ("--target", "/v1/elsewhere", "/v1/jobs")],
)
async def test_submit_refuses_a_method_or_target_the_create_call_never_sends(
    db: Any, capsys: pytest.CaptureFixture[str], flag: str, value: str, named: str
) -> None:
    """The reconciler always sends the provider's configured create call: any
    other method or target would be recorded, fingerprinted and shown as sent
    while that call was (the API refuses it: 422), so it is a usage error."""
    argv = ["submit", "--provider", "sim", "--kind", "export", "--ref", "r1"]
    assert await run(*argv, flag, value) == 2
    err = capsys.readouterr().err
    assert flag in err and named in err
    assert await db.fetchval("SELECT count(*) FROM operations") == 0


async def test_submit_refuses_a_body_the_create_call_cannot_carry(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked by building the create as the reconciler will, as the API does
    (422): before, the CLI recorded it, and the operation went to a human at
    its first create, never sent."""
    argv = ["submit", "--provider", "sim", "--kind", "export", "--body", "[1, 2]"]
    assert await run(*argv) == 2
    err = capsys.readouterr().err
    assert "--body cannot be sent to provider 'sim'" in err and "JSON object" in err
    assert await db.fetchval("SELECT count(*) FROM operations") == 0


async def test_submit_takes_a_method_and_target_that_restate_the_create_call(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", "--provider", "sim", "--kind", "export", "--ref", "r1", "--json"]
    assert await run(*argv, "--method", "post", "--target", "/v1/jobs") == 0
    assert output(capsys)["created"] is True
    request = await db.fetchval("SELECT request FROM operations")
    stored = json.loads(request) if isinstance(request, str) else request
    assert (stored["method"], stored["target"]) == ("POST", "/v1/jobs")


async def test_a_resubmit_naming_another_deadline_is_refused_as_the_apis_is(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deadline given is part of the intent, as in the API (409 naming the
    field); one left out is not compared. Before, the CLI compared none: a
    resubmit asking for a longer wait was told "already recorded" and kept the
    first deadline."""
    argv = ["submit", "--provider", "sim", "--kind", "export", "--ref", "r1"]
    assert await run(*argv, "--result-deadline", "2h") == 0
    capsys.readouterr()
    assert await run(*argv, "--result-deadline", "3h") == 1
    assert "result_deadline" in capsys.readouterr().err
    assert await run(*argv) == 0  # left out: not compared
    assert "already recorded as" in capsys.readouterr().out
    assert await run(*argv, "--result-deadline", "2h") == 0
    assert await db.fetchval("SELECT count(*) FROM operations") == 1


async def test_submit_to_an_unknown_provider_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("submit", "--provider", "acme", "--kind", "x") == 2
    assert "not configured (configured: sim)" in capsys.readouterr().err


async def test_list_filters_by_state_provider_and_age(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    running = await submit(db, ref="a")
    finished = await submit(db, ref="b")
    await finish_with_result(db, finished, total=1)
    await run("list", "--state", "succeeded", "--json")
    assert [r["operation_id"] for r in output(capsys)] == [finished]
    await run("list", "--running", "--provider", "sim", "--json")
    assert [r["operation_id"] for r in output(capsys)] == [running]
    await run("list", "--newer-than", "1h", "--json")
    assert len(output(capsys)) == 2
    await run("list", "--older-than", "1h", "--json")
    assert output(capsys) == []
    assert await run("list") == 0
    assert running in capsys.readouterr().out
    assert await run("list", "--state", "bogus") == 2


async def test_show_merges_the_timeline_in_time_order(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await submit(db)
    await finish_with_result(db, op_id, total=2)
    assert await run("show", op_id, "--json") == 0
    shown = output(capsys)
    timeline = shown["timeline"]
    kinds = {entry["kind"] for entry in timeline}
    assert {"transition", "call"} <= kinds
    assert [e["at"] for e in timeline] == sorted(e["at"] for e in timeline)
    calls = [e for e in timeline if e["kind"] == "call"]
    assert all(c["details"]["trace_id"] for c in calls)
    transitions = [e["details"]["to"] for e in timeline if e["kind"] == "transition"]
    assert transitions[0] == "create_pending" and transitions[-1] == "succeeded"
    assert shown["agent_view"]["outcome"] == "succeeded"
    assert await run("show", op_id) == 0
    text = capsys.readouterr().out
    assert "timeline" in text and "trace" in text and "succeeded" in text


async def test_show_unknown_operation_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("show", "op_01J00000000000000000000000") == 1
    assert "no operation" in capsys.readouterr().err


# ------------------------------------------------------------------ cancel / inbox


async def test_cancel_requests_and_never_claims(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    assert await run("cancel", op_id, "--reason", "wrong account", "--json") == 0
    answer = output(capsys)
    assert answer["state"] == "cancel_requested" and "NOT confirmed" in answer["message"]
    actor = await db.fetchval(
        "SELECT actor FROM history WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1", op_id
    )
    assert actor == "operator:dana"


async def test_cancel_uses_the_providers_cancel_deadline(
    db: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "jobwarden.toml").write_text(
        '[providers.sim]\npreset = "simulator"\n'
        "[providers.sim.limits]\ncancel_deadline_seconds = 123\n"
    )
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    assert await run("cancel", op_id, "--reason", "wrong account", "--json") == 0
    seconds = await db.fetchval(
        "SELECT extract(epoch FROM cancel_deadline - cancel_requested_at) FROM operations"
        " WHERE operation_id = $1",
        op_id,
    )
    assert 122 <= float(seconds) <= 124


async def test_cancel_works_without_the_providers_secrets(
    db: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "jobwarden.toml").write_text(
        '[providers.openai]\npreset = "openai_batch"\n'  # needs OPENAI_API_KEY, unset here
    )
    op_id = await submit(db)
    await drive(db, op_id, S.OBSERVING)
    assert await run("cancel", op_id, "--reason", "runaway", "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "cancel_requested"
    assert "default cancel deadline" in captured.err


async def test_inbox_lists_escalations_oldest_first(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    first = await escalate(db, S.NEEDS_ATTENTION, "same token, two job ids")
    second = await escalate(db, S.RESULT_TIMED_OUT, "result deadline passed")
    await submit(db)  # running: not in the inbox
    assert await run("inbox", "--json") == 0
    inbox = output(capsys)
    assert [r["operation_id"] for r in inbox] == [first, second]
    assert inbox[0]["escalation_reason"] == "same token, two job ids"
    assert inbox[1]["remote_job_id"] is not None
    assert await run("inbox") == 0
    assert "result deadline passed" in capsys.readouterr().out


async def test_the_inbox_names_the_job_a_webhook_gave_an_operation_with_none(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lost create at a provider with no lookup: the completion webhook (our
    operation id in its URL) reached the stranded operation carrying the job id,
    and the inbox said `job -`; it is the lead an operator adopts."""
    op_id = await submit(db)
    await drive(db, op_id, S.NEEDS_ATTENTION)
    columns = dict.fromkeys(webhooks.EVENT_COLUMNS)
    values = {
        "provider": "sim",
        "event_id": "evt_1",
        "scheme": "standard_webhooks",
        "id_signed": True,
        "remote_job_id": "job_w",
        "operation_ref": op_id,
        "client_reference": None,
        "remote_state": "succeeded",
        "remote_state_raw": "succeeded",
        "payload": "{}",
        "extra": 0,
    }
    columns.update({name: [value] for name, value in values.items()})
    [stored] = await webhooks.store_events(db, columns)
    assert stored["operation_id"] == op_id
    assert await run("inbox", "--json") == 0
    [row] = output(capsys)
    assert (row["remote_job_id"], row["webhook_job_id"]) == (None, "job_w")
    assert await run("inbox") == 0
    text = " ".join(capsys.readouterr().out.split())  # the details wrap between words
    assert "a webhook names job_w" in text
    assert "--decision observing --job-id job_w" in text


# ------------------------------------------------------------------ resolve / reconcile


async def test_resolve_records_the_decision_and_closes_the_escalation(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    argv = ["resolve", op_id, "--decision", "failed", "--reason", "vendor confirmed", "--json"]
    assert await run(*argv, "--as", "erin") == 0
    assert output(capsys)["to"] == "failed"
    last = await db.fetchrow(
        "SELECT actor, to_state::text, evidence_kind FROM history WHERE operation_id = $1"
        " ORDER BY seq DESC LIMIT 1",
        op_id,
    )
    assert tuple(last) == ("operator:erin", "failed", "decision")
    decision = await db.fetchrow(
        "SELECT actor, reason FROM decisions WHERE operation_id = $1", op_id
    )
    assert tuple(decision) == ("operator:erin", "vendor confirmed")
    assert await db.fetchval(
        "SELECT resolved_at IS NOT NULL FROM escalations WHERE operation_id = $1", op_id
    )


async def test_resolve_refuses_a_move_the_machine_forbids(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
    assert await run("resolve", op_id, "--decision", "succeeded", "--reason", "looks ok") == 2
    err = capsys.readouterr().err
    assert "needs_attention -> succeeded is not an operator move" in err
    assert "allowed from needs_attention: observing, result_collecting, failed" in err
    assert await run("resolve", op_id, "--decision", "done", "--reason", "x y z") == 2
    assert await db.fetchval("SELECT count(*) FROM decisions") == 0


async def test_resolve_to_cancel_requested_records_the_intent(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.NEEDS_ATTENTION, "stuck")
    argv = ["resolve", op_id, "--decision", "cancel_requested", "--reason", "stop it"]
    assert await run(*argv) == 0
    row = await db.fetchrow(
        "SELECT state::text, cancel_requested_by FROM operations WHERE operation_id = $1", op_id
    )
    assert tuple(row) == ("cancel_requested", "operator:dana")


async def test_reconcile_resumes_a_timed_out_operation(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    await db.execute(
        "UPDATE operations SET result_deadline = created_at + interval '1 ms'"
        " WHERE operation_id = $1",
        op_id,
    )
    assert await run("reconcile", op_id, "--json") == 0
    answer = output(capsys)
    assert (answer["from"], answer["to"]) == ("result_timed_out", "observing")
    row = await db.fetchrow(
        "SELECT state::text, result_deadline > now() + interval '50 minutes' AS extended,"
        " next_poll_at <= now() AS due,"
        " EXISTS (SELECT 1 FROM operation_wakes w WHERE w.operation_id = o.operation_id)"
        " FROM operations o WHERE operation_id = $1",
        op_id,
    )
    assert tuple(row) == ("observing", True, True, True)
    assert await db.fetchval(
        "SELECT resolved_at IS NOT NULL FROM escalations WHERE operation_id = $1", op_id
    )


@pytest.mark.parametrize(
    ("left", "extended"), [("30 seconds", True), ("2 hours", False)], ids=["seconds", "hours"]
)
async def test_reconcile_extends_a_deadline_about_to_pass_as_one_passed(
    db: Any, capsys: pytest.CaptureFixture[str], left: str, extended: bool
) -> None:
    """The default hour applied only once the result deadline had passed: resumed
    with seconds left, the operation got no extension, was read once at most and
    timed out again (the reconciler escalates at the first read past the deadline).
    Now it applies when less than the reconciler's deadline grace remains; a
    deadline hours away is left as it is."""
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "deadline passed")
    await db.execute(
        "UPDATE operations SET result_deadline = now() + $2::text::interval"
        " WHERE operation_id = $1",
        op_id,
        left,
    )
    assert await run("reconcile", op_id, "--json") == 0
    assert output(capsys)["to"] == "observing"
    row = await db.fetchrow(
        "SELECT result_deadline > now() + interval '50 minutes' + $2::text::interval"
        " FROM operations WHERE operation_id = $1",
        op_id,
        left,
    )
    assert row[0] is extended


async def test_reconcile_a_result_problem_collects_again(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.RESULT_UNAVAILABLE, "link expired")
    assert await run("reconcile", op_id, "--reason", "new link issued") == 0
    state = await db.fetchval("SELECT state::text FROM operations WHERE operation_id = $1", op_id)
    assert state == "result_collecting"


async def test_reconcile_an_unconfirmed_cancellation_reads_again_in_place(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await escalate(db, S.CANCELLATION_UNCONFIRMED, "cancel deadline passed")
    assert await run("reconcile", op_id, "--json") == 0
    assert output(capsys)["to"] == "cancellation_unconfirmed"
    row = await db.fetchrow(
        "SELECT EXISTS (SELECT 1 FROM operation_wakes w WHERE w.operation_id = o.operation_id),"
        " (SELECT count(*) FROM decisions d"
        " WHERE d.operation_id = o.operation_id) AS decisions FROM operations o"
        " WHERE operation_id = $1",
        op_id,
    )
    assert tuple(row) == (True, 1)


async def test_two_operators_deciding_at_once_one_wins_and_the_other_is_told(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each decision's foreign key took a KEY SHARE lock, then each move wanted the
    row: PostgreSQL killed one as a deadlock, a traceback (3 rounds in 8, a review).
    The row is now locked first, so the later one reads what the first did."""
    for _ in range(8):
        op_id = await escalate(db, S.NEEDS_ATTENTION, "two job ids")
        codes = await asyncio.gather(
            run("resolve", op_id, "--decision", "failed", "--reason", "alice: it failed"),
            run("resolve", op_id, "--decision", "cancel_requested", "--reason", "carol: stop"),
        )
        assert codes.count(0) == 1 and set(codes) - {0} <= {1, 2}  # one refused, in words
        refusal = capsys.readouterr().err
        assert any(
            words in refusal
            for words in ("concurrent or stale", "is not an operator move", "is already failed")
        )
        decided = await db.fetchval("SELECT count(*) FROM decisions WHERE operation_id = $1", op_id)
        assert decided == 1


async def test_a_deadline_extension_that_cannot_apply_is_refused_not_dropped(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was ignored, exit 0: the operator believed the deadline pushed back (a review)."""
    op_id = await escalate(db, S.CANCELLATION_UNCONFIRMED, "cancel deadline passed")
    before = await db.fetchval("SELECT count(*) FROM decisions WHERE operation_id = $1", op_id)
    assert await run("reconcile", op_id, "--extend-deadline", "2h") == 1
    error = capsys.readouterr().err
    assert "--extend-deadline applies only when observation resumes" in error
    assert "nothing was changed" in error
    after = await db.fetchval("SELECT count(*) FROM decisions WHERE operation_id = $1", op_id)
    assert after == before


async def test_reconcile_a_finished_operation_is_refused(
    db: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    op_id = await submit(db)
    await finish_with_result(db, op_id, total=1)
    assert await run("reconcile", op_id) == 1
    assert "already succeeded" in capsys.readouterr().err


# ------------------------------------------------------------------ layout at 80 columns


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d")


async def seeded_for_layout(db: Any) -> dict[str, str]:
    """Operations whose values are long: escalated with a long reason, finished with a job id."""
    states = {}
    op_id = await escalate(
        db,
        S.NEEDS_ATTENTION,
        "the same idempotency token was answered with two different job ids by the provider",
    )
    states[op_id] = "needs_attention"
    op_id = await escalate(db, S.RESULT_TIMED_OUT, "result deadline passed")
    states[op_id] = "result_timed_out"
    op_id = await submit(db, ref="done")
    await finish_with_result(db, op_id, total=2)
    states[op_id] = "succeeded"
    return states


def assert_readable_at_80(text: str, states: dict[str, str]) -> None:
    """No line past 80 columns; each id whole, on one line with its whole state."""
    assert all(len(line) <= 80 for line in text.splitlines()), text
    for op_id, state in states.items():
        assert any(op_id in line and state in line for line in text.splitlines()), (op_id, text)


async def test_list_reads_at_80_columns(
    db: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    states = await seeded_for_layout(db)
    jobs = await db.fetch("SELECT remote_job_id FROM operations WHERE remote_job_id IS NOT NULL")
    monkeypatch.setenv("COLUMNS", "80")
    assert await run("list") == 0
    text = capsys.readouterr().out
    assert_readable_at_80(text, states)
    assert jobs and all(row["remote_job_id"] in text for row in jobs)


async def test_inbox_reads_at_80_columns(
    db: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    states = await seeded_for_layout(db)
    del states[next(k for k, v in states.items() if v == "succeeded")]
    monkeypatch.setenv("COLUMNS", "80")
    assert await run("inbox") == 0
    text = capsys.readouterr().out
    assert_readable_at_80(text, states)
    assert "two different job ids by the provider" in " ".join(text.split())
    assert all(f"jobwarden show {op_id}" in text for op_id in states)


async def test_list_is_one_line_per_operation_when_wide_enough(
    db: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    states = await seeded_for_layout(db)
    monkeypatch.setenv("COLUMNS", "200")
    assert await run("list") == 0
    lines = capsys.readouterr().out.splitlines()
    for op_id, state in states.items():
        (line,) = [line for line in lines if op_id in line]
        assert state in line and "agent:test" in line


async def test_show_times_carry_milliseconds_and_zone(
    db: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    op_id = await submit(db)
    await finish_with_result(db, op_id, total=2)
    monkeypatch.setenv("COLUMNS", "80")
    assert await run("show", op_id) == 0
    text = capsys.readouterr().out
    entries = await db.fetchval(
        "SELECT count(*) FROM history WHERE operation_id = $1", op_id
    ) + await db.fetchval("SELECT count(*) FROM provider_calls WHERE operation_id = $1", op_id)
    # created, the result deadline, and every timeline entry
    assert len(TIMESTAMP.findall(text)) >= 2 + entries, text
    assert all(len(line) <= 80 for line in text.splitlines()), text


# ------------------------------------------------------------------ errors under --json


async def test_a_refusal_under_json_is_a_json_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert await run("show", "op_01J00000000000000000000000", "--json") == 1
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["code"] == "not_found" and "op_01J00000000000000000000000" in error["message"]
    assert captured.err == ""
    assert await run("list", "--state", "bogus", "--json") == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "usage"
