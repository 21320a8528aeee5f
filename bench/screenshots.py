"""`python -m bench.screenshots`: the README's console screenshots, from a real demo run.

Runs `jobwarden demo` in a database of its own (real simulator, receiver and
reconciler: real calls, webhooks and an escalation), then serves the console
over that database, signs in with a fresh operator token in headless Chromium
and saves the inbox and the escalated operation's timeline at 1280 px to
docs/console-inbox.png and docs/console-timeline.png. The database is dropped
afterwards.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from bench.browser import chromium, missing, viewport, wait_for
from receiver.api import api_routes
from receiver.main import run_receiver
from shared.cli.demo import free_port, wait_http
from shared.db.connect import connect, resolve_database, with_database
from shared.ledger import tokens
from shared.providers import load_preset
from shared.settings import Settings

DATABASE = "jw_console_screenshots"
DOCS = Path("docs")
WIDTH = 1280
# Tallest picture taken: the top of a long timeline is what a README needs.
MAX_HEIGHT = 1600


def _capture(driver: WebDriver, path: Path) -> None:
    height: int = driver.execute_script("return document.documentElement.scrollHeight")
    viewport(driver, WIDTH, min(max(height, 600), MAX_HEIGHT))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def _browse(base: str, token: str, operation_id: str) -> None:
    with chromium(WIDTH) as driver:
        driver.get(base + "/console/signin")
        field = driver.find_element(By.ID, "token")
        field.send_keys(token)
        field.send_keys(Keys.ENTER)
        wait_for(driver, lambda d: d.current_url.endswith("/console/inbox"))
        _capture(driver, DOCS / "console-inbox.png")
        viewport(driver, WIDTH)
        driver.get(f"{base}/console/operations/{operation_id}")
        wait_for(driver, lambda d: d.find_element(By.ID, "h-timeline"))
        _capture(driver, DOCS / "console-timeline.png")


async def main() -> int:
    why = missing()
    if why:
        print(f"cannot take screenshots: {why}", file=sys.stderr)
        return 1
    server = resolve_database()
    admin = await connect(server.admin_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        env = {**os.environ, "JW_DEMO_DATABASE": DATABASE}
        env.pop("DATABASE_URL", None)
        demo = subprocess.run([sys.executable, "-m", "shared.cli", "demo"], env=env, check=False)
        if demo.returncode not in (0, 1):
            return demo.returncode
        url = with_database(server.admin_url, DATABASE)
        conn = await connect(url)
        try:
            minted = tokens.mint_token()
            await tokens.create_token(
                conn, minted, caller="screenshots", scope="operator", created_by="bench"
            )
            escalated = await conn.fetchval(
                "SELECT operation_id FROM operations WHERE state = 'needs_attention' LIMIT 1"
            )
        finally:
            await conn.close()
        port = free_port()
        sim = load_preset("simulator", env={})
        settings = Settings(
            providers={"sim": sim, "sim-poll": sim}, receiver_host="127.0.0.1", receiver_port=port
        )
        service = asyncio.create_task(
            run_receiver(settings, url, make_routes=lambda pool: api_routes(settings, pool))
        )
        try:
            await wait_http(f"http://127.0.0.1:{port}/healthz")
            await asyncio.to_thread(_browse, f"http://127.0.0.1:{port}", minted.secret, escalated)
        finally:
            service.cancel()
            await asyncio.gather(service, return_exceptions=True)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        await admin.close()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
