"""Decoding of non-JSON result formats: csv and text (binary is never decoded).

Everything here is pure and bounded by the bytes it is given (the caller has
already applied `max_bytes`). Bad input raises `FormatError` with a reason
for the operator -- a ragged row, undecodable bytes, a missing column -- and
never any other exception.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared.providers.description import CsvColumn, CsvOptions, ResultFormat
from shared.providers.facts import ItemFailure
from shared.providers.values import clip


class FormatError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class CsvTable:
    """The rows of a CSV result (all parts, in order), without the header row."""

    columns: tuple[str, ...] | None
    rows: tuple[tuple[str, ...], ...]

    def parsed(self) -> dict[str, Any]:
        """A lossless JSON form (header names may repeat, so rows stay lists)."""
        return {
            "columns": list(self.columns) if self.columns is not None else None,
            "rows": [list(row) for row in self.rows],
        }


@dataclass(frozen=True)
class RowSplit:
    total: int
    failed: int
    failures: tuple[ItemFailure, ...]
    truncated: bool


def decode_text(body: bytes, where: str = "result") -> str:
    """Strict UTF-8 (a leading byte order mark is dropped)."""
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(f"{where} is not valid UTF-8 (byte {exc.start})") from None


def parse_csv(options: CsvOptions, body: bytes, where: str = "result") -> CsvTable:
    """One CSV document; every record must have as many fields as the first one."""
    text = decode_text(body, where)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=options.delimiter, strict=True)
    columns: tuple[str, ...] | None = None
    rows: list[tuple[str, ...]] = []
    width: int | None = None
    try:
        for record in reader:
            if not record:  # a blank line
                continue
            if width is None:
                width = len(record)
                if options.header:
                    columns = tuple(record)
                    continue
            elif len(record) != width:
                raise FormatError(
                    f"{where} line {reader.line_num} has {len(record)} fields, expected {width}"
                )
            rows.append(tuple(record))
    except csv.Error as exc:
        raise FormatError(f"{where} is not valid CSV: line {reader.line_num}: {exc}") from None
    if options.header and columns is None:
        raise FormatError(f"{where} has no CSV header row")
    return CsvTable(columns, tuple(rows))


def merge_csv(tables: Sequence[CsvTable]) -> CsvTable:
    """The parts of a multi-file result as one table; their headers must agree."""
    if not tables:
        return CsvTable(None, ())
    first = tables[0]
    rows = list(first.rows)
    width = _width(first)
    for number, table in enumerate(tables[1:], start=2):
        if table.columns != first.columns:
            raise FormatError(f"result part {number} has another CSV header than part 1")
        part_width = _width(table)
        if width is not None and part_width is not None and part_width != width:
            raise FormatError(
                f"result part {number} rows have {part_width} fields, part 1 rows {width}"
            )
        width = width if width is not None else part_width
        rows.extend(table.rows)
    return CsvTable(first.columns, tuple(rows))


def joined_parts(
    fmt: ResultFormat, options: CsvOptions | None, parts: Sequence[bytes], *, lists: bool = False
) -> bytes:
    """A multi-file result as ONE document of its format: what is stored, hashed and
    handed to agents.

    Laid end to end, the parts were not one: a JSONL part without a final
    newline glued its last line to the next part's first, each later CSV
    part's header became a data row, two JSON documents did not parse. Each
    part's own bytes are kept: JSONL and header-less CSV parts are separated
    by a newline where one is missing, later CSV parts lose their header
    record (validation has checked they are the first's), and JSON documents
    become the items of one array; JSON documents that are each the list of
    items (`lists`: `result.items = ""`, Apify's dataset pages) become one list
    of all their items, the shape one such part has. A JSON, JSONL or CSV
    part's leading UTF-8 BOM, which validation dropped, is dropped here too.
    Text and binary parts are concatenated. A single part is returned as it is.
    """
    if len(parts) == 1:
        return parts[0]
    if fmt in _PARSED_PER_PART:
        # validation read each part with its BOM dropped: inside the joined
        # document one is a U+FEFF mid-text (`[{..},\ufeff{..}]` is no JSON)
        parts = [part.removeprefix(_BOM) for part in parts]
    if fmt is ResultFormat.JSON and lists:
        held = [inner for inner in map(_list_inside, parts) if inner]
        return b"[" + b",".join(held) + b"]"
    if fmt is ResultFormat.JSON:
        return b"[" + b",".join(parts) + b"]"
    if fmt is ResultFormat.JSONL or (fmt is ResultFormat.CSV and options is not None):
        lines = list(parts)
        if fmt is ResultFormat.CSV and options is not None and options.header:
            lines = [lines[0], *(_without_header(options, part) for part in lines[1:])]
        return b"".join(_ended(part) for part in lines[:-1]) + lines[-1]
    return b"".join(parts)


_BOM = b"\xef\xbb\xbf"
# The formats whose parts validation parses one by one, a leading BOM dropped.
_PARSED_PER_PART = frozenset({ResultFormat.JSON, ResultFormat.JSONL, ResultFormat.CSV})


def _list_inside(part: bytes) -> bytes:
    """What a JSON list's brackets hold, as sent (validation has parsed it as a
    list: JSON's whitespace may stand around it; `joined_parts` dropped a BOM)."""
    text = part.strip(b" \t\r\n")
    if not (text.startswith(b"[") and text.endswith(b"]")):
        raise FormatError("a result page is not a JSON list")
    return text[1:-1].strip(b" \t\r\n")


def _ended(part: bytes) -> bytes:
    return part if not part or part.endswith(b"\n") else part + b"\n"


def _without_header(options: CsvOptions, part: bytes) -> bytes:
    """The part after its first record (which may span lines inside quotes)."""
    text = decode_text(part, "result part")
    source = io.StringIO(text, newline="")
    reader = csv.reader(source, delimiter=options.delimiter, strict=True)
    try:
        next(reader, None)
    except csv.Error as exc:
        raise FormatError(f"result part is not valid CSV: {exc}") from None
    return text[source.tell() :].encode("utf-8")


def _width(table: CsvTable) -> int | None:
    if table.columns is not None:
        return len(table.columns)
    return len(table.rows[0]) if table.rows else None


def check_columns(options: CsvOptions, table: CsvTable) -> None:
    """Required columns exist; every configured column can be found."""
    for name in options.required_columns:
        if table.columns is None or name not in table.columns:
            raise FormatError(f"missing required column {name}")
    for key in ("id_column", "failed_column", "error_column"):
        column = getattr(options, key)
        if column is not None:
            column_index(table, column, key)


def column_index(table: CsvTable, column: CsvColumn, key: str = "column") -> int | None:
    """The position of `column`; None when there are no rows to read it from."""
    width = _width(table)
    if isinstance(column, int):
        if width is not None and column >= width:
            raise FormatError(f"{key} {column} is beyond the {width} columns of the result")
        return column if width is not None else None
    assert table.columns is not None  # config: named columns need header = true
    found = [i for i, name in enumerate(table.columns) if name == column]
    if not found:
        raise FormatError(f"CSV header has no column {column} ({key})")
    if len(found) > 1:
        raise FormatError(f"CSV header names column {column} {len(found)} times ({key})")
    return found[0]


def split_rows(options: CsvOptions, table: CsvTable, max_failures: int) -> RowSplit:
    """Count the rows and list the failed ones (index = 0-based data row)."""
    failed_at = _index(options.failed_column, table, "failed_column")
    error_at = _index(options.error_column, table, "error_column")
    id_at = _index(options.id_column, table, "id_column")
    failures: list[ItemFailure] = []
    failed = 0
    for position, row in enumerate(table.rows):
        if failed_at is None:
            break
        marker = row[failed_at]
        if options.failed_values:
            is_failed = marker in options.failed_values
        else:
            is_failed = marker.strip() != ""
        if not is_failed:
            continue
        failed += 1
        if len(failures) < max_failures:
            failures.append(
                ItemFailure(
                    index=position,
                    item_id=clip(row[id_at] or None) if id_at is not None else None,
                    code=clip(marker or None),
                    message=clip(row[error_at] or None) if error_at is not None else None,
                )
            )
    return RowSplit(
        total=len(table.rows),
        failed=failed,
        failures=tuple(failures),
        truncated=failed > len(failures),
    )


def _index(column: CsvColumn | None, table: CsvTable, key: str) -> int | None:
    return None if column is None else column_index(table, column, key)
