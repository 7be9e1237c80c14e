"""The dashboard's Erase button in a real browser (Debian's Chromium): a dismissed
confirmation erases nothing; an accepted one erases the contact everywhere."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns.importer import ImportOptions, import_file
from storage import tables
from tests.web.conftest import API_KEY, LiveApp
from tests.web.test_browser import browser_page  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _phones(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(tables.contacts.c.phone)).scalars())


def test_erase_button_asks_then_erases(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    people = tmp_path / "people.csv"
    people.write_text("name,phone\nZed Quill,+14155550101\nAda Byron,+14155550102\n")
    import_file(sqlite_engine, people, ImportOptions(list_name="customers"))
    live = make_live(sqlite_engine)
    page = browser_page
    page.goto(f"{live.url}/contacts")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#api_key", API_KEY)
    page.click("#sign-in")
    expect(page).to_have_url(re.compile(r"/contacts$"))

    row = page.locator("#contacts-table tr", has_text="Zed Quill")
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator("button[data-op=erase]").click()
    expect(row).to_be_visible()
    assert _phones(sqlite_engine) == {"+14155550101", "+14155550102"}

    messages: list[str] = []

    def accept(dialog: Any) -> None:
        messages.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    row.locator("button[data-op=erase]").click()
    expect(page.locator("#contacts-table")).not_to_contain_text("Zed Quill")
    expect(page.locator("#contacts-table")).to_contain_text("Ada Byron")
    assert "cannot be undone" in messages[0]
    assert _phones(sqlite_engine) == {"+14155550102"}
