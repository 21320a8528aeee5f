"""Every connection of ours starts with SERVER_SETTINGS (shared/db/connect.py)."""

from __future__ import annotations

from shared.db.connect import SERVER_SETTINGS, connect, create_pool


async def test_a_connection_compiles_no_query_just_in_time(db_url: str) -> None:
    assert SERVER_SETTINGS["jit"] == "off"
    conn = await connect(db_url)
    try:
        assert await conn.fetchval("SHOW jit") == "off"
    finally:
        await conn.close()


async def test_a_pools_own_settings_add_to_ours(db_url: str) -> None:
    pool = await create_pool(db_url, server_settings={"application_name": "jw-settings-test"})
    try:
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW jit") == "off"
            assert await conn.fetchval("SHOW application_name") == "jw-settings-test"
    finally:
        await pool.close()
