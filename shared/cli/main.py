"""`jobwarden`: the operator's command line.

Each subcommand is a small function; the parser says what every command and
flag does (`jobwarden --help`, `jobwarden <command> --help`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from shared import logs, serve
from shared.cli import audit as cli_audit
from shared.cli import operator as cli_operator
from shared.cli import providers as cli_providers
from shared.cli.errors import USAGE, failure_of, report
from shared.db.connect import DEMO_DATABASE, connection, redact_url
from shared.db.migrate import apply_migrations
from shared.db.runtime import DatabaseChoice, app_database, chosen
from shared.settings import Settings, load_settings

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


async def cmd_migrate(args: argparse.Namespace) -> int:
    async with (
        app_database(create="unless_configured") as resolved,
        connection(resolved.app_url) as conn,
    ):
        applied = await apply_migrations(conn, warn=_warn)
    where = f"{resolved.source} database {redact_url(resolved.app_url)}"
    if applied:
        print(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        print(f"{where} is up to date")
    return 0


def _warn(said: str) -> None:
    """What a migration wants a person to look at, on stderr."""
    print(f"migrate: warning: {said}", file=sys.stderr)


def _settings(args: argparse.Namespace, *, credentials: bool = True) -> Settings:
    path = Path(args.config) if getattr(args, "config", None) else None
    return load_settings(path, credentials=credentials)


async def cmd_reconciler(args: argparse.Namespace) -> int:
    from reconciler.daemon import run_reconciler  # composition root: the CLI wires daemons

    logs.configure()
    settings = _settings(args)
    async with app_database() as resolved:
        return await run_reconciler(settings, resolved.app_url, settle_heap=True)


async def cmd_receiver(args: argparse.Namespace) -> int:
    from receiver.api import api_routes
    from receiver.main import run_receiver

    logs.configure()
    # the receiver never calls a provider: it needs no provider's API key
    settings = _settings(args, credentials=False)
    if args.port is not None:
        settings = replace(settings, receiver_port=args.port)
    async with app_database() as resolved:
        if args.workers > 1 and args.reuse_port:
            raise SystemExit("--reuse-port is one worker of a supervisor: it takes no --workers")
        if args.workers > 1:
            return _supervise_receivers(
                args.workers, resolved.app_url, settings.receiver_port, args.argv
            )
        await run_receiver(
            settings,
            resolved.app_url,
            make_routes=lambda pool: api_routes(settings, pool),
            reuse_port=args.reuse_port,
            settle_heap=True,
        )
    return 0


def _worker_count(value: str) -> int:
    from receiver.workers import MAX_WORKERS

    count = int(value) if value.strip().isdigit() else 0
    if not 1 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MAX_WORKERS}")
    return count


def _supervise_receivers(workers: int, database_url: str, port: int, argv: Sequence[str]) -> int:
    """`--workers N`: N children on one port, the database resolved once here.

    The children get the resolved URL (an embedded server stays this
    process's) and the port (so `--port` and the config agree); blocking is
    fine, the supervisor is all this process does.
    """
    from receiver.workers import Supervisor, child_argv

    os.environ["DATABASE_URL"] = database_url
    os.environ["JW_RECEIVER_PORT"] = str(port)
    return Supervisor(workers, child_argv(argv)).run()


async def cmd_simulator(args: argparse.Namespace) -> int:
    from shared.simulator import SimulatorSettings, main_async

    logs.configure()
    shape = Path(args.shape) if args.shape is not None else None
    try:
        settings = SimulatorSettings.from_env(shape_file=shape)
    except ValueError as exc:
        print(f"jobwarden simulator: {exc}", file=sys.stderr)
        return 2
    if args.webhook_url:
        settings = replace(settings, webhook_url=args.webhook_url)
    if args.time_scale is not None:
        settings = replace(settings, time_scale=args.time_scale)
    await main_async(args.host, args.port, settings)
    return 0


async def cmd_demo(args: argparse.Namespace) -> int:
    from shared.cli.demo import run_demo

    return await run_demo(args.time_scale, args.timeout)


def version() -> str:
    """The installed distribution's version (what `pip show jobwarden` says)."""
    try:
        return importlib.metadata.version("jobwarden")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown (not installed)"


class JsonErrorsParser(argparse.ArgumentParser):
    """argparse whose usage errors are a JSON document, for a command line with --json.

    Subcommand parsers are made of the same class (argparse's default), so
    this holds for every command, including those other modules register.
    """

    def error(self, message: str) -> NoReturn:
        body = {"code": "usage", "message": f"{self.prog}: {message}", "hint": None}
        print(json.dumps({"error": body}, ensure_ascii=False), flush=True)
        sys.exit(USAGE)


DATABASE_EPILOG = (
    "Database: DATABASE_URL, else the server on 127.0.0.1:5432 (JW_LOCAL_PG_HOST, "
    "JW_LOCAL_PG_PORT). An embedded PostgreSQL is started only with --embedded (or "
    "JW_FORCE_EMBEDDED=1), and by `demo` when no server answers."
)


def build_parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    parser_class = JsonErrorsParser if json_errors else argparse.ArgumentParser
    parser = parser_class(
        prog="jobwarden",
        description="Durable tracking of long-running jobs on third-party HTTP APIs.",
        epilog=DATABASE_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"jobwarden {version()}")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="use the embedded PostgreSQL in ./.pgdata (JW_EMBEDDED_PGDATA), started for this "
        "command and stopped after it; needs the jobwarden[embedded] extra",
    )
    parser.add_argument(
        "--database",
        metavar="NAME",
        help="the database of this name on the chosen server (default: DATABASE_URL's, "
        "else jobwarden; the demo's: jobwarden_demo)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    migrate = sub.add_parser("migrate", help="apply pending SQL migrations (safe to repeat)")
    migrate.set_defaults(handler=cmd_migrate)

    rec = sub.add_parser(
        "reconciler",
        help="run the reconciler daemon (creates, polls, cancels, collects results)",
        description="Runs until SIGTERM/SIGINT: stops claiming, finishes or releases leases.",
    )
    rec.add_argument("--config", help="TOML config file (default: $JW_CONFIG or ./jobwarden.toml)")
    rec.set_defaults(handler=cmd_reconciler)

    recv = sub.add_parser("receiver", help="run the webhook receiver and agent API (uvicorn)")
    recv.add_argument("--config", help="TOML config file (default: $JW_CONFIG or ./jobwarden.toml)")
    recv.add_argument("--port", type=int, help="listen port (default: $JW_RECEIVER_PORT or 8080)")
    recv.add_argument(
        "--workers",
        type=_worker_count,
        # a string default goes through `type` too, so a bad variable is a usage error
        default=os.environ.get("JW_RECEIVER_WORKERS", "1"),
        help="receiver processes sharing the port with SO_REUSEPORT, one per core "
        "(default: $JW_RECEIVER_WORKERS or 1)",
    )
    recv.add_argument("--reuse-port", action="store_true", help=argparse.SUPPRESS)
    recv.set_defaults(handler=cmd_receiver)

    sim = sub.add_parser(
        "simulator", help="run the simulated provider (a real HTTP server for demos and tests)"
    )
    sim.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    sim.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    sim.add_argument("--webhook-url", help="where to send signed webhooks by default")
    sim.add_argument("--time-scale", type=float, help="multiply every scripted duration")
    sim.add_argument(
        "--shape",
        metavar="FILE",
        help="serve another API's shape: paths, field/state/header names, signing "
        "(e.g. examples/acme_exports/shape.toml)",
    )
    sim.set_defaults(handler=cmd_simulator)

    demo = sub.add_parser(
        "demo",
        help="start simulator + receiver + reconciler and show every path live (make run)",
        epilog="The demo uses a database of its own on the chosen server (jobwarden --database "
        f"NAME demo, else $JW_DEMO_DATABASE, else {DEMO_DATABASE}), created if missing; with no "
        "server answering it starts the embedded PostgreSQL.",
    )
    demo.add_argument(
        "--time-scale",
        type=float,
        default=float(os.environ.get("JW_DEMO_TIME_SCALE", "1")),
        help="shorten (<1) the jobs (default $JW_DEMO_TIME_SCALE or 1)",
    )
    demo.add_argument("--timeout", type=float, default=90.0, help="give up after this long")
    demo.set_defaults(handler=cmd_demo)

    cli_operator.register(sub)
    cli_providers.register(sub)
    cli_audit.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(json_errors="--json" in argv).parse_args(argv)
    args.argv = argv  # as given: `receiver --workers` starts its children with it
    handler: Handler = args.handler
    try:
        with chosen(DatabaseChoice(embedded=args.embedded, database=args.database)):
            return serve.run(handler(args))  # uvloop: receiver, reconciler, simulator, mcp
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        # A database that is not there, a schema not migrated, a bad configuration:
        # the operator's to fix, said in a line and a hint. Anything else is a bug.
        failure = failure_of(exc)
        if failure is None:
            raise
        return report(failure, as_json=bool(getattr(args, "json", False)))


def _reader_gone() -> int:
    """The reader of our output left (`jobwarden list --json | head -1`): no
    traceback, and no second one when the interpreter flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141  # as a shell reports a process ended by SIGPIPE (128 + 13)


if __name__ == "__main__":
    sys.exit(main())
