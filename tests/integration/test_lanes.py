"""Provider calls go out on lanes: connections per slot, reused, bounded per process."""

from __future__ import annotations

import asyncio
import base64
import gzip
import ipaddress
import socket
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reconciler.daemon import run_reconciler
from reconciler.lanes import Lane, Lanes, tls_context
from shared.providers import ConfigError
from shared.serve import serve_app
from shared.settings import load_settings


async def peer(request: Request) -> JSONResponse:
    """The client's address as the server sees it: one per TCP connection."""
    assert request.client is not None
    return JSONResponse({"port": request.client.port})


async def cookies(request: Request) -> JSONResponse:
    """What Cookie header came in; answers with a Set-Cookie every time."""
    answer = JSONResponse({"cookie": request.headers.get("cookie")})
    answer.set_cookie("session", "from-an-earlier-answer")
    return answer


async def echo_headers(request: Request) -> JSONResponse:
    """Every header as sent, names lowered, repeats kept."""
    return JSONResponse([[k.decode(), v.decode()] for k, v in request.headers.raw])


async def moved(_: Request) -> Response:
    return Response(status_code=302, headers={"location": "/peer"})


async def gzipped(_: Request) -> Response:
    """Compressed although the client asked for identity."""
    return Response(GZIPPED, headers={"content-encoding": "gzip"})


GZIPPED = gzip.compress(b'{"state": "running"}')
APP = Starlette(
    routes=[
        Route("/peer", peer),
        Route("/cookies", cookies),
        Route("/headers", echo_headers),
        Route("/moved", moved),
        Route("/gzipped", gzipped),
    ]
)


async def port_of(lanes: Lanes, provider: str, url: str) -> int:
    async with lanes.lane(provider) as lane:
        return int((await lane.call("GET", f"{url}/peer")).json()["port"])


async def test_calls_one_after_another_reuse_one_lane_and_its_connection() -> None:
    async with serve_app(APP) as url, Lanes(8) as lanes:
        ports = {await port_of(lanes, "a", url) for _ in range(5)}
    assert len(ports) == 1  # the lane just given back goes out next, connection warm


async def test_calls_at_once_each_get_a_lane_of_their_own() -> None:
    async with serve_app(APP) as url, Lanes(8) as lanes:
        held: list[object] = []
        async with lanes.lane("a") as first, lanes.lane("a") as second:
            held += [first, second]
            assert first is not second  # a slot never waits for another's connection
        assert len({await port_of(lanes, "a", url) for _ in range(3)}) == 1
        async with lanes.lane("b") as other:
            assert other not in held  # providers do not share lanes


async def test_all_providers_together_stay_within_max_in_flight() -> None:
    async with Lanes(1) as lanes:
        entered = asyncio.Event()
        release = asyncio.Event()

        async def hold() -> None:
            async with lanes.lane("a"):
                entered.set()
                await release.wait()

        holder = asyncio.ensure_future(hold())
        await entered.wait()
        waiting = asyncio.ensure_future(_enter(lanes, "b"))
        for _ in range(5):
            await asyncio.sleep(0)  # let it run up to its wait
        assert not waiting.done()  # another provider's call waits for the one in flight
        release.set()
        await asyncio.wait_for(waiting, 5)
        await holder


async def _enter(lanes: Lanes, provider: str) -> None:
    async with lanes.lane(provider):
        pass


async def test_closing_closes_every_lane_made() -> None:
    lanes = Lanes(4)
    async with lanes.lane("a") as one, lanes.lane("b") as two:
        pass
    await lanes.aclose()
    assert one.is_closed and two.is_closed


async def test_a_lane_is_given_back_when_its_call_is_cancelled() -> None:
    async with Lanes(8) as lanes:
        taken: list[object] = []
        started = asyncio.Event()

        async def call() -> None:
            async with lanes.lane("a") as lane:
                taken.append(lane)
                started.set()
                await asyncio.Event().wait()

        task = asyncio.ensure_future(call())
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        async with lanes.lane("a") as again:
            assert again is taken[0]


async def test_a_cookie_an_answer_sets_is_never_sent_with_a_later_call() -> None:
    async with serve_app(APP) as url, Lanes(8) as lanes:
        for _ in range(2):
            async with lanes.lane("a") as lane:
                answer = await lane.call("GET", f"{url}/cookies")
            assert answer.headers["set-cookie"].startswith("session=")
            assert answer.json() == {"cookie": None}  # what the evidence records is what left


async def test_a_call_carries_the_defaults_unless_its_description_sets_them() -> None:
    async with serve_app(APP) as url, Lane() as lane:
        plain = (await lane.call("GET", f"{url}/headers")).json()
        custom = (
            await lane.call(
                "GET", f"{url}/headers", headers={"user-agent": "acme-sdk/2", "X-A": "1"}
            )
        ).json()
    assert ["accept-encoding", "identity"] in plain  # bodies byte-exact for digests
    assert ["user-agent", "jobwarden-reconciler"] in plain
    agents = [v for k, v in custom if k == "user-agent"]
    assert agents == ["acme-sdk/2"]  # replaced whatever its case, never sent twice
    assert ["x-a", "1"] in custom


async def test_a_redirect_is_answered_not_followed() -> None:
    async with serve_app(APP) as url, Lane() as lane:
        answer = await lane.call("GET", f"{url}/moved")
    assert answer.status_code == 302  # a contract change to record, not to follow
    assert answer.headers["location"] == "/peer"


async def test_a_compressed_answer_is_read_decoded_as_httpx_reads_it() -> None:
    async with serve_app(APP) as url, Lane() as lane:
        answer = await lane.call("GET", f"{url}/gzipped")
    assert answer.content == gzip.decompress(GZIPPED)
    assert str(answer.url) == f"{url}/gzipped"


async def test_credentials_in_a_url_go_as_basic_authorization_unless_the_call_sets_one() -> None:
    async with serve_app(APP) as url, Lane() as lane:
        with_user = url.replace("http://", "http://us%40er:p%3Ass@")
        sent = dict((await lane.call("GET", f"{with_user}/headers")).json())
        own = dict(
            (
                await lane.call(
                    "GET", f"{with_user}/headers", headers={"Authorization": "Bearer t"}
                )
            ).json()
        )
    assert sent["authorization"] == "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert own["authorization"] == "Bearer t"


async def test_a_refused_connection_is_httpx_s_error_naming_its_request() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once the probe closes
    async with Lane() as lane:
        with pytest.raises(httpx.ConnectError) as refused:
            await lane.call("GET", f"http://127.0.0.1:{port}/x", phase_timeout=2)
    assert str(refused.value.request.url) == f"http://127.0.0.1:{port}/x"


async def test_a_closed_lane_opens_nothing() -> None:
    lane = Lane()
    await lane.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await lane.call("GET", "http://127.0.0.1:9/x")


def _self_signed(directory: Path) -> ssl.SSLContext:
    """A server context whose certificate no public authority signed (127.0.0.1, 1 day;
    the certificate is `directory`/cert.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
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


async def test_a_lane_refuses_a_certificate_no_authority_signed(tmp_path: Path) -> None:
    # the one TLS context all lanes share still checks what httpx's client checked
    handshakes: list[bool] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handshakes.append(True)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=_self_signed(tmp_path))
    port = server.sockets[0].getsockname()[1]
    try:
        async with Lanes(8) as lanes, lanes.lane("a") as first, lanes.lane("a") as second:
            for lane in (first, second):
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    await lane.call("GET", f"https://127.0.0.1:{port}/v1/jobs/j1")
    finally:
        server.close()
        await server.wait_closed()
    assert not handshakes  # no request was ever answered over the unverified connection


async def test_lanes_made_after_the_first_build_no_tls_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each build loads the authorities (about 40 ms of CPU), which stalled the loop per new lane
    built: list[object] = []
    real = httpx.create_ssl_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    tls_context.cache_clear()
    try:
        lanes = [Lane() for _ in range(5)]
    finally:
        tls_context.cache_clear()  # later tests build their own, unpatched
    for lane in lanes:
        await lane.aclose()
    assert len(built) == 1
    assert built[0] == {"trust_env": False}


async def _tls_answering(directory: Path) -> asyncio.Server:
    """A TLS server on loopback, self-signed, answering every request with a small JSON."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"state": "ok"}'
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
        writer.write(head.encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0, ssl=_self_signed(directory))


async def test_a_lane_trusts_the_authorities_of_provider_ca_file(tmp_path: Path) -> None:
    server = await _tls_answering(tmp_path)
    port = server.sockets[0].getsockname()[1]
    try:
        async with Lane(authorities=str(tmp_path / "cert.pem")) as lane:
            answer = await lane.call("GET", f"https://127.0.0.1:{port}/v1/jobs/j1")
        assert (answer.status_code, answer.json()) == (200, {"state": "ok"})
        async with Lane() as plain:  # the other lanes of the process trust certifi's only
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await plain.call("GET", f"https://127.0.0.1:{port}/v1/jobs/j1")
    finally:
        server.close()
        await server.wait_closed()


async def test_a_trusted_certificate_for_another_host_name_is_refused(tmp_path: Path) -> None:
    # the certificate names 127.0.0.1; asked for "localhost", the lane refuses it
    server = await _tls_answering(tmp_path)
    port = server.sockets[0].getsockname()[1]
    try:
        async with Lane(authorities=str(tmp_path / "cert.pem")) as lane:
            with pytest.raises(httpx.ConnectError, match=r"[Hh]ostname mismatch"):
                await lane.call("GET", f"https://localhost:{port}/v1/jobs/j1")
    finally:
        server.close()
        await server.wait_closed()


async def test_a_provider_ca_file_that_cannot_be_read_stops_the_reconciler_at_start(
    tmp_path: Path,
) -> None:
    settings = load_settings(env={"JW_PROVIDER_CA_FILE": str(tmp_path / "missing.pem")})
    assert settings.provider_ca_file == str(tmp_path / "missing.pem")
    with pytest.raises(ConfigError, match=r"provider_ca_file .*missing\.pem.* cannot load it"):
        await run_reconciler(settings, "postgresql://nobody@127.0.0.1:1/never")
    (tmp_path / "not-a-cert.pem").write_text("not a certificate\n")
    garbled = load_settings(env={"JW_PROVIDER_CA_FILE": str(tmp_path / "not-a-cert.pem")})
    with pytest.raises(ConfigError, match="cannot load it"):
        await run_reconciler(garbled, "postgresql://nobody@127.0.0.1:1/never")
