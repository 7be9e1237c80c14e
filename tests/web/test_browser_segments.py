"""The segments page in a real browser (Debian's Chromium): save a segment from the form
(listed at once with its count, no reload), a bad attribute refused naming it with
nothing stored, edit one (the list shows the change at once), count one now, delete one;
and at a phone's width (390 px) nothing scrolls sideways. Its screenshot:
segments-saved."""

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
from tests.web.test_browser import (  # noqa: F401  (the fixture)
    SIDEWAYS,
    browser_page,
    publish_shots,
    shot,
    sign_in,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _saved(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(tables.segments.c.name)).scalars())


def test_save_count_and_delete_a_segment(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    people = tmp_path / "people.csv"
    people.write_text(
        "name,phone,city,plan,tags\n"
        "Ada,+14155550101,Berlin,gold,vip\n"
        "Bo,+14155550102,Berlin,silver,vip\n"
        "Cy,+14155550103,Köln,gold,vip\n"
        "Di,+14155550104,BERLIN,bronze,\n",
        encoding="utf-8",
    )
    import_file(sqlite_engine, people, ImportOptions(list_name="customers"))
    live = make_live(sqlite_engine)
    page = browser_page
    sign_in(page, live.url, "/segments")
    expect(page.locator("#no-segments")).to_be_visible()

    # a condition on an attribute no contact has: refused, naming it; nothing stored
    page.fill("#segment-name", "berlin-vip")
    page.fill("#segment-lists", "customers")
    page.fill("#segment-where", "citty=Berlin")
    page.click("#segment-save")
    expect(page.locator("#segment-msg")).to_contain_text("citty")
    assert _saved(sqlite_engine) == []

    page.fill("#segment-tags", "vip")
    page.fill("#segment-where", "city=berlin\nplan=gold|silver")
    page.click("#segment-save")
    expect(page.locator("#segment-msg")).to_contain_text("Saved berlin-vip: 2 recipients")
    assert _saved(sqlite_engine) == ["berlin-vip"]

    # listed at once with its count, no reload (issue 31: it appeared only after one)
    row = page.locator("#segments-table tr[data-segment='berlin-vip']")
    expect(row).to_contain_text("city = berlin")
    expect(row.locator("[data-role=count]")).to_contain_text("2 recipients")
    expect(page.locator("#segments-count")).to_have_text("1 segment(s).")
    page.fill("#segment-name", "all-vip")
    page.fill("#segment-lists", "customers")
    page.fill("#segment-tags", "vip")
    page.click("#segment-save")
    expect(page.locator("#segment-msg")).to_contain_text("Saved all-vip: 3 recipients")
    expect(page.locator("#segments-count")).to_have_text("2 segment(s).")
    expect(row.locator("[data-role=count]")).to_contain_text("2 recipients")

    # edit one: the form filled from it, its name kept; the list shows the change at once
    row.get_by_role("button", name="Edit berlin-vip").click()
    expect(page.locator("#segment-form-h")).to_have_text("Edit the segment berlin-vip")
    expect(page.locator("#segment-name")).to_have_value("berlin-vip")
    expect(page.locator("#segment-where")).to_have_value("city=berlin\nplan=gold|silver")
    expect(page.locator("#segment-tags")).to_have_value("vip")
    page.fill("#segment-tags", "")
    page.fill("#segment-where", "city=berlin")
    page.click("#segment-save")
    expect(page.locator("#segment-msg")).to_contain_text(
        "Saved changes to berlin-vip: 3 recipients"
    )
    expect(row).not_to_contain_text("plan =")
    expect(row).not_to_contain_text("tags vip")
    expect(row.locator("[data-role=count]")).to_contain_text("3 recipients")
    expect(page.locator("#segment-form-h")).to_have_text("Save a segment")
    assert _saved(sqlite_engine) == ["berlin-vip", "all-vip"]
    row.get_by_role("button", name="Count now: berlin-vip").click()
    expect(row.locator("[data-role=count]")).to_contain_text("3 recipients")
    shot(page, "segments-saved")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete all-vip").click()
    expect(page.locator("#segments-table tr[data-segment='all-vip']")).to_have_count(0)

    # a page opened afresh counts its segments by itself
    page.reload()
    expect(row.locator("[data-role=count]")).to_contain_text("3 recipients")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate(SIDEWAYS) is False

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete berlin-vip").click()
    expect(row).to_have_count(0)
    assert _saved(sqlite_engine) == []
    publish_shots("segments-saved")
