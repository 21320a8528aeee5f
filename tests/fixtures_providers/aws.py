"""What an AWS API checks before anything else: the call's Signature Version 4.

Checked by botocore's signer (AWS's own) over what arrived, as AWS would: the
fakes of Textract and Bedrock refuse a call it does not verify, in AWS's words.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.requests import Request

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<day>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<names>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def signature_refusal(
    request: Request, body: bytes, keys: Mapping[str, str], region: str, service: str
) -> tuple[str, str] | None:
    """(error type, message) when the call's signature does not verify; else None.

    `keys`: access key id -> secret key, the credentials the fake's IAM knows.
    The URL is rebuilt from the request's raw path (as sent: an ARN in it
    percent-encoded), for AWS signs the path as it was sent.
    """
    found = _AUTHORIZATION.fullmatch(request.headers.get("authorization", ""))
    if found is None:
        return "IncompleteSignatureException", "Authorization header malformed"
    secret = keys.get(found["key"])
    if secret is None:
        return "UnrecognizedClientException", "The security token included is invalid"
    if (found["region"], found["service"]) != (region, service):
        return "InvalidSignatureException", f"Credential should be scoped to {region}/{service}"
    names = found["names"].split(";")
    if not {"host", "x-amz-date"} <= set(names):
        return "InvalidSignatureException", "host and x-amz-date must be signed"
    headers = {name: request.headers.get(name, "") for name in names}
    raw_path = request.scope.get("raw_path", request.url.path.encode()).decode()
    query = request.scope.get("query_string", b"").decode()
    url = f"{request.url.scheme}://{headers['host']}{raw_path}" + (f"?{query}" if query else "")
    signed = AWSRequest(method=request.method, url=url, data=body, headers=headers)
    signed.context["timestamp"] = headers["x-amz-date"]
    token = headers.get("x-amz-security-token") or None
    signer = SigV4Auth(Credentials(found["key"], secret, token), service, region)
    expected = signer.signature(
        signer.string_to_sign(signed, signer.canonical_request(signed)), signed
    )
    if not hmac.compare_digest(expected, found["signature"]):
        return (
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        )
    return None


def access_key_of(request: Request) -> str:
    """The access key id a verified call was signed with."""
    found = _AUTHORIZATION.fullmatch(request.headers["authorization"])
    assert found is not None
    return found["key"]
