"""The contacts page in a real browser (Debian's Chromium): a vCard file uploaded with
its mapping preview, a file of numbers opted out, and the Erase button (a dismissed
confirmation erases nothing; an accepted one erases the contact everywhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from campaigns.importer import ImportOptions, import_file
from storage import tables
from tests.web.conftest import LiveApp
from tests.web.test_browser import browser_page, sign_in  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


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
    sign_in(page, live.url, "/contacts")

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


def _opted_out(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        query = sa.select(tables.contacts.c.phone).where(tables.contacts.c.opted_out.is_(True))
        return set(conn.execute(query).scalars())


def test_vcard_upload_and_opt_out_file(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    live = make_live(sqlite_engine)
    page = browser_page
    sign_in(page, live.url, "/contacts")

    page.set_input_files("#file", str(SAMPLES / "contacts.vcf"))
    page.fill("#list_name", "phone")
    page.click("#preview-btn")
    expect(page.locator("#phone_column")).to_have_value("phone")
    expect(page.locator("#preview-table")).to_contain_text("Jürgen Müller")
    expect(page.locator("#preview-table")).to_contain_text("+447911123456")
    page.click("#import-btn")
    expect(page.locator("#upload-msg")).to_contain_text("Imported into list", timeout=60_000)
    expect(page.locator("[data-count=New]")).to_have_text("7")
    expect(page.locator("#rejects-table")).to_contain_text("No Number Person")

    stop = tmp_path / "stop.csv"
    stop.write_text("phone\n+447911123456\n+14155550177\nnope\n", encoding="utf-8")
    page.reload()
    page.set_input_files("#file", str(stop))
    page.check("#opt_out")
    expect(page.locator("#list_name")).to_be_disabled()
    page.click("#preview-btn")
    page.click("#import-btn")
    expect(page.locator("#upload-msg")).to_contain_text("opted out", timeout=60_000)
    expect(page.locator("[data-count='Opted out (new contacts)']")).to_have_text("1")
    expect(page.locator("[data-count='Opted out (existing)']")).to_have_text("1")
    expect(page.locator("[data-count=Rejected]")).to_have_text("1")
    assert _opted_out(sqlite_engine) == {"+447911123456", "+14155550177"}
