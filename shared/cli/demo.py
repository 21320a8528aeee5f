"""`jobwarden demo` (what `make run` runs): every path, live, in under a minute.

Starts the simulated provider, the receiver and the reconciler as separate
processes — they meet only in PostgreSQL, as in production — then records a
handful of operations as an agent would and shows them settle: success by
webhook, success by polling only, a late failure, a confirmed cancellation, a
cancel race that ends in success, a partial result and a token conflict that
lands in the operator inbox. Ctrl-C stops everything cleanly; run it again and
it starts afresh beside the earlier runs.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.live import Live
from rich.table import Table

from shared import ledger
from shared.db.connect import connection, redact_url
from shared.db.migrate import MigrationError, apply_migrations
from shared.db.runtime import app_database
from shared.ledger import RequestSpec
from shared.ledger.states import ESCALATED, TERMINAL, LocalState

S = LocalState
DEMO_CALLER = "agent:demo"


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


def _table(rows: list[tuple[Scenario, str, Any]]) -> Table:
    table = Table(title="jobwarden demo — operations settling live", expand=True)
    for column in ("scenario", "operation", "state", "remote", "progress", "calls"):
        table.add_column(column)
    for scenario, op_id, row in rows:
        if row is None:
            table.add_row(scenario.label, op_id, "-", "-", "-", "-")
            continue
        state = row["state"]
        style = (
            "green"
            if state == "succeeded"
            else "yellow"
            if state in (s.value for s in ESCALATED)
            else "red"
            if state in ("failed", "cancelled")
            else ""
        )
        progress = ""
        if row["progress_total"]:
            progress = f"{row['progress_completed']}/{row['progress_total']}"
        table.add_row(
            scenario.label,
            op_id,
            f"[{style}]{state}[/]" if style else state,
            row["remote_state"] or "-",
            progress,
            str(row["calls"]),
        )
    return table


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


async def run_demo(scale: float = 1.0, settle_within: float = 90.0) -> int:
    console = Console()
    workdir = _workdir()
    async with app_database() as resolved:
        console.print(f"[bold]database[/]: {resolved.source} — {redact_url(resolved.app_url)}")
        async with connection(resolved.app_url) as conn:
            try:
                applied = await apply_migrations(conn)
            except MigrationError as exc:
                console.print(f"[red]migrate: {exc}[/]")
                return 1
        console.print(
            f"[bold]migrations[/]: {len(applied)} applied"
            if applied
            else "[bold]migrations[/]: up to date"
        )
        sim_port, receiver_port = free_port(), free_port()
        sim_url = f"http://127.0.0.1:{sim_port}"
        config = workdir / "jobwarden.toml"
        write_config(config, sim_url, receiver_port)
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        env = {
            **os.environ,
            "DATABASE_URL": resolved.app_url,
            "JW_CONFIG": str(config),
            "JW_SIM_WEBHOOK_SECRET": secret,
            "JW_RESULTS_DIR": str(workdir / "results"),
            "JW_SIM_TIME_SCALE": "1",
            "JW_LOG_LEVEL": "WARNING",
        }
        env.pop("JW_DEMO_POLLING_ONLY_NO_SECRET", None)
        with daemons(env, workdir, sim_port, receiver_port):
            await wait_http(f"{sim_url}/_sim/stats")
            await wait_http(f"http://127.0.0.1:{receiver_port}/healthz")
            console.print(
                f"[bold]started[/]: simulator {sim_url}, receiver :{receiver_port}, "
                "reconciler (logs in var/demo/)"
            )
            return await _drive(console, resolved.app_url, scenarios(scale), settle_within)


async def _drive(console: Console, url: str, plan: list[Scenario], settle_within: float) -> int:
    run = secrets.token_hex(3)
    async with connection(url) as conn:
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
        cancelled: set[str] = set()
        deadline = time.monotonic() + settle_within
        with Live(console=console, refresh_per_second=4) as live:
            while True:
                snap = await _snapshot(conn, ids)
                live.update(_table([(sc, i, snap.get(i)) for sc, i in zip(plan, ids, strict=True)]))
                for sc, op_id in zip(plan, ids, strict=True):
                    if (
                        sc.cancel_when_observing
                        and op_id not in cancelled
                        and (snap[op_id]["state"] == "observing")
                    ):
                        await ledger.request_cancel(
                            conn,
                            op_id,
                            requested_by=DEMO_CALLER,
                            reason="demo: the user changed their mind",
                        )
                        cancelled.add(op_id)
                states = {LocalState(r["state"]) for r in snap.values()}
                if all(s in TERMINAL or s in ESCALATED for s in states):
                    break
                if time.monotonic() > deadline:
                    console.print("[red]timed out waiting for the operations to settle[/]")
                    break
                await asyncio.sleep(0.25)
        snap = await _snapshot(conn, ids)
    return _summary(console, plan, ids, snap)


def _summary(console: Console, plan: list[Scenario], ids: list[str], snap: dict[str, Any]) -> int:
    ok = True
    for sc, op_id in zip(plan, ids, strict=True):
        state = snap[op_id]["state"]
        good = state == sc.expect.value
        ok &= good
        mark = "[green]✓[/]" if good else "[red]✗[/]"
        console.print(f"{mark} {sc.label:<34} {op_id}  {state}  (expected {sc.expect.value})")
    console.print("\nInspect them:")
    console.print(
        f"  .venv/bin/jobwarden show {ids[0]}     # timeline: transitions, calls, observations"
    )
    console.print(
        "  .venv/bin/jobwarden inbox             # what needs a human (the token conflict)"
    )
    console.print("  .venv/bin/jobwarden audit verify      # prove the history was not rewritten")
    return 0 if ok else 1
