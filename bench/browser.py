"""Headless Chromium driven by Selenium: the console's browser test and its screenshots.

Debian's `chromium` and `chromium-driver` (installed by `make setup` when run as
root): the driver comes from the same package as the browser, so their versions
always match, and Selenium is pointed at both, so Selenium Manager never looks
for (or downloads) anything.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Long enough for a cold browser on a busy 2-core CI machine; a wait ends as
# soon as its condition holds.
WAIT_SECONDS = 20.0
T = TypeVar("T")


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if absent:
        return (
            f"{', '.join(absent)} not installed: `make setup` as root installs Debian's "
            "chromium and chromium-driver (apt-get install chromium chromium-driver)"
        )
    return None


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[webdriver.Chrome]:
    profile = tempfile.mkdtemp(prefix="jw-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never fetch
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        viewport(driver, width, height)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def viewport(driver: WebDriver, width: int, height: int = 900) -> None:
    """The page's viewport exactly `width` CSS pixels wide (a phone is 375)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 700},
    )


def wait_for(driver: WebDriver, condition: Callable[[Any], T]) -> T:
    """Wait for a condition of the page (never a fixed sleep).

    A live page replaces its elements as it updates: an element found just
    before that is stale, which means "not yet", like one not found.
    """
    result: T = WebDriverWait(
        driver,
        WAIT_SECONDS,
        ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
    ).until(condition)
    return result
