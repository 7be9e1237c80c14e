"""The Auto-replies page in a real browser (Debian's Chromium): an operator adds a
keyword auto-reply (listed at once, in words), a button one left without its id is
refused naming the field in the page's words with nothing stored, an away message with
business hours in a timezone, switches one off and deletes one; at a phone's width
(390 px) nothing scrolls sideways. Its screenshot: auto-replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

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


def _stored(engine: Engine) -> list[tuple[str, bool, Any]]:
    r = tables.reply_rules
    with engine.connect() as conn:
        rows = conn.execute(sa.select(r.c.name, r.c.enabled, r.c.hours).order_by(r.c.id))
        return [tuple(row) for row in rows]


def test_add_switch_off_and_delete_auto_replies(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    live = make_live(sqlite_engine)
    page = browser_page
    sign_in(page, live.url, "/auto-replies")
    expect(page.locator("#no-rules")).to_be_visible()
    expect(page.locator("nav.main a[aria-current=page]")).to_have_text("Auto-replies")

    page.fill("#rule-name", "Opening hours")
    page.fill("#rule-keywords", "horário, hours")
    page.fill("#rule-text", "We open Monday to Friday, 9:00 to 18:00")
    page.click("#rule-save")
    expect(page.locator("#rule-msg")).to_contain_text("Added the auto-reply Opening hours")
    row = page.locator("#rules-table tr[data-name='Opening hours']")
    expect(row).to_contain_text("the message holds horário or hours")
    expect(row).to_contain_text("once a person every 24 h")

    # a button auto-reply without the button's id: refused in the page's words
    page.fill("#rule-name", "Yes tapped")
    page.check("input[name=trigger][value=button]")
    page.fill("#rule-text", "Here are the details")
    page.click("#rule-save")
    expect(page.locator("#rule-msg")).to_contain_text("The button's id: a button rule needs")
    assert [name for name, _, _ in _stored(sqlite_engine)] == ["Opening hours"]

    # an away message: open Monday to Friday 9-18 in Lisbon, Saturday mornings too
    page.check("input[name=trigger][value=away]")
    page.fill("#rule-name", "Away")
    page.check("#open-sat")
    page.fill("#to-sat", "13:00")
    page.select_option("#rule-tz", "Europe/Lisbon")
    page.fill("#rule-text", "We are closed now; we answer when we open")
    page.click("#rule-save")
    expect(page.locator("#rule-msg")).to_contain_text("Added the auto-reply Away")
    away = page.locator("#rules-table tr[data-name='Away']")
    expect(away).to_contain_text("outside business hours (Mon 09:00-18:00")
    expect(away).to_contain_text("Sat 09:00-13:00, Europe/Lisbon")
    stored = _stored(sqlite_engine)
    assert stored[1][2]["days"]["sat"] == ["09:00-13:00"] and "sun" not in stored[1][2]["days"]
    shot(page, "auto-replies")

    page.get_by_role("button", name="Switch off: Opening hours").click()
    expect(row.locator("[data-role=on]")).to_have_text("no (switched off)")
    assert _stored(sqlite_engine)[0][1] is False
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete Away").click()
    expect(away).to_have_count(0)
    assert [name for name, _, _ in _stored(sqlite_engine)] == ["Opening hours"]

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page.evaluate(SIDEWAYS) is False
    publish_shots("auto-replies")
