"""The dashboard's Webhooks page in Chromium: add an endpoint (a bad address refused in
words, the secret shown once), see it listed with its messages, remove it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.web.conftest import LiveApp
from tests.web.test_browser import browser_page, sign_in  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_webhooks_page(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    live = make_live(sqlite_engine)
    page = browser_page
    sign_in(page, live.url, "/webhooks")
    expect(page.locator("#no-endpoints")).to_be_visible()

    page.fill("#wh-url", "ftp://crm.example.com/hooks")
    page.click("#wh-add")
    expect(page.locator("#wh-msg")).to_contain_text("must start with http:// or https://")
    expect(page.locator("#wh-msg")).not_to_contain_text("--")  # no CLI flags on the web

    page.fill("#wh-url", "https://crm.example.com/hooks")
    page.click("#wh-add")
    expect(page.locator("#wh-secret")).to_have_text(re.compile(r"^whsec_[A-Za-z0-9+/=]{32}$"))

    page.reload()
    card = page.locator(".endpoint").first
    expect(card).to_contain_text("https://crm.example.com/hooks")
    expect(card).to_contain_text("enabled")
    expect(card).to_contain_text("0 delivered, 0 waiting, 0 failed")
    expect(page.locator("body")).not_to_contain_text("whsec_")  # shown once only

    page.once("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Remove").click()
    expect(page.locator(".endpoint")).to_have_count(0)
    page.reload()
    expect(page.locator("#no-endpoints")).to_be_visible()
