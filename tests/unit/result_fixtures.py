"""A minimal provider around a [result] table, and the facts result tests feed it."""

from __future__ import annotations

from typing import Any

from shared.ledger.states import RemoteState
from shared.providers import Counts, HttpResponse, StatusFact, parse_providers
from shared.providers.description import ProviderDescription


def provider_table(result: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A whole config document: one provider `p`, its status counts mapped, `result` as given."""
    return {
        "providers": {
            "p": {
                "base_url": "https://api.example.test",
                "create": {"path": "/v1/jobs", "idempotency": "header", "job_id": "/id"},
                "status": {
                    "path": "/v1/jobs/{job_id}",
                    "state": "/status",
                    "state_map": {"done": "succeeded"},
                    "result_url": "/result_url",
                    "counts_total": "/counts/total",
                    "counts_succeeded": "/counts/succeeded",
                    "counts_failed": "/counts/failed",
                    **(status or {}),
                },
                "result": result,
            }
        }
    }


def provider(status: dict[str, Any] | None = None, **result: Any) -> ProviderDescription:
    table = provider_table({"source": "url", **result}, status)
    return parse_providers(table, "test.toml", {})["p"]


def counts(total: int, succeeded: int, failed: int, checksum: str | None = None) -> StatusFact:
    return StatusFact(
        status_code=200,
        remote_state=RemoteState.PARTIALLY_SUCCEEDED,
        counts=Counts(total=total, succeeded=succeeded, failed=failed),
        result_checksum=checksum,
    )


def ok(body: bytes, content_type: str = "text/csv", **headers: str) -> HttpResponse:
    return HttpResponse(200, {"Content-Type": content_type, **headers}, body)
