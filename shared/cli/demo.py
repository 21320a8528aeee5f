"""`jobwarden demo` (what `make run` runs): every path, live, in under a minute.

Starts the simulated provider, the receiver and the reconciler as separate
processes — they meet only in PostgreSQL, as in production — then records a
handful of operations as an agent would and shows them settle: success by
webhook, success by polling only, a late failure, a confirmed cancellation, a
cancel race that ends in success, a partial result and a token conflict that
lands in the operator inbox. Ctrl-C stops everything cleanly; run it again and
it starts afresh beside the earlier runs. It prints the operator console's URL
and a fresh operator token to sign in with; at a terminal the console stays
up after the summary until Ctrl-C.

It works in a database of its own (`jobwarden_demo`, created if missing) on
the chosen server, never in the `jobwarden` database of whatever server
answers on 127.0.0.1:5432, and says which. On a terminal it shows a live
table; in a pipe or a log, a line per operation as it settles.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from shared import ledger
from shared.cli.operator import PIPE_WIDTH, natural_width
from shared.db.connect import DEMO_DATABASE, ResolvedDatabase, connection
from shared.db.errors import database_of
from shared.db.migrate import apply_migrations
from shared.db.runtime import app_database, current_choice
from shared.ledger import RequestSpec, tokens
from shared.ledger import log as evidence_log
from shared.ledger.states import ESCALATED, TERMINAL, LocalState

S = LocalState
DEMO_CALLER = "agent:demo"
# Characters of an operation id the live table keeps when the full ids do not
# fit: the tail, random in a ULID. The head is the creation time, the same
# to the millisecond for operations submitted together.
SHORT_ID_TAIL = 8


@dataclass(frozen=True)
class Scenario:
    label: str
    provider: str
    script: str
    params: dict[str, Any]
    expect: LocalState
    cancel_when_observing: bool = False


def scenarios(scale: float) -> list[Scenario]:
    def d(seconds: float) -> float:
        return round(seconds * scale, 2)

    return [
        Scenario("success via webhook", "sim", "success", {"duration": d(4)}, S.SUCCEEDED),
        Scenario("success, polling only", "sim-poll", "success", {"duration": d(4)}, S.SUCCEEDED),
        Scenario("late failure", "sim", "late_failure", {"duration": d(5)}, S.FAILED),
        Scenario("confirmed cancellation", "sim", "never_finishes", {}, S.CANCELLED, True),
        Scenario(
            "cancel race -> success", "sim", "cancel_race", {"duration": 60}, S.SUCCEEDED, True
        ),
        Scenario(
            "partial result (2 of 500 failed)",
            "sim",
            "partial",
            {"duration": d(6), "total": 500, "failed": 2},
            S.SUCCEEDED,
        ),
        Scenario(
            "token conflict -> inbox",
            "sim",
            "token_conflict",
            {"hang_seconds": 10},
            S.NEEDS_ATTENTION,
        ),
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(path: Path, sim_url: str, receiver_port: int) -> None:
    # Two providers on the same simulator: one with signed webhooks, one without
    # (its webhook secret variable is never set), to show both paths.
    path.write_text(f"""\
[jobwarden]
public_webhook_url = "http://127.0.0.1:{receiver_port}/webhooks/{{provider}}"
sweep_interval = 0.2

[providers.sim]
preset = "simulator"
base_url = "{sim_url}"
[providers.sim.limits]
backoff_base = 0.5
backoff_cap = 2.0
request_timeout = 2.0
webhook_backstop_poll_seconds = 5.0

[providers.sim-poll]
preset = "simulator"
base_url = "{sim_url}"
[providers.sim-poll.webhooks]
secrets_env = ["JW_DEMO_POLLING_ONLY_NO_SECRET"]
[providers.sim-poll.limits]
backoff_base = 0.5
backoff_cap = 2.0
request_timeout = 2.0
""")


@contextlib.contextmanager
def daemons(
    env: dict[str, str],
    workdir: Path,
    sim_port: int,
    receiver_port: int,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    commands = [
        ["simulator", "--port", str(sim_port)],
        ["receiver", "--port", str(receiver_port)],
        ["reconciler"],
    ]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for command in commands:
            with open(workdir / f"{command[0]}.log", "ab") as log:
                procs.append(
                    subprocess.Popen(  # noqa: S603 - our own CLI, fixed arguments
                        [sys.executable, "-m", "shared.cli", *command],
                        env=env,
                        stdout=log,
                        stderr=log,
                        start_new_session=True,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


async def wait_http(url: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code < 500:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up; see the logs under var/demo/")


Row = tuple[Scenario, str, Any]


@dataclass(frozen=True)
class Layout:
    """How much of each row the live table shows: all of it, or what 80 columns hold."""

    ids: Callable[[str], str] = str
    remote: bool = True
    expand: bool = True


def _state_style(state: str) -> str:
    if state == "succeeded":
        return "green"
    if state in (s.value for s in ESCALATED):
        return "yellow"
    return "red" if state in ("failed", "cancelled") else ""


def _cells(row: Any, layout: Layout) -> list[str | Text]:
    if row is None:
        return ["-"] * (4 if layout.remote else 3)
    progress = ""
    if row["progress_total"]:
        progress = f"{row['progress_completed']}/{row['progress_total']}"
    cells: list[str | Text] = [Text(row["state"], style=_state_style(row["state"]))]
    if layout.remote:
        cells.append(row["remote_state"] or "-")
    return [*cells, progress, str(row["calls"])]


def _table(rows: list[Row], layout: Layout) -> Table:
    table = Table(title="jobwarden demo — operations settling live", expand=layout.expand)
    table.add_column("scenario")  # the only column that wraps: words
    columns = ["operation", "state", *(["remote"] if layout.remote else []), "progress", "calls"]
    for column in columns:
        table.add_column(column, no_wrap=True)
    for scenario, op_id, row in rows:
        table.add_row(scenario.label, layout.ids(op_id), *_cells(row, layout))
    return table


def short_id(op_id: str) -> str:
    """The distinguishing tail of an operation id ("op_…7K2QF9XZ"); the summary has it whole."""
    return "op_…" + op_id[-SHORT_ID_TAIL:]


# What an 80-column terminal holds: the ids' tails, and no remote state (the
# summary and `jobwarden show` have both).
NARROW = Layout(ids=short_id, remote=False)


def live_table(console: Console, rows: list[Row]) -> Table:
    """The live table with whole ids when they fit the terminal, else their tails.

    Never a prefix: rich's ellipsis would keep the ids' shared timestamp and
    drop the only characters that tell the rows apart.
    """
    if natural_width(console, _table(rows, Layout(expand=False))) <= console.width:
        return _table(rows, Layout())
    return _table(rows, NARROW)


def _settled(row: Any) -> bool:
    state = LocalState(row["state"])
    return state in TERMINAL or state in ESCALATED


class SettledLines:
    """Without a terminal (a pipe, CI, a log): a line per operation as it settles.

    rich's Live would print nothing until the end there, which reads as a hang.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.started = time.monotonic()
        self.reported: set[str] = set()

    def update(self, rows: list[Row]) -> None:
        for scenario, op_id, row in rows:
            if row is None or op_id in self.reported or not _settled(row):
                continue
            self.reported.add(op_id)
            elapsed = time.monotonic() - self.started
            self.console.print(
                Text(
                    f"settled {row['state']:<15} {scenario.label:<32} {op_id}"
                    f"  after {elapsed:.1f} s"
                )
            )


@contextlib.contextmanager
def progress_view(console: Console) -> Iterator[Callable[[list[Row]], None]]:
    """How the demo shows progress: a live table on a terminal, settled lines elsewhere."""
    if not console.is_terminal:
        yield SettledLines(console).update
        return
    with Live(console=console, refresh_per_second=4) as live:
        yield lambda rows: live.update(live_table(console, rows))


async def _snapshot(conn: Any, ids: list[str]) -> dict[str, Any]:
    rows = await conn.fetch(
        "SELECT o.operation_id, o.state::text AS state, o.remote_state::text AS remote_state,"
        " o.progress_completed, o.progress_total,"
        " (SELECT count(*) FROM provider_calls c WHERE c.operation_id = o.operation_id) AS calls"
        " FROM operations o WHERE o.operation_id = ANY($1)",
        ids,
    )
    return {r["operation_id"]: r for r in rows}


def _workdir() -> Path:
    workdir = Path("var/demo")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


def demo_console() -> Console:
    """The terminal's width; in a pipe or a log, lines as long as they are (no folding)."""
    terminal = sys.stdout.isatty() or os.environ.get("COLUMNS")
    return Console(width=None if terminal else PIPE_WIDTH)


def demo_database() -> str:
    """`--database`, else $JW_DEMO_DATABASE (the tests' own), else jobwarden_demo."""
    return current_choice().database or os.environ.get("JW_DEMO_DATABASE") or DEMO_DATABASE


def inspect_prefix(resolved: ResolvedDatabase) -> str:
    """The command line that reaches the demo's database again, after the demo ended."""
    embedded = " --embedded" if resolved.source == "embedded" else ""
    return f".venv/bin/jobwarden{embedded} --database {database_of(resolved.app_url)}"


def _daemon_env(app_url: str, workdir: Path, config: Path) -> dict[str, str]:
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    env = {
        **os.environ,
        "DATABASE_URL": app_url,
        "JW_CONFIG": str(config),
        "JW_SIM_WEBHOOK_SECRET": secret,
        "JW_RESULTS_DIR": str(workdir / "results"),
        "JW_SIM_TIME_SCALE": "1",
        "JW_LOG_LEVEL": "WARNING",
    }
    env.pop("JW_DEMO_POLLING_ONLY_NO_SECRET", None)
    return env


async def run_demo(scale: float = 1.0, settle_within: float = 90.0) -> int:
    console = demo_console()
    workdir = _workdir()
    async with app_database(create="always", fallback=True, database=demo_database()) as resolved:
        name = database_of(resolved.app_url)
        ending = " (stopped when the demo ends)" if resolved.source == "embedded" else ""
        console.print(Text(f"database: {name} on {resolved.server}{ending}"))
        async with connection(resolved.app_url) as conn:
            applied = await apply_migrations(conn)
        console.print(
            f"[bold]migrations[/]: {len(applied)} applied"
            if applied
            else "[bold]migrations[/]: up to date"
        )
        sim_port, receiver_port = free_port(), free_port()
        sim_url = f"http://127.0.0.1:{sim_port}"
        config = workdir / "jobwarden.toml"
        write_config(config, sim_url, receiver_port)
        env = _daemon_env(resolved.app_url, workdir, config)
        with daemons(env, workdir, sim_port, receiver_port):
            await wait_http(f"{sim_url}/_sim/stats")
            await wait_http(f"http://127.0.0.1:{receiver_port}/healthz")
            console.print(
                f"[bold]started[/]: simulator {sim_url}, receiver :{receiver_port}, "
                "reconciler (logs in var/demo/)"
            )
            console_url = f"http://127.0.0.1:{receiver_port}/console/"
            token = await _console_token(resolved.app_url)
            # Text, not markup: the token is shown as it is, once.
            console.print(Text(f"operator console: {console_url}"))
            console.print(Text(f"  sign in with this operator token (shown once): {token}"))
            status = await _drive(
                console, resolved.app_url, scenarios(scale), settle_within, inspect_prefix(resolved)
            )
            if sys.stdin.isatty() and sys.stdout.isatty():
                # At a terminal the console stays up to look around; Ctrl-C ends it all.
                console.print(Text(f"\nThe console stays open at {console_url}; Ctrl-C stops."))
                await asyncio.Event().wait()
        # the daemons have stopped (their sequencer too): nothing holds or adds to the queue now
        await _sequence_log(resolved.app_url)
        return status


async def _sequence_log(url: str) -> int:
    """Append what the reconciler's sequencer had not yet (it runs every few
    seconds and stopped with the demo), so that the `audit verify` the summary
    prints covers every change instead of counting some as not sequenced yet.
    The demo has no signing key: no checkpoint is written."""
    async with connection(url) as conn:
        return await evidence_log.sequence_all(conn)


async def _console_token(url: str) -> str:
    """A fresh operator token for the demo's console (its digest stored, its secret printed)."""
    minted = tokens.mint_token()
    async with connection(url) as conn:
        await tokens.create_token(
            conn, minted, caller="demo-operator", scope="operator", created_by="jobwarden demo"
        )
    return minted.secret


async def _submit_all(conn: Any, plan: list[Scenario]) -> list[str]:
    run = secrets.token_hex(3)
    ids = []
    for n, sc in enumerate(plan):
        body = {"script": sc.script, "params": sc.params, "input": {"demo": sc.label}}
        sub = await ledger.submit_operation(
            conn,
            provider=sc.provider,
            kind="demo",
            requested_by=DEMO_CALLER,
            client_reference=f"demo-{run}-{n}",
            request=RequestSpec("POST", "/v1/jobs", body),
            create_deadline_s=30,
            result_deadline_s=120,
        )
        ids.append(sub.operation_id)
    return ids


async def _cancel_observing(
    conn: Any, plan: list[Scenario], ids: list[str], snap: dict[str, Any], cancelled: set[str]
) -> None:
    """The user changes their mind once a cancelling scenario's job is running."""
    for sc, op_id in zip(plan, ids, strict=True):
        wanted = sc.cancel_when_observing and op_id not in cancelled
        if wanted and snap[op_id]["state"] == "observing":
            await ledger.request_cancel(
                conn, op_id, requested_by=DEMO_CALLER, reason="demo: the user changed their mind"
            )
            cancelled.add(op_id)


async def _drive(
    console: Console, url: str, plan: list[Scenario], settle_within: float, inspect: str
) -> int:
    async with connection(url) as conn:
        ids = await _submit_all(conn, plan)
        cancelled: set[str] = set()
        deadline = time.monotonic() + settle_within
        with progress_view(console) as show:
            while True:
                snap = await _snapshot(conn, ids)
                show([(sc, i, snap.get(i)) for sc, i in zip(plan, ids, strict=True)])
                await _cancel_observing(conn, plan, ids, snap, cancelled)
                if all(_settled(row) for row in snap.values()):
                    break
                if time.monotonic() > deadline:
                    console.print("[red]timed out waiting for the operations to settle[/]")
                    break
                await asyncio.sleep(0.25)
        snap = await _snapshot(conn, ids)
    return _summary(console, plan, ids, snap, inspect)


def _summary(
    console: Console, plan: list[Scenario], ids: list[str], snap: dict[str, Any], inspect: str
) -> int:
    """One line per operation, whole ids, 80 columns for the usual outcomes."""
    label_width = max(len(sc.label) for sc in plan)
    state_width = max(len(row["state"]) for row in snap.values())
    ok = True
    for sc, op_id in zip(plan, ids, strict=True):
        state = snap[op_id]["state"]
        good = state == sc.expect.value
        ok &= good
        line = Text.assemble(
            ("✓", "green") if good else ("✗", "red"),
            f" {sc.label:<{label_width}} {state:<{state_width}} {op_id}",
        )
        if not good:
            line.append(f"  (expected {sc.expect.value})", "red")
        console.print(line)
    console.print("\nInspect them:")
    for comment, command in (
        ("the timeline: transitions, calls, observations", f"show {ids[0]}"),
        ("what needs a human (the token conflict)", "inbox"),
        ("check the history (NOT PROVEN: the demo signs no checkpoint)", "audit verify"),
    ):
        console.print(Text(f"  # {comment}"))
        # soft_wrap: a long command wraps in the terminal, not with a newline that
        # would break it when pasted.
        console.print(Text(f"  {inspect} {command}"), soft_wrap=True)
    return 0 if ok else 1
