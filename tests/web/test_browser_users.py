"""Users and the audit log in Chromium: an admin signs in with name and password, adds an
operator on the Users page, makes a key (shown once); a viewer sees a campaign without
its buttons; the admin reads the Audit page (who did what, from where), filters it, and
signs out."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from campaigns import users
from storage.types import utcnow
from tests.web.conftest import LiveApp
from tests.web.test_browser import browser_page  # noqa: F401  (the one browser of this module)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FAST = {"argon2_memory_kib": 64, "argon2_time_cost": 1}


def _sign_in(page: Any, live: LiveApp, name: str, password: str, path: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{live.url}{path}")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#user", name)
    page.fill("#password", password)
    page.click("#sign-in")
    expect(page).to_have_url(f"{live.url}{path}")


def test_users_and_audit_pages(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    live = make_live(sqlite_engine, settings_overrides=FAST)
    hashing = users.Hashing(64, 1)
    users.create_user(sqlite_engine, "boss", "admin", "boss password 1", hashing, utcnow())
    users.create_user(sqlite_engine, "vic", "viewer", "vic password 1", hashing, utcnow())
    page = browser_page

    # a wrong password is said in words
    page.goto(f"{live.url}/login")
    page.fill("#user", "boss")
    page.fill("#password", "not the password")
    page.click("#sign-in")
    expect(page.locator(".error")).to_contain_text("user name or password is not right")

    _sign_in(page, live, "boss", "boss password 1", "/users")
    expect(page.locator("#signed-in-as")).to_have_text("boss (admin)")
    page.fill("#u-name", "olga")
    page.select_option("#u-role", "operator")
    page.fill("#u-password", "short")
    page.click("#u-add")
    expect(page.locator("#u-msg")).to_contain_text("at least 10 characters")
    page.fill("#u-password", "olga password 1")
    page.click("#u-add")
    expect(page.locator("#u-msg")).to_contain_text("Added olga (operator)")
    page.reload()
    row = page.locator("tr.user[data-user=olga]")
    row.get_by_role("button", name="New key").click()
    expect(page.locator("#key-secret")).to_have_text(re.compile(r"^gck_[A-Za-z0-9_-]{43}$"))

    # the audit page: who did what, from where; filtered by actor
    page.click("nav >> text=Audit")
    expect(page).to_have_url(f"{live.url}/audit")
    table = page.locator("#audit")
    expect(table).to_contain_text("boss made an API key for user 'olga'")  # in words
    expect(table).to_contain_text("boss added user 'olga'")
    expect(table).to_contain_text("a sign-in as 'boss' was refused")
    expect(table).to_contain_text("127.0.0.1")
    expect(table).to_contain_text("refused")  # the wrong password
    page.fill("#audit-filter input[name=action]", "sign-in")
    page.click("#audit-filter button")
    expect(page.locator("tr.entry")).to_have_count(2)
    expect(page.locator("#audit-export")).to_have_attribute("href", re.compile("action=sign-in"))

    # signing out ends the session
    page.click("text=Sign out")
    expect(page).to_have_url(re.compile(r"/login"))
    page.goto(f"{live.url}/audit")
    expect(page).to_have_url(re.compile(r"/login\?next="))

    # a viewer sees the pages but no buttons that change things, and no admin pages
    _sign_in(page, live, "vic", "vic password 1", "/campaigns")
    expect(page.locator("#new-campaign")).to_be_hidden()
    expect(page.locator("#campaign-filter button")).to_be_visible()  # reading stays
    page.goto(f"{live.url}/instances")
    expect(page.locator("#create-instance")).to_be_hidden()
    expect(page.locator("nav >> text=Audit")).to_have_count(0)
    page.goto(f"{live.url}/audit")
    expect(page.locator("main")).to_contain_text("needs the admin role")
