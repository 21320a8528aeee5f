"""What every provider fixture shares: a job registry, auth checks, the lost-response hang.

A fixture is a real Starlette app on loopback (the reconciler talks HTTP to
it), not a mock: it answers in the provider's documented shapes and counts
what it was sent, so a test can assert on the provider's side of the story
("one batch was created", "the cancel arrived once").
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

# How long a "lost response" create hangs before answering. The tests' request
# timeout is well below it, so the client gives up first: the provider has the
# job, the client has no answer -- exactly seed 000.
LOST_RESPONSE_HANG_SECONDS = 1.5


@dataclass
class Job:
    """One remote job as the fixture provider sees it."""

    job_id: str
    scenario: str
    request: Any
    headers: dict[str, str]
    reads: int = 0
    cancel_requested: bool = False
    # A held job stays running until the test releases it (webhook tests).
    hold: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Registry:
    """Jobs by id, in creation order, plus counters of what arrived."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.jobs: dict[str, Job] = {}
        self.calls: Counter[str] = Counter()
        self._ids = itertools.count(1)

    def new_id(self) -> str:
        return f"{self.prefix}{next(self._ids):04d}"

    def add(self, scenario: str, request: Any, headers: dict[str, str], **extra: Any) -> Job:
        job = Job(self.new_id(), scenario, request, headers, extra=dict(extra))
        self.jobs[job.job_id] = job
        return job

    def only(self) -> Job:
        """The single job a test created (fails loudly when there are more)."""
        (job,) = self.jobs.values()
        return job

    def count(self, what: str) -> None:
        self.calls[what] += 1


def authorized(request: Request, header: str, expected: str) -> bool:
    return request.headers.get(header) == expected


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers=headers)


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


async def hang() -> None:
    await asyncio.sleep(LOST_RESPONSE_HANG_SECONDS)


async def read_json(request: Request) -> Any:
    raw = await request.body()
    return json.loads(raw) if raw else None
