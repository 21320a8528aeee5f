"""`jobwarden`: the operator's command line.

Each subcommand is a small function; the parser says what every command and
flag does (`jobwarden --help`, `jobwarden <command> --help`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from shared import logs
from shared.cli import audit as cli_audit
from shared.cli import operator as cli_operator
from shared.cli import providers as cli_providers
from shared.db.connect import connection, redact_url
from shared.db.migrate import MigrationError, apply_migrations
from shared.db.runtime import app_database
from shared.providers import ConfigError
from shared.settings import Settings, load_settings

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


async def cmd_migrate(args: argparse.Namespace) -> int:
    async with app_database() as resolved, connection(resolved.app_url) as conn:
        try:
            applied = await apply_migrations(conn)
        except MigrationError as exc:
            print(f"migrate: {exc}", file=sys.stderr)
            return 1
    where = f"{resolved.source} database {redact_url(resolved.app_url)}"
    if applied:
        print(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        print(f"{where} is up to date")
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.config) if getattr(args, "config", None) else None)


async def cmd_reconciler(args: argparse.Namespace) -> int:
    from reconciler.daemon import run_reconciler  # composition root: the CLI wires daemons

    logs.configure()
    settings = _settings(args)
    async with app_database() as resolved:
        return await run_reconciler(settings, resolved.app_url)


async def cmd_receiver(args: argparse.Namespace) -> int:
    from receiver.api import api_routes
    from receiver.main import run_receiver

    logs.configure()
    settings = _settings(args)
    if args.port is not None:
        settings = replace(settings, receiver_port=args.port)
    async with app_database() as resolved:
        await run_receiver(
            settings, resolved.app_url, make_routes=lambda pool: api_routes(settings, pool)
        )
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobwarden",
        description="Durable tracking of long-running jobs on third-party HTTP APIs.",
        epilog="Database: DATABASE_URL, else 127.0.0.1:5432, else an embedded PostgreSQL.",
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
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        print(f"jobwarden: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
