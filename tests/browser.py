"""Debian's Chromium for the browser tests (never a downloaded browser), one per session.

The ``chromium_browser`` fixture (tests/conftest.py) launches it once per test session
(once per xdist worker); each test opens its own context in it, so no cookie, storage or
page of another test is seen, as with a browser of its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip (fail under CI=true) when Debian's Chromium is missing."""
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing (apt-get install chromium); browser tests cannot run"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true)")
    pytest.skip(reason)


def launched_chromium() -> Iterator[Any]:
    """A headless Chromium through Playwright, closed at the end."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def opened_page(browser: Any) -> Iterator[Any]:
    """A page of ``browser`` in a fresh context (no other test's cookies): 1280x900,
    downloads accepted, 20 s for each wait; the context closed at the end."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        yield page
    finally:
        context.close()


def signed_in_page(browser: Any, url: str, path: str, key: str) -> Any:
    """A page of ``browser`` in a fresh context (1280x900, 20 s for each wait) opened on
    ``path`` of the server at ``url`` and signed in there with ``key``; close its
    ``context`` when done."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{url}{path}")
    page.wait_for_url(re.compile(r"/login\?next="))
    page.fill("#api_key", key)
    page.click("#sign-in")
    return page
