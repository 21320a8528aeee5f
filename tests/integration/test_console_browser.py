"""The operator console in a real browser (headless Chromium): issue 15's acceptance.

Sign in with an operator token, find the escalated operation in the inbox,
resolve it with a reason, see the timeline show the decision and the move; the
list updates live when an operation moves; every page fits a 375 px phone
screen; an agent token is refused. The receiver is a real one on loopback (in
this process, running as jobwarden_receiver, recording decisions on a console
login in jobwarden_operator); the browser runs in a thread so the event loop
keeps serving it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from bench import browser
from bench.browser import chromium, viewport, wait_for
from shared.db.connect import ResolvedDatabase
from shared.ledger.states import LocalState
from tests.integration.agent_support import make_token
from tests.integration.console_support import (
    Receiver,
    console_login,
    escalated,
    running_receiver,
)
from tests.support import drive, submit

S = LocalState
T = TypeVar("T")
PAGES = ("inbox", "operations", "webhooks", "providers", "audit")
PHONE = 375

pytestmark = pytest.mark.skipif(browser.missing() is not None, reason=browser.missing() or "")


def sign_in(driver: WebDriver, receiver: Receiver, token: str) -> None:
    driver.get(receiver.url("/console/"))
    wait_for(driver, lambda d: d.current_url.endswith("/console/signin"))
    field = driver.find_element(By.ID, "token")
    label = driver.find_element(By.CSS_SELECTOR, "label[for=token]")
    assert label.text == "Operator token"
    field.send_keys(token)
    field.send_keys(Keys.ENTER)  # the keyboard submits the form


def text_of(driver: WebDriver) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def unlabelled_controls(driver: WebDriver) -> list[str]:
    """Form controls a screen reader could not name (no label, no aria-label, no text)."""
    found: list[str] = driver.execute_script(
        """
        const bad = [];
        for (const el of document.querySelectorAll('input, select, textarea, button')) {
          if (el.type === 'hidden') continue;
          const named = (el.id && document.querySelector('label[for="' + el.id + '"]'))
            || el.getAttribute('aria-label') || (el.tagName === 'BUTTON' && el.textContent.trim());
          if (!named) bad.push(el.outerHTML.slice(0, 80));
        }
        return bad;
        """
    )
    return found


def overflow(driver: WebDriver) -> int:
    width: int = driver.execute_script("return document.documentElement.scrollWidth")
    return width


def flow(
    receiver: Receiver,
    operator: str,
    agent: str,
    op_id: str,
    in_loop: Callable[[Coroutine[Any, Any, T]], T],
    move_another: Callable[[], Coroutine[Any, Any, str]],
) -> None:
    with chromium() as driver:
        viewport(driver, PHONE)
        driver.get(receiver.url("/console/signin"))
        wait_for(driver, lambda d: d.find_element(By.ID, "token"))
        assert overflow(driver) <= PHONE and not unlabelled_controls(driver)
        viewport(driver, 1280)

        # An agent token is refused, with words.
        sign_in(driver, receiver, agent)
        wait_for(driver, lambda d: "agent token" in text_of(d))
        assert driver.current_url.endswith("/console/signin")

        sign_in(driver, receiver, operator)
        wait_for(driver, lambda d: d.current_url.endswith("/console/inbox"))
        inbox = text_of(driver)
        assert op_id in inbox and "two job ids for one token" in inbox
        assert not unlabelled_controls(driver)

        # Every page fits a phone's screen: no sideways scrolling.
        viewport(driver, PHONE)
        for name in (*PAGES, f"operations/{op_id}"):
            driver.get(receiver.url(f"/console/{name}"))
            wait_for(driver, lambda d: d.find_element(By.TAG_NAME, "h1"))
            assert overflow(driver) <= PHONE, f"/console/{name} is wider than {PHONE} px"
            assert not unlabelled_controls(driver), name
        viewport(driver, 1280)

        # Resolve from the inbox: a reason, then the move's button.
        driver.get(receiver.url("/console/inbox"))
        driver.find_element(By.ID, f"reason-{op_id}").send_keys("provider confirmed the failure")
        button = driver.find_element(
            By.CSS_SELECTOR, f"form[aria-label='Actions for {op_id}'] button[value=failed]"
        )
        button.send_keys(Keys.ENTER)
        wait_for(driver, lambda d: "done=resolved" in d.current_url)
        timeline = text_of(driver)
        assert "Decision recorded" in timeline
        assert "operator:ops decided" in timeline and "provider confirmed the failure" in timeline
        assert "needs_attention → failed" in timeline

        # The inbox is empty now; the operations list updates live.
        driver.get(receiver.url("/console/inbox"))
        wait_for(driver, lambda d: "Nothing waits for a human" in text_of(d))
        driver.get(receiver.url("/console/operations"))
        wait_for(
            driver, lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-live-ready")
        )
        other = in_loop(move_another())
        wait_for(driver, lambda d: other in text_of(d))


async def test_an_operator_resolves_an_escalation_in_the_browser(
    pg_server: ResolvedDatabase, db: Any, db_url: str
) -> None:
    operator = await make_token(db, "ops", "operator")
    agent = await make_token(db, "claude")
    op_id = await escalated(db, "two job ids for one token")
    loop = asyncio.get_running_loop()

    def in_loop(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)

    async def move_another() -> str:
        other = await submit(db, ref="later")
        await drive(db, other, S.ACCEPTED)
        return other

    async with (
        console_login(pg_server.admin_url, db_url) as console_url,
        running_receiver(db_url, console_url) as receiver,
    ):
        await asyncio.to_thread(flow, receiver, operator, agent, op_id, in_loop, move_another)
    decision = await db.fetchrow("SELECT actor, reason FROM decisions")
    assert dict(decision) == {"actor": "operator:ops", "reason": "provider confirmed the failure"}
    assert (
        await db.fetchval("SELECT state::text FROM operations WHERE operation_id = $1", op_id)
        == "failed"
    )
