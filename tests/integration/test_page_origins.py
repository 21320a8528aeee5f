"""The credential goes to the origins the operator named, never to a host on
another port, with the real reconciler and real loopback servers (one of them
TLS, as a credential goes to an `auth.extra_hosts` host only over https).

Each failed before its fix: `auth.extra_hosts = ["localhost"]` gave our token
to https://localhost on any port, so a crawl page whose `next` named
https://localhost:<another port> was fetched with it, and so was a result's
redirect there: a host was all that was compared, and another port on a host
is another server, whoever runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared.ledger.states import LocalState
from tests.fixtures_providers.rig import preset_rig, simulator_shaped
from tests.fixtures_providers.shapes import CRAWL_DOCUMENTS, CrawlFixture, firecrawl_crawl

S = LocalState
FC_ENV = {"FC_TOKEN": "fc-test"}
SIM_ENV = {"JW_SIM_API_KEY": "sim-key"}
ENDS = {S.SUCCEEDED, S.FAILED, S.RESULT_UNAVAILABLE, S.NEEDS_ATTENTION}


def _self_signed(directory: Path) -> ssl.SSLContext:
    """A server context for localhost (and 127.0.0.1), its certificate
    `directory`/cert.pem, which the reconciler is told to trust."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


@dataclass
class TlsMirror:
    """An https server on another port of localhost: what it was asked, with which
    Authorization header, answering the rest of a crawl (a JSON page, which is also an
    empty simulator result) to anything."""

    seen: list[tuple[str, str | None]] = field(default_factory=list)

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            writer.close()
            return
        headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        self.seen.append((head[0].split(" ")[1], auth))
        rest = {"status": "completed", "total": 25, "data": CRAWL_DOCUMENTS[10:], "items": []}
        body = json.dumps(rest)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n{body}".encode()
        )
        await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def tls_mirror(directory: Path, port: int = 0) -> AsyncIterator[tuple[int, TlsMirror, str]]:
    """The mirror listening (on `port`, else a free one); yields its port, itself
    and the PEM file to trust. A port that cannot be bound skips the test."""
    mirror = TlsMirror()
    context = _self_signed(directory)
    try:
        server = await asyncio.start_server(mirror.answer, "127.0.0.1", port, ssl=context)
    except OSError as exc:  # 443: not root, or in use
        pytest.skip(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}")
    try:
        yield server.sockets[0].getsockname()[1], mirror, str(directory / "cert.pem")
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("named", ["bare", "port"])
async def test_a_next_page_on_another_port_of_an_extra_host_never_gets_the_credential(
    pool: Any, tmp_path: Path, named: str
) -> None:
    """Page 1's `next` names https://localhost:<the mirror's port>. With
    `auth.extra_hosts = ["localhost"]` (https on 443) that is another origin: not
    fetched, result_unavailable, the reason as for any other host (before: fetched,
    our token with it). Named with its port (`localhost:<port>`), it is the
    operator's: fetched with our token."""
    async with tls_mirror(tmp_path) as (port, mirror, authorities):
        fx = CrawlFixture(foreign_next=f"https://localhost:{port}/v1/crawl/x?skip=10")
        described = firecrawl_crawl()
        entry = "localhost" if named == "bare" else f"localhost:{port}"
        described["auth"]["extra_hosts"] = [entry]
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="fc",
            env=FC_ENV,
            overrides=described,
            authorities=authorities,
        ) as r:
            op_id = await r.submit({"url": "https://docs.example"})
            end = await r.settle(op_id, ENDS)
            calls = await r.calls(op_id, "result")
            escalation = await r.escalation(op_id)
    if named == "port":
        assert end is S.SUCCEEDED
        assert mirror.seen == [("/v1/crawl/x?skip=10", "Bearer fc-test")]
        return
    assert mirror.seen == []
    assert end is S.RESULT_UNAVAILABLE
    assert len(calls) == 1  # page 1 only: the refused page never left
    reason = escalation["reason"]
    assert (
        f"cannot request page 2 of the result: the next page's URL is on "
        f"https://localhost:{port}, not the provider's origin ({r.url})" in reason
    ), reason
    assert "name the host in result.allowed_hosts" in reason


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ("localhost", "https://localhost/v1/crawl/x?skip=10"),
        ("localhost", "https://LocalHost:443/v1/crawl/x?skip=10"),
        ("localhost:443", "https://localhost/v1/crawl/x?skip=10"),
    ],
)
async def test_a_next_page_on_an_extra_hosts_default_port_gets_the_credential_however_spelt(
    pool: Any, tmp_path: Path, entry: str, named: str
) -> None:
    """https://h and https://h:443 are one origin, and `h` and `h:443` name it
    alike: the page is fetched with our token. (The mirror listens on 443 itself,
    so this runs only where loopback's 443 can be bound.)"""
    async with tls_mirror(tmp_path, 443) as (_, mirror, authorities):
        fx = CrawlFixture(foreign_next=named)
        described = firecrawl_crawl()
        described["auth"]["extra_hosts"] = [entry]
        async with preset_rig(
            pool,
            tmp_path,
            fx.app(),
            preset=None,
            name="fc",
            env=FC_ENV,
            overrides=described,
            authorities=authorities,
        ) as r:
            op_id = await r.submit({"url": "https://docs.example"})
            end = await r.settle(op_id, ENDS)
    assert end is S.SUCCEEDED
    assert mirror.seen == [("/v1/crawl/x?skip=10", "Bearer fc-test")]


def _redirecting(location: str) -> Any:
    """The simulator preset's shape: a job done at once, its result a 302 to `location`."""

    async def create(_request: Request) -> JSONResponse:
        return JSONResponse({"job_id": "job-1", "state": "queued"}, status_code=202)

    async def status(request: Request) -> JSONResponse:
        result_url = f"{request.base_url}results/job-1"
        return JSONResponse({"job_id": "job-1", "state": "succeeded", "result_url": result_url})

    async def result(_request: Request) -> Response:
        return Response(status_code=302, headers={"Location": location})

    return simulator_shaped(create, status, result)


@pytest.mark.parametrize(
    ("named", "credential"), [("bare", None), ("port", "Bearer sim-key")], ids=["bare", "port"]
)
async def test_a_redirect_to_another_port_of_an_extra_host_drops_the_credential(
    pool: Any, tmp_path: Path, named: str, credential: str | None
) -> None:
    """A result fetch answered 302 to https://localhost:<the mirror's port>: with
    `auth.extra_hosts = ["localhost"]` the hop is followed without our token
    (before: with it); with `localhost:<port>` named, with it."""
    async with tls_mirror(tmp_path) as (port, mirror, authorities):
        extra = "localhost" if named == "bare" else f"localhost:{port}"
        overrides = {
            "auth": {"extra_hosts": [extra]},
            "result": {"follow_redirects": True, "expect": {"checksum": "none"}},
        }
        app = _redirecting(f"https://localhost:{port}/blob?sig=x")
        async with preset_rig(
            pool,
            tmp_path,
            app,
            preset="simulator",
            env=SIM_ENV,
            overrides=overrides,
            authorities=authorities,
        ) as r:
            op_id = await r.submit({})
            end = await r.settle(op_id, ENDS)
    assert end is S.SUCCEEDED
    assert mirror.seen and set(mirror.seen) == {("/blob?sig=x", credential)}
