"""A provider whose results are CSV rows, with a checksum in its status body.

Described in TOML alone (the simulator's preset with its [result] table
replaced); the simulator serves CSV, marking failed rows inline, and
publishes the hex sha256 of the bytes in the status response.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from shared.ledger.states import LocalState
from tests.harness import rig

S = LocalState

CSV_RESULT = {
    "source": "url",
    "side_effects": False,
    "format": "csv",
    "csv": {
        "id_column": "index",
        "failed_column": "status",
        "failed_values": ["failed"],
        "error_column": "message",
    },
    "expect": {
        "content_types": ["text/csv"],
        "item_count": "from_status_counts",
        "checksum": {
            "source": "status",
            "field": "/result_sha256",
            "algorithm": "sha256",
            "encoding": "hex",
        },
    },
}


async def test_a_partial_csv_result_is_validated_counted_and_kept(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, replace_tables={"result": CSV_RESULT}) as r:
        op_id = await r.submit("partial", duration=0.2, total=6, failed=2, result_format="csv")
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED}) is S.SUCCEEDED
    row = await pool.fetchrow(
        "SELECT r.valid, r.items_total, r.items_succeeded, r.items_failed, r.content_type,"
        " r.storage_ref, (SELECT array_agg(f.message ORDER BY f.item_key)"
        "  FROM result_item_failures f WHERE f.result_id = r.result_id) AS failures"
        " FROM results r WHERE r.operation_id = $1",
        op_id,
    )
    assert row["valid"] and row["content_type"].startswith("text/csv")
    assert (row["items_total"], row["items_succeeded"], row["items_failed"]) == (6, 4, 2)
    assert row["storage_ref"] is not None  # the CSV bytes are kept as a file
    assert len(row["failures"]) == 2 and all("was rejected" in m for m in row["failures"])


async def test_a_csv_whose_bytes_differ_from_the_status_checksum_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, replace_tables={"result": CSV_RESULT}) as r:
        op_id = await r.submit("checksum_mismatch", duration=0.1, result_format="csv")
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED}) is (
            S.RESULT_VALIDATION_FAILED
        )
    reason = await pool.fetchval(
        "SELECT reason FROM escalations WHERE operation_id = $1 ORDER BY 1 DESC LIMIT 1", op_id
    )
    assert "/result_sha256" in reason and "mismatch" in reason


BINARY_RESULT = {
    "source": "url",
    "side_effects": False,
    "format": "binary",
    "expect": {
        "content_types": ["application/octet-stream"],
        "checksum": {
            "source": "status",
            "field": "/result_sha256",
            "algorithm": "sha256",
            "encoding": "hex",
        },
    },
}


async def test_a_binary_result_is_stored_as_a_file_checked_by_size_and_checksum(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, replace_tables={"result": BINARY_RESULT}) as r:
        op_id = await r.submit("success", duration=0.1, total=3, result_format="binary")
        assert await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED}) is S.SUCCEEDED
    row = await pool.fetchrow(
        "SELECT valid, size_bytes, sha256, storage_ref, inline, content_type"
        " FROM results WHERE operation_id = $1",
        op_id,
    )
    assert row["valid"] and row["content_type"] == "application/octet-stream"
    assert row["size_bytes"] == 3 * 32 and row["inline"] is None  # never parsed, kept as bytes
    stored = Path(row["storage_ref"].removeprefix("file:")).read_bytes()
    assert hashlib.sha256(stored).hexdigest() == row["sha256"] and len(stored) == 96


async def test_a_binary_result_whose_bytes_differ_from_the_status_checksum_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    async with rig(pool, tmp_path, replace_tables={"result": BINARY_RESULT}) as r:
        op_id = await r.submit("checksum_mismatch", duration=0.1, result_format="binary")
        final = await r.settle(op_id, {S.SUCCEEDED, S.RESULT_VALIDATION_FAILED})
    assert final is S.RESULT_VALIDATION_FAILED
