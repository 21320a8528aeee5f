"""CPU per leaf in the evidence log's encoding, against stop 39's (each document encoded whole).

    .venv/bin/python -m bench.leaves            # 20,000 rows a kind, 5 rounds
    .venv/bin/python -m bench.leaves --quick    # 5,000, 3 rounds

The sequencer hashes every row version the log covers (`Digests.of`, then
`leaf_data`), and `audit verify` does it again for every row: at the
receiver's rate that was most of the sequencer's own CPU (py-spy, one-off).
Since stop 40 each column is encoded once and the row's three documents (the
whole row, its fixed part, its settled part) are joined from those pieces.
The baseline is the code it replaced (stop 39's), in the same process and
rounds: each document a `json.dumps` of its dict (sorted keys, no spaces,
UTF-8), the leaf a `json.dumps` of its six fields, the whole row's digest
reused as the fixed one for a row written once. Both must give the same
bytes, which is checked before timing (and, against the module's definition,
by a property test, tests/unit/test_log_leaves.py). No database, no other
process.

Rows: a webhook event as the receiver stores it (its payload the bench's
67-byte event, and a 1.5 KB one), a settled provider call (a status read
with its answer), an observation.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from bench.receiver import event_body
from shared.ledger.leaves import KINDS, LEAF_PREFIX, Digests, LeafKind, leaf_data

ROWS_PER_ROUND, ROUNDS = 20_000, 5
QUICK_ROWS, QUICK_ROUNDS = 5_000, 3
AT = datetime(2026, 12, 4, 23, 0, 0, 123456, tzinfo=UTC)


def _before(kind: LeafKind, row: Mapping[str, Any], row_id: str) -> bytes:
    """The leaf as stop 39 computed it: each document a `json.dumps` of its dict,
    the whole row's digest reused as the fixed one for a row written once."""

    def canonical(document: Any) -> bytes:
        text = json.dumps(
            document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        return text.encode("utf-8", "surrogatepass")

    def value(v: Any) -> Any:
        if isinstance(v, datetime):
            return v.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"
        return str(v) if isinstance(v, Decimal) else v

    whole = {c: value(row[c]) for c in kind.columns}
    row_digest = hashlib.sha256(canonical(whole)).digest()
    fixed = (
        row_digest
        if kind.fixed == kind.columns
        else hashlib.sha256(canonical({c: whole[c] for c in kind.fixed})).digest()
    )
    settled = (
        hashlib.sha256(canonical({c: whole[c] for c in kind.settled})).digest()
        if kind.is_settled(row)
        else None
    )
    document = {
        "kind": kind.name,
        "id": row_id,
        "deleted": False,
        "row": row_digest.hex(),
        "fixed": fixed.hex(),
        "settled": None if settled is None else settled.hex(),
    }
    return LEAF_PREFIX + canonical(document)


def _shipped(kind: LeafKind, row: Mapping[str, Any], row_id: str) -> bytes:
    return leaf_data(kind.name, row_id, Digests.of(kind, row))


def _webhook(payload_items: int) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(event_body("job_000123", "running"))
    if payload_items:
        payload["data"] = {
            "items": [{"id": f"it_{i}", "n": i, "ok": i % 3 == 0} for i in range(payload_items)]
        }
    return {
        "webhook_event_id": 123456,
        "provider": "sim",
        "event_id": "evt_2b6f0c1e9d7a4c3f8e5b1a2d3c4e5f60",
        "received_at": AT,
        "signature_scheme": "standard_webhooks",
        "id_signed": True,
        "remote_job_id": "job_000123",
        "operation_ref": None,
        "client_reference": None,
        "remote_state": "running",
        "remote_state_raw": "running",
        "payload": payload,
        "operation_id": "op_01J0000000000000000000000A",
        "attached_at": AT,
        "duplicate_deliveries": 0,
    }


def _call() -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(KINDS["call"].columns)
    row.update(
        call_id=812,
        operation_id="op_01J0000000000000000000000A",
        call_kind="status",
        attempt=3,
        worker="rec-1",
        fence=7,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        method="GET",
        url="https://api.example/v1/jobs/job_000123",
        request_headers={"accept": "application/json", "authorization": "[redacted]"},
        started_at=AT,
        finished_at=AT,
        duration_ms=41,
        status_code=200,
        response_headers={"content-type": "application/json", "x-request-id": "req_1"},
        response_sha256="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        response_size=118,
        response_body={"id": "job_000123", "state": "running", "progress": {"done": 4, "of": 10}},
        remote_job_id="job_000123",
        marked=False,
        anomalies=[],
    )
    return row


def _observation() -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(KINDS["observation"].columns)
    row.update(
        observation_id=4242,
        operation_id="op_01J0000000000000000000000A",
        source="poll",
        call_id=812,
        remote_state="running",
        remote_state_raw="running",
        fetched_at=AT,
        progress_completed=Decimal("4"),
        progress_total=Decimal("10"),
        progress_percent=Decimal("40.00"),
        anomalies=[],
    )
    return row


CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "webhook event, 67 B payload": ("webhook", _webhook(0)),
    "webhook event, 1.5 KB payload": ("webhook", _webhook(30)),
    "provider call, settled": ("call", _call()),
    "observation": ("observation", _observation()),
}


def _best_us(encode: Callable[[], bytes], rows: int) -> float:
    began = time.perf_counter()
    for _ in range(rows):
        encode()
    return (time.perf_counter() - began) / rows * 1e6


def run(rows: int, rounds: int) -> None:
    print(f"{rows:,} rows a kind a round, {rounds} rounds (the fastest round of each)")
    print(f"{'row':32s} {'stop 39 µs':>14s} {'shipped µs':>11s} {'ratio':>6s}")
    for name, (kind_name, row) in CASES.items():
        kind = KINDS[kind_name]
        if _shipped(kind, row, "1") != _before(kind, row, "1"):
            raise SystemExit(f"{name}: the shipped leaf differs from stop 39's")
        best = {"before": float("inf"), "shipped": float("inf")}
        for _ in range(rounds):  # alternating, so drift hits both alike
            for side, encode in (("before", _before), ("shipped", _shipped)):
                took = _best_us(functools.partial(encode, kind, row, "1"), rows)
                best[side] = min(best[side], took)
        ratio = best["shipped"] / best["before"]
        print(f"{name:32s} {best['before']:14.1f} {best['shipped']:11.1f} {ratio:6.2f}")
    print("ratio = shipped / stop 39's (lower is faster); the same bytes either way")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.leaves", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds")
    args = parser.parse_args(argv)
    if args.quick:
        run(QUICK_ROWS, QUICK_ROUNDS)
    else:
        run(ROWS_PER_ROUND, ROUNDS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
