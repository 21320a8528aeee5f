"""`jobwarden`: the operator's command line.

Each subcommand is a small function; the parser says what every command and
flag does (`jobwarden --help`, `jobwarden <command> --help`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from shared import audit
from shared.database import connect, redact_url
from shared.migrate import MigrationError, apply_migrations
from shared.runtime import app_database

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


async def cmd_migrate(args: argparse.Namespace) -> int:
    async with app_database() as resolved:
        conn = await connect(resolved.app_url)
        try:
            applied = await apply_migrations(conn)
        except MigrationError as exc:
            print(f"migrate: {exc}", file=sys.stderr)
            return 1
        finally:
            await conn.close()
    where = f"{resolved.source} database {redact_url(resolved.app_url)}"
    if applied:
        print(f"applied {len(applied)} migration(s) to {where}: {', '.join(applied)}")
    else:
        print(f"{where} is up to date")
    return 0


async def cmd_audit_verify(args: argparse.Namespace) -> int:
    async with app_database() as resolved:
        conn = await connect(resolved.app_url)
        try:
            checked, breaks = await audit.verify(conn, args.operation)
        finally:
            await conn.close()
    if args.json:
        print(json.dumps({"checked": checked, "breaks": [str(b) for b in breaks]}))
    else:
        for found in breaks:
            print(f"BROKEN {found}")
        print(f"{checked} operation(s) checked, {len(breaks)} broken chain(s)")
    return 1 if breaks else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobwarden",
        description="Durable tracking of long-running jobs on third-party HTTP APIs.",
        epilog="Database: DATABASE_URL, else 127.0.0.1:5432, else an embedded PostgreSQL.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    migrate = sub.add_parser("migrate", help="apply pending SQL migrations (safe to repeat)")
    migrate.set_defaults(handler=cmd_migrate)

    audit_p = sub.add_parser("audit", help="audit the tamper-evident history")
    audit_sub = audit_p.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    verify = audit_sub.add_parser(
        "verify", help="recompute every history hash chain; exit 1 on the first break found"
    )
    verify.add_argument("--operation", help="check one operation only")
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    verify.set_defaults(handler=cmd_audit_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
