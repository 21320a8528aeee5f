"""Operator commands: submit, list, show, cancel, inbox, resolve, reconcile, tokens, mcp.

Operators act only through the ledger's guarded paths: a resolution is a
recorded decision plus a transition the state machine allows (the database
refuses anything else, whoever asks), so every human action is in the
hash-chained history with its reason. Every read command takes `--json` for
scripts; tables are for people.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from shared import ledger
from shared.cli.errors import USAGE, CommandError, failure_of, printable, report
from shared.db.queries import q
from shared.db.runtime import migrated_connection
from shared.ids import is_operation_id
from shared.ledger import RequestSpec, decisions, tokens
from shared.ledger.decisions import MIN_REASON, operator_targets
from shared.ledger.errors import AdoptionRefused, LedgerError, RequestMismatch, UnknownOperation
from shared.ledger.states import TERMINAL, LocalState
from shared.ledger.tokens import CALLER_NAME, Scope, mint_token
from shared.text import holds_exactly

if TYPE_CHECKING:  # the provider table is loaded by submit alone
    from shared.providers import ProviderDescription

S = LocalState
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# Longer than any deadline, age or extension means; far longer ones (10^14 days,
# or so many digits the float is infinite) overflow PostgreSQL's timestamps.
MAX_DURATION_SECONDS = 100 * 365 * 86400.0

# Where `reconcile` moves an escalated operation so the reconciler reads again.
_RESUME_TO: dict[LocalState, LocalState] = {
    S.RESULT_TIMED_OUT: S.OBSERVING,
    S.NEEDS_ATTENTION: S.OBSERVING,
    S.RESULT_UNAVAILABLE: S.RESULT_COLLECTING,
    S.RESULT_VALIDATION_FAILED: S.RESULT_COLLECTING,
}


# ------------------------------------------------------------------ helpers


def parse_duration(text: str) -> float:
    """'90', '90s', '15m', '2h', '3d' -> seconds."""
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 15m, 2h, 3d)")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not seconds <= MAX_DURATION_SECONDS:
        # it reached the database, whose interval or timestamp overflowed: a traceback
        raise argparse.ArgumentTypeError(f"{text!r} is longer than 100 years (36500d)")
    return seconds


def stored_text(text: str) -> str:
    """An argument recorded or looked up as PostgreSQL text: refused (a usage
    error) when the database cannot hold it, before anything is written.

    NUL, and the unpaired surrogate Python makes of argv bytes that are not
    UTF-8 (a Latin-1 terminal's "café"), were a driver traceback at the first
    query. The value is not echoed: it is what could not be shown.
    """
    if not holds_exactly(text):
        raise argparse.ArgumentTypeError(
            "contains NUL or bytes that are not UTF-8, which the database cannot hold; "
            "type it again as UTF-8 text"
        )
    return text


def reason_text(text: str) -> str:
    """A --reason as recorded: storable, stripped, at least MIN_REASON characters.

    Shorter was the database's 'constraint decisions_reason_check' (exit 1),
    and a blank one was recorded; the console refuses both in words.
    """
    reason = stored_text(text).strip()
    if len(reason) < MIN_REASON:
        raise argparse.ArgumentTypeError(
            f"give a reason of at least {MIN_REASON} characters; it is recorded in the history"
        )
    return reason


def operator_actor(args: argparse.Namespace) -> str:
    name = getattr(args, "actor", None) or os.environ.get("USER") or getpass.getuser()
    return f"operator:{name}"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, LocalState):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def print_json(data: Any) -> None:
    print(json.dumps(data, default=_json_default, indent=2, ensure_ascii=False))


# Indent of a block's detail lines under its head line (print_records).
DETAIL_INDENT = 4
# Width when output is not a terminal (a pipe, a log): wide enough that ids
# and reasons are not folded, which the 80 columns rich assumes would do.
PIPE_WIDTH = 160


def _console() -> Console:
    # Built per command so output follows the current sys.stdout (tests, pipes).
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(soft_wrap=False, highlight=False, width=width)


# Wider than any terminal: measuring within it gives a renderable's unfolded width.
_UNBOUNDED = 100_000


def natural_width(console: Console, renderable: Table) -> int:
    """Columns `renderable` needs with nothing folded or cut (rich clamps to the console)."""
    return console.measure(renderable, options=console.options.update(max_width=_UNBOUNDED)).maximum


@dataclass(frozen=True)
class Record:
    """One row in both layouts: its table cells, or a block (a head line, then details)."""

    cells: tuple[str, ...]
    head: tuple[str, ...]
    details: tuple[str, ...] = ()


def print_records(
    console: Console, title: str, columns: Sequence[str], records: Sequence[Record]
) -> None:
    """A table, one line per row, when it fits the width; else a block per row.

    A table narrower than its rows folds every column, ids and state names
    included, into unreadable, uncopyable fragments (at 80 columns an
    operation list is a column of 2-letter pieces). A block keeps each value
    whole: the head line holds the id, the details wrap between words.
    Values are Text, never markup: they come from providers and operators.
    """
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in columns:
        table.add_column(column, no_wrap=True)
    for record in records:
        table.add_row(*(Text(printable(cell)) for cell in record.cells))
    if natural_width(console, table) <= console.width:
        console.print(table)
        return
    console.print(Text(printable(title), style="italic"))
    for record in records:
        console.print(Text(printable("  ".join(record.head))))
        for line in record.details:
            console.print(Padding(Text(printable(line)), (0, 0, 0, DETAIL_INDENT), expand=False))


def _when(at: datetime | None) -> str:
    """Local time with its UTC offset and milliseconds: unambiguous when pasted
    into a ticket, and it orders the calls and transitions of one second."""
    return at.astimezone().isoformat(sep=" ", timespec="milliseconds") if at else "-"


def _age(at: datetime | None) -> str:
    if at is None:
        return "-"
    seconds = max(0.0, (datetime.now(UTC) - at).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


@contextlib.asynccontextmanager
async def app_connection() -> AsyncIterator[Any]:
    """The configured database, migrated: every operator command's connection."""
    async with migrated_connection() as conn:
        yield conn


# How much of an id that is not one a refusal quotes (a 10 KB paste was echoed whole).
_QUOTED_ID = 64


async def _load(conn: Any, operation_id: str) -> ledger.Operation:
    if not is_operation_id(operation_id):
        shown = operation_id[:_QUOTED_ID] + ("…" if len(operation_id) > _QUOTED_ID else "")
        raise CommandError(
            f"no operation {shown}: not an operation id "
            "(op_ and 26 letters and digits, as `jobwarden list` shows them)",
            code="not_found",
        )
    try:
        return await ledger.load_operation(conn, operation_id)
    except UnknownOperation:
        raise CommandError(f"no operation {operation_id}", code="not_found") from None


def _row(record: Any) -> dict[str, Any]:
    return dict(record.items())


# ------------------------------------------------------------------ submit


def _body_argument(text: str) -> Any:
    """--body as JSON: inline, or @FILE. A file that cannot be read, or is not
    UTF-8, and a string escape PostgreSQL cannot hold (a lone surrogate such as
    "\\ud800") were tracebacks (FileNotFoundError, UnicodeDecodeError,
    UnicodeEncodeError at the insert): each is a usage error now."""
    try:
        raw = Path(text[1:]).read_text("utf-8") if text.startswith("@") else text
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(
            f"--body {printable(text)}: cannot read it as UTF-8 ({exc})", USAGE
        ) from None
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CommandError(f"--body is not valid JSON: {exc}", USAGE) from None
    if not holds_exactly(json.dumps(body, ensure_ascii=False)):
        raise CommandError(
            "--body holds a lone surrogate escape (such as \\ud800), which cannot be stored",
            USAGE,
        )
    return body


def _create_call(args: argparse.Namespace, desc: ProviderDescription) -> RequestSpec:
    """What will be sent: the provider's create call, with the body given.

    `--method` and `--target` may only restate that call, as the API's
    `request.method` and `request.target` may: the reconciler always sends the
    configured one (build_create), so any other would be recorded, fingerprinted
    and shown as sent while something else was. A body that call cannot carry is
    refused as the API refuses it (`unsendable`).
    """
    create = desc.create
    method = create.method.upper()
    if args.method is not None and args.method.upper() != method:
        raise CommandError(
            f"--method: provider {args.provider!r} is called with {method} to create a job;"
            " leave --method out or give that",
            USAGE,
        )
    if args.target is not None and args.target != create.path.text:
        raise CommandError(
            f"--target: provider {args.provider!r} creates jobs at its configured path"
            f" {printable(create.path.text)}; leave --target out or give that path",
            USAGE,
        )
    from shared.providers.requests import unsendable  # as load_settings: submit alone

    body = _body_argument(args.body)
    problem = unsendable(desc, body)
    if problem is not None:
        raise CommandError(f"--body cannot be sent to provider {args.provider!r}: {problem}", USAGE)
    return RequestSpec(method, create.path.text, body)


async def cmd_submit(args: argparse.Namespace) -> int:
    from shared.settings import load_settings  # the provider table is only needed here

    settings = load_settings()
    desc = settings.providers.get(args.provider)
    if desc is None:
        known = ", ".join(sorted(settings.providers)) or "none"
        raise CommandError(
            f"provider {args.provider!r} is not configured (configured: {known})", USAGE
        )
    spec = _create_call(args, desc)
    async with app_connection() as conn:
        try:
            submitted = await ledger.submit_operation(
                conn,
                provider=args.provider,
                kind=args.kind,
                request=spec,
                requested_by=operator_actor(args),
                client_reference=args.ref,
                approval_ref=args.approval_ref,
                idempotency_mode=desc.create.idempotency.value,
                create_deadline_s=args.create_deadline or desc.limits.create_deadline_seconds,
                result_deadline_s=args.result_deadline or desc.limits.result_deadline_seconds,
                # a deadline given is part of the intent, as in the API; a default is not
                given_deadlines=tuple(
                    name
                    for name, given in (
                        ("create_deadline_seconds", args.create_deadline),
                        ("result_deadline_seconds", args.result_deadline),
                    )
                    if given is not None
                ),
            )
        except RequestMismatch as exc:
            raise CommandError(str(exc)) from None
        row = await conn.fetchrow(q("api_operation"), submitted.operation_id, None)
    if args.json:
        print_json({**_row(row), "created": submitted.created})
    else:
        verb = "submitted" if submitted.created else "already recorded as"
        message = escape(printable(row["message"]))
        _console().print(f"{verb} [bold]{submitted.operation_id}[/bold]: {message}")
    return 0


# ------------------------------------------------------------------ list / show


def _states(values: Sequence[str] | None) -> list[str] | None:
    if not values:
        return None
    states = [s for value in values for s in value.split(",") if s]
    unknown = sorted(set(states) - {s.value for s in LocalState})
    if unknown:
        raise CommandError(f"unknown state(s): {', '.join(unknown)}", USAGE)
    return states


async def cmd_list(args: argparse.Namespace) -> int:
    done = True if args.done else False if args.running else None
    async with app_connection() as conn:
        rows = await conn.fetch(
            q("operator_list"),
            _states(args.state),
            args.provider,
            args.older_than,
            args.newer_than,
            done,
            args.limit,
        )
    if args.json:
        print_json([_row(r) for r in rows])
        return 0
    print_records(
        _console(),
        f"{len(rows)} operation(s), newest first",
        ("operation", "age", "provider", "kind", "state", "remote", "job", "by"),
        [_list_record(r) for r in rows],
    )
    return 0


def _list_record(r: Any) -> Record:
    remote, job = r["remote_state"] or "-", r["remote_job_id"] or "-"
    age = _age(r["created_at"])
    return Record(
        cells=(
            r["operation_id"],
            age,
            r["provider"],
            r["kind"],
            r["state"],
            remote,
            job,
            r["requested_by"],
        ),
        head=(r["operation_id"], r["state"], f"{age} old"),
        details=(
            f"{r['provider']}/{r['kind']} · remote {remote} · job {job} · by {r['requested_by']}",
        ),
    )


def _timeline_text(kind: str, details: Mapping[str, Any]) -> tuple[str, str]:
    """(what happened, ids worth quoting) for one timeline entry."""
    d = details
    if kind == "transition":
        evidence = f" [{d['evidence_kind']} #{d['evidence_id']}]" if d.get("evidence_kind") else ""
        what = f"{d['from'] or '∅'} → {d['to']} by {d['actor']}: {d['cause']}{evidence}"
        return what, ""
    if kind == "call":
        status = d.get("status_code") or d.get("error_category") or "no answer"
        took = d.get("duration_ms")  # 0 ms is a duration (a loopback answer), None is none
        what = (
            f"{d['call_kind']} #{d['attempt']} {d['method']} {d['url']} → {status}"
            f" ({'?' if took is None else took} ms)"
        )
        if d.get("not_before"):
            what += f"; provider asked to wait until {d['not_before']}"
        if d.get("anomalies"):
            what += f"; anomalies: {', '.join(d['anomalies'])}"
        ids = f"trace {d['trace_id']}"
        if d.get("provider_request_id"):
            ids += f", request {d['provider_request_id']}"
        return what, ids
    if kind == "observation":
        progress = (
            f" {d['progress_completed']}/{d['progress_total']}"
            if d.get("progress_total") is not None
            else ""
        )
        what = f"{d['source']}: remote {d.get('remote_state') or '?'}"
        what += f" ({d['remote_state_raw']})" if d.get("remote_state_raw") else ""
        if d.get("anomalies"):
            what += f" [anomalies: {', '.join(d['anomalies'])}]"
        ids = f"call #{d['call_id']}" if d.get("call_id") else ""
        if d.get("webhook_event_id"):
            ids = f"webhook {d['webhook_event_id']}"
        return what + progress, ids
    if kind == "decision":
        return f"{d['actor']} decided {d['decision']!r}: {d['reason']}", ""
    if not d.get("resolved_at"):
        resolved = " (open)"
    elif d.get("decision_id") is None:  # settled by a later move, not a decision (migration 028)
        resolved = " (resolved: the operation moved on, see the history)"
    else:
        resolved = f" (resolved, decision #{d['decision_id']})"
    return f"escalated in {d['state']}: {d['reason']}{resolved}", ""


async def cmd_show(args: argparse.Namespace) -> int:
    async with app_connection() as conn:
        op = await _load(conn, args.operation_id)
        view = await conn.fetchrow(q("api_operation"), args.operation_id, None)
        timeline = await conn.fetch(q("operator_timeline"), args.operation_id, None)
    if args.json:
        operation = {k: v for k, v in vars(op).items() if k != "_origin"}
        print_json(
            {
                "operation": operation,
                "agent_view": _row(view),
                "timeline": [_row(r) for r in timeline],
            }
        )
        return 0
    console = _console()
    # One fact per line, so none is cut in the middle at 80 columns.
    for line in (
        f"{op.operation_id}  {op.provider}/{op.kind}  ref {op.client_reference}",
        f"state {op.state.value}  remote {op.remote_state or '-'}  job {op.remote_job_id or '-'}",
        f"requested by {op.requested_by}  trace {op.trace_id}",
        f"created          {_when(op.created_at)}",
        f"result deadline  {_when(op.result_deadline)}",
        f"agents read: {view['message']}",
    ):
        console.print(Text(printable(line)))
    records = []
    for entry in timeline:
        what, ids = _timeline_text(entry["kind"], entry["details"])
        at = _when(entry["at"])
        records.append(
            Record(
                cells=(at, entry["kind"], what, ids),
                head=(at, entry["kind"]),
                details=(what, ids) if ids else (what,),
            )
        )
    print_records(console, "timeline", ("at", "kind", "what", "ids"), records)
    return 0


# ------------------------------------------------------------------ cancel


def _cancel_deadline(provider: str) -> float | None:
    """The provider's cancel deadline, or None (the default) if the config cannot load.

    Cancelling is an emergency action: it must work from a shell that lacks
    the provider's secrets, which loading the full configuration requires.
    """
    from shared.providers import ConfigError
    from shared.settings import load_settings

    try:
        return load_settings().cancel_deadline_for(provider)
    except ConfigError as exc:
        print(f"note: default cancel deadline used ({exc})", file=sys.stderr)
        return None


async def cmd_cancel(args: argparse.Namespace) -> int:
    async with app_connection() as conn:
        op = await _load(conn, args.operation_id)
        actor = operator_actor(args)
        with _outcome_unknown_if_cut(op.operation_id, "the cancel request"):
            done = await ledger.cancel_intent(
                conn,
                op.operation_id,
                requested_by=actor,
                reason=args.reason,
                cancel_deadline_s=_cancel_deadline(op.provider),
            )
        after = await _load(conn, op.operation_id)
    state = done.state
    if state in (S.CANCEL_REQUESTED, S.CANCELLING):
        message = "cancellation requested; NOT confirmed until the provider reports it"
    elif state is S.ABANDONED:
        message = "abandoned: the create request had not been sent, no job exists"
    elif state in TERMINAL:
        message = f"nothing to cancel: already {state.value}"
    elif not done.recorded:
        # an intent still waiting for an operator (an earlier one, or another
        # operator's of a moment ago) is kept: this one was recorded nowhere,
        # though "intent recorded" said it was
        message = (
            f"not recorded: the cancel intent of {after.cancel_requested_by} at "
            f"{_when(after.cancel_requested_at)} stands; the operation stays {state.value} "
            f"(to cancel it now: jobwarden resolve {op.operation_id} --decision "
            "cancel_requested --reason ...)"
        )
    else:
        message = f"intent recorded; the operation stays {state.value}"
    if args.json:
        print_json({"operation_id": op.operation_id, "state": state.value, "message": message})
    else:
        # the message may quote an operator name (--as), typed with anything in it
        _console().print(Text(printable(f"{op.operation_id}: {message}")))
    return 0


# ------------------------------------------------------------------ inbox


async def cmd_inbox(args: argparse.Namespace) -> int:
    async with app_connection() as conn:
        rows = await conn.fetch(q("operator_inbox"))
    if args.json:
        print_json([_row(r) for r in rows])
        return 0
    if not rows:
        _console().print("inbox is empty: nothing waits for a human")
        return 0
    print_records(
        _console(),
        f"{len(rows)} operation(s) waiting for a human, oldest first",
        ("since", "operation", "state", "provider", "job", "why", "next"),
        [_inbox_record(r) for r in rows],
    )
    return 0


def _inbox_record(r: Any) -> Record:
    why = r["escalation_reason"] or (r["error"] or {}).get("message") or "-"
    since, job = _age(r["since"]), r["remote_job_id"] or "-"
    show = f"jobwarden show {r['operation_id']}"
    named = r["webhook_job_id"]
    if named is not None:
        # a signed delivery names the job the lost create made: a lead, not proof
        job = f"- (a webhook names {named})"
        show = (
            f"check job {named} at the provider, then: jobwarden resolve {r['operation_id']} "
            f"--decision observing --job-id {named} --reason ..."
        )
    return Record(
        cells=(since, r["operation_id"], r["state"], r["provider"], job, why, show),
        head=(r["operation_id"], r["state"], f"for {since}"),
        details=(f"why: {why}", f"{r['provider']} · job {job} · next: {show}"),
    )


# ------------------------------------------------------------------ resolve / reconcile


@contextlib.contextmanager
def _outcome_unknown_if_cut(operation_id: str, what: str) -> Iterator[None]:
    """A connection lost while `what` was being written: it may have been committed.

    Cut at the COMMIT, the server has committed and only the answer is lost.
    The generic account ("check that the server is running, then try again")
    let the operator believe nothing was done; the retry was then refused in
    words that did not say why (the first attempt had moved the operation).
    """
    try:
        yield
    except (asyncpg.ConnectionDoesNotExistError, ConnectionResetError) as exc:
        raise CommandError(
            f"the connection to PostgreSQL was lost while {what} was being recorded ({exc}): "
            "it may have been recorded",
            code="connection_lost",
            hint=f"look at jobwarden show {operation_id} before acting again: its timeline "
            "shows whether it was",
        ) from None


def _refused_by_db(exc: Exception) -> CommandError:
    constraint = getattr(exc, "constraint_name", None)
    detail = f"constraint {constraint}" if constraint else str(exc)
    return CommandError(f"the database refused the move ({detail})")


def _adopted_status_request(provider: str, job_id: str) -> dict[str, Any]:
    """The status read a worker will send for `job_id`, as the create step records it
    (`reconciler/steps/create.py` `_accept`): built by the provider's adapter."""
    from shared.providers import ConfigError, RequestBuildError
    from shared.providers.adapter import adapter_for
    from shared.settings import load_settings

    try:
        desc = load_settings(credentials=False).providers.get(provider)
    except ConfigError as exc:
        raise CommandError(
            f"cannot adopt a job id: the configuration does not load ({exc})",
            hint="run this where the reconciler's configuration (JW_CONFIG) is readable",
        ) from None
    if desc is None:
        raise CommandError(
            f"cannot adopt a job id: provider {provider!r} is not in this configuration",
            hint="run this where the reconciler's configuration (JW_CONFIG) is readable",
        )
    try:
        status = adapter_for(desc).build_status(job_id)
    except RequestBuildError as exc:
        raise CommandError(
            f"cannot adopt job {job_id!r}: no status read can be built ({exc})",
            hint=(
                "a provider that reads status only from the URL its create answer gave "
                "(status.use_status_url) needs status.path too, as the fallback a job "
                "known by its id alone is read at"
            )
            if desc.status.use_status_url
            else "",
        ) from None
    return status.on_record()


async def cmd_resolve(args: argparse.Namespace) -> int:
    job_id: str | None = args.job_id
    async with app_connection() as conn:
        op = await _load(conn, args.operation_id)
        allowed = operator_targets(op.state)
        names = ", ".join(s.value for s in allowed) or "none (no operator move from here)"
        try:
            target = LocalState(args.decision)
        except ValueError:
            raise CommandError(
                f"unknown state {args.decision!r}; from {op.state.value}: {names}", USAGE
            ) from None
        if job_id is not None and target is not S.OBSERVING:
            raise CommandError(
                f"--job-id adopts a job found at the provider, and only --decision observing "
                f"takes one (not {target.value}); nothing was changed",
                USAGE,
            )
        if args.extend_deadline is not None and target is not S.OBSERVING:
            raise CommandError(
                "--extend-deadline applies only when observation resumes (--decision "
                "observing); nothing was changed",
                USAGE,
            )
        if job_id is not None:
            refusal = decisions.adoption_refusal(op, job_id)
            if refusal is not None:
                raise CommandError(f"{refusal}; nothing was changed")
        elif (target is op.state or op.state in TERMINAL) and target not in allowed:
            # a retry of a decision already applied (its answer lost), or a second
            # operator's finishing it first: a usage error ("not an operator move",
            # exit 2) said neither
            raise CommandError(
                f"{op.operation_id} is already {op.state.value}; nothing was changed",
                hint=f"jobwarden show {op.operation_id}: its timeline shows the decision "
                "that moved it",
            )
        elif target not in allowed:
            raise CommandError(
                f"{op.state.value} -> {target.value} is not an operator move; "
                f"allowed from {op.state.value}: {names}",
                USAGE,
            )
        elif decisions.needs_a_job_id(op, target):
            raise CommandError(
                f"{op.operation_id} has no remote job id on record: there is no job to observe",
                hint=(
                    "if you found the job at the provider, adopt it: jobwarden resolve "
                    f"{op.operation_id} --decision observing --job-id JOB --reason ..."
                ),
            )
        extension = None
        if target is S.OBSERVING:
            extension = await decisions.resume_extension(conn, op, args.extend_deadline)
        with _outcome_unknown_if_cut(op.operation_id, "the decision"):
            try:
                if job_id is not None:
                    decided = await decisions.adopt_job(
                        conn,
                        op,
                        job_id,
                        status_request=_adopted_status_request(op.provider, job_id),
                        actor=operator_actor(args),
                        reason=args.reason,
                        extend_result_deadline_s=extension,
                    )
                else:
                    decided = await decisions.decide(
                        conn,
                        op,
                        target,
                        actor=operator_actor(args),
                        reason=args.reason,
                        extend_result_deadline_s=extension,
                        cancel_deadline_s=(
                            _cancel_deadline(op.provider) if target is S.CANCEL_REQUESTED else None
                        ),
                    )
            except AdoptionRefused as exc:
                raise CommandError(f"{exc}; nothing was changed") from None
            except (
                LedgerError,
                asyncpg.IntegrityConstraintViolationError,
                asyncpg.InsufficientPrivilegeError,  # a guard trigger's refusal (migration 033)
            ) as exc:
                raise _refused_by_db(exc) from None
        decision_id = decided.decision_id
    result = {
        "operation_id": op.operation_id,
        "from": op.state.value,
        "to": target.value,
        "decision_id": decision_id,
        "remote_job_id": job_id or op.remote_job_id,
        "result_deadline": decided.result_deadline,
    }
    if args.json:
        print_json(result)
    else:
        adopted = f"; job {job_id} adopted, the reconciler reads it now" if job_id else ""
        extra = (
            f"; result deadline now {_when(decided.result_deadline)}"
            if decided.result_deadline
            else ""
        )
        _console().print(
            Text(
                printable(
                    f"{op.operation_id}: {op.state.value} → {target.value} "
                    f"(decision #{decision_id}){adopted}{extra}"
                )
            )
        )
    return 0


async def cmd_reconcile(args: argparse.Namespace) -> int:
    actor = operator_actor(args)
    reason = args.reason or "operator-triggered status read"
    async with app_connection() as conn:
        op = await _load(conn, args.operation_id)
        if op.state in TERMINAL:
            raise CommandError(
                f"{op.operation_id} is already {op.state.value}: nothing to reconcile"
            )
        target = _RESUME_TO.get(op.state)
        if target is not None and decisions.needs_a_job_id(op, target):
            raise CommandError(
                f"{op.operation_id} has no remote job id to read; decide with "
                f"`jobwarden resolve` (allowed: "
                f"{', '.join(s.value for s in operator_targets(op.state))}; to observe a job "
                "found at the provider: --decision observing --job-id JOB)"
            )
        if args.extend_deadline is not None and target is not S.OBSERVING:
            # it was dropped without a word: the operation then timed out on schedule
            raise CommandError(
                f"{op.operation_id} is {op.state.value}: --extend-deadline applies only when "
                "observation resumes (from "
                f"{', '.join(s.value for s, to in _RESUME_TO.items() if to is S.OBSERVING)}); "
                "nothing was changed"
            )
        deadline = None
        override = bool(getattr(args, "override_back_pressure", False))
        with _outcome_unknown_if_cut(op.operation_id, "the decision"):
            try:
                if target is None:  # keep the state, read again (cancellation_unconfirmed...)
                    await decisions.request_read(
                        conn, op, actor=actor, reason=reason, override_back_pressure=override
                    )
                    moved_to = op.state
                else:
                    extension = None
                    if target is S.OBSERVING:
                        extension = await decisions.resume_extension(conn, op, args.extend_deadline)
                    # One transaction: the move and the override apply together or
                    # not at all. Apart, a reconciler's move between them made the
                    # override refuse (exit 1) after the move and its decision stood.
                    async with conn.transaction():
                        decided = await decisions.decide(
                            conn,
                            op,
                            target,
                            actor=actor,
                            reason=reason,
                            extend_result_deadline_s=extension,
                        )
                        if override:
                            await decisions.request_read(
                                conn,
                                await _load(conn, op.operation_id),
                                actor=actor,
                                reason=reason,
                                override_back_pressure=True,
                            )
                    deadline = decided.result_deadline
                    moved_to = target
            except (LedgerError, asyncpg.IntegrityConstraintViolationError) as exc:
                raise _refused_by_db(exc) from None
    result = {
        "operation_id": op.operation_id,
        "from": op.state.value,
        "to": moved_to.value,
        "result_deadline": deadline,
        "wake_requested": True,
    }
    if args.json:
        print_json(result)
    else:
        extra = f"; result deadline now {_when(deadline)}" if deadline else ""
        _console().print(
            f"{op.operation_id}: {op.state.value} → {moved_to.value}; the reconciler will read "
            f"the remote status now{extra}"
        )
    return 0


# ------------------------------------------------------------------ tokens


async def cmd_tokens_create(args: argparse.Namespace) -> int:
    if not CALLER_NAME.match(args.name):
        raise CommandError(
            "NAME must be lowercase letters, digits, '.', '_' or '-' (max 63)", USAGE
        )
    scope: Scope = "operator" if args.operator else "agent"
    minted = mint_token()
    async with app_connection() as conn:
        row = await tokens.create_token(
            conn, minted, caller=args.name, scope=scope, created_by=operator_actor(args)
        )
    if args.json:
        print_json({**_row(row), "token": minted.secret})
    else:
        console = _console()
        console.print(f"token {row['token_id']} for {scope} {args.name!r} (shown once, keep it):")
        print(minted.secret)
    return 0


async def cmd_tokens_list(args: argparse.Namespace) -> int:
    async with app_connection() as conn:
        rows = await conn.fetch(q("tokens_list"))
    if args.json:
        print_json([_row(r) for r in rows])
        return 0
    print_records(
        _console(),
        f"{len(rows)} API token(s)",
        ("token", "caller", "scope", "created", "last used", "revoked"),
        [_token_record(r) for r in rows],
    )
    return 0


def _token_record(r: Any) -> Record:
    times = {
        "created": _when(r["created_at"]),
        "last used": _when(r["last_used_at"]),
        "revoked": _when(r["revoked_at"]),
    }
    return Record(
        cells=(r["token_id"], r["caller"], r["scope"], *times.values()),
        head=(r["token_id"], r["caller"], r["scope"]),
        details=tuple(f"{name:<9}  {at}" for name, at in times.items() if at != "-"),
    )


async def cmd_tokens_revoke(args: argparse.Namespace) -> int:
    async with app_connection() as conn:
        row = await tokens.revoke_token(conn, args.token_id)
    if row is None:
        raise CommandError(f"no token {args.token_id}", code="not_found")
    if args.json:
        print_json(_row(row))
    else:
        _console().print(
            f"revoked {row['token_id']} ({row['caller']}) at {_when(row['revoked_at'])}"
        )
    return 0


async def cmd_mcp(args: argparse.Namespace) -> int:
    from shared.agents.mcp import run_stdio

    return await run_stdio()


# ------------------------------------------------------------------ parser


def _guard(handler: Any) -> Any:
    """Print a refusal or a database problem in one line (JSON under --json), not a traceback."""

    async def run(args: argparse.Namespace) -> int:
        try:
            status: int = await handler(args)
            return status
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            return report(failure, as_json=bool(getattr(args, "json", False)))

    return run


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _as_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as",
        dest="actor",
        metavar="NAME",
        type=stored_text,
        help="operator name recorded in history (default: $USER)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the operator commands to `jobwarden`'s subcommand parser."""
    p = sub.add_parser("submit", help="record a new operation (the reconciler sends it)")
    p.add_argument("--provider", required=True, type=stored_text, help="configured provider name")
    p.add_argument("--kind", required=True, type=stored_text, help="what the job is, e.g. export")
    p.add_argument(
        "--body", default="{}", type=stored_text, help="request body as JSON, or @file.json"
    )
    p.add_argument(
        "--method",
        type=stored_text,
        help="the provider's create method (the default), restated; any other is refused",
    )
    p.add_argument(
        "--target",
        type=stored_text,
        help="the provider's create path (the default), restated; any other is refused",
    )
    p.add_argument(
        "--ref", type=stored_text, help="client reference: resubmitting the same one is idempotent"
    )
    p.add_argument(
        "--approval-ref", type=stored_text, help="reference of the approval behind this job"
    )
    p.add_argument("--create-deadline", type=parse_duration, help="e.g. 10m")
    p.add_argument("--result-deadline", type=parse_duration, help="e.g. 2h")
    _as_flag(p)
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_submit))

    p = sub.add_parser("list", help="list operations, newest first")
    p.add_argument("--state", action="append", help="filter by state (repeat or comma-separate)")
    p.add_argument("--provider", type=stored_text, help="filter by provider")
    p.add_argument("--older-than", type=parse_duration, help="created before, e.g. 1h")
    p.add_argument("--newer-than", type=parse_duration, help="created within, e.g. 15m")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--done", action="store_true", help="only operations that are done")
    group.add_argument("--running", action="store_true", help="only operations not done")
    p.add_argument("--limit", type=int, default=50, help="at most this many rows (default 50)")
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_list))

    p = sub.add_parser(
        "show", help="one operation's timeline: transitions, calls, observations, decisions"
    )
    p.add_argument("operation_id", metavar="ID", type=stored_text)
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_show))

    p = sub.add_parser("cancel", help="request cancellation (never claims it happened)")
    p.add_argument("operation_id", metavar="ID", type=stored_text)
    p.add_argument("--reason", required=True, type=reason_text, help="why, recorded in history")
    _as_flag(p)
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_cancel))

    p = sub.add_parser("inbox", help="operations waiting for a human, oldest first")
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_inbox))

    p = sub.add_parser(
        "resolve",
        help="record a decision and move an operation where the machine allows",
        description=(
            "Record a decision and move an operation where the state machine allows. "
            "With --job-id, adopt a job found in the provider's console for an operation "
            "with no job on record (needs_attention, create_unknown: a create whose answer "
            "was lost at a provider that cannot deduplicate or look up): the job id is "
            "recorded for good, webhooks already stored for it are attached, and the "
            "reconciler reads it next; a provider answering that it does not know the job "
            "sends the operation back to the inbox."
        ),
    )
    p.add_argument("operation_id", metavar="ID", type=stored_text)
    p.add_argument("--decision", required=True, metavar="STATE", help="target state")
    p.add_argument(
        "--reason", required=True, type=reason_text, help="why (at least 3 characters), recorded"
    )
    p.add_argument(
        "--job-id",
        metavar="JOB",
        help=(
            "with --decision observing: the provider's job id for an operation that has none "
            "on record, exactly as the provider shows it (recorded for good, never replaced)"
        ),
    )
    p.add_argument(
        "--extend-deadline",
        type=parse_duration,
        metavar="DURATION",
        help=(
            "with --decision observing: push the result deadline this much later (from "
            "now if it has passed; default 1h if under 5 minutes remain)"
        ),
    )
    _as_flag(p)
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_resolve))

    p = sub.add_parser(
        "reconcile", help="resume an escalated operation and trigger a fresh status read"
    )
    p.add_argument("operation_id", metavar="ID", type=stored_text)
    p.add_argument(
        "--reason", type=reason_text, help="why (default: operator-triggered status read)"
    )
    p.add_argument(
        "--extend-deadline",
        type=parse_duration,
        help=(
            "push the result deadline this much later (from now if it has passed; "
            "default 1h if under 5 minutes remain)"
        ),
    )
    p.add_argument(
        "--override-back-pressure",
        action="store_true",
        help="read now even inside the provider's Retry-After window (recorded as a decision)",
    )
    _as_flag(p)
    json_flag(p)
    p.set_defaults(handler=_guard(cmd_reconcile))

    p = sub.add_parser("tokens", help="API tokens for agents and operators")
    tokens = p.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    t = tokens.add_parser("create", help="mint a token (printed once, stored hashed)")
    t.add_argument("name", metavar="NAME", help="caller name; operations show agent:NAME")
    t.add_argument("--operator", action="store_true", help="operator scope: sees every operation")
    _as_flag(t)
    json_flag(t)
    t.set_defaults(handler=_guard(cmd_tokens_create))
    t = tokens.add_parser("list", help="list tokens (never their secrets)")
    json_flag(t)
    t.set_defaults(handler=_guard(cmd_tokens_list))
    t = tokens.add_parser("revoke", help="revoke a token at once")
    t.add_argument("token_id", metavar="ID", type=stored_text)
    json_flag(t)
    t.set_defaults(handler=_guard(cmd_tokens_revoke))

    p = sub.add_parser(
        "mcp", help="serve the agent tools over MCP on stdio (needs JW_API_URL, JW_API_TOKEN)"
    )
    p.set_defaults(handler=_guard(cmd_mcp))
