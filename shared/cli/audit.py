"""`jobwarden audit …`: the evidence log's keys, sequencing, checkpoints and verification."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from shared.cli import operator as cli_operator
from shared.db.queries import q
from shared.ledger import archive, audit, log, log_audit, log_tiles, receipts
from shared.secret import SecretError
from shared.settings import load_settings
from shared.tlog import (
    Checkpoint,
    CheckpointError,
    CosignatureSigner,
    NoteError,
    ProofError,
    Verifier,
    cosign,
    generate_cosignature_key,
    generate_key,
)


def register(sub: Any) -> None:
    audit_p = sub.add_parser(
        "audit",
        help="the tamper-evident evidence log: keys, checkpoints, verification",
        description="Every transition and piece of evidence is a leaf of one Merkle log; "
        "checkpoints signed with a key the database never holds let anyone check it.",
    )
    actions = audit_p.add_subparsers(dest="audit_command", required=True, metavar="ACTION")

    verify = actions.add_parser(
        "verify",
        help="check the history chains and the evidence log (against a checkpoint: "
        "exit 1 on any tampering found)",
    )
    verify.add_argument("--operation", help="check one operation's history chain only")
    verify.add_argument(
        "--checkpoint", metavar="FILE", help="a signed checkpoint kept off this host"
    )
    _key_flag(verify, required=False)
    verify.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="PUBLIC_KEY",
        help="require a cosignature by this witness key (repeatable)",
    )
    verify.add_argument(
        "--archive",
        metavar="ROOT",
        help="the directory holding the archives `audit archive` wrote: check every archived "
        "row against its leaf",
    )
    verify.add_argument(
        "--settle",
        type=float,
        default=log_audit.SETTLE_SECONDS,
        metavar="SECONDS",
        help="how long to wait for the sequencer to log the changes found queued (rows that "
        "changed since their newest leaf): one it does not log is a problem (default "
        f"{log_audit.SETTLE_SECONDS:.0f})",
    )
    verify.add_argument(
        "--no-record",
        action="store_true",
        help="do not note this verification in the database (audit_verifications, shown by "
        "the console); a verify of one --operation is never noted",
    )
    cli_operator.json_flag(verify)
    verify.set_defaults(handler=cmd_verify)

    archive_p = actions.add_parser(
        "archive",
        help="move the evidence of operations finished long ago to an archive directory, "
        "provably (needs the signing key)",
        description="Writes ROOT/archive-…/ (rows, manifest, receipts) and then removes the "
        "rows from the database; the log records the move. Ship ROOT off this host.",
    )
    archive_p.add_argument(
        "--older-than",
        required=True,
        type=_days,
        metavar="DAYS",
        help="archive operations finished more than DAYS days ago (fractions allowed)",
    )
    archive_p.add_argument("--to", required=True, metavar="ROOT", help="the archive root")
    archive_p.add_argument(
        "--max-operations",
        type=int,
        default=archive.DEFAULT_OPERATIONS,
        help="operations per archive (default %(default)s); run again for more",
    )
    archive_p.add_argument(
        "--config", help="TOML config file (default: $JW_CONFIG or ./jobwarden.toml)"
    )
    archive_p.set_defaults(handler=cmd_archive)

    tiles_p = actions.add_parser(
        "tiles",
        help="write the log's hashes as C2SP tlog-tiles, with the newest signed checkpoint, "
        "to a directory to ship off this host (full tiles never change: incremental)",
    )
    tiles_p.add_argument("--out", required=True, metavar="DIR")
    tiles_p.set_defaults(handler=cmd_tiles)

    check_tiles = actions.add_parser(
        "check-tiles",
        help="recompute a tiles directory's checkpoint root from its tiles alone, with the "
        "log's public key (no database needed)",
    )
    check_tiles.add_argument("directory", metavar="DIR")
    _key_flag(check_tiles, required=True)
    check_tiles.set_defaults(handler=cmd_check_tiles)

    sequence = actions.add_parser(
        "sequence",
        help="append queued evidence to the log now and, with a signing key, sign and "
        "publish a checkpoint (the reconciler does this every JW_LOG_INTERVAL seconds)",
    )
    sequence.add_argument(
        "--config", help="TOML config file (default: $JW_CONFIG or ./jobwarden.toml)"
    )
    sequence.set_defaults(handler=cmd_sequence)

    proof = actions.add_parser(
        "proof",
        help="write an operation's receipt: its evidence, audit paths and a signed checkpoint",
    )
    proof.add_argument("operation_id")
    proof.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    proof.add_argument(
        "--archive",
        metavar="ROOT",
        help="for an operation whose evidence was archived: take its receipt from the archive",
    )
    proof.set_defaults(handler=cmd_proof)

    check = actions.add_parser(
        "check-proof",
        help="verify a receipt offline with the log's public key (no database needed)",
    )
    check.add_argument("receipt", metavar="FILE")
    _key_flag(check, required=True)
    cli_operator.json_flag(check)
    check.set_defaults(handler=cmd_check_proof)

    cosign_p = actions.add_parser(
        "cosign",
        help="as a witness: check a checkpoint (signature, and that it extends the last one "
        "you cosigned) and add your cosignature",
    )
    cosign_p.add_argument("checkpoint", metavar="FILE", help="the checkpoint to cosign (rewritten)")
    cosign_p.add_argument("--log-key", required=True, metavar="PUBLIC_KEY")
    cosign_p.add_argument(
        "--witness-key-file", required=True, metavar="FILE", help="your cosigning key"
    )
    cosign_p.add_argument(
        "--previous",
        metavar="FILE",
        help="the last checkpoint you cosigned: the log must extend it (consistency proof)",
    )
    cosign_p.add_argument(
        "--previous-log-key",
        action="append",
        default=[],
        metavar="PUBLIC_KEY",
        help="after the log's key rotation: the key it replaced, which signed --previous "
        "(repeatable); never accepted for the checkpoint being cosigned",
    )
    cosign_p.set_defaults(handler=cmd_cosign)

    keygen = actions.add_parser(
        "keygen", help="make a checkpoint signing key (private file, 0600) and its public key"
    )
    keygen.add_argument("name", help="the log's name, e.g. jobwarden.example.com/log")
    keygen.add_argument("--out", metavar="DIR", default=".", help="where to write the two files")
    keygen.add_argument(
        "--witness", action="store_true", help="a witness's cosigning key instead of a log's"
    )
    keygen.set_defaults(handler=cmd_keygen)


def _key_flag(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--key",
        required=required,
        action="append",
        metavar="PUBLIC_KEY",
        help="the log's verifier key (name+id+base64) or a file holding it; repeat it "
        "for a rotated key (any one signature verifying is enough)",
    )


def _verifier(text: str) -> Verifier:
    """A verifier key given inline, or the file `keygen` wrote it to."""
    path = Path(text)
    if path.is_file():
        text = path.read_text("utf-8").strip()
    return Verifier.from_key(text)


def _open_checkpoint(path: str, keys: list[str], witnesses: list[str]) -> Checkpoint:
    return log_audit.open_checkpoint(
        _read_text(Path(path)), [_verifier(k) for k in keys], [_verifier(w) for w in witnesses]
    )


async def cmd_verify(args: argparse.Namespace) -> int:
    if bool(args.checkpoint) != bool(args.key):
        return _fail("--checkpoint and --key go together: a checkpoint is proof only with its key")
    checkpoint = None
    if args.checkpoint:
        try:
            checkpoint = _open_checkpoint(args.checkpoint, args.key, args.witness)
        except OSError as exc:
            return _fail(f"{args.checkpoint}: {exc.strerror}")
        except (NoteError, CheckpointError, ValueError) as exc:
            return _fail(f"the checkpoint does not verify with that key: {exc}")
    async with cli_operator.app_connection() as conn:
        await conn.execute(q("audit_pin_search_path"))
        began = time.monotonic()
        checked, breaks = await audit.verify(conn, args.operation)
        report = await log_audit.verify_log(
            conn,
            checkpoint,
            archive_root=Path(args.archive) if args.archive else None,
            settle_seconds=args.settle,
        )
        seconds = time.monotonic() - began
        ok = not breaks and report.ok
        if args.json:
            print(json.dumps(_as_json(checked, breaks, report)), flush=True)
        else:
            _print(checked, breaks, report)
            sys.stdout.flush()
        if not args.no_record and not args.operation:
            await _record(conn, report, checked, len(breaks), seconds)
    return 0 if ok else 1


async def _record(
    conn: Any, report: log_audit.LogReport, checked: int, breaks: int, seconds: float
) -> None:
    """Note the outcome for the console; a login that may not (an auditor's) only says so."""
    try:
        await log_audit.record_verification(
            conn, report, chains_checked=checked, chain_breaks=breaks, seconds=seconds
        )
    except asyncpg.InsufficientPrivilegeError:
        print(
            "note: this verification was not recorded (this database login may not add to "
            "audit_verifications; --no-record skips it)",
            file=sys.stderr,
        )
    except asyncpg.PostgresError as exc:  # a read-only login or standby, ...: the verdict stands
        print(
            f"note: this verification was not recorded ({type(exc).__name__}); "
            "--no-record skips recording",
            file=sys.stderr,
        )


def _as_json(
    checked: int, breaks: list[audit.Break], report: log_audit.LogReport
) -> dict[str, Any]:
    return {
        "chains_checked": checked,
        "chain_breaks": [str(b) for b in breaks],
        "tree_size": report.tree_size,
        "root": report.root.hex(),
        "checkpoint": None
        if report.checkpoint is None
        else {
            "origin": report.checkpoint.origin,
            "size": report.checkpoint.size,
            "extended": report.extends,
        },
        "rows_checked": report.rows_checked,
        "pending": report.pending,
        "logged_while_checking": report.settled,
        "problems": report.problems,
        "problem_count": report.problem_count,
        "unproven": report.unproven,
        "archives": report.archives,
        "archived_rows": report.archived_rows,
        "archives_unchecked": report.archives_unchecked,
        "ok": not breaks and report.ok,
    }


def _print(checked: int, breaks: list[audit.Break], report: log_audit.LogReport) -> None:
    for found in breaks:
        print(f"BROKEN {found}")
    print(f"{checked} operation(s) checked, {len(breaks)} broken chain(s)")
    for problem in report.problems:
        print(f"TAMPERED {problem}")
    if report.problem_count > len(report.problems):
        print(f"... and {report.problem_count - len(report.problems)} more")
    rows = sum(report.rows_checked.values())
    print(
        f"log: {report.tree_size} leaves, root {report.root.hex()}; {rows} evidence row(s) checked"
    )
    if report.checkpoint is not None:
        cp = report.checkpoint
        if not report.extends:
            verdict = "does NOT extend it"
        elif report.ok:
            verdict = "extends it"
        else:  # the signed entries are intact; what is wrong is listed above
            verdict = "extends it, but the problems above were found"
        print(f"checkpoint {cp.origin} at size {cp.size} (signature verified): the log {verdict}")
    if report.excused:
        print(
            f"{len(report.excused)} row(s) changed since their newest leaf: "
            f"{report.settled} logged by the sequencer while this check waited, their "
            "versions checked"
        )
    if report.archived_rows and not report.archives_unchecked:
        print(
            f"{report.archived_rows} archived row(s) in {report.archives} archive(s) checked "
            "against their leaves"
        )
    if report.unproven:
        print(f"NOT PROVEN: {report.unproven}")
    if report.archives_unchecked:
        print(f"NOT PROVEN: {report.archives_unchecked}")
    # a broken chain is a problem too: counted with the log's (before, a chain
    # break alone ended "FAILED: 0 problem(s)")
    problems = len(breaks) + report.problem_count
    print("OK" if not problems else f"FAILED: {problems} problem(s)")


async def cmd_sequence(args: argparse.Namespace) -> int:
    settings = load_settings(Path(args.config) if args.config else None)
    try:
        signer = log.load_signer(settings.log_signing_key_file, os.environ)
    except (SecretError, ValueError) as exc:
        return _fail(f"checkpoint signing key: {exc}")
    try:
        previous_keys = log.load_previous_keys(settings.log_previous_key_files)
    except log.KeyFileError as exc:
        return _fail(f"previous checkpoint keys (log_previous_key_files): {exc}")
    async with cli_operator.app_connection() as conn:
        appended = await log.sequence_all(conn)
        size, root = await log.head(conn)
        print(f"appended {appended} leaf/leaves; log size {size}, root {root.hex()}")
        if signer is None:
            print("no signing key (JW_LOG_SIGNING_KEY / JW_LOG_SIGNING_KEY_FILE): no checkpoint")
            return 0
        try:
            previous = log.published(settings.log_checkpoint_dir, signer, previous_keys)
            note = await log.checkpoint(conn, signer, previous, previous_keys)
            published = log.publish(note, settings.log_checkpoint_dir)
        except (log.LogForked, ValueError) as exc:
            return _fail(f"checkpoint NOT signed: {exc}")
    print(f"checkpoint at size {published.size} written to {published.path}")
    return 0


def _days(text: str) -> timedelta:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if not 0 <= days <= 36500 or days != days:
        raise argparse.ArgumentTypeError("DAYS is between 0 and 36500")
    return timedelta(days=days)


async def cmd_archive(args: argparse.Namespace) -> int:
    settings = load_settings(Path(args.config) if args.config else None)
    try:
        signer = log.load_signer(settings.log_signing_key_file, os.environ)
    except (SecretError, ValueError) as exc:
        return _fail(f"checkpoint signing key: {exc}")
    if signer is None:
        return _fail(
            "archiving needs the checkpoint signing key (JW_LOG_SIGNING_KEY / "
            "JW_LOG_SIGNING_KEY_FILE): archived rows are proven by a signed checkpoint"
        )
    try:
        previous_keys = log.load_previous_keys(settings.log_previous_key_files)
    except log.KeyFileError as exc:
        return _fail(f"previous checkpoint keys (log_previous_key_files): {exc}")
    if args.max_operations < 1:
        return _fail("--max-operations is at least 1")
    async with cli_operator.app_connection() as conn:
        try:
            done = await archive.archive(
                conn,
                Path(args.to),
                args.older_than,
                signer,
                settings.log_checkpoint_dir,
                args.max_operations,
                previous_keys,
            )
        except archive.ArchiveError as exc:
            return _fail(str(exc))
    for reason in done.skipped:
        print(f"left in the database for now: {reason}")
    if done.name is None:
        print("nothing to archive")
    else:
        print(f"archived {done.rows} row(s) of {done.operations} operation(s) to {done.path}")
    if done.tiles is not None:
        _print_tiles(Path(args.to), done.tiles)
    return 0


def _print_tiles(root: Path, written: log_tiles.TilesWritten) -> None:
    print(
        f"tiles of the tree at size {written.size} in {root}: {written.written} written, "
        f"{written.kept} full ones already there"
    )


async def cmd_tiles(args: argparse.Namespace) -> int:
    async with cli_operator.app_connection() as conn:
        try:  # the newest checkpoint that agrees with the log, as for receipts
            usable = await receipts.usable_checkpoint(conn)
        except receipts.NoUsableCheckpoint as exc:
            return _fail(str(exc))
        except receipts.ReceiptError:
            return _fail("no signed checkpoint yet: the tiles are written for one")
        written = await log_tiles.export_tiles(conn, Path(args.out), usable.size, usable.note)
    _print_tiles(Path(args.out), written)
    return 0


async def cmd_check_tiles(args: argparse.Namespace) -> int:
    root = Path(args.directory)
    try:
        checkpoint = _open_checkpoint(str(root / log_tiles.CHECKPOINT_FILE), args.key, [])
    except OSError as exc:
        return _fail(f"{root / log_tiles.CHECKPOINT_FILE}: {exc.strerror}")
    except (NoteError, CheckpointError, ValueError) as exc:
        return _fail(f"the checkpoint does not verify with that key: {exc}")
    try:
        computed = await asyncio.to_thread(log_tiles.tiles_root, root, checkpoint.size)
    except ValueError as exc:
        print(f"FAILED tiles: {exc}", file=sys.stderr)
        return 1
    if computed != checkpoint.root_hash:
        print(
            f"TAMPERED: the tiles' root at size {checkpoint.size} is not the checkpoint's",
            file=sys.stderr,
        )
        return 1
    print(f"OK: the tiles give the checkpoint's root at size {checkpoint.size}")
    return 0


async def _archived_receipt(args: argparse.Namespace, conn: Any) -> Path | None:
    names = [row["name"] for row in await conn.fetch(q("archive_of_operation"), args.operation_id)]
    return archive.find_receipt(Path(args.archive), names, args.operation_id)


async def cmd_proof(args: argparse.Namespace) -> int:
    async with cli_operator.app_connection() as conn:
        if args.archive:
            found = await _archived_receipt(args, conn)
            if found is None:
                return _fail(
                    f"no receipt of {args.operation_id} in the archives under {args.archive}"
                )
            text = _read_text(found)
            if args.out:
                _write_text(Path(args.out), text)
                print(f"the archived receipt {found} written to {args.out}")
            else:
                sys.stdout.write(text)
            return 0
        try:
            receipt = await receipts.build_receipt(conn, args.operation_id)
        except receipts.ReceiptError as exc:
            return _fail(str(exc))
        except (log.LogCorrupt, ProofError) as exc:
            # the stored hashes contradict a checkpoint the receipt checked: the log's
            # own verifier says where, a traceback here would only hide the message
            return _fail(f"the evidence log cannot prove this now: {exc} (jobwarden audit verify)")
    text = json.dumps(receipt.to_json(), indent=1) + "\n"
    if args.out:
        _write_text(Path(args.out), text)
        print(f"{len(receipt.leaves)} leaf/leaves proven, written to {args.out}")
    else:
        sys.stdout.write(text)
    for reason in receipt.unproven:
        print(f"not proven yet: {reason}", file=sys.stderr)
    return 0


async def cmd_check_proof(args: argparse.Namespace) -> int:
    try:
        document = json.loads(_read_text(Path(args.receipt)))
        checked = receipts.check_receipt(document, [_verifier(key) for key in args.key])
    except OSError as exc:
        return _fail(f"{args.receipt}: {exc.strerror}")
    except (ValueError, receipts.ReceiptError) as exc:
        print(f"NOT VERIFIED: {exc}")
        return 1
    if args.json:
        print(
            json.dumps(
                {
                    "verified": True,
                    "operation_id": checked.operation_id,
                    "checkpoint": {
                        "origin": checked.checkpoint.origin,
                        "size": checked.checkpoint.size,
                    },
                    "rows": [{"kind": k, "id": i, "row": row} for k, i, row in checked.rows],
                }
            )
        )
        return 0
    cp = checked.checkpoint
    print(f"checkpoint {cp.origin} at size {cp.size}: signature verified")
    for kind, row_id, row in checked.rows:
        print(f"  {kind} {row_id}: {_summary(kind, row)}")
    print(f"VERIFIED: {len(checked.rows)} evidence row(s) of {checked.operation_id}")
    return 0


def _summary(kind: str, row: dict[str, Any]) -> str:
    if kind == "history":
        return f"{row.get('from_state')} -> {row.get('to_state')} by {row.get('actor')}"
    if kind == "call":
        return f"{row.get('method')} {row.get('url')} -> {row.get('status_code')}"
    if kind == "result":
        return f"valid={row.get('valid')} sha256={row.get('sha256')}"
    return "proven"


def _read_text(path: Path) -> str:
    return path.read_text("utf-8")


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, "utf-8")


async def cmd_cosign(args: argparse.Namespace) -> int:
    log_key = _verifier(args.log_key)
    try:
        # the last checkpoint cosigned may predate a rotation: its key opens it,
        # and only it; the checkpoint cosigned now is the current key's alone
        earlier_keys = [log_key, *(_verifier(key) for key in args.previous_log_key)]
        note = _read_text(Path(args.checkpoint))
        witness = CosignatureSigner.from_key(_read_text(Path(args.witness_key_file)).strip())
        current = log_audit.open_checkpoint(note, [log_key])
        previous = (
            log_audit.open_checkpoint(_read_text(Path(args.previous)), earlier_keys)
            if args.previous
            else None
        )
    except OSError as exc:
        return _fail(f"{exc.filename}: {exc.strerror}")
    except ValueError as exc:
        return _fail(f"not cosigned: {exc}")
    if previous is not None:
        async with cli_operator.app_connection() as conn:
            problem = await log_audit.consistency_problem(conn, previous, current)
        if problem:
            return _fail(f"not cosigned: {problem}")
    _write_text(Path(args.checkpoint), cosign(note, [witness], timestamp=int(time.time())))
    print(f"cosigned {current.origin} at size {current.size} as {witness.name}")
    return 0


async def cmd_keygen(args: argparse.Namespace) -> int:
    try:
        private, public = (generate_cosignature_key if args.witness else generate_key)(args.name)
    except ValueError as exc:
        return _fail(str(exc))
    try:
        key_file, pub_file = _write_keys(Path(args.out), args.name, private, public)
    except FileExistsError as exc:
        return _fail(f"{exc.filename} exists: refusing to overwrite a signing key")
    print(f"signing key (keep it off the database host's backups): {key_file}")
    print(f"public key (give it to auditors): {pub_file}")
    print(public)
    return 0


def _write_keys(out: Path, name: str, private: str, public: str) -> tuple[Path, Path]:
    """The signing key in a new file only its owner can read, the public key beside it."""
    out.mkdir(parents=True, exist_ok=True)
    stem = name.replace("/", "_")
    key_file, pub_file = out / f"{stem}.key", out / f"{stem}.pub"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(private + "\n")
    pub_file.write_text(public + "\n", "utf-8")
    return key_file, pub_file


def _fail(message: str) -> int:
    print(f"jobwarden audit: {message}", file=sys.stderr)
    return 2
