"""The campaign page in Chromium: each recipient's tap beside their reply (issue 32)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.web.conftest import LiveApp
from tests.web.test_browser import browser_page, sign_in  # noqa: F401  (the fixture)
from tests.web.test_dashboard_taps import tapped_campaign

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def test_the_recipients_table_shows_the_tap(
    make_live: Callable[..., LiveApp],
    sqlite_engine: Engine,
    browser_page: Any,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    live = make_live(sqlite_engine)
    with live.client() as api:
        cid, target = tapped_campaign(live, api)
    page = browser_page
    sign_in(page, live.url, f"/campaigns/{cid}")
    row = page.locator(f"#deliveries tbody tr[data-target='{target}']")
    expect(row.locator("td.reply")).to_contain_text("tapped button yes Yes")
    expect(page.locator("#taps-table tr[data-tap='button:yes']")).to_contain_text("50.0%")
