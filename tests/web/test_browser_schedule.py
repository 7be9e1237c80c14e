"""The composer's schedule picker in a real browser (Debian's Chromium), against
``gatecast serve`` and ``gatecast sandbox`` as processes whose clock is Monday
7 December 2026, 08:00 UTC (``GATECAST_CLOCK_START``): a user in London picks "every
Monday and Thursday at 09:30" from a start a week ahead, sees the next runs from that
start, creates the campaign, and ``gatecast campaign show`` reads that recurrence and
the same next run; the repeat preview of issue 31 (a start on the 14th previewed as
"Mon 7 Dec") counts from the start; an edit shows a stored recurrence in the picker
when it fits a shape, else as crontab.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.journeys.harness import (
    API_KEY,
    QUICK_STATUSES,
    Server,
    Workspace,
    link_sender_over_api,
    ok,
    start_sandbox,
    workspace,
)
from tests.web.test_browser import ARTIFACTS, DOCS_SHOTS

pytestmark = [pytest.mark.slow, pytest.mark.browser]
NOW = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # a Monday
REFRESHED = "() => Number(document.body.dataset.composerRefreshed || 0)"
FITS = "() => document.scrollingElement.scrollWidth <= window.innerWidth"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """One workspace for the module: its sandbox, contacts and clock."""
    sandbox = start_sandbox(tmp_path_factory.mktemp("sandbox"), *QUICK_STATUSES)
    try:
        with workspace(tmp_path_factory.mktemp("work"), sandbox.url) as w:
            w.clock_start = NOW
            people = w.path / "people.csv"
            with people.open("w", newline="", encoding="utf-8") as fh:
                csv.writer(fh).writerows([["Name", "Phone"], ["Ada Lovelace", "+447700900101"]])
            w.run("contacts", "import", str(people), "--list", "people", "--region", "GB")
            yield w
    finally:
        sandbox.stop()


@pytest.fixture(scope="module")
def server(ws: Workspace) -> Server:
    """``gatecast serve`` (API, dashboard and scheduler) with a linked sender."""
    served = ws.serve()
    with served.api() as api:
        link_sender_over_api(api)
    return served


@pytest.fixture
def page(chromium_browser: Any, server: Server) -> Iterator[Any]:
    """A signed-in page of a browser in London."""
    context = chromium_browser.new_context(
        viewport={"width": 1280, "height": 900}, timezone_id="Europe/London"
    )
    p = context.new_page()
    p.set_default_timeout(20_000)
    p.goto(f"{server.url}/campaigns/new")  # the sign-in page first
    p.fill("#api_key", API_KEY)
    p.click("#sign-in")
    p.wait_for_url(re.compile(r"/campaigns/new$"))
    try:
        yield p
    finally:
        context.close()


def _settled(page: Any) -> None:
    """Wait for the composer's refresh after the change just made."""
    before = page.evaluate(REFRESHED)
    page.wait_for_function(f"() => ({REFRESHED})() > {before}", timeout=15_000)


def _shot_schedule(page: Any) -> None:
    """The schedule section into test-artifacts/screenshots/composer-schedule.png (and
    docs/screenshots/ with GATECAST_UPDATE_SCREENSHOTS=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "composer-schedule.png"
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.locator("#schedule").screenshot(path=str(path))
    if os.environ.get("GATECAST_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, DOCS_SHOTS / path.name)


def _runs(page: Any) -> list[str]:
    return [str(t) for t in page.locator("#cron-list li").all_inner_texts()]


def test_every_monday_and_thursday_from_a_future_start(
    page: Any, server: Server, ws: Workspace
) -> None:
    from playwright.sync_api import expect

    # the timezone defaults to the browser's
    expect(page.locator("#f-tz")).to_have_value("Europe/London")
    page.fill("#f-name", "Twice a week")
    page.select_option("#f-list", "people")
    page.fill("#f-text", "Hello {{ name }}")
    page.check("#f-rep-week")
    expect(page.locator("#f-cron")).to_be_hidden()
    expect(page.locator("#f-start-label")).to_contain_text("Starting from")
    for day in ("mon", "thu"):
        page.check(f"#f-rep-{day}")
    picked = {"#f-rep-times": "09:30", "#f-start": "2026-12-14T09:00"}
    for field, value in {**picked, "#f-win-from": "09:00", "#f-win-to": "18:00"}.items():
        page.fill(field, value)
    _settled(page)
    expect(page.locator("#repeat-summary")).to_have_text(
        "Every Monday and Thursday at 09:30 (Europe/London)"
    )
    expect(page.locator("#repeat-cron")).to_have_text("30 9 * * MON,THU")
    assert _runs(page) == [
        "Mon, 14 Dec 2026, 09:30",
        "Thu, 17 Dec 2026, 09:30",
        "Mon, 21 Dec 2026, 09:30",
        "Thu, 24 Dec 2026, 09:30",
        "Mon, 28 Dec 2026, 09:30",
    ]
    expect(page.locator("#final-check")).to_contain_text("starting 2026-12-14 09:30 Europe/London")
    _shot_schedule(page)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(FITS), "the schedule picker scrolls sideways at 390 px"
    page.set_viewport_size({"width": 1280, "height": 900})

    # times that one crontab line cannot hold: said on the picker, Create refused
    page.fill("#f-rep-times", "09:30, 17:45")
    _settled(page)
    expect(page.locator("#cron-next")).to_contain_text("At: the times must share their minutes")
    page.click("#form-create")
    expect(page.locator("#campaign-msg")).to_contain_text("Schedule: At: the times must share")
    page.fill("#f-rep-times", "09:30")
    _settled(page)

    page.click("#form-create")
    page.wait_for_url(re.compile(r"/campaigns/\d+$"))
    cid = int(page.url.rsplit("/", 1)[1])
    expect(page.locator("#repeats")).to_have_text(
        "repeats every Monday and Thursday at 09:30 (Europe/London), 30 9 * * MON,THU; "
        "next run 2026-12-14 09:30"
    )
    with server.api() as api:
        stored = ok(api.get(f"/api/v1/campaigns/{cid}"))
    assert stored["cron"] == "30 9 * * MON,THU"
    assert stored["timezone"] == "Europe/London"
    assert stored["spec"]["schedule"]["window"] == ["09:00", "18:00"]
    # what the scheduler runs next: the first run from the start, as the preview said
    shown = json.loads(ws.run("campaign", "show", str(cid), "--json").output)
    assert shown["next_run"].startswith("2026-12-14T09:30:00"), shown["next_run"]
    table = ws.run("campaign", "show", str(cid)).output
    assert "next run 2026-12-14 09:30 Europe/London" in table, table

    # editing it shows the picker as it was filled
    page.goto(f"{server.url}/campaigns/new?from={cid}&mode=edit")
    expect(page.locator("#f-rep-week")).to_be_checked()
    expect(page.locator("#f-rep-mon")).to_be_checked()
    expect(page.locator("#f-rep-thu")).to_be_checked()
    expect(page.locator("#f-rep-tue")).not_to_be_checked()
    expect(page.locator("#f-rep-times")).to_have_value("09:30")
    expect(page.locator("#cron-list li").first).to_have_text("Mon, 14 Dec 2026, 09:30")


def test_repeat_preview_counts_from_the_start(page: Any) -> None:
    """Issue 31: "0 9 * * MON" from Monday 14 December previewed "Mon 7 Dec" first."""
    from playwright.sync_api import expect

    page.select_option("#f-list", "people")
    page.check("#f-rep-advanced")
    page.fill("#f-cron", "0 9 * * MON")
    page.fill("#f-start", "2026-12-14T08:00")
    _settled(page)
    expect(page.locator("#repeat-summary")).to_have_text("Every Monday at 09:00 (Europe/London)")
    runs = _runs(page)
    assert runs[0] == "Mon, 14 Dec 2026, 09:00", runs
    assert not any("7 Dec" in r for r in runs), runs
    # once: no recurrence written, the start said back
    page.check("#f-rep-once")
    _settled(page)
    expect(page.locator("#cron-next")).to_have_text(
        "Sends once, at 2026-12-14 08:00 Europe/London."
    )
    assert "cron" not in page.evaluate("() => formSpec().schedule")
    # monthly on the 31st: months without one skipped, from the start
    page.check("#f-rep-month")
    page.fill("#f-rep-dom", "31")
    page.fill("#f-rep-times", "07:00")
    _settled(page)
    expect(page.locator("#repeat-summary")).to_contain_text("Monthly on the 31st at 07:00")
    assert _runs(page)[:2] == ["Thu, 31 Dec 2026, 07:00", "Sun, 31 Jan 2027, 07:00"]


def test_a_crontab_no_shape_fits_opens_as_advanced(page: Any, server: Server) -> None:
    from playwright.sync_api import expect

    spec = {
        "name": "Working hours",
        "list": "people",
        "message": {"type": "text", "text": "Hi"},
        "schedule": {
            "start": "2026-12-14T09:00",
            "timezone": "Europe/London",
            "cron": "*/15 9-17 * * MON-FRI",
        },
    }
    with server.api() as api:
        cid = ok(api.post("/api/v1/campaigns", json=spec), 201)["id"]
    page.goto(f"{server.url}/campaigns/{cid}")
    expect(page.locator("#repeats")).to_have_text(
        "repeats crontab */15 9-17 * * MON-FRI (Europe/London); next run 2026-12-14 09:00"
    )
    page.goto(f"{server.url}/campaigns/new?from={cid}&mode=edit")
    expect(page.locator("#f-rep-advanced")).to_be_checked()
    expect(page.locator("#f-cron")).to_have_value("*/15 9-17 * * MON-FRI")
    expect(page.locator("#cron-list li").first).to_have_text("Mon, 14 Dec 2026, 09:00")
