"""AWS Signature Version 4 (shared/providers/sigv4.py), checked against botocore's
signer (AWS's own) request for request, and against AWS's published example.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore import auth as botocore_auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from shared.providers import ConfigError, parse_providers, requests
from shared.providers.requests import build_create, build_status
from shared.providers.sigv4 import Credentials, CredentialsError, parse_credentials, sign

NOW = datetime(2026, 12, 5, 9, 10, 11, tzinfo=UTC)
KEYS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SESSION = Credentials(KEYS.access_key_id, KEYS.secret_access_key, "FQoGZXIvYXdzEXAMPLE//token=")


def botocore_authorization(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    """What AWS's own signer adds to the same request, at the same time."""
    monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda: NOW.replace(tzinfo=None))
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    boto = BotoCredentials(
        credentials.access_key_id, credentials.secret_access_key, credentials.session_token
    )
    botocore_auth.SigV4Auth(boto, service, region).add_auth(request)
    return {
        name: request.headers[name]
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
        if name in request.headers
    }


CASES = [
    # Textract: the AWS JSON protocol, one URL, the operation in X-Amz-Target
    (
        "POST",
        "https://textract.us-east-1.amazonaws.com/",
        {
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": "Textract.StartDocumentTextDetection",
        },
        b'{"DocumentLocation":{"S3Object":{"Bucket":"b","Name":"a b.pdf"}}}',
        KEYS,
        "us-east-1",
        "textract",
    ),
    # Bedrock: a REST path naming an ARN (encoded once in the URL, twice when signed)
    (
        "GET",
        "https://bedrock.eu-west-3.amazonaws.com/model-invocation-job/"
        "arn%3Aaws%3Abedrock%3Aeu-west-3%3A123456789012%3Amodel-invocation-job%2Fabc123",
        {},
        b"",
        SESSION,
        "eu-west-3",
        "bedrock",
    ),
    # a query to sort and encode, a port of its own, dot segments in the path
    (
        "GET",
        "http://localhost:4566/a/./b/../c/?z=1&a=x%20y&a=%2F&empty=",
        {"Content-Type": "application/json"},
        b"",
        KEYS,
        "us-west-2",
        "transcribe",
    ),
]


@pytest.mark.parametrize(
    ("method", "url", "headers", "body", "credentials", "region", "service"),
    CASES,
    ids=["textract-json", "bedrock-arn-path", "query-port-dots"],
)
def test_our_signature_is_botocores(
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
) -> None:
    ours = sign(method, url, headers, body, credentials, region, service, NOW)
    theirs = botocore_authorization(
        method, url, headers, body, credentials, region, service, monkeypatch
    )
    assert ours == theirs


def test_awss_published_example_get_vanilla() -> None:
    """aws-sig-v4-test-suite's `get-vanilla`: GET / on example.amazonaws.com."""
    added = sign(
        "GET",
        "https://example.amazonaws.com/",
        {},
        b"",
        KEYS,
        "us-east-1",
        "service",
        datetime(2015, 8, 30, 12, 36, tzinfo=UTC),
    )
    assert added["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def test_a_request_signed_again_drops_the_last_signature() -> None:
    first = sign("GET", "https://a.amazonaws.com/x", {}, b"", SESSION, "us-east-1", "s", NOW)
    again = sign("GET", "https://a.amazonaws.com/x", first, b"", SESSION, "us-east-1", "s", NOW)
    assert again == first


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"AccessKeyId": "A"}', "AccessKeyId and SecretAccessKey are required"),
        ('{"AccessKeyId": "A", "SecretAccessKey": "s", "SessionToken": 3}', "SessionToken"),
        ('{"AccessKeyId": "A B", "SecretAccessKey": "s"}', "a space or a character"),
        ('{"AccessKeyId": "A", "SecretAccessKey": "s\\t"}', "a space or a character"),
        ('{"AccessKeyId": "A", "SecretAccessKey": "s\\u007f"}', "a space or a character"),
        ('{"AccessKeyId": "A", "SecretAccessKey": "s", "SessionToken": "\\u00e9"}', "a space"),
    ],
)
def test_credentials_that_cannot_sign_are_refused_without_quoting_them(
    text: str, problem: str
) -> None:
    with pytest.raises(CredentialsError) as caught:
        parse_credentials(text)
    assert problem in str(caught.value)
    assert "A B" not in str(caught.value)


BASE: dict[str, Any] = {
    "base_url": "https://textract.us-east-1.amazonaws.com",
    "headers": {"Content-Type": "application/x-amz-json-1.1"},
    "create": {
        "method": "POST",
        "path": "/",
        "idempotency": "body",
        "idempotency_body_field": "/ClientRequestToken",
        "job_id": "/JobId",
        "set_headers": {"X-Amz-Target": "Textract.StartDocumentTextDetection"},
    },
    "status": {
        "method": "POST",
        "path": "/",
        "body": {"JobId": "{job_id}"},
        "state": "/JobStatus",
        "state_map": {"IN_PROGRESS": "running", "SUCCEEDED": "succeeded"},
    },
    "result": {"source": "none"},
    "auth": {"scheme": "aws_sigv4", "region": "us-east-1", "service": "textract"},
}
PROCESS = {
    "Version": 1,
    "AccessKeyId": SESSION.access_key_id,
    "SecretAccessKey": SESSION.secret_access_key,
    "SessionToken": SESSION.session_token,
}


def provider(auth: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    table = copy.deepcopy(BASE)
    table["auth"].update(auth)
    return parse_providers({"providers": {"textract": table}}, "config.toml", env or {})["textract"]


def test_a_signed_create_sends_the_bytes_it_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body is fixed before it is signed, and sent as those bytes (not re-encoded)."""
    creds = tmp_path / "aws.json"
    creds.write_text(json.dumps(PROCESS))
    desc = provider({"credentials_file": str(creds)})
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    body = {"DocumentLocation": {"S3Object": {"Bucket": "b", "Name": "ünï.pdf"}}}
    req = build_create(desc, body=body, idempotency_token="tok_1", client_reference="op_1")
    assert (
        req.content
        == json.dumps(
            {**body, "ClientRequestToken": "tok_1"}, ensure_ascii=False, separators=(",", ":")
        ).encode()
    )
    signed = {k: v for k, v in req.headers.items() if k in ("Content-Type", "X-Amz-Target")}
    theirs = botocore_authorization(
        "POST", req.url, signed, req.content, SESSION, "us-east-1", "textract", monkeypatch
    )
    assert {k: req.headers[k] for k in theirs} == theirs
    # the credential never reaches the record
    assert {"Authorization", "X-Amz-Security-Token"} <= req.secret_headers
    assert SESSION.session_token not in json.dumps(req.sanitized_headers())


def test_credentials_from_awss_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"AWS_ACCESS_KEY_ID": KEYS.access_key_id, "AWS_SECRET_ACCESS_KEY": KEYS.secret_access_key}
    desc = provider({}, env)
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    req = build_status(desc, "job-1")
    assert req.headers["Authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={KEYS.access_key_id}/20261205/us-east-1/textract/"
    )
    assert "X-Amz-Security-Token" not in req.headers


@pytest.mark.parametrize(
    ("auth", "env", "key", "problem"),
    [
        ({}, {}, "scheme", "neither are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
        ({"region": "US East"}, {}, "region", "is not an AWS region name"),
        ({"header": "X-Key"}, {}, "header", "not used with scheme = aws_sigv4"),
        ({"scheme": "hmac"}, {}, "scheme", "static (a header) or aws_sigv4"),
    ],
)
def test_an_aws_auth_that_cannot_sign_is_refused_at_load(
    auth: dict[str, Any], env: dict[str, str], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        provider(auth, env)
    message = str(caught.value)
    assert message.startswith(f"config.toml: providers.textract.auth.{key}: "), message
    assert problem in message


def test_a_credentials_file_that_is_not_the_process_format_is_refused(tmp_path: Path) -> None:
    creds = tmp_path / "aws.json"
    creds.write_text("[default]\naws_access_key_id = AKIDEXAMPLE\n")  # an INI file
    with pytest.raises(ConfigError) as caught:
        provider({"credentials_file": str(creds)})
    assert str(caught.value) == (
        f"config.toml: providers.textract.auth.credentials_file: {creds}: not JSON "
        "(the credential_process format)"
    )


def botocore_signature_at(
    req: Any, when: datetime, credentials: Credentials, monkeypatch: pytest.MonkeyPatch
) -> str:
    """botocore's Authorization for `req` as sent (its URL, body and signed headers) at `when`."""
    monkeypatch.setattr(botocore_auth, "get_current_datetime", lambda: when.replace(tzinfo=None))
    ours = {"authorization", "x-amz-date", "x-amz-security-token"}
    signed = {
        k: v
        for k, v in req.headers.items()
        if k.lower() not in ours and (k.lower() == "content-type" or k.lower().startswith("x-amz-"))
    }
    request = AWSRequest(method=req.method, url=req.url, data=req.content or b"", headers=signed)
    boto = BotoCredentials(
        credentials.access_key_id, credentials.secret_access_key, credentials.session_token
    )
    botocore_auth.SigV4Auth(boto, "textract", "us-east-1").add_auth(request)
    return str(request.headers["Authorization"])


def test_a_call_is_signed_again_as_it_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Signed at build, a call can leave minutes later (a provider slot, the files of
    a result one after another); AWS refuses a signature five minutes old."""
    env = {"AWS_ACCESS_KEY_ID": KEYS.access_key_id, "AWS_SECRET_ACCESS_KEY": KEYS.secret_access_key}
    desc = provider({}, env)
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    built = build_status(desc, "job-1")
    later = NOW.replace(minute=NOW.minute + 10)
    monkeypatch.setattr(requests, "signing_time", lambda: later)
    sent = requests.signed_as_it_leaves(desc, built)
    assert sent.headers["X-Amz-Date"] == later.strftime("%Y%m%dT%H%M%SZ")
    assert sent.content == built.content and sent.url == built.url
    assert sent.headers["Authorization"] == botocore_signature_at(sent, later, KEYS, monkeypatch)
    assert sum(k.lower() == "authorization" for k in sent.headers) == 1


def test_a_redirect_hop_is_signed_for_its_own_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hop on the provider's origin carried the previous hop's signature, made
    over the previous URL: AWS answered SignatureDoesNotMatch. One to another
    host stays unsigned."""
    env = {"AWS_ACCESS_KEY_ID": KEYS.access_key_id, "AWS_SECRET_ACCESS_KEY": KEYS.secret_access_key}
    desc = provider({}, env)
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    first = build_status(desc, "job-1")
    hop = requests.signed_as_it_leaves(
        desc, requests.build_redirect(desc, first, "/elsewhere/job-1?part=2")
    )
    assert hop.url == "https://textract.us-east-1.amazonaws.com/elsewhere/job-1?part=2"
    assert hop.headers["Authorization"] == botocore_signature_at(hop, NOW, KEYS, monkeypatch)
    away = requests.signed_as_it_leaves(
        desc, requests.build_redirect(desc, first, "https://bucket.s3.amazonaws.com/o?X-Amz-S=1")
    )
    assert not {"authorization", "x-amz-security-token"} & {k.lower() for k in away.headers}


@pytest.mark.parametrize(
    "path",
    ["/jobs/a b", "/jobs/a|b", "/jobs/%C3%A9t%C3%A9", "/jobs/été", "/jobs/a%2Fb"],
)
def test_a_provider_url_is_signed_as_httpx_sends_it(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status URL a provider gave may hold what httpx percent-encodes as it sends
    (a space, `|`, `é`); AWS encodes the path it received once more. Signed from
    the URL as written, the path was encoded once too few (SignatureDoesNotMatch)."""
    import httpx

    env = {"AWS_ACCESS_KEY_ID": KEYS.access_key_id, "AWS_SECRET_ACCESS_KEY": KEYS.secret_access_key}
    table = copy.deepcopy(BASE)
    table["create"]["status_url"] = "/StatusUrl"
    table["status"] = {
        "method": "GET",
        "path": "/jobs/{job_id}",
        "use_status_url": True,
        "state": "/JobStatus",
        "state_map": {"IN_PROGRESS": "running", "SUCCEEDED": "succeeded"},
    }
    desc = parse_providers({"providers": {"textract": table}}, "config.toml", env)["textract"]
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    req = build_status(desc, "job-1", "https://textract.us-east-1.amazonaws.com" + path)
    on_the_wire = dataclasses.replace(req, url=str(httpx.URL(req.url)))
    assert req.headers["Authorization"] == botocore_signature_at(
        on_the_wire, NOW, KEYS, monkeypatch
    )


def test_a_query_byte_that_is_no_utf8_is_signed_as_that_byte() -> None:
    from shared.providers.sigv4 import _canonical_query

    assert _canonical_query("b=%ff&a=%e9t%C3%A9") == "a=%E9t%C3%A9&b=%FF"


def transcribe(env: dict[str, str]) -> Any:
    """Transcribe's shape: AWS JSON 1.1, the operation in X-Amz-Target, and the
    transcript at a pre-signed S3 link (TranscriptFileUri) on another host."""
    table = copy.deepcopy(BASE)
    table["base_url"] = "https://transcribe.us-east-1.amazonaws.com"
    table["headers"]["X-Amz-Target"] = "Transcribe.GetTranscriptionJob"
    table["auth"]["service"] = "transcribe"
    table["status"]["result_url"] = "/TranscriptionJob/Transcript/TranscriptFileUri"
    table["result"] = {"source": "url", "format": "json", "follow_redirects": True}
    return parse_providers({"providers": {"transcribe": table}}, "config.toml", env)["transcribe"]


PRESIGNED = (
    "https://aws-transcribe-us-east-1-prod.s3.us-east-1.amazonaws.com/123/job/asrOutput.json"
    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261205T091011Z&X-Amz-SignedHeaders=host"
    "&X-Amz-Expires=900&X-Amz-Credential=ASIA%2F20261205%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Signature=abc"
)


def test_a_presigned_link_on_another_host_gets_no_x_amz_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S3 refuses a pre-signed request carrying an x-amz-* header its link did not
    sign (403 "There were headers present in the request which were not signed"):
    the description's X-Amz-Target, or the X-Amz-Date of the hop that redirected."""
    from shared.providers.facts import StatusFact

    env = {"AWS_ACCESS_KEY_ID": KEYS.access_key_id, "AWS_SECRET_ACCESS_KEY": KEYS.secret_access_key}
    desc = transcribe(env)
    monkeypatch.setattr(requests, "signing_time", lambda: NOW)
    status = StatusFact(status_code=200, raw_state="COMPLETED", result_url=PRESIGNED)
    [fetch] = requests.build_result_requests(desc, "job", status)
    assert fetch.url == PRESIGNED
    assert not [k for k in fetch.headers if k.lower().startswith("x-amz-")], fetch.headers
    assert "authorization" not in {k.lower() for k in fetch.headers}
    # a redirect from the provider's own origin to the link: the signed hop's headers dropped
    own = build_status(desc, "job")
    hop = requests.signed_as_it_leaves(desc, requests.build_redirect(desc, own, PRESIGNED))
    assert not [k for k in hop.headers if k.lower().startswith("x-amz-")], hop.headers
    assert "authorization" not in {k.lower() for k in hop.headers}
