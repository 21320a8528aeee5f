"""A real receiver (uvicorn on loopback) serving the console, for the console tests.

The receiver's pool runs as jobwarden_receiver, so the tests also prove that
migration 014's grants are enough for every console page; actions are recorded
on the console's own login (`console_login`: a login role of this run in
jobwarden_operator, as JW_CONSOLE_DATABASE_URL), since the receiver's role may
not decide. The setup (escalating an operation like the reconciler would) uses
the superuser connection `db`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from receiver.api import api_routes
from receiver.main import run_receiver
from shared import ledger
from shared.db.connect import connect
from shared.ledger import decisions
from shared.ledger.states import LocalState
from shared.settings import Settings
from tests.integration.agent_support import sim_settings
from tests.support import drive, submit

# How long a started receiver has to answer /healthz (it takes well under a second).
START_TIMEOUT_SECONDS = 30.0
CSRF_FIELD = re.compile(r'name="csrf" value="([0-9a-f]{64})"')
SEEN_FIELD = re.compile(r'name="seen" value="([0-9]+)"')


@dataclass(frozen=True)
class Receiver:
    base: str

    def url(self, path: str) -> str:
        return self.base + path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def as_receiver(db_url: str) -> str:
    """The test database's URL with the session role set to jobwarden_receiver."""
    return db_url + ("&" if "?" in db_url else "?") + "role=jobwarden_receiver"


def as_login(url: str, role: str) -> str:
    """`url` with its user replaced by `role` (no password: the test server trusts it).

    Host, port and query stay as they are: an embedded server is reached by a
    Unix socket named in the query (`?host=/…/.pgdata`), and a URL rebuilt
    with a default host would reach another server.
    """
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))


@contextlib.asynccontextmanager
async def console_login(admin_url: str, db_url: str) -> AsyncIterator[str]:
    """A login role in jobwarden_operator, unique to this run (roles are cluster-wide),
    as the console's URL for the test database; dropped afterwards."""
    name = f"jwcon_{uuid.uuid4().hex[:12]}"
    admin = await connect(admin_url)
    try:
        if not await admin.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
            pytest.skip("the test server's admin role is not a superuser: cannot create roles")
        await admin.execute(f'CREATE ROLE "{name}" LOGIN IN ROLE jobwarden_operator')
        yield as_login(db_url, name)
    finally:
        await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


@contextlib.asynccontextmanager
async def running_receiver(
    db_url: str, console_url: str = "", base: Settings | None = None
) -> AsyncIterator[Receiver]:
    """The receiver as jobwarden_receiver; `console_url`: JW_CONSOLE_DATABASE_URL."""
    port = free_port()
    settings = replace(
        base or sim_settings(),
        receiver_host="127.0.0.1",
        receiver_port=port,
        console_database_url=console_url,
    )
    notify, restore = _notify_socket()
    service = asyncio.create_task(
        run_receiver(
            settings, as_receiver(db_url), make_routes=lambda pool: api_routes(settings, pool)
        )
    )
    receiver = Receiver(f"http://127.0.0.1:{port}")
    try:
        await _listening(service, notify)
        yield receiver
    finally:
        service.cancel()
        await asyncio.gather(service, return_exceptions=True)
        notify.close()
        restore()


def _notify_socket() -> tuple[socket.socket, Callable[[], None]]:
    """A datagram socket standing in for systemd's, NOTIFY_SOCKET pointing at it.

    run_receiver sends READY=1 once its socket accepts connections: the signal
    to wait for. Returns the socket and what puts the environment back.
    """
    folder = tempfile.mkdtemp(prefix="jw-notify-")
    path = os.path.join(folder, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    before = os.environ.get("NOTIFY_SOCKET")
    os.environ["NOTIFY_SOCKET"] = path

    def restore() -> None:
        if before is None:
            os.environ.pop("NOTIFY_SOCKET", None)
        else:
            os.environ["NOTIFY_SOCKET"] = before
        shutil.rmtree(folder, ignore_errors=True)

    return sock, restore


async def _listening(service: asyncio.Task[None], notify: socket.socket) -> None:
    """Until the receiver says READY=1; what stopped it, if it stopped first."""
    ready = asyncio.ensure_future(asyncio.get_running_loop().sock_recv(notify, 64))
    try:
        async with asyncio.timeout(START_TIMEOUT_SECONDS):
            await asyncio.wait({ready, service}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ready.cancel()
    if service.done():
        service.result()  # raises what stopped it
        raise AssertionError("the receiver stopped before it listened")
    assert ready.result() == b"READY=1"


async def escalated(db: Any, reason: str = "same token, two job ids") -> str:
    """An operation in needs_attention with an open escalation, as the reconciler leaves it."""
    op_id = await submit(db)
    await drive(db, op_id, LocalState.NEEDS_ATTENTION)
    op = await ledger.load_operation(db, op_id)
    await decisions.escalate(db, op, LocalState.NEEDS_ATTENTION, reason, seen=2)
    return op_id


def action_form(html: str) -> dict[str, str]:
    """What an action form carries besides its buttons: the CSRF token, and the
    operation's move count the page was shown at (`seen`)."""
    seen = SEEN_FIELD.search(html)
    assert seen, "no action form in the page"
    return {"csrf": csrf_of(html), "seen": seen.group(1)}


def csrf_of(html: str) -> str:
    match = CSRF_FIELD.search(html)
    assert match, "no CSRF field in the page"
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, receiver: Receiver, token: str) -> httpx.Response:
    """The sign-in form, then the POST of the token; returns the POST's answer."""
    form = await client.get(receiver.url("/console/signin"))
    assert form.status_code == 200, form.text
    return await client.post(
        receiver.url("/console/signin"),
        data={"csrf": csrf_of(form.text), "token": token},
    )
