"""Amazon Bedrock's batch inference (model invocation jobs), as its API model says.

From botocore's service model (bedrock 2023-04-20, rest-json, SigV4 service
`bedrock`): every call is signed, or refused 403 in AWS's words.

- `POST /model-invocation-job` {jobName, roleArn, modelId, inputDataConfig,
  outputDataConfig, clientRequestToken?} answers 200 {jobArn}. The same
  clientRequestToken returns the same job ("Amazon Bedrock ignores the
  request, but does not return an error"). A jobName outside its pattern is
  400 ValidationException.
- `GET /model-invocation-job/{jobIdentifier}` (the ARN, percent-encoded in the
  path): {jobArn, jobName, status, message, outputDataConfig, the record
  counts, lastModifiedTime...}; an unknown job 404 ResourceNotFoundException.
- `POST /model-invocation-job/{jobIdentifier}/stop` 200 {}: Stopping, then Stopped.

Errors are {"message": ...} with the type in `x-amzn-ErrorType`. A job's
script is its jobName's first word: "done" (Submitted, Validating, InProgress,
Completed), "partial" (PartiallyCompleted: 2 of 3 records), "fail" (Failed),
"slow" (InProgress until stopped), "lost" (done, but the create's answer hangs).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.aws import access_key_of, signature_refusal
from tests.fixtures_providers.common import hang

KEYS = {"AKIDBEDROCKEXAMPLE": "bedrock/Secret+Access+Key/EXAMPLE0000000000000000"}
REGION, SERVICE = "us-east-1", "bedrock"
ACCOUNT = "123456789012"
JOB_NAME = re.compile(r"^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$")
TOKEN = re.compile(r"^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$")
# the statuses a job shows, read by read, before it ends
_RUNNING = ["Submitted", "Validating", "InProgress"]


def _error(kind: str, message: str, status: int) -> Response:
    return Response(
        json.dumps({"message": message}),
        status_code=status,
        media_type="application/json",
        headers={
            "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        },
    )


def _answer(body: Any) -> Response:
    return Response(
        json.dumps(body), media_type="application/json", headers={"x-amzn-RequestId": "req-1"}
    )


class BedrockFixture:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.by_token: dict[str, str] = {}
        self.creates = 0
        # this many creates first refused 400 ServiceQuotaExceededException (the
        # account's cap of concurrent batch jobs): nothing made
        self.over_quota = 0
        self.stops = 0
        self.signed_by: list[str] = []
        # the job identifiers the reads named, decoded from their paths
        self.read_ids: list[str] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/model-invocation-job", self.create, methods=["POST"]),
                Route("/model-invocation-job/{jid:path}/stop", self.stop, methods=["POST"]),
                Route("/model-invocation-job/{jid:path}", self.get, methods=["GET"]),
            ]
        )

    async def _verified(self, request: Request) -> tuple[bytes, Response | None]:
        body = await request.body()
        refusal = signature_refusal(request, body, KEYS, REGION, SERVICE)
        if refusal is not None:
            return body, _error(*refusal, 403)
        self.signed_by.append(access_key_of(request))
        return body, None

    async def create(self, request: Request) -> Response:
        body, refused = await self._verified(request)
        if refused is not None:
            return refused
        self.creates += 1
        if self.creates <= self.over_quota:
            return _error(
                "ServiceQuotaExceededException",
                "The number of concurrent batch inference jobs exceeds the quota",
                400,
            )
        document = json.loads(body)
        name, token = document.get("jobName", ""), document.get("clientRequestToken")
        missing = [
            k
            for k in ("jobName", "roleArn", "modelId", "inputDataConfig", "outputDataConfig")
            if k not in document
        ]
        if missing or not JOB_NAME.match(name) or (token is not None and not TOKEN.match(token)):
            return _error("ValidationException", "1 validation error detected", 400)
        if token is not None and token in self.by_token:
            return _answer({"jobArn": self.by_token[token]})
        arn = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{len(self.jobs):012d}"
        self.jobs[arn] = {
            "request": document,
            "script": name.split("-")[0],
            "reads": 0,
            "stopped": False,
        }
        if token is not None:
            self.by_token[token] = arn
        if self.jobs[arn]["script"] == "lost" and self.creates == 1:
            await hang()
        return _answer({"jobArn": arn})

    def _job(self, request: Request) -> tuple[str, dict[str, Any] | None]:
        # the ARN as AWS reads it: its path segment decoded once
        raw = request.scope["raw_path"].decode().removeprefix("/model-invocation-job/")
        arn = unquote(raw.removesuffix("/stop"))
        return arn, self.jobs.get(arn)

    async def get(self, request: Request) -> Response:
        _body, refused = await self._verified(request)
        if refused is not None:
            return refused
        arn, job = self._job(request)
        self.read_ids.append(arn)
        if job is None:
            return _error("ResourceNotFoundException", "The specified ARN was not found", 404)
        job["reads"] += 1
        status = self._status(job)
        document: dict[str, Any] = {
            "jobArn": arn,
            "jobName": job["request"]["jobName"],
            "modelId": job["request"]["modelId"],
            "status": status,
            "submitTime": "2026-12-05T09:00:00Z",
            "lastModifiedTime": "2026-12-05T09:01:00Z",
            "inputDataConfig": job["request"]["inputDataConfig"],
            "outputDataConfig": job["request"]["outputDataConfig"],
        }
        if status == "Failed":
            document["message"] = "The input file is not valid JSONL: line 3"
        if status in ("Completed", "PartiallyCompleted", "InProgress"):
            done = status != "InProgress"
            document |= {
                "totalRecordCount": 3,
                "processedRecordCount": 3 if done else 1,
                "successRecordCount": 2 if status == "PartiallyCompleted" else (3 if done else 1),
                "errorRecordCount": 1 if status == "PartiallyCompleted" else 0,
            }
        return _answer(document)

    def _status(self, job: dict[str, Any]) -> str:
        if job["stopped"]:
            job["stop_reads"] = job.get("stop_reads", 0) + 1
            return "Stopping" if job["stop_reads"] == 1 else "Stopped"
        reads, script = job["reads"], job["script"]
        if script == "slow" or reads <= len(_RUNNING):
            return _RUNNING[min(reads, len(_RUNNING)) - 1]
        return {"partial": "PartiallyCompleted", "fail": "Failed"}.get(script, "Completed")

    async def stop(self, request: Request) -> Response:
        _body, refused = await self._verified(request)
        if refused is not None:
            return refused
        _arn, job = self._job(request)
        if job is None:
            return _error("ResourceNotFoundException", "The specified ARN was not found", 404)
        self.stops += 1
        job["stopped"] = True
        return _answer({})
