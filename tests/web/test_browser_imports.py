"""The contact import in a real browser (Debian's Chromium), against ``gatecast serve``
as a process (issue 31, item 4): a file of UK local numbers read with the default
region US gets a hint naming the United Kingdom; the user picks it, names the City
column's attribute and leaves Notes out, imports, sees the contacts with +44 numbers,
their town, the ``NA`` name empty, and downloads the rejected rows as CSV with their
reasons. ``gatecast contacts show`` reads the same contacts back.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.harness import API_KEY, Server, Workspace, start_sandbox, workspace
from tests.web.test_browser import ARTIFACTS, DOCS_SHOTS

pytestmark = [pytest.mark.slow, pytest.mark.browser]
VIEWPORT = {"width": 1280, "height": 900}

UK_CSV = (
    "Name,Phone,City,Notes\n"
    "Olga Brown,07911 123456,Leeds,call after 5\n"
    "NA,07911 123457,York,-\n"
    "Sam Green,07911 12345,Bath,short number\n"
    "Lee Park,call me,Hull,no number\n"
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    """One workspace (SQLite, the sandbox gateway) for the module, its default region US."""
    sandbox = start_sandbox(tmp_path_factory.mktemp("sandbox"))
    try:
        with workspace(tmp_path_factory.mktemp("work"), sandbox.url) as w:
            yield w
    finally:
        sandbox.stop()


@pytest.fixture(scope="module")
def server(ws: Workspace) -> Server:
    """``gatecast serve``: the API and the dashboard."""
    return ws.serve()


@pytest.fixture
def page(chromium_browser: Any, server: Server) -> Iterator[Any]:
    """A page signed in on the contacts page, downloads allowed."""
    context = chromium_browser.new_context(accept_downloads=True, viewport=VIEWPORT)
    try:
        p = context.new_page()
        p.goto(f"{server.url}/contacts")  # the sign-in page first
        p.fill("#api_key", API_KEY)
        p.click("#sign-in")
        p.wait_for_url(re.compile(r"/contacts$"))
        yield p
    finally:
        context.close()


def _shot(page: Any, name: str, part: str = "#upload-card") -> None:
    """The import card (or the ``part`` chosen) into test-artifacts/screenshots/NAME.png
    (and docs/screenshots/ with GATECAST_UPDATE_SCREENSHOTS=1)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator(part).screenshot(path=str(ARTIFACTS / f"{name}.png"))
    if os.environ.get("GATECAST_UPDATE_SCREENSHOTS") == "1":
        DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ARTIFACTS / f"{name}.png", DOCS_SHOTS / f"{name}.png")


def test_uk_numbers_region_hint_mapping_and_rejected_rows(
    page: Any, server: Server, ws: Workspace, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    path = tmp_path / "uk-customers.csv"
    path.write_text(UK_CSV, encoding="utf-8")
    expect(page.locator("#region option:checked")).to_have_text("United States (US, +1)")
    page.set_input_files("#file", str(path))
    page.fill("#list_name", "uk")
    page.click("#preview-btn")
    hint = page.locator("#region-hint")
    expect(hint).to_contain_text(
        "Most numbers look like United Kingdom (+44) local numbers: use GB?"
    )
    expect(page.locator("#preview-table")).to_contain_text("too long")
    _shot(page, "contacts-import-hint")

    page.select_option("#region", label="United Kingdom (GB, +44)")
    page.click("#preview-btn")
    expect(page.locator("#preview-table")).to_contain_text("+447911123456")
    expect(hint).to_be_hidden()
    city = page.locator("#attr-table tr[data-column=City]")
    expect(city.locator("input[type=text]")).to_have_value("city")
    city.locator("input[type=text]").fill("town")
    page.locator("#attr-table tr[data-column=Notes] input[type=checkbox]").uncheck()
    _shot(page, "contacts-import-mapping")

    page.click("#import-btn")
    expect(page.locator("#upload-msg")).to_contain_text("Imported into list", timeout=60_000)
    expect(page.locator("[data-count=New]")).to_have_text("2")
    expect(page.locator("[data-count=Rejected]")).to_have_text("2")
    with page.expect_download() as info:
        page.click("#rejects-csv")
    download = info.value
    assert download.suggested_filename == "uk-customers-rejected-rows.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert [(r["row_number"], r["Name"], r["reason"]) for r in rows] == [
        ("4", "Sam Green", "invalid for its region"),
        ("5", "Lee Park", "contains letters"),
    ]

    page.click("#list-link")
    table = page.locator("#contacts-table")
    expect(table).to_contain_text("+447911123456")
    expect(table).to_contain_text("+447911123457")
    expect(table.locator("tr", has_text="+447911123457")).to_contain_text("(no name)")
    table.locator("a", has_text="Olga Brown").click()
    attributes = page.locator("#contact-attributes")
    expect(attributes).to_contain_text("town")
    expect(attributes).to_contain_text("Leeds")
    expect(attributes).not_to_contain_text("call after 5")

    shown = ws.run("contacts", "show", "+447911123457", "--json").json()
    assert (shown["name"], shown["attributes"]) == ("", {"town": "York"}), shown


UK_LOCAL = "Name,Phone\nAda Hill,07911 223344\nBen Ross,07911 223355\n"


def test_settings_defaults_apply_to_new_imports_and_campaigns(
    page: Any, chromium_browser: Any, server: Server, ws: Workspace, tmp_path: Path
) -> None:
    """Issue 31: an admin sets the default country GB, a pace and a window on the Settings
    page; an import naming no country reads UK local numbers (the CLI), the import form
    offers GB, and a campaign created without [pace] shows the stored pace on its page.
    A viewer sees the settings read-only."""
    from playwright.sync_api import expect

    page.click("nav >> text=Settings")
    expect(page).to_have_url(f"{server.url}/settings")
    expect(page.locator("#d-public")).to_contain_text("not set: the gateway cannot reach")
    expect(page.locator("#d-secret")).to_have_text(re.compile(r"^(set|not set)$"))
    page.select_option("#s-region", "GB")
    page.fill("#s-rate", "7")
    page.fill("#s-dmin", "30")
    page.fill("#s-dmax", "3")  # below the minimum: refused in the form's words
    page.click("#s-save")
    expect(page.locator("#s-msg")).to_contain_text("Random delay: minimum 30 is above maximum 3")
    chosen = {"#s-dmax": "40", "#s-cap": "250", "#s-win-from": "09:00", "#s-win-to": "20:00"}
    for field, value in chosen.items():
        page.fill(field, value)
    page.select_option("#s-tz", "Europe/London")
    page.click("#s-save")
    expect(page.locator("#s-msg")).to_contain_text("Saved")
    _shot(page, "settings", "main")

    # an import naming no country reads the numbers as GB ones (the CLI, no --region)
    path = tmp_path / "uk-local.csv"
    path.write_text(UK_LOCAL, encoding="utf-8")
    done = ws.run("contacts", "import", str(path), "--list", "uk-local", "--json").json()
    assert (done["imported"], done["invalid"], done["region"]) == (2, 0, "GB"), done
    shown = ws.run("contacts", "show", "+447911223344", "--json").json()
    assert shown["name"] == "Ada Hill", shown
    page.click("nav >> text=Contacts")
    expect(page.locator("#region option:checked")).to_have_text("United Kingdom (GB, +44)")
    # the composer starts from the stored pace and window
    page.goto(f"{server.url}/campaigns/new")
    expect(page.locator("#f-rate")).to_have_value("7.0")
    expect(page.locator("#f-cap")).to_have_value("250")
    expect(page.locator("#f-win-from")).to_have_value("09:00")
    expect(page.locator("#f-tz")).to_have_value("Europe/London")

    # a campaign whose file has no [pace] and no window gets the stored ones
    with server.api() as api:
        body = {"name": "Defaults", "list": "uk-local", "message": {"type": "text", "text": "Hi"}}
        answer = api.post("/api/v1/campaigns", json=body)
        assert answer.status_code == 201, answer.text
        campaign_id = answer.json()["id"]
        # a viewer, to read the settings
        viewer = api.post(
            "/api/v1/users", json={"name": "vera", "role": "viewer", "password": "vera password 1"}
        )
        assert viewer.status_code == 201, viewer.text
    page.goto(f"{server.url}/campaigns/{campaign_id}")
    expect(page.locator("dl.pairs")).to_contain_text("7.0/min per sender, cap 250/day")
    expect(page.locator("dl.pairs")).to_contain_text("09:00–20:00 Europe/London")

    context = chromium_browser.new_context(viewport=VIEWPORT)
    try:
        other = context.new_page()
        other.goto(f"{server.url}/settings")
        other.fill("#user", "vera")
        other.fill("#password", "vera password 1")
        other.click("#sign-in")
        expect(other).to_have_url(f"{server.url}/settings")
        expect(other.locator("#settings-form")).to_have_count(0)
        expect(other.locator("#r-region")).to_have_text("GB")
        expect(other.locator("#r-pace")).to_contain_text("7.0/min per sender")
        expect(other.locator("#r-window")).to_have_text("09:00–20:00 Europe/London")
    finally:
        context.close()
