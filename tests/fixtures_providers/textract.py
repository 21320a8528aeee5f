"""Amazon Textract's asynchronous text detection, on the AWS JSON 1.1 protocol.

Every call is `POST /` with the operation in `X-Amz-Target` and the body under
`Content-Type: application/x-amz-json-1.1` (anything else: 400
SerializationException / UnknownOperationException, as AWS answers).
Errors are 400 (500 for InternalServerError, ThrottlingException) with
`{"__type": ..., "message": ...}` and `x-amzn-ErrorType`; no Retry-After.

- `Textract.StartDocumentTextDetection` {DocumentLocation, ClientRequestToken?,
  JobTag?} answers `{"JobId"}`; the same ClientRequestToken returns the same
  JobId (other parameters differing: IdempotentParameterMismatchException).
  `limit_first` answers the first start LimitExceededException (nothing made).
- `Textract.GetDocumentTextDetection` {JobId, MaxResults?, NextToken?}:
  `JobStatus` IN_PROGRESS | SUCCEEDED | FAILED | PARTIAL_SUCCESS, `StatusMessage`,
  `Warnings`, `DocumentMetadata.Pages`, and the `Blocks`, at most MaxResults
  (1000) a page, `NextToken` naming the next. An unknown JobId: 400
  InvalidJobIdException. `throttled_reads`: that many Gets first answer 400
  ProvisionedThroughputExceededException; `throttled_pages`: that many Gets of
  a further page of blocks (with a NextToken) do; `refused_tokens`: then that
  many Gets with a NextToken answer 400 InvalidParameterException (a token
  that expired between two attempts).

A document's script is its S3 object name: "fail.pdf" fails, "partial.pdf" is a
PARTIAL_SUCCESS, "big.pdf" holds 2,500 blocks (three pages of answers).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.aws import access_key_of, signature_refusal
from tests.fixtures_providers.common import hang

AMZ_JSON = "application/x-amz-json-1.1"
# The credentials the fake knows (id -> secret key), as AWS's IAM would; the first
# is the one the tests configure.
KEYS = {
    "AKIDTEXTRACTFIRST": "first/Secret+Access+Key/EXAMPLE0000000000000000",
    "AKIDTEXTRACTSECOND": "second/Secret+Access+Key/EXAMPLE000000000000000",
}
REGION, SERVICE = "us-east-1", "textract"
READS_TO_FINISH = 2
# The documented patterns (StartDocumentTextDetection's request parameters).
TOKEN = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
JOB_TAG = re.compile(r"^[a-zA-Z0-9_.\-:]{1,64}$")
PAGE_LIMIT = 1000


def _answer(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body),
        status_code=status,
        media_type=AMZ_JSON,
        headers={"x-amzn-RequestId": "req-1"},
    )


def _error(kind: str, message: str, status: int = 400) -> Response:
    resp = _answer({"__type": kind, "message": message}, status)
    resp.headers["x-amzn-ErrorType"] = kind
    return resp


class TextractFixture:
    def __init__(
        self,
        *,
        lose_first_create: bool = False,
        limit_first: bool = False,
        throttled_reads: int = 0,
        throttled_pages: int = 0,
        refused_tokens: int = 0,
    ) -> None:
        self.lose_first_create = lose_first_create
        self.limit_first = limit_first
        self.throttled_reads = throttled_reads
        self.throttled_pages = throttled_pages
        self.refused_tokens = refused_tokens
        self.starts = 0
        self.gets: list[dict[str, Any]] = []
        self.jobs: dict[str, dict[str, Any]] = {}
        self.by_token: dict[str, str] = {}
        # the access key id that signed each call, in order
        self.signed_by: list[str] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self.rpc, methods=["POST"])])

    async def rpc(self, request: Request) -> Response:
        if not request.headers.get("authorization"):
            return _error(
                "MissingAuthenticationTokenException", "Missing Authentication Token", 403
            )
        refused = self._signature_refused(request, await request.body())
        if refused is not None:
            return refused
        if request.headers.get("content-type", "").split(";")[0].strip() != AMZ_JSON:
            return _error(
                "SerializationException", "Start of structure or map found where not expected."
            )
        target = request.headers.get("x-amz-target", "")
        body = json.loads(await request.body() or b"{}")
        if target == "Textract.StartDocumentTextDetection":
            return await self.start(body)
        if target == "Textract.GetDocumentTextDetection":
            return self.get(body)
        return _error("UnknownOperationException", f"unknown operation {target!r}")

    def _signature_refused(self, request: Request, body: bytes) -> Response | None:
        """AWS's check, made by AWS's own signer (botocore) over what arrived."""
        refusal = signature_refusal(request, body, KEYS, REGION, SERVICE)
        if refusal is not None:
            return _error(*refusal, 403)
        self.signed_by.append(access_key_of(request))
        return None

    async def start(self, body: dict[str, Any]) -> Response:
        self.starts += 1
        if self.limit_first and self.starts == 1:
            return _error("LimitExceededException", "Open jobs exceed maximum concurrent job limit")
        token = body.get("ClientRequestToken")
        tag = body.get("JobTag")
        if (token is not None and not TOKEN.match(token)) or (
            tag is not None and not JOB_TAG.match(tag)
        ):
            return _error("ValidationException", "1 validation error detected")
        if token is not None and token in self.by_token:
            job = self.jobs[self.by_token[token]]
            if job["request"] != body:
                return _error("IdempotentParameterMismatchException", "parameters differ")
            return _answer({"JobId": job["JobId"]})
        name = body["DocumentLocation"]["S3Object"]["Name"]
        jid = f"{len(self.jobs):02d}" + "a" * 62
        self.jobs[jid] = {"JobId": jid, "request": body, "name": name, "reads": 0}
        if token is not None:
            self.by_token[token] = jid
        if self.lose_first_create and self.starts == 1:
            await hang()
        return _answer({"JobId": jid})

    def get(self, body: dict[str, Any]) -> Response:
        self.gets.append(body)
        if body.get("NextToken") and self.throttled_pages > 0:
            self.throttled_pages -= 1
            return _error("ProvisionedThroughputExceededException", "Provisioned rate exceeded")
        if body.get("NextToken") and self.refused_tokens > 0:
            self.refused_tokens -= 1
            return _error("InvalidParameterException", "Request has invalid parameters")
        if self.throttled_reads > 0:
            self.throttled_reads -= 1
            return _error("ProvisionedThroughputExceededException", "Provisioned rate exceeded")
        job = self.jobs.get(body.get("JobId", ""))
        if job is None:
            return _error("InvalidJobIdException", "An invalid job identifier was passed.")
        job["reads"] += 1
        if job["reads"] <= READS_TO_FINISH:
            return _answer({"JobStatus": "IN_PROGRESS", "DocumentMetadata": {"Pages": 1}})
        return _answer(self._done(job, body))

    def _done(self, job: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        name = job["name"]
        meta = {"DocumentMetadata": {"Pages": 3}, "DetectDocumentTextModelVersion": "1.0"}
        if name == "fail.pdf":
            return {
                "JobStatus": "FAILED",
                "StatusMessage": "Request has unsupported document format",
                **meta,
            }
        blocks = [
            {"BlockType": "LINE", "Id": f"b{i}", "Text": f"line {i}", "Page": 1 + i // 1000}
            for i in range(2500 if name == "big.pdf" else 3)
        ]
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or PAGE_LIMIT), PAGE_LIMIT)
        answer: dict[str, Any] = {
            "JobStatus": "SUCCEEDED",
            **meta,
            "Blocks": blocks[start : start + size],
        }
        if start + size < len(blocks):
            answer["NextToken"] = str(start + size)
        if name == "partial.pdf":
            answer["JobStatus"] = "PARTIAL_SUCCESS"
            answer["Warnings"] = [{"ErrorCode": "TEXTRACT_BAD_PAGE", "Pages": [2]}]
        return answer
