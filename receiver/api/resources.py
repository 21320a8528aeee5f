"""The operation resource (AIP-151 shaped) built from an `agent_operations` row.

`done`, `error | response` and `metadata` follow AIP-151; `message` is repeated
at the top level because it is the one field a model must not skip. A result
appears only under `response`, and `response` only exists for a success: an
agent that reads a result has, by construction, read a success.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

SUCCESS_OUTCOMES = frozenset({"succeeded", "completed_with_errors"})
API_PREFIX = "/v1/operations"


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, Decimal) else value


def links(operation_id: str) -> dict[str, str]:
    base = f"{API_PREFIX}/{operation_id}"
    return {
        "self": base,
        "wait": f"{base}:wait?max_wait=60",
        "events": f"{base}/events",
        "cancel": f"{base}:cancel",
        "claim": f"{base}:claim",
    }


def operation_resource(row: Mapping[str, Any]) -> dict[str, Any]:
    operation_id = row["operation_id"]
    metadata = {
        "provider": row["provider"],
        "kind": row["kind"],
        "client_reference": row["client_reference"],
        "requested_by": row["requested_by"],
        "state": row["state"],
        "remote_state": row["remote_state"],
        "remote_job_id": row["remote_job_id"],
        "outcome": row["outcome"],
        "final": row["final"],
        "message": row["message"],
        "poll_after_seconds": row["poll_after_seconds"],
        "progress": {
            "completed": row["progress_completed"],
            "total": row["progress_total"],
            "percent": _number(row["progress_percent"]),
        },
        "cancel_requested_at": row["cancel_requested_at"],
        "result_deadline": row["result_deadline"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
        "finished_at": row["finished_at"],
    }
    resource: dict[str, Any] = {
        "name": f"operations/{operation_id}",
        "operation_id": operation_id,
        "done": row["done"],
        "message": row["message"],
        "metadata": metadata,
        "links": links(operation_id),
    }
    if row["outcome"] in SUCCESS_OUTCOMES:
        resource["response"] = {
            "outcome": row["outcome"],
            **_stored_output(row),
            "errors_ref": row["errors_ref"],
        }
    elif row["done"]:
        resource["error"] = row["error"]
        # a cancelled job's output, kept (migration 036), or a failed job's list of
        # its failures (`result.failures_only`): the view gives the latter no
        # result_ref, only errors_ref, which the agent must see to read them
        if row["result_ref"] is not None or row["errors_ref"] is not None:
            resource["partial_output"] = {**_stored_output(row), "errors_ref": row["errors_ref"]}
    return resource


def _stored_output(row: Mapping[str, Any]) -> dict[str, Any]:
    """What was stored of the job's output, as a result or as a cancelled job's
    partial output alike: where, inline, and its item counts."""
    return {
        "result_ref": row["result_ref"],
        "result": row["result"],
        "summary": {
            "total": row["items_total"],
            "succeeded": row["items_succeeded"],
            "failed": row["items_failed"],
        },
    }


def transition_event(operation_id: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """One history row as an SSE payload."""
    return {
        "operation_id": operation_id,
        "seq": row["seq"],
        "at": row["at"],
        "from_state": row["from_state"],
        "to_state": row["to_state"],
        "actor": row["actor"],
        "cause": row["cause"],
        "evidence_kind": row["evidence_kind"],
        "remote_job_id": row["remote_job_id"],
    }
