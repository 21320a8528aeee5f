"""bench/pgproxy.py against the real server: passthrough, counting, and each fault.

What asyncpg sends (observed through the proxy, asyncpg 0.30):
- `execute(sql)` without arguments: one simple Query `Q`;
- the first `fetchval(sql, arg)` / `execute(sql, arg)` of a query: Parse (named
  `__asyncpg_stmt_N__`), Describe, Flush, then Bind/Execute/Sync; later calls
  reuse the cached statement: Bind/Execute/Sync only;
- `transaction().start()` / `.commit()`: `Q 'BEGIN;'` / `Q 'COMMIT;'`;
- `connect()` itself runs no statement.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
import pytest_asyncio

from bench import pgproxy
from bench.pgproxy import Action, Fault, PgProxy, _ReadyScanner

# asyncpg reports a connection that vanished mid-operation either way.
LOST = (asyncpg.ConnectionDoesNotExistError, ConnectionError)
# An upper bound for explicit signals that should arrive in milliseconds.
SIGNAL_TIMEOUT = 10.0
INSERT = "INSERT INTO pgproxy_t (id) VALUES ($1)"


@pytest_asyncio.fixture
async def proxy(db_url: str) -> AsyncIterator[PgProxy]:
    direct = await asyncpg.connect(db_url)
    try:
        await direct.execute("CREATE TABLE pgproxy_t (id int PRIMARY KEY)")
    finally:
        await direct.close()
    async with PgProxy.from_url(db_url) as p:
        yield p


async def ids(db_url: str) -> list[int]:
    """Committed rows, read on a direct connection (not through the proxy)."""
    direct = await asyncpg.connect(db_url)
    try:
        return [r["id"] for r in await direct.fetch("SELECT id FROM pgproxy_t ORDER BY id")]
    finally:
        await direct.close()


async def proxied(proxy: PgProxy, db_url: str) -> Any:
    return await asyncpg.connect(proxy.url_for(db_url))


async def discard(conn: Any) -> None:
    if not conn.is_closed():
        await conn.close()


async def fired(proxy: PgProxy) -> None:
    await asyncio.wait_for(proxy.fired.wait(), SIGNAL_TIMEOUT)


def sqls(proxy: PgProxy) -> list[str]:
    return [s.sql for s in proxy.statements]


# -- passthrough -------------------------------------------------------------


async def test_passthrough_with_url_for(proxy: PgProxy, db_url: str) -> None:
    conn = await proxied(proxy, db_url)
    try:
        assert await conn.fetchval("SELECT 40 + $1::int", 2) == 42
        rows = await conn.fetch("SELECT g FROM generate_series(1, 5000) g")
        assert [r["g"] for r in rows] == list(range(1, 5001))
    finally:
        await conn.close()
    assert proxy.count == 2


async def test_client_asking_for_ssl_continues_in_plaintext(proxy: PgProxy, db_url: str) -> None:
    conn = await asyncpg.connect(
        host=proxy.host,
        port=proxy.port,
        user="postgres",
        database=urlsplit(db_url).path.lstrip("/"),
        ssl="prefer",
    )
    try:
        assert await conn.fetchval("SELECT 1") == 1
        query = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
        assert await conn.fetchval(query) is False
    finally:
        await conn.close()


async def test_url_for_points_at_the_proxy_and_disables_ssl() -> None:
    async with PgProxy("127.0.0.1", 5432) as proxy:
        at = f"127.0.0.1:{proxy.port}"
        url = "postgresql://u:p%40ss@db.example:6543/app?sslmode=require&application_name=x&host=h"
        expected = f"postgresql://u:p%40ss@{at}/app?application_name=x&sslmode=disable"
        assert proxy.url_for(url) == expected
        assert proxy.url_for("postgres://db/app") == f"postgres://{at}/app?sslmode=disable"
        spaced = "postgresql://h/app?options=-c%20search_path%3Dx&application_name="
        expected = (
            f"postgresql://{at}/app?options=-c%20search_path%3Dx&application_name=&sslmode=disable"
        )
        assert proxy.url_for(spaced) == expected


def test_from_url_reads_host_and_port_from_netloc_or_query() -> None:
    assert PgProxy.from_url("postgresql://u@db:6543/x")._upstream == ("db", 6543)
    assert PgProxy.from_url("postgresql:///x?host=db&port=7")._upstream == ("db", 7)
    unix = PgProxy.from_url("postgresql:///x?host=/var/run/postgresql")
    assert unix._upstream == ("/var/run/postgresql", 5432)


async def test_a_server_reached_by_its_unix_socket_is_proxied_too(db: Any, db_url: str) -> None:
    """An embedded server listens only on a Unix socket: the proxy forwards there."""
    if not await db.fetchval(
        "SELECT coalesce(host(inet_server_addr()), '') IN ('', '127.0.0.1', '::1')"
    ):
        pytest.skip("the test server is not on this machine: its socket path is not ours")
    directories = await db.fetchval("SHOW unix_socket_directories")
    port = int(await db.fetchval("SHOW port"))
    found = [
        d.strip() for d in directories.split(",") if Path(d.strip(), f".s.PGSQL.{port}").exists()
    ]
    if not found:
        pytest.skip("the test server has no Unix socket on this machine")
    parts = urlsplit(db_url)
    name = parts.path.lstrip("/")
    async with PgProxy(found[0], port) as proxy:
        try:
            conn = await asyncpg.connect(
                host=proxy.host,
                port=proxy.port,
                user=parts.username or "postgres",
                password=parts.password,
                database=name,
            )
        except (asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InvalidPasswordError):
            pytest.skip("the server's Unix socket does not let this user in (peer auth)")
        try:
            assert await conn.fetchval("SELECT current_database()") == name
            # the session really came over the socket (no client address)
            assert await conn.fetchval("SELECT inet_client_addr()") is None
        finally:
            await conn.close()


async def raw_startup(proxy: PgProxy, db_url: str) -> tuple[Any, Any]:
    """A hand-written client: GSSENCRequest, SSLRequest, then StartupMessage."""
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    for code in (80877104, 80877103):
        writer.write((8).to_bytes(4, "big") + code.to_bytes(4, "big"))
        await writer.drain()
        assert await reader.readexactly(1) == b"N"
    dbname = urlsplit(db_url).path.lstrip("/").encode()
    params = b"user\0postgres\0database\0" + dbname + b"\0\0"
    body = (196608).to_bytes(4, "big") + params
    writer.write((len(body) + 4).to_bytes(4, "big") + body)
    await writer.drain()
    await read_until_ready(reader)
    return reader, writer


async def read_until_ready(reader: Any) -> list[tuple[bytes, bytes]]:
    messages: list[tuple[bytes, bytes]] = []
    while True:
        kind = await reader.readexactly(1)
        length = int.from_bytes(await reader.readexactly(4), "big")
        messages.append((kind, await reader.readexactly(length - 4)))
        if kind == b"Z":
            return messages


def message(kind: bytes, body: bytes) -> bytes:
    return kind + (len(body) + 4).to_bytes(4, "big") + body


SYNC = message(b"S", b"")


def extended(sql: str) -> bytes:
    """Parse/Bind/Execute of `sql` on the unnamed statement and portal, no Sync."""
    parse = message(b"P", b"\0" + sql.encode() + b"\0\0\0")
    bind = message(b"B", b"\0\0" + b"\0\0" + b"\0\0" + b"\0\0")
    return parse + bind + message(b"E", b"\0" + b"\0\0\0\0")


def query_message(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\0")


async def test_raw_client_split_and_coalesced_messages(proxy: PgProxy, db_url: str) -> None:
    reader, writer = await raw_startup(proxy, db_url)
    try:
        for byte in query_message("SELECT 42"):  # one byte per write: split across reads
            writer.write(bytes([byte]))
            await writer.drain()
        rows = [body for kind, body in await read_until_ready(reader) if kind == b"D"]
        assert rows == [b"\x00\x01\x00\x00\x00\x0242"]
        writer.write(query_message("SELECT 1") + query_message("SELECT 2"))  # one write
        await writer.drain()
        await read_until_ready(reader)
        await read_until_ready(reader)
        assert sqls(proxy) == ["SELECT 42", "SELECT 1", "SELECT 2"]
        writer.write(message(b"X", b""))
        await writer.drain()
        assert await reader.read() == b""  # the server ends the session, the proxy follows
    finally:
        writer.close()
        await writer.wait_closed()


def test_ready_scanner_finds_z_at_every_split() -> None:
    def msg(kind: bytes, payload: bytes) -> bytes:
        return kind + (len(payload) + 4).to_bytes(4, "big") + payload

    stream = msg(b"D", b"ZZZZ\x00Z") + msg(b"Z", b"I") + msg(b"C", b"") + msg(b"Z", b"T")
    expected = [len(msg(b"D", b"ZZZZ\x00Z")) + 6, len(stream)]
    for cut in range(len(stream) + 1):
        scanner = _ReadyScanner()
        first, second = stream[:cut], stream[cut:]
        ends = scanner.feed(first) + [cut + e for e in scanner.feed(second)]
        assert ends == expected, cut
    scanner = _ReadyScanner()
    bytewise = [i + e for i in range(len(stream)) for e in scanner.feed(stream[i : i + 1])]
    assert bytewise == expected


# -- counting ----------------------------------------------------------------


async def test_counts_query_and_execute_with_their_sql(proxy: PgProxy, db_url: str) -> None:
    conn = await proxied(proxy, db_url)
    try:
        await conn.execute("SELECT 1")  # Q
        assert await conn.fetchval("SELECT $1::int", 1) == 1  # P D H, then B E S
        assert await conn.fetchval("SELECT $1::int", 2) == 2  # cached: B E S
        tx = conn.transaction()
        await tx.start()  # Q BEGIN;
        await conn.execute(INSERT, 1)  # P D H, then B E S
        await tx.commit()  # Q COMMIT;
    finally:
        await conn.close()
    assert sqls(proxy) == [
        "SELECT 1",
        "SELECT $1::int",
        "SELECT $1::int",
        "BEGIN;",
        INSERT,
        "COMMIT;",
    ]
    assert [s.index for s in proxy.statements] == [1, 2, 3, 4, 5, 6]
    assert len({s.connection for s in proxy.statements}) == 1
    assert proxy.count == 6
    proxy.reset()
    assert (proxy.count, proxy.statements) == (0, [])


async def test_unnamed_statement_is_overwritten_by_each_parse(proxy: PgProxy, db_url: str) -> None:
    # asyncpg names its statements; a raw client uses the unnamed one twice.
    reader, writer = await raw_startup(proxy, db_url)
    try:
        for sql in ("SELECT 'one'", "SELECT 'two'"):
            writer.write(extended(sql) + SYNC)
            await writer.drain()
            await read_until_ready(reader)
    finally:
        writer.close()
        await writer.wait_closed()
    assert sqls(proxy) == ["SELECT 'one'", "SELECT 'two'"]


# -- faults ------------------------------------------------------------------


async def test_drop_before_insert_in_a_transaction(proxy: PgProxy, db_url: str) -> None:
    conn = await proxied(proxy, db_url)
    try:
        tx = conn.transaction()
        await tx.start()  # 1
        await conn.execute(INSERT, 1)  # 2
        proxy.arm(Fault(at=3, action="drop_before"))
        with pytest.raises(LOST):
            await conn.execute(INSERT, 2)  # 3: never reaches the server
        await fired(proxy)
    finally:
        await discard(conn)
    assert proxy.fired_statement is not None
    assert (proxy.fired_statement.index, proxy.fired_statement.sql) == (3, INSERT)
    assert await ids(db_url) == []  # the open transaction died with the connection
    again = await proxied(proxy, db_url)
    try:
        assert await again.fetchval("SELECT 7") == 7
    finally:
        await again.close()


async def test_drop_after_autocommit_insert_takes_effect(proxy: PgProxy, db_url: str) -> None:
    conn = await proxied(proxy, db_url)
    try:
        proxy.arm(Fault(at=1, action="drop_after"))
        with pytest.raises(LOST):
            await conn.execute(INSERT, 5)
        await fired(proxy)
    finally:
        await discard(conn)
    assert proxy.ready_missed is False  # the server's ReadyForQuery was seen (and withheld)
    assert await ids(db_url) == [5]


@pytest.mark.parametrize(("action", "expected"), [("drop_after", [1]), ("drop_before", [])])
async def test_drop_at_commit(
    proxy: PgProxy, db_url: str, action: Action, expected: list[int]
) -> None:
    conn = await proxied(proxy, db_url)
    try:
        tx = conn.transaction()
        await tx.start()  # 1
        await conn.execute(INSERT, 1)  # 2
        proxy.arm(Fault(at=3, action=action))
        with pytest.raises(LOST):
            await tx.commit()  # 3
        await fired(proxy)
    finally:
        await discard(conn)
    assert proxy.fired_statement is not None and proxy.fired_statement.sql == "COMMIT;"
    assert await ids(db_url) == expected


async def test_kill_calls_back_once_at_the_statement(proxy: PgProxy, db_url: str) -> None:
    calls: list[int] = []
    proxy.arm(Fault(at=2, action="kill", kill=lambda: calls.append(proxy.count)))
    conn = await proxied(proxy, db_url)
    try:
        await conn.execute("SELECT 1")  # 1
        with pytest.raises(LOST):
            await conn.execute(INSERT, 1)  # 2: killed before it is forwarded
        await fired(proxy)
    finally:
        await discard(conn)
    assert calls == [2]
    assert await ids(db_url) == []
    again = await proxied(proxy, db_url)
    try:
        await again.execute(INSERT, 2)
        await again.execute(INSERT, 3)
    finally:
        await again.close()
    assert calls == [2]  # one fault fires once
    assert await ids(db_url) == [2, 3]


async def test_match_counts_only_after_after_match(proxy: PgProxy, db_url: str) -> None:
    proxy.arm(
        Fault(match=re.compile(r"^INSERT"), after_match=re.compile("gate"), action="drop_before")
    )
    conn = await proxied(proxy, db_url)
    try:
        await conn.execute(INSERT, 1)  # matches, but the gate is still closed
        await conn.execute("SELECT 'gate'")  # opens the gate
        with pytest.raises(LOST):
            await conn.execute(INSERT, 2)
        await fired(proxy)
    finally:
        await discard(conn)
    assert proxy.fired_statement is not None and proxy.fired_statement.index == 3
    assert await ids(db_url) == [1]


async def test_match_without_after_match_fires_at_the_first_hit(
    proxy: PgProxy, db_url: str
) -> None:
    conn = await proxied(proxy, db_url)
    try:
        await conn.execute("SELECT 1")
        proxy.arm(Fault(match=re.compile("pgproxy_t"), action="drop_after"))
        with pytest.raises(LOST):
            await conn.execute(INSERT, 9)
        await fired(proxy)
    finally:
        await discard(conn)
    assert proxy.fired_statement is not None and proxy.fired_statement.index == 2
    assert await ids(db_url) == [9]


async def test_dropping_one_connection_leaves_another_usable(proxy: PgProxy, db_url: str) -> None:
    a = await proxied(proxy, db_url)
    b = await proxied(proxy, db_url)
    try:
        await a.execute("SELECT 'a'")
        tx = b.transaction()
        await tx.start()
        await b.execute(INSERT, 1)  # b holds an open transaction while a is dropped
        proxy.arm(Fault(match=re.compile("victim"), action="drop_before"))
        with pytest.raises(LOST):
            await a.execute("SELECT 'victim'")
        await fired(proxy)
        await b.execute(INSERT, 2)
        await tx.commit()
        assert await b.fetchval("SELECT count(*) FROM pgproxy_t") == 2
    finally:
        await discard(a)
        await b.close()
    by_sql = {s.sql: s.connection for s in proxy.statements}
    assert proxy.fired_statement is not None
    assert proxy.fired_statement.connection == by_sql["SELECT 'a'"] != by_sql["BEGIN;"]
    assert await ids(db_url) == [1, 2]


async def step(url: str) -> None:
    """A small 'reconciler step': an autocommit write, then a two-row transaction."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("INSERT INTO pgproxy_t (id) VALUES (1)")
        tx = conn.transaction()
        await tx.start()
        await conn.execute(INSERT, 2)
        await conn.execute(INSERT, 3)
        await tx.commit()
    finally:
        await discard(conn)


async def test_enumerating_every_crash_point_of_a_step(proxy: PgProxy, db_url: str) -> None:
    await step(proxy.url_for(db_url))
    n = proxy.count
    assert n == 5
    truncate = "TRUNCATE pgproxy_t"
    for action in ("drop_before", "drop_after"):
        for k in range(1, n + 1):
            direct = await asyncpg.connect(db_url)
            await direct.execute(truncate)
            await direct.close()
            proxy.reset()
            proxy.arm(Fault(at=k, action=action))
            with pytest.raises(LOST):
                await step(proxy.url_for(db_url))
            await fired(proxy)
            assert proxy.fired_statement is not None and proxy.fired_statement.index == k
            assert proxy.count == k
            ran = k if action == "drop_after" else k - 1  # statements that took effect
            expected = ([1] if ran >= 1 else []) + ([2, 3] if ran >= 5 else [])
            assert await ids(db_url) == expected, (action, k)


def test_fault_validation() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Fault(action="drop_before")
    with pytest.raises(ValueError, match="exactly one"):
        Fault(at=1, match=re.compile("x"), action="drop_before")
    with pytest.raises(ValueError, match="1-based"):
        Fault(at=0, action="drop_before")
    with pytest.raises(ValueError, match="after_match"):
        Fault(at=1, after_match=re.compile("x"), action="drop_before")
    with pytest.raises(ValueError, match="kill"):
        Fault(at=1, action="kill")
    with pytest.raises(ValueError, match="kill"):
        Fault(at=1, action="drop_after", kill=lambda: None)


async def test_arming_a_passed_index_is_refused(proxy: PgProxy, db_url: str) -> None:
    conn = await proxied(proxy, db_url)
    try:
        await conn.execute("SELECT 1")
    finally:
        await conn.close()
    with pytest.raises(ValueError, match="already passed"):
        proxy.arm(Fault(at=1, action="drop_before"))


async def test_drop_after_waits_for_a_sync_sent_later(proxy: PgProxy, db_url: str) -> None:
    reader, writer = await raw_startup(proxy, db_url)
    try:
        proxy.arm(Fault(at=1, action="drop_after"))
        writer.write(extended("INSERT INTO pgproxy_t (id) VALUES (4)"))  # no Sync yet
        await writer.drain()
        assert not proxy.fired.is_set()
        writer.write(SYNC)
        await writer.drain()
        assert await reader.read() == b""  # not one byte of the batch's responses
        await fired(proxy)
    finally:
        writer.close()
        await writer.wait_closed()
    assert proxy.ready_missed is False
    assert await ids(db_url) == [4]


async def test_drop_after_discards_what_follows_the_batch(proxy: PgProxy, db_url: str) -> None:
    reader, writer = await raw_startup(proxy, db_url)
    try:
        proxy.arm(Fault(at=1, action="drop_after"))
        pipelined = query_message("INSERT INTO pgproxy_t (id) VALUES (2)")
        writer.write(extended("INSERT INTO pgproxy_t (id) VALUES (1)") + SYNC + pipelined)
        await writer.drain()
        assert await reader.read() == b""
        await fired(proxy)
    finally:
        writer.close()
        await writer.wait_closed()
    assert sqls(proxy) == ["INSERT INTO pgproxy_t (id) VALUES (1)"]
    assert await ids(db_url) == [1]


async def test_drop_after_gives_up_on_a_blocked_statement(
    proxy: PgProxy, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgproxy, "READY_WAIT_SECONDS", 0.2)
    holder = await asyncpg.connect(db_url)
    conn = await proxied(proxy, db_url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute(INSERT, 1)  # uncommitted: a second INSERT of 1 must wait
        proxy.arm(Fault(at=1, action="drop_after"))
        with pytest.raises(LOST):
            await conn.execute(INSERT, 1)
        await fired(proxy)
        assert proxy.ready_missed is True  # closed without knowing whether it ran
        await tx.rollback()
    finally:
        await discard(conn)
        await holder.close()


async def test_exit_closes_open_connections(db_url: str) -> None:
    async with PgProxy.from_url(db_url) as proxy:
        idle = await proxied(proxy, db_url)
        in_tx = await proxied(proxy, db_url)
        tx = in_tx.transaction()
        await tx.start()
        reader, writer = await asyncio.open_connection(proxy.host, proxy.port)  # mid-startup
    try:
        assert await reader.read() == b""
        for conn in (idle, in_tx):
            with pytest.raises((*LOST, asyncpg.InterfaceError)):
                await conn.fetchval("SELECT 1")
    finally:
        writer.close()
        await writer.wait_closed()
        await discard(idle)
        await discard(in_tx)
