"""Verify archived evidence: the list the log binds, and (given the archives) every row.

Without the archive files, verify proves *which* rows left the database and
that nobody changed that list since (the manifest digest in the archive's
leaf), not what they held. With them (`--archive ROOT`), every archived row
is recomputed from its document into the leaf the signed tree holds: an
archive edited, truncated or replaced fails, and an archive the log names but
the auditor was not given is a problem, never a silent pass.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from shared.db.queries import q
from shared.ledger.archive import MANIFEST_PREFIX, manifest_line, read_lines
from shared.ledger.leaves import KINDS, LeafError, digests_of_document, leaf_data
from shared.tlog import leaf_hash

PREFETCH = 5000


class Reporter(Protocol):
    def problem(self, text: str) -> None: ...


def unchecked_note(archives: int, rows: int) -> str:
    return (
        f"{rows} row(s) in {archives} archive(s) were moved out of the database: the log "
        "proves which rows and that the list is unchanged, not what they held. Check them "
        "against the archives shipped off this host: --archive ROOT"
    )


async def check_archives(conn: Any, report: Reporter, root: Path | None) -> tuple[int, int]:
    """Check every archive the log names; (archives, rows archived)."""
    archives = rows = 0
    for archive in await conn.fetch(q("archive_list")):
        archives += 1
        rows += await check_archive(conn, archive, report, root)
    return archives, rows


async def check_archive(conn: Any, archive: Any, report: Reporter, root: Path | None) -> int:
    name = archive["name"]
    files = _open_files(root / name, report, name) if root is not None else None
    digest = hashlib.sha256(MANIFEST_PREFIX)
    count = 0
    async for row in conn.cursor(
        q("archive_manifest_rows"), archive["archive_id"], prefetch=PREFETCH
    ):
        count += 1
        where = f"archive {name}: {row['kind']} {row['row_id']}"
        digest.update(
            manifest_line(row["operation_id"], row["kind"], row["row_id"], row["leaf_index"])
        )
        if not row["leaf_matches"]:
            report.problem(f"{where}: leaf {row['leaf_index']} is not a version of this row")
        if not row["eligible"]:
            report.problem(f"{where}: its operation was not finished before the cutoff")
        if not row["signed_before"]:
            report.problem(f"{where}: archived at leaf {row['leaf_index']}, after its checkpoint")
        if not row["deleted_after"]:
            report.problem(f"{where}: deleted before its archive was recorded")
        if files is not None:
            files = _check_file_row(files, row, where, report)
    if digest.hexdigest() != archive["manifest_sha256"]:
        report.problem(
            f"archive {name}: the rows listed as archived are not the ones its logged manifest "
            "names (rows were added to or removed from the list)"
        )
    if count != archive["rows"]:
        report.problem(
            f"archive {name}: {count} row(s) listed, its logged record says {archive['rows']}"
        )
    if files is not None and next(files, None) is not None:
        report.problem(f"archive {name}: rows.jsonl holds rows the log does not list")
    if root is not None:
        _check_manifest_file(root / name / "manifest", archive, report)
    return count


def _open_files(path: Path, report: Reporter, name: str) -> Iterator[bytes] | None:
    data = path / "rows.jsonl"
    if not data.is_file():
        report.problem(f"archive {name} is in the log but not under the archive root ({path})")
        return None
    return read_lines(data)


def _check_file_row(
    files: Iterator[bytes], row: Any, where: str, report: Reporter
) -> Iterator[bytes] | None:
    """Compare the archive's next line with the listed row; None stops reading a broken file."""
    line = next(files, None)
    if line is None:
        report.problem(f"{where}: missing from the archive's rows.jsonl")
        return None
    try:
        entry = json.loads(line)
        document = base64.b64decode(entry["row"], validate=True)
        named = (entry["operation"], entry["kind"], entry["id"], entry["leaf"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        report.problem(f"{where}: the archive's line for it is unreadable ({exc})")
        return None
    if named != (row["operation_id"], row["kind"], row["row_id"], row["leaf_index"]):
        report.problem(f"{where}: the archive's rows.jsonl is out of step with the log here")
        return None
    kind = KINDS.get(row["kind"])
    try:
        if kind is None:
            raise LeafError(f"unknown kind {row['kind']!r}")
        hashed = leaf_hash(leaf_data(kind.name, row["row_id"], digests_of_document(kind, document)))
    except LeafError as exc:
        report.problem(f"{where}: its archived document cannot be read ({exc})")
        return files
    if row["leaf_hash"] is None or hashed != bytes(row["leaf_hash"]):
        report.problem(
            f"{where}: the archived row does not match its leaf (altered in the archive)"
        )
    return files


def _check_manifest_file(path: Path, archive: Any, report: Reporter) -> None:
    digest = hashlib.sha256()
    try:
        for line in read_lines(path):
            digest.update(line)
    except OSError as exc:
        report.problem(f"archive {archive['name']}: manifest unreadable ({exc.strerror})")
        return
    if digest.hexdigest() != archive["manifest_sha256"]:
        report.problem(f"archive {archive['name']}: its manifest file is not the one logged")


__all__ = ["check_archives", "unchecked_note"]
